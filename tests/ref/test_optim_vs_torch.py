#!/usr/bin/env python3
"""A user switching from PyTorch/HetSeq gets the same optimizer steps: hetseq's clip + optimizer
(tests/ref/optim_driver, CPU backend) against torch.nn.utils.clip_grad_norm_ and torch.optim.SGD,
Adadelta and AdamW, and against HetSeq's decoupled-weight-decay Adam written out below from its
formula (torch.optim.Adam is a different algorithm). Three tensors of odd sizes, five steps with
changing learning rates and gradient scales so that clipping happens on some steps only. The last
tensor is flagged "no weight decay" (a bias): only AdamW may honour that; HetSeq's Adam, Adadelta and
SGD decay every tensor.
"""
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

SIZES = [7, 33, 130]
STEPS = 5
LRS = [0.1, 0.05, 0.08, 0.02, 0.06]
GRAD_SCALES = [0.3, 3.0, 0.7, 0.05, 2.0]  # ≈ global grad norm per step; clip at 1.0 hits steps 2 and 5
RTOL = 1e-6

DRIVER = os.path.join(os.environ.get("top_builddir", "."), "tests", "ref", "optim_driver")
failures = []


def make_data(seed):
    rng = np.random.RandomState(seed)
    n = sum(SIZES)
    p0 = rng.randn(n).astype(np.float32)
    grads = []
    for s in GRAD_SCALES:
        g = rng.randn(n)
        grads.append((g / np.linalg.norm(g) * s).astype(np.float32))
    return p0, grads


def split(flat):
    out, at = [], 0
    for k in SIZES:
        out.append(flat[at:at + k])
        at += k
    return out


def run_driver(name, p0, grads, beta1=0.9, beta2=0.999, eps=1e-8, wd=0.0, rho=0.9, momentum=0.0, clip=0.0,
               n_states=0):
    n = sum(SIZES)
    with tempfile.TemporaryDirectory() as d:
        fin, fout = os.path.join(d, "in.bin"), os.path.join(d, "out.bin")
        with open(fin, "wb") as f:
            np.asarray(LRS, dtype=np.float64).tofile(f)
            p0.astype(np.float32).tofile(f)
            for g in grads:
                g.astype(np.float32).tofile(f)
        args = [DRIVER, name, ",".join(map(str, SIZES)), str(STEPS)] + \
               ["%.17g" % x for x in (beta1, beta2, eps, wd, rho, momentum, clip)] + [fin, fout]
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        if r.returncode != 0:
            failures.append("%s: driver exited %d: %s" % (name, r.returncode, r.stdout.strip()))
            return None
        raw = open(fout, "rb").read()
    steps, at = [], 0
    for _ in range(STEPS):
        norm = np.frombuffer(raw, np.float64, 1, at)[0]
        at += 8
        g = np.frombuffer(raw, np.float32, n, at)
        at += 4 * n
        p = np.frombuffer(raw, np.float32, n, at)
        at += 4 * n
        steps.append((norm, g, p))
    states = []
    for _ in range(n_states):
        states.append(np.frombuffer(raw, np.float32, n, at))
        at += 4 * n
    if at != len(raw):
        failures.append("%s: driver wrote %d bytes, expected %d" % (name, len(raw), at))
    return steps, states


def max_rel_err(got, want):
    """max |got - want| relative to max |want|: the array's scale. (Element-wise relative error is not
    meaningful for exp_avg or momentum_buffer, sums of gradients of both signs that cancel to ~0 in
    places; torch's fused multiply-adds round there differently from plain float32 arithmetic.)"""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = np.max(np.abs(want)) if want.size else 0.0
    return float(np.max(np.abs(got - want)) / (scale + 1e-30))


def check(case, what, got, want, rtol=RTOL):
    err = max_rel_err(got, want)
    status = "ok " if err <= rtol else "BAD"
    print("  %s %-28s max rel err %.2e" % (status, what, err))
    if err > rtol:
        failures.append("%s: %s differs (max rel err %.3e > %.1e)" % (case, what, err, rtol))


