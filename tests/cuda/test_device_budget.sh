#!/bin/sh
# The device-op budgets (issue: "a device-op budget CI enforces"; docs/gpu.md, "The device-operation
# ledger"). A user trains BERT and Transformer-XL with device = "cuda" (here the emulated device) and
# reads device_ops, device_bytes and device_peak_bytes in every train record; HETSEQ_CUDA_LEDGER=1
# prints the per-op table. This test fits, per model and precision, the device ops of one update of one
# micro-batch as  ops = a·layers + b  from two layer counts (the per-layer op sequence is the same in
# every layer, so the fit is exact), prints a and b beside the target, and fails when either exceeds its
# budget. The budgets are ratchets: today's measurement rounded up a little. Lower a budget when a change
# lowers the count (never raise it to let one through); the targets are where the GPU work is headed.
# The counts depend on the layer count, and with the unfused attention (attention = "unfused") on the
# heads and the batch, not on the widths (BERT runs the fused attention here, CUDA's default): the models here have
# BERT-large's 16 heads with a batch of 16 and TXL-base's 8 heads with a batch of 8, at tiny widths.
# Also: the bf16 GEMM-operand conversions per layer are bounded (a per-GEMM conversion of the weights
# must not come back once weights are kept in 16 bits once per update), every kernel of both models
# gives its bytes, and the CPU backend writes no device_* fields.
. "$top_srcdir/tests/lib.sh"
EMU="${HETSEQ_EMU:-$top_builddir/tests/cuda/hetseq_emu}"
[ -x "$EMU" ] || skip "hetseq_emu (the emulated CUDA build) is not built"
need_python h5py numpy
make_bert_small_shards 37,50,13
. "$top_srcdir/tests/ref/txl_corpus.sh"
make_txl_corpus txl_data 600

