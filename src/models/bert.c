/* NVIDIA's BertForPreTraining composed from the layers of src/nn/layers.h (see bert.h for the parameters).
 *
 * Memory: activations the backward pass reads are kept per layer (layer input, qkv, attention
 * probabilities, context, the two LayerNorm inputs and statistics, the FFN pre-activation and its
 * GELU); everything else is shared. Dropout runs in place and stores no mask (the counter RNG redraws
 * it), the residual sums are written over the sub-layer outputs, and the backward pass works in three
 * [T,H] buffers plus one workspace that holds the FFN gradient [T,I] and later the attention's dqkv
 * [T,3H]. The MLM head sees only the labelled rows: logits [Np,V] with Np = labelled tokens (on a backend
 * that records graph regions, CUDA, padded to B·max_pred with ignored rows: mlm_rows_for).
 *
 * 16-bit storage (precision bf16 | fp16, unless HETSEQ_ACTIVATION_STORAGE=fp32): the tensors a
 * mixed-precision framework keeps in 16 bits — q|k|v, the attention probabilities, the context, the FFN
 * pre-activation and its GELU — are kept per layer in the 16-bit type of the precision (be->to_half),
 * and so are the layer's input and the first LayerNorm's output h1, which the backward reads only as
 * operands of the weight-gradient products; the LayerNorm inputs (the residual sums) and statistics
 * stay fp32 (as autocast keeps them). Each layer runs its forward in ONE fp32 working set of those
 * tensors shared by all layers (the layer inputs: two buffers in turn) and keeps the 16-bit copies its
 * producers wrote; the backward widens one layer's copies back into the working set (convert_halves,
 * exact) and runs as in fp32 storage. q|k|v, the context, the GELU output, the input and h1 are only
 * read as operands of products, which round them to the same 16 bits anyway, so storing them rounded
 * changes nothing; the GELU backward (from the pre-activation) and the softmax backward (from the
 * probabilities; the sign bit that marks a dropped one survives, -0.0 too) see rounded values: the
 * documented cost (docs/gpu.md, "Mixed precision"). The forward and the loss are unchanged.
 *
 * Fused attention (the experiment file's attention = "fused", or "auto" on CUDA; hs_attention_fused):
 * the layer keeps lse[B,heads,L] (fp32, its own per layer) instead of probs[B,heads,L,L], and the
 * backward recomputes the probabilities from q|k|v, the mask bias and lse (flash_attention_backward,
 * which also reads the context: under 16-bit storage its widened 16-bit copy; q|k|v it reads from the
 * 16-bit copy itself, which the backward therefore does not widen).
 *
 * How the BERT model composes them (post-LN encoder, NVIDIA/HetSeq BertForPreTraining):
 *   embeddings   h = LN(word[ids] + position[arange(L)] + token_type[segment]) → dropout
 *                  hs_embedding_forward (accumulate 0, then 1), hs_position_embedding_forward,
 *                  hs_layernorm_forward, hs_dropout_forward
 *   layer ×N     ctx = hs_attention_forward(h)                  (Q,K,V projections inside)
 *                a = hs_linear_forward(ctx; attention.output.dense) → dropout
 *                h1 = hs_add_layernorm_forward(a, h)            (LN(a + h), the sum kept for backward)
 *                u = h1·W1ᵀ + b1, g = gelu(u) (exact erf): bias_gelu_linear (the bias in the GEMM's
 *                epilogue on CUDA, in the GELU's pass on the CPU: hs_backend.gemm_fuses_bias)
 *                (bf16/fp16: u = gemm_bias_half, the 16-bit linear layer; g = gelu_forward(_half)(u))
 *                o = hs_linear_forward(g; output.dense) → dropout
 *                h = hs_add_layernorm_forward(o, h1)
 *   pooler       p = tanh(W·h[:,0] + b): hs_gather_rows_forward (rows b·L), hs_linear_forward, hs_tanh_forward
 *   MLM head     hm = hs_gather_rows_forward(h, masked positions) → linear → bias+GELU → LN
 *                logits[Np,V] = hm·Wembᵀ + cls.predictions.bias: the TIED decoder is just
 *                hs_linear_forward(logits, hm, word_embeddings.weight, cls.predictions.bias, Np, H, V),
 *                and hs_linear_backward(.., dw = grad of word_embeddings.weight, ..) adds dlogitsᵀ·hm into
 *                the word-embedding gradient (which the embedding scatter-add also adds into).
 *   losses       hs_softmax_xent_forward on [Np,V] (MLM) and [B,2] (NSP).
 * Backward runs the same list in reverse. Where two paths meet (the residual into an add+LN, the
 * encoder output read by the pooler and the MLM gather), gradients are added: hs_attention_backward
 * can accumulate into dx, hs_gather_rows_backward always accumulates (zero its dx first). */
#include "models/bert.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "math/hs_math.h"
#include "nn/grads_ready.h"
#include "nn/layers.h"
#include "nn/init.h"
#include "util/check.h"
#include "util/lowp.h"

/* BertLayerNorm's epsilon. */
#define HS_BERT_LAYERNORM_EPS 1e-12f

/* Dropout sites: each draws its masks from hs_rng_key(seed, update, site). */
enum { DROP_EMBEDDINGS = 1, DROP_LAYER_BASE = 16, DROP_SITES_PER_LAYER = 4 };
enum { DROP_ATTENTION_PROBS = 0, DROP_ATTENTION_OUTPUT = 1, DROP_FFN_OUTPUT = 2 };

/* Parameter-table indices of one encoder layer. */
typedef struct bert_layer_params {
    int query_w, key_w, value_w, query_b, key_b, value_b;
    int attn_out_w, attn_out_b, attn_ln_g, attn_ln_b;
    int inter_w, inter_b, out_w, out_b, out_ln_g, out_ln_b;
} bert_layer_params;

/* What one encoder layer keeps for its backward pass (its input is hidden[i]). T = B·L tokens. */
typedef struct bert_layer_acts {
    float *qkv;                  /* [T,3H] projected q | k | v */
    float *probs;                /* [B,heads,L,L] attention probabilities (dropped ones negated); NULL when
                                  * the attention is fused */
    float *lse;                  /* [B,heads,L] the fused attention's row log-sum-exp (fp32 under every
                                  * storage: B·heads·L floats), or NULL (unfused) */
    float *ctx;                  /* [T,H] attention context (input of attention.output.dense) */
    float *attn_sum;             /* [T,H] dropout(ctx·Woᵀ + bo) + input: the first LayerNorm's input */
    float *attn_mean, *attn_rstd; /* [T] */
    float *attn_out;             /* [T,H] h1 = LayerNorm(attn_sum) */
    float *ffn_pre;              /* [T,I] u = h1·W1ᵀ + b1 (GELU input) */
    float *ffn_act;              /* [T,I] gelu(u) (input of output.dense) */
    float *ffn_sum;              /* [T,H] dropout(gelu(u)·W2ᵀ + b2) + h1: the second LayerNorm's input */
    float *ffn_mean, *ffn_rstd;  /* [T] */
} bert_layer_acts;

/* The 16-bit copies of one layer's tensors (16-bit storage only), shapes as in bert_layer_acts; input
 * [T,H] is hidden[i] rounded (written by the op that makes hidden[i]). input, attn_out and ctx are also
 * the twins (be->bind_half) the layer's GEMMs read instead of converting those operands. The GELU
 * output is not kept: the backward recomputes it from ffn_pre (hs_bert.ffn_act16). */
typedef struct bert_layer_half {
    uint16_t *qkv, *probs, *ctx, *ffn_pre;
    uint16_t *input, *attn_out;
} bert_layer_half;

/* The inputs of a micro-batch on the device and the host arrays derived from it (staging memory,
 * page-locked on CUDA, uploaded from there): one list for the model's own inputs and for every staged
 * set of input staging (hs_bert_inputs), allocated, uploaded, copied and freed by the functions of
 * "inputs" below. */
typedef struct bert_input_bufs {
    int32_t *ids, *segments, *input_mask;        /* [B,L] */
    int32_t *nsp_labels, *cls_rows;              /* [B]: label, row b·L of the [CLS] token */
    int32_t *mlm_rows, *mlm_labels;              /* [Np]: row b·L + position of each labelled token, its id
                                                  * (padding rows: row 0, label -1, mlm_rows_for) */
    int32_t *cls_host, *rows_host, *labels_host; /* host: what cls_rows, mlm_rows, mlm_labels upload from */
} bert_input_bufs;

struct hs_bert {
    hs_params *params;
    const hs_backend *be;
    hs_bert_config cfg;
    int max_batch, max_seq, max_pred;

    /* parameter indices */
    int word, position, token_type, emb_ln_g, emb_ln_b;
    bert_layer_params *lp; /* [N] */
    int pool_w, pool_b, mlm_bias, transform_w, transform_b, transform_ln_g, transform_ln_b, nsp_w, nsp_b;

    /* the staged micro-batch */
    int batch, seq_len, mlm_count;       /* mlm_count: the MLM head's rows Np (mlm_rows_for) */
    bert_input_bufs in;                   /* its inputs on the device (and the derived host arrays) */
    float *mask_bias;                     /* [B,L] (1 - input_mask)·(-10000) */

