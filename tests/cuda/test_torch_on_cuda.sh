# The PyTorch cross-checks of the CNN and of BERT (loss and every parameter's gradient against
# torch's, tests/ref/test_cnn_vs_torch.py and test_bert_vs_torch.py) run again with the models on the
# CUDA backend (the emulated device): a user's device = "cuda" model is PyTorch's model.
. "$top_srcdir/tests/lib.sh"
need_python torch h5py
[ -x "$top_builddir/tests/cuda/ref/cnn_ref_grads" ] || skip "the emulated CUDA build of the reference drivers is missing"
export HS_TEST_DEVICE=cuda HS_REF_HELPER_DIR="$top_builddir/tests/cuda/ref" HS_CUDA_EMU_SEED="${HS_CUDA_EMU_SEED:-3}"
for t in test_cnn_vs_torch test_bert_vs_torch; do
  "$PYTHON_TORCH" "$top_srcdir/tests/ref/$t.py" > "$t.log" 2>&1; rc=$?
  cat "$t.log"
  [ $rc -eq 0 ] || fail "$t on the CUDA backend (exit $rc)"
done
pass
