#!/usr/bin/env python3
"""A user pre-training BERT with optimizer.name = "lamb" gets the update NVIDIA's runs got from apex
FusedLAMB (NVLAMB), and with "adamw" the update torch.optim.AdamW gives with the usual no-decay
grouping. hetseq's optimizer (tests/ref/lamb_driver, CPU backend, called as the trainer calls it) is
compared with a reference written below in torch float32 operations from the FusedLAMB algorithm:

  global norm over all gradients; d = norm/max_norm if norm > max_norm else 1
  per element: g' = g/d; m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2
               u = (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd*w    (wd*w only where wd != 0)
  per tensor:  ratio = lr*||w||/||u|| (norms before the update) if both are non-zero, else lr;
               the ratio is used only on tensors with weight decay, unless trust_ratio_on_no_decay;
               w -= ratio*u   (other tensors: w -= lr*u)

The parameter table has BERT's names; no-decay tensors are those whose name contains 'bias', 'gamma',
'beta' or 'LayerNorm' (NVIDIA's run_pretraining.py rule), and the driver gets that flag per tensor.
Three steps: clipping active on steps 1 and 3, inactive on step 2. One no-decay tensor starts at zero
(the ratio falls back to lr when ||w|| = 0) and the pooler weight too; one LayerNorm bias has zero
parameters and zero gradients throughout (||u|| = 0). Parameters, exp_avg and exp_avg_sq are compared
after every step (max |diff| / max |ref| <= 1e-6). The embedding table spans several summation blocks,
and the driver's output must be bit-identical with 1 and 2 OpenMP threads.
"""
import math
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError as e:  # pragma: no cover
    print("SKIP: needs numpy and torch (%s)" % e)
    sys.exit(77)

RTOL = 1e-6
DRIVER = os.path.join(os.environ.get("top_builddir", "."), "tests", "ref", "lamb_driver")
NO_DECAY = ("bias", "gamma", "beta", "LayerNorm")

# name, numel, how the parameters start: "normal" N(0, 0.02), "ones", "zeros"
TENSORS = [
    ("bert.embeddings.word_embeddings.weight", 1000 * 64, "normal"),
    ("bert.embeddings.LayerNorm.weight", 64, "ones"),
    ("bert.embeddings.LayerNorm.bias", 64, "zeros"),
    ("bert.encoder.layer.0.attention.self.query.weight", 64 * 64, "normal"),
    ("bert.encoder.layer.0.attention.self.query.bias", 64, "normal"),
    ("bert.encoder.layer.0.intermediate.dense.weight", 256 * 64, "normal"),
    ("bert.encoder.layer.0.output.LayerNorm.bias", 64, "zeros"),  # and zero gradients: u = 0
    ("bert.pooler.dense.weight", 64 * 64, "zeros"),
    ("cls.predictions.bias", 1000, "normal"),
    ("cls.seq_relationship.weight", 2 * 64, "normal"),
]
ZERO_GRAD = "bert.encoder.layer.0.output.LayerNorm.bias"
SIZES = [t[1] for t in TENSORS]
DECAY = [0 if any(k in t[0] for k in NO_DECAY) else 1 for t in TENSORS]
STEPS = 3
LRS = [6e-3, 4e-3, 5e-3]
MAX_NORM = 0.01
# global gradient norm per step: above MAX_NORM (clipped), below (not clipped), above. The norms are
# small on purpose: torch's clip_grad_norm_ coefficient max/(norm+1e-6) then differs from FusedLAMB's
# division by norm/max by 5e-5 relative, which the comparison of exp_avg can see.
GRAD_NORMS = [0.02, 0.005, 0.03]

failures = []


def make_data(seed):
    rng = np.random.RandomState(seed)
    p0 = []
    for name, k, init in TENSORS:
        p0.append({"normal": rng.randn(k) * 0.02, "ones": np.ones(k), "zeros": np.zeros(k)}[init].astype(np.float32))
    grads = []
    for s in GRAD_NORMS:
        g = [rng.randn(k) * (0.0 if name == ZERO_GRAD else 1.0) for name, k, _ in TENSORS]
        total = math.sqrt(sum(float(np.sum(x * x)) for x in g))
        grads.append([(x / total * s).astype(np.float32) for x in g])
    return p0, grads