    /* forward activations */
    float *emb_sum, *emb_mean, *emb_rstd; /* [T,H] word + position + token type (LayerNorm input); [T] */
    float **hidden;                       /* [N+1] of [T,H]: hidden[i] = input of layer i, hidden[N] = output */
    bert_layer_acts *acts;                /* [N]; with 16-bit storage their qkv, probs, ctx, ffn_pre and
                                           * ffn_act are one fp32 working set shared by every layer */
    bert_layer_half *half;                /* [N] 16-bit copies, or NULL: fp32 storage */
    uint16_t *grad16_h, *grad16_ffn;      /* [T,H], [T,I]: the 16-bit twins of the dense layers' output
                                           * gradients in the backward pass (16-bit storage only) */
    uint16_t *grad16_qkv;                 /* [T,3H]: dqkv's twin (the attention backward writes it); the
                                           * same buffer as grad16_ffn when that holds T·3H (I >= 3H) */
    uint16_t *sub16;                      /* [T,H]: a sublayer output product's result in 16 bits only
                                           * (the 16-bit dataflow), which dropout + residual + LayerNorm
                                           * read next (hs_linear_forward_rounded) */
    uint16_t *grad16_ctx;                 /* [T,H]: the context's gradient in 16 bits only (the 16-bit
                                           * dataflow with the fused attention), which the attention
                                           * backward reads beside writing dqkv's twin: grad16_ffn's last
                                           * T·H when it holds T·4H (I >= 4H), else its own */
    int grad16_ctx_owned;                 /* 1: grad16_ctx is its own allocation (freed with the model) */
    uint16_t *ffn_act16;                  /* [T,I]: the GELU output's twin, one for every layer (16-bit
                                           * storage only): gelu_forward_half writes it for the output
                                           * product, and the backward's gelu_backward recomputes it from
                                           * the kept pre-activation for that product's weight gradient */
    size_t activation_bytes;              /* bytes of the buffers above (hs_bert_activation_bytes) */
    int fused_attention;                  /* hs_attention_fused(cfg.attention): lse kept, not probs */
    int only16;                           /* the 16-bit dataflow (16-bit storage on a backend whose products
                                           * read twins, be->products_read_twins): a tensor that only
                                           * products read exists in 16 bits alone (bind_half_only): the
                                           * GELU output and its gradient, the sublayer output gradients,
                                           * the fused attention's context, and in the backward the layer's
                                           * input, h1 and the context, not widened */
    float *pool_in, *pool_out;            /* [B,H] h[:,0]; tanh(pool_in·Wᵀ + b) */
    float *nsp_logits;                    /* [B,2], softmax in place */
    float *mlm_in, *mlm_pre, *mlm_act;    /* [Np,H] gathered rows; transform pre-activation; GELU */
    float *mlm_mean, *mlm_rstd;           /* [Np] */
    float *mlm_out;                       /* [Np,H] LayerNorm(mlm_act) */
    float *mlm_logits;                    /* [Np,V], softmax in place */

    /* backward scratch */
    float *grad_h, *grad_tmp, *grad_ctx;  /* [T,H] */
    float *grad_pool, *grad_pool_in;      /* [B,H] */
    float *grad_mlm_out, *grad_mlm_in;    /* [Np,H] */
    hs_workspace ws;                      /* [T, max(I, 3H)]: dgelu, then the attention's dqkv */
    hs_grads_ready ready;                 /* which gradients are final after each backward stage */
};

/* Backward stages, in the order they run (nn/grads_ready.h): the heads, then per layer from the last
 * its feed-forward half and its attention half, then the embeddings. Layout: embeddings, layers 0..N-1
 * (attention tensors below the feed-forward ones), pooler and heads; so each stage finishes the tensors
 * just below the previous boundary, except the word embeddings: the tied MLM decoder writes them in
 * the heads stage and the embedding backward again last, and they sit at offset 0. */
enum { STAGE_HEADS = 0 };
static int stage_ffn(const hs_bert *m, int layer) { return 1 + 2 * (m->cfg.num_hidden_layers - 1 - layer); }
static int stage_attention(const hs_bert *m, int layer) { return stage_ffn(m, layer) + 1; }
static int stage_embeddings(const hs_bert *m) { return 1 + 2 * m->cfg.num_hidden_layers; }

/* ---- parameters ------------------------------------------------------------------------------------ */

/* No weight decay for biases and LayerNorm parameters (NVIDIA's no_decay list). */
static int decays(const char *name) {
    return !(strstr(name, "bias") || strstr(name, "LayerNorm") || strstr(name, "gamma") || strstr(name, "beta"));
}

static int declare(hs_params *p, const char *name, int64_t d0, int64_t d1) {
    const int64_t shape[2] = {d0, d1};
    return hs_params_declare(p, name, d1 > 0 ? 2 : 1, shape, decays(name));
}

static int declare_layer(hs_params *p, int layer, const char *sub, int64_t d0, int64_t d1) {
    char name[HS_NAME_MAX];
    snprintf(name, sizeof name, "bert.encoder.layer.%d.%s", layer, sub);
    return declare(p, name, d0, d1);
}

hs_bert *hs_bert_create(hs_params *params, const hs_bert_config *cfg, int max_batch, int max_seq_len, int max_pred) {
    if (max_batch < 1 || max_seq_len < 1 || max_pred < 0)
        HS_FATAL(NULL, "hs_bert_create: max_batch %d, max_seq_len %d, max_pred %d", max_batch, max_seq_len, max_pred);
    if (max_seq_len > cfg->max_position_embeddings)
        HS_FATAL(NULL, "hs_bert_create: sequences of %d tokens need max_position_embeddings >= %d (have %d)",
                 max_seq_len, max_seq_len, cfg->max_position_embeddings);
    hs_bert *m;
    HS_ALLOC(m, 1);
    m->params = params;
    m->cfg = *cfg;
    m->max_batch = max_batch;
    m->max_seq = max_seq_len;
    m->max_pred = max_pred;
    const int64_t V = cfg->padded_vocab_size, H = cfg->hidden_size, I = cfg->intermediate_size;

    m->word = declare(params, "bert.embeddings.word_embeddings.weight", V, H);
    m->position = declare(params, "bert.embeddings.position_embeddings.weight", cfg->max_position_embeddings, H);
    m->token_type = declare(params, "bert.embeddings.token_type_embeddings.weight", cfg->type_vocab_size, H);
    m->emb_ln_g = declare(params, "bert.embeddings.LayerNorm.weight", H, 0);
    m->emb_ln_b = declare(params, "bert.embeddings.LayerNorm.bias", H, 0);
    HS_ALLOC(m->lp, cfg->num_hidden_layers);
    for (int i = 0; i < cfg->num_hidden_layers; i++) {
        bert_layer_params *l = &m->lp[i];
        /* query, key, value weights adjacent (H·H floats each, a multiple of the table's alignment when
         * H is a multiple of 4): the attention runs the three projections as one [3H,H] GEMM. */
        l->query_w = declare_layer(params, i, "attention.self.query.weight", H, H);
        l->key_w = declare_layer(params, i, "attention.self.key.weight", H, H);
        l->value_w = declare_layer(params, i, "attention.self.value.weight", H, H);
        l->query_b = declare_layer(params, i, "attention.self.query.bias", H, 0);
        l->key_b = declare_layer(params, i, "attention.self.key.bias", H, 0);
        l->value_b = declare_layer(params, i, "attention.self.value.bias", H, 0);
        l->attn_out_w = declare_layer(params, i, "attention.output.dense.weight", H, H);
        l->attn_out_b = declare_layer(params, i, "attention.output.dense.bias", H, 0);
        l->attn_ln_g = declare_layer(params, i, "attention.output.LayerNorm.weight", H, 0);
        l->attn_ln_b = declare_layer(params, i, "attention.output.LayerNorm.bias", H, 0);
        l->inter_w = declare_layer(params, i, "intermediate.dense_act.weight", I, H);
        l->inter_b = declare_layer(params, i, "intermediate.dense_act.bias", I, 0);
        l->out_w = declare_layer(params, i, "output.dense.weight", H, I);
        l->out_b = declare_layer(params, i, "output.dense.bias", H, 0);
        l->out_ln_g = declare_layer(params, i, "output.LayerNorm.weight", H, 0);
        l->out_ln_b = declare_layer(params, i, "output.LayerNorm.bias", H, 0);
    }
    m->pool_w = declare(params, "bert.pooler.dense_act.weight", H, H);
    m->pool_b = declare(params, "bert.pooler.dense_act.bias", H, 0);
    m->mlm_bias = declare(params, "cls.predictions.bias", V, 0);
    m->transform_w = declare(params, "cls.predictions.transform.dense_act.weight", H, H);
    m->transform_b = declare(params, "cls.predictions.transform.dense_act.bias", H, 0);
    m->transform_ln_g = declare(params, "cls.predictions.transform.LayerNorm.weight", H, 0);
    m->transform_ln_b = declare(params, "cls.predictions.transform.LayerNorm.bias", H, 0);
    m->nsp_w = declare(params, "cls.seq_relationship.weight", 2, H);
    m->nsp_b = declare(params, "cls.seq_relationship.bias", 2, 0);
    return m;
}

static float *alloc_floats(const hs_backend *be, size_t n) { return be->alloc(be, (n ? n : 1) * sizeof(float)); }

/* Activation buffers of n floats / n 16-bit values, counted in activation_bytes. */
static float *alloc_act(hs_bert *m, size_t n) { return hs_act_floats(m->be, &m->activation_bytes, n); }
static uint16_t *alloc_half(hs_bert *m, size_t n) { return hs_act_halves(m->be, &m->activation_bytes, n); }

/* Which backward stage writes which gradient (the writers of heads_backward, layer_backward and
 * embeddings_backward), once. */
