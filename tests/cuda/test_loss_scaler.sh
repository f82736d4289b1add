# A user trains the MNIST CNN with device = "cuda" and precision = "fp16" (here on the emulated CUDA
# device, tests/cuda_emu/), where the loss scaler is on by default: the checks of
# tests/mpi/test_loss_scaler.sh on 2 ranks (an overflow on rank 1 at update 5 skips exactly that update
# on every rank, the scale follows GradScaler's rule, a resumed run is bit-identical), with micro-batches
# of 8 samples to keep the emulated runs short.
. "$top_srcdir/tests/lib.sh"
LS_HETSEQ="${HETSEQ_EMU:-$top_builddir/tests/cuda/hetseq_emu}" LS_DEVICE=cuda LS_EXTRA="-o training.max_sentences=8"
[ -x "$LS_HETSEQ" ] || skip "hetseq_emu (the emulated CUDA build) is not built"
export HS_CUDA_EMU_SEED="${HS_CUDA_EMU_SEED:-7}"
export HS_CUDA_EMU_DEVICES=2 # a GPU per rank: NCCL (ranks sharing one: tests/cuda/test_shared_gpu.sh)
. "$top_srcdir/tests/mpi/loss_scaler_lib.sh"
suite cuda-fp16 fp16 auto
pass
