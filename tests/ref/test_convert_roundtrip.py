#!/usr/bin/env python3
"""A user moves BERT weights between PyTorch and hetseq with tools/hetseq_convert.py:
  * imports a BertForPreTraining checkpoint as NVIDIA saves it ({'model': state_dict}, DDP 'module.'
    prefixes) into a hetseq checkpoint, padding the vocabulary to a multiple of 8, and opens the result
    with h5py: hetseq's root attributes, NVIDIA's names, the tied decoder stored once, float32
    contiguous tensors bit-equal to PyTorch's, zero padding rows, the model settings as /config;
  * loads it with hetseq's own checkpoint loader as `checkpoint.init_checkpoint` does (bit-exact);
  * exports it back, loads it strictly into a fresh reference model and gets identical outputs, and
    bert_config.json regenerated; with the padded vocabulary kept, a model built padded gives the same
    MLM logits within float32 rounding (a different GEMM shape: no bit-equality across BLAS kernels)
    and zero logits for the padding rows;
  * imports a mixed-precision NVIDIA checkpoint (fp16 weights + float32 'master params') and a Hugging
    Face-named one, and gets the same float32 weights;
  * gets one clear error for untied decoder weights, a checkpoint of another model, a file that is not
    a checkpoint, and a hetseq file of the wrong kind."""
import atexit
import contextlib
import importlib.util
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections import OrderedDict

import h5py
import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bert_torch as bt  # noqa: E402

SRCDIR = os.environ.get("top_srcdir", os.path.join(HERE, "..", ".."))
CONVERT = os.path.join(SRCDIR, "tools", "hetseq_convert.py")

TINY = OrderedDict([("attention_probs_dropout_prob", 0.1), ("hidden_act", "gelu"), ("hidden_dropout_prob", 0.1),
                    ("hidden_size", 32), ("initializer_range", 0.02), ("intermediate_size", 64),
                    ("max_position_embeddings", 40), ("num_attention_heads", 2), ("num_hidden_layers", 2),
                    ("type_vocab_size", 2), ("vocab_size", 101)])


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def load_converter():
    spec = importlib.util.spec_from_file_location("hetseq_convert", CONVERT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


CONVERTER = load_converter()


def convert(*args, expect_ok=True, subprocess_run=False):
    """Runs the converter's command line in this process (fast) or as a program (subprocess_run)."""
    argv = [str(a) for a in args]
    if subprocess_run:
        r = subprocess.run([sys.executable, CONVERT] + argv, capture_output=True, text=True)
    else:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = CONVERTER.main(argv)
            except Exception:  # a traceback is a failure of the tool, not a user message
                code = 99
                err.write(traceback.format_exc())
        r = subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())
    if expect_ok and r.returncode != 0:
        fail("hetseq_convert.py %s failed (%d):\n%s%s" % (" ".join(map(str, args)), r.returncode, r.stdout, r.stderr))
    return r


def expect_error(what, pattern, *args, subprocess_run=False):
    r = convert(*args, expect_ok=False, subprocess_run=subprocess_run)
    check(r.returncode == 1, "%s: exit status %d, want 1\n%s" % (what, r.returncode, r.stderr))
    check("Traceback" not in r.stderr, "%s: a traceback instead of a message:\n%s" % (what, r.stderr))
    check(re.search(pattern, r.stderr), "%s: message does not match /%s/:\n%s" % (what, pattern, r.stderr))
    print("ok: %s -> %s" % (what, r.stderr.strip().splitlines()[0]))


def trained_like_model(seed=4):
    """The reference model with weights moved away from their init (distinct values everywhere)."""
    m = bt.build_model(TINY, dropout=False, seed=seed)
    with torch.no_grad():
        g = torch.Generator().manual_seed(seed + 100)
        for _, t in m.named_parameters():
            t.add_(0.05 * torch.randn(t.shape, generator=g))
    return m.eval()


