# The tensor-core code does not depend on the fragments' element layout, which a GPU does not specify
# (CUDA C++ Programming Guide, "Warp Matrix Functions"; docs/gpu-emulation.md): a kernel that reads a
# fragment's elements by position, or copies one kind of fragment into another element by element,
# could pass on the emulated device's row-major layout and be wrong on a GPU. Under
# HS_CUDA_EMU_WMMA_LAYOUT=shuffled each kind of fragment (A, B, row- or column-major; the accumulator)
# holds its elements in another permutation:
#   - the emulator's own WMMA tests pass there, and see the permutation;
#   - the warp tile products (tests/cuda/test_tile_mma: the register accumulators, their row scaling by
#     the online softmax) pass there;
#   - the fused attentions (BERT and Transformer-XL) pass the op conformance against the CPU backend at
#     bf16, fp16 and tf32, their tensor-core precisions;
#   - a small BERT and a small Transformer-XL trained in bf16 under either layout end with checkpoints
#     identical bit for bit: the products sum in the same order whatever the layout.
. "$top_srcdir/tests/lib.sh"
EMU="${HETSEQ_EMU:-$top_builddir/tests/cuda/hetseq_emu}"
[ -x "$EMU" ] || skip "hetseq_emu (the emulated CUDA build) is not built"
CMP="$top_builddir/tests/tools/h5compare"

HS_CUDA_EMU_WMMA_LAYOUT=shuffled "$top_builddir/tests/cuda_emu/test_emu_kernels" > emu.log 2>&1 ||
  { cat emu.log; fail "the emulator's kernel tests under the shuffled layout"; }
grep -q "wmma fragments hold their elements in the shuffled layout" emu.log ||
  { cat emu.log; fail "HS_CUDA_EMU_WMMA_LAYOUT=shuffled did not shuffle the fragments"; }
HS_CUDA_EMU_WMMA_LAYOUT=shuffled "$top_builddir/tests/cuda/test_tile_mma" > tile.log 2>&1 ||
  { cat tile.log; fail "the warp tile products under the shuffled layout"; }
echo "ok: the emulator's WMMA tests and the warp tile products under the shuffled layout"

for p in bf16 fp16 tf32; do
  for g in flash_attention rel_attention; do
    HS_CUDA_EMU_WMMA_LAYOUT=shuffled "$top_builddir/tests/cuda/test_op_conformance" $g $p > conf.log 2>&1 ||
      { cat conf.log; fail "op conformance $g $p under the shuffled layout"; }
    echo "ok: op conformance $g $p, shuffled layout: $(tail -1 conf.log)"
  done
done

# both NAME ARGS...: train under each layout, then the checkpoints bit for bit
both() {
  local name=$1 layout; shift
  for layout in rowmajor shuffled; do
    HS_CUDA_EMU_WMMA_LAYOUT=$layout OMP_NUM_THREADS=1 mpi 1 "$EMU" train "$@" -o device=\"cuda\" \
      -o precision=\"bf16\" -o checkpoint.save_dir=\"${name}_$layout\" > "${name}_$layout.log" 2>&1 ||
      { cat "${name}_$layout.log"; fail "$name under the $layout layout"; }
  done
  grep -Eq "attention fused|fused attention" "${name}_rowmajor.log" || { cat "${name}_rowmajor.log"; fail "$name: the attention was not fused"; }
  "$CMP" "${name}_rowmajor/checkpoint_last.h5" "${name}_shuffled/checkpoint_last.h5" 0 > "$name.cmp" ||
    { cat "$name.cmp"; fail "$name: the two layouts trained to different checkpoints"; }
  echo "ok: $name bf16 under both layouts: $(tail -1 "$name.cmp")"
}

if [ -n "${PYTHON_TORCH:-}" ]; then
  "$PYTHON_TORCH" "$top_srcdir/tests/ref/make_bert_shards.py" shards --prefix wiki --split training \
    --rows 16 --seq-len 32 --max-pred 5 --vocab 1000 --seed 3 > /dev/null || fail "writing training shards"
  "$PYTHON_TORCH" "$top_srcdir/tests/ref/make_bert_shards.py" shards --prefix wiki --split test \
    --rows 8 --seq-len 32 --max-pred 5 --vocab 1000 --seed 4 > /dev/null || fail "writing test shards"
  both bert "$top_srcdir/tests/e2e/bert_small.cfg" -o training.max_update=2 -o training.disable_validation=true
  . "$top_srcdir/tests/ref/txl_corpus.sh"
  make_txl_corpus txl_data 600
  HS_TEST_DEVICE=cuda txl_experiment txl.cfg txl_data ""
  both txl txl.cfg -o training.max_update=2 -o training.disable_validation=true
else
  echo "training part skipped: no Python with h5py to write the test data"
fi
pass