def torch_run(p0, grads, make_opt, clip):
    """Reference steps with a torch optimizer: per step clip_grad_norm_, then step at LRS[s]."""
    params = [torch.nn.Parameter(torch.from_numpy(x.copy())) for x in split(p0)]
    opt = make_opt(params)
    steps = []
    for s, g in enumerate(grads):
        for prm, gi in zip(params, split(g)):
            prm.grad = torch.from_numpy(gi.copy())
        norm = torch.nn.utils.clip_grad_norm_(params, clip) if clip > 0 else \
            torch.norm(torch.stack([torch.norm(prm.grad) for prm in params]))
        clipped = np.concatenate([prm.grad.numpy().copy() for prm in params])
        for group in opt.param_groups:
            group["lr"] = LRS[s]
        opt.step()
        steps.append((float(norm), clipped, np.concatenate([prm.detach().numpy().copy() for prm in params])))
    return steps, opt, params


def compare(case, got, ref_steps, ref_states):
    if got is None:
        return
    steps, states = got
    for s in range(STEPS):
        check(case, "step %d grad norm" % (s + 1), [steps[s][0]], [ref_steps[s][0]])
        check(case, "step %d clipped grad" % (s + 1), steps[s][1], ref_steps[s][1])
        check(case, "step %d params" % (s + 1), steps[s][2], ref_steps[s][2])
    for (name, want), have in zip(ref_states, states):
        check(case, "state %s" % name, have, want)


def torch_states(opt, params, names):
    return [(n, np.concatenate([opt.state[p][n].numpy().copy() for p in params])) for n in names]


# ---- SGD with momentum and weight decay (torch.optim.SGD) -------------------------------------
def case_sgd(momentum, wd, clip, seed):
    case = "sgd momentum=%g wd=%g clip=%g" % (momentum, wd, clip)
    print(case)
    p0, grads = make_data(seed)
    ref, opt, params = torch_run(p0, grads, lambda ps: torch.optim.SGD(ps, lr=LRS[0], momentum=momentum,
                                                                      weight_decay=wd), clip)
    names = ["momentum_buffer"] if momentum else []
    got = run_driver("sgd", p0, grads, wd=wd, momentum=momentum, clip=clip, n_states=len(names))
    compare(case, got, ref, torch_states(opt, params, names))


# ---- Adadelta (torch.optim.Adadelta; HetSeq's copy of torch 1.6) -------------------------------
def case_adadelta(rho, eps, wd, clip, seed):
    case = "adadelta rho=%g eps=%g wd=%g clip=%g" % (rho, eps, wd, clip)
    print(case)
    p0, grads = make_data(seed)
    ref, opt, params = torch_run(p0, grads, lambda ps: torch.optim.Adadelta(ps, lr=LRS[0], rho=rho, eps=eps,
                                                                           weight_decay=wd), clip)
    names = ["square_avg", "acc_delta"]
    got = run_driver("adadelta", p0, grads, eps=eps, wd=wd, rho=rho, clip=clip, n_states=2)
    compare(case, got, ref, torch_states(opt, params, names))


# ---- AdamW (torch.optim.AdamW; decay only on flagged tensors) ----------------------------------
def case_adamw(betas, eps, wd, clip, seed):
    case = "adamw betas=%s eps=%g wd=%g clip=%g" % (betas, eps, wd, clip)
    print(case)
    p0, grads = make_data(seed)

    def make(ps):
        return torch.optim.AdamW([{"params": ps[:-1], "weight_decay": wd}, {"params": ps[-1:], "weight_decay": 0.0}],
                                 lr=LRS[0], betas=betas, eps=eps)
    ref, opt, params = torch_run(p0, grads, make, clip)
    got = run_driver("adamw", p0, grads, beta1=betas[0], beta2=betas[1], eps=eps, wd=wd, clip=clip, n_states=2)
    compare(case, got, ref, torch_states(opt, params, ["exp_avg", "exp_avg_sq"]))