# ---- budgets: device ops per layer (a) and per micro-batch (b), one micro-batch per update ----------
# Every per-micro-batch count below includes one copy per update that CUDA graphs need: the graph
# slots' mirror (the update's per-update scalars: dropout keys, loss scales, the step's factors) copied
# to the device before the graph is launched (docs/gpu.md, "CUDA graphs"; the counts are the second
# update's, the first captured one). With cuda_graphs = false each is one less.
# Ratchets: each budget is today's measured count, rounded up a little; a change that adds device ops
# fails here, and a change that removes some lowers the budget with it, towards the issue's target.
# Measured with cuBLASLt bias/bias-gradient epilogues, the fused dropout + residual + LayerNorm, one
# strided-batched call per attention product and the weights' 16-bit copy (docs/gpu.md).
# BERT bf16 (measured 24 per layer, 75 per micro-batch since the fused attention forward writes q|k|v's
# 16-bit copy for the backward as it reads q|k|v (qkv16_out), so the layer's store of it is gone; 25 per
# layer under the 16-bit dataflow without that: the backward widens
# no stored copy of a layer (the input, h1 and the context exist for its products in 16 bits alone, and
# the fused attention backward reads the context's twin), so its convert_halves op is gone; 26 per
# layer, 74 per micro-batch with the fused attention, the default on CUDA,
# writing the context's and the q|k|v gradient's 16-bit twins itself, a LayerNorm backward of two
# kernels and the backward's four widening loads of a layer's stored copies as one convert_halves op;
# 29 + 74 with four from_half; 31 + 76 with three LayerNorm backward kernels (the parameter gradients' partial sums a kernel of their own); 34 + 76 when
# the context was converted after the attention and the q|k|v gradient's two products converted it;
# 50 + 75 before the producers
# wrote 16-bit activations at all; 74 + 75 with the unfused attention, 358 + 90 when every GEMM converted
# both operands and the attention made one call per head). No activation operand is converted any more
# (below); none of the 24 is the 16-bit storage's (its store of q|k|v went into the attention forward;
# the backward's widening load, while there was one, widened only the context once the fused attention
# backward read the stored 16-bit q|k|v itself (qkv16), and the FFN pre-activation's widening went when
# the GELU backward read its copy).
# Target (issue): 30 per layer, 100 per micro-batch.
BERT_BF16_PER_LAYER=24
BERT_BF16_PER_MICRO_BATCH=75
BERT_BF16_TARGET="30 per layer, 100 per micro-batch"
# BERT tf32 (measured 24 per layer, 57 per micro-batch with the fused attention and the LayerNorm
# backward of two kernels; 26 + 59 with three; 36 + 59 unfused; it was
# 132 + 66, where a real H200 counted 3223 launches per update of 24 layers). Target: the bf16 target.
BERT_TF32_PER_LAYER=24
BERT_TF32_PER_MICRO_BATCH=58
BERT_TF32_TARGET="30 per layer, 100 per micro-batch"
# Transformer-XL bf16 (measured 34 per layer, 126 per micro-batch: the fused relative attention,
# attention = "auto" on CUDA, one kernel forward and five backward for what the unfused op did in 40
# launches; the memory concatenation as two pitched copies (copy_rows) and ∂h_l's memory-shifted rows as
# one pitched add (add_rows) where per-column loops made 2b and b ops; the 16-bit twins of ctx and u
# (rounded into their stored copies before the o and FFN2 products instead of after the layer), of pos'
# (once per pass for every layer's r products: the +1 per micro-batch) and of ∂u, ∂qkv (once for their
# two products each); ReLU and the FFN dropout as one op each way (relu_dropout_forward/backward, which
# write u's and ∂u's twins); the LayerNorm backward in two kernels, not three; the fused attention writing
# the twins of ctx (its stored copy), ∂qkv and ∂r itself, and one convert_halves op per layer each way:
# forward the layer before's q|k|v and r stores with the q|k|v product input's twin (cat16; layer 0's also
# rounds pos', the last layer's store is the per-micro-batch op pos' gave up), backward the four widening
# loads with that input's twin again for the weight gradient: no GEMM-operand conversion left in a layer,
# 2 ops over tf32's 32. It was 43 + 126 before that, 45 + 126 before the two-kernel LayerNorm backward,
# 49 + 126 before relu_dropout, 55 + 125 before the twins, 62 + 125 before add_rows, 91 + 126 before
# copy_rows, 127 + 126 unfused, 265 + 148 before that). Target, derived as
# BERT's: one fused op per GEMM with its epilogue (qkv, r, o, 2 FFN: 5 forward, 10 backward), the relative
# attention as one strided-batched call per product (4 forward, 8 backward), LayerNorm/dropout fused
# (2 + 2): about 35 per layer; the adaptive softmax's clusters and the memory update in the
# per-micro-batch part: 150.
# Measured 125 per micro-batch (tf32 84) since the clusters of the adaptive embedding and softmax are
# padded to power-of-two buckets on CUDA (docs/gpu.md, "CUDA graphs"): the 2 fewer are not per-update
# ops but two zero-fills (cudaMemsetAsync) of the clusters' workspaces, which the second update grew
# when its token counts were larger than the first's; the buckets hold them from the first update on.
# The budgets stay (a bucket may still grow in a later update: a one-time allocation, not the op count).
# Measured 117 per micro-batch since the adaptive softmax's backward products read dlogits' 16-bit twin,
# written by the loss's backward (log_softmax_nll_backward's dlogits16), instead of converting it: 8
# GEMM-operand conversions fewer (two products each of the head's two column blocks and of two tails);
# the head's bias gradients ride on its weight-gradient products (gemm_wgrad_bgrad) with one small add
# each, as many ops as the bias_grad kernels they replace. Measured 116 since the q|k|v and r products
# write their 16-bit copies alone, which the fused attention reads as twins: the last layer's store after
# the forward has nothing left to round (its convert_halves op is gone). Measured 114 since the head's
# two column blocks add their biases in their products' epilogues (gemm_bias), not in two add_bias passes.
TXL_BF16_PER_LAYER=34
TXL_BF16_PER_MICRO_BATCH=116
TXL_BF16_TARGET="35 per layer, 150 per micro-batch"
# Transformer-XL tf32 (measured 32 per layer, 82 per micro-batch since the head's biases ride on its
# products (gemm_bias); 32 + 84 before, 34 + 85 with the LayerNorm backward in
# three kernels, 36 + 85 before relu_dropout, 43 + 85 before add_rows, 64 + 86 before
# copy_rows, 80 + 86 unfused, 125 + 88 before that)
TXL_TF32_PER_LAYER=32
TXL_TF32_PER_MICRO_BATCH=84
TXL_TF32_TARGET="35 per layer, 150 per micro-batch"