def run_driver(name, p0, grads, betas, eps, wd, clip, trust_all, threads=1):
    n = sum(SIZES)
    spec = ",".join("%s:%d:%d" % (t[0], t[1], d) for t, d in zip(TENSORS, DECAY))
    with tempfile.TemporaryDirectory() as d:
        fin, fout = os.path.join(d, "in.bin"), os.path.join(d, "out.bin")
        with open(fin, "wb") as f:
            np.asarray(LRS, dtype=np.float64).tofile(f)
            np.concatenate(p0).tofile(f)
            for g in grads:
                np.concatenate(g).tofile(f)
        args = [DRIVER, name, str(STEPS)] + ["%.17g" % x for x in (betas[0], betas[1], eps, wd, clip)] + \
               [str(int(trust_all)), spec, fin, fout]
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env)
        if r.returncode != 0:
            failures.append("%s: driver exited %d: %s" % (name, r.returncode, r.stdout.strip()))
            return None, None
        raw = open(fout, "rb").read()
    steps, at = [], 0
    for _ in range(STEPS):
        norm = np.frombuffer(raw, np.float64, 1, at)[0]
        at += 8
        arrays = []
        for _ in range(3):  # params, exp_avg, exp_avg_sq
            arrays.append(np.frombuffer(raw, np.float32, n, at))
            at += 4 * n
        steps.append((norm, arrays[0], arrays[1], arrays[2]))
    if at != len(raw):
        failures.append("%s: driver wrote %d bytes, expected %d" % (name, len(raw), at))
    return steps, raw


