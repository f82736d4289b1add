# A user trains BERT with the gradient all-reduce in buckets of 1 MiB, 25 MiB, or one all-reduce after
# backward (distributed.bucket_cap_mb = 0): on 2 and 3 CPU ranks the final checkpoints' parameters are
# bit-identical whatever the cap (every element is the same rank-ordered fp32 sum), and so they are on
# the emulated CUDA device on 2 ranks (NCCL: g0 + g1) and in a job of one GPU and one CPU rank. A 16-bit
# transit (allreduce_dtype = "bf16", "fp16") trains and stays near the fp32 run, on the CPU and on CUDA
# (where 2 ranks are bucketing-invariant too).
. "$top_srcdir/tests/lib.sh"
need_python h5py numpy
CFG="$top_srcdir/tests/e2e/bert_small.cfg"
CMP="$top_builddir/tests/tools/h5compare"
make_bert_small_shards 37,50,13
# 128 wide: about 2 MiB of gradients, so a 1 MiB cap cuts several buckets. 2 updates: the first fills
# and reduces the buckets, the second reuses them (their layout, streams and host copies) after a step;
# a bucket that sums the wrong slice or the wrong order changes bits in the first update already.
wide="-o model.hidden_size=128 -o model.intermediate_size=512 -o training.max_update=2 -o training.validate_interval_updates=0"
run() { # binary ranks dir extra...
  local bin=$1 np=$2 dir=$3; shift 3
  mpi "$np" "$bin" train "$CFG" $wide -o checkpoint.save_dir=\"$dir\" "$@" > "$dir.log" 2>&1 \
    || { cat "$dir.log"; fail "training on $np rank(s) into $dir failed"; }
}
for np in 2 3; do
  for cap in 0 1 25; do run "$HETSEQ" $np "cpu${np}_cap$cap" -o distributed.bucket_cap_mb=$cap; done
  grep -Eq "gradient all-reduce: [2-9] bucket\(s\) of at most 1 MiB" "cpu${np}_cap1.log" \
    || { cat "cpu${np}_cap1.log"; fail "a 1 MiB cap did not cut several buckets"; }
  for cap in 1 25; do
    "$CMP" "cpu${np}_cap0/checkpoint_last.h5" "cpu${np}_cap$cap/checkpoint_last.h5" 0 \
      || fail "$np ranks: bucket_cap_mb $cap is not bit-identical to one all-reduce"
  done
done
# "Near": the whole model within 1e-4 relative (a 16-bit transit rounds each gradient element by at most
# 2^-9 or 2^-12 relative; 2 updates here give a few 1e-6), and no element further than 4e-3 of the
# largest parameter. Per element no closer bound holds: where the ranks' parts of a gradient element
# nearly cancel, their rounded sum can have any relative error, even the other sign, and LAMB moves an
# element by up to about lr·trust ratio = 2e-3 per update, so 2 updates can differ by up to 4e-3 there.
# A bucket reduced wrongly or not at all moves the whole model by far more than 1e-4.
near16="1e-4 4e-3"
for dt in bf16 fp16; do
  run "$HETSEQ" 2 cpu2_$dt -o distributed.bucket_cap_mb=1 -o distributed.allreduce_dtype=\"$dt\"
  grep -q "$dt values in transit" cpu2_$dt.log || fail "the $dt transit is not logged"
  "$CMP" cpu2_cap0/checkpoint_last.h5 cpu2_$dt/checkpoint_last.h5 $near16 || fail "$dt transit strays from fp32"
  "$CMP" cpu2_cap0/checkpoint_last.h5 cpu2_$dt/checkpoint_last.h5 0 > /dev/null && fail "$dt transit changed nothing"
done

EMU="${HETSEQ_EMU:-$top_builddir/tests/cuda/hetseq_emu}"
if [ -x "$EMU" ]; then
  export HS_CUDA_EMU_SEED="${HS_CUDA_EMU_SEED:-7}"
  export HS_CUDA_EMU_DEVICES=2 # one emulated GPU per rank: NCCL (ranks sharing one GPU would be host-staged)
  for cap in 0 1; do run "$EMU" 2 "cuda2_cap$cap" -o device=\"cuda\" -o distributed.bucket_cap_mb=$cap; done
  grep -q "(NCCL)" cuda2_cap1.log || { cat cuda2_cap1.log; fail "the CUDA run does not use NCCL buckets"; }
  "$CMP" cuda2_cap0/checkpoint_last.h5 cuda2_cap1/checkpoint_last.h5 0 \
    || fail "CUDA, 2 ranks: bucket_cap_mb 1 is not bit-identical to one all-reduce"
  for cap in 0 1; do
    run "$EMU" 2 "cuda2_bf16_cap$cap" -o device=\"cuda\" -o distributed.bucket_cap_mb=$cap -o distributed.allreduce_dtype=\"bf16\"
  done
  "$CMP" cuda2_bf16_cap0/checkpoint_last.h5 cuda2_bf16_cap1/checkpoint_last.h5 0 \
    || fail "CUDA, 2 ranks, bf16 transit: bucket_cap_mb 1 is not bit-identical to one all-reduce"
  "$CMP" cuda2_cap0/checkpoint_last.h5 cuda2_bf16_cap1/checkpoint_last.h5 $near16 || fail "CUDA: bf16 transit strays from fp32"
  "$CMP" cuda2_cap0/checkpoint_last.h5 cuda2_bf16_cap1/checkpoint_last.h5 0 > /dev/null && fail "CUDA: bf16 transit changed nothing"
  # a mixed job (one emulated-GPU rank beside a CPU rank): the GPU rank copies its gradient to host memory
  # and joins the CPU ranks' rank-ordered sums, so again the cap changes nothing, in fp32 and in fp16
  mixed() { # dir extra...
    local dir=$1; shift
    timeout -k 5 300 "$MPIRUN" --allow-run-as-root --oversubscribe --mca btl self,vader \
      -np 1 "$EMU" train "$CFG" $wide -o device=\"cuda\" -o checkpoint.save_dir=\"$dir\" "$@" : \
      -np 1 "$EMU" train "$CFG" $wide -o device=\"cpu\" -o checkpoint.save_dir=\"$dir\" "$@" > "$dir.log" 2>&1 \
      || { cat "$dir.log"; fail "the mixed job into $dir failed"; }
  }
  for dt in fp32 fp16; do
    for cap in 0 1; do mixed "mixed_${dt}_cap$cap" -o distributed.bucket_cap_mb=$cap -o distributed.allreduce_dtype=\"$dt\"; done
    grep -q "a mixed job (CPU and GPU ranks)" "mixed_${dt}_cap1.log" || { cat "mixed_${dt}_cap1.log"; fail "not a mixed job"; }
    "$CMP" "mixed_${dt}_cap0/checkpoint_last.h5" "mixed_${dt}_cap1/checkpoint_last.h5" 0 \
      || fail "mixed job, $dt transit: bucket_cap_mb 1 is not bit-identical to one all-reduce"
  done
else
  echo "note: hetseq_emu is not built: the CUDA runs are skipped"
fi
pass