static void grads_ready_plan(hs_bert *m) {
    hs_grads_ready *g = &m->ready;
    hs_grads_ready_init(g, m->params, stage_embeddings(m) + 1);
    const int heads[] = {m->word, m->mlm_bias, m->transform_ln_g, m->transform_ln_b, m->transform_w,
                         m->transform_b, m->nsp_w, m->nsp_b, m->pool_w, m->pool_b};
    for (size_t k = 0; k < sizeof heads / sizeof heads[0]; k++) hs_grads_ready_writes(g, heads[k], STAGE_HEADS);
    for (int i = 0; i < m->cfg.num_hidden_layers; i++) {
        const bert_layer_params *l = &m->lp[i];
        const int ffn[] = {l->out_ln_g, l->out_ln_b, l->out_w, l->out_b, l->inter_w, l->inter_b};
        const int attention[] = {l->attn_ln_g, l->attn_ln_b, l->attn_out_w, l->attn_out_b, l->query_w, l->query_b,
                                 l->key_w,     l->key_b,     l->value_w,    l->value_b};
        for (size_t k = 0; k < sizeof ffn / sizeof ffn[0]; k++) hs_grads_ready_writes(g, ffn[k], stage_ffn(m, i));
        for (size_t k = 0; k < sizeof attention / sizeof attention[0]; k++)
            hs_grads_ready_writes(g, attention[k], stage_attention(m, i));
    }
    const int embeddings[] = {m->word, m->position, m->token_type, m->emb_ln_g, m->emb_ln_b};
    for (size_t k = 0; k < sizeof embeddings / sizeof embeddings[0]; k++)
        hs_grads_ready_writes(g, embeddings[k], stage_embeddings(m));
    hs_grads_ready_build(g, m->params);
}

/* The gradients an update's first micro-batch writes whole (hs_params_grad_written): every linear layer's
 * weight and bias, whose weight-gradient product is their first writer (the tied decoder's is the word
 * embeddings' first writer: embeddings_backward adds to it; heads_backward zeroes the MLM head's four
 * when a micro-batch has no masked position). The LayerNorms' and the position and token-type
 * embeddings' gradients are added to, and zeroed each update. */
static void grads_written_plan(hs_bert *m) {
    const int heads[] = {m->word, m->mlm_bias, m->transform_w, m->transform_b, m->nsp_w, m->nsp_b, m->pool_w,
                         m->pool_b};
    for (size_t k = 0; k < sizeof heads / sizeof heads[0]; k++) hs_params_grad_written(m->params, heads[k]);
    for (int i = 0; i < m->cfg.num_hidden_layers; i++) {
        const bert_layer_params *l = &m->lp[i];
        const int linear[] = {l->out_w,   l->out_b,   l->inter_w, l->inter_b, l->attn_out_w, l->attn_out_b,
                              l->query_w, l->query_b, l->key_w,   l->key_b,   l->value_w,    l->value_b};
        for (size_t k = 0; k < sizeof linear / sizeof linear[0]; k++) hs_params_grad_written(m->params, linear[k]);
    }
}

/* ---- the input buffer list ---------------------------------------------------------------------------- */

enum { IN_IDS, IN_SEGMENTS, IN_MASK, IN_NSP, IN_CLS, IN_MLM_ROWS, IN_MLM_LABELS, N_INPUTS };

/* The device buffers of `in` in list order, and the int32 elements each holds for B sequences of T
 * tokens in all with n labelled tokens. */
static void input_list(bert_input_bufs *in, int32_t **dev[N_INPUTS]) {
    int32_t **list[N_INPUTS] = {&in->ids,      &in->segments, &in->input_mask, &in->nsp_labels,
                                &in->cls_rows, &in->mlm_rows, &in->mlm_labels};
    for (int i = 0; i < N_INPUTS; i++) dev[i] = list[i];
}
static void input_counts(size_t B, size_t T, size_t n, size_t count[N_INPUTS]) {
    const size_t c[N_INPUTS] = {T, T, T, B, B, n, n};
    for (int i = 0; i < N_INPUTS; i++) count[i] = c[i];
}

/* Buffers for the largest micro-batch the model was sized for. */
static void inputs_alloc(const hs_bert *m, bert_input_bufs *in) {
    const hs_backend *be = m->be;
    const size_t B = (size_t)m->max_batch, T = B * (size_t)m->max_seq, NP = B * (size_t)m->max_pred;
    const size_t np = NP ? NP : 1;
    int32_t **dev[N_INPUTS];
    size_t count[N_INPUTS];
    input_list(in, dev);
    input_counts(B, T, np, count);
    for (int i = 0; i < N_INPUTS; i++) *dev[i] = be->alloc(be, count[i] * sizeof(int32_t));
    in->cls_host = be->host_alloc(be, B * sizeof(int32_t));
    in->rows_host = be->host_alloc(be, np * sizeof(int32_t));
    in->labels_host = be->host_alloc(be, np * sizeof(int32_t));
}

static void inputs_free(const hs_backend *be, bert_input_bufs *in) {
    int32_t **dev[N_INPUTS];
    input_list(in, dev);
    for (int i = 0; i < N_INPUTS; i++)
        if (*dev[i]) be->free(be, *dev[i]);
    be->host_free(be, in->cls_host);
    be->host_free(be, in->rows_host);
    be->host_free(be, in->labels_host);
}

void hs_bert_setup(hs_bert *m) {
    const hs_backend *be = m->params->be;
    if (!be) HS_FATAL(NULL, "hs_bert_setup before hs_params_allocate");
    m->be = be;
    const int N = m->cfg.num_hidden_layers;
    const size_t B = (size_t)m->max_batch, T = B * (size_t)m->max_seq, NP = B * (size_t)m->max_pred;
    const size_t H = (size_t)m->cfg.hidden_size, I = (size_t)m->cfg.intermediate_size;
    const size_t V = (size_t)m->cfg.padded_vocab_size, heads = (size_t)m->cfg.num_attention_heads;
    const size_t LL = (size_t)m->max_seq * (size_t)m->max_seq;

    inputs_alloc(m, &m->in);
    m->mask_bias = alloc_floats(be, T);

    m->activation_bytes = 0;
    m->emb_sum = alloc_act(m, T * H);
    m->emb_mean = alloc_act(m, T);
    m->emb_rstd = alloc_act(m, T);
    HS_ALLOC(m->hidden, N + 1);
    const int half = hs_activations_16bit(be);
    /* 16-bit storage keeps every layer's input as its 16-bit copy (half[i].input, which the backward
     * widens again): two fp32 buffers in turn hold hidden[0..N] (layer i reads one, writes the other) */
    for (int i = 0; i <= N; i++) m->hidden[i] = half && i >= 2 ? m->hidden[i % 2] : alloc_act(m, T * H);
    HS_ALLOC(m->acts, N);
    if (half) HS_ALLOC(m->half, N);
    m->only16 = half && be->products_read_twins;
    /* attention = auto takes the fused op where the backend's kernels take the head size (CUDA: head_dim
     * <= 128, kernels/flash_attention.cu); "fused" asks for it anyway (and a larger head stops there) */
    const int head_dim = m->cfg.hidden_size / m->cfg.num_attention_heads;
    const int fused = m->fused_attention =
        hs_attention_fused(be, m->cfg.attention) &&
        (strcmp(m->cfg.attention, "fused") == 0 || be->memory_is_host || head_dim <= 128);
    for (int i = 0; i < N; i++) {
        bert_layer_acts *a = &m->acts[i];
        /* the tensors kept in 16 bits: fp32 storage gives every layer its own; 16-bit storage
         * allocates them once (layer 0) as the working set every layer shares (same order as fp32) */
        const bert_layer_acts *w = half && i > 0 ? &m->acts[0] : NULL;
        a->qkv = w ? w->qkv : alloc_act(m, T * 3 * H);
        a->probs = fused ? NULL : w ? w->probs : alloc_act(m, B * heads * LL);
        a->lse = fused ? alloc_act(m, B * heads * (size_t)m->max_seq) : NULL; /* per layer, fp32 */
        a->ctx = w ? w->ctx : alloc_act(m, T * H);
        a->attn_sum = alloc_act(m, T * H);
        a->attn_mean = alloc_act(m, T);
        a->attn_rstd = alloc_act(m, T);
        a->attn_out = w ? w->attn_out : alloc_act(m, T * H);
        a->ffn_pre = w ? w->ffn_pre : alloc_act(m, T * I);
        a->ffn_act = w ? w->ffn_act : alloc_act(m, T * I);
        a->ffn_sum = alloc_act(m, T * H);
        a->ffn_mean = alloc_act(m, T);
        a->ffn_rstd = alloc_act(m, T);
        if (half) {
            bert_layer_half *h = &m->half[i];
            h->qkv = alloc_half(m, T * 3 * H);
            h->probs = fused ? NULL : alloc_half(m, B * heads * LL);
            h->ctx = alloc_half(m, T * H);
            h->ffn_pre = alloc_half(m, T * I);
            h->input = alloc_half(m, T * H);
            h->attn_out = alloc_half(m, T * H);
        }
    }
    if (half) {
        m->grad16_h = alloc_half(m, T * H);
        m->grad16_ffn = alloc_half(m, T * I);
        /* dqkv's twin is written after the FFN's is read (the layer's backward order) */
        m->grad16_qkv = I >= 3 * H ? m->grad16_ffn : alloc_half(m, T * 3 * H);
        if (m->only16) m->sub16 = alloc_half(m, T * H);
        if (m->only16 && fused) {
            m->grad16_ctx_owned = I < 4 * H;
            m->grad16_ctx = m->grad16_ctx_owned ? alloc_half(m, T * H) : m->grad16_ffn + T * 3 * H;
        }
        m->ffn_act16 = alloc_half(m, T * I);
    }
    m->pool_in = alloc_act(m, B * H);
    m->pool_out = alloc_act(m, B * H);
    m->nsp_logits = alloc_act(m, B * 2);
    m->mlm_in = alloc_act(m, NP * H);
    m->mlm_pre = alloc_act(m, NP * H);
    m->mlm_act = alloc_act(m, NP * H);
    m->mlm_mean = alloc_act(m, NP);
    m->mlm_rstd = alloc_act(m, NP);
    m->mlm_out = alloc_act(m, NP * H);
    m->mlm_logits = alloc_act(m, NP * V);

    m->grad_h = alloc_floats(be, T * H);
    m->grad_tmp = alloc_floats(be, T * H);
    m->grad_ctx = alloc_floats(be, T * H);
    m->grad_pool = alloc_floats(be, B * H);
    m->grad_pool_in = alloc_floats(be, B * H);
    m->grad_mlm_out = alloc_floats(be, NP * H);
    m->grad_mlm_in = alloc_floats(be, NP * H);
    hs_workspace_reserve(be, &m->ws, T * (I > 3 * H ? I : 3 * H) * sizeof(float));
    grads_ready_plan(m);
    grads_written_plan(m);
}