def outputs(m, batch):
    with torch.no_grad():
        scores, nsp = m(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        loss = m(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], batch["masked_lm_labels"],
                 batch["next_sentence_label"])
    return scores, nsp, loss


def decoder_logits_bound(h, weight, bias):
    """The exact MLM logits h @ weight.T + bias (float64) and an elementwise bound on the error of ANY
    float32 evaluation of them.

    Each logit is a sum of n = H + 1 terms (H products h_i * w_ji and the bias). Rounded float32
    arithmetic, in whatever order the terms are added, with or without fused multiply-adds, and with the
    bias added inside the GEMM or after it, satisfies (Higham, Accuracy and Stability of Numerical
    Algorithms, 2nd ed., eq. 3.5 and Lemma 3.3)
        |fl(s) - s| <= gamma_n * (sum_i |h_i| |w_ji| + |b_j|),   gamma_n = n u / (1 - n u),  u = 2^-24.
    So the bound does not depend on which BLAS kernel runs. The float64 reference has the same kind of
    error with u = 2^-53, added to the bound. Measured here: float32 results within 0.11 of the bound for
    any OPENBLAS_CORETYPE; one decoder weight changed by 1e-4 of its value lands 6x above it, a wrong row
    or a lost bias orders of magnitude above."""
    n = h.shape[-1] + 1
    gamma = lambda u: n * u / (1 - n * u)  # noqa: E731
    h64, w64, b64 = h.double(), weight.double(), bias.double()
    exact = h64 @ w64.t() + b64
    magnitude = h64.abs() @ w64.abs().t() + b64.abs()
    return exact, (gamma(2.0 ** -24) + gamma(2.0 ** -53)) * magnitude


def package_version():
    with open(os.path.join(SRCDIR, "configure.ac")) as f:
        return re.search(r"AC_INIT\(\[hetseq\],\s*\[([^\]]+)\]", f.read()).group(1)


