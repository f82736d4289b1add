#!/usr/bin/env python3
"""PyTorch's CPU training throughput for Transformer-XL, the baseline of hetseq's TXL benchmark.

Model: tests/ref/txl_torch.py (MemTransformerLM as NVIDIA's recipe builds it for attn_type 0: relative
positional attention with the global biases r_w_bias, r_r_bias and a memory of mem_len hidden states per
layer, adaptive input embedding and projected adaptive log-softmax with tied weights, post-LayerNorm),
TXL-base shaped: d_model 512, 8 heads of 64, d_inner 2048, dropout 0.1, dropatt 0, div_val 1; the layer
count, the batch (columns), tgt_len, mem_len and the cutoffs come from the command line, so the same
shapes as the hetseq run can be given. Initialised as NVIDIA's recipe (weights N(0, 0.02), LayerNorm
gains N(1, 0.02), biases 0); the values do not matter for the timing, only that they are not degenerate.

Data: the train split of a `hetseq prep lm` file (lm.h5) batched as Transformer-XL does: the stream cut
into B contiguous columns, [n_step, B] time-major; update k trains on rows [k·L, k·L+L) with the next
token as target, the memory carried from update k-1 (detached). The same segments, in the same order,
as `hetseq train` on one rank with txl.batch_size = B.

One update = forward (mean NLL of the B·L tokens) + backward + the optimizer step with clipping at 0.25:
  lamb  the LAMB of hetseq's optimizer.name = "lamb" with lamb_trust_ratio_on_no_decay = true and
        weight_decay 0 (docs/optimization.md: global-norm clipping inside the step, Adam moments with
        bias correction, per-tensor trust ratio ||p||/||u||), in in-place torch operations per tensor;
  adam  torch.optim.Adam after torch.nn.utils.clip_grad_norm_.
The first WARMUP updates are not timed (allocation, first-touch, the first segment has no memory yet);
the next STEPS are, each on its own (time.perf_counter around the whole update).

--device cuda runs it on the GPU (the data moved there first; each update ends with
torch.cuda.synchronize(), so its time is the GPU's), LAMB then without host synchronisations (the clip
factor and the trust ratios stay device tensors); --precision tf32 sets
torch.backends.cuda.matmul.allow_tf32 (and cuDNN's), bf16/fp16 run the forward pass and the loss under
torch.autocast (fp16 with dynamic loss scaling from 2^16); --compile wraps the model in torch.compile
(PyTorch >= 2); on a GPU the forward + backward time is the host's (launches), the update's the
GPU's. Peak memory: torch.cuda.max_memory_allocated() on a GPU, peak RSS on the CPU.

  usage: /usr/bin/python3 bench/txl_torch.py LM_H5 [--threads T] [--layers N] [--batch B] [--tgt-len L]
             [--mem-len M] [--cutoffs C1,C2,...] [--warmup W] [--steps S] [--optim lamb|adam] [--json]
             [--device cpu|cuda] [--precision fp32|tf32|bf16|fp16] [--compile]
Prints one line (tokens/s over the timed updates, median ms per update and of its forward + backward,
peak memory, mean loss), or with --json one JSON object with the same numbers and the per-update times.
"""
import argparse
import json
import math
import os
import resource
import statistics
import sys
import time

import h5py
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
import txl_torch as tt  # noqa: E402

import torch_precision as tp  # noqa: E402  bench/torch_precision.py

D_MODEL, N_HEAD, D_HEAD, D_INNER = 512, 8, 64, 2048
DROPOUT, DROPATT, INIT_STD, CLIP = 0.1, 0.0, 0.02, 0.25


def build(n_token, args):
    torch.manual_seed(1111)
    model = tt.MemTransformerLM(n_token, args.layers, N_HEAD, D_MODEL, D_HEAD, D_INNER, dropout=DROPOUT,
                                dropatt=DROPATT, tie_weight=True, div_val=1, pre_lnorm=False,
                                tgt_len=args.tgt_len, mem_len=args.mem_len, cutoffs=args.cutoffs)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layer_norm.weight"):
                p.normal_(1.0, INIT_STD)
            elif "bias" in name and name not in ("r_w_bias", "r_r_bias"):
                p.zero_()  # Linear, LayerNorm, output and cluster biases; the global r_w/r_r biases are drawn
            else:
                p.normal_(0.0, INIT_STD)
    return model.train()


