"""PyTorch's CPU training throughput for HetSeq's MNISTNet: images/s for forward + backward + SGD step at
the same batch size, with torch.set_num_threads(OMP_NUM_THREADS). Synthetic inputs, like cnn_bench.
  usage: /usr/bin/python3 cnn_torch.py [BATCH [ITERATIONS]]"""
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


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
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    threads = int(os.environ.get("OMP_NUM_THREADS", "2"))
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    model = MNISTNet().train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.rand(batch, 1, 28, 28) * 3.0 - 0.8
    y = torch.arange(batch) % 10
    warmup = 10
    for it in range(warmup + iterations):
        if it == warmup:
            t0 = time.perf_counter()
        opt.zero_grad()
        F.nll_loss(model(x), y, reduction="sum").backward()
        opt.step()
    seconds = time.perf_counter() - t0
    print(f"PyTorch CNN training: {batch * iterations / seconds:8.1f} images/s  (batch {batch}, {threads} threads, "
          f"{iterations} iterations, {1e3 * seconds / iterations:.2f} ms/iteration, torch {torch.__version__})")


if __name__ == "__main__":
    main()