def main():
    torch.set_num_threads(1)
    work = tempfile.mkdtemp(prefix="hetseq-convert.")
    atexit.register(shutil.rmtree, work, True)
    model = trained_like_model()
    sd = model.state_dict()
    batch = bt.random_batch(model.config, batch=3, seq_len=20, max_pred=4, generator=torch.Generator().manual_seed(9))

    # ---- NVIDIA-style checkpoint with DDP prefixes -> hetseq ----
    src = os.path.join(work, "ckpt_7038.pt")
    torch.save({"model": OrderedDict(("module." + k, v) for k, v in sd.items()), "epoch": 1, "files": [0]}, src)
    cfg_json = os.path.join(work, "bert_config.json")
    with open(cfg_json, "w") as f:
        json.dump(TINY, f)
    h5 = os.path.join(work, "imported.h5")
    convert("import", src, h5, "--pad-vocab-to", 8, "--bert-config", cfg_json, subprocess_run=True)
    check(not os.path.exists(h5 + ".tmp"), "temporary file left behind")

    names = [n for n in bt.parameter_names(2) if n != bt.TIED_DECODER]
    with h5py.File(h5, "r") as f:
        check(f.attrs["format"] == "hetseq-checkpoint", "format attribute %r" % f.attrs.get("format"))
        check(f.attrs["version"] == 1 and f.attrs["version"].dtype == np.int64, "version attribute")
        check(f.attrs["hetseq_version"] == package_version(), "hetseq_version %r, configure.ac says %r"
              % (f.attrs["hetseq_version"], package_version()))
        check("optimizer" not in f and "train_state" not in f, "a weights-only checkpoint has no optimizer/train_state")
        check(sorted(f["model"].keys()) == sorted(names), "tensors: %s" % sorted(f["model"].keys()))
        for n in names:
            d = f["model"][n]
            check(d.dtype == np.dtype("<f4"), "%s dtype %s" % (n, d.dtype))
            check(d.chunks is None and d.compression is None, "%s not contiguous/uncompressed" % n)
            have, want = d[()], sd[n].numpy()
            if n in (bt.WORD_EMBEDDINGS, "cls.predictions.bias"):
                check(have.shape[0] == 104, "%s has %d rows, want 104 (101 padded to 8)" % (n, have.shape[0]))
                check(not have[101:].any(), "%s padding rows not zero" % n)
                have = have[:101]
            check(have.shape == want.shape and np.array_equal(have.view(np.uint32), want.view(np.uint32)),
                  "%s not bit-equal to the PyTorch tensor" % n)
        config = f["config"].asstr()[()]
    for key, value in [("hidden_size", "32"), ("num_attention_heads", "2"), ("vocab_size", "101"),
                       ("pad_vocab_to_multiple_of", "8"), ("intermediate_size", "64"), ("hidden_act", '"gelu"')]:
        check(re.search(r"\b%s = %s;" % (key, re.escape(value)), config), "/config lacks %s = %s:\n%s" % (key, value, config))
    check('task = "bert";' in config, "/config lacks the task")
    print("ok: import writes hetseq's layout with NVIDIA's names, bit-exact tensors, zero padding, /config")

    # ---- hetseq's own loader takes it as checkpoint.init_checkpoint ----
    driver = os.path.join(os.environ.get("top_builddir", "."), "tests", "ref", "init_checkpoint_driver")
    if not os.access(driver, os.X_OK):
        fail("driver not built: " + driver)
    with h5py.File(h5, "r") as f:
        specs = ["%s:%s" % (n, "x".join(str(d) for d in f["model"][n].shape)) for n in names]
        want = {n: f["model"][n][()].reshape(-1) for n in names}
    r = subprocess.run([driver, h5] + specs, capture_output=True, text=True)
    check(r.returncode == 0, "hetseq cannot load the converted checkpoint:\n" + r.stderr)
    loaded = {}
    for line in r.stdout.splitlines():
        parts = line.split()
        loaded[parts[0]] = np.array([float.fromhex(x) for x in parts[1:]], dtype=np.float32)
    check(sorted(loaded) == sorted(names), "driver printed %s" % sorted(loaded))
    for n in names:
        check(np.array_equal(loaded[n].view(np.uint32), want[n].view(np.uint32)), "%s differs as loaded by hetseq" % n)
    # A model shaped differently (no vocabulary padding) is refused with the tensor and both shapes.
    specs_unpadded = [s.replace(bt.WORD_EMBEDDINGS + ":104x32", bt.WORD_EMBEDDINGS + ":101x32") for s in specs]
    r = subprocess.run([driver, h5] + specs_unpadded, capture_output=True, text=True)
    check(r.returncode != 0 and "word_embeddings.weight has shape [104, 32] but the model expects [101, 32]" in r.stderr,
          "shape mismatch not reported:\n" + r.stderr)
    print("ok: hetseq loads the converted checkpoint as init_checkpoint, bit for bit")

    # ---- back to PyTorch, unpadded: strict load, identical outputs ----
    pt = os.path.join(work, "exported.pt")
    out_cfg = os.path.join(work, "exported_config.json")
    convert("export", h5, pt, "--vocab-size", 101, "--bert-config-out", out_cfg)
    back = torch.load(pt)
    check(list(back.keys()) == bt.parameter_names(2), "exported names/order differ from NVIDIA's state_dict")
    fresh = bt.build_model(TINY, dropout=False, seed=123).eval()
    fresh.load_state_dict(back, strict=True)
    check(fresh.cls.predictions.decoder.weight is fresh.bert.embeddings.word_embeddings.weight, "tying lost on load")
    for what, a, b in zip(("MLM scores", "NSP scores", "loss"), outputs(model, batch), outputs(fresh, batch)):
        check(torch.equal(a, b), "%s differ after import + export" % what)
    with open(out_cfg) as f:
        check(json.load(f) == dict(TINY), "regenerated bert_config.json differs")
    print("ok: export loads strictly into BertForPreTraining with identical outputs; bert_config.json regenerated")

    # ---- padded vocabulary kept: the extra rows are zero logits, the rest unchanged ----
    pt8 = os.path.join(work, "exported_padded.pt")
    convert("export", h5, pt8, "--nvidia-checkpoint")
    wrapped = torch.load(pt8)
    check(set(wrapped) == {"model"}, "--nvidia-checkpoint saves {'model': state_dict}")
    padded = bt.build_model(TINY, pad_vocab_to_multiple_of=8, dropout=False, seed=1).eval()
    padded.load_state_dict(wrapped["model"], strict=True)
    s_ref, n_ref, _ = outputs(model, batch)
    s_pad, n_pad, _ = outputs(padded, batch)
    # Everything before the decoder has the same shapes in both models (the embedding lookup only
    # gathers rows), so it is the same computation: bit-equal. The decoder is a [.., 32] x [32, 101]
    # product in one model and [.., 32] x [32, 104] in the other; a BLAS may pick other kernels, blockings
    # and summation orders for the two shapes (OpenBLAS does, e.g. with OPENBLAS_CORETYPE=Haswell), so
    # those logits are compared against the exact value with the rounding-error bound of a dot product.
    with torch.no_grad():
        seq_ref, pooled_ref = model.bert(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        seq_pad, pooled_pad = padded.bert(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        check(torch.equal(seq_pad, seq_ref) and torch.equal(pooled_pad, pooled_ref) and torch.equal(n_pad, n_ref),
              "padded export: the encoder or NSP outputs changed")
        h = model.cls.predictions.transform(seq_ref)
        exact, bound = decoder_logits_bound(h, model.cls.predictions.decoder.weight, model.cls.predictions.bias)
    for what, s in (("unpadded model", s_ref), ("padded export", s_pad[..., :101])):
        err = (s.double() - exact).abs()
        worst = int((err / bound).argmax())
        check(bool((err <= bound).all()), "%s: an MLM logit is off by %.3g, beyond its float32 rounding bound %.3g"
              % (what, float(err.flatten()[worst]), float(bound.flatten()[worst])))
    # the padding rows are zero weights and zero bias: every product and sum is exactly 0 in any order
    check(not s_pad[..., 101:].any(), "padded export: the padding rows give non-zero logits")
    print("ok: padded export loads into a model built with the vocabulary padded to 8 (logits within %.2g of "
          "the rounding bound)" % float(((s_pad[..., :101].double() - exact).abs() / bound).max()))

    # ---- NVIDIA mixed precision: fp16 weights + float32 master params in optimizer-group order ----
    params = [n for n in bt.parameter_names(2) if n != bt.TIED_DECODER]
    no_decay = ("bias", "gamma", "beta", "LayerNorm")
    order = [n for n in params if not any(k in n for k in no_decay)] + [n for n in params if any(k in n for k in no_decay)]
    check(order == [n for n, _ in model.named_parameters() if not any(k in n for k in no_decay)]
          + [n for n, _ in model.named_parameters() if any(k in n for k in no_decay)], "named_parameters order")
    amp = os.path.join(work, "amp.pt")
    torch.save({"model": OrderedDict((k, v.half()) for k, v in sd.items()),
                "master params": [sd[n].clone() for n in order]}, amp)
    h5amp = os.path.join(work, "amp.h5")
    r = convert("import", amp, h5amp)
    check("master params" in r.stdout, "master params not reported:\n" + r.stdout)
    with h5py.File(h5amp, "r") as f:
        for n in params:
            check(np.array_equal(f["model"][n][()], sd[n].numpy()), "%s: master params not used" % n)
    torch.save({"model": OrderedDict((k, v.half()) for k, v in sd.items())}, amp)
    r = convert("import", amp, h5amp)
    check("half-precision" in r.stderr, "no note about widening half precision:\n" + r.stderr)
    with h5py.File(h5amp, "r") as f:
        w = f["model"]["bert.encoder.layer.1.output.dense.weight"][()]
        check(np.array_equal(w, sd["bert.encoder.layer.1.output.dense.weight"].half().float().numpy()), "fp16 widening")
    print("ok: mixed-precision checkpoints give the float32 master weights (or widened fp16 with a note)")

    # ---- Hugging Face names ----
    hf = OrderedDict()
    for k, v in sd.items():
        k = k.replace("intermediate.dense_act.", "intermediate.dense.").replace("pooler.dense_act.", "pooler.dense.")
        k = k.replace("transform.dense_act.", "transform.dense.")
        hf[k] = v
    hf["cls.predictions.decoder.bias"] = sd["cls.predictions.bias"]
    hf["bert.embeddings.position_ids"] = torch.arange(40)[None]
    hf_pt, hf_h5 = os.path.join(work, "hf.bin"), os.path.join(work, "hf.h5")
    torch.save(hf, hf_pt)
    convert("import", hf_pt, hf_h5)
    with h5py.File(hf_h5, "r") as f:
        check(sorted(f["model"].keys()) == sorted(params), "Hugging Face names not mapped")
        check(all(np.array_equal(f["model"][n][()], sd[n].numpy()) for n in params), "Hugging Face values")
        check("config" not in f, "no /config without --bert-config")
    print("ok: Hugging Face BertForPreTraining names are mapped to NVIDIA's")

    # ---- user errors ----
    untied = OrderedDict(sd)
    untied[bt.TIED_DECODER] = sd[bt.TIED_DECODER] + 1.0
    bad = os.path.join(work, "untied.pt")
    torch.save(untied, bad)
    expect_error("untied decoder", r"cls\.predictions\.decoder\.weight differs from bert\.embeddings\.word_embeddings", "import", bad, os.path.join(work, "x.h5"))
    partial = OrderedDict((k, v) for k, v in sd.items() if "layer.1.output.dense" not in k)
    torch.save(partial, bad)
    expect_error("missing tensor", r"missing \(2\): bert\.encoder\.layer\.1\.output\.dense\.weight", "import", bad, os.path.join(work, "x.h5"))
    torch.save({"conv1.weight": torch.zeros(2, 1, 3, 3), "fc1.bias": torch.zeros(4)}, bad)
    expect_error("another model", r"does not hold NVIDIA BertForPreTraining weights", "import", bad, os.path.join(work, "x.h5"))
    with open(bad, "w") as f:
        f.write("not a checkpoint\n")
    expect_error("not a torch file (as a program)", r"cannot read .*untied\.pt.* with torch\.load", "import", bad, os.path.join(work, "x.h5"),
                 subprocess_run=True)
    expect_error("no such file", r"no such file", "import", os.path.join(work, "none.pt"), os.path.join(work, "x.h5"))
    cfg_bad = os.path.join(work, "bad_config.json")
    with open(cfg_bad, "w") as f:
        json.dump(dict(TINY, hidden_size=48), f)
    expect_error("bert_config of another shape", r"bert\.embeddings\.word_embeddings\.weight has shape \[101, 32\] but bert_config",
                 "import", src, os.path.join(work, "x.h5"), "--bert-config", cfg_bad)
    other = os.path.join(work, "other.h5")
    with h5py.File(other, "w") as f:
        f.create_dataset("x", data=np.zeros(3))
    expect_error("export of a plain HDF5 file", r"not a hetseq checkpoint", "export", other, pt)
    with h5py.File(other, "w") as f:
        f.attrs["format"] = "hetseq-checkpoint"
        f.attrs["version"] = np.int64(1)
        f.create_dataset("model/fc1.weight", data=np.zeros((4, 8), np.float32))
    expect_error("export of a non-BERT checkpoint", r"missing .*bert\.embeddings\.word_embeddings\.weight", "export", other, pt)
    expect_error("export --vocab-size too large", r"--vocab-size 200: the checkpoint has 104", "export", h5, pt, "--vocab-size", 200)
    print("PASS")


if __name__ == "__main__":
    main()