class Lamb:
    """hetseq's "lamb" (docs/optimization.md) with weight decay 0 and the trust ratio on every tensor:
    d = max(1, ||g|| / clip); m = b1·m + (1-b1)·g/d; v = b2·v + (1-b2)·(g/d)²;
    u = (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps); p -= lr·||p||/||u||·u (lr·u when a norm is 0)."""

    def __init__(self, params, lr=0.01, betas=(0.9, 0.999), eps=1e-6, clip=CLIP):
        self.params = [p for p in params if p.requires_grad]
        self.lr, self.betas, self.eps, self.clip = lr, betas, eps, clip
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.t = 0

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self):
        if self.params[0].is_cuda:
            return self.step_on_device()
        self.t += 1
        b1, b2 = self.betas
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in self.params]))
        d = float(norm) / self.clip if self.clip > 0 and float(norm) > self.clip else 1.0
        c1, c2 = 1.0 - b1 ** self.t, 1.0 - b2 ** self.t
        for p, m, v in zip(self.params, self.m, self.v):
            g = p.grad
            m.mul_(b1).add_(g, alpha=(1 - b1) / d)
            v.mul_(b2).addcmul_(g, g, value=(1 - b2) / (d * d))
            u = (m / c1).div_((v / c2).sqrt_().add_(self.eps))  # [same shape as p]
            pn, un = float(torch.linalg.vector_norm(p)), float(torch.linalg.vector_norm(u))
            p.sub_(u, alpha=self.lr * pn / un if pn > 0 and un > 0 else self.lr)

    @torch.no_grad()
    def step_on_device(self):
        """The same update with the clip factor and the trust ratios as device tensors: no host sync."""
        self.t += 1
        b1, b2 = self.betas
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in self.params]))
        d = torch.clamp(norm / self.clip, min=1.0) if self.clip > 0 else torch.ones_like(norm)
        c1, c2 = 1.0 - b1 ** self.t, 1.0 - b2 ** self.t
        for p, m, v in zip(self.params, self.m, self.v):
            g = p.grad / d
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            u = (m / c1).div_((v / c2).sqrt_().add_(self.eps))  # [same shape as p]
            pn, un = torch.linalg.vector_norm(p), torch.linalg.vector_norm(u)
            ratio = torch.where((pn > 0) & (un > 0), pn / un, torch.ones_like(pn))
            p.sub_(u * (self.lr * ratio))


class Adam:
    """torch.optim.Adam after clip_grad_norm_(0.25), NVIDIA's train.py with --optim adam."""

    def __init__(self, params, lr=0.00025):
        self.params = [p for p in params if p.requires_grad]
        self.opt = torch.optim.Adam(self.params, lr=lr)

    def zero_grad(self):
        self.opt.zero_grad(set_to_none=True)

    def step(self):
        torch.nn.utils.clip_grad_norm_(self.params, CLIP)
        self.opt.step()


