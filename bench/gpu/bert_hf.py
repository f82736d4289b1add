#!/usr/bin/env python3
"""PyTorch's BERT pre-training throughput with Hugging Face's BertForPreTraining, the counterpart of
`hetseq train` on a BERT phase-1 experiment (bench/gpu/run.sh times both side by side).

Model: transformers.BertForPreTraining built from a Google bert_config.json (the file hetseq's
model.config_file names), the vocabulary padded to a multiple of 8 as hetseq's pad_vocab_to_multiple_of
(30522 -> 30528), SDPA attention (attn_implementation="sdpa"; a transformers that has no SDPA BERT falls
back to its eager attention and the result says so), dropout as the config (0.1), training mode.
One update: forward + loss + backward + AdamW (fused=True on a GPU where PyTorch has it; lr 1e-4,
eps 1e-6, weight decay 0.01). The MLM head runs on the gathered masked rows only, as hetseq (and NVIDIA's
newer run_pretraining.py) do: encoder -> [B, L, H], rows at the B*P labelled positions -> [B*P, H] ->
cls.predictions -> [B*P, V]; NSP from the pooled [CLS]; loss = mean CE(MLM) + mean CE(NSP), in fp32.
Batch: B full-length sequences of L tokens with P labelled positions each (synthetic, fixed, on the
device); the cost does not depend on the token values.

--precision: fp32 (TF32 off), tf32 (torch.backends.cuda.matmul.allow_tf32), bf16/fp16 (torch.autocast;
fp16 with torch.cuda.amp.GradScaler on a GPU): bench/torch_precision.py. --compile: the forward + loss
under torch.compile (PyTorch >= 2); the optimizer step is not compiled.
Timing: WARMUP updates untimed, then STEPS updates between two torch.cuda.synchronize() calls.
Prints one JSON object: seq_per_sec, ms_per_update, loss, peak_bytes (torch.cuda.max_memory_allocated()
on a GPU, peak RSS on the CPU), attention, note.

  usage: PYTHON bench/gpu/bert_hf.py --config bert_config.json [--batch 64] [--seq-len 128] [--pred 20]
             [--warmup 10] [--steps 30] [--device cuda|cpu] [--precision fp32|tf32|bf16|fp16] [--compile]
  (PYTHON: an interpreter with torch and transformers, e.g. build/pyenv/bin/python from tools/quickstart.sh)
"""
import argparse
import inspect
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch_precision as tp  # noqa: E402  bench/torch_precision.py

try:
    import transformers
    from transformers import BertConfig, BertForPreTraining
except ImportError as e:
    sys.exit("Hugging Face's transformers is not importable (%s): pip install transformers (tools/quickstart.sh "
             "test makes build/pyenv with it)" % e)