# ---- the bf16 GEMM-operand conversions (to_half_kernel (GEMM operand)) per BERT layer per update ------
# A layer makes 12 GEMMs (4 dense layers forward, data and weight gradient; the fused attention's
# products are inside its own kernels, docs/gpu.md "Fused attention"; the unfused one added 6 GEMMs
# with 12 conversions). When every GEMM converted both operands that was 36 per layer (18 GEMMs); the
# weights are now read from the 16-bit copy the optimizer writes once per update (docs/gpu.md, "The
# parameters' 16-bit copy"), and every activation and gradient operand of a layer from the 16-bit twin
# its producer writes (docs/gpu.md, "The activations' 16-bit twins"; the fused attention writes the
# context's and the q|k|v gradient's): 0 per layer (measured; 16 before the twins, 2 before the fused
# attention wrote its own), and the heads' 16 per update, 0.05 per GEMM over the 24-layer model. A
# conversion coming back (a per-GEMM weight conversion: 24 per layer; an unbound activation) fails here.
# BERT_WEIGHTS_PER_LAYER is the target the issue set: at most one per weight tensor per update.
BERT_BF16_CONVERSIONS_PER_LAYER=0
BERT_BF16_CONVERSIONS_PER_GEMM=0.06
BERT_WEIGHTS_PER_LAYER=6

