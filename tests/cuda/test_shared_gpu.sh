# More ranks than GPUs (docs/gpu.md, "More ranks than GPUs"), on the emulated device: NCCL refuses two
# ranks on one GPU (its stand-in as NCCL 2.28: ncclInvalidUsage, "Duplicate GPU detected"), so hetseq
# must find the sharing before it calls NCCL and move the job's gradients through host memory and MPI.
#   - 2 and 3 ranks on a node of one emulated GPU train, say once (rank 0) which ranks share which GPU
#     and what was chosen, and end equal to 1 rank with update_freq 2 / 3 on the same GPU and to the CPU
#     within 1e-5 (fp32, plain SGD: the backend comparison of test_cuda_training.sh);
#   - 2 ranks on a node of two emulated GPUs take one each (local_rank % GPUs) and keep NCCL.
. "$top_srcdir/tests/lib.sh"
EMU="${HETSEQ_EMU:-$top_builddir/tests/cuda/hetseq_emu}"
[ -x "$EMU" ] || skip "hetseq_emu (the emulated CUDA build) is not built"
CMP="$top_builddir/tests/tools/h5compare"
export HS_CUDA_EMU_SEED="${HS_CUDA_EMU_SEED:-7}"

# run BINARY RANKS DIR ARGS...
run() {
  local bin=$1 np=$2 dir=$3; shift 3
  mpi "$np" "$bin" train "$@" -o checkpoint.save_dir=\"$dir\" >> "$dir.log" 2>&1 || { cat "$dir.log"; fail "training into $dir failed"; }
}
# losses of every train record
losses() { grep '"type": "train"' "$1" | sed 's/.*"num_updates": \([0-9]*\), "loss": \([^,]*\),.*/\1 \2/'; }
same_losses() {
  losses "$1" > a.l; losses "$2" > b.l
  [ -s a.l ] && [ "$(wc -l < a.l)" -eq "$(wc -l < b.l)" ] || fail "$1 and $2 have different numbers of updates"
  paste a.l b.l | awk -v tol="$3" '{ d = $2 - $4; if (d < 0) d = -d; m = $2 < 0 ? -$2 : $2;
      if ($1 != $3 || d > tol * (m > 1e-30 ? m : 1e-30)) { print "update " $1 ": " $2 " vs " $4; bad = 1 } }
    END { exit bad }' || fail "losses of $1 and $2 differ by more than $3 relative"
}

make_tiny_mnist mnist.h5
CNN="$top_srcdir/tests/e2e/small.cfg"
# 6 updates of 24 images, SGD (rounding is not amplified; see test_cuda_training.sh)
cnn="-o data.path=\"mnist.h5\" -o training.max_update=6 -o training.max_epoch=0 -o training.max_sentences=8
  -o optimizer.name=\"sgd\" -o optimizer.lr=0.01 -o optimizer.momentum=0.0"
run "$HETSEQ" 1 cpu "$CNN" $cnn -o training.update_freq=3

# ---- a node of one GPU ---------------------------------------------------------------------------
export HS_CUDA_EMU_DEVICES=1
run "$EMU" 1 one_uf2 "$CNN" $cnn -o training.update_freq=2 -o device=\"cuda\"
run "$EMU" 1 one_uf3 "$CNN" $cnn -o training.update_freq=3 -o device=\"cuda\"
run "$EMU" 2 shared2 "$CNN" $cnn -o training.update_freq=1 -o device=\"cuda\"
run "$EMU" 3 shared3 "$CNN" $cnn -o training.update_freq=1 -o device=\"cuda\"
for r in 0 1; do
  grep -q "device = cuda: rank $r (local rank $r) uses GPU 0 of 1 (.*PCI 0000:01:00.0)" shared2.log ||
    { cat shared2.log; fail "rank $r does not say that it uses GPU 0 (PCI 0000:01:00.0)"; }
done
grep -q "^| ranks 0, 1 share one GPU (PCI 0000:01:00.0 on " shared2.log || { cat shared2.log; fail "rank 0 does not say which ranks share the GPU"; }
grep -q "^| ranks 0, 1, 2 share one GPU (PCI 0000:01:00.0 on " shared3.log || { cat shared3.log; fail "3 ranks: no line naming the sharing ranks"; }
grep -q "^| 2 of 2 GPU ranks share 1 GPU(s) and NCCL refuses two ranks on one GPU: .*(host-staged)" shared2.log ||
  { cat shared2.log; fail "rank 0 does not say what it chose for the shared GPU"; }
[ "$(grep -c 'share one GPU' shared2.log)" -eq 1 ] || { cat shared2.log; fail "the sharing is said more than once"; }
grep -q "rank-ordered sums" shared2.log || { cat shared2.log; fail "the gradients do not take the host-staged path"; }
grep -q "NCCL WARN\|ncclCommInitRank" shared2.log && { cat shared2.log; fail "NCCL was called for ranks that share a GPU"; }
"$CMP" one_uf2/checkpoint_last.h5 shared2/checkpoint_last.h5 1e-5 || fail "2 ranks on one GPU != 1 rank x update_freq 2"
"$CMP" one_uf3/checkpoint_last.h5 shared3/checkpoint_last.h5 1e-5 || fail "3 ranks on one GPU != 1 rank x update_freq 3"
"$CMP" cpu/checkpoint_last.h5 shared3/checkpoint_last.h5 1e-5 || fail "3 ranks on one GPU != 1 CPU rank"
same_losses one_uf2/metrics.jsonl shared2/metrics.jsonl 1e-5
same_losses cpu/metrics.jsonl shared3/metrics.jsonl 1e-5
echo "ok: 2 and 3 ranks on one emulated GPU train host-staged, = 1 rank x update_freq within 1e-5, said once"

# ---- a node of two GPUs: one each, NCCL --------------------------------------------------------------
export HS_CUDA_EMU_DEVICES=2
run "$EMU" 2 two_gpus "$CNN" $cnn -o training.update_freq=1 -o device=\"cuda\"
grep -q "device = cuda: rank 1 (local rank 1) uses GPU 1 of 2 (.*PCI 0000:02:00.0)" two_gpus.log ||
  { cat two_gpus.log; fail "rank 1 does not take GPU 1 (local_rank % GPUs)"; }
grep -q "(NCCL)" two_gpus.log || { cat two_gpus.log; fail "2 ranks on 2 GPUs do not use NCCL"; }
grep -q "share one GPU" two_gpus.log && { cat two_gpus.log; fail "2 ranks on 2 GPUs are said to share one"; }
"$CMP" one_uf2/checkpoint_last.h5 two_gpus/checkpoint_last.h5 1e-5 || fail "2 ranks on 2 GPUs != 1 rank x update_freq 2"
echo "ok: 2 ranks on 2 emulated GPUs: one GPU each, NCCL"
# 4 ranks on 2 GPUs: ranks 0 and 2 share GPU 0, 1 and 3 share GPU 1 (local_rank % 2)
run "$EMU" 4 four_on_two "$CNN" $cnn -o training.update_freq=1 -o training.max_update=2 -o device=\"cuda\"
grep -q "^| ranks 0, 2 share one GPU (PCI 0000:01:00.0 on " four_on_two.log &&
  grep -q "^| ranks 1, 3 share one GPU (PCI 0000:02:00.0 on " four_on_two.log ||
  { cat four_on_two.log; fail "4 ranks on 2 GPUs: the pairs that share are not named"; }
echo "ok: 4 ranks on 2 emulated GPUs: the two pairs named"
pass
