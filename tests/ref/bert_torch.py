#!/usr/bin/env python3
"""Reference BERT pre-training model in PyTorch: NVIDIA's BertForPreTraining (the HDF5-era modeling.py
that HetSeq copied as hetseq/bert_modeling.py), re-implemented module for module so that

  * state_dict names and shapes are exactly NVIDIA's (a checkpoint of either loads strictly into the
    other; `PARAMETER_NAMES` lists them),
  * initialisation consumes the torch RNG in the same order as NVIDIA's constructor, so
    `torch.manual_seed(s); build_model(cfg)` gives NVIDIA's starting weights for seed s,
  * the forward pass and the loss are NVIDIA's (post-LN encoder, additive -10000 mask, TF-style
    LayerNorm with eps 1e-12 inside the square root, tied decoder + own bias, tanh pooler).

hetseq's C model is checked against this module (loss and every gradient), and bench/bert_torch.py
times it. Self-contained: only torch. Python 3, PyTorch >= 1.8, CPU.

Facts reproduced, with the reason they matter:
  * GELU: `gelu="exact"` (default) is x/2 (1 + erf(x/sqrt(2))) = torch.nn.functional.gelu, what
    NVIDIA's run_pretraining.py installs for pre-training (it replaces the fused bias_gelu by F.gelu).
    `gelu="hetseq"` is modeling.py's own x/2 (1 + erf(x/1.41421)) with the truncated constant
    (relative difference in the erf argument 2.5e-6); use it to match HetSeq's activations bit-closely.
  * Init (init_bert_weights, applied by BertModel and again by BertForPreTraining): nn.Linear and
    nn.Embedding weights ~ N(0, initializer_range) (plain normal), their biases 0, LayerNorm 1/0,
    cls.predictions.bias 0. The three LinearActivation kinds (intermediate.dense_act, pooler.dense_act,
    cls.predictions.transform.dense_act) are not nn.Linear and keep PyTorch's default
    kaiming_uniform_(a=sqrt(5)): weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    BertEncoder deep-copies ONE constructed layer N times, and init_bert_weights never touches
    LinearActivation, so every layer starts with the SAME intermediate.dense_act weight and bias.
  * Loss: NVIDIA evaluates the MLM head at all B*L positions ([B,L,V] logits) and takes
    CrossEntropyLoss(ignore_index=-1) (mean over the labelled tokens of the batch) + NSP
    CrossEntropyLoss (mean over the batch). `mlm_positions="masked"` gathers the labelled positions
    first (NVIDIA's newer code): the same loss up to float rounding, ~L/P times less head work.
  * Dropout: hidden_dropout_prob after the embeddings, after each attention output projection and
    after each FFN output; attention_probs_dropout_prob on the attention probabilities. Active in
    train() mode. `model.set_dropout_override(fn)` replaces every dropout by fn(site, x, p), where site
    is the module name (e.g. "bert.encoder.layer.0.attention.self.dropout"), so a test can apply the
    exact masks another implementation drew.
"""
import copy
import json
import math

import torch
import torch.nn.functional as F
from torch import nn

# Defaults of NVIDIA's BertConfig(int) constructor (bert_config.json overrides every key it has).
CONFIG_DEFAULTS = {
    "vocab_size": 30522,
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "max_position_embeddings": 512,
    "type_vocab_size": 2,
    "initializer_range": 0.02,
}

LAYER_NORM_EPS = 1e-12
MASK_VALUE = -10000.0
IGNORE_INDEX = -1


class BertConfig:
    """bert_config.json as an object: the defaults above, then every key of the dict (unknown keys are
    kept, as NVIDIA's from_dict does)."""

    def __init__(self, values=None, **overrides):
        merged = dict(CONFIG_DEFAULTS)
        merged.update(values or {})
        merged.update(overrides)
        self.__dict__.update(merged)
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError("hidden_size (%d) is not a multiple of num_attention_heads (%d)"
                             % (self.hidden_size, self.num_attention_heads))

    @classmethod
    def from_json_file(cls, path):
        with open(path, "r", encoding="utf-8") as f:
            return cls(json.load(f))

    def to_dict(self):
        return copy.deepcopy(self.__dict__)


def padded_vocab_size(vocab_size, multiple):
    """run_pretraining.py rounds the vocabulary up to a multiple of 8 (30522 -> 30528); the extra rows
    are real parameters whose logits take part in the softmax."""
    if multiple <= 1 or vocab_size % multiple == 0:
        return vocab_size
    return vocab_size + multiple - vocab_size % multiple


