"""A PyTorch Transformer-XL (Dai et al. 2019) written from the paper and NVIDIA's description of
MemTransformerLM with attn_type 0 (relative positional encodings with learnable global biases r_w_bias,
r_r_bias shared by the layers), the adaptive input embedding and the projected adaptive log-softmax
(Baevski & Auli 2019; Grave et al. 2017), with the parameter names of NVIDIA's state_dict, so weights
move between it and hetseq by name. Time-major as NVIDIA's: inputs [qlen, bsz]. Written for tests: no
fp16, no ext_len, no sampled softmax. Runs on the device of its parameters and inputs (bench/gpu/ times it
on a GPU)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


# A test may set DROPOUT_HOOK = f(site, x) -> x·mask/(1-p) to impose its own masks (hetseq's, keyed by
# its counter RNG); sites: "emb", "pos", "final", "layers.<l>.dropatt", ".attn_out", ".ff_inner", ".ff_out".
DROPOUT_HOOK = None


class MaskedDropout(nn.Module):
    """nn.Dropout, or the test's masks when DROPOUT_HOOK is set."""

    def __init__(self, p, site=""):
        super().__init__()
        self.p, self.site = p, site

    def forward(self, x, site=None):
        if self.p <= 0:
            return x
        if DROPOUT_HOOK is not None:
            return DROPOUT_HOOK(site or self.site, x, self.p)
        return F.dropout(x, self.p, self.training)


class PositionalEmbedding(nn.Module):
    def __init__(self, demb):
        super().__init__()
        inv_freq = 1 / (10000 ** (torch.arange(0.0, demb, 2.0) / demb))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, pos_seq):
        sinusoid = torch.ger(pos_seq, self.inv_freq)
        return torch.cat([sinusoid.sin(), sinusoid.cos()], dim=-1)[:, None, :]  # [klen, 1, d]


class PositionwiseFF(nn.Module):
    def __init__(self, d_model, d_inner, dropout, pre_lnorm):
        super().__init__()
        self.CoreNet = nn.Sequential(nn.Linear(d_model, d_inner), nn.ReLU(), MaskedDropout(dropout),
                                     nn.Linear(d_inner, d_model), MaskedDropout(dropout))
        self.layer_norm = nn.LayerNorm(d_model)
        self.pre_lnorm = pre_lnorm

    def forward(self, inp):
        if self.pre_lnorm:
            return self.CoreNet(self.layer_norm(inp)) + inp
        return self.layer_norm(inp + self.CoreNet(inp))


class RelPartialLearnableMultiHeadAttn(nn.Module):
    def __init__(self, n_head, d_model, d_head, dropout, dropatt, pre_lnorm):
        super().__init__()
        self.n_head, self.d_head = n_head, d_head
        self.qkv_net = nn.Linear(d_model, 3 * n_head * d_head, bias=False)
        self.drop = MaskedDropout(dropout)
        self.dropatt = MaskedDropout(dropatt)
        self.o_net = nn.Linear(n_head * d_head, d_model, bias=False)
        self.layer_norm = nn.LayerNorm(d_model)
        self.scale = 1 / (d_head ** 0.5)
        self.pre_lnorm = pre_lnorm
        self.r_net = nn.Linear(d_model, n_head * d_head, bias=False)

    @staticmethod
    def rel_shift(x):
        # x[i, j] scores query i against relative-position row j (row j = distance klen-1-j); the shift
        # moves row i left so that column j holds distance (mlen + i) - j
        zero_pad = torch.zeros((x.size(0), 1) + x.size()[2:], device=x.device, dtype=x.dtype)
        x_padded = torch.cat([zero_pad, x], dim=1)
        x_padded = x_padded.view((x.size(1) + 1, x.size(0)) + x.size()[2:])
        return x_padded[1:].view_as(x)

    def forward(self, w, r, r_w_bias, r_r_bias, attn_mask, mems):
        qlen, bsz = w.size(0), w.size(1)
        cat = torch.cat([mems, w], 0) if mems is not None else w
        heads = self.qkv_net(self.layer_norm(cat) if self.pre_lnorm else cat)
        r_head_k = self.r_net(r)
        q, k, v = torch.chunk(heads, 3, dim=-1)
        q = q[-qlen:]
        klen = k.size(0)
        q = q.view(qlen, bsz, self.n_head, self.d_head)
        k = k.view(klen, bsz, self.n_head, self.d_head)
        v = v.view(klen, bsz, self.n_head, self.d_head)
        r_head_k = r_head_k.view(klen, self.n_head, self.d_head)
        ac = torch.einsum("ibnd,jbnd->ijbn", (q + r_w_bias, k))
        bd = self.rel_shift(torch.einsum("ibnd,jnd->ijbn", (q + r_r_bias, r_head_k)))
        score = (ac + bd) * self.scale
        score = score.masked_fill(attn_mask[:, :, None, None], -float("inf"))
        prob = self.dropatt(F.softmax(score, dim=1))
        vec = torch.einsum("ijbn,jbnd->ibnd", (prob, v)).contiguous().view(qlen, bsz, self.n_head * self.d_head)
        out = self.drop(self.o_net(vec))
        return w + out if self.pre_lnorm else self.layer_norm(w + out)


