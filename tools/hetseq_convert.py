#!/usr/bin/env python3
"""Convert BERT pre-training weights between PyTorch and hetseq.

  hetseq_convert.py import MODEL.pt OUT.h5 [--pad-vocab-to 8] [--bert-config bert_config.json]
      A PyTorch checkpoint of NVIDIA's / HetSeq's BertForPreTraining (a state_dict, or a dict holding
      it under 'model' as run_pretraining.py and HetSeq save, or under 'state_dict') becomes a
      weights-only hetseq checkpoint, for `checkpoint.init_checkpoint = "OUT.h5"`.
  hetseq_convert.py export CHECKPOINT.h5 OUT.pt [--vocab-size 30522] [--nvidia-checkpoint]
                    [--bert-config-out bert_config.json --num-attention-heads 12]
      The /model tensors of a hetseq checkpoint become a state_dict that loads with strict=True into
      NVIDIA's BertForPreTraining (torch.save; --nvidia-checkpoint wraps it as {'model': state_dict},
      what run_pretraining.py --init_checkpoint reads).

Parameter names are NVIDIA's state_dict names (bert.encoder.layer.N.intermediate.dense_act.weight, ...;
docs/checkpoint-format.md). hetseq stores the word embedding once: the tied
cls.predictions.decoder.weight is checked to equal bert.embeddings.word_embeddings.weight and dropped
on import, and written back on export.

Also handled on import: 'module.' prefixes (DistributedDataParallel), LayerNorm gamma/beta names (old
checkpoints), Hugging Face BertForPreTraining names (intermediate.dense -> intermediate.dense_act,
pooler.dense -> pooler.dense_act, transform.dense -> transform.dense_act; its duplicate
cls.predictions.decoder.bias and position_ids buffer dropped), half-precision weights (converted to
float32; NVIDIA's mixed-precision checkpoints carry float32 'master params', used instead when their
shapes line up with the parameters).

Needs python3 with torch and h5py (e.g. Debian's python3-torch python3-h5py).
"""
import argparse
import json
import os
import re
import sys
from collections import OrderedDict

import h5py
import numpy as np
import torch

FORMAT = "hetseq-checkpoint"
FORMAT_VERSION = 1
HETSEQ_VERSION = "0.1.0"  # AC_INIT version in configure.ac (tests/ref/test_convert_roundtrip.py checks it)

WORD_EMBEDDINGS = "bert.embeddings.word_embeddings.weight"
TIED_DECODER = "cls.predictions.decoder.weight"
MLM_BIAS = "cls.predictions.bias"
NO_DECAY = ("bias", "gamma", "beta", "LayerNorm")  # run_pretraining.py's optimizer groups

LAYER_TENSORS = ["attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
                 "attention.output.LayerNorm", "intermediate.dense_act", "output.dense", "output.LayerNorm"]


class ConvertError(Exception):
    """A user error: printed as one message, exit status 1."""


def expected_names(num_layers):
    """NVIDIA BertForPreTraining.state_dict() keys in their order (decoder weight included)."""
    names = [WORD_EMBEDDINGS, "bert.embeddings.position_embeddings.weight",
             "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight",
             "bert.embeddings.LayerNorm.bias"]
    for i in range(num_layers):
        for sub in LAYER_TENSORS:
            names += ["bert.encoder.layer.%d.%s.%s" % (i, sub, k) for k in ("weight", "bias")]
    names += ["bert.pooler.dense_act.weight", "bert.pooler.dense_act.bias", MLM_BIAS,
              "cls.predictions.transform.dense_act.weight", "cls.predictions.transform.dense_act.bias",
              "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.bias",
              TIED_DECODER, "cls.seq_relationship.weight", "cls.seq_relationship.bias"]
    return names


def num_layers_of(names):
    layers = [int(m.group(1)) for n in names for m in [re.match(r"bert\.encoder\.layer\.(\d+)\.", n)] if m]
    return max(layers) + 1 if layers else 0


def check_names(have, want, what, hint):
    missing = [n for n in want if n not in have]
    extra = [n for n in have if n not in set(want)]
    if missing or extra:
        msg = "%s does not hold NVIDIA BertForPreTraining weights" % what
        if missing:
            msg += "\n  missing (%d): %s" % (len(missing), ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else ""))
        if extra:
            msg += "\n  unexpected (%d): %s" % (len(extra), ", ".join(extra[:8]) + (" ..." if len(extra) > 8 else ""))
        raise ConvertError(msg + "\n  hint: " + hint)