def parameter_names(num_hidden_layers):
    """NVIDIA BertForPreTraining.state_dict() keys, in state_dict order. cls.predictions.decoder.weight
    is the word-embedding tensor itself (tied), saved a second time under its own name."""
    names = ["bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
             "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight",
             "bert.embeddings.LayerNorm.bias"]
    for i in range(num_hidden_layers):
        p = "bert.encoder.layer.%d." % i
        for sub in ["attention.self.query", "attention.self.key", "attention.self.value",
                    "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense_act",
                    "output.dense", "output.LayerNorm"]:
            names += [p + sub + ".weight", p + sub + ".bias"]
    names += ["bert.pooler.dense_act.weight", "bert.pooler.dense_act.bias",
              "cls.predictions.bias",
              "cls.predictions.transform.dense_act.weight", "cls.predictions.transform.dense_act.bias",
              "cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.bias",
              "cls.predictions.decoder.weight",
              "cls.seq_relationship.weight", "cls.seq_relationship.bias"]
    return names


TIED_DECODER = "cls.predictions.decoder.weight"
WORD_EMBEDDINGS = "bert.embeddings.word_embeddings.weight"


# ---- activations ---------------------------------------------------------------------------------

def gelu_exact(x):
    """x/2 (1 + erf(x/sqrt(2))): torch.nn.functional.gelu, used by NVIDIA pre-training."""
    return F.gelu(x)


def gelu_hetseq(x):
    """modeling.py's own gelu with the truncated constant 1.41421."""
    return x * 0.5 * (1.0 + torch.erf(x / 1.41421))


def swish(x):
    return x * torch.sigmoid(x)


# ---- modules -------------------------------------------------------------------------------------

class BertLayerNorm(nn.Module):
    """TF-style LayerNorm: y = w (x - mean) / sqrt(biased var + eps) + b, eps inside the root.
    fused=True computes the same function with F.layer_norm (one kernel, as apex's FusedLayerNorm that
    NVIDIA's modeling.py uses when apex is installed); only the rounding differs."""

    def __init__(self, hidden_size, eps=LAYER_NORM_EPS):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.bias = nn.Parameter(torch.zeros(hidden_size))
        self.variance_epsilon = eps
        self.fused = False

    def forward(self, x):
        if self.fused:
            return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.variance_epsilon)
        u = x.mean(-1, keepdim=True)
        s = (x - u).pow(2).mean(-1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.variance_epsilon)
        return self.weight * x + self.bias


class LinearActivation(nn.Module):
    """NVIDIA's fused Linear + activation. Not an nn.Linear, hence init_bert_weights skips it and the
    default kaiming_uniform_(a=sqrt(5)) init stays (weight and bias ~ U(+-1/sqrt(fan_in)))."""

    def __init__(self, in_features, out_features, act, gelu):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features))
        self.act = {"gelu": gelu, "tanh": torch.tanh, "relu": F.relu, "swish": swish}[act]
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        bound = 1.0 / math.sqrt(self.in_features)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return self.act(F.linear(x, self.weight, None) + self.bias)


class Dropout(nn.Module):
    """nn.Dropout with a hook: when the model has an override, fn(site, x, p) replaces F.dropout."""

    def __init__(self, p):
        super().__init__()
        self.p = p
        self.site = ""
        self.override = None

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        if self.override is not None:
            return self.override(self.site, x, self.p)
        return F.dropout(x, self.p, True)


class BertEmbeddings(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.LayerNorm = BertLayerNorm(cfg.hidden_size)
        self.dropout = Dropout(cfg.hidden_dropout_prob)

    def forward(self, input_ids, token_type_ids):
        # input_ids, token_type_ids[B,L] -> [B,L,H]
        positions = torch.arange(input_ids.size(1), dtype=torch.long, device=input_ids.device)
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions).unsqueeze(0)
             + self.token_type_embeddings(token_type_ids))
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.num_heads = cfg.num_attention_heads
        self.head_size = cfg.hidden_size // cfg.num_attention_heads
        self.query = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.key = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.value = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.dropout = Dropout(cfg.attention_probs_dropout_prob)

    def split_heads(self, x):
        # [B,L,H] -> [B,heads,L,d]
        b, l, _ = x.shape
        return x.view(b, l, self.num_heads, self.head_size).permute(0, 2, 1, 3)

    def forward(self, x, additive_mask):
        # x[B,L,H], additive_mask[B,1,1,L] (0 for tokens, -10000 for padding)
        q, k, v = self.split_heads(self.query(x)), self.split_heads(self.key(x)), self.split_heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_size)  # [B,heads,L,L]
        probs = self.dropout(torch.softmax(scores + additive_mask, dim=-1))
        context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()          # [B,L,heads,d]
        return context.view(x.shape)