class RelPartialLearnableDecoderLayer(nn.Module):
    def __init__(self, n_head, d_model, d_head, d_inner, dropout, dropatt, pre_lnorm):
        super().__init__()
        self.dec_attn = RelPartialLearnableMultiHeadAttn(n_head, d_model, d_head, dropout, dropatt, pre_lnorm)
        self.pos_ff = PositionwiseFF(d_model, d_inner, dropout, pre_lnorm)

    def forward(self, inp, r, r_w_bias, r_r_bias, mask, mems):
        return self.pos_ff(self.dec_attn(inp, r, r_w_bias, r_r_bias, mask, mems))


class AdaptiveEmbedding(nn.Module):
    def __init__(self, n_token, d_embed, d_proj, cutoffs, div_val):
        super().__init__()
        self.n_token, self.d_embed, self.d_proj, self.div_val = n_token, d_embed, d_proj, div_val
        self.cutoffs = cutoffs + [n_token]
        self.cutoff_ends = [0] + self.cutoffs
        self.emb_scale = d_proj ** 0.5
        self.emb_layers = nn.ModuleList()
        self.emb_projs = nn.ParameterList()
        if div_val == 1:
            self.emb_layers.append(nn.Embedding(n_token, d_embed))
            if d_proj != d_embed:
                self.emb_projs.append(nn.Parameter(torch.zeros(d_proj, d_embed)))
        else:
            for i in range(len(self.cutoffs)):
                l, r = self.cutoff_ends[i], self.cutoff_ends[i + 1]
                d_i = d_embed // (div_val ** i)
                self.emb_layers.append(nn.Embedding(r - l, d_i))
                self.emb_projs.append(nn.Parameter(torch.zeros(d_proj, d_i)))

    def forward(self, inp):
        if self.div_val == 1:
            embed = self.emb_layers[0](inp)
            if self.d_proj != self.d_embed:
                embed = F.linear(embed, self.emb_projs[0])
        else:
            flat = inp.reshape(-1)
            out = torch.zeros(flat.size(0), self.d_proj, dtype=self.emb_layers[0].weight.dtype, device=flat.device)
            for i in range(len(self.cutoffs)):
                l, r = self.cutoff_ends[i], self.cutoff_ends[i + 1]
                idx = ((flat >= l) & (flat < r)).nonzero().squeeze(1)
                if idx.numel() == 0:
                    continue
                e = F.linear(self.emb_layers[i](flat.index_select(0, idx) - l), self.emb_projs[i])
                out = out.index_copy(0, idx, e)
            embed = out.view(*inp.size(), self.d_proj)
        return embed * self.emb_scale


