# The PyTorch cross-check of Transformer-XL (tests/ref/test_txl_vs_torch.py: loss and every gradient over
# consecutive segments with memory, adaptive softmax on/off, div_val 1/2, pre_lnorm, same_length
# evaluation) with the model on the CUDA backend (the emulated device): a user's device = "cuda"
# Transformer-XL is PyTorch's model.
. "$top_srcdir/tests/lib.sh"
need_python torch h5py
[ -x "$top_builddir/tests/cuda/ref/txl_ref_grads" ] || skip "the emulated CUDA build of the reference driver is missing"
export HS_TEST_DEVICE=cuda HS_REF_HELPER_DIR="$top_builddir/tests/cuda/ref" HS_CUDA_EMU_SEED="${HS_CUDA_EMU_SEED:-3}"
"$PYTHON_TORCH" "$top_srcdir/tests/ref/test_txl_vs_torch.py" > txl_torch_on_cuda.log 2>&1; rc=$?
cat txl_torch_on_cuda.log
[ $rc -eq 0 ] || fail "test_txl_vs_torch on the CUDA backend (exit $rc)"
pass