class BertSelfOutput(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.LayerNorm = BertLayerNorm(cfg.hidden_size)
        self.dropout = Dropout(cfg.hidden_dropout_prob)

    def forward(self, h, residual):
        return self.LayerNorm(self.dropout(self.dense(h)) + residual)


class BertAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self = BertSelfAttention(cfg)
        self.output = BertSelfOutput(cfg)

    def forward(self, x, additive_mask):
        return self.output(self.self(x, additive_mask), x)


class BertIntermediate(nn.Module):
    def __init__(self, cfg, gelu):
        super().__init__()
        self.dense_act = LinearActivation(cfg.hidden_size, cfg.intermediate_size, cfg.hidden_act, gelu)

    def forward(self, x):
        return self.dense_act(x)


class BertOutput(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg.intermediate_size, cfg.hidden_size)
        self.LayerNorm = BertLayerNorm(cfg.hidden_size)
        self.dropout = Dropout(cfg.hidden_dropout_prob)

    def forward(self, h, residual):
        return self.LayerNorm(self.dropout(self.dense(h)) + residual)


class BertLayer(nn.Module):
    def __init__(self, cfg, gelu):
        super().__init__()
        self.attention = BertAttention(cfg)
        self.intermediate = BertIntermediate(cfg, gelu)
        self.output = BertOutput(cfg)

    def forward(self, x, additive_mask):
        a = self.attention(x, additive_mask)
        return self.output(self.intermediate(a), a)


class BertEncoder(nn.Module):
    def __init__(self, cfg, gelu):
        super().__init__()
        layer = BertLayer(cfg, gelu)  # one layer, deep-copied: NVIDIA's RNG use and identical copies
        self.layer = nn.ModuleList([copy.deepcopy(layer) for _ in range(cfg.num_hidden_layers)])

    def forward(self, x, additive_mask):
        for layer in self.layer:
            x = layer(x, additive_mask)
        return x


class BertPooler(nn.Module):
    def __init__(self, cfg, gelu):
        super().__init__()
        self.dense_act = LinearActivation(cfg.hidden_size, cfg.hidden_size, "tanh", gelu)

    def forward(self, x):
        return self.dense_act(x[:, 0])  # [B,L,H] -> [B,H]: the [CLS] token


class BertModel(nn.Module):
    def __init__(self, cfg, gelu):
        super().__init__()
        self.config = cfg
        self.embeddings = BertEmbeddings(cfg)
        self.encoder = BertEncoder(cfg, gelu)
        self.pooler = BertPooler(cfg, gelu)
        self.apply(lambda m: init_bert_weights(m, cfg.initializer_range))

    def forward(self, input_ids, token_type_ids, attention_mask):
        # attention_mask[B,L] 1 = token, 0 = padding -> additive [B,1,1,L]
        additive = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * MASK_VALUE
        seq = self.encoder(self.embeddings(input_ids, token_type_ids), additive)
        return seq, self.pooler(seq)


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, cfg, gelu):
        super().__init__()
        self.dense_act = LinearActivation(cfg.hidden_size, cfg.hidden_size, cfg.hidden_act, gelu)
        self.LayerNorm = BertLayerNorm(cfg.hidden_size)

    def forward(self, x):
        return self.LayerNorm(self.dense_act(x))


class BertLMPredictionHead(nn.Module):
    def __init__(self, cfg, embedding_weight, gelu):
        super().__init__()
        self.transform = BertPredictionHeadTransform(cfg, gelu)
        # nn.Linear first (its default init draws from the RNG, as in NVIDIA), then tied.
        self.decoder = nn.Linear(embedding_weight.size(1), embedding_weight.size(0), bias=False)
        self.decoder.weight = embedding_weight
        self.bias = nn.Parameter(torch.zeros(embedding_weight.size(0)))

    def forward(self, x):
        return self.decoder(self.transform(x)) + self.bias  # [..., H] -> [..., V]


