"""A user moving from NVIDIA's PyTorch Transformer-XL checks that hetseq's computes what PyTorch computes:
a small MemTransformerLM (tests/ref/txl_torch.py, NVIDIA's state_dict names) given the same weights
(by name) and the same token segments gives the same loss and the same gradient of every parameter
over three consecutive segments of one batch, the memory carried from segment to segment (the second
segment attends to the first through it, the third to a full memory of mem_len < klen steps).

Cases: the adaptive softmax with tied weights and projections (div_val 1, d_embed = d_model: NVIDIA's
WikiText-103 default), no adaptive softmax, div_val 2 (per-cluster tables and projections, tied), pre_lnorm
with d_embed != d_model (one shared projection, its own head projection crit.out_projs.0) and clamp_len,
and an evaluation forward with eval_mem_len, eval_clamp_len and same_length masks.
Dropout is off on both sides, except in the "dropout" case: dropout and dropatt 0.1 at every site, and
PyTorch applies, through the reference model's dropout hook, the masks hetseq draws (its counter RNG
re-implemented here in numpy, keyed by seed, update and site, and the global sample index = column; the
positional embedding's mask by the site alone). A mask at the wrong site or with the wrong layout shows
up as an O(1) difference. Weights: random (LayerNorm weights around 1, biases non-zero), so a
parameter used in the wrong place cannot hide behind a neutral value.
Tolerance: 1e-4 relative; per tensor max|g_c - g_t| / max|g_t|.
Names: the parameter table plus the aliases and buffer hetseq lists (hs_txl_state_dict_aliases,
pos_emb.inv_freq) must load into the PyTorch model with load_state_dict(strict=True)."""
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import txl_torch as tt  # noqa: E402
from hetseq_rng import attention_uniform, rng_key, uniform  # noqa: E402

TOL = 1e-4
N_TOKEN, B, QLEN, NSEG = 60, 3, 5, 3
BASE = dict(n_layer=2, n_head=2, d_head=8, d_model=32, d_inner=48, tgt_len=QLEN, mem_len=4)

SEED, UPDATE, FIRST = 11, 5, 40  # the dropout case: segment k is update UPDATE + k, samples FIRST + 100·k + s

CASES = [
    ("adaptive, div_val 1", dict(cutoffs=[20, 40], div_val=1), "train"),
    ("dropout 0.1, dropatt 0.1, div_val 2", dict(cutoffs=[20, 40], div_val=2, dropout=0.1, dropatt=0.1), "train"),
    ("full softmax", dict(cutoffs=[], div_val=1), "train"),
    ("adaptive, div_val 2", dict(cutoffs=[20, 40], div_val=2), "train"),
    ("pre_lnorm, d_embed 24, clamp_len 3", dict(cutoffs=[20, 40], div_val=1, pre_lnorm=True, d_embed=24, clamp_len=3),
     "train"),
    ("eval: same_length, eval_mem_len 6, eval_clamp_len 3", dict(cutoffs=[20, 40], div_val=1), "eval"),
]


# ---- hetseq's dropout sites and masks (the counter RNG: hetseq_rng.py) ------------------------------


def site_id(site):
    """txl.c's dropout sites."""
    if site in ("emb", "pos", "final"):
        return {"emb": 1, "pos": 2, "final": 3}[site]
    _, layer, which = site.split(".")
    return 16 + 4 * int(layer) + {"dropatt": 0, "attn_out": 1, "ff_inner": 2, "ff_out": 3}[which]