# ---- HetSeq Adam (fairseq): written out from the formula, in float64 ---------------------------
def hetseq_adam(p0, clipped_grads, betas, eps, wd, variant="hetseq"):
    """variant != "hetseq" gives plausible wrong algorithms, to show the comparison would catch them."""
    b1, b2 = betas
    p = p0.astype(np.float64)
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    out = []
    for t, (g, lr) in enumerate(zip(clipped_grads, LRS), start=1):
        g = g.astype(np.float64)
        if variant == "l2":
            g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        if variant == "eps_after_correction":  # torch.optim.Adam/AdamW's eps placement
            update = lr / (1 - b1 ** t) * m / (np.sqrt(v / (1 - b2 ** t)) + eps)
        else:  # fairseq: eps on the uncorrected sqrt(v), correction folded into the step size
            update = lr * np.sqrt(1 - b2 ** t) / (1 - b1 ** t) * m / (np.sqrt(v) + eps)
        if variant == "decay_after_step":
            p = p - update
            p = p - wd * lr * p
        else:
            if variant != "l2":
                p = p - wd * lr * p
            p = p - update
        out.append(p.copy())
    return out, m, v


def case_adam(betas, eps, wd, clip, seed):
    case = "adam(hetseq) betas=%s eps=%g wd=%g clip=%g" % (betas, eps, wd, clip)
    print(case)
    p0, grads = make_data(seed)
    # the clipping reference is torch's; the optimizer reference is the formula above
    params = [torch.nn.Parameter(torch.from_numpy(x.copy())) for x in split(p0)]
    clipped, norms = [], []
    for g in grads:
        for prm, gi in zip(params, split(g)):
            prm.grad = torch.from_numpy(gi.copy())
        norms.append(float(torch.nn.utils.clip_grad_norm_(params, clip)) if clip > 0 else float(np.linalg.norm(g)))
        clipped.append(np.concatenate([prm.grad.numpy().copy() for prm in params]))
    ps, m, v = hetseq_adam(p0, clipped, betas, eps, wd)
    ref = [(norms[s], clipped[s], ps[s]) for s in range(STEPS)]
    got = run_driver("adam", p0, grads, beta1=betas[0], beta2=betas[1], eps=eps, wd=wd, clip=clip, n_states=2)
    compare(case, got, ref, [("exp_avg", m), ("exp_avg_sq", v)])
    # The comparison must be able to tell HetSeq's Adam from its near relatives.
    if eps < 1e-4 or wd == 0:
        return  # only a large eps and decay make the variants differ by more than rounding
    for variant in ("eps_after_correction", "decay_after_step", "l2"):
        wrong = hetseq_adam(p0, clipped, betas, eps, wd, variant)[0][-1]
        err = max_rel_err(wrong, ps[-1])
        sensitive = err > 10 * RTOL
        print("  %s variant %-22s differs by %.2e (must exceed %.0e)" % ("ok " if sensitive else "BAD", variant, err,
                                                                         10 * RTOL))
        if not sensitive:
            failures.append("%s: the test cannot tell the %s variant apart" % (case, variant))


def main():
    if not os.path.exists(DRIVER):
        print("ERROR: %s not built (make check builds it; set top_builddir)" % DRIVER)
        return 99
    torch.set_num_threads(1)
    case_sgd(momentum=0.9, wd=0.01, clip=1.0, seed=1)
    case_sgd(momentum=0.0, wd=0.0, clip=0.0, seed=2)
    case_adadelta(rho=0.9, eps=1e-6, wd=0.05, clip=1.0, seed=3)
    case_adadelta(rho=0.95, eps=1e-4, wd=0.0, clip=0.0, seed=4)
    case_adam(betas=(0.9, 0.999), eps=1e-3, wd=0.1, clip=1.0, seed=5)
    case_adam(betas=(0.9, 0.98), eps=1e-8, wd=0.0, clip=0.0, seed=6)
    case_adamw(betas=(0.9, 0.999), eps=1e-3, wd=0.1, clip=1.0, seed=7)
    case_adamw(betas=(0.8, 0.9999), eps=1e-6, wd=0.01, clip=2.5, seed=8)
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("PASS: clip, SGD, Adadelta, AdamW match torch; HetSeq Adam matches its formula")
    return 0


if __name__ == "__main__":
    sys.exit(main())