size_t hs_bert_activation_bytes(const hs_bert *m) { return m->activation_bytes; }

int hs_bert_attention_fused(const hs_bert *m) { return m->fused_attention; }

int hs_bert_activations_16bit(const hs_bert *m) { return m->half != NULL; }

/* ---- initialisation --------------------------------------------------------------------------------- */

/* Normal draws of nn/init.c (mean -0.0: exactly N(0, std²), see hs_init_normal_host) */
static void fill_normal(hs_params *p, int index, double std, uint64_t seed) {
    hs_init_normal(p, index, -0.0, std, seed);
}

static void fill_constant(hs_params *p, int index, float value) { hs_init_constant(p, index, value); }

static void fill_layernorm(hs_params *p, int gamma, int beta) {
    fill_constant(p, gamma, 1.0f);
    fill_constant(p, beta, 0.0f);
}

/* nn.Linear under init_bert_weights: weight N(0, range), bias 0 */
static void fill_linear(hs_params *p, int weight, int bias, double range, uint64_t seed) {
    fill_normal(p, weight, range, seed);
    fill_constant(p, bias, 0.0f);
}

void hs_bert_init_params(hs_bert *m, uint64_t seed) {
    hs_params *p = m->params;
    if (!p->data) HS_FATAL(NULL, "initialise parameters after hs_params_allocate");
    const double range = m->cfg.initializer_range;
    fill_normal(p, m->word, range, seed);
    fill_normal(p, m->position, range, seed);
    fill_normal(p, m->token_type, range, seed);
    fill_layernorm(p, m->emb_ln_g, m->emb_ln_b);
    for (int i = 0; i < m->cfg.num_hidden_layers; i++) {
        const bert_layer_params *l = &m->lp[i];
        fill_linear(p, l->query_w, l->query_b, range, seed);
        fill_linear(p, l->key_w, l->key_b, range, seed);
        fill_linear(p, l->value_w, l->value_b, range, seed);
        fill_linear(p, l->attn_out_w, l->attn_out_b, range, seed);
        fill_layernorm(p, l->attn_ln_g, l->attn_ln_b);
        /* LinearActivation keeps PyTorch's default init; NVIDIA's encoder deep-copies one layer, so
         * every layer's intermediate.dense_act starts as layer 0's. */
        if (i == 0) {
            hs_init_fan_in_uniform(p, l->inter_w, l->inter_b, seed);
        } else {
            p->be->copy(p->be, hs_param_data(p, l->inter_w), hs_param_data(p, m->lp[0].inter_w),
                        p->tensors[l->inter_w].numel * sizeof(float));
            p->be->copy(p->be, hs_param_data(p, l->inter_b), hs_param_data(p, m->lp[0].inter_b),
                        p->tensors[l->inter_b].numel * sizeof(float));
        }
        fill_linear(p, l->out_w, l->out_b, range, seed);
        fill_layernorm(p, l->out_ln_g, l->out_ln_b);
    }
    hs_init_fan_in_uniform(p, m->pool_w, m->pool_b, seed);
    fill_constant(p, m->mlm_bias, 0.0f);
    hs_init_fan_in_uniform(p, m->transform_w, m->transform_b, seed);
    fill_layernorm(p, m->transform_ln_g, m->transform_ln_b);
    fill_linear(p, m->nsp_w, m->nsp_b, range, seed);
}

/* ---- inputs ------------------------------------------------------------------------------------------ */

/* Every value of v[n] in [0, limit), or the run ends naming it: the device ops index with these values
 * and never check them (a GPU kernel cannot stop the run). */
static void check_range(const int32_t *v, size_t n, int per_row, int32_t limit, const char *what, const char *fix) {
    for (size_t i = 0; i < n; i++)
        if (v[i] < 0 || v[i] >= limit)
            hs_die("%s %d (row %zu of the micro-batch, column %zu) is outside [0, %d): %s", what, (int)v[i],
                   i / (size_t)per_row, i % (size_t)per_row, (int)limit, fix);
}

/* The MLM head's row count for a micro-batch of B sequences with n labelled tokens (at most P each):
 * n itself, or on a backend that records graph regions (be->graph_begin: CUDA) B·P, the most the
 * micro-batch can hold. The labelled-token count changes from micro-batch to micro-batch; it sets the
 * MLM head's GEMM rows, the loss kernels' grids and the scratch they take, so a region holding it would
 * have another signature every update and never replay (docs/gpu.md, "CUDA graphs"). Padded to B·P, the
 * shapes depend on the micro-batch's size alone. The padding rows gather row 0 (the first [CLS] token,
 * any valid row) and carry label -1, which the loss ignores: 0 added to every loss sum (the count and
 * correct sums read the labels on the device), dlogits 0, so they add exact zeros to every gradient.
 * The loss normalisation (1/labelled tokens of the update) is a slot of softmax_xent_backward. The CPU
 * keeps n rows: its bits stay those of the PyTorch cross-checks. */
static int mlm_rows_for(const hs_bert *m, int B, int P, int n) {
    return m->be->graph_begin && P > 0 ? B * P : n;
}

/* The checks of a host micro-batch, then its derived host arrays: cls[B] = b·L, rows[n] = b·L + position
 * of each labelled token in batch order, labels[n] its id, and rows/labels [n, mlm_rows_for) the
 * padding (row 0, label -1). Returns n. */
static int check_and_derive(const hs_bert *m, const hs_bert_batch *b, int32_t *cls, int32_t *rows, int32_t *labels) {
    const int B = b->count, L = b->seq_len, P = b->max_pred;
    if (B < 1 || B > m->max_batch || L < 1 || L > m->max_seq || P > m->max_pred)
        HS_FATAL(NULL, "BERT micro-batch of %d x %d tokens, %d predictions; model sized for %d x %d, %d", B, L, P,
                 m->max_batch, m->max_seq, m->max_pred);
    const size_t T = (size_t)B * (size_t)L;
    const char *vocab_fix = "the data does not match the model's vocabulary; check model.vocab_size against the dataset";
    check_range(b->input_ids, T, L, m->cfg.padded_vocab_size, "token id", vocab_fix);
    check_range(b->segment_ids, T, L, m->cfg.type_vocab_size, "segment id",
                "the data has more segments than model.type_vocab_size");
    check_range(b->nsp_labels, (size_t)B, 1, 2, "next-sentence label", "NSP labels are 0 or 1");
    int n = 0;
    for (int s = 0; s < B; s++) {
        cls[s] = s * L;
        if (b->num_mlm[s] < 0 || b->num_mlm[s] > P)
            HS_FATAL(NULL, "row %d of the micro-batch has %d labelled positions (max %d)", s, b->num_mlm[s], P);
        for (int k = 0; k < b->num_mlm[s]; k++) {
            const int32_t pos = b->mlm_positions[(size_t)s * (size_t)P + (size_t)k];
            if (pos < 0 || pos >= L) HS_FATAL(NULL, "labelled position %d of row %d is outside [0, %d)", pos, s, L);
            rows[n] = s * L + pos;
            labels[n] = b->mlm_ids[(size_t)s * (size_t)P + (size_t)k];
            n++;
        }
    }
    check_range(labels, (size_t)n, n > 0 ? n : 1, m->cfg.padded_vocab_size, "masked-LM label", vocab_fix);
    for (int k = n; k < mlm_rows_for(m, B, P, n); k++) rows[k] = 0, labels[k] = -1;
    return n;
}

typedef void (*upload_fn)(const hs_backend *be, void *dst, const void *src_host, size_t bytes);

/* The checks of a host micro-batch, its derived host arrays into `in`, then every input uploaded with
 * `upload` (be->upload, or be->upload_async on the copy stream). Returns the labelled-token count;
 * *rows_out the MLM head's row count (mlm_rows_for). */
static int inputs_stage(const hs_bert *m, const hs_bert_batch *b, bert_input_bufs *in, upload_fn upload,
                        int *rows_out) {
    const int n = check_and_derive(m, b, in->cls_host, in->rows_host, in->labels_host);
    const int rows = *rows_out = mlm_rows_for(m, b->count, b->max_pred, n);
    const size_t B = (size_t)b->count, T = B * (size_t)b->seq_len;
    const int32_t *src[N_INPUTS] = {b->input_ids,  b->segment_ids,  b->input_mask,  b->nsp_labels,
                                    in->cls_host,  in->rows_host,   in->labels_host};
    int32_t **dev[N_INPUTS];
    size_t count[N_INPUTS];
    input_list(in, dev);
    input_counts(B, T, (size_t)rows, count);
    for (int i = 0; i < N_INPUTS; i++)
        if (count[i] > 0) upload(m->be, *dev[i], src[i], count[i] * sizeof(int32_t));
    return n;
}

/* The micro-batch whose inputs are in m->in: its sizes (n: the MLM head's rows, padding included), and
 * the attention mask bias built from them. */