BERT="$top_srcdir/tests/e2e/bert_small.cfg"
HS_TEST_DEVICE=cuda txl_experiment txl.cfg txl_data ""
# bert NAME PRECISION LAYERS / txl NAME PRECISION LAYERS: 2 updates of one micro-batch, the per-op table
# in NAME.log, the records in NAME/metrics.jsonl
bert() {
  HETSEQ_CUDA_LEDGER=1 OMP_NUM_THREADS=1 mpi 1 "$EMU" train "$BERT" -o device=\"cuda\" -o precision=\"$2\" \
    -o model.num_hidden_layers="$3" -o model.hidden_size=32 -o model.num_attention_heads=16 \
    -o model.intermediate_size=32 -o training.max_sentences=16 -o training.update_freq=1 -o training.max_update=2 \
    -o training.disable_validation=true -o checkpoint.no_save=true -o checkpoint.save_dir=\"$1\" > "$1.log" 2>&1 ||
    { cat "$1.log"; fail "BERT $2 with $3 layers failed on CUDA"; }
}
txl() {
  HETSEQ_CUDA_LEDGER=1 OMP_NUM_THREADS=1 mpi 1 "$EMU" train txl.cfg -o precision=\"$2\" -o txl.n_layer="$3" \
    -o txl.n_head=8 -o txl.d_head=4 -o txl.d_model=32 -o txl.d_inner=64 -o txl.batch_size=8 \
    -o training.update_freq=1 -o training.max_update=2 -o log.interval=1 -o training.disable_validation=true \
    -o checkpoint.no_save=true -o checkpoint.save_dir=\"$1\" > "$1.log" 2>&1 ||
    { cat "$1.log"; fail "Transformer-XL $2 with $3 layers failed on CUDA"; }
}
# field NAME KEY: KEY of the last train record of NAME (the second update: steady state, no first-use
# allocations)
field() { grep '"type": "train"' "$1/metrics.jsonl" | tail -1 | sed -n "s/.*\"$2\": \([0-9]*\).*/\1/p"; }
# per_update NAME ROW: calls per update of ROW in NAME's table
per_update() {
  awk -v row="$2" 'index($0, "| " row " ") == 1 { n = split($0, f, " +"); print f[n - 2] }' "$1.log" | head -1
}
# check_run NAME: the record has the three fields, every kernel gave its bytes
check_run() {
  for k in device_ops device_bytes device_peak_bytes; do
    v=$(field "$1" $k)
    [ -n "$v" ] && [ "$v" -gt 0 ] || { grep '"type": "train"' "$1/metrics.jsonl"; fail "$1: the train record has no positive $k"; }
  done
  grep -q "| device-op ledger over 2 update(s)" "$1.log" || { cat "$1.log"; fail "$1: HETSEQ_CUDA_LEDGER=1 printed no table"; }
  if grep -q "launched without a byte count" "$1.log"; then
    grep '+?' "$1.log"
    fail "$1: kernels launched without a byte count (give it to HS_CUDA_LAUNCHED; docs/gpu.md)"
  fi
}
# fit MODEL PRECISION SMALL LARGE PER_LAYER_BUDGET PER_MICRO_BATCH_BUDGET TARGET DEPTH
fit() {
  local small large a b
  small=$(field "$1_$2_$3" device_ops) large=$(field "$1_$2_$4" device_ops)
  a=$(( (large - small) / ($4 - $3) ))
  b=$(( large - a * $4 ))
  [ $(( (large - small) % ($4 - $3) )) -eq 0 ] || fail "$1 $2: the device ops are not linear in the layers ($3: $small, $4: $large)"
  echo "$1 $2: device ops per update = $a per layer + $b per micro-batch ($3 layers: $small, $4 layers: $large;" \
    "$8 layers: $((a * $8 + b)));" "budget $5 + $6, target $7"
  [ "$a" -le "$5" ] || fail "$1 $2: $a device ops per layer, over the budget of $5"
  [ "$b" -le "$6" ] || fail "$1 $2: $b device ops per micro-batch, over the budget of $6"
}

# From 6 and 3 layers (BERT), 4 and 2 (Transformer-XL): the fit is exact, so a and b are those of 24 and
# 12 or 16 and 8 layers, at a fraction of the emulated device's time; fit prints the count of the full
# depth (BERT-large's 24 layers, TXL-base's 16) from them.
bert bert_bf16_6 bf16 6
bert bert_bf16_3 bf16 3
bert bert_tf32_6 tf32 6
bert bert_tf32_3 tf32 3
txl txl_bf16_4 bf16 4
txl txl_bf16_2 bf16 2
txl txl_tf32_4 tf32 4
txl txl_tf32_2 tf32 2
for r in bert_bf16_6 bert_bf16_3 bert_tf32_6 bert_tf32_3 txl_bf16_4 txl_bf16_2 txl_tf32_4 txl_tf32_2; do
  check_run $r
done

fit bert bf16 3 6 $BERT_BF16_PER_LAYER $BERT_BF16_PER_MICRO_BATCH "$BERT_BF16_TARGET" 24
fit bert tf32 3 6 $BERT_TF32_PER_LAYER $BERT_TF32_PER_MICRO_BATCH "$BERT_TF32_TARGET" 24
fit txl bf16 2 4 $TXL_BF16_PER_LAYER $TXL_BF16_PER_MICRO_BATCH "$TXL_BF16_TARGET" 16
fit txl tf32 2 4 $TXL_TF32_PER_LAYER $TXL_TF32_PER_MICRO_BATCH "$TXL_TF32_TARGET" 16

# ---- conversions under bf16 ----
# (the 24-layer counts extrapolated from 6 and 3 layers: both are linear in the layers)
conv6=$(per_update bert_bf16_6 "to_half_kernel (GEMM operand)") conv3=$(per_update bert_bf16_3 "to_half_kernel (GEMM operand)")
gemm6=$(per_update bert_bf16_6 cublasLtMatmul) gemm3=$(per_update bert_bf16_3 cublasLtMatmul)
[ -n "$conv6" ] && [ -n "$conv3" ] && [ -n "$gemm6" ] && [ -n "$gemm3" ] ||
  { cat bert_bf16_6.log; fail "no conversion or GEMM rows in the table"; }
