#!/usr/bin/env python3
"""PyTorch's CPU training throughput for BERT-mini pre-training, the baseline of hetseq's BERT benchmark.

Model: tests/ref/bert_torch.py (NVIDIA's BertForPreTraining) with 4 layers, hidden 256, 4 heads,
intermediate 1024, vocabulary 30528 (30522 padded to 8), dropout 0.1 (training mode). Batch: 32
sequences of 128 tokens, 20 masked positions each, NSP labels; synthetic, fixed. One training step =
forward + MLM/NSP loss + backward + AdamW step (torch has no LAMB; the optimizer is a small part of the
step). LayerNorm is F.layer_norm (BERT_TORCH_LAYER_NORM=tf selects modeling.py's Python version).

Two MLM-head variants are timed, each in its own process (so peak memory is per variant):
  all     NVIDIA's HDF5-era code: transform + decoder on all B*L positions ([B,L,V] logits), loss on
          the labelled ones;
  masked  NVIDIA's newer code (and hetseq): gather the B*P labelled positions first.

Model FLOPs per sequence (multiply-add = 2 FLOPs; training = forward + backward = 3 x forward, the
backward being two GEMMs per forward GEMM; embedding gathers, softmax, LayerNorm, GELU not counted):
  forward = layers x [ 2 L (4 H^2 + 2 H I)      Q, K, V, output projection; FFN up and down
                      + 4 L^2 H ]               Q K^T and P V over all heads
          + 2 R (H^2 + V H)                     MLM transform and tied decoder on R rows
          + 2 H^2 + 4 H                         pooler and NSP classifier on [CLS]
  R = L for "all", R = P for "masked". The FLOP rate of either variant is reported against its own
  count and, as "useful", against the "masked" count (the work the model needs).
Also measured in the same process: torch's SGEMM rate for the FFN-up shape [B L, H] x [H, I].

PRECISION bf16 runs the forward pass and the loss under torch.autocast("cpu", dtype=torch.bfloat16)
(PyTorch >= 1.10; the backward follows autocast's casts), parameters, gradients and AdamW in fp32: the
counterpart of hetseq's precision = "bf16". The same process then also times torch.mm on bf16
operands at the FFN-up shape ("bf16 mm").
VARIANTS: comma-separated subset of all,masked (default both).

  usage: PYTHON bench/bert_torch.py [THREADS [ITERATIONS [WARMUP [fp32|bf16 [VARIANTS]]]]]
         (defaults 2, 20, 10, fp32, all,masked; PYTHON: any interpreter with torch, e.g. a venv's)
"""
import contextlib
import json
import os
import re
import resource
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
import bert_torch as bt  # noqa: E402

