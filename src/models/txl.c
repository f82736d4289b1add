/* NVIDIA's MemTransformerLM (attn_type 0) composed from src/nn (see txl.h for the parameters).
 * Layout: batch-major, b columns (sequences) of qlen tokens, T = b·qlen rows of width D; with mlen
 * memory steps klen = mlen + qlen keys, K = b·klen rows of cat(memory, layer input).
 *
 *   embedding   e = sqrt(D)·adaptive_emb(ids)              hs_adaptive_embedding_forward
 *               h_0 = dropout(e)                          (the memory of layer 0 is h_0)
 *   positions   pos[klen, D] = [sin(p·f), cos(p·f)], p = klen-1..0 clamped at clamp_len, f = inv_freq
 *               (the last klen rows of a table made on the host and uploaded once per clamp_len: a pass
 *               uploads nothing, so it can be captured); pos' = dropout(pos) (one mask for all columns)
 *   layer l     c = cat(mem_l, h_l) per column [b, klen, D]   (pre_lnorm: c' = LN(c), else c' = c)
 *               qkv = c'·Wqkvᵀ, r = pos'·Wrᵀ                (no biases)
 *               ctx = rel_attention(qkv, r, r_w_bias, r_r_bias; causal (+ same_length) mask, dropatt)
 *               a = dropout(ctx·Woᵀ)
 *               post-LN: h' = LN(h_l + a);  u = dropout(relu(h'·W1ᵀ + b1));  h_{l+1} = LN(h' + dropout(u·W2ᵀ + b2))
 *               pre-LN:  h' = h_l + a;      u = dropout(relu(LN(h')·W1ᵀ + b1)); h_{l+1} = h' + dropout(u·W2ᵀ + b2)
 *   output      z = dropout(h_N);  NLL = adaptive_log_softmax(z, targets)
 *   memory      mem_l <- last mem_len rows of c per column (detached), after the backward pass
 * The backward pass runs the list in reverse; the memory rows of c get no gradient.
 *
 * 16-bit storage (precision bf16 | fp16, unless HETSEQ_ACTIVATION_STORAGE=fp32; nn/layers.h): as in
 * models/bert.c, each layer keeps q|k|v, r, the attention probabilities, the context and the FFN
 * activation u in the 16-bit type of the precision (be->to_half) and computes its forward in ONE fp32
 * working set of those tensors shared by all layers; the backward widens one layer's copies back into
 * it (be->from_half, exact). cat, the LayerNorm inputs/outputs and statistics and the residual stream
 * stay fp32 (cat is also the next segment's memory). k, v, r, the context and u are read only as
 * operands of products (which round them anyway) or by ReLU's sign test, so their copies change
 * nothing (but an fp16 u below 2^-25 that rounds to 0); the softmax backward (probabilities) and the
 * query, to which the backward adds r_w_bias / r_r_bias before the products (rounding twice), see
 * rounded values: the documented cost (docs/gpu.md, "Mixed precision"). The forward is unchanged. */
#include "models/txl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "math/hs_math.h"
#include "nn/adaptive.h"
#include "nn/grads_ready.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "util/check.h"

/* nn.LayerNorm's default epsilon (NVIDIA's Transformer-XL does not change it). */
#define TXL_LN_EPS 1e-5f

/* Dropout sites: masks from hs_rng_key(seed, update, site). */
enum { DROP_EMB = 1, DROP_POS = 2, DROP_FINAL = 3, DROP_LAYER_BASE = 16, DROP_SITES_PER_LAYER = 4 };
enum { DROP_ATT = 0, DROP_ATTN_OUT = 1, DROP_FF_INNER = 2, DROP_FF_OUT = 3 };

#define TXL_POS_TABLES 4 /* clamp_len values with a sinusoid table: training's, evaluation's, spares */

typedef struct txl_layer_params {
    int qkv_w, r_w, o_w, attn_ln_g, attn_ln_b, ff1_w, ff1_b, ff2_w, ff2_b, ff_ln_g, ff_ln_b;
} txl_layer_params;

/* What layer l keeps for its backward pass (its input is hidden[l]). */
typedef struct txl_layer_acts {
    float *cat;                  /* [K, D] cat(mem_l, h_l) per column (unused when mlen = 0: h_l itself) */
    const float *cat_used;       /* cat, or hidden[l] when mlen = 0 */
    float *catn;                 /* pre_lnorm: [K, D] LN(cat) */
    float *ln1_mean, *ln1_rstd;  /* post: [T] of the first LN; pre: [K] of LN(cat) */
    float *qkv;                  /* [K, 3nd] */
    float *r;                    /* [klen, nd] */
    float *probs;                /* unfused attention: [b, n, qlen, klen]; fused: NULL */
    float *lse;                  /* fused attention: [b, n, qlen] each query row's log-sum-exp (fp32) */
    float *ctx;                  /* [T, nd] */
    float *attn_sum;             /* [T, D] h_l + dropout(ctx·Woᵀ): post: the first LN's input; pre: h' */
    float *h1;                   /* post: [T, D] LN(attn_sum) = h'; pre: = attn_sum */
    float *ff_in;                /* post: = h1; pre: [T, D] LN(h') */
    float *ln2_mean, *ln2_rstd;  /* [T] post: the second LN; pre: LN(h') */
    float *ff_act;               /* [T, I] dropout(relu(ff_in·W1ᵀ + b1)) */
    float *ff_sum;               /* post: [T, D] h' + dropout(ff_act·W2ᵀ + b2) (the second LN's input) */
} txl_layer_acts;

/* The 16-bit copies of one layer's tensors (16-bit storage only), shapes as in txl_layer_acts. */
typedef struct txl_layer_half {
    uint16_t *qkv, *r, *probs, *ctx, *ff_act; /* probs: unfused attention only */
    uint16_t *ff_in; /* post-LN only: [T, D] the FFN input h1 rounded, written by the op that makes h1; the
                      * twin (bind_half) its product reads, forward and in the weight gradient */
} txl_layer_half;

struct hs_txl {
    hs_params *params;
    const hs_backend *be;
    hs_txl_config cfg;
    hs_adaptive_dims ad;
    int max_batch, max_qlen, max_mlen;

    /* parameter indices (-1: absent) */
    int emb_table[HS_ADAPTIVE_MAX_CLUSTERS], emb_proj[HS_ADAPTIVE_MAX_CLUSTERS];
    int r_w_bias, r_r_bias;
    txl_layer_params *lp;
    int cluster_w, cluster_b;
    int out_w[HS_ADAPTIVE_MAX_CLUSTERS], out_b[HS_ADAPTIVE_MAX_CLUSTERS], out_proj[HS_ADAPTIVE_MAX_CLUSTERS];
    char alias_names[HS_ADAPTIVE_MAX_CLUSTERS][2][HS_NAME_MAX];

    /* the staged micro-batch */
    int batch, qlen;
    hs_adaptive_plan plan_in, plan_tgt;
    int32_t *ids_host, *tgt_host; /* [b·qlen] */

    /* forward activations */
    hs_adaptive_emb_state emb_state;
    hs_adaptive_softmax_state sm_state;
    float *emb;       /* [T, D] sqrt(D)·emb(ids) */
    float **hidden;   /* [N+1] of [T, D] */
    float *final;     /* [T, D] dropout(hidden[N]) */
    float *pos_host;  /* host [max klen, D] */
    float *inv_freq;  /* host [D/2] */
    float *pos, *pos_drop; /* [max klen, D]: pos is the first sinusoid table (pos_table) */
    uint16_t *pos16;       /* [max klen, D]: pos_drop's 16-bit twin (16-bit storage only; bind_half), which
                            * every layer's r product reads, forward and in its weight gradient */
    /* The sinusoid tables, one per clamp_len (<= 0 stored as 0), each for the largest klen: a segment's
     * pos[klen, D] is the last klen rows of its table (positions_forward), so a forward pass uploads
     * nothing and can be captured into a CUDA graph. */
    int pos_clamp[TXL_POS_TABLES];
    float *pos_tab[TXL_POS_TABLES];
    int n_pos_tables;
    txl_layer_acts *acts;  /* [N]; with 16-bit storage their qkv, r, probs, ctx and ff_act are one fp32
                            * working set shared by every layer */
    txl_layer_half *half;  /* [N] 16-bit copies, or NULL: fp32 storage */
    size_t activation_bytes; /* bytes of the buffers above (hs_txl_activation_bytes) */
    int fused;               /* attention = fused (rel_flash_attention: lse kept, no probabilities) */
    int only16;              /* the 16-bit dataflow (16-bit storage where be->products_read_twins): the FFN
                              * activation (forward), its gradient, the post-LN sublayer output gradients
                              * and the context (the fused attention's forward; the backward widens it
                              * not) exist in 16 bits alone (bind_half_only): only products read them
                              * (and the fused attention backward reads the context's twin) */
    int proj16;              /* only16 with the fused attention: the q|k|v and r products write their 16-bit
                              * copies alone (gemm_bias_half), which the fused attention reads as twins
                              * (bind_half_only), forward and backward; nothing converts them */

    /* backward scratch */
    float *grad_h, *grad_tmp, *grad_h1; /* [T, D] */
    uint16_t *grad16;                   /* [T, D]: the 16-bit twin of a sublayer output's gradient (16-bit
                                         * storage only; bind_half), which two products read */
    uint16_t *cat16;                    /* [K, D]: the twin of the layer's q|k|v product input c' (16-bit
                                         * storage only), rounded for the forward product and again for
                                         * its weight gradient */
    float *grad_ctx;                    /* [T, nd] */
    float *dqkv;                        /* [K, 3nd] */
    uint16_t *dqkv16, *dr16;            /* [K, 3nd], [klen, nd]: ∂qkv's and ∂r's 16-bit twins under proj16
                                         * (the layer's q|k|v and r copies are being read meanwhile) */
    uint16_t *grad16_ctx;               /* [T, nd]: ∂ctx in 16 bits only under proj16 (gemm_half_out's
                                         * output, which the fused attention's backward reads) */
    uint16_t *sub16;                    /* [T, D]: a post-LN sublayer output product's result in 16 bits
                                         * only (the 16-bit dataflow): hs_linear_forward_rounded */
    float *dcat;                        /* [K, D] */
    float *dr;                          /* [klen, nd] */
    float *dff;                         /* [T, I] */
    hs_grads_ready ready;               /* which gradients are final after each backward stage */
};