static void inputs_taken(hs_bert *m, int B, int L, int n) {
    hs_attention_mask_bias(m->be, m->mask_bias, m->in.input_mask, B, L);
    m->batch = B;
    m->seq_len = L;
    m->mlm_count = n;
}

int hs_bert_stage_batch(hs_bert *m, const hs_bert_batch *b) {
    int rows;
    const int n = inputs_stage(m, b, &m->in, m->be->upload, &rows);
    inputs_taken(m, b->count, b->seq_len, rows);
    return n;
}

/* A staged micro-batch: inputs shaped like the model's own, and its sizes. */
struct hs_bert_inputs {
    int batch, seq_len, mlm_count; /* mlm_count: the MLM head's rows, padding included (mlm_rows_for) */
    bert_input_bufs bufs;
};

hs_bert_inputs *hs_bert_inputs_create(const hs_bert *m) {
    hs_bert_inputs *in;
    HS_ALLOC(in, 1);
    inputs_alloc(m, &in->bufs);
    return in;
}

void hs_bert_inputs_free(const hs_bert *m, hs_bert_inputs *in) {
    if (!in) return;
    inputs_free(m->be, &in->bufs);
    free(in);
}

int hs_bert_stage_batch_async(const hs_bert *m, const hs_bert_batch *b, hs_bert_inputs *in) {
    int rows;
    const int n = inputs_stage(m, b, &in->bufs, m->be->upload_async, &rows);
    in->batch = b->count;
    in->seq_len = b->seq_len;
    in->mlm_count = rows;
    return n;
}

void hs_bert_take_inputs(hs_bert *m, const hs_bert_inputs *in) {
    const hs_backend *be = m->be;
    int32_t **dst[N_INPUTS], **src[N_INPUTS];
    size_t count[N_INPUTS];
    bert_input_bufs staged = in->bufs; /* (a copy: input_list hands out writable pointers) */
    input_list(&m->in, dst);
    input_list(&staged, src);
    input_counts((size_t)in->batch, (size_t)in->batch * (size_t)in->seq_len, (size_t)in->mlm_count, count);
    for (int i = 0; i < N_INPUTS; i++)
        if (count[i] > 0) be->copy(be, *dst[i], *src[i], count[i] * sizeof(int32_t));
    inputs_taken(m, in->batch, in->seq_len, in->mlm_count);
}

/* ---- dropout ------------------------------------------------------------------------------------------ */

static uint64_t layer_site(int layer, int which) {
    return (uint64_t)(DROP_LAYER_BASE + DROP_SITES_PER_LAYER * layer + which);
}

/* The three dropout masks of layer i for this micro-batch: attention probabilities, attention output
 * and FFN output (the forward draws them, the backward recomputes the same ones). */
typedef struct layer_masks {
    hs_dropout_mask probs, attn, ffn;
} layer_masks;

static layer_masks layer_dropout(const hs_bert *m, int i, const hs_step_ctx *ctx, int64_t first_sample) {
    const double p_hidden = m->cfg.hidden_dropout_prob;
    return (layer_masks){
        .probs = hs_dropout_site_mask(ctx, first_sample, layer_site(i, DROP_ATTENTION_PROBS),
                                      m->cfg.attention_probs_dropout_prob),
        .attn = hs_dropout_site_mask(ctx, first_sample, layer_site(i, DROP_ATTENTION_OUTPUT), p_hidden),
        .ffn = hs_dropout_site_mask(ctx, first_sample, layer_site(i, DROP_FFN_OUTPUT), p_hidden)};
}

/* A layer's LayerNorm backward and the dropout before it: grad_h[T,H] (in place) = ∂/∂(the LayerNorm's
 * input), the residual's gradient; returns the sublayer output's gradient, the dropout backward of it
 * (into grad_tmp, one op with the LayerNorm's), or grad_h itself when the dropout is off. With 16-bit
 * storage the result's rounding goes to grad16_h (written by the same op, or converted when the dropout is
 * off) and is bound as its twin: the two products that read it (data and weight gradient) then convert
 * nothing. The caller unbinds it (be->unbind_half) after them. */
static const float *layernorm_dropout_grad(hs_bert *m, const hs_dropout_mask *mask, float *dgamma, float *dbeta,
                                           const float *x, const float *mean, const float *rstd, const float *gamma) {
    const hs_backend *be = m->be;
    const int B = m->batch, T = B * m->seq_len, H = m->cfg.hidden_size;
    const size_t per_sample = (size_t)m->seq_len * (size_t)H, n = (size_t)T * (size_t)H;
    if (mask->p <= 0.0f) {
        hs_layernorm_backward(be, m->grad_h, dgamma, dbeta, m->grad_h, x, mean, rstd, gamma, T, H);
        if (m->grad16_h) {
            be->to_half(be, m->grad16_h, m->grad_h, n);
            be->bind_half(be, m->grad_h, m->grad16_h, n);
        }
        return m->grad_h;
    }
    /* the 16-bit dataflow: the sublayer output's gradient in 16 bits only (its readers are the products) */
    hs_layernorm_dropout_backward(be, mask, m->grad_h, m->only16 ? NULL : m->grad_tmp, dgamma, dbeta, m->grad_h, x,
                                  mean, rstd, gamma, T, H, B, per_sample, m->grad16_h);
    if (m->grad16_h) hs_bind_twin(be, m->grad_tmp, m->grad16_h, n, m->only16);
    return m->grad_tmp;
}

/* ---- forward ------------------------------------------------------------------------------------------ */

static hs_attention_dims attention_dims(const hs_bert *m) {
    return (hs_attention_dims){.batch = m->batch, .seq_len = m->seq_len, .hidden = m->cfg.hidden_size,
                               .heads = m->cfg.num_attention_heads};
}

static hs_attention_params attention_params(const hs_bert *m, const bert_layer_params *l) {
    const hs_params *p = m->params;
    return (hs_attention_params){.query_w = hs_param_data(p, l->query_w), .query_b = hs_param_data(p, l->query_b),
                                 .key_w = hs_param_data(p, l->key_w), .key_b = hs_param_data(p, l->key_b),
                                 .value_w = hs_param_data(p, l->value_w), .value_b = hs_param_data(p, l->value_b)};
}

/* h[T,H] = dropout(LayerNorm(word[ids] + position[0:L] + token_type[segments])) */
static void embeddings_forward(hs_bert *m, const hs_dropout_mask *drop) {
    const hs_backend *be = m->be;
    const hs_params *p = m->params;
    const int B = m->batch, L = m->seq_len, T = B * L, H = m->cfg.hidden_size;
    hs_embedding_forward(be, m->emb_sum, hs_param_data(p, m->word), m->in.ids, T, H, m->cfg.padded_vocab_size, 0);
    hs_position_embedding_forward(be, m->emb_sum, hs_param_data(p, m->position), B, L, H);
    hs_embedding_forward(be, m->emb_sum, hs_param_data(p, m->token_type), m->in.segments, T, H, m->cfg.type_vocab_size, 1);
    hs_layernorm_forward(be, m->hidden[0], m->emb_mean, m->emb_rstd, m->emb_sum, hs_param_data(p, m->emb_ln_g),
                         hs_param_data(p, m->emb_ln_b), T, H, HS_BERT_LAYERNORM_EPS);
    hs_dropout_forward(be, drop, m->hidden[0], m->hidden[0], B, (size_t)L * (size_t)H);
    if (m->half) { /* layer 0's input in 16 bits: its q|k|v product's operand, forward and backward */
        be->to_half(be, m->half[0].input, m->hidden[0], (size_t)T * (size_t)H);
        be->bind_half(be, m->hidden[0], m->half[0].input, (size_t)T * (size_t)H);
    }
}

/* g[rows,out] = gelu(u), u = x[rows,in]·wᵀ + bias kept as the pre-activation the backward reads (the
 * intermediate layer under fp32 and tf32, the MLM transform at every precision). Where the GEMM's
 * epilogue adds the bias (CUDA) the GELU reads u and writes g: 8 bytes an element; else the bias-less
 * GEMM and one pass that adds the bias in place and writes g (bias_gelu_forward), where a separate bias
 * pass would cost another read and write. The same values either way: u = product + bias in fp32,
 * g = gelu(u). */
static void bias_gelu_linear(const hs_backend *be, float *g, float *u, const float *x, const float *w,
                             const float *bias, int rows, int in, int out) {
    if (be->gemm_fuses_bias) {
        be->gemm_bias(be, u, out, x, w, bias, rows, in, out);
        hs_gelu_forward(be, g, u, (size_t)rows * (size_t)out);
    } else {
        be->gemm(be, 0, 1, rows, out, in, 1.0f, x, in, w, in, 0.0f, u, out);
        hs_bias_gelu_forward(be, g, u, bias, rows, out, NULL, NULL);
    }
}

/* hidden[i+1] = layer i (hidden[i]):
 *   h1 = LN(dropout(attention(x)·Woᵀ + bo) + x);  out = LN(dropout(gelu(h1·W1ᵀ + b1)·W2ᵀ + b2) + h1) */
