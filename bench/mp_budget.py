#!/usr/bin/env python3
"""Mixed-precision memory budget and expected MFU on GPUs for BERT-base/large (phases 1 and 2) and
Transformer-XL base/large: the arithmetic behind docs/gpu.md, "Mixed-precision memory budget and
expected MFU". Nothing here is measured on a GPU: memory is counted from the model dimensions and from
what hetseq's models keep (src/models/bert.c, src/models/txl.c), MFU from NVIDIA's published
throughputs against the peak table of src/train/mfu.c, and hetseq's own bf16 path as a derived floor of
an update's time on an H200 (mixed_floor: model FLOPs at peak, kept activations and the optimizer's
bytes at full bandwidth).

What is counted (bytes):
  per parameter   4 fp32 master weight + 4 fp32 gradient + 8 optimizer state (LAMB/Adam: two fp32
                  moments) + 2 for the 16-bit (bf16/fp16) copy of the weights the GEMMs read = 18
                  (16 in fp32 training; the copy is kept between updates, written by the optimizer)
  per sample      the activations the backward pass reads, the backward scratch that grows with the
                  micro-batch, and the 16-bit copies of the largest product's two activation operands.
                  BERT under bf16/fp16 keeps q|k|v, the context, the FFN pre-activation, the layer's
                  input and the first LayerNorm's output of every layer in 16 bits (the last two are
                  read backward only as product operands) plus one fp32 working set of them (the layer
                  inputs: two buffers in turn) and of the GELU output, which the backward recomputes
                  from the pre-activation (one 16-bit twin for every layer), and the twins of the output
                  gradients (src/models/bert.c); the LayerNorm inputs and statistics and the heads stay
                  fp32. The fused attention (attention = auto on
                  CUDA) keeps each row's log-sum-exp (heads·T fp32 per layer) where the unfused one keeps
                  the heads·T·T probabilities (in 16 bits under bf16/fp16).
                  Transformer-XL the same with q|k|v, the context and the FFN activation (and the
                  probabilities when unfused; src/models/txl.c; r is per segment, not per column: left
                  out).
  per GPU         1 GiB reserved for the CUDA context, cuBLASLt/cuDNN workspaces and allocator slack
Model FLOPs: src/tasks/model_flops.c for BERT (MLM head on the labelled positions only); for
Transformer-XL the same accounting (multiply-add = 2, training = 3 x forward, GEMMs only) per target
token, with Q, K, V computed over the klen = tgt_len + mem_len rows as NVIDIA's model does and the
adaptive softmax's head cluster only (its tail clusters run on the few tokens whose target is in them,
which depends on the data: leaving them out makes the MFU a lower bound).

  usage: python3 bench/mp_budget.py            (prints the tables of docs/gpu.md)
         python3 bench/mp_budget.py --check    (asserts the hand-checked figures, exit 1 on a mismatch)
         python3 bench/mp_budget.py --help     (this text)
"""
import math
import sys

GIB = 2 ** 30
RESERVE = 1 * GIB
BYTES_PER_PARAM = {"fp32": 4 + 4 + 8, "mixed": 4 + 4 + 8 + 2}
GPUS_GB = (16, 32, 40, 80)  # nominal memory; taken as GiB (an A100 40GB reports 39.4 GiB usable: close)

# src/train/mfu.c's table: dense TFLOP/s
PEAK = {"V100": {"fp32": 15.7, "fp16": 125.0}, "A100": {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}}

BERT = {
    "BERT-base": dict(layers=12, hidden=768, heads=12, inter=3072),
    "BERT-large": dict(layers=24, hidden=1024, heads=16, inter=4096),
}
BERT_PHASES = {"phase 1": dict(seq=128, pred=20), "phase 2": dict(seq=512, pred=80)}
VOCAB = 30528  # 30522 padded to a multiple of 8

TXL = {
    "TXL base": dict(layers=16, d=512, heads=8, dh=64, inter=2048, tgt=192, mem=192, div_val=1, batch=32),
    "TXL large": dict(layers=18, d=1024, heads=16, dh=64, inter=4096, tgt=384, mem=384, div_val=4, batch=8),
}
TXL_VOCAB, TXL_CUTOFFS = 267735, (19997, 39997, 199997)