/* ---- parameters ------------------------------------------------------------------------------------ */

static int decays(const char *name) {
    return !(strstr(name, "bias") || strstr(name, "layer_norm") || strstr(name, "LayerNorm"));
}

static int declare(hs_params *p, const char *name, int64_t d0, int64_t d1) {
    const int64_t shape[2] = {d0, d1};
    return hs_params_declare(p, name, d1 > 0 ? 2 : 1, shape, decays(name));
}

static int declaref(hs_params *p, int64_t d0, int64_t d1, const char *fmt, int i) {
    char name[HS_NAME_MAX];
    snprintf(name, sizeof name, fmt, i);
    return declare(p, name, d0, d1);
}

static int declare_layer(hs_params *p, int l, const char *sub, int64_t d0, int64_t d1) {
    char name[HS_NAME_MAX];
    snprintf(name, sizeof name, "layers.%d.%s", l, sub);
    return declare(p, name, d0, d1);
}

/* Clusters of the embedding tables: div_val = 1 has one table for every cluster. */
static int emb_tables(const hs_txl *m) { return m->cfg.div_val == 1 ? 1 : m->ad.n_clusters + 1; }

hs_txl *hs_txl_create(hs_params *params, const hs_txl_config *cfg, int max_batch, int max_qlen, int max_mlen) {
    if (max_batch < 1 || max_qlen < 1 || max_mlen < 0)
        HS_FATAL(NULL, "hs_txl_create: max_batch %d, max_qlen %d, max_mlen %d", max_batch, max_qlen, max_mlen);
    hs_txl_config_check(cfg);
    hs_txl *m;
    HS_ALLOC(m, 1);
    m->params = params;
    m->cfg = *cfg;
    m->max_batch = max_batch;
    m->max_qlen = max_qlen;
    m->max_mlen = max_mlen;
    const int D = cfg->d_model, nd = cfg->n_head * cfg->d_head, I = cfg->d_inner;
    m->ad = hs_adaptive_dims_make(cfg->n_token, cfg->cutoffs, cfg->n_cutoffs, cfg->d_embed, D, cfg->div_val);
    const hs_adaptive_dims *ad = &m->ad;
    const int k = ad->n_clusters + 1;
    for (int i = 0; i < HS_ADAPTIVE_MAX_CLUSTERS; i++) m->emb_table[i] = m->emb_proj[i] = m->out_w[i] = m->out_b[i] = m->out_proj[i] = -1;
    m->cluster_w = m->cluster_b = -1;

    /* word_emb */
    if (cfg->div_val == 1) {
        m->emb_table[0] = declaref(params, cfg->n_token, cfg->d_embed, "word_emb.emb_layers.%d.weight", 0);
        if (hs_adaptive_has_proj(ad, 0)) m->emb_proj[0] = declaref(params, D, cfg->d_embed, "word_emb.emb_projs.%d", 0);
    } else {
        for (int i = 0; i < k; i++)
            m->emb_table[i] = declaref(params, hs_adaptive_cluster_size(ad, i), hs_adaptive_cluster_dim(ad, i),
                                       "word_emb.emb_layers.%d.weight", i);
        for (int i = 0; i < k; i++)
            m->emb_proj[i] = declaref(params, D, hs_adaptive_cluster_dim(ad, i), "word_emb.emb_projs.%d", i);
    }
    m->r_w_bias = declare(params, "r_w_bias", cfg->n_head, cfg->d_head);
    m->r_r_bias = declare(params, "r_r_bias", cfg->n_head, cfg->d_head);
    HS_ALLOC(m->lp, cfg->n_layer);
    for (int l = 0; l < cfg->n_layer; l++) {
        txl_layer_params *p = &m->lp[l];
        p->qkv_w = declare_layer(params, l, "dec_attn.qkv_net.weight", 3 * nd, D);
        p->o_w = declare_layer(params, l, "dec_attn.o_net.weight", D, nd);
        p->attn_ln_g = declare_layer(params, l, "dec_attn.layer_norm.weight", D, 0);
        p->attn_ln_b = declare_layer(params, l, "dec_attn.layer_norm.bias", D, 0);
        p->r_w = declare_layer(params, l, "dec_attn.r_net.weight", nd, D);
        p->ff1_w = declare_layer(params, l, "pos_ff.CoreNet.0.weight", I, D);
        p->ff1_b = declare_layer(params, l, "pos_ff.CoreNet.0.bias", I, 0);
        p->ff2_w = declare_layer(params, l, "pos_ff.CoreNet.3.weight", D, I);
        p->ff2_b = declare_layer(params, l, "pos_ff.CoreNet.3.bias", D, 0);
        p->ff_ln_g = declare_layer(params, l, "pos_ff.layer_norm.weight", D, 0);
        p->ff_ln_b = declare_layer(params, l, "pos_ff.layer_norm.bias", D, 0);
    }
    /* crit */
    if (ad->n_clusters > 0) {
        m->cluster_w = declare(params, "crit.cluster_weight", ad->n_clusters, cfg->d_embed);
        m->cluster_b = declare(params, "crit.cluster_bias", ad->n_clusters, 0);
    }
    const int out_layers = cfg->div_val == 1 ? 1 : k;
    for (int i = 0; i < out_layers; i++) {
        const int rows = cfg->div_val == 1 ? cfg->n_token : hs_adaptive_cluster_size(ad, i);
        const int dim = cfg->div_val == 1 ? cfg->d_embed : hs_adaptive_cluster_dim(ad, i);
        if (!cfg->tie_weight) m->out_w[i] = declaref(params, rows, dim, "crit.out_layers_weights.%d", i);
        m->out_b[i] = declaref(params, rows, 0, "crit.out_layers_biases.%d", i);
    }
    /* projections of the softmax: cluster 0's is its own (tie_projs[0] = False); the tails' are the
     * embedding's with tie_projs (div_val = 1: the one shared projection word_emb.emb_projs.0) */
    for (int i = 0; i < k; i++) {
        if (!hs_adaptive_has_proj(ad, i)) continue;
        if (i > 0 && cfg->tie_projs) continue;
        m->out_proj[i] = declaref(params, D, hs_adaptive_cluster_dim(ad, i), "crit.out_projs.%d", i);
    }
    return m;
}

const hs_txl_config *hs_txl_get_config(const hs_txl *m) { return &m->cfg; }

int hs_txl_state_dict_aliases(hs_txl *m, const char **alias, const char **target, int max) {
    hs_txl *mm = m;
    int n = 0;
    for (int i = 0; i < HS_ADAPTIVE_MAX_CLUSTERS && n < max; i++) {
        if (m->emb_proj[i] < 0) continue;
        snprintf(mm->alias_names[i][0], HS_NAME_MAX, "crit.shared_out_projs.%d", i);
        snprintf(mm->alias_names[i][1], HS_NAME_MAX, "%s", m->params->tensors[m->emb_proj[i]].name);
        alias[n] = mm->alias_names[i][0];
        target[n] = mm->alias_names[i][1];
        n++;
    }
    return n;
}

void hs_txl_inv_freq(int d_model, float *inv_freq) {
    /* torch: 1 / (10000 ** (arange(0.0, D, 2.0) / D)), every step in float32 */
    for (int k = 0; 2 * k < d_model; k++) {
        const float e = (float)(2 * k) / (float)d_model;
        inv_freq[k] = 1.0f / powf(10000.0f, e);
    }
}

/* ---- backward stages ------------------------------------------------------------------------------- */

/* Backward stages, in the order they run (nn/grads_ready.h): the adaptive softmax, then per layer from
 * the last its feed-forward half and its attention half, then the adaptive embedding. Layout: the
 * embedding tables and projections, r_w_bias, r_r_bias, layers 0..N-1 (attention tensors below the
 * feed-forward ones), the softmax's own tensors. Written by more than one stage: the tables and
 * projections the softmax shares with the embedding (tie_weight, tie_projs: the softmax stage, then the
 * embedding stage, last) and r_w_bias, r_r_bias (every layer's attention: final after layer 0's). */
enum { STAGE_SOFTMAX = 0 };
static int stage_ffn(const hs_txl *m, int l) { return 1 + 2 * (m->cfg.n_layer - 1 - l); }
static int stage_attention(const hs_txl *m, int l) { return stage_ffn(m, l) + 1; }
static int stage_embedding(const hs_txl *m) { return 1 + 2 * m->cfg.n_layer; }
static void grads_ready_plan(hs_txl *m);
static void grads_written_plan(hs_txl *m);

/* ---- buffers ------------------------------------------------------------------------------------------ */

static float *falloc(const hs_backend *be, size_t n) { return be->alloc(be, (n ? n : 1) * sizeof(float)); }

/* Activation buffers of n floats / n 16-bit values, counted in activation_bytes. */
static float *alloc_act(hs_txl *m, size_t n) { return hs_act_floats(m->be, &m->activation_bytes, n); }
static uint16_t *alloc_half(hs_txl *m, size_t n) { return hs_act_halves(m->be, &m->activation_bytes, n); }

static const float *pos_table(hs_txl *m, int clamp_len);