class Pretraining(torch.nn.Module):
    """BertForPreTraining's forward with the MLM head on the gathered labelled rows."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, seg, mask, rows, mlm_labels, nsp_labels):
        # ids, seg, mask [B, L]; rows [B*P] flat indices b*L + position; mlm_labels [B*P]; nsp_labels [B]
        seq, pooled = self.model.bert(input_ids=ids, token_type_ids=seg, attention_mask=mask, return_dict=False)[:2]
        picked = seq.reshape(-1, seq.size(-1)).index_select(0, rows)  # [B*P, H]
        mlm = self.model.cls.predictions(picked)  # [B*P, V]
        nsp = self.model.cls.seq_relationship(pooled)  # [B, 2]
        return F.cross_entropy(mlm.float(), mlm_labels) + F.cross_entropy(nsp.float(), nsp_labels)


def build(config_path, device):
    cfg = BertConfig.from_json_file(config_path)
    cfg.vocab_size = (cfg.vocab_size + 7) // 8 * 8
    torch.manual_seed(1)
    try:
        model = BertForPreTraining._from_config(cfg, attn_implementation="sdpa")
        attention = getattr(model.config, "_attn_implementation", "sdpa")
        note = None
    except (ValueError, TypeError, ImportError) as e:
        model = BertForPreTraining(cfg)
        attention = "eager"
        note = "transformers %s: no SDPA BertForPreTraining (%s): eager attention" % (
            transformers.__version__, str(e).splitlines()[0][:80])
    return cfg, model.to(device).train(), attention, note


def make_batch(cfg, batch, seq_len, pred, device):
    g = torch.Generator().manual_seed(1234)
    ids = torch.randint(min(1000, cfg.vocab_size // 2), cfg.vocab_size - 8, (batch, seq_len), generator=g)
    seg = torch.zeros(batch, seq_len, dtype=torch.long)
    seg[:, seq_len // 2:] = 1
    mask = torch.ones(batch, seq_len, dtype=torch.long)
    pos = torch.stack([torch.sort(torch.randperm(seq_len - 2, generator=g)[:pred] + 1).values for _ in range(batch)])
    rows = (pos + torch.arange(batch).unsqueeze(1) * seq_len).reshape(-1)  # [B*P]
    mlm_labels = torch.randint(min(1000, cfg.vocab_size // 2), cfg.vocab_size - 8, (batch * pred,), generator=g)
    nsp = torch.randint(0, 2, (batch,), generator=g)
    return [t.to(device) for t in (ids, seg, mask, rows, mlm_labels, nsp)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True, help="a Google bert_config.json")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--pred", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", choices=("fp32", "tf32", "bf16", "fp16"), default="fp32")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2")))
    args = ap.parse_args()
    if min(args.batch, args.seq_len, args.pred, args.steps) < 1 or args.warmup < 0 or args.pred > args.seq_len - 2:
        sys.exit("batch, seq-len, pred and steps must be >= 1 (pred <= seq-len - 2), warmup >= 0")
    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if args.compile and tp.compile_note():
        sys.exit(tp.compile_note())
    autocast, precision_note = tp.autocast(device, args.precision)
    cfg, model, attention, attention_note = build(args.config, device)
    step_loss = Pretraining(model)
    run = torch.compile(step_loss) if args.compile else step_loss
    fused = cuda and "fused" in inspect.signature(torch.optim.AdamW).parameters
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6, weight_decay=0.01,
                            **({"fused": True} if fused else {}))
    scaler = torch.cuda.amp.GradScaler(enabled=cuda and args.precision == "fp16" and precision_note is None)
    batch = make_batch(cfg, args.batch, args.seq_len, args.pred, device)
    sync = tp.synchronizer(device)
    for it in range(args.warmup + args.steps):
        if it == args.warmup:
            sync()
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        try:
            with autocast():
                loss = run(*batch)
        except RuntimeError as e:
            # older PyTorch's CPU autocast leaves some ops (LayerNorm) with mixed dtypes; a GPU never gets here
            if cuda or it > 0 or precision_note or args.precision not in ("bf16", "fp16"):
                raise
            precision_note = "torch %s's %s autocast on the CPU fails in this model (%s): ran in fp32" % (
                torch.__version__, args.precision, str(e).splitlines()[0][:60])
            autocast = tp.autocast(device, "fp32")[0]
            loss = run(*batch)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    sync()
    seconds = time.perf_counter() - t0
    if not math.isfinite(float(loss)):
        sys.exit("the loss is not finite: %s" % float(loss))
    peak_bytes, peak_source = tp.peak(device)
    notes = [n for n in (precision_note, attention_note) if n]
    r = {"seq_per_sec": args.batch * args.steps / seconds, "ms_per_update": 1e3 * seconds / args.steps,
         "loss": float(loss), "peak_bytes": peak_bytes, "peak_source": peak_source, "attention": attention,
         "fused_adamw": fused, "compiled": args.compile, "precision": args.precision, "device": str(device),
         "torch": torch.__version__, "transformers": transformers.__version__,
         "params": sum(p.numel() for p in model.parameters())}
    if notes:
        r["note"] = "; ".join(notes)
    print(json.dumps(r))


if __name__ == "__main__":
    main()