static void layer_forward(hs_bert *m, int i, const hs_step_ctx *ctx, int64_t first_sample) {
    const hs_backend *be = m->be;
    const hs_params *p = m->params;
    const bert_layer_params *l = &m->lp[i];
    bert_layer_acts *a = &m->acts[i];
    const int B = m->batch, L = m->seq_len, T = B * L, H = m->cfg.hidden_size, I = m->cfg.intermediate_size;
    const size_t per_sample = (size_t)L * (size_t)H;
    const layer_masks drop = layer_dropout(m, i, ctx, first_sample);
    const float *x = m->hidden[i];

    const hs_attention_dims dims = attention_dims(m);
    const hs_attention_params w = attention_params(m, l);
    /* 16-bit storage: x (hidden[i]) is bound to its twin h->input, written with it by the op that made
     * it (embeddings_forward or the previous layer): the q|k|v product reads it, no conversion */
    bert_layer_half *h = m->half ? &m->half[i] : NULL;
    const size_t TH = (size_t)T * (size_t)H, TI = (size_t)T * (size_t)I;
    /* the context's 16-bit copy, written by the attention with it: kept for the backward pass, and
     * attention.output.dense's operand */
    /* training under the fused attention: q|k|v's 16-bit copy for the backward pass, written by the
     * attention as it reads q|k|v (layer_store_half converts nothing then) */
    const hs_attention_saved saved = {.qkv = a->qkv, .probs = a->probs, .lse = a->lse, .ctx = a->ctx,
                                      .mask_bias = m->mask_bias, .ctx16 = h ? h->ctx : NULL,
                                      .qkv16_out = h && m->fused_attention ? h->qkv : NULL};
    /* the 16-bit dataflow under the fused attention: the context only in 16 bits (the output product
     * reads it, and the backward's row dot products, from there) */
    const int ctx_only16 = m->only16 && m->fused_attention;
    hs_attention_forward(be, &dims, &w, m->mask_bias, &drop.probs, x, &saved, ctx_only16 ? NULL : a->ctx);
    if (h) hs_bind_twin(be, a->ctx, h->ctx, TH, ctx_only16);
    /* the sublayer outputs: 16-bit linear layers under bf16/fp16, under the 16-bit dataflow in 16 bits only
     * (sub16), which the LayerNorm with dropout and the residual reads and writes its sum over */
    hs_linear_forward_rounded(be, m->sub16, a->attn_sum, a->ctx, hs_param_data(p, l->attn_out_w),
                              hs_param_data(p, l->attn_out_b), T, H, H);
    hs_dropout_add_layernorm_forward(be, &drop.attn, a->attn_out, a->attn_sum, a->attn_mean, a->attn_rstd, a->attn_sum,
                                     x, hs_param_data(p, l->attn_ln_g), hs_param_data(p, l->attn_ln_b), T, H,
                                     HS_BERT_LAYERNORM_EPS, B, per_sample, h ? h->attn_out : NULL);
    if (m->sub16) be->unbind_half(be, a->attn_sum); /* the LayerNorm wrote x_sum there */
    if (h) be->bind_half(be, a->attn_out, h->attn_out, TH);
    if (hs_precision_is_16bit(be->precision)) {
        /* the 16-bit linear layer: u[T,I] = round(h1·W1ᵀ + round(b1)) (gemm_bias_half), the pre-activation
         * the GELU reads forward and backward; under 16-bit storage in 16 bits only (ffn_pre is scratch),
         * the GELU output then in 16 bits only under the 16-bit dataflow (the output product's operand) */
        be->gemm_bias_half(be, h ? h->ffn_pre : NULL, a->ffn_pre, a->attn_out, hs_param_data(p, l->inter_w),
                           hs_param_data(p, l->inter_b), T, H, I);
        if (h)
            be->gelu_forward_half(be, m->only16 ? NULL : a->ffn_act, h->ffn_pre, TI, m->ffn_act16);
        else
            be->gelu_forward(be, a->ffn_act, a->ffn_pre, TI);
    } else {
        bias_gelu_linear(be, a->ffn_act, a->ffn_pre, a->attn_out, hs_param_data(p, l->inter_w),
                         hs_param_data(p, l->inter_b), T, H, I);
    }
    if (h) hs_bind_twin(be, a->ffn_act, m->ffn_act16, TI, m->only16);
    hs_linear_forward_rounded(be, m->sub16, a->ffn_sum, a->ffn_act, hs_param_data(p, l->out_w),
                              hs_param_data(p, l->out_b), T, I, H);
    const int last = i + 1 == m->cfg.num_hidden_layers;
    hs_dropout_add_layernorm_forward(be, &drop.ffn, m->hidden[i + 1], a->ffn_sum, a->ffn_mean, a->ffn_rstd, a->ffn_sum,
                                     a->attn_out, hs_param_data(p, l->out_ln_g), hs_param_data(p, l->out_ln_b), T, H,
                                     HS_BERT_LAYERNORM_EPS, B, per_sample, h && !last ? m->half[i + 1].input : NULL);
    if (m->sub16) be->unbind_half(be, a->ffn_sum);
    if (h) { /* the working set is the next layer's: no binding outlives the layer (backward binds again) */
        be->unbind_half(be, a->ctx);
        be->unbind_half(be, a->attn_out);
        be->unbind_half(be, a->ffn_act);
        be->unbind_half(be, x);
        if (!last) be->bind_half(be, m->hidden[i + 1], m->half[i + 1].input, TH);
    }
}

/* 16-bit storage: the tensors a layer keeps in 16 bits, in HS_BERT_SAVED_* order (all but the GELU
 * output, whose count is 0 under 16-bit storage: it is recomputed), each working
 * tensor (fp32), its 16-bit copy (NULL without 16-bit storage) and its element count for the staged
 * micro-batch. */
enum { N_SAVED = HS_BERT_SAVED_ATTN_OUT + 1 };

static void layer_saved(const hs_bert *m, int i, hs_act16 t[N_SAVED]) {
    const size_t B = (size_t)m->batch, L = (size_t)m->seq_len, T = B * L, H = (size_t)m->cfg.hidden_size;
    const size_t ffn = T * (size_t)m->cfg.intermediate_size;
    const bert_layer_acts *a = &m->acts[i];
    const bert_layer_half *h = m->half ? &m->half[i] : NULL;
    t[HS_BERT_SAVED_QKV] = (hs_act16){a->qkv, h ? h->qkv : NULL, T * 3 * H};
    const size_t probs = a->probs ? B * (size_t)m->cfg.num_attention_heads * L * L : 0; /* none when fused */
    t[HS_BERT_SAVED_PROBS] = (hs_act16){a->probs, h ? h->probs : NULL, probs};
    t[HS_BERT_SAVED_CTX] = (hs_act16){a->ctx, h ? h->ctx : NULL, T * H};
    t[HS_BERT_SAVED_FFN_PRE] = (hs_act16){a->ffn_pre, h ? h->ffn_pre : NULL, ffn};
    /* 16-bit storage keeps no GELU output: the backward recomputes it (gelu_backward's y) */
    t[HS_BERT_SAVED_FFN_ACT] = (hs_act16){a->ffn_act, NULL, h ? 0 : ffn};
    t[HS_BERT_SAVED_INPUT] = (hs_act16){m->hidden[i], h ? h->input : NULL, T * H};
    t[HS_BERT_SAVED_ATTN_OUT] = (hs_act16){a->attn_out, h ? h->attn_out : NULL, T * H};
}

/* layer_saved, less what no conversion touches either way: the fused attention's q|k|v, whose 16-bit
 * copy its forward writes (qkv16_out) and its backward reads (qkv16) */
static void layer_converted(const hs_bert *m, int i, hs_act16 t[N_SAVED]) {
    layer_saved(m, i, t);
    if (m->fused_attention) t[HS_BERT_SAVED_QKV].count = 0;
}

/* Layer i's working set (fp32) -> its 16-bit copies (rounded): q|k|v and the probabilities of the unfused
 * attention; layer_forward had the context's written by the attention, the FFN pre-activation's by
 * gemm_bias_half */
static void layer_store_half(hs_bert *m, int i) {
    hs_act16 t[N_SAVED];
    layer_converted(m, i, t);
    hs_act16_store(m->be, t, HS_BERT_SAVED_PROBS + 1);
}

/* Layer i's 16-bit copies -> the working set, widened (exact), before its backward; but for q|k|v under
 * the fused attention, whose backward reads the 16-bit copy itself (hs_attention_saved.qkv16), the FFN
 * pre-activation, which only the GELU backward reads, from its 16-bit copy (gelu_backward's x16), and
 * under the 16-bit dataflow (m->only16) the input, h1 and the context, which only products read (and the
 * fused attention backward, from the context's twin: flash_attention_backward), bound with
 * bind_half_only by layer_backward */
static void layer_load_half(hs_bert *m, int i) {
    hs_act16 t[N_SAVED];
    layer_converted(m, i, t);
    t[HS_BERT_SAVED_FFN_PRE].count = 0;
    if (m->only16) /* read by products only, and the context by the fused attention backward from its twin */
        t[HS_BERT_SAVED_INPUT].count = t[HS_BERT_SAVED_ATTN_OUT].count = t[HS_BERT_SAVED_CTX].count = 0;
    hs_act16_load(m->be, t, N_SAVED);
}

size_t hs_bert_saved_tensor(const hs_bert *m, int layer, int which, float *host) {
    if (layer < 0 || layer >= m->cfg.num_hidden_layers || m->batch < 1)
        HS_FATAL(NULL, "hs_bert_saved_tensor: layer %d of %d, %d sequences staged", layer, m->cfg.num_hidden_layers,
                 m->batch);
    if (which < 0 || which >= N_SAVED) HS_FATAL(NULL, "hs_bert_saved_tensor: unknown tensor %d", which);
    hs_act16 t[N_SAVED];
    layer_saved(m, layer, t);
    const float *f = t[which].f;
    const uint16_t *u = t[which].u;
    const size_t count = t[which].count;
    if (!u) {
        m->be->download(m->be, host, f, count * sizeof(float));
        return count;
    }
    uint16_t *bits;
    HS_ALLOC(bits, count ? count : 1);
    m->be->download(m->be, bits, u, count * sizeof(uint16_t));
    const int bf16 = m->be->precision == HS_PRECISION_BF16;
    for (size_t e = 0; e < count; e++) host[e] = bf16 ? hs_bf16_to_float(bits[e]) : hs_fp16_to_float(bits[e]);
    free(bits);
    return count;
}