void hs_txl_setup(hs_txl *m) {
    const hs_backend *be = m->params->be;
    if (!be) HS_FATAL(NULL, "hs_txl_setup before hs_params_allocate");
    m->be = be;
    const hs_txl_config *c = &m->cfg;
    const size_t D = (size_t)c->d_model, nd = (size_t)c->n_head * (size_t)c->d_head, I = (size_t)c->d_inner;
    const size_t b = (size_t)m->max_batch, q = (size_t)m->max_qlen, klen = (size_t)(m->max_qlen + m->max_mlen);
    const size_t T = b * q, K = b * klen;
    hs_adaptive_plan_init(be, &m->plan_in, (int)T);
    hs_adaptive_plan_init(be, &m->plan_tgt, (int)T);
    HS_ALLOC(m->ids_host, T);
    HS_ALLOC(m->tgt_host, T);
    m->activation_bytes = 0;
    m->emb = alloc_act(m, T * D);
    HS_ALLOC(m->hidden, c->n_layer + 1);
    for (int l = 0; l <= c->n_layer; l++) m->hidden[l] = alloc_act(m, T * D);
    m->final = alloc_act(m, T * D);
    HS_ALLOC(m->pos_host, klen * D);
    HS_ALLOC(m->inv_freq, D / 2);
    hs_txl_inv_freq(c->d_model, m->inv_freq);
    m->pos = alloc_act(m, klen * D);
    m->pos_drop = alloc_act(m, klen * D);
    m->n_pos_tables = 0;
    pos_table(m, c->clamp_len); /* before any update: a capture must not upload */
    pos_table(m, c->eval_clamp_len);
    HS_ALLOC(m->acts, c->n_layer);
    const int half = hs_activations_16bit(be);
    if (half) HS_ALLOC(m->half, c->n_layer);
    m->only16 = half && be->products_read_twins;
    /* attention = auto picks the fused op where the backend's kernels take the head size (CUDA: d_head
     * <= 128); "fused" asks for it anyway */
    m->fused = hs_attention_fused(be, c->attention[0] ? c->attention : NULL) &&
               (strcmp(c->attention, "fused") == 0 || be->memory_is_host || c->d_head <= 128);
    m->proj16 = m->only16 && m->fused;
    const size_t n_probs = b * (size_t)c->n_head * q * klen, n_lse = b * (size_t)c->n_head * q;
    for (int l = 0; l < c->n_layer; l++) {
        txl_layer_acts *a = &m->acts[l];
        /* the five tensors kept in 16 bits: fp32 storage gives every layer its own; 16-bit storage
         * allocates them once (layer 0) as the working set every layer shares */
        const txl_layer_acts *w = half && l > 0 ? &m->acts[0] : NULL;
        a->cat = alloc_act(m, K * D);
        if (c->pre_lnorm) a->catn = alloc_act(m, K * D);
        a->ln1_mean = alloc_act(m, K);
        a->ln1_rstd = alloc_act(m, K);
        a->qkv = w ? w->qkv : alloc_act(m, K * 3 * nd);
        a->r = w ? w->r : alloc_act(m, klen * nd);
        if (m->fused)
            a->lse = alloc_act(m, n_lse); /* fp32 in every storage: small, and every layer its own */
        else
            a->probs = w ? w->probs : alloc_act(m, n_probs);
        a->ctx = w ? w->ctx : alloc_act(m, T * nd);
        a->attn_sum = alloc_act(m, T * D);
        if (c->pre_lnorm) {
            a->h1 = a->attn_sum;
            a->ff_in = alloc_act(m, T * D);
        } else {
            a->h1 = alloc_act(m, T * D);
            a->ff_in = a->h1;
            a->ff_sum = alloc_act(m, T * D);
        }
        a->ln2_mean = alloc_act(m, T);
        a->ln2_rstd = alloc_act(m, T);
        a->ff_act = w ? w->ff_act : alloc_act(m, T * I);
        if (half) {
            txl_layer_half *h = &m->half[l];
            h->qkv = alloc_half(m, K * 3 * nd);
            h->r = alloc_half(m, klen * nd);
            if (!m->fused) h->probs = alloc_half(m, n_probs);
            h->ctx = alloc_half(m, T * nd);
            h->ff_act = alloc_half(m, T * I);
            h->ff_in = c->pre_lnorm ? NULL : alloc_half(m, T * D);
        }
    }
    m->grad_h = falloc(be, T * D);
    m->grad_tmp = falloc(be, T * D);
    if (half) m->grad16 = be->alloc(be, T * D * sizeof(uint16_t));
    if (half) m->pos16 = be->alloc(be, klen * D * sizeof(uint16_t));
    if (half) m->cat16 = be->alloc(be, K * D * sizeof(uint16_t));
    if (m->proj16) m->dqkv16 = be->alloc(be, K * 3 * nd * sizeof(uint16_t));
    if (m->proj16) m->dr16 = be->alloc(be, klen * nd * sizeof(uint16_t));
    if (m->proj16) m->grad16_ctx = be->alloc(be, T * nd * sizeof(uint16_t));
    if (m->only16 && !c->pre_lnorm) m->sub16 = be->alloc(be, T * D * sizeof(uint16_t));
    m->grad_h1 = falloc(be, T * D);
    m->grad_ctx = falloc(be, T * nd);
    m->dqkv = falloc(be, K * 3 * nd);
    m->dcat = falloc(be, K * D);
    m->dr = falloc(be, klen * nd);
    m->dff = falloc(be, T * I);
    grads_ready_plan(m);
    grads_written_plan(m);
}

/* ---- initialisation ------------------------------------------------------------------------------------ */

/* dst ~ N(mean, std²) keyed by the tensor's table index (nn/init.c) */
static void fill_normal(hs_params *p, int index, double mean, double std, uint64_t seed) {
    hs_init_normal(p, index, mean, std, seed);
}

static void fill_zero(hs_params *p, int index) {
    if (index < 0) return;
    p->be->zero(p->be, hs_param_data(p, index), p->tensors[index].numel * sizeof(float));
}

void hs_txl_init_params(hs_txl *m, uint64_t seed) {
    hs_params *p = m->params;
    if (!p->data) HS_FATAL(NULL, "initialise parameters after hs_params_allocate");
    const double std = m->cfg.init_std, pstd = m->cfg.proj_init_std;
    for (int i = 0; i < HS_ADAPTIVE_MAX_CLUSTERS; i++) {
        fill_normal(p, m->emb_table[i], 0.0, std, seed);
        fill_normal(p, m->emb_proj[i], 0.0, pstd, seed);
        fill_normal(p, m->out_w[i], 0.0, std, seed);
        fill_zero(p, m->out_b[i]);
        fill_normal(p, m->out_proj[i], 0.0, pstd, seed);
    }
    fill_normal(p, m->r_w_bias, 0.0, std, seed);
    fill_normal(p, m->r_r_bias, 0.0, std, seed);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const txl_layer_params *q = &m->lp[l];
        fill_normal(p, q->qkv_w, 0.0, std, seed);
        fill_normal(p, q->o_w, 0.0, std, seed);
        fill_normal(p, q->r_w, 0.0, std, seed);
        fill_normal(p, q->attn_ln_g, 1.0, std, seed);
        fill_zero(p, q->attn_ln_b);
        fill_normal(p, q->ff1_w, 0.0, std, seed);
        fill_zero(p, q->ff1_b);
        fill_normal(p, q->ff2_w, 0.0, std, seed);
        fill_zero(p, q->ff2_b);
        fill_normal(p, q->ff_ln_g, 1.0, std, seed);
        fill_zero(p, q->ff_ln_b);
    }
    fill_normal(p, m->cluster_w, 0.0, std, seed);
    fill_zero(p, m->cluster_b);
}

/* ---- memory ------------------------------------------------------------------------------------------ */

hs_txl_memory *hs_txl_memory_create(const hs_backend *be, int n_layer, int d_model, int ncols, int mem_len) {
    hs_txl_memory *mem;
    HS_ALLOC(mem, 1);
    mem->n_layer = n_layer;
    mem->ncols = ncols;
    mem->mem_len = mem_len;
    mem->d_model = d_model;
    HS_ALLOC(mem->mem, n_layer);
    HS_ALLOC(mem->mlen, ncols > 0 ? ncols : 1);
    for (int l = 0; l < n_layer; l++) mem->mem[l] = falloc(be, (size_t)ncols * (size_t)mem_len * (size_t)d_model);
    return mem;
}

void hs_txl_memory_reset(hs_txl_memory *mem) {
    if (mem) memset(mem->mlen, 0, (size_t)(mem->ncols > 0 ? mem->ncols : 1) * sizeof *mem->mlen);
}

void hs_txl_memory_free(const hs_backend *be, hs_txl_memory *mem) {
    if (!mem) return;
    for (int l = 0; l < mem->n_layer; l++) be->free(be, mem->mem[l]);
    free(mem->mem);
    free(mem->mlen);
    free(mem);
}

/* The memory length of the micro-batch's columns (all equal: they advance together). */
static int segment_mlen(const hs_txl *m, const hs_txl_segment *seg) {
    if (!seg || !seg->mem || seg->mem->mem_len == 0) return 0;
    const hs_txl_memory *mem = seg->mem;
    if (seg->col0 < 0 || seg->col0 + m->batch > mem->ncols)
        HS_FATAL(NULL, "columns [%d, %d) outside the memory's %d columns", seg->col0, seg->col0 + m->batch, mem->ncols);
    if (mem->n_layer != m->cfg.n_layer || mem->d_model != m->cfg.d_model)
        HS_FATAL(NULL, "memory of %d layers x %d for a model of %d x %d", mem->n_layer, mem->d_model, m->cfg.n_layer,
                 m->cfg.d_model);
    const int mlen = mem->mlen[seg->col0];
    for (int s = 1; s < m->batch; s++)
        if (mem->mlen[seg->col0 + s] != mlen)
            HS_FATAL(NULL, "columns of one micro-batch with different memory lengths (%d, %d)", mlen,
                     mem->mlen[seg->col0 + s]);
    if (mlen > m->max_mlen) HS_FATAL(NULL, "memory of %d steps; the model is sized for %d", mlen, m->max_mlen);
    return mlen;
}

/* mem_l <- the last min(mem_len, klen) rows of cat(mem_l, h_l) per column (no gradient: a copy). */
static void memory_update(hs_txl *m, const hs_txl_segment *seg, int mlen) {
    if (!seg || !seg->mem || seg->mem->mem_len == 0) return;
    hs_txl_memory *mem = seg->mem;
    const hs_backend *be = m->be;
    const int b = m->batch, klen = mlen + m->qlen, keep = klen < mem->mem_len ? klen : mem->mem_len;
    const size_t D = (size_t)m->cfg.d_model;
    /* column s: its keep rows of D from src[s, klen - keep:, :] to mem_l[col0 + s, 0:keep, :] */
    for (int l = 0; l < m->cfg.n_layer; l++)
        be->copy_rows(be, mem->mem[l] + (size_t)seg->col0 * (size_t)mem->mem_len * D, (size_t)mem->mem_len * D,
                      m->acts[l].cat_used + (size_t)(klen - keep) * D, (size_t)klen * D, (size_t)keep * D, b);
    for (int s = 0; s < b; s++) mem->mlen[seg->col0 + s] = keep;
}