class ProjectedAdaptiveLogSoftmax(nn.Module):
    def __init__(self, n_token, d_embed, d_proj, cutoffs, div_val, tie_projs, out_layers_weights, out_projs):
        super().__init__()
        self.n_token, self.d_embed, self.d_proj, self.div_val = n_token, d_embed, d_proj, div_val
        self.cutoffs = cutoffs + [n_token]
        self.cutoff_ends = [0] + self.cutoffs
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.tie_projs = tie_projs
        if self.n_clusters > 0:
            self.cluster_weight = nn.Parameter(torch.zeros(self.n_clusters, d_embed))
            self.cluster_bias = nn.Parameter(torch.zeros(self.n_clusters))
        self.out_layers_weights = out_layers_weights if out_layers_weights is not None else nn.ParameterList()
        self.out_layers_biases = nn.ParameterList()
        self.shared_out_projs = out_projs
        self.out_projs = nn.ParameterDict()
        n_out = 1 if div_val == 1 else len(self.cutoffs)
        for i in range(len(self.cutoffs)):
            d_i = d_embed // (div_val ** i)
            has_proj = div_val > 1 or d_proj != d_embed
            if has_proj and not tie_projs[i]:
                self.out_projs[str(i)] = nn.Parameter(torch.zeros(d_proj, d_i))
        for i in range(n_out):
            if div_val == 1:
                size, d_i = n_token, d_embed
            else:
                size, d_i = self.cutoff_ends[i + 1] - self.cutoff_ends[i], d_embed // (div_val ** i)
            self.out_layers_biases.append(nn.Parameter(torch.zeros(size)))
            if out_layers_weights is None:
                self.out_layers_weights.append(nn.Parameter(torch.zeros(size, d_i)))

    def get_out_proj(self, i):
        if not (self.div_val > 1 or self.d_proj != self.d_embed):
            return None
        if self.tie_projs[i]:
            return self.shared_out_projs[0] if len(self.shared_out_projs) == 1 else self.shared_out_projs[i]
        return self.out_projs[str(i)]

    @staticmethod
    def logit(hidden, weight, bias, proj):
        if proj is not None:
            hidden = F.linear(hidden, proj.t().contiguous())
        return F.linear(hidden, weight, bias=bias)

    def forward(self, hidden, target):
        """NLL of every target: hidden [n, d_proj], target [n]."""
        if self.n_clusters == 0:
            lp = F.log_softmax(self.logit(hidden, self.out_layers_weights[0], self.out_layers_biases[0],
                                          self.get_out_proj(0)), dim=-1)
            return -lp.gather(1, target.unsqueeze(1)).squeeze(1)
        weights, biases = [], []
        for i in range(len(self.cutoffs)):
            if self.div_val == 1:
                l, r = self.cutoff_ends[i], self.cutoff_ends[i + 1]
                w, b = self.out_layers_weights[0][l:r], self.out_layers_biases[0][l:r]
            else:
                w, b = self.out_layers_weights[i], self.out_layers_biases[i]
            if i == 0:
                w = torch.cat([w, self.cluster_weight], dim=0)
                b = torch.cat([b, self.cluster_bias], dim=0)
            weights.append(w)
            biases.append(b)
        head_lp = F.log_softmax(self.logit(hidden, weights[0], biases[0], self.get_out_proj(0)), dim=1)
        nll = torch.zeros_like(target, dtype=hidden.dtype)
        for i in range(len(self.cutoffs)):
            l, r = self.cutoff_ends[i], self.cutoff_ends[i + 1]
            idx = ((target >= l) & (target < r)).nonzero().squeeze(1)
            if idx.numel() == 0:
                continue
            t_i = target.index_select(0, idx) - l
            hlp = head_lp.index_select(0, idx)
            if i == 0:
                lp = hlp.gather(1, t_i[:, None]).squeeze(1)
            else:
                tail = F.log_softmax(self.logit(hidden.index_select(0, idx), weights[i], biases[i],
                                                self.get_out_proj(i)), dim=1)
                lp = hlp[:, -i] + tail.gather(1, t_i[:, None]).squeeze(1)
            nll = nll.index_copy(0, idx, -lp)
        return nll


