#!/usr/bin/env python3
"""A user training Transformer-XL gets the attention core of NVIDIA's RelPartialLearnableMultiHeadAttn
(mem_transformer.py, attn_type 0). hetseq's rel_attention op (tests/ref/rel_attention_driver, one
forward and one backward through the layer wrappers) is compared with NVIDIA's formulation recomputed
here in torch float64 with autograd:

  w_heads [klen, bsz, 3·n·d] (q|k|v, memory rows first), r_head_k [klen, n, d], biases [n, d]
  AC = einsum(ibnd,jbnd->bnij, q + r_w_bias, k)
  BD = rel_shift(einsum(ibnd,jnd->bnij, q + r_r_bias, r_head_k)), rel_shift = pad one zero column on
       the left, view as [.., klen+1, qlen], drop the first row, view back as [.., qlen, klen]
  score = (AC + BD)·scale, masked_fill(-inf) with triu(ones(qlen, klen), 1+mlen), plus with
       same_length tril(ones, -mask_shift_len), mask_len = klen - mem_len - 1,
       mask_shift_len = qlen - mask_len if mask_len > 0 else qlen
  P = softmax over keys; dropatt applied with the keep mask hetseq drew (read back from the sign bits
  of its probabilities, scaled by 1/(1-p)), which must be the contract's counter-based mask
  (recomputed here); ctx = einsum(bnij,jbnd->ibnd, P', v)

The driver runs on the CPU backend, and also on the emulated CUDA device when the build has one
(tests/cuda/ref/rel_attention_driver). The gradients of sum(ctx ⊙ dctx) w.r.t. qkv, r, r_w_bias and
r_r_bias come from autograd. Compared:
ctx, |probs| and every gradient, max |hetseq - torch| / max |torch| <= 1e-5 (float32 op against a
float64 reference; the float32 rounding is ~1e-7 of the tensor's scale). The memory rows' q gradient
must be exactly 0, as must the masked probabilities.
"""
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
    import torch
except ImportError as e:  # pragma: no cover
    print("SKIP: needs h5py, numpy and torch (%s)" % e)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hetseq_rng import attention_uniform  # noqa: E402

RTOL = 1e-5
BUILD = os.environ.get("top_builddir", ".")
# the op on the CPU backend, and on the emulated CUDA device when the build has one
DEVICES = [("cpu", os.path.join(BUILD, "tests", "ref", "rel_attention_driver"))]
EMU_DRIVER = os.path.join(BUILD, "tests", "cuda", "ref", "rel_attention_driver")
if os.path.exists(EMU_DRIVER):
    DEVICES.append(("cuda", EMU_DRIVER))

# batch, qlen, mlen, n_head, d_head, same_length, mem_len (for the same_length mask), dropatt
CASES = [
    (2, 5, 0, 2, 4, False, 0, 0.0),    # first segment: no memory
    (2, 4, 3, 3, 5, False, 3, 0.0),    # memory shorter than the segment, odd d_head
    (1, 3, 7, 2, 4, False, 7, 0.0),    # memory longer than the segment
    (2, 1, 4, 2, 3, False, 4, 0.0),    # one query
    (2, 6, 4, 2, 4, True, 4, 0.0),     # same_length evaluation (mask_len = klen - mem_len - 1 = 5)
    (1, 4, 6, 2, 4, True, 6, 0.0),     # same_length with mask_len = 3
    (1, 5, 0, 2, 4, True, 8, 0.0),     # same_length where mask_len <= 0: the causal mask only
    (2, 4, 3, 2, 4, False, 3, 0.25),   # attention dropout
    (2, 6, 4, 2, 3, True, 4, 0.2),     # dropout and same_length
]


def expected_keep(key, bsz, n, qlen, klen, p):
    """The contract's dropout rule: keep (s,h,i,j) iff the attention dropout's uniform of row h·qlen + i,
    column j of sample s is >= p (first_sample 0; kernels/math/dropout.h, hetseq_rng.attention_uniform)."""
    return np.stack([attention_uniform(key, s, n, qlen, klen) for s in range(bsz)]) >= np.float32(p)


def rel_shift(x):
    """NVIDIA's _rel_shift on [bsz, n_head, qlen, klen]."""
    b, n, q, k = x.shape
    pad = torch.zeros((b, n, q, 1), dtype=x.dtype)
    padded = torch.cat([pad, x], dim=3).view(b, n, k + 1, q)
    return padded[:, :, 1:, :].reshape(b, n, q, k)


def nvidia_mask(qlen, mlen, same_length, mem_len):
    """dec_attn_mask (True = masked) and the lower shift hetseq gets for it."""
    klen = mlen + qlen
    ones = torch.ones(qlen, klen)
    if not same_length:
        return torch.triu(ones, diagonal=1 + mlen).bool(), 0
    mask_len = klen - mem_len - 1
    shift = qlen - mask_len if mask_len > 0 else qlen
    return (torch.triu(ones, 1 + mlen) + torch.tril(ones, -shift)).bool(), shift