/* ---- inputs ------------------------------------------------------------------------------------------ */

/* The micro-batch's inputs and targets, column by column: ids[s·qlen + t] = tokens[s, t], tgt = tokens[s, t+1]. */
static void split_tokens(const hs_txl *m, const int32_t *tokens, int b, int qlen, int32_t *ids, int32_t *tgt) {
    if (b < 1 || b > m->max_batch || qlen < 1 || qlen > m->max_qlen)
        HS_FATAL(NULL, "Transformer-XL micro-batch of %d columns x %d tokens; the model is sized for %d x %d", b, qlen,
                 m->max_batch, m->max_qlen);
    for (int s = 0; s < b; s++)
        for (int t = 0; t < qlen; t++) {
            ids[s * qlen + t] = tokens[(size_t)s * (size_t)(qlen + 1) + (size_t)t];
            tgt[s * qlen + t] = tokens[(size_t)s * (size_t)(qlen + 1) + (size_t)t + 1];
        }
}

void hs_txl_stage_batch(hs_txl *m, const int32_t *tokens, int b, int qlen) {
    split_tokens(m, tokens, b, qlen, m->ids_host, m->tgt_host);
    hs_adaptive_plan_stage(m->be, &m->ad, &m->plan_in, m->ids_host, b * qlen, qlen, "token id");
    hs_adaptive_plan_stage(m->be, &m->ad, &m->plan_tgt, m->tgt_host, b * qlen, qlen, "target token id");
    m->batch = b;
    m->qlen = qlen;
}

/* A staged micro-batch: its two plans (device arrays, host metadata), the token arrays they were built
 * from (staging memory), and a table of the model's backend whose upload is upload_async, through which
 * hs_adaptive_plan_stage enqueues its copies on the copy stream. */
struct hs_txl_inputs {
    int batch, qlen;
    hs_adaptive_plan plan_in, plan_tgt;
    int32_t *ids_host, *tgt_host; /* [max_batch·max_qlen] */
    hs_backend copy_stream;
};

hs_txl_inputs *hs_txl_inputs_create(const hs_txl *m) {
    const hs_backend *be = m->be;
    const int T = m->max_batch * m->max_qlen;
    hs_txl_inputs *in;
    HS_ALLOC(in, 1);
    hs_adaptive_plan_init(be, &in->plan_in, T);
    hs_adaptive_plan_init(be, &in->plan_tgt, T);
    in->ids_host = be->host_alloc(be, (size_t)T * sizeof(int32_t));
    in->tgt_host = be->host_alloc(be, (size_t)T * sizeof(int32_t));
    in->copy_stream = *be;
    in->copy_stream.upload = be->upload_async;
    return in;
}

void hs_txl_inputs_free(const hs_txl *m, hs_txl_inputs *in) {
    if (!in) return;
    hs_adaptive_plan_free(m->be, &in->plan_in);
    hs_adaptive_plan_free(m->be, &in->plan_tgt);
    m->be->host_free(m->be, in->ids_host);
    m->be->host_free(m->be, in->tgt_host);
    free(in);
}

void hs_txl_stage_batch_async(const hs_txl *m, const int32_t *tokens, int b, int qlen, hs_txl_inputs *in) {
    split_tokens(m, tokens, b, qlen, in->ids_host, in->tgt_host);
    hs_adaptive_plan_stage(&in->copy_stream, &m->ad, &in->plan_in, in->ids_host, b * qlen, qlen, "token id");
    hs_adaptive_plan_stage(&in->copy_stream, &m->ad, &in->plan_tgt, in->tgt_host, b * qlen, qlen, "target token id");
    in->batch = b;
    in->qlen = qlen;
}

/* dst = src: the host metadata, and the device arrays by copies on the compute stream (a padded plan's
 * rows and local with the scatters' copies: 2·total entries, a function of the padded counts that the
 * clusters' ops carry anyway, nn/adaptive.h). */
static void take_plan(const hs_backend *be, hs_adaptive_plan *dst, const hs_adaptive_plan *src) {
    const size_t bytes = (size_t)src->n * sizeof(int32_t);
    const size_t index_bytes = (src->pad ? 2 : 1) * (size_t)src->total * sizeof(int32_t);
    dst->n = src->n;
    dst->total = src->total;
    memcpy(dst->count, src->count, sizeof dst->count);
    memcpy(dst->offset, src->offset, sizeof dst->offset);
    if (!bytes) return;
    be->copy(be, dst->ids, src->ids, bytes);
    be->copy(be, dst->head_labels, src->head_labels, bytes);
    be->copy(be, dst->rows, src->rows, index_bytes);
    be->copy(be, dst->local, src->local, index_bytes);
}

void hs_txl_take_inputs(hs_txl *m, const hs_txl_inputs *in) {
    take_plan(m->be, &m->plan_in, &in->plan_in);
    take_plan(m->be, &m->plan_tgt, &in->plan_tgt);
    m->batch = in->batch;
    m->qlen = in->qlen;
}

/* ---- dropout ------------------------------------------------------------------------------------------ */

static uint64_t layer_site(int l, int which) { return (uint64_t)(DROP_LAYER_BASE + DROP_SITES_PER_LAYER * l + which); }

/* A post-LN sublayer's LayerNorm backward, dy (in place) -> ∂/∂(its input), and the gradient through the
 * dropout before it: into scratch in the same op, or dy itself when the dropout is off. With the dropout
 * and a 16-bit twin buffer d16 (16-bit storage), the same op writes scratch's rounding there and it is
 * bound as scratch's twin (bind_half; under the 16-bit dataflow, only16, scratch is not written at all:
 * bind_half_only): the caller unbinds it after the two products that read it. */
static const float *layernorm_dropout_grad(const hs_backend *be, const hs_dropout_mask *mask, float *dy, float *scratch,
                                           float *dgamma, float *dbeta, const float *x, const float *mean,
                                           const float *rstd, const float *gamma, int rows, int cols, int batch,
                                           size_t per_sample, uint16_t *d16, int only16) {
    if (mask->p <= 0.0f) {
        hs_layernorm_backward(be, dy, dgamma, dbeta, dy, x, mean, rstd, gamma, rows, cols);
        return dy;
    }
    /* the 16-bit dataflow: the gradient in 16 bits only (its readers are the products) */
    hs_layernorm_dropout_backward(be, mask, dy, d16 && only16 ? NULL : scratch, dgamma, dbeta, dy, x, mean, rstd,
                                  gamma, rows, cols, batch, per_sample, d16);
    if (d16) hs_bind_twin(be, scratch, d16, (size_t)rows * (size_t)cols, only16);
    return scratch;
}

/* The gradient through a dropout into scratch, or dy itself when the dropout is off. */
static float *dropout_grad(const hs_backend *be, const hs_dropout_mask *mask, float *scratch, float *dy, int batch,
                           size_t per_sample) {
    if (mask->p <= 0.0f) return dy;
    hs_dropout_backward(be, mask, scratch, dy, batch, per_sample);
    return scratch;
}

/* ---- forward ------------------------------------------------------------------------------------------ */

/* What a layer pass needs to know about the segment. */
typedef struct pass {
    const hs_step_ctx *ctx;
    int64_t first;
    int mlen, klen, lower_shift;
    const hs_txl_segment *seg;
} pass;

static hs_adaptive_emb_weights emb_weights(const hs_txl *m) {
    hs_adaptive_emb_weights w;
    memset(&w, 0, sizeof w);
    for (int i = 0; i < emb_tables(m); i++) w.table[i] = hs_param_data(m->params, m->emb_table[i]);
    for (int i = 0; i < HS_ADAPTIVE_MAX_CLUSTERS; i++)
        if (m->emb_proj[i] >= 0) w.proj[i] = hs_param_data(m->params, m->emb_proj[i]);
    return w;
}

static hs_adaptive_emb_grads emb_grads(const hs_txl *m) {
    hs_adaptive_emb_grads g;
    memset(&g, 0, sizeof g);
    for (int i = 0; i < emb_tables(m); i++) g.table[i] = hs_param_grad(m->params, m->emb_table[i]);
    for (int i = 0; i < HS_ADAPTIVE_MAX_CLUSTERS; i++)
        if (m->emb_proj[i] >= 0) g.proj[i] = hs_param_grad(m->params, m->emb_proj[i]);
    return g;
}

/* The softmax's tensors per cluster (tied ones are the embedding's), as data (grad = 0) or gradients. */
static void softmax_tensors(const hs_txl *m, int grad, float **weight, float **bias, float **proj, float **cw,
                            float **cb) {
    const hs_params *p = m->params;
    float *(*at)(const hs_params *, int) = grad ? hs_param_grad : hs_param_data;
    const int k = m->ad.n_clusters + 1, D = m->cfg.d_embed;
    for (int i = 0; i < k; i++) {
        if (m->cfg.div_val == 1) {
            /* one table and one bias: cluster i is rows e_i..e_{i+1} */
            const int w0 = m->cfg.tie_weight ? m->emb_table[0] : m->out_w[0];
            weight[i] = at(p, w0) + (size_t)m->ad.ends[i] * (size_t)D;
            bias[i] = at(p, m->out_b[0]) + m->ad.ends[i];
        } else {
            weight[i] = at(p, m->cfg.tie_weight ? m->emb_table[i] : m->out_w[i]);
            bias[i] = at(p, m->out_b[i]);
        }
        proj[i] = NULL;
        if (!hs_adaptive_has_proj(&m->ad, i)) continue;
        if (m->out_proj[i] >= 0) proj[i] = at(p, m->out_proj[i]);
        else proj[i] = at(p, m->emb_proj[m->cfg.div_val == 1 ? 0 : i]); /* tied: NVIDIA's shared_out_projs */
    }
    *cw = m->cluster_w >= 0 ? at(p, m->cluster_w) : NULL;
    *cb = m->cluster_b >= 0 ? at(p, m->cluster_b) : NULL;
}