class BertPreTrainingHeads(nn.Module):
    def __init__(self, cfg, embedding_weight, gelu):
        super().__init__()
        self.predictions = BertLMPredictionHead(cfg, embedding_weight, gelu)
        self.seq_relationship = nn.Linear(cfg.hidden_size, 2)


def init_bert_weights(module, initializer_range):
    if isinstance(module, (nn.Linear, nn.Embedding)):
        module.weight.data.normal_(mean=0.0, std=initializer_range)
    elif isinstance(module, BertLayerNorm):
        module.bias.data.zero_()
        module.weight.data.fill_(1.0)
    if isinstance(module, nn.Linear) and module.bias is not None:
        module.bias.data.zero_()


class BertForPreTraining(nn.Module):
    """forward(input_ids, token_type_ids, attention_mask, masked_lm_labels, next_sentence_label) ->
    total loss (MLM mean CE over labels != -1, plus NSP mean CE); without labels -> (prediction_scores
    [B,L,V], seq_relationship_score [B,2]) as NVIDIA's."""

    def __init__(self, cfg, gelu="exact", mlm_positions="all", layer_norm="tf"):
        super().__init__()
        gelu_fn = {"exact": gelu_exact, "hetseq": gelu_hetseq}[gelu]
        if mlm_positions not in ("all", "masked"):
            raise ValueError("mlm_positions must be 'all' or 'masked'")
        self.config = cfg
        self.mlm_positions = mlm_positions
        self.bert = BertModel(cfg, gelu_fn)
        self.cls = BertPreTrainingHeads(cfg, self.bert.embeddings.word_embeddings.weight, gelu_fn)
        self.apply(lambda m: init_bert_weights(m, cfg.initializer_range))
        if layer_norm not in ("tf", "fused"):
            raise ValueError("layer_norm must be 'tf' or 'fused'")
        for name, m in self.named_modules():
            if isinstance(m, Dropout):
                m.site = name
            if isinstance(m, BertLayerNorm):
                m.fused = layer_norm == "fused"

    def set_dropout_override(self, fn):
        """fn(site, x, p) -> dropped x replaces every dropout while training; None restores F.dropout."""
        for m in self.modules():
            if isinstance(m, Dropout):
                m.override = fn

    def losses(self, input_ids, token_type_ids, attention_mask, masked_lm_labels, next_sentence_label):
        """(mlm_loss, nsp_loss, mlm_logits[N,V] at the labelled positions, their labels[N], nsp_logits[B,2])."""
        seq, pooled = self.bert(input_ids, token_type_ids, attention_mask)
        labels = masked_lm_labels.reshape(-1)
        hidden = seq.reshape(-1, seq.size(-1))                    # [B*L,H]
        if self.mlm_positions == "masked":
            keep = (labels != IGNORE_INDEX).nonzero().squeeze(1)
            hidden, labels = hidden.index_select(0, keep), labels.index_select(0, keep)
        logits = self.cls.predictions(hidden)                       # [B*L or N, V]
        mlm_loss = F.cross_entropy(logits, labels, ignore_index=IGNORE_INDEX)
        nsp_logits = self.cls.seq_relationship(pooled)              # [B,2]
        nsp_loss = F.cross_entropy(nsp_logits, next_sentence_label.reshape(-1), ignore_index=IGNORE_INDEX)
        if self.mlm_positions == "all":
            keep = (labels != IGNORE_INDEX).nonzero().squeeze(1)
            logits, labels = logits.index_select(0, keep), labels.index_select(0, keep)
        return mlm_loss, nsp_loss, logits, labels, nsp_logits

    def forward(self, input_ids, token_type_ids, attention_mask, masked_lm_labels=None, next_sentence_label=None):
        if masked_lm_labels is None or next_sentence_label is None:
            seq, pooled = self.bert(input_ids, token_type_ids, attention_mask)
            return self.cls.predictions(seq), self.cls.seq_relationship(pooled)
        mlm_loss, nsp_loss = self.losses(input_ids, token_type_ids, attention_mask, masked_lm_labels,
                                         next_sentence_label)[:2]
        return mlm_loss + nsp_loss