conv24=$(awk -v a="$conv6" -v b="$conv3" 'BEGIN { print a + 6 * (a - b) }')
gemm24=$(awk -v a="$gemm6" -v b="$gemm3" 'BEGIN { print a + 6 * (a - b) }')
conv_per_layer=$(awk -v a="$conv6" -v b="$conv3" 'BEGIN { printf "%d", (a - b) / 3 + 0.5 }')
echo "BERT bf16: $conv24 GEMM-operand conversions per update at 24 layers, $conv_per_layer per layer, for $gemm24 GEMMs" \
  "($(awk -v c="$conv24" -v g="$gemm24" 'BEGIN { printf "%.2f", c / g }') per GEMM); budget" \
  "$BERT_BF16_CONVERSIONS_PER_LAYER per layer and $BERT_BF16_CONVERSIONS_PER_GEMM per GEMM," \
  "target $BERT_WEIGHTS_PER_LAYER per layer (one per weight tensor per update)"
[ "$conv_per_layer" -le "$BERT_BF16_CONVERSIONS_PER_LAYER" ] ||
  fail "BERT bf16: $conv_per_layer GEMM-operand conversions per layer per update, over $BERT_BF16_CONVERSIONS_PER_LAYER"
awk -v c="$conv24" -v g="$gemm24" -v m="$BERT_BF16_CONVERSIONS_PER_GEMM" 'BEGIN { exit !(c <= m * g) }' ||
  fail "BERT bf16: $conv24 conversions for $gemm24 GEMMs, over $BERT_BF16_CONVERSIONS_PER_GEMM per GEMM"

# Transformer-XL bf16: no GEMM-operand conversion per layer either (3 before the fused attention wrote
# ∂r's twin and c' got one; the heads', the adaptive softmax's, remain per micro-batch)
TXL_BF16_CONVERSIONS_PER_LAYER=0
tconv4=$(per_update txl_bf16_4 "to_half_kernel (GEMM operand)") tconv2=$(per_update txl_bf16_2 "to_half_kernel (GEMM operand)")
[ -n "$tconv4" ] && [ -n "$tconv2" ] || { cat txl_bf16_4.log; fail "no conversion rows in the Transformer-XL table"; }
tconv16=$(awk -v a="$tconv4" -v b="$tconv2" 'BEGIN { print a + 6 * (a - b) }')
tconv_per_layer=$(awk -v a="$tconv4" -v b="$tconv2" 'BEGIN { printf "%d", (a - b) / 2 + 0.5 }')
echo "Transformer-XL bf16: $tconv16 GEMM-operand conversions per update at 16 layers, $tconv_per_layer per layer;" \
  "budget $TXL_BF16_CONVERSIONS_PER_LAYER per layer"
[ "$tconv_per_layer" -le "$TXL_BF16_CONVERSIONS_PER_LAYER" ] ||
  fail "Transformer-XL bf16: $tconv_per_layer GEMM-operand conversions per layer per update, over $TXL_BF16_CONVERSIONS_PER_LAYER"

# ---- the CPU writes no device fields ----
OMP_NUM_THREADS=1 mpi 1 "$HETSEQ" train "$BERT" -o training.max_update=1 -o training.disable_validation=true \
  -o checkpoint.no_save=true -o checkpoint.save_dir=\"bert_cpu\" > bert_cpu.log 2>&1 || { cat bert_cpu.log; fail "BERT on the CPU failed"; }
grep -q '"type": "train"' bert_cpu/metrics.jsonl || fail "the CPU run wrote no train record"
! grep -q '"device_' bert_cpu/metrics.jsonl || fail "the CPU run wrote device_* fields"
pass "device-op ledger: budgets hold for BERT and Transformer-XL"