/* Pooler, NSP head and the MLM head on the labelled rows; the two softmax cross-entropies add
 * (Σ NLL, labelled rows, correct) into the device stats at HS_BERT_STAT_NSP_LOSS and _MLM_LOSS. */
static void heads_forward(hs_bert *m, double *stats) {
    const hs_backend *be = m->be;
    const hs_params *p = m->params;
    const int B = m->batch, T = B * m->seq_len, H = m->cfg.hidden_size, V = m->cfg.padded_vocab_size;
    const int Np = m->mlm_count;
    const float *h = m->hidden[m->cfg.num_hidden_layers];

    /* pooled[B,H] = tanh(h[:,0]·Wpᵀ + bp); nsp_logits[B,2] */
    hs_gather_rows_forward(be, m->pool_in, h, m->in.cls_rows, B, H, T);
    hs_linear_forward(be, m->pool_out, m->pool_in, hs_param_data(p, m->pool_w), hs_param_data(p, m->pool_b), B, H, H);
    hs_tanh_forward(be, m->pool_out, m->pool_out, (size_t)B * (size_t)H);
    hs_linear_forward(be, m->nsp_logits, m->pool_out, hs_param_data(p, m->nsp_w), hs_param_data(p, m->nsp_b), B, H, 2);
    hs_softmax_xent_forward(be, m->nsp_logits, m->nsp_logits, m->in.nsp_labels, B, 2, stats + HS_BERT_STAT_NSP_LOSS);

    if (Np == 0) return;
    /* t[Np,H] = LN(gelu(h[rows]·Wtᵀ + bt)); logits[Np,V] = t·Wordᵀ + cls.predictions.bias (tied decoder) */
    hs_gather_rows_forward(be, m->mlm_in, h, m->in.mlm_rows, Np, H, T);
    bias_gelu_linear(be, m->mlm_act, m->mlm_pre, m->mlm_in, hs_param_data(p, m->transform_w),
                     hs_param_data(p, m->transform_b), Np, H, H);
    hs_layernorm_forward(be, m->mlm_out, m->mlm_mean, m->mlm_rstd, m->mlm_act, hs_param_data(p, m->transform_ln_g),
                         hs_param_data(p, m->transform_ln_b), Np, H, HS_BERT_LAYERNORM_EPS);
    hs_linear_forward(be, m->mlm_logits, m->mlm_out, hs_param_data(p, m->word), hs_param_data(p, m->mlm_bias), Np, H,
                      V);
    hs_softmax_xent_forward(be, m->mlm_logits, m->mlm_logits, m->in.mlm_labels, Np, V, stats + HS_BERT_STAT_MLM_LOSS);
}

static void forward(hs_bert *m, const hs_step_ctx *ctx, int64_t first_sample, double *stats) {
    const hs_dropout_mask drop_emb =
        hs_dropout_site_mask(ctx, first_sample, DROP_EMBEDDINGS, m->cfg.hidden_dropout_prob);
    embeddings_forward(m, &drop_emb);
    for (int i = 0; i < m->cfg.num_hidden_layers; i++) {
        layer_forward(m, i, ctx, first_sample);
        if (m->half && ctx) layer_store_half(m, i); /* a backward pass follows (evaluation keeps nothing) */
    }
    heads_forward(m, stats);
}

/* ---- backward ----------------------------------------------------------------------------------------- */

/* From the softmax probabilities to grad_h[T,H] = ∂loss/∂hidden[N] (zero except at the [CLS] rows and
 * the labelled rows). */
static void heads_backward(hs_bert *m, const hs_step_ctx *ctx) {
    const hs_backend *be = m->be;
    const hs_params *p = m->params;
    const int B = m->batch, T = B * m->seq_len, H = m->cfg.hidden_size, V = m->cfg.padded_vocab_size;
    const int Np = m->mlm_count;

    be->zero(be, m->grad_h, (size_t)T * (size_t)H * sizeof(float));
    if (Np > 0) {
        /* dlogits = scale_mlm·(softmax - onehot), in place */
        hs_softmax_xent_backward(be, m->mlm_logits, m->mlm_logits, m->in.mlm_labels, Np, V, (float)ctx->loss_scale[0]);
        /* tied decoder: ∂word += dlogitsᵀ·t, ∂cls.predictions.bias += Σ dlogits, dt = dlogits·word */
        hs_linear_backward(be, m->grad_mlm_out, hs_param_grad(p, m->word), hs_param_grad(p, m->mlm_bias), m->mlm_logits,
                           m->mlm_out, hs_param_data(p, m->word), Np, H, V, ctx->grads_zero);
        hs_layernorm_backward(be, m->grad_mlm_out, hs_param_grad(p, m->transform_ln_g),
                              hs_param_grad(p, m->transform_ln_b), m->grad_mlm_out, m->mlm_act, m->mlm_mean,
                              m->mlm_rstd, hs_param_data(p, m->transform_ln_g), Np, H);
        hs_gelu_backward(be, m->grad_mlm_out, m->grad_mlm_out, m->mlm_pre, (size_t)Np * (size_t)H, NULL);
        hs_linear_backward(be, m->grad_mlm_in, hs_param_grad(p, m->transform_w), hs_param_grad(p, m->transform_b),
                           m->grad_mlm_out, m->mlm_in, hs_param_data(p, m->transform_w), Np, H, H, ctx->grads_zero);
        hs_gather_rows_backward(be, m->grad_h, m->grad_mlm_in, m->in.mlm_rows, Np, H, T);
    } else if (ctx->grads_zero) { /* the MLM head's written gradients get no writer (grads_written_plan) */
        const int head[] = {m->word, m->mlm_bias, m->transform_w, m->transform_b};
        for (size_t k = 0; k < sizeof head / sizeof head[0]; k++) hs_params_zero_grad_tensor(p, head[k]);
    }
    hs_softmax_xent_backward(be, m->nsp_logits, m->nsp_logits, m->in.nsp_labels, B, 2, (float)ctx->loss_scale[1]);
    hs_linear_backward(be, m->grad_pool, hs_param_grad(p, m->nsp_w), hs_param_grad(p, m->nsp_b), m->nsp_logits,
                       m->pool_out, hs_param_data(p, m->nsp_w), B, H, 2, ctx->grads_zero);
    hs_tanh_backward(be, m->grad_pool, m->grad_pool, m->pool_out, (size_t)B * (size_t)H);
    hs_linear_backward(be, m->grad_pool_in, hs_param_grad(p, m->pool_w), hs_param_grad(p, m->pool_b), m->grad_pool,
                       m->pool_in, hs_param_data(p, m->pool_w), B, H, H, ctx->grads_zero);
    hs_gather_rows_backward(be, m->grad_h, m->grad_pool_in, m->in.cls_rows, B, H, T);
}