static hs_adaptive_softmax_weights sm_weights(const hs_txl *m) {
    hs_adaptive_softmax_weights w;
    memset(&w, 0, sizeof w);
    float *wt[HS_ADAPTIVE_MAX_CLUSTERS], *bs[HS_ADAPTIVE_MAX_CLUSTERS], *pj[HS_ADAPTIVE_MAX_CLUSTERS], *cw, *cb;
    softmax_tensors(m, 0, wt, bs, pj, &cw, &cb);
    for (int i = 0; i <= m->ad.n_clusters; i++) {
        w.weight[i] = wt[i];
        w.bias[i] = bs[i];
        w.proj[i] = pj[i];
    }
    w.cluster_weight = cw;
    w.cluster_bias = cb;
    return w;
}

static hs_adaptive_softmax_grads sm_grads(const hs_txl *m) {
    hs_adaptive_softmax_grads g;
    memset(&g, 0, sizeof g);
    softmax_tensors(m, 1, g.weight, g.bias, g.proj, &g.cluster_weight, &g.cluster_bias);
    return g;
}

/* Which backward stage writes which gradient (the writers of backward() and layer_backward()), once.
 * The softmax and embedding writers come from the same pointer tables their backward passes get, so
 * a tie is registered wherever it points. */
static void grads_ready_plan(hs_txl *m) {
    const hs_params *p = m->params;
    hs_grads_ready *g = &m->ready;
    hs_grads_ready_init(g, p, stage_embedding(m) + 1);
    const hs_adaptive_softmax_grads sg = sm_grads(m);
    for (int i = 0; i <= m->ad.n_clusters; i++) {
        hs_grads_ready_writes_grad(g, p, sg.weight[i], STAGE_SOFTMAX);
        hs_grads_ready_writes_grad(g, p, sg.bias[i], STAGE_SOFTMAX);
        hs_grads_ready_writes_grad(g, p, sg.proj[i], STAGE_SOFTMAX);
    }
    hs_grads_ready_writes_grad(g, p, sg.cluster_weight, STAGE_SOFTMAX);
    hs_grads_ready_writes_grad(g, p, sg.cluster_bias, STAGE_SOFTMAX);
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const txl_layer_params *w = &m->lp[l];
        const int ffn[] = {w->ff_ln_g, w->ff_ln_b, w->ff2_w, w->ff2_b, w->ff1_w, w->ff1_b};
        const int attention[] = {w->attn_ln_g, w->attn_ln_b, w->o_w, w->r_w, w->qkv_w, m->r_w_bias, m->r_r_bias};
        for (size_t k = 0; k < sizeof ffn / sizeof ffn[0]; k++) hs_grads_ready_writes(g, ffn[k], stage_ffn(m, l));
        for (size_t k = 0; k < sizeof attention / sizeof attention[0]; k++)
            hs_grads_ready_writes(g, attention[k], stage_attention(m, l));
    }
    const hs_adaptive_emb_grads eg = emb_grads(m);
    for (int i = 0; i < HS_ADAPTIVE_MAX_CLUSTERS; i++) {
        hs_grads_ready_writes_grad(g, p, eg.table[i], stage_embedding(m));
        hs_grads_ready_writes_grad(g, p, eg.proj[i], stage_embedding(m));
    }
    hs_grads_ready_build(g, p);
}

/* The gradients an update's first micro-batch writes whole (hs_params_grad_written): each layer's
 * weight-gradient products (layer_backward, beta 0 or the overwrite of gemm_wgrad_bgrad) and the FFN's
 * biases with them; and every tensor the adaptive softmax's gradients point into (its weights, biases,
 * projections and cluster block, which may be the embedding's tied tables and projections: the softmax's
 * backward runs first and writes each region, or zeroes one no row reaches, and the embedding's backward
 * adds after it). The shared r_w_bias / r_r_bias (every layer adds), the LayerNorms and the embedding's
 * own untied tensors are added to, and zeroed each update. */
static void grads_written_plan(hs_txl *m) {
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const txl_layer_params *w = &m->lp[l];
        const int written[] = {w->o_w, w->r_w, w->qkv_w, w->ff1_w, w->ff1_b, w->ff2_w, w->ff2_b};
        for (size_t k = 0; k < sizeof written / sizeof written[0]; k++) hs_params_grad_written(m->params, written[k]);
    }
    const hs_adaptive_softmax_grads sg = sm_grads(m);
    for (int i = 0; i <= m->ad.n_clusters; i++) {
        hs_params_grad_written(m->params, hs_params_tensor_of_grad(m->params, sg.weight[i]));
        hs_params_grad_written(m->params, hs_params_tensor_of_grad(m->params, sg.bias[i]));
        if (hs_adaptive_has_proj(&m->ad, i))
            hs_params_grad_written(m->params, hs_params_tensor_of_grad(m->params, sg.proj[i]));
    }
    if (m->ad.n_clusters > 0) {
        hs_params_grad_written(m->params, hs_params_tensor_of_grad(m->params, sg.cluster_weight));
        hs_params_grad_written(m->params, hs_params_tensor_of_grad(m->params, sg.cluster_bias));
    }
}

/* The sinusoid table of clamp_len for the largest klen (max_qlen + max_mlen):
 * row t = [sin(p·f) | cos(p·f)], p = max_klen-1-t clamped at clamp_len (> 0). Row t of a segment of klen
 * keys is row t + max_klen - klen here (its p = klen-1-t: the same float, so the same bits). Made and
 * uploaded once per clamp_len (setup makes training's and evaluation's). */
static const float *pos_table(hs_txl *m, int clamp_len) {
    const int clamp = clamp_len > 0 ? clamp_len : 0;
    for (int i = 0; i < m->n_pos_tables; i++)
        if (m->pos_clamp[i] == clamp) return m->pos_tab[i];
    if (m->n_pos_tables == TXL_POS_TABLES)
        HS_FATAL(NULL, "more than %d clamp_len values for one Transformer-XL model", TXL_POS_TABLES);
    const int D = m->cfg.d_model, klen = m->max_qlen + m->max_mlen, half = D / 2;
    for (int t = 0; t < klen; t++) {
        float pos = (float)(klen - 1 - t);
        if (clamp > 0 && pos > (float)clamp) pos = (float)clamp;
        for (int k = 0; k < half; k++) {
            const float x = pos * m->inv_freq[k];
            m->pos_host[(size_t)t * (size_t)D + (size_t)k] = sinf(x);
            m->pos_host[(size_t)t * (size_t)D + (size_t)(half + k)] = cosf(x);
        }
    }
    const size_t bytes = (size_t)klen * (size_t)D * sizeof(float);
    float *dev = m->n_pos_tables == 0 ? m->pos : falloc(m->be, (size_t)klen * (size_t)D);
    m->be->upload(m->be, dev, m->pos_host, bytes);
    m->pos_clamp[m->n_pos_tables] = clamp;
    m->pos_tab[m->n_pos_tables++] = dev;
    return dev;
}

/* pos'[klen, D] = dropout(pos): the last klen rows of the clamp_len's table, then dropout. */
static void positions_forward(hs_txl *m, const pass *ps, int clamp_len) {
    const size_t D = (size_t)m->cfg.d_model, klen = (size_t)ps->klen;
    const float *pos = pos_table(m, clamp_len) + ((size_t)(m->max_qlen + m->max_mlen) - klen) * D;
    const hs_dropout_mask drop = hs_dropout_site_mask(ps->ctx, 0, DROP_POS, m->cfg.dropout);
    hs_dropout_forward(m->be, &drop, m->pos_drop, pos, 1, klen * D);
    /* 16-bit storage: rounded into pos16 once for the N layers' r products (each would convert it), in
     * layer 0's convert_halves; bound until the forward's end, again in the backward (bind_pos16) */
}

/* pos_drop's twin again for the backward's r weight gradients (nothing wrote either since the forward) */
static void bind_pos16(const hs_txl *m, const pass *ps) {
    if (m->pos16) m->be->bind_half(m->be, m->pos_drop, m->pos16, (size_t)ps->klen * (size_t)m->cfg.d_model);
}

/* 16-bit storage: the tensors a layer keeps in 16 bits (five; four with the fused attention, which keeps
 * no probabilities), with their element counts for this pass; returns how many */
enum { N_SAVED = 5 };
static int layer_saved(const hs_txl *m, int l, const pass *ps, hs_act16 t[N_SAVED]) {
    const size_t b = (size_t)m->batch, q = (size_t)m->qlen, klen = (size_t)ps->klen;
    const size_t nd = (size_t)m->cfg.n_head * (size_t)m->cfg.d_head;
    const txl_layer_acts *a = &m->acts[l];
    const txl_layer_half *h = &m->half[l];
    t[0] = (hs_act16){a->qkv, h->qkv, b * klen * 3 * nd};
    t[1] = (hs_act16){a->r, h->r, klen * nd};
    t[2] = (hs_act16){a->ctx, h->ctx, b * q * nd};
    t[3] = (hs_act16){a->ff_act, h->ff_act, b * q * (size_t)m->cfg.d_inner};
    if (m->fused) return 4;
    t[4] = (hs_act16){a->probs, h->probs, b * (size_t)m->cfg.n_head * q * klen};
    return 5;
}

/* Layer l's saved tensors as convert_halves conversions, appended to cv[n..]; returns the new count.
 * to_half: the working set (fp32) rounded into the 16-bit copies (the store: q|k|v, r and the unfused
 * probabilities; ctx and u were rounded in layer_forward already, where their products read the copies as
 * twins); else the copies widened back (exact) into the working set before the layer's backward. */
static int layer_conversions(const hs_txl *m, int l, const pass *ps, int to_half, hs_half_conversion *cv, int n) {
    hs_act16 t[N_SAVED];
    const int k = layer_saved(m, l, ps, t);
    for (int i = 0; i < k; i++) /* the 16-bit dataflow widens no ctx: only its product reads it (and the fused
                                  * attention backward, from its twin); under proj16 q|k|v and r exist only
                                  * in 16 bits, as their products wrote them */
        if (!(to_half && (i == 2 || i == 3)) && !(!to_half && i == 2 && m->only16) && !(m->proj16 && i < 2))
            cv[n++] = (hs_half_conversion){t[i].f, t[i].u, t[i].count, to_half};
    return n;
}