def make_hook(update, first):
    def hook(site, x, p):
        key = rng_key(SEED, update, site_id(site))
        scale = np.float32(1.0) / (np.float32(1.0) - np.float32(p))

        def keep(sample, n):
            return np.where(uniform(key, sample, np.arange(n)) >= np.float32(p), scale, np.float32(0.0)).astype(np.float64)
        if site == "pos":  # [klen, 1, D]: one mask for every column, sample 0
            mask = keep(0, x.numel()).reshape(x.shape)
        elif site.endswith("dropatt"):  # [qlen, klen, b, n]; hetseq: row h·qlen + i, column j of sample s
            qlen, klen, b, n = x.shape
            mask = np.stack([np.where(attention_uniform(key, first + s, n, qlen, klen) >= np.float32(p), scale,
                                      np.float32(0.0)).astype(np.float64) for s in range(b)])
            mask = mask.transpose(2, 3, 0, 1)
        else:  # [qlen, b, W]; hetseq: element t·W + w of sample s
            qlen, b, w = x.shape
            mask = np.stack([keep(first + s, qlen * w).reshape(qlen, w) for s in range(b)], axis=1)
        return x * torch.from_numpy(mask)
    return hook


def helper_path():
    d = os.environ.get("HS_REF_HELPER_DIR") or os.path.join(os.environ.get("top_builddir", "."), "tests", "ref")
    return os.path.join(d, "txl_ref_grads")


def write_config(path, case, mode):
    c = dict(BASE)
    c.update(case)
    lines = ['task = "txl";', "txl: {", f"  n_token = {N_TOKEN};"]
    for k in ("n_layer", "n_head", "d_head", "d_model", "d_inner", "tgt_len", "mem_len"):
        lines.append(f"  {k} = {c[k]};")
    lines.append(f"  d_embed = {c.get('d_embed', -1)};")
    lines.append(f"  clamp_len = {c.get('clamp_len', -1)};")
    lines.append(f"  pre_lnorm = {'true' if c.get('pre_lnorm') else 'false'};")
    lines.append(f"  dropout = {c.get('dropout', 0.0)}; dropatt = {c.get('dropatt', 0.0)};")
    if c["cutoffs"]:
        lines.append(f"  adaptive = true; cutoffs = [{', '.join(str(x) for x in c['cutoffs'])}];")
    else:
        lines.append("  adaptive = false;")
    lines.append(f"  div_val = {c['div_val']};")
    if mode == "eval":
        lines.append(f"  eval_tgt_len = {QLEN}; eval_mem_len = 6; eval_clamp_len = 3; eval_same_length = true;")
    lines.append("};")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return c


def build_torch(c, mode):
    ev = mode == "eval"
    m = tt.MemTransformerLM(N_TOKEN, c["n_layer"], c["n_head"], c["d_model"], c["d_head"], c["d_inner"],
                            d_embed=c.get("d_embed"), div_val=c["div_val"], pre_lnorm=c.get("pre_lnorm", False),
                            dropout=c.get("dropout", 0.0), dropatt=c.get("dropatt", 0.0),
                            mem_len=6 if ev else c["mem_len"], cutoffs=c["cutoffs"], same_length=ev,
                            clamp_len=3 if ev else c.get("clamp_len", -1))
    g = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "layer_norm.weight" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
    return m.double().eval()


def check_state_dict(title, f, model, named):
    """A hetseq checkpoint's /model tensors (the table's names), plus the aliases and the inv_freq buffer
    hetseq lists, load into the PyTorch model with load_state_dict(strict=True)."""
    sd = {name: torch.from_numpy(np.asarray(named[name].detach().numpy())) for name in f["seg0/grad"]}
    for alias in f["state_dict_extras/alias"]:
        target = f[f"state_dict_extras/alias/{alias}"][()].decode()
        sd[alias] = sd[target]
    inv = f["state_dict_extras/pos_emb.inv_freq"][()]
    sd["pos_emb.inv_freq"] = torch.from_numpy(inv.astype(np.float64))
    ref = model.pos_emb.inv_freq.float().numpy()
    if not np.array_equal(inv, ref):
        print(f"FAIL [{title}]: pos_emb.inv_freq differs from PyTorch's (max {np.max(np.abs(inv - ref)):.1e})")
        return 1
    try:
        model.load_state_dict(sd, strict=True)
    except RuntimeError as e:
        print(f"FAIL [{title}]: the checkpoint's names do not load with strict=True: {e}")
        return 1
    print(f"[{title}] {len(sd)} state_dict entries ({len(f['state_dict_extras/alias'])} aliases + inv_freq) "
          "load with strict=True")
    return 0