/* grad_h: ∂loss/∂hidden[i+1] in, ∂loss/∂hidden[i] out. */
static void layer_backward(hs_bert *m, int i, const hs_step_ctx *ctx, int64_t first_sample) {
    const hs_backend *be = m->be;
    const hs_params *p = m->params;
    const bert_layer_params *l = &m->lp[i];
    const bert_layer_acts *a = &m->acts[i];
    const int T = m->batch * m->seq_len, H = m->cfg.hidden_size, I = m->cfg.intermediate_size;
    const layer_masks drop = layer_dropout(m, i, ctx, first_sample);
    float *dffn = m->ws.ptr; /* [T,I] */
    const bert_layer_half *h = m->half ? &m->half[i] : NULL;
    const size_t TH = (size_t)T * (size_t)H, TI = (size_t)T * (size_t)I;
    if (h) { /* the working set widened back (exact), and the 16-bit copies bound as the GEMMs' operands;
              * under the 16-bit dataflow what only products read is not widened (layer_load_half) */
        layer_load_half(m, i);
        hs_bind_twin(be, a->ctx, h->ctx, TH, m->only16);
        hs_bind_twin(be, a->attn_out, h->attn_out, TH, m->only16);
        hs_bind_twin(be, m->hidden[i], h->input, TH, m->only16);
    }

    /* second LayerNorm: grad_h = ∂/∂ffn_sum, which is the gradient of both the FFN output (after
     * dropout) and the residual h1 */
    const float *dout = layernorm_dropout_grad(m, &drop.ffn, hs_param_grad(p, l->out_ln_g), hs_param_grad(p, l->out_ln_b),
                                               a->ffn_sum, a->ffn_mean, a->ffn_rstd, hs_param_data(p, l->out_ln_g));
    /* output.dense: dffn[T,I] = dout·W2; under bf16/fp16 rounded to 16 bits (gemm_half_out: the gradient of
     * the GELU output as autocast's matmul writes it), with either storage */
    if (!h) {
        hs_linear_backward(be, NULL, hs_param_grad(p, l->out_w), hs_param_grad(p, l->out_b), dout, a->ffn_act,
                           hs_param_data(p, l->out_w), T, I, H, ctx->grads_zero);
        hs_linear_dx_rounded(be, NULL, dffn, dout, hs_param_data(p, l->out_w), T, I, H);
        hs_gelu_backward(be, dffn, dffn, a->ffn_pre, TI, NULL);
    } else {
        /* 16-bit storage kept no GELU output g: the GELU backward recomputes it from the kept (rounded)
         * pre-activation, read from its 16-bit copy, with its twin, for the weight gradient
         * ∂W2 += doutᵀ·g that follows (the forward's product read round(gelu(u)), this one
         * round(gelu(round(u))): the documented cost of 16 bits per token and column of the FFN width,
         * docs/gpu.md "Mixed precision") */
        /* under the 16-bit dataflow dffn only in 16 bits, in the twin the GELU backward reads it from and
         * overwrites with its own gradient (element by element) */
        hs_linear_dx_rounded(be, m->only16 ? m->grad16_ffn : NULL, dffn, dout, hs_param_data(p, l->out_w), T, I, H);
        hs_gelu_backward_recompute(be, m->only16 ? NULL : dffn, dffn, h->ffn_pre, TI, m->grad16_ffn,
                                   m->only16 ? NULL : a->ffn_act, m->ffn_act16);
        hs_bind_twin(be, a->ffn_act, m->ffn_act16, TI, m->only16);
        be->gemm_wgrad_bgrad(be, hs_param_grad(p, l->out_w), hs_param_grad(p, l->out_b), dout, H, a->ffn_act, T, I,
                             H, ctx->grads_zero);
        be->unbind_half(be, dout);
        hs_bind_twin(be, dffn, m->grad16_ffn, TI, m->only16); /* read by the two products below only */
    }
    /* intermediate.dense_act: ∂b1 += Σ du, ∂W1[I,H] += duᵀ·h1, grad_h += du·W1 (onto the residual path) */
    be->gemm_wgrad_bgrad(be, hs_param_grad(p, l->inter_w), hs_param_grad(p, l->inter_b), dffn, I, a->attn_out, T, H, I,
                         ctx->grads_zero);
    be->gemm(be, 0, 0, T, H, I, 1.0f, dffn, I, hs_param_data(p, l->inter_w), H, 1.0f, m->grad_h, H);
    if (h) be->unbind_half(be, dffn); /* the workspace holds dqkv next */
    hs_grads_ready_after(&m->ready, ctx, stage_ffn(m, i));

    /* first LayerNorm, then attention.output.dense: grad_ctx = dattn·Wo */
    const float *dattn = layernorm_dropout_grad(m, &drop.attn, hs_param_grad(p, l->attn_ln_g),
                                                hs_param_grad(p, l->attn_ln_b), a->attn_sum, a->attn_mean, a->attn_rstd,
                                                hs_param_data(p, l->attn_ln_g));
    /* under bf16/fp16 grad_ctx rounded to 16 bits (gemm_half_out, autocast's matmul), with either storage;
     * under the 16-bit dataflow with the fused attention in 16 bits only: the attention backward reads it
     * from there, its row dot products and its dC tiles */
    hs_linear_backward(be, NULL, hs_param_grad(p, l->attn_out_w), hs_param_grad(p, l->attn_out_b), dattn, a->ctx,
                       hs_param_data(p, l->attn_out_w), T, H, H, ctx->grads_zero);
    hs_linear_dx_rounded(be, m->grad16_ctx, m->grad_ctx, dattn, hs_param_data(p, l->attn_out_w), T, H, H);
    if (h) be->unbind_half(be, dattn);

    /* self-attention: grad_h (the residual's gradient) += ∂/∂x through Q, K, V */
    const hs_attention_dims dims = attention_dims(m);
    const hs_attention_params w = attention_params(m, l);
    const hs_attention_grads g = {.query_w = hs_param_grad(p, l->query_w), .query_b = hs_param_grad(p, l->query_b),
                                  .key_w = hs_param_grad(p, l->key_w), .key_b = hs_param_grad(p, l->key_b),
                                  .value_w = hs_param_grad(p, l->value_w), .value_b = hs_param_grad(p, l->value_b),
                                  .overwrite = ctx->grads_zero, .dqkv16 = m->grad16_qkv};
    /* fused, 16-bit storage: the attention backward reads q|k|v from its 16-bit copy (the working set's
     * q|k|v is the last layer's, not widened: layer_load_half) */
    const hs_attention_saved saved = {.qkv = a->qkv,
                                      .probs = a->probs,
                                      .lse = a->lse,
                                      .ctx = a->ctx,
                                      .mask_bias = m->mask_bias,
                                      .qkv16 = h && m->fused_attention ? h->qkv : NULL};
    hs_attention_backward(be, &dims, &w, &g, &drop.probs, m->hidden[i], &saved, m->grad_ctx, m->grad_h, 1, &m->ws);
    if (m->grad16_ctx) be->unbind_half(be, m->grad_ctx);
    if (h) {
        be->unbind_half(be, a->ctx);
        be->unbind_half(be, a->ffn_act);
        be->unbind_half(be, a->attn_out);
        be->unbind_half(be, m->hidden[i]);
    }
    hs_grads_ready_after(&m->ready, ctx, stage_attention(m, i));
}

/* grad_h = ∂loss/∂hidden[0] -> embedding and LayerNorm gradients */
static void embeddings_backward(hs_bert *m, const hs_dropout_mask *drop) {
    const hs_backend *be = m->be;
    const hs_params *p = m->params;
    const int B = m->batch, L = m->seq_len, T = B * L, H = m->cfg.hidden_size;
    float *d = m->grad_h;
    if (drop->p > 0.0f) {
        hs_dropout_backward(be, drop, m->grad_tmp, m->grad_h, B, (size_t)L * (size_t)H);
        d = m->grad_tmp;
    }
    hs_layernorm_backward(be, d, hs_param_grad(p, m->emb_ln_g), hs_param_grad(p, m->emb_ln_b), d, m->emb_sum,
                          m->emb_mean, m->emb_rstd, hs_param_data(p, m->emb_ln_g), T, H);
    hs_embedding_backward(be, hs_param_grad(p, m->word), d, m->in.ids, T, H, m->cfg.padded_vocab_size);
    hs_position_embedding_backward(be, hs_param_grad(p, m->position), d, B, L, H);
    hs_embedding_backward(be, hs_param_grad(p, m->token_type), d, m->in.segments, T, H, m->cfg.type_vocab_size);
}

void hs_bert_forward_backward(hs_bert *m, int64_t first_sample, const hs_step_ctx *ctx, double *stats) {
    if (m->batch < 1) HS_FATAL(NULL, "hs_bert_forward_backward without a staged micro-batch");
    forward(m, ctx, first_sample, stats);
    heads_backward(m, ctx);
    hs_grads_ready_after(&m->ready, ctx, STAGE_HEADS);
    for (int i = m->cfg.num_hidden_layers - 1; i >= 0; i--) layer_backward(m, i, ctx, first_sample);
    const hs_dropout_mask drop_emb =
        hs_dropout_site_mask(ctx, first_sample, DROP_EMBEDDINGS, m->cfg.hidden_dropout_prob);
    embeddings_backward(m, &drop_emb);
    hs_grads_ready_after(&m->ready, ctx, stage_embeddings(m));
}

void hs_bert_evaluate(hs_bert *m, double *stats) {
    if (m->batch < 1) HS_FATAL(NULL, "hs_bert_evaluate without a staged micro-batch");
    forward(m, NULL, 0, stats);
}

void hs_bert_free(hs_bert *m) {
    if (!m) return;
    const hs_backend *be = m->be;
    if (be) {
        inputs_free(be, &m->in);
        void *bufs[] = {m->mask_bias, m->emb_sum,    m->emb_mean,     m->emb_rstd,  m->pool_in,
                        m->pool_out,  m->nsp_logits, m->mlm_in,     m->mlm_pre,      m->mlm_act,   m->mlm_mean,
                        m->mlm_rstd,  m->mlm_out,   m->mlm_logits, m->grad_h,       m->grad_tmp,  m->grad_ctx,
                        m->grad_pool, m->grad_pool_in, m->grad_mlm_out, m->grad_mlm_in};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i]) be->free(be, bufs[i]);
        for (int i = 0; m->hidden && i <= m->cfg.num_hidden_layers; i++)
            if (!m->half || i < 2) be->free(be, m->hidden[i]); /* 16-bit storage: two buffers in turn */
        for (int i = 0; m->acts && i < m->cfg.num_hidden_layers; i++) {
            bert_layer_acts *a = &m->acts[i];
            float *layer_bufs[] = {a->attn_sum, a->attn_mean, a->attn_rstd, a->ffn_sum, a->ffn_mean, a->ffn_rstd,
                                   a->attn_out, a->qkv,       a->probs,     a->ctx,     a->ffn_pre,  a->ffn_act};
            /* the last six are one working set shared by every layer under 16-bit storage */
            const size_t own = m->half && i > 0 ? 6 : sizeof layer_bufs / sizeof layer_bufs[0];
            for (size_t k = 0; k < own; k++)
                if (layer_bufs[k]) be->free(be, layer_bufs[k]); /* probs is NULL when the attention is fused */
            if (a->lse) be->free(be, a->lse);
            if (m->half) {
                bert_layer_half *h = &m->half[i];
                uint16_t *half_bufs[] = {h->qkv, h->probs, h->ctx, h->ffn_pre, h->input, h->attn_out};
                for (size_t k = 0; k < sizeof half_bufs / sizeof half_bufs[0]; k++)
                    if (half_bufs[k]) be->free(be, half_bufs[k]); /* probs is NULL when the attention is fused */
            }
        }
        if (m->grad16_h) be->free(be, m->grad16_h);
        if (m->grad16_ffn) be->free(be, m->grad16_ffn);
        if (m->grad16_qkv && m->grad16_qkv != m->grad16_ffn) be->free(be, m->grad16_qkv);
        if (m->grad16_ctx_owned) be->free(be, m->grad16_ctx);
        if (m->sub16) be->free(be, m->sub16);
        if (m->ffn_act16) be->free(be, m->ffn_act16);
        hs_workspace_release(be, &m->ws);
    }
    hs_grads_ready_free(&m->ready);
    free(m->hidden);
    free(m->acts);
    free(m->half);
    free(m->lp);
    free(m);
}
