# A user profiles chosen updates (docs/gpu.md, "Profiling chosen updates"): HETSEQ_PROFILE_UPDATES=FIRST-LAST
# starts the CUDA profiler's range (cudaProfilerStart) before update FIRST and ends it (cudaProfilerStop)
# after update LAST, the range `nsys profile --capture-range=cudaProfilerApi` and `ncu --profile-from-start
# off` record. On the emulated device, which says when each is called and what was launched in between:
#   - the range opens after update 2 and closes after update 4, once each; with CUDA graphs the updates
#     are launched as graphs inside it, without them as kernels, and two updates launch twice the
#     kernels of one (the same shapes);
#   - a range past the run's end closes when training ends;
#   - the training is the same, bit for bit, with the range and without;
#   - on the CPU the variable is ignored, said once; a value that is not N or FIRST-LAST (1 <= FIRST <=
#     LAST) ends every rank of a 2-rank job with a message naming it.
. "$top_srcdir/tests/lib.sh"
EMU="${HETSEQ_EMU:-$top_builddir/tests/cuda/hetseq_emu}"
[ -x "$EMU" ] || skip "hetseq_emu (the emulated CUDA build) is not built"
CMP="$top_builddir/tests/tools/h5compare"
export HS_CUDA_EMU_SEED="${HS_CUDA_EMU_SEED:-7}"
make_tiny_mnist mnist.h5
CNN="$top_srcdir/tests/e2e/small.cfg"
args=(-o data.path=\"mnist.h5\" -o training.max_update=6 -o training.max_epoch=0 -o training.max_sentences=8
  -o log.interval=1)
# train DIR RANGE ARGS...: one emulated-CUDA rank, HETSEQ_PROFILE_UPDATES=RANGE ("" unset), output in DIR.log.
# The rank runs as an MPI singleton (no mpirun), so that its stdout (the log) and its stderr (the emulator's
# profiler lines) are one file written in program order: mpirun forwards the two streams through separate
# pipes, and their lines may interleave in any order.
train() {
  local dir=$1 range=$2; shift 2
  (if [ -n "$range" ]; then export HETSEQ_PROFILE_UPDATES=$range; else unset HETSEQ_PROFILE_UPDATES; fi
   timeout -k 5 "${HS_MPI_LIMIT:-300}" "$EMU" train "$CNN" "${args[@]}" -o device=\"cuda\" -o checkpoint.save_dir=\"$dir\" "$@") > "$dir.log" 2>&1 ||
    { cat "$dir.log"; fail "training into $dir failed"; }
}
# line NUMBER of the first line of FILE matching the regular expression
at() { grep -n -m1 -E -- "$2" "$1" | cut -d: -f1; }
# launches FILE: "KERNELS GRAPHS" of the emulator's cudaProfilerStop line (exactly one)
launches() {
  [ "$(grep -c 'hs_cuda_emu: cudaProfilerStart$' "$1")" = 1 ] || { cat "$1"; fail "$1: not one cudaProfilerStart"; }
  [ "$(grep -c 'hs_cuda_emu: cudaProfilerStop:' "$1")" = 1 ] || { cat "$1"; fail "$1: not one cudaProfilerStop"; }
  sed -n 's/^hs_cuda_emu: cudaProfilerStop: \([0-9]*\) kernel launch(es), \([0-9]*\) graph launch(es).*/\1 \2/p' "$1"
}
# in_order FILE PATTERN...: each pattern's first line comes after the one before
in_order() {
  local f=$1 prev=0 n; shift
  for p in "$@"; do
    n=$(at "$f" "$p")
    [ -n "$n" ] && [ "$n" -gt "$prev" ] || { cat "$f"; fail "$f: /$p/ missing or out of order"; }
    prev=$n
  done
}

# ---- the range around updates 3 and 4, with and without CUDA graphs ---------------------------------
train graphs 3-4
in_order graphs.log 'profiler range holds updates 3 to 4' 'num_updates=2,' 'hs_cuda_emu: cudaProfilerStart$' \
  'profiler range started before update 3' 'num_updates=3,' 'hs_cuda_emu: cudaProfilerStop:' \
  'profiler range ended after update 4' 'num_updates=4,' 'num_updates=5,'
read -r k g <<< "$(launches graphs.log)"
[ "${g:-0}" -gt 0 ] || { cat graphs.log; fail "cuda_graphs = true: no graph launched inside the range"; }
echo "ok: cuda_graphs = true: the range holds updates 3-4: $k kernel launch(es), $g graph launch(es)"

train eager 3-4 -o cuda_graphs=false
in_order eager.log 'num_updates=2,' 'hs_cuda_emu: cudaProfilerStart$' 'num_updates=3,' 'hs_cuda_emu: cudaProfilerStop:' \
  'num_updates=5,'
read -r k2 g2 <<< "$(launches eager.log)"
train eager5 5 -o cuda_graphs=false
read -r k1 g1 <<< "$(launches eager5.log)"
[ "$g2" = 0 ] && [ "$g1" = 0 ] || fail "cuda_graphs = false: graphs launched in the range ($g2, $g1)"
[ "$k1" -gt 0 ] && [ "$k2" = $((2 * k1)) ] ||
  fail "cuda_graphs = false: updates 3-4 launched $k2 kernels, update 5 alone $k1: expected twice as many"
echo "ok: cuda_graphs = false: update 5 alone launches $k1 kernels inside the range, updates 3-4 $k2"

# ---- a range past the end; the same training with the range and without -------------------------------
train late 5-99 -o cuda_graphs=false
in_order late.log 'profiler range started before update 5' 'num_updates=5,' 'hs_cuda_emu: cudaProfilerStop:' \
  'profiler range ended with the training'
train plain "" -o cuda_graphs=false
"$CMP" plain/checkpoint_last.h5 eager/checkpoint_last.h5 0 || fail "the training with the range differs from the one without"
"$CMP" plain/checkpoint_last.h5 late/checkpoint_last.h5 0 || fail "the training with the range 5-99 differs from the one without"
echo "ok: a range past the run's end closes with the training; the checkpoints equal a run without a range"

# ---- the CPU; values that are not a range -------------------------------------------------------------
HETSEQ_PROFILE_UPDATES=2-3 mpi 1 "$HETSEQ" train "$CNN" "${args[@]}" -o device=\"cpu\" -o checkpoint.save_dir=\"cpu\" \
  > cpu.log 2>&1 || { cat cpu.log; fail "the CPU run with HETSEQ_PROFILE_UPDATES failed"; }
grep -q 'HETSEQ_PROFILE_UPDATES=2-3: the cpu backend has no profiler range; ignored' cpu.log ||
  { cat cpu.log; fail "the CPU run does not say that it ignores HETSEQ_PROFILE_UPDATES"; }
grep -q 'num_updates=6,' cpu.log || { cat cpu.log; fail "the CPU run did not train 6 updates"; }
for bad in 0 4-2 abc 3- -2 "3-4x"; do
  (export HETSEQ_PROFILE_UPDATES=$bad
   expect_error "HETSEQ_PROFILE_UPDATES=$bad" \
     "HETSEQ_PROFILE_UPDATES=\"$bad\" is not an update or a range of updates: write N or FIRST-LAST" \
     mpi 2 "$HETSEQ" train "$CNN" "${args[@]}" -o device=\"cpu\" -o checkpoint.save_dir=\"bad\") || exit 1
done
echo "ok: the CPU ignores the range and says so; 6 values that are not a range end both ranks with a message"
pass