MINI = {"vocab_size": 30528, "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
        "intermediate_size": 1024, "max_position_embeddings": 512, "type_vocab_size": 2,
        "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}
BATCH, SEQ, PRED = 32, 128, 20
# F.layer_norm (apex FusedLayerNorm's role in NVIDIA's code): PyTorch's fastest and leanest LayerNorm,
# the stronger baseline; modeling.py's Python BertLayerNorm ("tf") is slower and keeps ~6 extra
# activations per LayerNorm.
LAYER_NORM = os.environ.get("BERT_TORCH_LAYER_NORM", "fused")


def forward_flops_per_sequence(cfg, seq, rows):
    h, i, v, n = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["num_hidden_layers"]
    encoder = n * (2 * seq * (4 * h * h + 2 * h * i) + 4 * seq * seq * h)
    heads = 2 * rows * (h * h + v * h) + 2 * h * h + 4 * h
    return encoder + heads


def train_flops_per_sequence(cfg, seq, rows):
    return 3 * forward_flops_per_sequence(cfg, seq, rows)


def make_batch(cfg):
    """Full-length sequences (as most of NVIDIA's phase-1 rows are), segment B in the second half,
    PRED sorted masked positions per row, never [CLS] at 0."""
    g = torch.Generator().manual_seed(1234)
    ids = torch.randint(1000, cfg["vocab_size"] - 8, (BATCH, SEQ), generator=g)
    seg = torch.zeros(BATCH, SEQ, dtype=torch.long)
    seg[:, SEQ // 2:] = 1
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    pos = torch.stack([torch.sort(torch.randperm(SEQ - 2, generator=g)[:PRED] + 1).values for _ in range(BATCH)])
    lm_ids = torch.randint(1000, cfg["vocab_size"] - 8, (BATCH, PRED), generator=g)
    labels = bt.masked_lm_labels(pos, lm_ids, SEQ)
    nsp = torch.randint(0, 2, (BATCH,), generator=g)
    return ids, seg, mask, labels, nsp


def sgemm_gflops(m, k, n, reps=20, dtype=torch.float32):
    a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
    for _ in range(3):
        torch.mm(a, b)
    t0 = time.perf_counter()
    for _ in range(reps):
        torch.mm(a, b)
    return 2.0 * m * k * n * reps / (time.perf_counter() - t0) / 1e9


def precision_context(precision):
    if precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def blas_info():
    """Which BLAS this torch was built with (Debian's 1.13: generic = the system's libblas, OpenBLAS
    here; PyPI's 2.x: MKL) and its oneDNN, from torch.__config__.show()."""
    cfg = torch.__config__.show()
    blas = re.findall(r"BLAS_INFO=(\w+)", cfg)
    dnn = re.findall(r"(?:MKL-DNN|oneDNN) v([\d.]+)", cfg)
    return "BLAS %s%s" % (blas[0] if blas else "?", ", oneDNN " + dnn[0] if dnn else "")


def run_variant(variant, threads, iterations, warmup, precision="fp32"):
    torch.set_num_threads(threads)
    model = bt.build_model(MINI, mlm_positions=variant, seed=1, layer_norm=LAYER_NORM).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6, weight_decay=0.01)
    batch = make_batch(MINI)
    loss = None
    fwd_bwd = 0.0
    for it in range(warmup + iterations):
        if it == warmup:
            t0 = time.perf_counter()
            fwd_bwd = 0.0
        ts = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with precision_context(precision):
            loss = model(*batch)
        loss.backward()
        fwd_bwd += time.perf_counter() - ts
        opt.step()
    seconds = time.perf_counter() - t0
    rows = SEQ if variant == "all" else PRED
    own = train_flops_per_sequence(MINI, SEQ, rows)
    useful = train_flops_per_sequence(MINI, SEQ, PRED)
    seq_per_s = BATCH * iterations / seconds
    return {"variant": variant, "threads": threads, "iterations": iterations, "warmup": warmup,
            "seq_per_s": seq_per_s, "ms_per_step": 1e3 * seconds / iterations,
            "ms_fwd_bwd": 1e3 * fwd_bwd / iterations, "loss": float(loss),
            "flops_per_seq": own, "gflops": own * seq_per_s / 1e9, "useful_gflops": useful * seq_per_s / 1e9,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            "sgemm_gflops": sgemm_gflops(BATCH * SEQ, MINI["hidden_size"], MINI["intermediate_size"]),
            "bf16_mm_gflops": sgemm_gflops(BATCH * SEQ, MINI["hidden_size"], MINI["intermediate_size"],
                                           dtype=torch.bfloat16) if precision == "bf16" else None}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--variant":
        variant, threads, iterations, warmup = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
        print(json.dumps(run_variant(variant, threads, iterations, warmup, sys.argv[6])))
        return
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    warmup = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    precision = sys.argv[4] if len(sys.argv) > 4 else "fp32"
    variants = (sys.argv[5] if len(sys.argv) > 5 else "all,masked").split(",")
    if precision not in ("fp32", "bf16") or not variants or any(v not in ("all", "masked") for v in variants):
        sys.exit("usage: %s [THREADS [ITERATIONS [WARMUP [fp32|bf16 [all,masked]]]]]" % sys.argv[0])
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    params = bt.count_parameters(bt.build_model(MINI, seed=0))
    print("PyTorch %s (%s) BERT-mini training (4 layers, hidden 256, 4 heads, intermediate 1024, vocab 30528; "
          "%d parameters)" % (torch.__version__, blas_info(), params))
    print("batch %d x seq %d, %d predictions per sequence, dropout 0.1, %s LayerNorm, AdamW, %s; %d threads, "
          "%d warm-up + %d timed steps" % (BATCH, SEQ, PRED, LAYER_NORM,
                                           "autocast bf16" if precision == "bf16" else "fp32", threads, warmup,
                                           iterations))
    for variant in variants:
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--variant", variant, str(threads),
                              str(iterations), str(warmup), precision], env=env, capture_output=True, text=True)
        if out.returncode != 0:
            sys.stderr.write(out.stderr)
            sys.exit(out.returncode)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print("  MLM head on %-6s %7.1f seq/s  %7.1f ms/step (fwd+bwd %6.1f)  %5.2f GFLOP/seq  %6.1f GFLOP/s "
              "(useful %6.1f)  peak RSS %6.0f MiB  loss %.3f  [torch SGEMM %.1f GFLOP/s%s]"
              % ("all L" if variant == "all" else "P only", r["seq_per_s"], r["ms_per_step"], r["ms_fwd_bwd"],
                 r["flops_per_seq"] / 1e9, r["gflops"], r["useful_gflops"], r["peak_rss_mib"], r["loss"],
                 r["sgemm_gflops"],
                 "" if r["bf16_mm_gflops"] is None else ", bf16 mm %.1f GFLOP/s" % r["bf16_mm_gflops"]))


if __name__ == "__main__":
    main()