def max_rel_err(got, want):
    """max |got - want| relative to max |want| (element-wise relative error is meaningless for exp_avg,
    whose entries cancel to ~0 in places)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if not np.all(np.isfinite(got)):
        return float("inf")
    scale = np.max(np.abs(want)) if want.size else 0.0
    return float(np.max(np.abs(got - want)) / (scale + 1e-30))


def check(case, what, got, want, rtol=RTOL):
    err = max_rel_err(got, want)
    status = "ok " if err <= rtol else "BAD"
    print("  %s %-36s max rel err %.2e" % (status, what, err))
    if err > rtol:
        failures.append("%s: %s differs (max rel err %.3e > %.1e)" % (case, what, err, rtol))


def compare(case, got, ref):
    for s in range(STEPS):
        check(case, "step %d grad norm" % (s + 1), [got[s][0]], [ref[s][0]])
        for k, what in ((1, "params"), (2, "exp_avg"), (3, "exp_avg_sq")):
            check(case, "step %d %s" % (s + 1, what), got[s][k], ref[s][k])
        # the tensor with zero parameters and gradients must stay exactly zero
        at = sum(SIZES[:[t[0] for t in TENSORS].index(ZERO_GRAD)])
        if np.any(got[s][1][at:at + SIZES[[t[0] for t in TENSORS].index(ZERO_GRAD)]] != 0):
            failures.append("%s: step %d moved %s, whose gradient is zero" % (case, s + 1, ZERO_GRAD))


# ---- the reference: FusedLAMB's algorithm in torch float32 --------------------------------------
def f32(x):
    return torch.tensor(x, dtype=torch.float32)


def lamb_reference(p0, grads, betas, eps, wd, max_norm, trust_all, variant=None):
    """variant names a plausible mistake, to show the comparison would catch it."""
    b1, b2 = betas
    w = [torch.from_numpy(x.copy()) for x in p0]
    m = [torch.zeros_like(x) for x in w]
    v = [torch.zeros_like(x) for x in w]
    out = []
    for t, (g_list, lr) in enumerate(zip(grads, LRS), start=1):
        g_list = [torch.from_numpy(x.copy()) for x in g_list]
        norm = math.sqrt(sum(float(torch.sum(g.double() ** 2)) for g in g_list))
        if variant == "no_clipping":
            div = 1.0
        elif variant == "torch_clip_coef":  # clip_grad_norm_: multiply by max/(norm+1e-6)
            div = (norm + 1e-6) / max_norm if max_norm / (norm + 1e-6) < 1 else 1.0
        else:
            div = norm / max_norm if max_norm > 0 and norm > max_norm else 1.0
        if variant == "no_bias_correction":
            bc1, bc2 = 1.0, 1.0
        else:
            bc1, bc2 = 1.0 - b1 ** t, 1.0 - b2 ** t
        for i in range(len(w)):
            decays = DECAY[i] or variant == "decay_everywhere"
            wd_i = wd if decays else 0.0
            g = g_list[i] / f32(div)
            m[i] = m[i] * f32(b1) + f32(1.0 - b1) * g
            v[i] = v[i] * f32(b2) + f32(1.0 - b2) * g * g
            u = (m[i] / f32(bc1)) / (torch.sqrt(v[i] / f32(bc2)) + f32(eps))
            if wd_i != 0.0:
                u = u + f32(wd_i) * w[i]
            w_norm = float(torch.norm(w[i].double()))
            u_norm = float(torch.norm(u.double()))
            trusted = wd_i != 0.0 or trust_all
            if variant == "trust_flag_inverted":
                trusted = wd_i != 0.0 or not trust_all
            if trusted and w_norm != 0.0 and u_norm != 0.0:
                ratio = lr * (w_norm / u_norm)
            elif trusted and variant == "no_zero_norm_fallback":
                ratio = 0.0  # lr·0/||u|| (and 0/0 read as 0)
            else:
                ratio = lr
            w[i] = w[i] - f32(ratio) * u
        out.append((norm, np.concatenate([x.numpy() for x in w]), np.concatenate([x.numpy() for x in m]),
                    np.concatenate([x.numpy() for x in v])))
    return out


VARIANTS = ("no_clipping", "torch_clip_coef", "no_bias_correction", "decay_everywhere", "trust_flag_inverted",
            "no_zero_norm_fallback")


def case_lamb(betas, eps, wd, max_norm, trust_all, seed, variants=VARIANTS):
    case = "lamb betas=%s eps=%g wd=%g max_norm=%g trust_ratio_on_no_decay=%s" % (betas, eps, wd, max_norm,
                                                                                 trust_all)
    print(case)
    p0, grads = make_data(seed)
    ref = lamb_reference(p0, grads, betas, eps, wd, max_norm, trust_all)
    got, raw = run_driver("lamb", p0, grads, betas, eps, wd, max_norm, trust_all)
    if got is None:
        return
    compare(case, got, ref)
    _, raw2 = run_driver("lamb", p0, grads, betas, eps, wd, max_norm, trust_all, threads=2)
    same = raw2 is not None and raw2 == raw
    print("  %s identical output with 1 and 2 threads" % ("ok " if same else "BAD"))
    if not same:
        failures.append("%s: the result depends on the number of threads" % case)
    # The comparison must tell FusedLAMB from its near relatives.
    for variant in variants:
        wrong = lamb_reference(p0, grads, betas, eps, wd, max_norm, trust_all, variant)
        err = max(max_rel_err(wrong[s][k], ref[s][k]) for s in range(STEPS) for k in (1, 2, 3))
        sensitive = err > 10 * RTOL
        print("  %s variant %-24s differs by %.2e (must exceed %.0e)" % ("ok " if sensitive else "BAD", variant, err,
                                                                          10 * RTOL))
        if not sensitive:
            failures.append("%s: the test cannot tell the %s variant apart" % (case, variant))


# ---- AdamW with NVIDIA's grouping: torch.optim.AdamW + clip_grad_norm_ -------------------------
def case_adamw(betas, eps, wd, clip, seed):
    case = "adamw (BERT grouping) betas=%s eps=%g wd=%g clip=%g" % (betas, eps, wd, clip)
    print(case)
    p0, grads = make_data(seed)
    params = [torch.nn.Parameter(torch.from_numpy(x.copy())) for x in p0]
    groups = [{"params": [p for p, d in zip(params, DECAY) if d], "weight_decay": wd},
              {"params": [p for p, d in zip(params, DECAY) if not d], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=LRS[0], betas=betas, eps=eps)
    ref = []
    for s, g_list in enumerate(grads):
        for prm, g in zip(params, g_list):
            prm.grad = torch.from_numpy(g.copy())
        norm = float(torch.nn.utils.clip_grad_norm_(params, clip))
        for group in opt.param_groups:
            group["lr"] = LRS[s]
        opt.step()
        state = [opt.state[p] for p in params]
        ref.append((norm, np.concatenate([p.detach().numpy().copy() for p in params]),
                    np.concatenate([st["exp_avg"].numpy().copy() for st in state]),
                    np.concatenate([st["exp_avg_sq"].numpy().copy() for st in state])))
    got, _ = run_driver("adamw", p0, grads, betas, eps, wd, clip, False)
    if got is not None:
        compare(case, got, ref)


def main():
    if not os.path.exists(DRIVER):
        print("ERROR: %s not built (make check builds it; set top_builddir)" % DRIVER)
        return 99
    torch.set_num_threads(1)
    # NVIDIA BERT's settings (FusedLAMB defaults, weight decay 0.01), both trust-ratio modes
    case_lamb(betas=(0.9, 0.999), eps=1e-6, wd=0.01, max_norm=MAX_NORM, trust_all=False, seed=11)
    case_lamb(betas=(0.9, 0.999), eps=1e-6, wd=0.01, max_norm=MAX_NORM, trust_all=True, seed=12)
    # a larger decay and eps, other betas; no decay at all (then only trust_ratio_on_no_decay gives ratios)
    case_lamb(betas=(0.8, 0.99), eps=1e-4, wd=0.1, max_norm=MAX_NORM, trust_all=False, seed=13)
    case_lamb(betas=(0.9, 0.999), eps=1e-6, wd=0.0, max_norm=MAX_NORM, trust_all=False, seed=14,
              variants=("no_clipping", "trust_flag_inverted"))
    case_adamw(betas=(0.9, 0.999), eps=1e-6, wd=0.01, clip=MAX_NORM, seed=15)
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("PASS: LAMB matches apex FusedLAMB's algorithm and AdamW matches torch.optim.AdamW on BERT-named tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
