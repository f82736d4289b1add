#!/usr/bin/env python3
"""A hetseq checkpoint opened the way a PyTorch user would: h5py reads the names, shapes, values and
attributes; the /model tensors become a torch state_dict that loads strictly into the equivalent
torch.nn module. Then the other direction: tensors PyTorch wrote into the file are what hetseq loads,
bit for bit. The C side is tests/ref/checkpoint_driver (values from a formula recomputed here)."""
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import torch


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


class Net(torch.nn.Module):
    """The driver's model: Conv2d(1, 2, 3) then Linear(8, 4)."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 2, 3)
        self.fc1 = torch.nn.Linear(8, 4)


SHAPES = {"conv1.weight": (2, 1, 3, 3), "conv1.bias": (2,), "fc1.weight": (4, 8), "fc1.bias": (4,)}
ORDER = ["conv1.weight", "conv1.bias", "fc1.weight", "fc1.bias"]


def formula(t, shape):
    """Element k of tensor t, as the driver defines it: ((k % 17) - 8) / 8 + t / 128, in float32."""
    k = np.arange(int(np.prod(shape)))
    v = ((k % 17) - 8).astype(np.float32) * np.float32(0.125) + np.float32(t) * np.float32(0.0078125)
    return v.astype(np.float32).reshape(shape)


def main():
    builddir = os.environ.get("top_builddir", ".")
    driver = os.path.join(builddir, "tests", "ref", "checkpoint_driver")
    if not os.access(driver, os.X_OK):
        fail("driver not built: " + driver)
    work = tempfile.mkdtemp(prefix="hetseq-ckpt-h5py.")
    save_dir = os.path.join(work, "checkpoints")
    subprocess.run([driver, "write", save_dir], check=True)
    path = os.path.join(save_dir, "checkpoint_last.h5")
    check(os.path.isfile(path), "no checkpoint_last.h5 written")
    check(not os.path.exists(path + ".tmp"), "temporary file left behind")

    with h5py.File(path, "r") as f:
        # root attributes
        check(f.attrs["format"] == "hetseq-checkpoint", "format attribute: %r" % f.attrs["format"])
        check(int(f.attrs["version"]) == 1, "version attribute")
        check(isinstance(f.attrs["hetseq_version"], str) and f.attrs["hetseq_version"], "hetseq_version")
        check(set(f.keys()) == {"model", "optimizer", "train_state", "config"}, "groups: %s" % list(f.keys()))

        # /model: PyTorch names, exact shapes (no padding), float32, exact values
        check(set(f["model"].keys()) == set(SHAPES), "model tensors: %s" % list(f["model"].keys()))
        for t, name in enumerate(ORDER):
            d = f["model"][name]
            check(d.dtype == np.float32, "%s dtype %s" % (name, d.dtype))
            check(d.shape == SHAPES[name], "%s shape %s" % (name, d.shape))
            want = formula(t, SHAPES[name])
            check(np.array_equal(d[()], want), "%s values differ" % name)

        # /optimizer: name, step, one group per state buffer with the same tensor names
        opt = f["optimizer"]
        check(opt.attrs["name"] == "adam", "optimizer name %r" % opt.attrs["name"])
        check(int(opt.attrs["step"]) == 42 and opt.attrs["step"].dtype == np.int64, "optimizer step")
        check(set(opt.keys()) == {"exp_avg", "exp_avg_sq"}, "optimizer states %s" % list(opt.keys()))
        for t, name in enumerate(ORDER):
            w = formula(t, SHAPES[name])
            check(np.array_equal(opt["exp_avg"][name][()], w / np.float32(2)), "exp_avg/" + name)
            check(np.array_equal(opt["exp_avg_sq"][name][()], w * w), "exp_avg_sq/" + name)

        # /train_state: one attribute per field, integer fields exact (seed above 2^63 stays unsigned)
        ts = f["train_state"].attrs
        want_state = {"epoch": 2, "updates_in_epoch": 5, "num_updates": 17, "end_of_epoch": 0,
                      "lr_base": 0.01, "lr": 0.005, "meter_loss_sum": 12.5, "meter_sample_count": 1088.0,
                      "meter_gnorm_sum": 3.25, "meter_clip_count": 1.0, "meter_updates": 17.0,
                      "train_wall": 1.5, "seed": 18446744073709551557, "world_size": 4, "train_samples": 60000,
                      "loss_scale": 65536.0, "loss_scale_good_steps": 7, "loss_scale_skipped": 3}
        check(set(ts.keys()) == set(want_state), "train_state attributes %s" % sorted(ts.keys()))
        for k, v in want_state.items():
            check(ts[k] == v, "train_state.%s = %r, want %r" % (k, ts[k], v))
        check(ts["seed"].dtype == np.uint64, "seed dtype %s" % ts["seed"].dtype)
        check(ts["epoch"].dtype == np.int64 and ts["lr"].dtype == np.float64, "train_state dtypes")
        check(ts["loss_scale"].dtype == np.float64 and ts["loss_scale_skipped"].dtype == np.int64, "loss scaler dtypes")

        # /config: the effective configuration text
        cfg = f["config"].asstr()[()]
        check(cfg == 'task = "mnist";\nseed = 1;  # naïve\n', "config text %r" % cfg)

        # PyTorch: a strict state_dict load into the equivalent module
        state_dict = {name: torch.from_numpy(f["model"][name][()]) for name in f["model"]}
    net = Net()
    net.load_state_dict(state_dict, strict=True)
    check(torch.equal(net.fc1.weight.detach(), torch.from_numpy(formula(2, (4, 8)))), "torch fc1.weight")

    # The other direction: PyTorch's own tensors written into the checkpoint load into hetseq exactly.
    torch.manual_seed(0)
    fresh = Net()
    with h5py.File(path, "r+") as f:
        for name, tensor in fresh.state_dict().items():
            f["model"][name][...] = tensor.numpy()
    res = subprocess.run([driver, "dump", path], check=True, capture_output=True, text=True)
    lines = {ln.split(" ", 1)[0]: ln.split(" ")[1:] for ln in res.stdout.splitlines()}
    for name, tensor in fresh.state_dict().items():
        got = np.array([float.fromhex(x) for x in lines["model/" + name]], dtype=np.float32)
        check(np.array_equal(got.view(np.uint32), tensor.numpy().ravel().view(np.uint32)),
              "hetseq loaded different bits for " + name)
    check(lines["step"] == ["42"] and lines["seed"] == ["18446744073709551557"], "dump state lines")
    shutil.rmtree(work, ignore_errors=True)
    print("PASS: h5py and PyTorch read the hetseq checkpoint; hetseq reads PyTorch's tensors bit-exactly")


if __name__ == "__main__":
    main()
