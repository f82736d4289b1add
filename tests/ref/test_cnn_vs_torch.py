"""A user moving from HetSeq checks that hetseq's MNIST CNN computes what PyTorch computes: the same
weights and the same Fashion-MNIST batch of 64 give the same summed NLL loss and the same gradient for
every parameter (dropout off).

Tolerance: 1e-4 relative. For the loss, |c - t| / |t|. For a gradient tensor, max|g_c - g_t| divided by
max|g_t| (relative to the tensor's largest magnitude, so near-zero entries do not blow up the ratio).
Both sides compute in float32 with different summation orders; the largest sums (conv2.weight: 36864
terms) keep float32 rounding near 1e-5 of the tensor's scale, while a wrong formula is off by O(1)."""
import gzip
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 64
MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST pixel statistics
TOL = 1e-4


class MNISTNet(nn.Module):
    """HetSeq's MNISTNet with the dropouts left out (equivalent to p = 0 / eval mode)."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def read_idx(path, offset):
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), dtype=np.uint8, offset=offset)


def fashion_mnist_batch(directory):
    images = read_idx(os.path.join(directory, "train-images-idx3-ubyte.gz"), 16).reshape(-1, 1, 28, 28)
    labels = read_idx(os.path.join(directory, "train-labels-idx1-ubyte.gz"), 8)
    x = (images[:BATCH].astype(np.float32) / 255.0 - MEAN) / STD
    return x.astype(np.float32), labels[:BATCH].astype(np.int32)


def main():
    data_dir = os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")
    if not os.path.exists(os.path.join(data_dir, "train-images-idx3-ubyte.gz")):
        print(f"SKIP: Fashion-MNIST not found in {data_dir} (set FASHION_MNIST_DIR)")
        return 77
    helper = os.path.join(os.environ.get("HS_REF_HELPER_DIR") or os.path.join(os.environ.get("top_builddir", "."), "tests", "ref"), "cnn_ref_grads")
    if not os.access(helper, os.X_OK):
        print(f"FAIL: {helper} not built (make check builds it)")
        return 1

    torch.manual_seed(1234)
    torch.set_num_threads(1)
    net = MNISTNet()
    x_np, labels_np = fashion_mnist_batch(data_dir)
    x, labels = torch.from_numpy(x_np), torch.from_numpy(labels_np.astype(np.int64))
    loss = F.nll_loss(net(x), labels, reduction="sum")
    loss.backward()

    with tempfile.TemporaryDirectory() as tmp:
        inp, out = os.path.join(tmp, "in.h5"), os.path.join(tmp, "out.h5")
        with h5py.File(inp, "w") as f:
            f["x"] = x_np
            f["labels"] = labels_np
            for name, p in net.named_parameters():
                f[f"params/{name}"] = p.detach().numpy()
        subprocess.run([helper, inp, out], check=True)
        with h5py.File(out, "r") as f:
            c_loss = float(f["loss"][()])
            c_grads = {name: f[f"grad/{name}"][()] for name, _ in net.named_parameters()}

    failures = 0
    t_loss = loss.item()
    rel = abs(c_loss - t_loss) / abs(t_loss)
    print(f"loss (sum of NLL over {BATCH}): hetseq {c_loss:.7f} torch {t_loss:.7f} rel err {rel:.2e}")
    failures += rel > TOL
    for name, p in net.named_parameters():
        t = p.grad.numpy()
        c = c_grads[name]
        if c.shape != t.shape:
            print(f"{name}: shape {c.shape} != torch {t.shape}")
            failures += 1
            continue
        rel = np.abs(c - t).max() / np.abs(t).max()
        print(f"grad {name:14s} {str(t.shape):18s} max|diff|/max|torch| = {rel:.2e}")
        failures += rel > TOL
    print("PASS" if failures == 0 else f"FAIL: {failures} mismatches above {TOL}")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