def reference(qkv, r, rwb, rrb, dctx, mask, keep, p, n, d):
    """ctx and the gradients in float64, NVIDIA's layout ([len, bsz, ...])."""
    bsz, klen, _ = qkv.shape
    qlen = dctx.shape[1]
    t = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
         for k, v in (("qkv", qkv), ("r", r), ("rwb", rwb), ("rrb", rrb))}
    w_heads = t["qkv"].permute(1, 0, 2)  # [klen, bsz, 3nd]
    q, k, v = torch.chunk(w_heads, 3, dim=-1)
    q = q[-qlen:].reshape(qlen, bsz, n, d)
    k = k.reshape(klen, bsz, n, d)
    v = v.reshape(klen, bsz, n, d)
    r_head_k = t["r"].view(klen, n, d)
    ac = torch.einsum("ibnd,jbnd->bnij", q + t["rwb"], k)
    bd = rel_shift(torch.einsum("ibnd,jnd->bnij", q + t["rrb"], r_head_k))
    score = (ac + bd) * (1.0 / d ** 0.5)
    score = score.masked_fill(mask[None, None], -float("inf"))
    prob = torch.softmax(score, dim=3)
    if p > 0:
        prob_d = prob * torch.tensor(keep, dtype=torch.float64) / (1.0 - p)
    else:
        prob_d = prob
    ctx = torch.einsum("bnij,jbnd->ibnd", prob_d, v).reshape(qlen, bsz, n * d).permute(1, 0, 2)
    (ctx * torch.tensor(dctx, dtype=torch.float64)).sum().backward()
    return {"ctx": ctx.detach().numpy(), "probs": prob.detach().numpy(), "dqkv": t["qkv"].grad.numpy(),
            "dr": t["r"].grad.numpy(), "dr_w_bias": t["rwb"].grad.numpy(), "dr_r_bias": t["rrb"].grad.numpy()}


def run_case(case, seed, tmp, device, driver):
    bsz, qlen, mlen, n, d, same_length, mem_len, p = case
    klen = mlen + qlen
    mask, lower_shift = nvidia_mask(qlen, mlen, same_length, mem_len)
    rng = np.random.default_rng(seed)
    f32 = lambda *shape: rng.uniform(-1, 1, size=shape).astype(np.float32)
    inp = {"qkv": f32(bsz, klen, 3 * n * d), "r": f32(klen, n * d), "r_w_bias": 0.5 * f32(n, d),
           "r_r_bias": 0.5 * f32(n, d), "dctx": f32(bsz, qlen, n * d)}
    path_in, path_out = os.path.join(tmp, "in.h5"), os.path.join(tmp, "out.h5")
    with h5py.File(path_in, "w") as f:
        f["dims"] = np.array([bsz, qlen, mlen, n, d, lower_shift], dtype=np.int32)
        f["scale"] = np.float64(1.0 / d ** 0.5)
        f["p"] = np.float64(p)
        f["key"] = np.int64(1234 + seed)
        for k, v in inp.items():
            f[k] = v
    subprocess.run([driver, path_in, path_out], check=True, env=dict(os.environ, HS_TEST_DEVICE=device),
                   stdout=subprocess.DEVNULL)
    with h5py.File(path_out, "r") as f:
        got = {k: np.array(f[k]) for k in ("ctx", "probs", "dqkv", "dr", "dr_w_bias", "dr_r_bias")}
    probs = got["probs"].reshape(bsz, n, qlen, klen)
    keep = np.logical_not(np.signbit(probs)).astype(np.float64)
    ref = reference(inp["qkv"], inp["r"], inp["r_w_bias"], inp["r_r_bias"], inp["dctx"], mask, keep, p, n, d)

    label = "%s: bsz %d qlen %d mlen %d n_head %d d_head %d same_length %s mem_len %d dropatt %g" % ((device,) + case)
    bad = 0
    if p > 0 and not np.array_equal(keep.astype(bool), expected_keep(1234 + seed, bsz, n, qlen, klen, p)):
        print("  %s: the dropout mask is not the contract's (key, sample, (h·qlen + i)·klen + j) rule" % label)
        bad += 1
    masked = np.broadcast_to(mask.numpy()[None, None], probs.shape)
    if np.any(np.abs(probs[masked]) != 0):
        print("  %s: a masked probability is not 0" % label)
        bad += 1
    dq_mem = got["dqkv"].reshape(bsz, klen, 3 * n * d)[:, :mlen, : n * d]
    if np.any(dq_mem != 0):
        print("  %s: the memory rows' q gradient is not 0" % label)
        bad += 1
    worst = []
    for k in ("ctx", "probs", "dqkv", "dr", "dr_w_bias", "dr_r_bias"):
        a = np.abs(got[k]).ravel() if k == "probs" else got[k].ravel()
        b = ref[k].ravel()
        rel = np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30)
        worst.append("%s %.1e" % (k, rel))
        if not rel <= RTOL:
            print("  %s: %s differs from torch by %.3g relative (allowed %g)" % (label, k, rel, RTOL))
            bad += 1
    print("%s: %s%s" % (label, ", ".join(worst), "  FAILED" if bad else ""))
    return bad


def main():
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for device, driver in DEVICES:
            for i, case in enumerate(CASES):
                bad += run_case(case, 100 + i, tmp, device, driver)
    if bad:
        print("FAILED: %d mismatches" % bad)
        return 1
    print("relative attention matches NVIDIA's formulation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
