"""A user moving from NVIDIA's / HetSeq's PyTorch BERT checks that hetseq's BERT computes what PyTorch
computes: a small BertForPreTraining (2 layers, hidden 64, 4 heads, intermediate 256, 128 positions,
vocabulary 101 padded to 104) given the same weights (by their state_dict names) and the same NVIDIA
shard rows (padded sequences, masked positions 0-terminated) gives the same MLM and NSP losses and the
same gradient for every parameter.

Two passes:
  eval      dropout off (hetseq: training = 0; PyTorch: model.eval()).
  dropout   training mode with dropout 0.1 everywhere; PyTorch applies, through the reference model's
            dropout hook, the masks hetseq draws: its counter RNG streams (kernels/math/dropout.h) re-implemented in
            numpy (hetseq_rng.py), keyed by (seed, update, dropout site) and the global sample index. A mask at the
            wrong site, with the wrong key or sample index, or dropout missing from one site shows up as
            an O(1) gradient difference.
The PyTorch side runs NVIDIA's head on ALL positions ([B,L,V] logits, CrossEntropyLoss ignore_index -1);
hetseq gathers the labelled positions first, so this also checks that the two agree.

Weights: NVIDIA's initialisation, then every LayerNorm and bias moved off 1/0 by random noise, so a
parameter used in the wrong place cannot hide behind a neutral value.
Tolerance: 1e-4 relative; per tensor max|g_c - g_t| / max|g_t| (see test_cnn_vs_torch.py)."""
import json
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_torch as bt  # noqa: E402
from hetseq_rng import attention_uniform, rng_key, uniform  # noqa: E402

CONFIG = {"vocab_size": 101, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
          "intermediate_size": 256, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
          "attention_probs_dropout_prob": 0.1, "max_position_embeddings": 128, "type_vocab_size": 2,
          "initializer_range": 0.02, "an_unknown_key": "kept and ignored, as NVIDIA's from_dict does"}
PAD_VOCAB = 8
BATCH, SEQ, PRED = 8, 32, 8
TOL = 1e-4
SEED, UPDATE, FIRST_SAMPLE = 7, 3, 100  # the dropout pass: masks of update 3 for global samples 100..107

# ---- hetseq's dropout sites and masks (the counter RNG: hetseq_rng.py) ------------------------------


def site_id(site):
    """bert.c's dropout site numbers from the reference model's module names."""
    if site == "bert.embeddings.dropout":
        return 1
    parts = site.split(".")
    layer = int(parts[3])
    which = {"attention.self.dropout": 0, "attention.output.dropout": 1, "output.dropout": 2}[".".join(parts[4:])]
    return 16 + 4 * layer + which


def hetseq_dropout(site, x, p):
    """x[B,...] * keep / (1-p) with keep = u >= p: u = hs_uniform(key, FIRST_SAMPLE + b, flat index in the
    sample), or at the attention probabilities ([B, heads, L, L]) the attention dropout's own draws
    (hetseq_rng.attention_uniform of the sample's [heads, L, L] block)."""
    key = rng_key(SEED, UPDATE, site_id(site))
    per_sample = int(np.prod(x.shape[1:]))
    elems = np.arange(per_sample, dtype=np.uint64)
    keep_scale = np.float32(1.0) / (np.float32(1.0) - np.float32(p))
    if site.endswith("attention.self.dropout"):
        draws = [attention_uniform(key, FIRST_SAMPLE + b, *x.shape[1:]) for b in range(x.shape[0])]
    else:
        draws = [uniform(key, FIRST_SAMPLE + b, elems) for b in range(x.shape[0])]
    mask = np.stack([np.where(u >= np.float32(p), keep_scale, np.float32(0)) for u in draws]).reshape(x.shape)
    return x * torch.from_numpy(mask)


# ---- the two sides ----------------------------------------------------------------------------------