# ---- import: PyTorch -> hetseq -----------------------------------------------------------------------

def find_state_dict(obj, path):
    """The state_dict inside whatever torch.load returned."""
    if isinstance(obj, torch.nn.Module):
        return obj.state_dict()
    if not isinstance(obj, dict):
        raise ConvertError("'%s' holds a %s, not a state_dict or a checkpoint dict" % (path, type(obj).__name__))
    for key in ("model", "state_dict", "model_state_dict"):
        if key in obj and isinstance(obj[key], dict):
            return obj[key]
    if obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
        return obj
    raise ConvertError("'%s' is a dict without model weights (keys: %s); expected a state_dict or a dict with "
                       "'model' (as NVIDIA's run_pretraining.py and HetSeq save)" % (path, ", ".join(map(str, list(obj)[:10]))))


def canonical_names(state):
    """Strip DDP prefixes, rename gamma/beta and Hugging Face names to NVIDIA's."""
    out = OrderedDict()
    for name, t in state.items():
        if not isinstance(t, torch.Tensor):
            continue
        while name.startswith("module."):
            name = name[len("module."):]
        name = re.sub(r"LayerNorm\.gamma$", "LayerNorm.weight", name)
        name = re.sub(r"LayerNorm\.beta$", "LayerNorm.bias", name)
        if name in ("bert.embeddings.position_ids", "cls.predictions.decoder.bias"):
            continue  # Hugging Face: a buffer, and an alias of cls.predictions.bias
        name = re.sub(r"^(bert\.encoder\.layer\.\d+\.intermediate)\.dense\.", r"\1.dense_act.", name)
        name = re.sub(r"^bert\.pooler\.dense\.", "bert.pooler.dense_act.", name)
        name = re.sub(r"^cls\.predictions\.transform\.dense\.", "cls.predictions.transform.dense_act.", name)
        if name in out:
            raise ConvertError("tensor %s appears twice (with and without a 'module.' prefix?)" % name)
        out[name] = t
    return out


def master_params_mapping(ckpt, names, state):
    """NVIDIA's fp16 checkpoints keep the float32 weights as the list 'master params', in the order of
    the optimizer's parameter groups: every decayed parameter (named_parameters order), then the
    no-decay ones (names containing bias/gamma/beta/LayerNorm). Returns {name: float32 tensor} or None
    if the list does not line up with the parameters."""
    masters = ckpt.get("master params") if isinstance(ckpt, dict) else None
    if not isinstance(masters, (list, tuple)):
        return None
    params = [n for n in names if n != TIED_DECODER]  # named_parameters() skips the tied alias
    order = [n for n in params if not any(k in n for k in NO_DECAY)] + \
            [n for n in params if any(k in n for k in NO_DECAY)]
    if len(masters) != len(order):
        return None
    out = {}
    for n, m in zip(order, masters):
        if not isinstance(m, torch.Tensor) or tuple(m.shape) != tuple(state[n].shape):
            return None
        out[n] = m.detach().to(torch.float32)
    return out


def pad_rows(t, rows):
    """t[V,...] -> [rows,...] with zero rows appended."""
    if t.shape[0] == rows:
        return t
    pad = torch.zeros((rows - t.shape[0],) + tuple(t.shape[1:]), dtype=t.dtype)
    return torch.cat([t, pad], 0)


def check_against_config(tensors, cfg, path):
    """Shapes implied by a bert_config.json must match the weights."""
    h, i = cfg.get("hidden_size"), cfg.get("intermediate_size")
    want = {WORD_EMBEDDINGS: (cfg.get("vocab_size"), h),
            "bert.embeddings.position_embeddings.weight": (cfg.get("max_position_embeddings"), h),
            "bert.embeddings.token_type_embeddings.weight": (cfg.get("type_vocab_size"), h),
            "bert.encoder.layer.0.intermediate.dense_act.weight": (i, h)}
    for name, shape in want.items():
        if None in shape:
            continue
        have = tuple(tensors[name].shape)
        if name == WORD_EMBEDDINGS and have[1] == shape[1] and have[0] >= shape[0]:
            continue  # a padded vocabulary
        if have != tuple(shape):
            raise ConvertError("tensor %s has shape %s but bert_config '%s' implies %s"
                               % (name, list(have), path, list(shape)))
    layers = num_layers_of(tensors)
    if cfg.get("num_hidden_layers") not in (None, layers):
        raise ConvertError("the weights have %d layers but bert_config '%s' says num_hidden_layers = %s"
                           % (layers, path, cfg["num_hidden_layers"]))
    if h and cfg.get("num_attention_heads") and h % cfg["num_attention_heads"]:
        raise ConvertError("bert_config '%s': hidden_size %d is not a multiple of num_attention_heads %d"
                           % (path, h, cfg["num_attention_heads"]))