/* The input c' [K, D] of layer l's q|k|v product: cat(mem_l, h_l), or LN of it (pre_lnorm) */
static const float *qkv_input(const hs_txl *m, int l) {
    return m->cfg.pre_lnorm ? m->acts[l].catn : m->acts[l].cat_used;
}

static void layer_forward(hs_txl *m, int l, const pass *ps) {
    const hs_backend *be = m->be;
    const hs_params *p = m->params;
    const txl_layer_params *w = &m->lp[l];
    txl_layer_acts *a = &m->acts[l];
    const hs_txl_config *c = &m->cfg;
    const int b = m->batch, qlen = m->qlen, mlen = ps->mlen, klen = ps->klen, T = b * qlen, K = b * klen;
    const int D = c->d_model, nd = c->n_head * c->d_head, I = c->d_inner;
    const size_t per_sample = (size_t)qlen * (size_t)D;
    const float *x = m->hidden[l];
    const hs_dropout_mask d_att = hs_dropout_site_mask(ps->ctx, ps->first, layer_site(l, DROP_ATT), c->dropatt);
    const hs_dropout_mask d_out = hs_dropout_site_mask(ps->ctx, ps->first, layer_site(l, DROP_ATTN_OUT), c->dropout);
    const hs_dropout_mask d_inner = hs_dropout_site_mask(ps->ctx, ps->first, layer_site(l, DROP_FF_INNER), c->dropout);
    const hs_dropout_mask d_ff = hs_dropout_site_mask(ps->ctx, ps->first, layer_site(l, DROP_FF_OUT), c->dropout);

    /* c = cat(mem_l, h_l) per column */
    if (mlen > 0) {
        const hs_txl_memory *mem = ps->seg->mem;
        /* cat[s] = mem_l[col0 + s, 0:mlen, :] then x[s]: two pitched copies over the b columns */
        const size_t cat_ld = (size_t)klen * (size_t)D, mem_ld = (size_t)mem->mem_len * (size_t)D;
        be->copy_rows(be, a->cat, cat_ld, mem->mem[l] + (size_t)ps->seg->col0 * mem_ld, mem_ld, (size_t)mlen * (size_t)D,
                      b);
        be->copy_rows(be, a->cat + (size_t)mlen * (size_t)D, cat_ld, x, per_sample, per_sample, b);
        a->cat_used = a->cat;
    } else {
        a->cat_used = x;
    }
    const float *in = a->cat_used;
    if (c->pre_lnorm) {
        hs_layernorm_forward(be, a->catn, a->ln1_mean, a->ln1_rstd, a->cat_used, hs_param_data(p, w->attn_ln_g),
                             hs_param_data(p, w->attn_ln_b), K, D, TXL_LN_EPS);
        in = a->catn;
    }
    /* 16-bit storage, one op: the layer before's q|k|v and r rounded into its copies (when a backward pass
     * follows; evaluation keeps nothing) before this layer's products overwrite the working set they share,
     * and c' rounded into cat16, the twin the q|k|v product reads */
    if (m->half) { /* layer 0's also rounds pos' into pos16 (positions_forward) */
        hs_half_conversion cv[N_SAVED + 2];
        int n = l > 0 && ps->ctx ? layer_conversions(m, l - 1, ps, 1, cv, 0) : 0;
        cv[n++] = (hs_half_conversion){(float *)in, m->cat16, (size_t)K * (size_t)D, 1};
        if (l == 0) cv[n++] = (hs_half_conversion){m->pos_drop, m->pos16, (size_t)klen * (size_t)D, 1};
        be->convert_halves(be, cv, n);
        be->bind_half(be, in, m->cat16, (size_t)K * (size_t)D);
        if (l == 0) bind_pos16(m, ps);
    }
    /* qkv[K, 3nd] = c'·Wqkvᵀ; r[klen, nd] = pos'·Wrᵀ (no biases). bf16/fp16: 16-bit linear layers (their
     * outputs rounded, autocast's: gemm_bias_half without a bias), in fp32 (widened) or, under proj16, in
     * the layer's 16-bit copies alone, which the fused attention reads as twins */
    const txl_layer_half *h16 = m->half ? &m->half[l] : NULL;
    const size_t n_qkv = (size_t)K * 3 * (size_t)nd, n_r = (size_t)klen * (size_t)nd;
    if (hs_precision_is_16bit(be->precision))
        be->gemm_bias_half(be, m->proj16 ? h16->qkv : NULL, a->qkv, in, hs_param_data(p, w->qkv_w), NULL, K, D, 3 * nd);
    else
        be->gemm(be, 0, 1, K, 3 * nd, D, 1.0f, in, D, hs_param_data(p, w->qkv_w), D, 0.0f, a->qkv, 3 * nd);
    be->unbind_half(be, in); /* bound above (16-bit storage), or nothing */
    if (hs_precision_is_16bit(be->precision))
        be->gemm_bias_half(be, m->proj16 ? h16->r : NULL, a->r, m->pos_drop, hs_param_data(p, w->r_w), NULL, klen, D, nd);
    else
        be->gemm(be, 0, 1, klen, nd, D, 1.0f, m->pos_drop, D, hs_param_data(p, w->r_w), D, 0.0f, a->r, nd);
    if (m->proj16) be->bind_half_only(be, a->qkv, h16->qkv, n_qkv), be->bind_half_only(be, a->r, h16->r, n_r);
    const float scale = (float)(1.0 / sqrt((double)c->d_head));
    if (m->fused) /* writes ctx's 16-bit copy itself (16-bit storage); the 16-bit dataflow: only that */
        hs_rel_flash_attention_forward(be, m->only16 ? NULL : a->ctx, a->lse, a->qkv, a->r, hs_param_data(p, m->r_w_bias),
                                       hs_param_data(p, m->r_r_bias), b, qlen, mlen, c->n_head, c->d_head,
                                       ps->lower_shift, scale, d_att.p, d_att.key, ps->first, h16 ? h16->ctx : NULL);
    else
        hs_rel_attention_forward(be, a->ctx, a->probs, a->qkv, a->r, hs_param_data(p, m->r_w_bias),
                                 hs_param_data(p, m->r_r_bias), b, qlen, mlen, c->n_head, c->d_head, ps->lower_shift,
                                 scale, d_att.p, d_att.key, ps->first);
    if (m->proj16) be->unbind_half(be, a->qkv), be->unbind_half(be, a->r);
    /* 16-bit storage: ctx and u are rounded into their layer's copies here (ctx by the fused attention,
     * u by relu_dropout_forward), where the o and FFN2 products read them as twins (no conversion in the
     * product), not after the layer (layer_conversions) */
    if (h16) {
        if (!m->fused) be->to_half(be, h16->ctx, a->ctx, (size_t)T * (size_t)nd);
        hs_bind_twin(be, a->ctx, h16->ctx, (size_t)T * (size_t)nd, m->fused && m->only16);
    }
    /* a = dropout(ctx·Woᵀ); the sublayer outputs are 16-bit linear layers under bf16/fp16, post-LN under
     * the 16-bit dataflow in 16 bits only (sub16), which dropout + residual + LayerNorm reads and writes
     * its sum over */
    hs_linear_forward_rounded(be, m->sub16, a->attn_sum, a->ctx, hs_param_data(p, w->o_w), NULL, T, nd, D);
    if (h16) be->unbind_half(be, a->ctx);
    if (c->pre_lnorm) {
        hs_dropout_forward(be, &d_out, a->attn_sum, a->attn_sum, b, per_sample);
        be->add_bias(be, a->attn_sum, x, 1, T * D); /* h' = h_l + a */
        hs_layernorm_forward(be, a->ff_in, a->ln2_mean, a->ln2_rstd, a->h1, hs_param_data(p, w->ff_ln_g),
                             hs_param_data(p, w->ff_ln_b), T, D, TXL_LN_EPS);
    } else { /* dropout, residual add and LayerNorm in one op */
        uint16_t *h1_16 = m->half ? m->half[l].ff_in : NULL;
        hs_dropout_add_layernorm_forward(be, &d_out, a->h1, a->attn_sum, a->ln1_mean, a->ln1_rstd, a->attn_sum, x,
                                         hs_param_data(p, w->attn_ln_g), hs_param_data(p, w->attn_ln_b), T, D,
                                         TXL_LN_EPS, b, per_sample, h1_16);
        if (m->sub16) be->unbind_half(be, a->attn_sum); /* the LayerNorm wrote its sum there */
        if (h1_16) be->bind_half(be, a->h1, h1_16, (size_t)T * (size_t)D);
    }
    /* u = dropout(relu(ff_in·W1ᵀ + b1)) (relu's backward reads u: dropped entries have zero gradient anyway) */
    hs_linear_forward(be, a->ff_act, a->ff_in, hs_param_data(p, w->ff1_w), hs_param_data(p, w->ff1_b), T, D, I);
    be->unbind_half(be, a->ff_in); /* bound above (post-LN, 16-bit storage), or nothing */
    /* the 16-bit dataflow: u only in 16 bits (the FFN2 product reads it; the backward widens its copy) */
    be->relu_dropout_forward(be, m->only16 ? NULL : a->ff_act, a->ff_act, b, (size_t)qlen * (size_t)I, d_inner.p,
                             d_inner.key, d_inner.first_sample, h16 ? h16->ff_act : NULL);
    if (h16) hs_bind_twin(be, a->ff_act, h16->ff_act, (size_t)T * (size_t)I, m->only16);
    float *out = m->hidden[l + 1];
    if (c->pre_lnorm) {
        hs_linear_forward_rounded(be, NULL, out, a->ff_act, hs_param_data(p, w->ff2_w), hs_param_data(p, w->ff2_b), T,
                                  I, D);
        be->unbind_half(be, a->ff_act);
        hs_dropout_forward(be, &d_ff, out, out, b, per_sample);
        be->add_bias(be, out, a->h1, 1, T * D);
    } else {
        hs_linear_forward_rounded(be, m->sub16, a->ff_sum, a->ff_act, hs_param_data(p, w->ff2_w),
                                  hs_param_data(p, w->ff2_b), T, I, D);
        be->unbind_half(be, a->ff_act);
        hs_dropout_add_layernorm_forward(be, &d_ff, out, a->ff_sum, a->ln2_mean, a->ln2_rstd, a->ff_sum, a->h1,
                                         hs_param_data(p, w->ff_ln_g), hs_param_data(p, w->ff_ln_b), T, D, TXL_LN_EPS,
                                         b, per_sample, NULL);
        if (m->sub16) be->unbind_half(be, a->ff_sum);
    }
}

