#!/usr/bin/env python3
"""hetseq next to PyTorch on one GPU, the same shapes, the same day: the driver of bench/gpu/run.sh (which
picks the Python; see there for the usage). Every run is a fresh process, one after the other:

  model         shapes (full run)                                    precisions       PyTorch side
  BERT-large    conf/bert_large_phase1.cfg: L 128, P 20, B 64        fp32 tf32 bf16   bench/gpu/bert_hf.py
  BERT-base     conf/bert_base_phase1.cfg: the same                  fp16             (HF, eager + compiled)
  BERT-large p2 conf/bert_large_phase2.cfg: L 512, P 80, B 32        (the same)       (the same)
  TXL-base      conf/txl_base_wt103.cfg: 16 layers, d 512, 32 x 192  tf32 bf16       bench/txl_torch.py
                tokens, memory 192, 267 735 words, cutoffs WT103's                    (NVIDIA's MemTransformerLM)
  CNN           conf/mnist.cfg: MNISTNet, batch 64, Adadelta         fp32             bench/cnn_torch.py

hetseq runs `hetseq train` on the conf/ file with -o overrides (device, precision, data, one micro-batch per
update, WARMUP + STEPS updates, no validation, no checkpoints, a JSON metrics record per update); its rate is
that of the records after the warm-up (hetseq's meters time an update from taking its batch to the end of
the optimizer step). Data are made in a scratch directory: full-length BERT shards in NVIDIA's format
(tests/ref/make_bert_shards.py's writer), a Zipf-distributed WikiText-format corpus through `hetseq prep lm`,
random MNIST IDX files through `hetseq prep mnist`. PyTorch runs on the same shapes, synthetic or the same
lm.h5; WARMUP updates untimed, STEPS timed.

--quick: tiny shapes (BERT 2 layers, hidden 64, vocabulary 1000, L 32, P 5, B 4, phase 2 L 64, P 10, B 2; TXL 2 layers, 2 x 16
tokens, memory 16, 2000 words; CNN batch 8), 1 warm-up + 2 timed updates: a smoke run of every path,
for `--device cpu` on a machine without a GPU (hetseq on its CPU backend, PyTorch on the CPU).

Model FLOPs are src/tasks/model_flops.c's (hetseq's tflops/mfu log fields; multiply-add = 2 FLOPs;
embedding gathers, softmax, LayerNorm, activations not counted), the same count for both sides:
  BERT per sequence  6 T n (4 H^2 + 2 H I) + 12 n T^2 H + 6 P (H^2 + V H) + 6 (H^2 + 2 H)
                     (n layers, T tokens, P predictions, H hidden, I intermediate, V padded vocabulary;
                     = 3 x bench/bert_torch.py's forward count with the MLM head on the P rows)
  TXL per token      n [18 D (3 h d) + 12 (m/q) D (3 h d) + 18 (q + m) h d + 3 (2 h d D + 4 D I)] + 6 D c
                     (q segment, m memory, h heads of d, D d_model, I d_inner, c = head columns of the
                     adaptive softmax: cutoffs[0] + clusters)
  CNN per image      2 conv1 + 3 (conv2 + fc1 + fc2), conv = 2 out_h out_w c_out c_in k^2
MFU = model FLOP/s / the GPU's dense peak for the precision (PEAKS; an unknown GPU or the CPU: n/a).
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "ref"))
sys.path.insert(0, HERE)
import ncu_summary  # noqa: E402 (bench/gpu/ncu_summary.py)

# Dense (no sparsity) peak TFLOP/s of the data-sheets: fp32 (CUDA cores), tf32, bf16, fp16 (tensor cores).
# nvidia-smi names, matched in this order: the first pattern found in the name wins.
PEAKS = [
    ("H200 NVL", "H200 NVL", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}),
    ("H200", "H200 SXM", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),
    ("H100 PCIe", "H100 PCIe", {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0}),
    ("H100 80GB HBM3", "H100 SXM", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),
    ("H100 SXM", "H100 SXM", {"fp32": 67.0, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),
    ("A100", "A100", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}),
]


# What --only takes, in its default order.
MODELS = ("bert-large", "bert-base", "bert-large-p2", "txl", "cnn")


# Memory bandwidth of the data-sheets, GB/s, by the labels above (the A100's depends on its memory: none).
BANDWIDTH = {"H200 NVL": 4800.0, "H200 SXM": 4800.0, "H100 PCIe": 2000.0, "H100 SXM": 3350.0}


def gpu_peak(name):
    for pattern, label, peaks in PEAKS:
        if pattern in name:
            return label, peaks
    return None, None


# ---------------------------------------------------------------------------------------------- FLOPs
def bert_flops(n, H, I, V, T, P):
    return 6.0 * T * n * (4 * H * H + 2 * H * I) + 12.0 * n * T * T * H + 6.0 * P * (H * H + V * H) + \
        6.0 * (H * H + 2 * H)


def txl_flops(n, h, d, D, I, q, m, head_cols):
    nd = h * d
    per_layer = 3 * (2 * D * 3 * nd) + 2 * (m / q) * (2 * D * 3 * nd) + 3 * 6 * (q + m) * nd + \
        3 * (2 * nd * D + 4 * D * I)
    return n * per_layer + 6.0 * D * head_cols  # d_embed = d_model: no embedding projection


def cnn_flops():
    def conv(out_hw, c_in, c_out, k):
        return 2.0 * out_hw * out_hw * c_out * c_in * k * k
    return 2 * conv(26, 1, 32, 3) + 3 * (conv(24, 32, 64, 3) + 2.0 * 9216 * 128 + 2.0 * 128 * 10)


# ----------------------------------------------------------------------------------------------- data
def make_bert_shards(out, rows, T, P, vocab, seed):
    """Full-length rows ([CLS] A [SEP] B [SEP], no padding), P masked positions each, NVIDIA's format."""
    import make_bert_shards as mbs
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(seed)
    for split, n in (("training", rows), ("test", 8)):
        ids = rng.integers(min(1000, vocab // 2), vocab, size=(n, T)).astype(np.int32)
        ids[:, 0], ids[:, T // 2], ids[:, T - 1] = mbs.CLS, mbs.SEP, mbs.SEP
        mask = np.ones((n, T), np.int32)
        seg = np.zeros((n, T), np.int32)
        seg[:, T // 2 + 1:] = 1
        candidates = [i for i in range(1, T - 1) if i != T // 2]
        pos = np.stack([np.sort(rng.choice(candidates, size=P, replace=False)) for _ in range(n)]).astype(np.int32)
        lab = np.take_along_axis(ids, pos, axis=1)
        nsp = rng.integers(0, 2, size=n).astype(np.int32)
        mbs.write_shard(os.path.join(out, "wiki_%s_0.hdf5" % split), (ids, mask, seg, pos, lab, nsp))


def make_lm_text(out, vocab, train_tokens, seed, columns=1):
    """WikiText-format files: Zipf(1.1)-distributed words over `vocab` ranks (natural text's shape, so the
    adaptive softmax's clusters see text-like traffic), and every word once so the vocabulary is complete.

    A run cuts the train split into contiguous columns (its txl.batch_size) and a short run reads only the
    first segments of each. So the train file is `columns` chunks of equal length, one per column of a run
    with `columns` columns (or a divisor of it): train_tokens / columns Zipf words first, then that column's
    share of the every-word-once list. A single list at the end would fill whole columns of a many-column
    run with rare words (a run of 32 columns over WikiText-103's vocabulary: 13 of them), which would
    inflate the tail clusters' work far beyond natural text's."""
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(seed)
    words = np.array(["w%d" % i for i in range(vocab)])

    def stream(n):
        r = np.empty(0, dtype=np.int64)
        while len(r) < n:
            z = rng.zipf(1.1, size=4 * n)
            r = np.concatenate([r, z[z <= vocab] - 1])
        return r[:n]

    def lines(ranks):
        return "".join(" " + " ".join(words[ranks[k:k + 100]]) + " \n" for k in range(0, len(ranks), 100))

    per = -(-train_tokens // columns)
    share = -(-vocab // columns)
    once = np.arange(vocab)
    with open(os.path.join(out, "wiki.train.tokens"), "w") as f:
        for c in range(columns):
            mine = once[c * share:(c + 1) * share]
            # every chunk per + share words: the same lines, so the same tokens with the line ends' <eos>
            f.write(lines(np.concatenate([stream(per + share - len(mine)), mine])))
    for name in ("wiki.valid.tokens", "wiki.test.tokens"):
        with open(os.path.join(out, name), "w") as f:
            f.write(lines(stream(2000)))


def make_mnist_idx(out, n_train, n_test, seed):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(seed)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        with open(os.path.join(out, prefix + "-images-idx3-ubyte"), "wb") as f:
            f.write(np.array([0x803, n, 28, 28], ">i4").tobytes())
            f.write(rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8).tobytes())
        with open(os.path.join(out, prefix + "-labels-idx1-ubyte"), "wb") as f:
            f.write(np.array([0x801, n], ">i4").tobytes())
            f.write((np.arange(n) % 10).astype(np.uint8).tobytes())


# ----------------------------------------------------------------------------------------------- runs
class Runner:
    def __init__(self, args, work):
        self.args, self.work = args, work
        self.log = open(os.path.join(work, "runs.log"), "w")
        self.env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))

    def over_budget(self):
        """A note when --budget's seconds are spent (no run starts after that), else None."""
        b = self.args.budget
        if b is not None and time.time() - self.args.t0 >= b:
            return "not run: the --budget of %g s was spent" % b
        return None

    def run(self, name, cmd, poll_gpu_memory=False):
        """Runs cmd (its output in work/NAME.out); returns (rc, output, peak RSS bytes, nvidia-smi peaks: poll_smi)."""
        out_path = os.path.join(self.work, name + ".out")
        self.log.write("$ %s\n" % " ".join(cmd))
        self.log.flush()
        print("  %-34s" % name, end="", flush=True)
        t0 = time.time()
        with open(out_path, "w") as out:
            p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=self.work)
            smi_peak = [0, 0]
            stop = threading.Event()
            if poll_gpu_memory and shutil.which("nvidia-smi"):
                threading.Thread(target=poll_smi, args=(p.pid, smi_peak, stop), daemon=True).start()
            timer = threading.Timer(self.args.timeout, p.kill)
            timer.start()
            _, status, usage = os.wait4(p.pid, 0)
            timer.cancel()
            stop.set()
            p.returncode = os.waitstatus_to_exitcode(status)
        text = open(out_path).read()
        print(" %6.1f s%s" % (time.time() - t0, "" if p.returncode == 0 else "  FAILED (exit %d, %s)" %
                               (p.returncode, out_path)), flush=True)
        return p.returncode, text, usage.ru_maxrss * 1024, smi_peak


def smi_used_bytes():
    """memory.used of the GPU the runs get (the first of CUDA_VISIBLE_DEVICES, else 0), bytes; None if unknown."""
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
    try:
        q = subprocess.run(["nvidia-smi", "-i", gpu, "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return int(q) * 2**20 if q.isdigit() else None


def poll_smi(pid, peak, stop):
    """Every 0.2 s: the used_memory nvidia-smi reports for pid (its CUDA context included), the largest in
    peak[0]; where nvidia-smi does not see the process's pid (a container), the GPU's memory.used above its
    level before the run, in peak[1]."""
    base = smi_used_bytes()
    while not stop.is_set():
        try:
            q = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                               capture_output=True, text=True, timeout=5).stdout
            for line in q.splitlines():
                f = [x.strip() for x in line.split(",")]
                if len(f) == 2 and f[0] == str(pid) and f[1].isdigit():
                    peak[0] = max(peak[0], int(f[1]) * 2**20)
        except (OSError, subprocess.SubprocessError):
            return
        used = smi_used_bytes()
        if base is not None and used is not None:
            peak[1] = max(peak[1], used - base)
        stop.wait(0.2)


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def hetseq_result(runner, name, cfg, overrides, unit_key, warmup, flops_per_sample):
    a = runner.args
    if runner.over_budget():
        return {"note": runner.over_budget()}
    save = os.path.join(runner.work, "ck_" + name)
    cmd = [a.hetseq, "train", cfg]
    for kv in overrides + ["device=\"%s\"" % a.device, "checkpoint.save_dir=\"%s\"" % save, "checkpoint.no_save=true",
                           "training.disable_validation=true", "training.update_freq=1", "training.max_epoch=0",
                           "log.interval=1", "log.format=\"simple\"", "log.metrics_file=\"metrics.jsonl\""]:
        cmd += ["-o", kv]
    rc, text, rss, smi = runner.run("hetseq " + name, cmd, poll_gpu_memory=a.device == "cuda")
    if rc != 0:
        return {"error": "hetseq exit %d: %s" % (rc, text.strip().splitlines()[-1] if text.strip() else "")}
    if a.ncu:
        ncu_profile(runner, name, cmd, warmup)
    recs = []
    path = os.path.join(save, "metrics.jsonl")
    if os.path.exists(path):
        recs = [json.loads(x) for x in open(path) if '"type": "train"' in x]
    timed = [r for r in recs if r.get("num_updates", 0) > warmup and r.get(unit_key, 0) > 0]
    if not timed:
        return {"error": "hetseq wrote no train records after the warm-up (%s)" % path}
    # every update has the same number of samples: the rate over them is the harmonic mean of the records'
    rate = len(timed) / sum(1.0 / r[unit_key] for r in timed)
    res = {"rate": rate}
    dev_peak = [r["device_peak_bytes"] for r in recs if r.get("device_peak_bytes")]
    if a.device == "cuda" and dev_peak:
        res["peak_bytes"], res["peak_source"] = max(dev_peak), "device_peak_bytes"
    elif a.device == "cuda" and smi[0]:
        res["peak_bytes"], res["peak_source"] = smi[0], "nvidia-smi used_memory of its process, CUDA context included"
    elif a.device == "cuda" and smi[1]:
        res["peak_bytes"], res["peak_source"] = smi[1], "nvidia-smi memory.used above its level before the run"
    elif a.device != "cuda":
        res["peak_bytes"], res["peak_source"] = rss, "peak RSS"
    # hetseq's own FLOP count (its tflops field) must be the table's
    own = [r["tflops"] * 1e12 / r["samples_per_sec"] for r in timed if r.get("tflops") and r.get("samples_per_sec")]
    # (samples_per_sec has 2 decimals: its rounding allowed for)
    if own and abs(own[-1] / flops_per_sample - 1) > 0.01 + 0.01 / timed[-1]["samples_per_sec"]:
        res["note"] = "hetseq counts %.4g FLOPs per sample, the table %.4g" % (own[-1], flops_per_sample)
    return res


def ncu_profile(runner, name, cmd, warmup):
    """--ncu DIR: the run again, its updates WARMUP+1..WARMUP+N (N = --ncu-updates) under Nsight Compute
    (HETSEQ_PROFILE_UPDATES opens the CUDA profiler's range around them, ncu --profile-from-start off records
    only inside it: the steady state, not start-up): DIR/NAME.csv, and its table by kernel DIR/NAME.md
    (bench/gpu/ncu_summary.py). A separate run, so that ncu's replays never touch the timed figures."""
    a = runner.args
    if runner.over_budget():
        print("  %-34s %s" % ("ncu " + name, runner.over_budget()), flush=True)
        return
    first, last = warmup + 1, warmup + a.ncu_updates
    csv_path = os.path.join(a.ncu, name + ".csv")
    prof = [a.ncu_binary, "--target-processes", "all", "--profile-from-start", "off", "--metrics",
            ",".join((ncu_summary.TIME, ncu_summary.READ, ncu_summary.WRITE)), "--csv", "--log-file", csv_path]
    prof += cmd + ["-o", "training.max_update=%d" % last]
    runner.env["HETSEQ_PROFILE_UPDATES"] = "%d-%d" % (first, last)
    try:
        rc, text, _, _ = runner.run("ncu " + name, prof)
    finally:
        del runner.env["HETSEQ_PROFILE_UPDATES"]
    md = None
    if rc == 0 and os.path.exists(csv_path):
        md = ncu_summary.summarize(ncu_summary.read_csv(csv_path), last - first + 1, 40, a.peak_gbs, False,
                                   "hetseq %s, updates %d-%d" % (name, first, last))
    if md is None:
        print("  ncu %s: no kernel profile (exit %d; %s)" % (name, rc, os.path.join(runner.work, "ncu " + name + ".out")),
              flush=True)
        return
    with open(os.path.join(a.ncu, name + ".md"), "w") as f:
        f.write(md)


def torch_result(runner, name, cmd, rate_key):
    if runner.args.no_pytorch:
        return {"note": "not run: --no-pytorch"}
    if runner.over_budget():
        return {"note": runner.over_budget()}
    rc, text, _, _ = runner.run("pytorch " + name, [runner.args.python] + cmd)
    r = last_json(text)
    if rc != 0 or r is None:
        lines = [x for x in text.strip().splitlines() if x.strip()]
        return {"error": "exit %d: %s" % (rc, lines[-1][:160] if lines else "no output")}
    res = {"rate": r[rate_key], "peak_bytes": r.get("peak_bytes"), "peak_source": r.get("peak_source")}
    if r.get("note"):
        res["note"] = r["note"]
    return res


def compile_available(python):
    q = subprocess.run([python, "-c", "import torch; print(hasattr(torch, 'compile')); print(torch.__version__)"],
                       capture_output=True, text=True)
    lines = q.stdout.split()
    if q.returncode != 0 or len(lines) < 2:
        return "no torch in %s" % python
    return None if lines[0] == "True" else "torch.compile needs PyTorch >= 2 (this is %s): not timed" % lines[1]


# ---------------------------------------------------------------------------------------------- table
def fmt(x, spec):
    return "n/a" if x is None else format(x, spec)


def cell3(values, spec):
    return " / ".join(fmt(v, spec) for v in values)


def table(rows, header_lines, notes_out):
    """Markdown: one line per model and precision."""
    lines = list(header_lines)
    lines.append("")
    lines.append("| model | precision | unit | hetseq | PyTorch eager | PyTorch compiled | hetseq / eager | "
                 "hetseq / compiled | model TFLOP/s (hetseq / eager / compiled) | MFU % (hetseq / eager / compiled) | "
                 "peak memory GiB (hetseq / eager / compiled) |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
    notes = []

    def mark(res):
        marks = []
        for text in ([res["error"]] if res.get("error") else []) + (res["note"].split("; ") if res.get("note") else []):
            if text not in notes:
                notes.append(text)
            marks.append(str(notes.index(text) + 1))
        return " [%s]" % ",".join(marks) if marks else ""

    for row in rows:
        sides = [row["hetseq"], row["eager"], row["compiled"]]
        rates = [s.get("rate") for s in sides]
        tflops = [None if r is None else r * row["flops"] / 1e12 for r in rates]
        peak = row["peak_tflops"]
        mfu = [None if t is None or not peak else 100.0 * t / peak for t in tflops]
        mem = [None if s.get("peak_bytes") is None else s["peak_bytes"] / 2**30 for s in sides]
        ratio = [None if rates[0] is None or r is None else rates[0] / r for r in rates[1:]]
        cells = ["%s%s" % (fmt(r, ".1f") if r is not None else ("failed" if s.get("error") else "n/a"), mark(s))
                 for r, s in zip(rates, sides)]
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            row["model"], row["precision"], row["unit"], cells[0], cells[1], cells[2],
            fmt(ratio[0], ".2f") + ("x" if ratio[0] is not None else ""),
            fmt(ratio[1], ".2f") + ("x" if ratio[1] is not None else ""),
            cell3(tflops, ".3g"), cell3(mfu, ".3g"), cell3(mem, ".2f")))
    lines.append("")
    sources = sorted({"%s: %s" % (side, s["peak_source"]) for row in rows
                      for side, s in (("hetseq", row["hetseq"]), ("PyTorch", row["eager"]), ("PyTorch", row["compiled"]))
                      if s.get("peak_source")})
    if sources:
        lines.append("Peak memory: " + "; ".join(sources) + ".")
    for i, n in enumerate(notes):
        lines.append("[%d] %s" % (i + 1, n))
    notes_out.extend(notes)
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description="hetseq next to PyTorch on one GPU (bench/gpu/run.sh)")
    ap.add_argument("build_dir")
    ap.add_argument("--quick", action="store_true", help="tiny shapes, 1 warm-up + 2 timed updates (a smoke run)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--out", help="also write the table to this file")
    ap.add_argument("--warmup", type=int, help="untimed updates (default 10, --quick 1)")
    ap.add_argument("--steps", type=int, help="timed updates (default 30, --quick 2)")
    ap.add_argument("--only", default="bert-large,bert-base,bert-large-p2,txl,cnn",
                    help="comma list of bert-large,bert-base,bert-large-p2 (phase-2 shapes),txl,cnn, run in that order")
    ap.add_argument("--precisions", default="fp32,tf32,bf16,fp16",
                    help="comma list of fp32,tf32,bf16,fp16, run in that order where a model has them "
                         "(TXL: tf32, bf16; the CNN: fp32)")
    ap.add_argument("--budget", type=float, help="seconds: no run starts after this much time (its cells say so); "
                    "with --out every finished row is in the file as it ends")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "0") or 0),
                    help="OMP_NUM_THREADS of every run (default: the environment's, else 1 with --quick, else 8)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds one run may take (default 1800)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory (data, logs)")
    ap.add_argument("--hetseq", help="the hetseq binary (default BUILD_DIR/hetseq; e.g. BUILD_DIR/tests/cuda/hetseq_emu, "
                    "hetseq on the emulated CUDA device, to try the script's device path without a GPU)")
    ap.add_argument("--no-pytorch", action="store_true", help="hetseq's runs only (e.g. with --ncu: a profile)")
    ap.add_argument("--ncu", metavar="DIR", help="also profile each hetseq run's first N updates after the warm-up "
                    "in a separate run under Nsight Compute ($NCU, else ncu): DIR/NAME.csv and its table by kernel "
                    "DIR/NAME.md (bench/gpu/ncu_summary.py)")
    ap.add_argument("--ncu-updates", type=int, default=2, help="updates each --ncu run profiles (default 2)")
    ap.add_argument("--peak-gbs", type=float, help="the GPU's memory bandwidth in GB/s for --ncu's tables (default: "
                    "the data-sheet's for a GPU in BANDWIDTH)")
    a = ap.parse_args()
    a.python = sys.executable
    a.warmup = a.warmup if a.warmup is not None else (1 if a.quick else 10)
    a.steps = a.steps if a.steps is not None else (2 if a.quick else 30)
    a.threads = a.threads or (1 if a.quick else 8)
    a.hetseq = os.path.abspath(a.hetseq or os.path.join(a.build_dir, "hetseq"))
    a.t0 = time.time()
    only = list(dict.fromkeys(a.only.split(",")))
    precisions = list(dict.fromkeys(a.precisions.split(",")))
    if not set(only) <= set(MODELS) or \
            not set(precisions) <= {"fp32", "tf32", "bf16", "fp16"} or a.warmup < 0 or a.steps < 1:
        sys.exit("--only takes " + ",".join(MODELS) + "; --precisions fp32,tf32,bf16,fp16; --warmup >= 0, "
                 "--steps >= 1")
    if not os.access(a.hetseq, os.X_OK):
        sys.exit("%s not built: run 'make hetseq' in %s" % (a.hetseq, a.build_dir))
    a.ncu_binary = os.environ.get("NCU", "ncu")
    if a.ncu:
        if a.ncu_updates < 1:
            sys.exit("--ncu-updates takes a count >= 1")
        if not shutil.which(a.ncu_binary):
            sys.exit("--ncu: %s not found (Nsight Compute; set NCU to its path)" % a.ncu_binary)
        a.ncu = os.path.abspath(a.ncu)
        os.makedirs(a.ncu, exist_ok=True)

    if a.device == "cuda":
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                           capture_output=True, text=True) if shutil.which("nvidia-smi") else None
        if q is None or q.returncode != 0 or not q.stdout.strip():
            sys.exit("--device cuda: nvidia-smi finds no GPU (on a machine without one: --device cpu --quick)")
        gpu = q.stdout.strip().splitlines()[0]
        peak_label, peaks = gpu_peak(gpu.split(",")[0])
        a.peak_gbs = a.peak_gbs or BANDWIDTH.get(peak_label)
    else:
        cpu = [x.split(":", 1)[1].strip() for x in open("/proc/cpuinfo") if x.startswith("model name")]
        gpu = "no GPU: the CPU (%s), %d threads per run" % (cpu[0] if cpu else platform.machine(), a.threads)
        peak_label, peaks = None, None
    no_compile = "not run: --no-pytorch" if a.no_pytorch else compile_available(a.python)
    work = tempfile.mkdtemp(prefix="hetseq-gpu-bench.")
    runner = Runner(a, work)
    updates = a.warmup + a.steps
    q = a.quick
    W, S = a.warmup, a.steps
    print("scratch directory %s (%s)" % (work, "kept" if a.keep else "removed at the end"), flush=True)

    # shapes: BERT (micro-batch, sequence length, masked positions) by phase
    bert_shapes = {1: (4, 32, 5) if q else (64, 128, 20), 2: (2, 64, 10) if q else (32, 512, 80)}
    tiny = os.path.join(work, "bert_config_tiny.json")
    with open(tiny, "w") as f:
        json.dump({"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
                   "hidden_size": 64, "initializer_range": 0.02, "intermediate_size": 256,
                   "max_position_embeddings": 64, "num_attention_heads": 2, "num_hidden_layers": 2,
                   "type_vocab_size": 2, "vocab_size": 1000}, f)
    txl_layers, txl_B, txl_q, txl_m = (2, 2, 16, 16) if q else (16, 32, 192, 192)
    txl_vocab, txl_cutoffs = (2000, [500, 1000]) if q else (267734, [19997, 39997, 199997])
    cnn_B = 8 if q else 64

    rows = []
    t_start = datetime.datetime.utcnow()

    def bert(model):
        size, phase = model.split("-")[1], 2 if model.endswith("-p2") else 1
        B, T, P = bert_shapes[phase]
        cfg_file = os.path.join(TOP, "conf", "bert_%s_phase%d.cfg" % (size, phase))
        json_cfg = tiny if q else os.path.join(TOP, "conf", "bert_config_%s.json" % size)
        c = json.load(open(json_cfg))
        V = (c["vocab_size"] + 7) // 8 * 8
        flops = bert_flops(c["num_hidden_layers"], c["hidden_size"], c["intermediate_size"], V, T, P)
        data = os.path.join(work, "bert_shards_L%d_P%d" % (T, P))
        for prec in precisions:  # every precision is a BERT precision (checked above)
            if not os.path.isdir(data) and not runner.over_budget():
                make_bert_shards(data, B * (updates + 2), T, P, c["vocab_size"], 12345)
            name = "%s %s" % (model, prec)
            # phase 2's file starts from phase 1's checkpoint: the benchmark starts from its initialisation
            hs = hetseq_result(runner, name.replace(" ", "_"), cfg_file, [
                "precision=\"%s\"" % prec, "data.path=\"%s\"" % data, "model.config_file=\"%s\"" % json_cfg,
                "checkpoint.init_checkpoint=\"\"", "training.max_sentences=%d" % B,
                "training.max_update=%d" % updates], "samples_per_sec", W, flops)
            base = ["%s/bert_hf.py" % HERE, "--config", json_cfg, "--batch", str(B), "--seq-len", str(T), "--pred",
                    str(P), "--warmup", str(W), "--steps", str(S), "--device", a.device, "--precision", prec,
                    "--threads", str(a.threads)]
            eager = torch_result(runner, name + " eager", base, "seq_per_sec")
            comp = {"note": no_compile} if no_compile else torch_result(runner, name + " compiled", base + ["--compile"],
                                                                        "seq_per_sec")
            label = model.replace("bert", "BERT").replace("-p2", " phase 2")
            add_row({"model": label, "precision": prec, "unit": "seq/s", "flops": flops,
                     "hetseq": hs, "eager": eager, "compiled": comp, "peak_tflops": peaks.get(prec) if peaks else None})

    def txl():
        text = os.path.join(work, "lm_text")
        lm = os.path.join(work, "lm")
        flops = txl_flops(txl_layers, 8, 64, 512, 2048, txl_q, txl_m, txl_cutoffs[0] + len(txl_cutoffs))
        prep = None
        for prec in (x for x in precisions if x in ("tf32", "bf16")):
            name = "txl-base %s" % prec
            if prep is None and not runner.over_budget():
                make_lm_text(text, txl_vocab, txl_B * (txl_q * updates + 2), 1111, txl_B)
                prep = runner.run("hetseq prep lm", [a.hetseq, "prep", "lm", "--in", text, "--out", lm])
            if prep is None:
                hs = eager = comp = {"note": runner.over_budget()}
            elif prep[0] != 0:
                hs = eager = comp = {"error": "hetseq prep lm failed: %s" % prep[1].strip().splitlines()[-1:]}
            else:
                hs = hetseq_result(runner, name.replace(" ", "_"), os.path.join(TOP, "conf", "txl_base_wt103.cfg"), [
                    "precision=\"%s\"" % prec, "data.path=\"%s\"" % lm, "txl.n_layer=%d" % txl_layers,
                    "txl.batch_size=%d" % txl_B, "txl.tgt_len=%d" % txl_q, "txl.mem_len=%d" % txl_m,
                    "txl.eval_tgt_len=%d" % txl_q, "txl.eval_batch_size=%d" % txl_B,
                    "txl.cutoffs=[%s]" % ",".join(map(str, txl_cutoffs)), "training.max_update=%d" % updates],
                    "tokens_per_sec", W, flops)
                base = [os.path.join(TOP, "bench", "txl_torch.py"), os.path.join(lm, "lm.h5"), "--threads",
                        str(a.threads), "--layers", str(txl_layers), "--batch", str(txl_B), "--tgt-len", str(txl_q),
                        "--mem-len", str(txl_m), "--cutoffs", ",".join(map(str, txl_cutoffs)), "--warmup", str(W),
                        "--steps", str(S), "--optim", "lamb", "--json", "--device", a.device, "--precision", prec]
                eager = torch_result(runner, name + " eager", base, "tokens_per_sec")
                comp = {"note": no_compile} if no_compile else torch_result(runner, name + " compiled",
                                                                            base + ["--compile"], "tokens_per_sec")
            add_row({"model": "TXL-base", "precision": prec, "unit": "tokens/s", "flops": flops, "hetseq": hs,
                     "eager": eager, "compiled": comp, "peak_tflops": peaks.get(prec) if peaks else None})

    def cnn():
        if "fp32" not in precisions:
            return
        idx = os.path.join(work, "mnist_idx")
        h5 = os.path.join(work, "mnist.h5")
        flops = cnn_flops()
        if runner.over_budget():
            hs = eager = comp = {"note": runner.over_budget()}
        else:
            make_mnist_idx(idx, cnn_B * (updates + 2), 64, 1)
            rc, out, _, _ = runner.run("hetseq prep mnist", [a.hetseq, "prep", "mnist", "--in", idx, "--out", h5])
            if rc != 0:
                hs = eager = comp = {"error": "hetseq prep mnist failed: %s" % out.strip().splitlines()[-1:]}
            else:
                hs = hetseq_result(runner, "cnn_fp32", os.path.join(TOP, "conf", "mnist.cfg"), [
                    "precision=\"fp32\"", "data.path=\"%s\"" % h5, "training.max_sentences=%d" % cnn_B,
                    "training.max_update=%d" % updates], "samples_per_sec", W, flops)
                base = [os.path.join(TOP, "bench", "cnn_torch.py"), str(cnn_B), str(S), "--warmup", str(W), "--device",
                        a.device, "--precision", "fp32", "--optim", "adadelta", "--json"]
                eager = torch_result(runner, "cnn fp32 eager", base, "images_per_sec")
                comp = {"note": no_compile} if no_compile else torch_result(runner, "cnn fp32 compiled",
                                                                            base + ["--compile"], "images_per_sec")
        add_row({"model": "CNN (MNISTNet)", "precision": "fp32", "unit": "images/s", "flops": flops, "hetseq": hs,
                 "eager": eager, "compiled": comp, "peak_tflops": peaks.get("fp32") if peaks else None})

    # the header: what ran where (hetseq's and PyTorch's versions asked once, before the runs)
    v = subprocess.run([a.hetseq, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    tv = subprocess.run([a.python, "-c", "import torch; print(torch.__version__)\ntry:\n import transformers; "
                         "print(transformers.__version__)\nexcept ImportError: print('none')"],
                        capture_output=True, text=True).stdout.split()

    def header():
        return [
            "## hetseq and PyTorch, %s, %s" % (gpu.split(",")[0] if a.device == "cuda" else "CPU",
                                               t_start.strftime("%Y-%m-%d")),
            "",
            "- device: %s; %s" % (gpu, "MFU against the %s dense peaks (TFLOP/s): %s" % (peak_label, ", ".join(
                "%s %g" % kv for kv in peaks.items())) if peaks else "MFU: n/a (no peak known for this device)"),
            "- hetseq: %s; PyTorch %s, transformers %s (%s)" % (v[0] if v else "?", tv[0] if tv else "?",
                                                                tv[1] if len(tv) > 1 else "?", a.python),
            "- %s: BERT L %d, P %d, micro-batch %d%s (phase 2: L %d, P %d, micro-batch %d); TXL %d layers, %d x %d "
            "tokens, memory %d, %d words, cutoffs %s; CNN batch %d" % (
                "quick (smoke) shapes" if q else "shapes", bert_shapes[1][1], bert_shapes[1][2], bert_shapes[1][0],
                " (2 layers, hidden 64, vocabulary 1000)" if q else "", bert_shapes[2][1], bert_shapes[2][2],
                bert_shapes[2][0], txl_layers, txl_B, txl_q, txl_m, txl_vocab, txl_cutoffs, cnn_B),
            "- %d warm-up + %d timed updates per run, one process per run, %d CPU threads; hetseq: LAMB (BERT, TXL), "
            "Adadelta (CNN); PyTorch: AdamW (BERT; fused on a GPU), LAMB (TXL), Adadelta (CNN)" % (W, S, a.threads),
            "- model FLOPs: src/tasks/model_flops.c's count (bench/gpu/gpu_bench.py's docstring), the same for every "
            "side: " + ", ".join("%s %.4g per %s" % (m, f, u) for m, f, u in (
                ("BERT-large", next((r["flops"] for r in rows if r["model"] == "BERT-large"), None), "sequence"),
                ("BERT-base", next((r["flops"] for r in rows if r["model"] == "BERT-base"), None), "sequence"),
                ("BERT-large phase 2", next((r["flops"] for r in rows if r["model"] == "BERT-large phase 2"), None),
                 "sequence"),
                ("TXL", next((r["flops"] for r in rows if r["model"] == "TXL-base"), None), "token"),
                ("CNN", next((r["flops"] for r in rows if r["model"].startswith("CNN")), None), "image")) if f),
        ]

    def add_row(row):
        """The row into the table, and the table so far into --out: a run cut short (a job's time limit) keeps
        every row it finished."""
        rows.append(row)
        if a.out:
            with open(a.out, "w") as f:
                f.write(table(rows, header() + ["- partial: %d row(s) so far, the run goes on" % len(rows)], []))

    for model in only:
        if model.startswith("bert-"):
            bert(model)
        elif model == "txl":
            txl()
        else:
            cnn()

    head = header()
    notes = []
    md = table(rows, head, notes)
    print()
    print(md, end="")
    if a.out:
        with open(a.out, "w") as f:
            f.write(md)
        print("(written to %s)" % a.out)
    failed = [r for r in rows for s in (r["hetseq"], r["eager"], r["compiled"]) if s.get("error")]
    runner.log.close()
    if failed or a.keep:
        print("logs: %s" % work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