def config_text(cfg, vocab_rows, pad_multiple):
    """A hetseq configuration (libconfig) recording the model shape, stored as /config."""
    lines = ["# written by tools/hetseq_convert.py import", 'task = "bert";', "", "model: {"]
    keys = ["hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "hidden_act",
            "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings", "type_vocab_size",
            "initializer_range"]
    lines.append("  vocab_size = %d;" % cfg.get("vocab_size", vocab_rows))
    for k in keys:
        if k in cfg:
            v = cfg[k]
            lines.append("  %s = %s;" % (k, json.dumps(v) if isinstance(v, str) else repr(v)))
    lines.append("  pad_vocab_to_multiple_of = %d;" % pad_multiple)
    lines.append("};")
    return "\n".join(lines) + "\n"


def write_checkpoint(path, tensors, config, source):
    tmp = path + ".tmp"
    with h5py.File(tmp, "w") as f:
        f.attrs["format"] = FORMAT
        f.attrs["version"] = np.int64(FORMAT_VERSION)
        f.attrs["hetseq_version"] = HETSEQ_VERSION
        f.attrs["converted_from"] = source
        g = f.create_group("model")
        for name, t in tensors.items():
            g.create_dataset(name, data=np.ascontiguousarray(t.detach().cpu().numpy(), dtype="<f4"))
        if config is not None:
            f.create_dataset("config", data=config, dtype=h5py.string_dtype("utf-8"))
    os.replace(tmp, path)


def cmd_import(args):
    if not os.path.isfile(args.src):
        raise ConvertError("no such file: '%s'" % args.src)
    try:
        ckpt = torch.load(args.src, map_location="cpu")
    except Exception as e:  # torch raises many kinds for a file that is not a checkpoint
        raise ConvertError("cannot read '%s' with torch.load: %s" % (args.src, e))
    state = canonical_names(find_state_dict(ckpt, args.src))
    layers = num_layers_of(state)
    names = expected_names(layers)
    if TIED_DECODER not in state and WORD_EMBEDDINGS in state:
        state[TIED_DECODER] = state[WORD_EMBEDDINGS]  # saved without the alias: nothing to check
    check_names(list(state), names, "'%s'" % args.src,
                "names must be NVIDIA's BertForPreTraining state_dict names (see docs/checkpoint-format.md)")

    emb, dec = state[WORD_EMBEDDINGS], state[TIED_DECODER]
    if emb.shape != dec.shape or not torch.equal(emb, dec):
        raise ConvertError("'%s': %s differs from %s; hetseq ties the MLM decoder to the word embeddings, so "
                           "untied weights cannot be converted" % (args.src, TIED_DECODER, WORD_EMBEDDINGS))

    masters = None
    half = any(state[n].dtype in (torch.float16, torch.bfloat16) for n in names)
    if args.master_params != "no":
        masters = master_params_mapping(ckpt, names, state)
        if args.master_params == "yes" and masters is None:
            raise ConvertError("'%s' has no 'master params' list that lines up with the parameters" % args.src)
        if masters is not None and not half and args.master_params == "auto":
            masters = None  # the model weights are float32 already
    if half and masters is None:
        print("hetseq_convert: note: '%s' holds half-precision weights; they are widened to float32 (no "
              "float32 master copy found)" % args.src, file=sys.stderr)

    out = OrderedDict()
    for n in names:
        if n == TIED_DECODER:
            continue
        t = masters[n] if masters is not None else state[n]
        if not t.is_floating_point():
            raise ConvertError("'%s': tensor %s has dtype %s, not floating point" % (args.src, n, t.dtype))
        out[n] = t.detach().to(torch.float32).contiguous()

    vocab = out[WORD_EMBEDDINGS].shape[0]
    if out[MLM_BIAS].shape != (vocab,):
        raise ConvertError("'%s': %s has shape %s but the vocabulary has %d rows"
                           % (args.src, MLM_BIAS, list(out[MLM_BIAS].shape), vocab))
    multiple = args.pad_vocab_to
    if multiple and multiple > 1 and vocab % multiple:
        rows = vocab + multiple - vocab % multiple
        out[WORD_EMBEDDINGS] = pad_rows(out[WORD_EMBEDDINGS], rows)
        out[MLM_BIAS] = pad_rows(out[MLM_BIAS], rows)
        print("hetseq_convert: vocabulary padded from %d to %d rows (zeros)" % (vocab, rows), file=sys.stderr)
    elif vocab % 8 and not multiple:
        print("hetseq_convert: note: the vocabulary has %d rows; hetseq rounds model.vocab_size up to a multiple "
              "of model.pad_vocab_to_multiple_of (default 8), so either pass --pad-vocab-to 8 or set "
              "model.pad_vocab_to_multiple_of = 1" % vocab, file=sys.stderr)

    config = None
    if args.bert_config:
        try:
            with open(args.bert_config, "r", encoding="utf-8") as f:
                cfg = json.load(f)
        except (OSError, ValueError) as e:
            raise ConvertError("cannot read bert_config '%s': %s" % (args.bert_config, e))
        if not isinstance(cfg, dict):
            raise ConvertError("bert_config '%s' is not a JSON object" % args.bert_config)
        check_against_config(out, cfg, args.bert_config)
        config = config_text(cfg, out[WORD_EMBEDDINGS].shape[0], multiple if multiple else 1)

    write_checkpoint(args.dst, out, config, os.path.basename(args.src))
    print("hetseq_convert: wrote %s: %d tensors, %d layers, vocabulary %d, %d parameters%s"
          % (args.dst, len(out), layers, out[WORD_EMBEDDINGS].shape[0], sum(t.numel() for t in out.values()),
             " (float32 master params)" if masters is not None else ""))