def build_model(config, pad_vocab_to_multiple_of=1, dropout=True, gelu="exact", mlm_positions="all", seed=None,
                layer_norm="tf"):
    """A BertForPreTraining from a bert_config dict (or BertConfig, or a path to bert_config.json).
    pad_vocab_to_multiple_of=8 does what run_pretraining.py does. dropout=False sets both dropout
    probabilities to 0 (deterministic, for gradient checks). seed: torch.manual_seed(seed) first.
    gelu "exact"|"hetseq", mlm_positions "all"|"masked", layer_norm "tf" (modeling.py's Python
    BertLayerNorm) | "fused" (F.layer_norm): see the module docstring."""
    if isinstance(config, str):
        cfg = BertConfig.from_json_file(config)
    elif isinstance(config, BertConfig):
        cfg = BertConfig(config.to_dict())
    else:
        cfg = BertConfig(config)
    cfg.vocab_size = padded_vocab_size(cfg.vocab_size, pad_vocab_to_multiple_of)
    if not dropout:
        cfg.hidden_dropout_prob = 0.0
        cfg.attention_probs_dropout_prob = 0.0
    if seed is not None:
        torch.manual_seed(seed)
    return BertForPreTraining(cfg, gelu=gelu, mlm_positions=mlm_positions, layer_norm=layer_norm)


def masked_lm_labels(masked_lm_positions, masked_lm_ids, seq_len):
    """NVIDIA's / HetSeq's labels from a shard row: -1 everywhere, then labels[positions[:n]] =
    ids[:n] where n is the index of the first 0 in masked_lm_positions (all P if none).
    masked_lm_positions, masked_lm_ids[B,P] (integer tensors) -> labels[B,L] int64."""
    positions = torch.as_tensor(masked_lm_positions).long()
    ids = torch.as_tensor(masked_lm_ids).long()
    b, p = positions.shape
    labels = torch.full((b, seq_len), IGNORE_INDEX, dtype=torch.long)
    for row in range(b):
        zeros = (positions[row] == 0).nonzero()
        n = int(zeros[0]) if zeros.numel() else p
        labels[row, positions[row, :n]] = ids[row, :n]
    return labels


def count_parameters(model):
    """Distinct trainable scalars (the tied decoder weight counted once)."""
    return sum(p.numel() for p in model.parameters())


def random_batch(cfg, batch, seq_len, max_pred, generator=None, vocab_limit=None):
    """A synthetic NVIDIA-shaped batch: real lengths in [seq_len/2, seq_len], segment B in the second
    half, up to max_pred sorted masked positions (never 0, never padding), NSP labels 0/1.
    Returns dict(input_ids, token_type_ids, attention_mask, masked_lm_labels, next_sentence_label,
    masked_lm_positions, masked_lm_ids) of int64 tensors."""
    g = generator if generator is not None else torch.Generator().manual_seed(0)
    vocab = vocab_limit or cfg.vocab_size
    input_ids = torch.zeros(batch, seq_len, dtype=torch.long)
    segment = torch.zeros(batch, seq_len, dtype=torch.long)
    mask = torch.zeros(batch, seq_len, dtype=torch.long)
    positions = torch.zeros(batch, max_pred, dtype=torch.long)
    ids = torch.zeros(batch, max_pred, dtype=torch.long)
    for r in range(batch):
        n = int(torch.randint(seq_len // 2, seq_len + 1, (1,), generator=g))
        input_ids[r, :n] = torch.randint(1, vocab, (n,), generator=g)
        mask[r, :n] = 1
        segment[r, n // 2:n] = 1
        k = max(1, min(max_pred, int(round(n * 0.15))))
        pos = torch.sort(torch.randperm(n - 1, generator=g)[:k] + 1).values
        positions[r, :k] = pos
        ids[r, :k] = torch.randint(1, vocab, (k,), generator=g)
    nsp = torch.randint(0, 2, (batch,), generator=g)
    return {"input_ids": input_ids, "token_type_ids": segment, "attention_mask": mask,
            "masked_lm_labels": masked_lm_labels(positions, ids, seq_len), "next_sentence_label": nsp,
            "masked_lm_positions": positions, "masked_lm_ids": ids}


FORWARD_KEYS = ("input_ids", "token_type_ids", "attention_mask", "masked_lm_labels", "next_sentence_label")


def loss_and_gradients(model, batch):
    """(total loss, mlm loss, nsp loss, {name: gradient}) for one batch dict (random_batch's keys).
    Names are named_parameters() names: the tied decoder is not listed separately, its gradient is
    part of bert.embeddings.word_embeddings.weight's (as in any implementation that stores it once)."""
    model.zero_grad(set_to_none=True)
    mlm, nsp = model.losses(*[batch[k] for k in FORWARD_KEYS])[:2]
    total = mlm + nsp
    total.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return float(total), float(mlm), float(nsp), grads