def main():
    helper = helper_path()
    if not os.access(helper, os.X_OK):
        print(f"FAIL: the helper {helper} is missing (make check builds it)")
        return 1
    rng = np.random.default_rng(5)
    failures = 0
    for title, case, mode in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            cfg = os.path.join(tmp, "txl.cfg")
            c = write_config(cfg, case, mode)
            model = build_torch(c, mode)
            named = model.state_dict(keep_vars=True)
            with h5py.File(os.path.join(tmp, "w.h5"), "w") as f:
                for name, p in named.items():
                    f[f"model/{name}"] = p.detach().float().numpy()
            # three segments of one stream: column s is one contiguous run of NSEG·QLEN + 1 tokens
            stream = rng.integers(0, N_TOKEN, size=(B, NSEG * QLEN + 1)).astype(np.int32)
            segs = np.stack([stream[:, k * QLEN:k * QLEN + QLEN + 1] for k in range(NSEG)])
            with h5py.File(os.path.join(tmp, "tok.h5"), "w") as f:
                f["tokens"] = segs
            out = os.path.join(tmp, "out.h5")
            dropout = c.get("dropout", 0.0) > 0
            extra = [str(SEED), str(UPDATE), str(FIRST)] if dropout else []
            r = subprocess.run([helper, mode, cfg, os.path.join(tmp, "w.h5"), os.path.join(tmp, "tok.h5"), out] + extra,
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL [{title}]: helper exit {r.returncode}\n{r.stdout}{r.stderr}")
                failures += 1
                continue
            # float64 copy of the float32 weights the helper read
            with torch.no_grad():
                for name, p in model.named_parameters():
                    p.copy_(torch.from_numpy(np.asarray(named[name].detach().float().numpy(), dtype=np.float64)))
            mems = None
            with h5py.File(out, "r") as f:
                for k in range(NSEG):
                    data = torch.from_numpy(segs[k, :, :QLEN].T.astype(np.int64)).contiguous()
                    target = torch.from_numpy(segs[k, :, 1:].T.astype(np.int64)).contiguous()
                    model.zero_grad()
                    tt.DROPOUT_HOOK = make_hook(UPDATE + k, FIRST + 100 * k) if dropout else None
                    nll, mems = model(data, target, mems)
                    tt.DROPOUT_HOOK = None
                    loss = nll.mean()
                    if mode == "train":
                        loss.backward()
                    lc, lt = float(f[f"seg{k}/loss"][()]), float(loss)
                    rel = abs(lc - lt) / abs(lt)
                    ok = rel <= TOL
                    print(f"[{title}] segment {k}: loss hetseq {lc:.7f} torch {lt:.7f} rel {rel:.1e}"
                          f" (tail tokens {int(f[f'seg{k}/tail_tokens'][()])})")
                    if not ok:
                        failures += 1
                        print(f"FAIL [{title}] segment {k}: loss differs")
                    if mode != "train":
                        continue
                    worst = (0.0, "")
                    for name in f[f"seg{k}/grad"]:
                        gc = f[f"seg{k}/grad/{name}"][()]
                        p = named[name]
                        gt = p.grad.detach().numpy() if p.grad is not None else np.zeros(p.shape)
                        scale = np.max(np.abs(gt))
                        if scale == 0:
                            err = np.max(np.abs(gc))
                        else:
                            err = np.max(np.abs(gc - gt)) / scale
                        if err > worst[0]:
                            worst = (err, name)
                        if not err <= TOL:
                            failures += 1
                            print(f"FAIL [{title}] segment {k}: gradient of {name}: relative error {err:.2e}")
                    print(f"[{title}] segment {k}: {len(f[f'seg{k}/grad'])} gradients, worst {worst[0]:.1e}"
                          f" ({worst[1]})")
                if mode == "train":
                    failures += check_state_dict(title, f, model, named)
    if failures:
        print(f"FAIL: {failures} mismatches")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