static pass make_pass(const hs_txl *m, const hs_txl_segment *seg, const hs_step_ctx *ctx, int64_t first) {
    pass ps = {.ctx = ctx, .first = first, .seg = seg};
    ps.mlen = segment_mlen(m, seg);
    ps.klen = ps.mlen + m->qlen;
    const int same_length = seg ? seg->same_length : 0;
    if (same_length) {
        /* NVIDIA: mask_len = klen - mem_len - 1; keys j <= i - mask_shift_len are masked too */
        const int mem_len = seg && seg->mem ? seg->mem->mem_len : 0;
        const int mask_len = ps.klen - mem_len - 1;
        ps.lower_shift = mask_len > 0 ? m->qlen - mask_len : m->qlen;
    }
    return ps;
}

size_t hs_txl_activation_bytes(const hs_txl *m) { return m->activation_bytes; }

int hs_txl_activations_16bit(const hs_txl *m) { return m->half != NULL; }

int hs_txl_attention_fused(const hs_txl *m) { return m->fused; }

static void forward(hs_txl *m, const pass *ps, double *stats) {
    const hs_backend *be = m->be;
    const hs_txl_config *c = &m->cfg;
    const int b = m->batch, D = c->d_model;
    const size_t per_sample = (size_t)m->qlen * (size_t)D;
    positions_forward(m, ps, ps->seg ? ps->seg->clamp_len : 0);
    const hs_adaptive_emb_weights ew = emb_weights(m);
    hs_adaptive_embedding_forward(be, &m->ad, &ew, &m->plan_in, &m->emb_state, m->emb);
    const hs_dropout_mask d_emb = hs_dropout_site_mask(ps->ctx, ps->first, DROP_EMB, c->dropout);
    hs_dropout_forward(be, &d_emb, m->hidden[0], m->emb, b, per_sample);
    for (int l = 0; l < c->n_layer; l++) layer_forward(m, l, ps);
    if (m->half && ps->ctx) { /* the last layer's store (layer_forward makes the others') */
        hs_half_conversion cv[N_SAVED];
        be->convert_halves(be, cv, layer_conversions(m, c->n_layer - 1, ps, 1, cv, 0));
    }
    be->unbind_half(be, m->pos_drop); /* bound by positions_forward, or nothing */
    const hs_dropout_mask d_final = hs_dropout_site_mask(ps->ctx, ps->first, DROP_FINAL, c->dropout);
    hs_dropout_forward(be, &d_final, m->final, m->hidden[c->n_layer], b, per_sample);
    const hs_adaptive_softmax_weights sw = sm_weights(m);
    hs_adaptive_softmax_forward(be, &m->ad, &sw, &m->plan_tgt, &m->sm_state, m->final, stats + HS_STAT_LOSS_SUM,
                                stats + HS_TXL_STAT_TAIL_NLL);
}

/* ---- backward ----------------------------------------------------------------------------------------- */

/* grad_h: ∂/∂hidden[l+1] in, ∂/∂hidden[l] out (the memory rows of c get none: detached). */
static void layer_backward(hs_txl *m, int l, const pass *ps) {
    const hs_backend *be = m->be;
    const hs_params *p = m->params;
    const txl_layer_params *w = &m->lp[l];
    const txl_layer_acts *a = &m->acts[l];
    const hs_txl_config *c = &m->cfg;
    const int b = m->batch, qlen = m->qlen, mlen = ps->mlen, klen = ps->klen, T = b * qlen, K = b * klen;
    const int D = c->d_model, nd = c->n_head * c->d_head, I = c->d_inner;
    const size_t per_sample = (size_t)qlen * (size_t)D;
    const hs_dropout_mask d_att = hs_dropout_site_mask(ps->ctx, ps->first, layer_site(l, DROP_ATT), c->dropatt);
    const hs_dropout_mask d_out = hs_dropout_site_mask(ps->ctx, ps->first, layer_site(l, DROP_ATTN_OUT), c->dropout);
    const hs_dropout_mask d_inner = hs_dropout_site_mask(ps->ctx, ps->first, layer_site(l, DROP_FF_INNER), c->dropout);
    const hs_dropout_mask d_ff = hs_dropout_site_mask(ps->ctx, ps->first, layer_site(l, DROP_FF_OUT), c->dropout);
    float *dh1; /* ∂/∂h' */
    const float *da; /* ∂/∂a, a = the attention sublayer's output before its dropout */
    const txl_layer_half *h16 = m->half ? &m->half[l] : NULL;
    if (h16) { /* widened back (exact), c' rounded again into cat16 (its weight gradient's twin), one op; the
                * copies of the products' operands bound as their twins */
        hs_half_conversion cv[N_SAVED + 1];
        const int n = layer_conversions(m, l, ps, 0, cv, 0);
        cv[n] = (hs_half_conversion){(float *)qkv_input(m, l), m->cat16, (size_t)K * (size_t)D, 1};
        be->convert_halves(be, cv, n + 1);
        hs_bind_twin(be, a->ctx, h16->ctx, (size_t)T * (size_t)nd, m->only16); /* not widened under only16 */
        be->bind_half(be, a->ff_act, h16->ff_act, (size_t)T * (size_t)I);
        if (h16->ff_in) be->bind_half(be, a->ff_in, h16->ff_in, (size_t)T * (size_t)D);
    }

    const float *d2;
    if (!c->pre_lnorm) {
        /* second LN: grad_h = ∂/∂ff_sum = ∂/∂h' (residual) = ∂/∂(dropped FF output); with the dropout's
         * gradient in the same op */
        d2 = layernorm_dropout_grad(be, &d_ff, m->grad_h, m->grad_tmp, hs_param_grad(p, w->ff_ln_g),
                                    hs_param_grad(p, w->ff_ln_b), a->ff_sum, a->ln2_mean, a->ln2_rstd,
                                    hs_param_data(p, w->ff_ln_g), T, D, b, per_sample, m->grad16, m->only16);
    } else {
        d2 = dropout_grad(be, &d_ff, m->grad_tmp, m->grad_h, b, per_sample);
    }
    hs_linear_backward(be, m->dff, hs_param_grad(p, w->ff2_w), hs_param_grad(p, w->ff2_b), d2, a->ff_act,
                       hs_param_data(p, w->ff2_w), T, I, D, ps->ctx->grads_zero);
    if (h16) be->unbind_half(be, d2), be->unbind_half(be, a->ff_act);
    /* dff, read by two products: its 16-bit twin into u's copy (widened already, free now) */
    be->relu_dropout_backward(be, m->only16 ? NULL : m->dff, m->dff, a->ff_act, b, (size_t)qlen * (size_t)I,
                              d_inner.p, d_inner.key, d_inner.first_sample, h16 ? h16->ff_act : NULL);
    if (h16) /* the 16-bit dataflow: dff only in 16 bits, for its two products */
        hs_bind_twin(be, m->dff, h16->ff_act, (size_t)T * (size_t)I, m->only16);
    be->gemm_wgrad_bgrad(be, hs_param_grad(p, w->ff1_w), hs_param_grad(p, w->ff1_b), m->dff, I, a->ff_in, T, D, I,
                         ps->ctx->grads_zero);
    if (h16) be->unbind_half(be, a->ff_in);
    if (c->pre_lnorm) {
        /* ∂LN(h') = dff·W1, through the FF LayerNorm, plus the residual */
        be->gemm(be, 0, 0, T, D, I, 1.0f, m->dff, I, hs_param_data(p, w->ff1_w), D, 0.0f, m->grad_h1, D);
        hs_layernorm_backward(be, m->grad_h1, hs_param_grad(p, w->ff_ln_g), hs_param_grad(p, w->ff_ln_b), m->grad_h1,
                              a->h1, a->ln2_mean, a->ln2_rstd, hs_param_data(p, w->ff_ln_g), T, D);
        be->add_bias(be, m->grad_h1, m->grad_h, 1, T * D);
        dh1 = m->grad_h1;
        da = dropout_grad(be, &d_out, m->grad_tmp, dh1, b, per_sample);
    } else {
        /* ∂h' = residual + dff·W1, then the first LN: ∂/∂attn_sum (= ∂/∂h_l and ∂/∂a), with the
         * attention output dropout's gradient in the same op */
        be->gemm(be, 0, 0, T, D, I, 1.0f, m->dff, I, hs_param_data(p, w->ff1_w), D, 1.0f, m->grad_h, D);
        da = layernorm_dropout_grad(be, &d_out, m->grad_h, m->grad_tmp, hs_param_grad(p, w->attn_ln_g),
                                    hs_param_grad(p, w->attn_ln_b), a->attn_sum, a->ln1_mean, a->ln1_rstd,
                                    hs_param_data(p, w->attn_ln_g), T, D, b, per_sample, m->grad16, m->only16);
        dh1 = m->grad_h;
    }
    if (h16) be->unbind_half(be, m->dff);
    hs_grads_ready_after(&m->ready, ps->ctx, stage_ffn(m, l));
    /* a = dropout(ctx·Woᵀ): ∂ctx = ∂a·Wo, ∂Wo += ∂aᵀ·ctx; under bf16/fp16 ∂ctx rounded to 16 bits
     * (gemm_half_out, autocast's matmul), with either storage; under proj16 in 16 bits only, which the
     * fused attention's backward reads (its row dot products and dC tiles) */
    const float wgrad_beta = ps->ctx->grads_zero ? 0.0f : 1.0f; /* written, not added (grads_written_plan) */
    be->gemm(be, 1, 0, D, nd, T, 1.0f, da, D, a->ctx, nd, wgrad_beta, hs_param_grad(p, w->o_w), nd);
    hs_linear_dx_rounded(be, m->grad16_ctx, m->grad_ctx, da, hs_param_data(p, w->o_w), T, nd, D);
    if (h16) be->unbind_half(be, da);
    const float scale = (float)(1.0 / sqrt((double)c->d_head));
    const size_t n_qkv = (size_t)K * 3 * (size_t)nd, n_r = (size_t)klen * (size_t)nd;
    /* 16-bit storage: ∂qkv and ∂r also rounded into 16-bit twins for their products: q|k|v's and r's copies
     * (widened already, free now), or under proj16, where the kernels read those copies as q|k|v and r
     * themselves, dqkv16 and dr16 */
    uint16_t *dqkv16 = m->proj16 ? m->dqkv16 : h16 ? h16->qkv : NULL, *dr16 = m->proj16 ? m->dr16 : h16 ? h16->r : NULL;
    if (m->proj16) be->bind_half_only(be, a->qkv, h16->qkv, n_qkv), be->bind_half_only(be, a->r, h16->r, n_r);
    if (m->fused)
        hs_rel_flash_attention_backward(be, m->dqkv, m->dr, hs_param_grad(p, m->r_w_bias),
                                        hs_param_grad(p, m->r_r_bias), m->grad_ctx, a->qkv, a->r,
                                        hs_param_data(p, m->r_w_bias), hs_param_data(p, m->r_r_bias), a->ctx, a->lse, b,
                                        qlen, mlen, c->n_head, c->d_head, ps->lower_shift, scale, d_att.p, d_att.key,
                                        ps->first, dqkv16, dr16);
    else
        hs_rel_attention_backward(be, m->dqkv, m->dr, hs_param_grad(p, m->r_w_bias), hs_param_grad(p, m->r_r_bias),
                                  m->grad_ctx, a->qkv, a->r, hs_param_data(p, m->r_w_bias),
                                  hs_param_data(p, m->r_r_bias), a->probs, b, qlen, mlen, c->n_head, c->d_head,
                                  ps->lower_shift, scale, d_att.p, d_att.key, ps->first);
    /* after the attention backward: under the 16-bit dataflow the fused one reads the context's twin */
    if (h16) be->unbind_half(be, a->ctx);
    if (m->grad16_ctx) be->unbind_half(be, m->grad_ctx);
    if (m->proj16) be->unbind_half(be, a->qkv), be->unbind_half(be, a->r);
    if (h16) { /* ∂qkv, read by two products: the unfused op's rounded once into q|k|v's copy */
        if (!m->fused) be->to_half(be, dqkv16, m->dqkv, n_qkv);
        be->bind_half(be, m->dqkv, dqkv16, n_qkv);
        if (m->fused) be->bind_half(be, m->dr, dr16, n_r);
    }
    /* r = pos'·Wrᵀ: ∂Wr += ∂rᵀ·pos' (the positions need no gradient; pos' read from its twin, bind_pos16) */
    be->gemm(be, 1, 0, nd, D, klen, 1.0f, m->dr, nd, m->pos_drop, D, wgrad_beta, hs_param_grad(p, w->r_w), D);
    if (h16) be->unbind_half(be, m->dr);
    /* qkv = c'·Wqkvᵀ: ∂Wqkv += ∂qkvᵀ·c' (c' from cat16, rounded at the layer's load), ∂c' = ∂qkv·Wqkv */
    const float *in = qkv_input(m, l);
    if (h16) be->bind_half(be, in, m->cat16, (size_t)K * (size_t)D);
    be->gemm(be, 1, 0, 3 * nd, D, K, 1.0f, m->dqkv, 3 * nd, in, D, wgrad_beta, hs_param_grad(p, w->qkv_w), D);
    if (h16) be->unbind_half(be, in);
    be->gemm(be, 0, 0, K, D, 3 * nd, 1.0f, m->dqkv, 3 * nd, hs_param_data(p, w->qkv_w), D, 0.0f, m->dcat, D);
    if (h16) be->unbind_half(be, m->dqkv);
    if (c->pre_lnorm) {
        hs_layernorm_backward(be, m->dcat, hs_param_grad(p, w->attn_ln_g), hs_param_grad(p, w->attn_ln_b), m->dcat,
                              a->cat_used, a->ln1_mean, a->ln1_rstd, hs_param_data(p, w->attn_ln_g), K, D);
        be->copy(be, m->grad_h, m->grad_h1, (size_t)T * (size_t)D * sizeof(float));
    }
    /* ∂h_l = residual (grad_h) + the h_l rows of ∂c */
    if (mlen == 0)
        be->add_bias(be, m->grad_h, m->dcat, 1, T * D);
    else /* one pitched add over the b columns: dcat's rows are klen·D apart, grad_h's qlen·D */
        be->add_rows(be, m->grad_h, per_sample, m->dcat + (size_t)mlen * (size_t)D, (size_t)klen * (size_t)D,
                     per_sample, b);
    hs_grads_ready_after(&m->ready, ps->ctx, stage_attention(m, l));
}