def make_model():
    model = bt.build_model(CONFIG, pad_vocab_to_multiple_of=PAD_VOCAB, dropout=True, seed=1234)
    g = torch.Generator().manual_seed(99)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm.weight" in name:
                p.add_(0.2 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.add_(0.05 * torch.randn(p.shape, generator=g))
    return model


def write_shard(path, batch):
    with h5py.File(path, "w") as f:
        f.create_dataset("input_ids", data=batch["input_ids"].numpy().astype("i4"), compression="gzip")
        f.create_dataset("input_mask", data=batch["attention_mask"].numpy().astype("i1"), compression="gzip")
        f.create_dataset("segment_ids", data=batch["token_type_ids"].numpy().astype("i1"), compression="gzip")
        f.create_dataset("masked_lm_positions", data=batch["masked_lm_positions"].numpy().astype("i4"),
                         compression="gzip")
        f.create_dataset("masked_lm_ids", data=batch["masked_lm_ids"].numpy().astype("i4"), compression="gzip")
        f.create_dataset("next_sentence_labels", data=batch["next_sentence_label"].numpy().astype("i1"),
                         compression="gzip")


def torch_pass(model, batch, training):
    model.zero_grad(set_to_none=True)
    model.train(training)
    model.set_dropout_override(hetseq_dropout if training else None)
    mlm, nsp, logits, labels, nsp_logits = model.losses(batch["input_ids"], batch["token_type_ids"],
                                                         batch["attention_mask"], batch["masked_lm_labels"],
                                                         batch["next_sentence_label"])
    (mlm + nsp).backward()
    grads = {name: p.grad.numpy().copy() for name, p in model.named_parameters()}
    return float(mlm), float(nsp), int(labels.numel()), grads


def compare(tag, helper, files, model, batch, extra_args):
    cfg, shard, weights, out = files
    subprocess.run([helper, cfg, shard, weights, out] + extra_args, check=True)
    t_mlm, t_nsp, t_count, t_grads = torch_pass(model, batch, training=bool(extra_args))
    with h5py.File(out, "r") as f:
        c = {k: float(f[k][()]) for k in ("mlm_loss_sum", "mlm_count", "nsp_loss_sum", "sentences", "loss")}
        c_grads = {name: f["grad"][name][()] for name in f["grad"]}
    failures = 0
    print(f"== {tag}")
    if int(c["mlm_count"]) != t_count or int(c["sentences"]) != BATCH:
        print(f"labelled tokens: hetseq {c['mlm_count']:.0f} torch {t_count}; sentences {c['sentences']:.0f}")
        failures += 1
    for what, cv, tv in (("MLM loss", c["mlm_loss_sum"] / c["mlm_count"], t_mlm),
                         ("NSP loss", c["nsp_loss_sum"] / c["sentences"], t_nsp),
                         ("total loss", c["loss"], t_mlm + t_nsp)):
        rel = abs(cv - tv) / abs(tv)
        print(f"{what:10s}: hetseq {cv:.7f} torch {tv:.7f} rel err {rel:.2e}")
        failures += rel > TOL
    expected = set(bt.parameter_names(CONFIG["num_hidden_layers"])) - {bt.TIED_DECODER}
    if set(c_grads) != expected:
        print(f"parameter names differ: only hetseq {sorted(set(c_grads) - expected)}, "
              f"only torch {sorted(expected - set(c_grads))}")
        failures += 1
    worst = (0.0, "")
    for name, t in t_grads.items():
        cg = c_grads.get(name)
        if cg is None or cg.shape != t.shape:
            print(f"{name}: hetseq shape {None if cg is None else cg.shape} != torch {t.shape}")
            failures += 1
            continue
        scale = np.abs(t).max()
        if name.endswith("attention.self.key.bias"):
            # Exactly 0 in exact arithmetic (q·(k_j + b) shifts every score of a row by q·b, which the
            # softmax ignores): both sides hold float32 noise. Measure against the key weight's gradient.
            scale = np.abs(t_grads[name.replace(".bias", ".weight")]).max()
            print(f"     {name}: max|g| hetseq {np.abs(cg).max():.1e} torch {np.abs(t).max():.1e} (exactly 0 in theory)")
        rel = float(np.abs(cg - t).max() / scale)
        print(f"grad {name:58s} {str(t.shape):11s} {rel:.2e}")
        failures += rel > TOL
        worst = max(worst, (rel, name))
    print(f"worst gradient: {worst[1]} {worst[0]:.2e}")
    return failures


def main():
    helper = os.path.join(os.environ.get("HS_REF_HELPER_DIR") or os.path.join(os.environ.get("top_builddir", "."), "tests", "ref"), "bert_ref_grads")
    if not os.access(helper, os.X_OK):
        print(f"FAIL: {helper} not built (make check builds it)")
        return 1
    torch.set_num_threads(1)
    model = make_model()
    cfg_obj = bt.BertConfig(dict(CONFIG, vocab_size=bt.padded_vocab_size(CONFIG["vocab_size"], PAD_VOCAB)))
    batch = bt.random_batch(cfg_obj, BATCH, SEQ, PRED, generator=torch.Generator().manual_seed(5),
                            vocab_limit=CONFIG["vocab_size"])
    if int(batch["attention_mask"].sum()) == BATCH * SEQ:
        print("FAIL: the test batch should contain padding")
        return 1

    with tempfile.TemporaryDirectory() as tmp:
        files = tuple(os.path.join(tmp, n) for n in ("small.cfg", "small_training_0.hdf5", "weights.h5", "out.h5"))
        json_path = os.path.join(tmp, "bert_config.json")
        with open(json_path, "w") as f:
            json.dump(CONFIG, f)
        with open(files[0], "w") as f:
            f.write(f'task = "bert";\nmodel = {{ config_file = "{json_path}"; pad_vocab_to_multiple_of = {PAD_VOCAB}; }};\n')
        write_shard(files[1], batch)
        with h5py.File(files[2], "w") as f:
            for name, t in model.state_dict().items():
                f[f"model/{name}"] = t.numpy()
        failures = compare("dropout off", helper, files, model, batch, [])
        failures += compare(f"dropout 0.1 (seed {SEED}, update {UPDATE}, samples {FIRST_SAMPLE}..)", helper, files,
                            model, batch, [str(SEED), str(UPDATE), str(FIRST_SAMPLE)])
    print("PASS" if failures == 0 else f"FAIL: {failures} mismatches above {TOL}")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