def batchify(path, batch, tgt_len, updates):
    """The first `updates` segments of the train split as Transformer-XL batches it: [n_step, B]."""
    with h5py.File(path, "r") as f:
        n_token = int(f.attrs["vocab_size"])
        stream = torch.from_numpy(f["train"][:].astype("int64"))
    n_step = stream.numel() // batch
    if updates * tgt_len + 1 > n_step:
        sys.exit("%s: the train split has %d tokens, too few for %d updates of %d x %d" %
                 (path, stream.numel(), updates, batch, tgt_len))
    data = stream[:n_step * batch].view(batch, n_step).t().contiguous()  # [n_step, B]
    return n_token, [(data[k * tgt_len:(k + 1) * tgt_len], data[k * tgt_len + 1:(k + 1) * tgt_len + 1])
                     for k in range(updates)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("lm_h5")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--tgt-len", type=int, default=192)
    ap.add_argument("--mem-len", type=int, default=192)
    ap.add_argument("--cutoffs", default="19997,29997")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--optim", choices=("lamb", "adam"), default="lamb")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--precision", choices=("fp32", "tf32", "bf16", "fp16"), default="fp32")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (PyTorch >= 2)")
    args = ap.parse_args()
    args.cutoffs = [int(c) for c in args.cutoffs.split(",") if c]
    if min(args.threads, args.layers, args.batch, args.tgt_len, args.steps) < 1 or args.warmup < 0 or args.mem_len < 0:
        sys.exit("threads, layers, batch, tgt-len and steps must be >= 1; warmup and mem-len >= 0")
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if args.compile and tp.compile_note():
        sys.exit(tp.compile_note())
    autocast, note = tp.autocast(device, args.precision)
    fp16_scaling, loss_scale = cuda and args.precision == "fp16" and note is None, 2.0 ** 16
    sync = tp.synchronizer(device)

    n_token, segments = batchify(args.lm_h5, args.batch, args.tgt_len, args.warmup + args.steps)
    segments = [(d.to(device), t.to(device)) for d, t in segments]
    model = build(n_token, args).to(device)
    opt = Lamb(model.parameters()) if args.optim == "lamb" else Adam(model.parameters())
    n_params = sum(p.numel() for p in model.parameters())
    run = torch.compile(model) if args.compile else model

    mems, times, fwd_bwd, losses = None, [], [], []
    for k, (data, target) in enumerate(segments):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad()
        with autocast():
            nll, mems = run(data, target, mems)  # nll [L, B]
            loss = nll.float().mean()
        (loss * loss_scale if fp16_scaling else loss).backward()
        t1 = time.perf_counter()
        if fp16_scaling:  # dynamic loss scaling: unscale, skip the step and halve the scale on an overflow
            grads = [p.grad for p in opt.params]
            torch._foreach_mul_(grads, 1.0 / loss_scale)
            if bool(torch.isfinite(torch.stack([g.abs().max() for g in grads])).all()):
                opt.step()
            else:
                loss_scale /= 2
        else:
            opt.step()
        sync()
        dt = time.perf_counter() - t0
        if k >= args.warmup:
            times.append(dt)
            fwd_bwd.append(t1 - t0)
            losses.append(float(loss))
    tokens = args.batch * args.tgt_len
    r = {"torch": torch.__version__, "threads": args.threads, "layers": args.layers, "batch": args.batch,
         "tgt_len": args.tgt_len, "mem_len": args.mem_len, "cutoffs": args.cutoffs, "n_token": n_token,
         "params": n_params, "optim": args.optim, "warmup": args.warmup, "steps": args.steps,
         "tokens_per_update": tokens, "tokens_per_sec": tokens * len(times) / sum(times),
         "ms_per_update_median": 1e3 * statistics.median(times), "ms_per_update": [1e3 * t for t in times],
         "ms_fwd_bwd_median": 1e3 * statistics.median(fwd_bwd),
         "loss_mean": sum(losses) / len(losses),
         "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
         "device": str(device), "precision": args.precision, "compiled": args.compile}
    r["peak_bytes"], r["peak_source"] = tp.peak(device)
    if note:
        r["note"] = note
    if not all(math.isfinite(x) for x in losses):
        sys.exit("the loss is not finite: %s" % losses)
    if args.json:
        print(json.dumps(r))
        return
    print("PyTorch %s TXL %d layers, %d x %d tokens, mem %d, vocab %d, %d params, %s, %d threads: "
          "%.1f tok/s  %.0f ms/update (fwd+bwd %.0f; median of %d after %d warm-up)  peak %.0f MiB  loss %.3f"
          % (r["torch"], args.layers, args.batch, args.tgt_len, args.mem_len, n_token, n_params, args.optim,
             args.threads, r["tokens_per_sec"], r["ms_per_update_median"], r["ms_fwd_bwd_median"], args.steps,
             args.warmup,
             r["peak_bytes"] / 2**20, r["loss_mean"]))


if __name__ == "__main__":
    main()