static void backward(hs_txl *m, const pass *ps) {
    const hs_backend *be = m->be;
    const hs_txl_config *c = &m->cfg;
    const int b = m->batch, D = c->d_model;
    const size_t per_sample = (size_t)m->qlen * (size_t)D;
    const hs_adaptive_softmax_weights sw = sm_weights(m);
    const hs_adaptive_softmax_grads sg = sm_grads(m);
    hs_adaptive_softmax_backward(be, &m->ad, &sw, &sg, &m->plan_tgt, &m->sm_state, m->final,
                                 (float)ps->ctx->loss_scale[0], m->grad_h, ps->ctx->grads_zero);
    hs_grads_ready_after(&m->ready, ps->ctx, STAGE_SOFTMAX);
    const hs_dropout_mask d_final = hs_dropout_site_mask(ps->ctx, ps->first, DROP_FINAL, c->dropout);
    if (d_final.p > 0.0f) hs_dropout_backward(be, &d_final, m->grad_h, m->grad_h, b, per_sample);
    bind_pos16(m, ps);
    for (int l = c->n_layer - 1; l >= 0; l--) layer_backward(m, l, ps);
    be->unbind_half(be, m->pos_drop);
    const hs_dropout_mask d_emb = hs_dropout_site_mask(ps->ctx, ps->first, DROP_EMB, c->dropout);
    const float *demb = dropout_grad(be, &d_emb, m->grad_tmp, m->grad_h, b, per_sample);
    const hs_adaptive_emb_weights ew = emb_weights(m);
    const hs_adaptive_emb_grads eg = emb_grads(m);
    hs_adaptive_embedding_backward(be, &m->ad, &ew, &eg, &m->plan_in, &m->emb_state, demb);
    hs_grads_ready_after(&m->ready, ps->ctx, stage_embedding(m));
}

void hs_txl_forward_backward(hs_txl *m, const hs_txl_segment *seg, int64_t first_sample, const hs_step_ctx *ctx,
                             double *stats) {
    if (m->batch < 1) HS_FATAL(NULL, "hs_txl_forward_backward without a staged micro-batch");
    const pass ps = make_pass(m, seg, ctx, first_sample);
    if (ps.klen > m->max_qlen + m->max_mlen) HS_FATAL(NULL, "segment of %d keys; sized for %d", ps.klen, m->max_qlen + m->max_mlen);
    forward(m, &ps, stats);
    backward(m, &ps);
    memory_update(m, seg, ps.mlen);
}

void hs_txl_evaluate(hs_txl *m, const hs_txl_segment *seg, double *stats) {
    if (m->batch < 1) HS_FATAL(NULL, "hs_txl_evaluate without a staged micro-batch");
    const pass ps = make_pass(m, seg, NULL, 0);
    forward(m, &ps, stats);
    memory_update(m, seg, ps.mlen);
}

void hs_txl_free(hs_txl *m) {
    if (!m) return;
    const hs_backend *be = m->be;
    if (be) {
        hs_adaptive_plan_free(be, &m->plan_in);
        hs_adaptive_plan_free(be, &m->plan_tgt);
        hs_adaptive_emb_state_free(be, &m->emb_state);
        hs_adaptive_softmax_state_free(be, &m->sm_state);
        for (int i = 1; i < m->n_pos_tables; i++) be->free(be, m->pos_tab[i]); /* [0] is m->pos */
        if (m->grad16) be->free(be, m->grad16);
        if (m->pos16) be->free(be, m->pos16);
        if (m->cat16) be->free(be, m->cat16);
        if (m->dqkv16) be->free(be, m->dqkv16);
        if (m->grad16_ctx) be->free(be, m->grad16_ctx);
        if (m->sub16) be->free(be, m->sub16);
        if (m->dr16) be->free(be, m->dr16);
        float *bufs[] = {m->emb, m->final, m->pos, m->pos_drop, m->grad_h, m->grad_tmp, m->grad_h1,
                         m->grad_ctx, m->dqkv, m->dcat, m->dr, m->dff};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) be->free(be, bufs[i]);
        for (int l = 0; m->hidden && l <= m->cfg.n_layer; l++) be->free(be, m->hidden[l]);
        for (int l = 0; m->acts && l < m->cfg.n_layer; l++) {
            txl_layer_acts *a = &m->acts[l];
            const int shared = m->half && l > 0; /* qkv, r, probs, ctx, ff_act: layer 0's working set */
            float *lb[] = {a->cat, a->catn, a->ln1_mean, a->ln1_rstd, shared ? NULL : a->qkv, shared ? NULL : a->r,
                           shared ? NULL : a->probs, a->lse, shared ? NULL : a->ctx, a->attn_sum,
                           m->cfg.pre_lnorm ? NULL : a->h1, m->cfg.pre_lnorm ? a->ff_in : NULL, a->ln2_mean,
                           a->ln2_rstd, shared ? NULL : a->ff_act, a->ff_sum};
            for (size_t k = 0; k < sizeof lb / sizeof lb[0]; k++)
                if (lb[k]) be->free(be, lb[k]);
            if (m->half) {
                txl_layer_half *h = &m->half[l];
                uint16_t *hb[] = {h->qkv, h->r, h->probs, h->ctx, h->ff_act, h->ff_in};
                for (size_t k = 0; k < sizeof hb / sizeof hb[0]; k++)
                    if (hb[k]) be->free(be, hb[k]);
            }
        }
    }
    hs_grads_ready_free(&m->ready);
    free(m->ids_host);
    free(m->tgt_host);
    free(m->pos_host);
    free(m->inv_freq);
    free(m->hidden);
    free(m->acts);
    free(m->half);
    free(m->lp);
    free(m);
}
