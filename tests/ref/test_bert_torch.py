#!/usr/bin/env python3
"""The PyTorch reference BERT (tests/ref/bert_torch.py) is what hetseq's C model is checked against, so it
is checked itself, against facts that do not come from its own code:
  * its state_dict has exactly NVIDIA's BertForPreTraining names, order and shapes, and BERT-base with
    the 30522 vocabulary has the published 110,106,428 parameters (the hetseq behaviour notes' count);
  * the initialisation has NVIDIA's statistics (N(0, 0.02) Linear/Embedding weights, zero biases,
    LayerNorm 1/0, U(+-1/sqrt(fan_in)) LinearActivation layers, identical intermediate weights in every
    layer, decoder tied to the embedding);
  * its loss equals an independent float64 NumPy forward pass written from the model description, for
    the full-logits and the gathered-positions MLM head alike;
  * NVIDIA's masked-LM label rule (positions up to the first 0), exact-erf GELU, and the dropout hook."""
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bert_torch as bt  # noqa: E402

SRCDIR = os.environ.get("top_srcdir", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


SMALL = {"vocab_size": 101, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 96, "max_position_embeddings": 128, "type_vocab_size": 2}

# NVIDIA's BertForPreTraining.state_dict() for one layer, written out by hand.
NVIDIA_NAMES_ONE_LAYER = """bert.embeddings.word_embeddings.weight bert.embeddings.position_embeddings.weight
bert.embeddings.token_type_embeddings.weight bert.embeddings.LayerNorm.weight bert.embeddings.LayerNorm.bias
bert.encoder.layer.0.attention.self.query.weight bert.encoder.layer.0.attention.self.query.bias
bert.encoder.layer.0.attention.self.key.weight bert.encoder.layer.0.attention.self.key.bias
bert.encoder.layer.0.attention.self.value.weight bert.encoder.layer.0.attention.self.value.bias
bert.encoder.layer.0.attention.output.dense.weight bert.encoder.layer.0.attention.output.dense.bias
bert.encoder.layer.0.attention.output.LayerNorm.weight bert.encoder.layer.0.attention.output.LayerNorm.bias
bert.encoder.layer.0.intermediate.dense_act.weight bert.encoder.layer.0.intermediate.dense_act.bias
bert.encoder.layer.0.output.dense.weight bert.encoder.layer.0.output.dense.bias
bert.encoder.layer.0.output.LayerNorm.weight bert.encoder.layer.0.output.LayerNorm.bias
bert.pooler.dense_act.weight bert.pooler.dense_act.bias cls.predictions.bias
cls.predictions.transform.dense_act.weight cls.predictions.transform.dense_act.bias
cls.predictions.transform.LayerNorm.weight cls.predictions.transform.LayerNorm.bias
cls.predictions.decoder.weight cls.seq_relationship.weight cls.seq_relationship.bias""".split()


def test_names_and_counts():
    m = bt.build_model(dict(SMALL, num_hidden_layers=1), seed=1)
    check(list(m.state_dict().keys()) == NVIDIA_NAMES_ONE_LAYER,
          "state_dict names/order differ from NVIDIA's: %s" % list(m.state_dict().keys()))
    m2 = bt.build_model(SMALL, seed=1)
    check(list(m2.state_dict().keys()) == bt.parameter_names(2), "parameter_names(2) differs from the state_dict")
    sd = m2.state_dict()
    h, i, v = 64, 96, 101
    shapes = {"bert.embeddings.word_embeddings.weight": (v, h), "bert.embeddings.position_embeddings.weight": (128, h),
              "bert.encoder.layer.1.intermediate.dense_act.weight": (i, h),
              "bert.encoder.layer.1.output.dense.weight": (h, i), "cls.predictions.bias": (v,),
              "cls.predictions.decoder.weight": (v, h), "cls.seq_relationship.weight": (2, h)}
    for n, s in shapes.items():
        check(tuple(sd[n].shape) == s, "%s shape %s, want %s" % (n, tuple(sd[n].shape), s))
    # conf/bert_config_{base,large}.json are Google's files: exactly these 11 keys and values.
    google = {"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
              "initializer_range": 0.02, "max_position_embeddings": 512, "type_vocab_size": 2, "vocab_size": 30522}
    want = {"base": dict(google, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
            "large": dict(google, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)}
    for size in want:
        with open(os.path.join(SRCDIR, "conf", "bert_config_%s.json" % size)) as f:
            have = json.load(f)
        check(have == want[size], "conf/bert_config_%s.json: %s" % (size, have))
    # BERT-base from that file, vocab 30522: 110,106,428 parameters (BertModel 109,482,240 + heads).
    base = bt.build_model(os.path.join(SRCDIR, "conf", "bert_config_base.json"), seed=0)
    n = bt.count_parameters(base)
    check(n == 110106428, "BERT-base has %d parameters, want 110106428" % n)
    check(bt.count_parameters(bt.build_model({"vocab_size": 30522}, pad_vocab_to_multiple_of=8, seed=0))
          == 110106428 + 6 * 768 + 6, "padding 30522 -> 30528 adds 6 embedding rows and 6 bias entries")
    print("ok: NVIDIA names, order, shapes; Google's bert_config files; BERT-base 110,106,428 parameters")


def test_init():
    cfg = dict(SMALL, vocab_size=3000, hidden_size=256, intermediate_size=1024, num_attention_heads=4)
    m = bt.build_model(cfg, seed=3)
    sd = m.state_dict()
    for n in ["bert.embeddings.word_embeddings.weight", "bert.encoder.layer.0.attention.self.query.weight",
              "bert.encoder.layer.1.output.dense.weight"]:
        s = float(sd[n].std())
        check(abs(s - 0.02) < 0.02 * 0.05, "%s std %.5f, want N(0, 0.02)" % (n, s))
    for n in ["bert.encoder.layer.0.attention.self.key.bias", "bert.encoder.layer.1.output.dense.bias",
              "cls.seq_relationship.bias", "cls.predictions.bias", "bert.embeddings.LayerNorm.bias"]:
        check(float(sd[n].abs().max()) == 0.0, "%s not zero" % n)
    check(bool((sd["bert.encoder.layer.0.output.LayerNorm.weight"] == 1).all()), "LayerNorm weight not 1")
    for n, fan_in in [("bert.encoder.layer.0.intermediate.dense_act.weight", 256), ("bert.pooler.dense_act.weight", 256),
                      ("cls.predictions.transform.dense_act.bias", 256)]:
        bound = 1.0 / math.sqrt(fan_in)
        t = sd[n]
        check(float(t.abs().max()) <= bound and float(t.abs().max()) > 0.9 * bound,
              "%s not U(+-%.4f): max |w| %.4f" % (n, bound, float(t.abs().max())))
        uniform_std = bound / math.sqrt(3)
        check(abs(float(t.std()) - uniform_std) < 0.1 * uniform_std, "%s std %.5f, want %.5f" % (n, float(t.std()), uniform_std))
    check(torch.equal(sd["bert.encoder.layer.0.intermediate.dense_act.weight"],
                      sd["bert.encoder.layer.1.intermediate.dense_act.weight"]),
          "NVIDIA deep-copies one layer: intermediate.dense_act starts identical in every layer")
    check(not torch.equal(sd["bert.encoder.layer.0.attention.self.query.weight"],
                          sd["bert.encoder.layer.1.attention.self.query.weight"]), "query weights re-drawn per layer")
    check(m.cls.predictions.decoder.weight is m.bert.embeddings.word_embeddings.weight, "decoder not tied")
    a, b = bt.build_model(cfg, seed=3).state_dict(), sd
    check(all(torch.equal(a[k], b[k]) for k in a), "same seed, different weights")
    print("ok: initialisation statistics and tying")


# ---- an independent float64 forward pass ---------------------------------------------------------

def np_layer_norm(x, w, b):
    u = x.mean(-1, keepdims=True)
    var = ((x - u) ** 2).mean(-1, keepdims=True)
    return w * (x - u) / np.sqrt(var + 1e-12) + b


def np_gelu(x):
    from math import erf
    return 0.5 * x * (1.0 + np.vectorize(erf)(x / math.sqrt(2.0)))


def np_log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def np_bert_loss(p, cfg, ids, seg, mask, labels, nsp):
    """MLM + NSP loss of BertForPreTraining from its description, in float64 NumPy."""
    p = {k: v.detach().double().numpy() for k, v in p.items()}
    B, L = ids.shape
    H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    d = H // nh
    lin = lambda x, name: x @ p[name + ".weight"].T + p[name + ".bias"]  # noqa: E731
    x = p["bert.embeddings.word_embeddings.weight"][ids] + p["bert.embeddings.position_embeddings.weight"][:L][None] \
        + p["bert.embeddings.token_type_embeddings.weight"][seg]
    x = np_layer_norm(x, p["bert.embeddings.LayerNorm.weight"], p["bert.embeddings.LayerNorm.bias"])
    add = (1.0 - mask[:, None, None, :]) * -10000.0
    for i in range(cfg["num_hidden_layers"]):
        pre = "bert.encoder.layer.%d." % i
        heads = lambda t: t.reshape(B, L, nh, d).transpose(0, 2, 1, 3)  # noqa: E731
        q, k, v = (heads(lin(x, pre + "attention.self." + n)) for n in ("query", "key", "value"))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d) + add
        a = np.exp(np_log_softmax(s)) @ v
        a = a.transpose(0, 2, 1, 3).reshape(B, L, H)
        x1 = np_layer_norm(lin(a, pre + "attention.output.dense") + x, p[pre + "attention.output.LayerNorm.weight"],
                           p[pre + "attention.output.LayerNorm.bias"])
        f = lin(np_gelu(lin(x1, pre + "intermediate.dense_act")), pre + "output.dense")
        x = np_layer_norm(f + x1, p[pre + "output.LayerNorm.weight"], p[pre + "output.LayerNorm.bias"])
    pooled = np.tanh(lin(x[:, 0], "bert.pooler.dense_act"))
    t = np_gelu(lin(x, "cls.predictions.transform.dense_act"))
    t = np_layer_norm(t, p["cls.predictions.transform.LayerNorm.weight"], p["cls.predictions.transform.LayerNorm.bias"])
    logits = t @ p["bert.embeddings.word_embeddings.weight"].T + p["cls.predictions.bias"]
    lp = np_log_softmax(logits).reshape(B * L, -1)
    flat = labels.reshape(-1)
    sel = np.nonzero(flat != -1)[0]
    mlm = -lp[sel, flat[sel]].mean()
    nsp_logits = lin(pooled, "cls.seq_relationship")
    nlp = np_log_softmax(nsp_logits)
    return mlm, -nlp[np.arange(B), nsp].mean(), logits.reshape(B * L, -1)[sel], nsp_logits


def test_loss_vs_numpy():
    m = bt.build_model(SMALL, dropout=False, seed=5)
    # Spread the weights so every block matters (the init is nearly an identity + tiny logits).
    with torch.no_grad():
        g = torch.Generator().manual_seed(11)
        for name, t in m.named_parameters():
            t.add_(0.1 * torch.randn(t.shape, generator=g))
    batch = bt.random_batch(m.config, batch=3, seq_len=24, max_pred=5, generator=torch.Generator().manual_seed(2))
    args = [batch[k] for k in ("input_ids", "token_type_ids", "attention_mask", "masked_lm_labels", "next_sentence_label")]
    mlm_ref, nsp_ref, logits_ref, nsp_logits_ref = np_bert_loss(dict(m.named_parameters()), SMALL,
                                                                *[a.numpy() for a in args])
    out = m.losses(*args)
    mlm, nsp = float(out[0]), float(out[1])
    total = float(m(*args))
    # Logits at the labelled positions and NSP logits: float32 vs float64 within 2e-5 of the spread.
    for what, have, want in (("MLM logits", out[2], logits_ref), ("NSP logits", out[4], nsp_logits_ref)):
        err = float(np.abs(have.detach().double().numpy() - want).max())
        check(err <= 2e-5 * float(np.abs(want).max()), "%s differ from float64 by %.3g" % (what, err))
    check(abs(mlm - mlm_ref) <= 1e-5 * abs(mlm_ref), "MLM loss %.8f vs float64 %.8f" % (mlm, mlm_ref))
    check(abs(nsp - nsp_ref) <= 1e-5 * abs(nsp_ref), "NSP loss %.8f vs float64 %.8f" % (nsp, nsp_ref))
    check(abs(total - (mlm_ref + nsp_ref)) <= 1e-5 * (mlm_ref + nsp_ref), "total loss")
    m.mlm_positions = "masked"
    g_mlm, g_nsp = (float(t) for t in m.losses(*args)[:2])
    check(abs(g_mlm - mlm) <= 1e-6 * mlm and g_nsp == nsp, "gathered MLM head gives %.8f, full %.8f" % (g_mlm, mlm))
    fused = bt.build_model(SMALL, dropout=False, seed=5, layer_norm="fused")
    fused.load_state_dict(m.state_dict())
    f_mlm, f_nsp = (float(t) for t in fused.losses(*args)[:2])
    check(abs(f_mlm - mlm_ref) <= 1e-5 * mlm_ref and abs(f_nsp - nsp_ref) <= 1e-5 * nsp_ref,
          "F.layer_norm variant: MLM %.8f NSP %.8f" % (f_mlm, f_nsp))
    # Padding tokens must not influence real ones: changing a padded input id changes nothing.
    ids2 = args[0].clone()
    row = 0
    pad_at = int(args[2][row].sum())
    if pad_at < ids2.shape[1]:
        ids2[row, pad_at] = 7
        loss2 = float(m(ids2, *args[1:]))
        check(abs(loss2 - total) <= 1e-4 * total, "a padded token changed the loss (mask not applied?)")
    print("ok: MLM %.6f NSP %.6f equal the float64 NumPy model; gathered head and fused LayerNorm equal" % (mlm, nsp))


def test_labels_gelu_dropout():
    pos = torch.tensor([[2, 5, 0, 0], [1, 2, 3, 4], [3, 0, 7, 0]])
    ids = torch.tensor([[11, 12, 0, 0], [21, 22, 23, 24], [31, 0, 99, 0]])
    lab = bt.masked_lm_labels(pos, ids, 9)
    want = torch.full((3, 9), -1, dtype=torch.long)
    want[0, 2], want[0, 5] = 11, 12
    want[1, 1:5] = torch.tensor([21, 22, 23, 24])
    want[2, 3] = 31  # stops at the first 0: position 7 is ignored
    check(torch.equal(lab, want), "masked_lm_labels:\n%s" % lab)

    x = torch.tensor([-3.0, -1.0, 0.0, 1.0, 2.5], dtype=torch.float64)
    phi = torch.tensor([0.0013498980316301, 0.15865525393145707, 0.5, 0.8413447460685429, 0.9937903346742238],
                       dtype=torch.float64)
    check(torch.allclose(bt.gelu_exact(x), x * phi, rtol=1e-12, atol=1e-15), "exact GELU != x * Phi(x)")
    check(float((bt.gelu_hetseq(x) - x * phi).abs().max()) < 1e-5, "truncated-constant GELU too far off")

    m = bt.build_model(dict(SMALL, hidden_dropout_prob=0.5, attention_probs_dropout_prob=0.5), seed=7)
    batch = bt.random_batch(m.config, 2, 16, 3)
    args = [batch[k] for k in ("input_ids", "token_type_ids", "attention_mask", "masked_lm_labels", "next_sentence_label")]
    seen = []
    m.set_dropout_override(lambda site, t, p: (seen.append((site, p)), t)[1])
    m.train()
    with torch.no_grad():
        l_train = float(m(*args))
    m.eval()
    with torch.no_grad():
        l_eval = float(m(*args))
    check(l_train == l_eval, "identity dropout override: train %.8f != eval %.8f" % (l_train, l_eval))
    sites = [s for s, _ in seen]
    want_sites = ["bert.embeddings.dropout"]
    for i in range(2):
        want_sites += ["bert.encoder.layer.%d.attention.self.dropout" % i, "bert.encoder.layer.%d.attention.output.dropout" % i,
                       "bert.encoder.layer.%d.output.dropout" % i]
    check(sites == want_sites, "dropout sites %s" % sites)
    m.set_dropout_override(None)
    m.train()
    with torch.no_grad():
        check(float(m(*args)) != l_eval, "dropout 0.5 had no effect in train mode")
    print("ok: masked-LM labels, exact GELU, dropout sites and hook")


def main():
    torch.set_num_threads(1)
    test_names_and_counts()
    test_init()
    test_loss_vs_numpy()
    test_labels_gelu_dropout()
    print("PASS")


if __name__ == "__main__":
    main()
