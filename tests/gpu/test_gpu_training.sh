# On a machine with a GPU: the training trajectories of tests/cuda/test_cuda_training.sh with the real
# CUDA backend of this build (hetseq configured --with-cuda) instead of the emulated device. Skipped
# (exit 77) where no GPU is visible.
. "$top_srcdir/tests/lib.sh"
command -v nvidia-smi > /dev/null 2>&1 || skip "no GPU visible: nvidia-smi is not installed"
nvidia-smi -L 2>/dev/null | grep -q '^GPU' || skip "no GPU visible: nvidia-smi lists none"
HETSEQ_EMU="$HETSEQ" exec bash "$top_srcdir/tests/cuda/test_cuda_training.sh"