class MemTransformerLM(nn.Module):
    def __init__(self, n_token, n_layer, n_head, d_model, d_head, d_inner, dropout=0.0, dropatt=0.0,
                 tie_weight=True, d_embed=None, div_val=1, tie_projs=None, pre_lnorm=False, tgt_len=None,
                 mem_len=0, cutoffs=None, same_length=False, clamp_len=-1):
        super().__init__()
        cutoffs = list(cutoffs or [])
        d_embed = d_model if d_embed is None else d_embed
        tie_projs = tie_projs if tie_projs is not None else [False] + [True] * len(cutoffs)
        self.n_layer, self.d_model, self.mem_len = n_layer, d_model, mem_len
        self.same_length, self.clamp_len = same_length, clamp_len
        self.word_emb = AdaptiveEmbedding(n_token, d_embed, d_model, cutoffs, div_val)
        self.drop = MaskedDropout(dropout)
        self.layers = nn.ModuleList([RelPartialLearnableDecoderLayer(n_head, d_model, d_head, d_inner, dropout,
                                                                     dropatt, pre_lnorm) for _ in range(n_layer)])
        for i, layer in enumerate(self.layers):
            layer.dec_attn.dropatt.site = f"layers.{i}.dropatt"
            layer.dec_attn.drop.site = f"layers.{i}.attn_out"
            layer.pos_ff.CoreNet[2].site = f"layers.{i}.ff_inner"
            layer.pos_ff.CoreNet[4].site = f"layers.{i}.ff_out"
        self.pos_emb = PositionalEmbedding(d_model)
        self.r_w_bias = nn.Parameter(torch.zeros(n_head, d_head))
        self.r_r_bias = nn.Parameter(torch.zeros(n_head, d_head))
        emb_layers = [e.weight for e in self.word_emb.emb_layers] if tie_weight else None
        self.crit = ProjectedAdaptiveLogSoftmax(n_token, d_embed, d_model, cutoffs, div_val, tie_projs,
                                                emb_layers, self.word_emb.emb_projs)

    def forward(self, data, target, mems):
        """data, target [qlen, bsz]; mems: list of n_layer [mlen, bsz, d] or None. Returns (nll [qlen, bsz],
        new mems)."""
        qlen, bsz = data.size()
        word_emb = self.word_emb(data)
        mlen = mems[0].size(0) if mems is not None else 0
        klen = mlen + qlen
        ones = torch.ones(qlen, klen, dtype=torch.uint8, device=data.device)
        if self.same_length:
            mask_len = klen - self.mem_len - 1
            shift = qlen - mask_len if mask_len > 0 else qlen
            mask = (torch.triu(ones, 1 + mlen) + torch.tril(ones, -shift)).bool()
        else:
            mask = torch.triu(ones, diagonal=1 + mlen).bool()
        pos_seq = torch.arange(klen - 1, -1, -1.0, device=data.device)
        if self.clamp_len > 0:
            pos_seq.clamp_(max=self.clamp_len)
        pos_emb = self.drop(self.pos_emb(pos_seq), "pos")
        core = self.drop(word_emb, "emb")
        hids = [core]
        for i, layer in enumerate(self.layers):
            core = layer(core, pos_emb, self.r_w_bias, self.r_r_bias, mask, None if mems is None else mems[i])
            hids.append(core)
        core = self.drop(core, "final")
        nll = self.crit(core.view(-1, core.size(-1)), target.reshape(-1)).view(qlen, bsz)
        new_mems = None
        if self.mem_len > 0:
            with torch.no_grad():
                new_mems = []
                end = mlen + qlen
                beg = max(0, end - self.mem_len)
                for i in range(self.n_layer):
                    cat = hids[i] if mems is None else torch.cat([mems[i], hids[i]], 0)
                    new_mems.append(cat[beg:end].detach())
        return nll, new_mems
