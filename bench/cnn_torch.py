"""PyTorch's training throughput for HetSeq's MNISTNet: images/s for forward + backward + optimizer step at
the same batch size, with torch.set_num_threads(OMP_NUM_THREADS). Synthetic inputs, like cnn_bench.
--device cuda runs it on the GPU (torch.cuda.synchronize() around the timed iterations); --precision
tf32 sets torch.backends.cuda.matmul.allow_tf32 and cuDNN's, bf16/fp16 run the forward pass and the loss
under torch.autocast (fp16: dynamic loss scaling through torch.cuda.amp.GradScaler on a GPU); --compile
wraps the model in torch.compile (PyTorch >= 2); --optim adadelta is conf/mnist.cfg's optimizer (lr 1.01,
rho 0.9, eps 1e-6), sgd (lr 1e-3) the default; --json prints one JSON object (images_per_sec, peak_bytes:
torch.cuda.max_memory_allocated() on a GPU, peak RSS on the CPU).
  usage: /usr/bin/python3 cnn_torch.py [BATCH [ITERATIONS]] [--warmup W] [--device cpu|cuda]
             [--precision fp32|tf32|bf16|fp16] [--compile] [--optim sgd|adadelta] [--json]"""
import argparse
import json
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_precision as tp  # bench/torch_precision.py


class MNISTNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout2d(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = self.dropout1(F.max_pool2d(x, 2))
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return F.log_softmax(self.fc2(self.dropout2(x)), dim=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("batch", nargs="?", type=int, default=64)
    ap.add_argument("iterations", nargs="?", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", choices=("fp32", "tf32", "bf16", "fp16"), default="fp32")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--optim", choices=("sgd", "adadelta"), default="sgd")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if min(args.batch, args.iterations) < 1 or args.warmup < 0:
        sys.exit("batch and iterations must be >= 1, warmup >= 0")
    threads = int(os.environ.get("OMP_NUM_THREADS", "2"))
    torch.set_num_threads(threads)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if args.compile and tp.compile_note():
        sys.exit(tp.compile_note())
    autocast, note = tp.autocast(device, args.precision)
    torch.manual_seed(1)
    model = MNISTNet().to(device).train()
    run = torch.compile(model) if args.compile else model
    opt = (torch.optim.Adadelta(model.parameters(), lr=1.01, rho=0.9, eps=1e-6) if args.optim == "adadelta"
           else torch.optim.SGD(model.parameters(), lr=1e-3))
    scaler = torch.cuda.amp.GradScaler(enabled=cuda and args.precision == "fp16" and note is None)
    x = (torch.rand(args.batch, 1, 28, 28) * 3.0 - 0.8).to(device)
    y = (torch.arange(args.batch) % 10).to(device)
    sync = tp.synchronizer(device)
    for it in range(args.warmup + args.iterations):
        if it == args.warmup:
            sync()
            t0 = time.perf_counter()
        opt.zero_grad()
        with autocast():
            loss = F.nll_loss(run(x).float(), y, reduction="sum")
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    sync()
    seconds = time.perf_counter() - t0
    rate = args.batch * args.iterations / seconds
    if args.json:
        peak_bytes, peak_source = tp.peak(device)
        r = {"images_per_sec": rate, "ms_per_iteration": 1e3 * seconds / args.iterations, "loss": float(loss),
             "torch": torch.__version__, "device": str(device), "precision": args.precision,
             "compiled": args.compile, "optim": args.optim, "peak_bytes": peak_bytes, "peak_source": peak_source}
        if note:
            r["note"] = note
        print(json.dumps(r))
        return
    print(f"PyTorch CNN training: {rate:8.1f} images/s  (batch {args.batch}, {threads} threads, "
          f"{args.iterations} iterations, {1e3 * seconds / args.iterations:.2f} ms/iteration, torch {torch.__version__})")


if __name__ == "__main__":
    main()