# ---- export: hetseq -> PyTorch -----------------------------------------------------------------------

def read_checkpoint(path):
    if not os.path.isfile(path):
        raise ConvertError("no such file: '%s'" % path)
    if not h5py.is_hdf5(path):
        raise ConvertError("'%s' is not an HDF5 file (a hetseq checkpoint is *.h5)" % path)
    with h5py.File(path, "r") as f:
        if f.attrs.get("format") != FORMAT:
            raise ConvertError("'%s' is an HDF5 file but not a hetseq checkpoint (no root attribute format = \"%s\")"
                               % (path, FORMAT))
        version = int(f.attrs.get("version", 0))
        if version < 1 or version > FORMAT_VERSION:
            raise ConvertError("'%s' has checkpoint format version %d; this converter reads version %d"
                               % (path, version, FORMAT_VERSION))
        if "model" not in f:
            raise ConvertError("'%s' has no /model group" % path)
        tensors = OrderedDict((n, torch.from_numpy(np.asarray(f["model"][n][()], dtype=np.float32)))
                              for n in f["model"])
        config = f["config"].asstr()[()] if "config" in f else None
    return tensors, config


def model_keys_from_config(text):
    """key -> value text of the model group of a stored libconfig configuration."""
    m = re.search(r"(?ms)^model\s*[:=]\s*\{(.*?)\}\s*;?", text or "")
    if not m:
        return {}
    return {k: v.strip() for k, v in re.findall(r"(\w+)\s*=\s*([^;]+);", m.group(1))}


def bert_config_from(tensors, config, heads):
    """bert_config.json (Google/NVIDIA's 11 keys) from the tensor shapes and the stored config."""
    stored = model_keys_from_config(config)
    if stored.get("config_file", '""') not in ('""', ""):
        stored = {}  # the model came from a JSON file: the model keys in the text are defaults
    if heads is None and "num_attention_heads" in stored:
        heads = int(stored["num_attention_heads"])
    if heads is None:
        raise ConvertError("the number of attention heads is not in the tensors; give --num-attention-heads")
    word = tensors[WORD_EMBEDDINGS]
    hidden = word.shape[1]
    if hidden % heads:
        raise ConvertError("hidden_size %d is not a multiple of --num-attention-heads %d" % (hidden, heads))

    def stored_value(key, default):
        v = stored.get(key)
        if v is None:
            return default
        return json.loads(v) if v.startswith('"') else float(v)

    return OrderedDict([
        ("attention_probs_dropout_prob", stored_value("attention_probs_dropout_prob", 0.1)),
        ("hidden_act", stored_value("hidden_act", "gelu")),
        ("hidden_dropout_prob", stored_value("hidden_dropout_prob", 0.1)),
        ("hidden_size", hidden),
        ("initializer_range", stored_value("initializer_range", 0.02)),
        ("intermediate_size", tensors["bert.encoder.layer.0.intermediate.dense_act.weight"].shape[0]),
        ("max_position_embeddings", tensors["bert.embeddings.position_embeddings.weight"].shape[0]),
        ("num_attention_heads", heads),
        ("num_hidden_layers", num_layers_of(tensors)),
        ("type_vocab_size", tensors["bert.embeddings.token_type_embeddings.weight"].shape[0]),
        ("vocab_size", word.shape[0]),
    ])