def bert_params(layers, hidden, heads, inter):
    h, i, v = hidden, inter, VOCAB
    emb = v * h + 512 * h + 2 * h + 2 * h
    layer = 3 * (h * h + h) + (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    heads_ = (h * h + h) + (h * h + h) + 2 * h + v + (2 * h + 2)  # pooler, MLM transform + LN, decoder bias, NSP
    return emb + layers * layer + heads_


def bert_flops(layers, hidden, heads, inter, seq, pred):
    """src/tasks/model_flops.c: hs_bert_train_flops_per_sequence"""
    L, H, I, V, T, P = layers, hidden, inter, VOCAB, seq, pred
    return 6.0 * T * L * (4 * H * H + 2 * H * I) + 12.0 * L * T * T * H + 6.0 * P * (H * H + V * H) + 6.0 * (H * H + 2 * H)


def bert_kept_16(hidden, heads, inter, seq, fused=True, **_):
    """Elements per layer and sequence that bf16/fp16 keep in 16 bits with one fp32 working set
    (src/models/bert.c): q|k|v, the context, the FFN pre-activation and GELU output, and the attention
    probabilities when the attention is unfused."""
    H, I, T, n = hidden, inter, seq, heads
    return 3 * T * H + (0 if fused else n * T * T) + T * H + 2 * T * I


def bert_act_bytes(layers, hidden, heads, inter, seq, pred, fused=True):
    """(floats one sequence keeps in fp32 storage: src/models/bert.c's bert_layer_acts and the model's
    buffers, bytes of 16-bit operand copies, bytes one sequence keeps under bf16/fp16: the kept tensors in
    16 bits per layer plus one fp32 working set of them, and the 16-bit twins)"""
    L, H, I, V, T, P, n = layers, hidden, inter, VOCAB, seq, pred, heads
    kept = bert_kept_16(hidden, heads, inter, seq, fused)
    per_layer = T * H + T * H + T * H + T * H + 4 * T + kept + (n * T if fused else 0)
    # input, attn_sum, attn_out, ffn_sum, 4 LayerNorm statistics; qkv, (probs,) ctx, ffn_pre + ffn_act;
    # the fused attention's log-sum-exp per row
    other = T * H + 2 * T + T * H + T + P * (4 * H + 2 + V) + 2 * H + 2
    # emb_sum + stats, encoder output, mask bias, MLM rows/pre/act/out + stats + logits, pooler, NSP
    scratch = 3 * T * H + T * max(I, 3 * H) + 2 * P * H + 2 * H
    # grad_h, grad_tmp, grad_ctx; workspace (dgelu, then dqkv); MLM and pooler gradients
    floats = L * per_layer + other + scratch
    # 16-bit copies of the largest product's converted operands: the q|k|v gradient (the dense layers'
    # other operands are twins their producers write; the unfused attention converts its own operands)
    half = 2 * (3 * T * H if fused else max(3 * T * H, n * T * T + T * H))
    # fp32: the per-layer kept tensors, input and attn_out become one working set (+ a second hidden
    # buffer); 16 bits per layer: the kept tensors but the GELU output (recomputed), input and attn_out;
    # once: the output gradients' twins [T,H] + [T,I] and the recomputed GELU output's twin [T,I]
    fp32 = floats - L * (kept + 2 * T * H) + kept + 2 * T * H
    half16 = L * (kept - T * I + 2 * T * H) + T * H + 2 * T * I
    mixed = 4 * fp32 + 2 * half16
    return floats, half, mixed


def txl_params(layers, d, heads, dh, inter, div_val, **_):
    nd = heads * dh
    if div_val == 1:
        emb = TXL_VOCAB * d  # one table, tied with the softmax weights, no projections (d_embed = d_model)
    else:
        bounds = (0,) + TXL_CUTOFFS + (TXL_VOCAB,)
        dims = [d // div_val ** i for i in range(len(bounds) - 1)]
        emb = sum((bounds[i + 1] - bounds[i]) * dims[i] + d * dims[i] for i in range(len(dims)))  # tables + projections
        emb += d * dims[0]  # the softmax's own head projection (tie_projs false for cluster 0)
    softmax = TXL_VOCAB + len(TXL_CUTOFFS) * (d + 1)  # output biases, cluster weights and biases
    layer = 3 * nd * d + d * nd + nd * d + 2 * d + (d * inter + inter) + (inter * d + d) + 2 * d
    return emb + softmax + layers * layer + 2 * heads * dh


def txl_flops_per_token(layers, d, heads, dh, inter, tgt, mem, batch, div_val, **_):
    """hetseq's count (src/tasks/model_flops.c, hs_txl_train_flops_per_token): products trained 3 x,
    qkv_net on the memory rows 2 x (detached: no data gradient); r_net (1/batch of qkv_net) and the
    tail clusters left out."""
    nd, klen = heads * dh, tgt + mem
    head_dim = d  # the head cluster runs at d_embed = d (div_val^0 = 1)
    flops_layer = (3 * 2 * d * 3 * nd  # Q, K, V of the segment rows, trained 3 x
                   + 2 * 2 * (mem / tgt) * d * 3 * nd  # of the memory rows, trained 2 x
                   + 3 * 6 * klen * nd  # (q + r_w_bias)·Kᵀ, (q + r_r_bias)·Rᵀ and P·V
                   + 3 * (2 * nd * d + 4 * d * inter))  # o_net and the FFN
    flops_head = 6 * head_dim * (TXL_CUTOFFS[0] + len(TXL_CUTOFFS))
    return layers * flops_layer + flops_head


def txl_act_bytes(layers, d, heads, dh, inter, tgt, mem, fused=True, **_):
    """(floats one batch column keeps in fp32 storage: src/models/txl.c's txl_layer_acts, post-LN as
    NVIDIA's, bytes of 16-bit operand copies, bytes one column keeps under bf16/fp16: the kept tensors in
    16 bits per layer plus one fp32 working set of them)"""
    nd, T, K, n = heads * dh, tgt, tgt + mem, heads
    kept = 3 * K * nd + (0 if fused else n * T * K) + T * nd + T * inter  # qkv, (probs,) ctx, ff_act
    per_layer = K * d + 2 * T + kept + T * d + T * d + 2 * T + T * d + T * d + (n * T if fused else 0)
    # cat(mem, h), LN1 stats, qkv, (probs,) ctx, attn_sum, h1, LN2 stats, ff_act, ff_sum, layer input;
    # the fused attention's log-sum-exp per row
    mems = layers * mem * d  # the memory carried to the next segment
    head = T * (TXL_CUTOFFS[0] + len(TXL_CUTOFFS))  # head logits (softmax in place)
    other = 3 * T * d
    scratch = 3 * T * d + T * nd + 3 * K * nd + K * d + T * inter
    floats = layers * per_layer + mems + head + other + scratch
    half = 2 * max(T * inter + T * d, K * nd if fused else n * T * K + K * nd)
    twins = layers * T * d + T * d  # post-LN: the FFN input per layer; a sublayer gradient's twin
    mixed = 4 * (floats - layers * kept + kept) + 2 * layers * kept + 2 * twins  # fp32 + working set; 16-bit
    return floats, half, mixed


# The current design's time floor on one GPU (docs/gpu.md, "What to expect from hetseq's mixed path"): a
# derivation from the shapes, not a measurement. H200 SXM: src/train/mfu.c's bf16 peak, the datasheet's
# HBM3e bandwidth.
H200 = {"bf16_tflops": 989.4, "hbm": 4.8e12}
# device ops per update of one micro-batch, ops = a·layers + b (tests/cuda/test_device_budget.sh)
DEVICE_OPS = {("BERT", "bf16"): (26, 75), ("BERT", "tf32"): (24, 58), ("TXL", "bf16"): (34, 127),
              ("TXL", "tf32"): (32, 86)}
# bytes per parameter and update the optimizer moves: LAMB reads w, g, m, v (16) and writes w, m, v (12)
# and the weights' 16-bit copy (2)
OPT_BYTES_PER_PARAM = 16 + 12 + 2


def mixed_floor(model="BERT-large", phase="phase 1", micro_batch=64, gpu=H200):
    """Lower bounds of one update's time (one micro-batch), seconds, as a dict: the model FLOPs at the bf16
    peak (every product at 100 % of the tensor cores), every byte a sequence keeps for the backward
    (bert_act_bytes' mixed figure, the 16-bit twins included, the fused attention's lse not L·L) written
    once and read once at full bandwidth, and the optimizer's pass over the parameters (the 16-bit copy
    written once per update). Element-wise traffic beyond that, the GEMMs' own operand reads and the
    launches are not in it (the launches are given per microsecond an op costs): an upper bound on MFU."""
    dims, ph = BERT[model], BERT_PHASES[phase]
    flops = micro_batch * bert_flops(**dims, **ph)
    act = 2.0 * micro_batch * bert_act_bytes(**dims, **ph)[2]
    opt = OPT_BYTES_PER_PARAM * bert_params(**dims)
    a, b = DEVICE_OPS[("BERT", "bf16")]
    t = {"gemm": flops / (gpu["bf16_tflops"] * 1e12), "act": act / gpu["hbm"], "opt": opt / gpu["hbm"]}
    t["total"] = t["gemm"] + t["act"] + t["opt"]
    t.update(flops=flops, act_bytes=act, opt_bytes=opt, ops=a * dims["layers"] + b,
             mfu=flops / t["total"] / (gpu["bf16_tflops"] * 1e12), seq_s=micro_batch / t["total"])
    return t


def max_micro_batch(gb, params, per_sample, precision="mixed"):
    free = gb * GIB - RESERVE - params * BYTES_PER_PARAM[precision]
    return max(0, math.floor(free / per_sample))


def mfu(flops_per_sample, samples_per_s, gpus, peak_tflops):
    return flops_per_sample * samples_per_s / gpus / (peak_tflops * 1e12)


# NVIDIA's published training throughputs (docs in /work/shared/reference, see docs/gpu.md):
# (model, phase or None, GPU, GPUs, precision, samples/s, unit)
NVIDIA = [
    ("BERT-large", "phase 1", "A100", 8, "tf32", 1777, "seq/s"),
    ("BERT-large", "phase 1", "A100", 8, "fp16", 3231, "seq/s"),
    ("BERT-large", "phase 1", "A100", 1, "tf32", 234, "seq/s"),
    ("BERT-large", "phase 1", "A100", 1, "fp16", 415, "seq/s"),
    ("BERT-large", "phase 2", "A100", 8, "tf32", 318, "seq/s"),
    ("BERT-large", "phase 2", "A100", 8, "fp16", 620, "seq/s"),
    ("BERT-large", "phase 1", "V100", 1, "fp32", 40, "seq/s"),
    ("BERT-large", "phase 1", "V100", 1, "fp16", 158, "seq/s"),
    ("BERT-large", "phase 2", "V100", 1, "fp32", 9, "seq/s"),
    ("BERT-large", "phase 2", "V100", 1, "fp16", 33, "seq/s"),
    ("TXL base", None, "A100", 1, "tf32", 41527, "tok/s"),
    ("TXL base", None, "A100", 1, "fp16", 59961, "tok/s"),
    ("TXL base", None, "A100", 8, "tf32", 305933, "tok/s"),
    ("TXL base", None, "A100", 8, "fp16", 449890, "tok/s"),
    ("TXL base", None, "V100", 1, "fp32", 13981, "tok/s"),
    ("TXL base", None, "V100", 1, "fp16", 26639, "tok/s"),
    ("TXL large", None, "A100", 8, "tf32", 106651, "tok/s"),
    ("TXL large", None, "A100", 8, "fp16", 159185, "tok/s"),
]


def rows():
    """(model, phase, params, flops per sample, unit, activation bytes per sample)"""
    out = []
    for name, dims in BERT.items():
        p = bert_params(**dims)
        for phase, ph in BERT_PHASES.items():
            out.append((name, phase, p, bert_flops(**dims, **ph), "sequence of %d" % ph["seq"],
                        bert_act_bytes(**dims, **ph)))
    for name, dims in TXL.items():
        out.append((name, "tgt %d, mem %d" % (dims["tgt"], dims["mem"]), txl_params(**dims),
                    txl_flops_per_token(**dims), "token", txl_act_bytes(**dims)))
    return out


def main():
    table = rows()
    print("Memory: bytes per parameter fp32 %d, mixed %d; 1 GiB reserved per GPU\n" %
          (BYTES_PER_PARAM["fp32"], BYTES_PER_PARAM["mixed"]))
    gpus = " / ".join("%d" % g for g in GPUS_GB)
    print("| model | shape | parameters | weights, grads, moments, 16-bit copies | activations per sample: fp32 "
          "storage, mixed (+ 16-bit operands) | largest micro-batch, mixed, on %s GB | fp32 | mixed, if every "
          "activation were stored in 16 bits |" % gpus)
    print("|---|---|---|---|---|---|---|---|")
    for name, shape, p, flops, unit, (floats, half, mixed_bytes) in table:
        per = mixed_bytes + half  # per sequence (BERT) or per batch column of tgt_len tokens (TXL)
        mixed = [max_micro_batch(g, p, per) for g in GPUS_GB]
        fp32 = [max_micro_batch(g, p, 4 * floats, "fp32") for g in GPUS_GB]
        act16 = [max_micro_batch(g, p, 2 * floats) for g in GPUS_GB]
        sample = "sequence" if name.startswith("BERT") else "column"
        print("| %s | %s | %.1f M | %.2f GB | %.0f MB, %.0f MB per %s (+ %.1f MB) | %s | %s | %s |" % (
            name, shape, p / 1e6, p * BYTES_PER_PARAM["mixed"] / 1e9, 4 * floats / 1e6, mixed_bytes / 1e6, sample,
            half / 1e6, " / ".join(str(m) for m in mixed), " / ".join(str(m) for m in fp32),
            " / ".join(str(m) for m in act16)))
    print("\nModel FLOPs per sample (training):")
    for name, shape, p, flops, unit, _ in table:
        print("  %-10s %-16s %8.2f GFLOP per %s" % (name, shape, flops / 1e9, unit))
    print("\n| model | GPUs | precision | NVIDIA's throughput | model TFLOP/s per GPU | peak (src/train/mfu.c) | MFU |")
    print("|---|---|---|---|---|---|---|")
    flops_of = {(r[0], r[1] if r[0].startswith("BERT") else None): r[3] for r in table}
    for model, phase, gpu, n, prec, rate, unit in NVIDIA:
        f = flops_of[(model, phase)]
        peak = PEAK[gpu][prec]
        print("| %s%s | %d x %s | %s | %s %s | %.1f | %g | %.0f %% |" % (
            model, " " + phase if phase else "", n, gpu, prec if prec != "fp16" else "mixed (fp16)",
            format(rate, ","), unit, f * rate / n / 1e12, peak, 100 * mfu(f, rate, n, peak)))
    t = mixed_floor()
    print("\nhetseq's bf16 path, BERT-large phase 1, micro-batch 64, one H200 (989.4 TFLOP/s, 4.8 TB/s): a derived floor, "
          "not a measurement")
    print("  GEMMs at peak %.2f ms (%.2f TFLOP), activations written + read once %.2f ms (%.2f GB), optimizer %.2f ms "
          "(%.2f GB)" % (1e3 * t["gemm"], t["flops"] / 1e12, 1e3 * t["act"], t["act_bytes"] / 1e9, 1e3 * t["opt"],
                          t["opt_bytes"] / 1e9))
    print("  floor %.2f ms per update: at most %.0f seq/s, MFU <= %.0f %%; %d device ops per update: + %.3f ms per "
          "microsecond an op costs" % (1e3 * t["total"], t["seq_s"], 100 * t["mfu"], t["ops"], t["ops"] / 1e3))
    return table


def check():
    """Figures checked by hand (see docs/gpu.md); a mismatch means the counting changed."""
    bl = BERT["BERT-large"]
    assert abs(bert_params(**bl) / 1e6 - 336.2) < 0.1, bert_params(**bl)
    assert abs(bert_params(**BERT["BERT-base"]) / 1e6 - 110.1) < 0.1, bert_params(**BERT["BERT-base"])
    f1 = bert_flops(**bl, seq=128, pred=20)
    # 6·128·24·(4·1024² + 2·1024·4096) + 12·24·128²·1024 + 6·20·(1024² + 30528·1024) + 6·(1024² + 2048)
    assert abs(f1 - (231.928e9 + 4.832e9 + 3.877e9 + 6.3e6)) < 0.01e9, f1
    assert abs(100 * mfu(f1, 3231, 8, 312) - 31.2) < 0.1, mfu(f1, 3231, 8, 312)
    assert abs(100 * mfu(f1, 1777, 8, 156) - 34.3) < 0.1, mfu(f1, 1777, 8, 156)
    # BERT-large phase 1 activations, unfused attention: per layer per token 8H + 2I + 4 + heads·T = 18436
    # floats; fused: the probabilities' heads·T replaced by the log-sum-exp's heads/T per token: 16324
    per_layer = 128 * (8 * 1024 + 2 * 4096 + 4) + 16 * 128 * 128
    assert per_layer == 128 * 18436
    # of which kept in 16 bits under bf16/fp16: q|k|v, ctx (4H), ffn_pre + GELU (2I), probs (heads·T)
    assert bert_kept_16(**bl, seq=128, fused=False) == 128 * (4 * 1024 + 2 * 4096 + 16 * 128)
    assert bert_kept_16(**bl, seq=128) == 128 * (4 * 1024 + 2 * 4096)
    floats_u, _, _ = bert_act_bytes(**bl, seq=128, pred=20, fused=False)
    floats, _, mixed = bert_act_bytes(**bl, seq=128, pred=20)
    assert floats_u - floats == 24 * (16 * 128 * 128 - 16 * 128), (floats_u, floats)
    # under bf16/fp16 per layer and token 2·(4H + I + 2H) bytes in 16 bits (no GELU output: recomputed) and
    # the fp32 LayerNorm inputs and statistics; the fp32 working set and the 16-bit gradient twins once
    assert mixed == 4 * (floats - 24 * 128 * (12288 + 2048) + 128 * (12288 + 2048)) + 2 * (
        24 * 128 * (12288 - 4096 + 2048) + 128 * 1024 + 2 * 128 * 4096), (floats, mixed)
    # TXL base per token and layer: the segment's Q, K, V 6·3·512² + the memory's 4·3·512² (mem = tgt) +
    # 18·384·512 + 6·(512² + 2·512·2048); head 6·512·20000 (= src/tasks/model_flops.c: 0.470 GFLOP)
    tb = TXL["TXL base"]
    layer = 6 * 3 * 512**2 + 4 * 3 * 512**2 + 18 * 384 * 512 + 6 * (512**2 + 2 * 512 * 2048)
    assert abs(txl_flops_per_token(**tb) - (16 * layer + 6 * 512 * 20000)) < 1, txl_flops_per_token(**tb)
    assert abs(txl_flops_per_token(**tb) / 1e9 - 0.470) < 0.001, txl_flops_per_token(**tb)
    # the floor of docs/gpu.md: 64 x 240.64 GFLOP / 989.4 TFLOP/s = 15.57 ms; 2 x 64 x 105.70 MB / 4.8 TB/s
    # = 2.82 ms; 30 x 336.23 M / 4.8 TB/s = 2.10 ms; 20.49 ms, 3124 seq/s, 76.0 %; 26 x 24 + 75 = 699 ops
    t = mixed_floor()
    assert abs(1e3 * t["gemm"] - 15.57) < 0.01 and abs(1e3 * t["act"] - 2.82) < 0.01, t
    assert abs(1e3 * t["opt"] - 2.10) < 0.01 and abs(1e3 * t["total"] - 20.49) < 0.01, t
    assert abs(t["seq_s"] - 3124) < 1 and abs(100 * t["mfu"] - 76.0) < 0.1 and t["ops"] == 699, t
    print("checks passed")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--check":
        check()
    elif len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
    else:
        main()