def cmd_export(args):
    tensors, config = read_checkpoint(args.src)
    layers = num_layers_of(tensors)
    names = expected_names(layers)
    check_names(list(tensors) + [TIED_DECODER], names, "'%s'" % args.src,
                "only BERT checkpoints (task = \"bert\") can be exported to BertForPreTraining")
    if args.vocab_size is not None:
        rows = tensors[WORD_EMBEDDINGS].shape[0]
        if args.vocab_size > rows or args.vocab_size < 1:
            raise ConvertError("--vocab-size %d: the checkpoint has %d vocabulary rows" % (args.vocab_size, rows))
        tensors[WORD_EMBEDDINGS] = tensors[WORD_EMBEDDINGS][:args.vocab_size].clone()
        tensors[MLM_BIAS] = tensors[MLM_BIAS][:args.vocab_size].clone()
    state = OrderedDict()
    for n in names:
        # The decoder is the embedding itself in BertForPreTraining; an equal copy loads into it.
        state[n] = tensors[WORD_EMBEDDINGS].clone() if n == TIED_DECODER else tensors[n]
    tmp = args.dst + ".tmp"
    torch.save({"model": state} if args.nvidia_checkpoint else state, tmp)
    os.replace(tmp, args.dst)
    if args.bert_config_out:
        cfg = bert_config_from(tensors, config, args.num_attention_heads)
        with open(args.bert_config_out, "w", encoding="utf-8") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")
    print("hetseq_convert: wrote %s: %d tensors, %d layers, vocabulary %d"
          % (args.dst, len(state), layers, state[WORD_EMBEDDINGS].shape[0]))


def main(argv=None):
    p = argparse.ArgumentParser(prog="hetseq_convert.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    i = sub.add_parser("import", help="PyTorch BertForPreTraining checkpoint -> hetseq checkpoint (.h5)")
    i.add_argument("src", help="a .pt/.pth/.bin file: a state_dict or a dict with 'model'")
    i.add_argument("dst", help="the hetseq checkpoint to write (.h5)")
    i.add_argument("--pad-vocab-to", type=int, default=0, metavar="N",
                   help="append zero rows to the word embeddings and the MLM bias up to a multiple of N")
    i.add_argument("--bert-config", metavar="JSON", help="bert_config.json: check the shapes and store the model "
                   "settings as the checkpoint's /config")
    i.add_argument("--master-params", choices=("auto", "yes", "no"), default="auto",
                   help="use the float32 'master params' of a mixed-precision NVIDIA checkpoint (auto: when the "
                   "weights are half precision)")
    i.set_defaults(func=cmd_import)
    e = sub.add_parser("export", help="hetseq checkpoint (.h5) -> PyTorch state_dict for BertForPreTraining")
    e.add_argument("src", help="a hetseq checkpoint (.h5)")
    e.add_argument("dst", help="the PyTorch file to write (torch.save)")
    e.add_argument("--vocab-size", type=int, metavar="V", help="keep only the first V vocabulary rows (undo padding)")
    e.add_argument("--nvidia-checkpoint", action="store_true",
                   help="save {'model': state_dict} (run_pretraining.py --init_checkpoint) instead of the bare state_dict")
    e.add_argument("--bert-config-out", metavar="JSON", help="also write the matching bert_config.json")
    e.add_argument("--num-attention-heads", type=int, metavar="H",
                   help="for --bert-config-out when the checkpoint's /config does not give it")
    e.set_defaults(func=cmd_export)
    args = p.parse_args(argv)
    if getattr(args, "pad_vocab_to", 0) < 0:
        p.error("--pad-vocab-to must be >= 0")
    try:
        args.func(args)
    except ConvertError as err:
        print("hetseq_convert: error: %s" % err, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
