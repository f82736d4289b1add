/* BERT self-attention (BertSelfAttention): Q, K, V projections, scaled dot-product attention with the
 * additive padding mask, attention-probability dropout, merged heads. The projections are GEMMs
 * writing into one token-major qkv[B,L,3H] buffer (q | k | v per token), which the backend's attention
 * op reads per (sample, head) without any split/merge copies; the fused ops (saved->lse set) keep a
 * row statistic instead of the L×L probabilities. The output projection
 * (attention.output.dense) is a plain linear layer the model applies to ctx. */
#include "nn/layers.h"

size_t hs_attention_qkv_floats(const hs_attention_dims *d) {
    return (size_t)d->batch * (size_t)d->seq_len * 3 * (size_t)d->hidden;
}

size_t hs_attention_probs_floats(const hs_attention_dims *d) {
    return (size_t)d->batch * (size_t)d->heads * (size_t)d->seq_len * (size_t)d->seq_len;
}

size_t hs_attention_lse_floats(const hs_attention_dims *d) {
    return (size_t)d->batch * (size_t)d->heads * (size_t)d->seq_len;
}

/* mask_bias[B,L] = (1 - input_mask)·(-10000) */
void hs_attention_mask_bias(const hs_backend *be, float *mask_bias, const int32_t *input_mask, int batch,
                            int seq_len) {
    be->attention_mask_bias(be, mask_bias, input_mask, (size_t)batch * (size_t)seq_len);
}

/* Three [H,H] matrices one after the other form one [3H,H] matrix: one GEMM instead of three. */
static int adjacent(const float *a, const float *b, const float *c, int hidden) {
    const size_t hh = (size_t)hidden * (size_t)hidden;
    return b == a + hh && c == b + hh;
}

/* Three [H] biases one after the other form one [3H] bias. */
static int adjacent_bias(const float *a, const float *b, const float *c, int hidden) {
    return b == a + hidden && c == b + hidden;
}

static float dropout_p(const hs_dropout_mask *drop) { return drop ? drop->p : 0.0f; }

void hs_attention_forward(const hs_backend *be, const hs_attention_dims *d, const hs_attention_params *w,
                          const float *mask_bias, const hs_dropout_mask *drop, const float *x,
                          const hs_attention_saved *saved, float *ctx) {
    const int T = d->batch * d->seq_len, H = d->hidden, ld = 3 * H;
    const float *weights[3] = {w->query_w, w->key_w, w->value_w}, *biases[3] = {w->query_b, w->key_b, w->value_b};
    /* qkv[T,3H] = x[T,H] · [Wq;Wk;Wv]ᵀ + [bq|bk|bv] */
    const int fused_w = adjacent(w->query_w, w->key_w, w->value_w, H);
    const int fused_b = adjacent_bias(biases[0], biases[1], biases[2], H);
    /* Under bf16/fp16, with one [3H,H] matrix and one [3H] bias (the parameter arena's layout when H is a
     * multiple of 16), the projection is the 16-bit linear layer: q|k|v = round(x·Wᵀ + round(b))
     * (gemm_bias_half), in fp32 (widened) or, for the fused attention with its 16-bit copy wanted, in 16
     * bits only (qkv16_out; qkv is then scratch), which the attention reads. Otherwise the fused attention
     * rounds the fp32 q|k|v into qkv16_out as it reads them. */
    const int half_projection = hs_precision_is_16bit(be->precision) && fused_w && fused_b;
    const int qkv_only16 = half_projection && saved->lse && saved->qkv16_out;
    if (half_projection) {
        be->gemm_bias_half(be, qkv_only16 ? saved->qkv16_out : NULL, saved->qkv, x, w->query_w, biases[0], T, H, ld);
    } else if (fused_w && fused_b) {
        be->gemm_bias(be, saved->qkv, ld, x, w->query_w, biases[0], T, H, ld); /* one GEMM, its bias fused */
    } else if (!fused_w) {
        for (int i = 0; i < 3; i++) be->gemm_bias(be, saved->qkv + i * H, ld, x, weights[i], biases[i], T, H, H);
    } else {
        be->gemm(be, 0, 1, T, ld, H, 1.0f, x, H, w->query_w, H, 0.0f, saved->qkv, ld);
        for (int i = 0; i < 3; i++) be->add_bias_strided(be, saved->qkv + i * H, ld, biases[i], T, H);
    }
    if (saved->lse) /* fused: lse[B,heads,L] kept instead of probs[B,heads,L,L] */
        be->flash_attention_forward(be, ctx, saved->lse, saved->qkv, qkv_only16 ? saved->qkv16_out : saved->qkv16,
                                    mask_bias, d->batch, d->seq_len, d->heads, H / d->heads, dropout_p(drop),
                                    drop ? drop->key : 0, drop ? drop->first_sample : 0, saved->ctx16,
                                    qkv_only16 ? NULL : saved->qkv16_out);
    else {
        be->attention_forward(be, ctx, saved->probs, saved->qkv, mask_bias, d->batch, d->seq_len, d->heads,
                              H / d->heads, dropout_p(drop), drop ? drop->key : 0, drop ? drop->first_sample : 0);
        if (saved->ctx16) be->to_half(be, saved->ctx16, ctx, (size_t)T * (size_t)H);
    }
}

void hs_attention_backward(const hs_backend *be, const hs_attention_dims *d, const hs_attention_params *w,
                           const hs_attention_grads *g, const hs_dropout_mask *drop, const float *x,
                           const hs_attention_saved *saved, const float *dctx, float *dx, int accumulate_dx,
                           hs_workspace *ws) {
    const int T = d->batch * d->seq_len, H = d->hidden, ld = 3 * H;
    hs_workspace_reserve(be, ws, hs_attention_qkv_floats(d) * sizeof(float));
    float *dqkv = ws->ptr; /* [T,3H] */
    if (saved->lse) /* fused: P recomputed from lse, the dropout redrawn */
        be->flash_attention_backward(be, dqkv, dctx, saved->qkv, saved->qkv16, saved->mask_bias, saved->ctx, saved->lse, d->batch,
                                     d->seq_len, d->heads, H / d->heads, dropout_p(drop), drop ? drop->key : 0,
                                     drop ? drop->first_sample : 0, g->dqkv16);
    else {
        be->attention_backward(be, dqkv, dctx, saved->qkv, saved->probs, d->batch, d->seq_len, d->heads,
                               H / d->heads, dropout_p(drop), drop ? drop->key : 0, drop ? drop->first_sample : 0);
        if (g->dqkv16) be->to_half(be, g->dqkv16, dqkv, hs_attention_qkv_floats(d));
    }
    /* dqkv's twin: the two products below read it instead of converting dqkv each */
    if (g->dqkv16) be->bind_half(be, dqkv, g->dqkv16, hs_attention_qkv_floats(d));
    /* ∂W[3H,H] += dqkvᵀ·x ; ∂b += column sums of dqkv */
    float *dweights[3] = {g->query_w, g->key_w, g->value_w}, *dbiases[3] = {g->query_b, g->key_b, g->value_b};
    const int fused_g = adjacent(g->query_w, g->key_w, g->value_w, H);
    if (fused_g && adjacent_bias(dbiases[0], dbiases[1], dbiases[2], H)) { /* one GEMM, the bias gradient fused */
        be->gemm_wgrad_bgrad(be, g->query_w, dbiases[0], dqkv, ld, x, T, H, ld, g->overwrite);
    } else if (!fused_g) {
        for (int i = 0; i < 3; i++)
            be->gemm_wgrad_bgrad(be, dweights[i], dbiases[i], dqkv + i * H, ld, x, T, H, H, g->overwrite);
    } else {
        be->gemm(be, 1, 0, ld, H, T, 1.0f, dqkv, ld, x, H, g->overwrite ? 0.0f : 1.0f, g->query_w, H);
        for (int i = 0; i < 3; i++) {
            if (g->overwrite) be->zero(be, dbiases[i], (size_t)H * sizeof(float));
            be->bias_grad_strided(be, dbiases[i], dqkv + i * H, ld, T, H);
        }
    }
    /* ∂x[T,H] (+)= dqkv[T,3H] · [Wq;Wk;Wv] */
    if (!dx) {
        if (g->dqkv16) be->unbind_half(be, dqkv);
        return;
    }
    const float beta = accumulate_dx ? 1.0f : 0.0f;
    if (adjacent(w->query_w, w->key_w, w->value_w, H)) {
        be->gemm(be, 0, 0, T, H, ld, 1.0f, dqkv, ld, w->query_w, H, beta, dx, H);
    } else {
        const float *weights[3] = {w->query_w, w->key_w, w->value_w};
        for (int i = 0; i < 3; i++)
            be->gemm(be, 0, 0, T, H, H, 1.0f, dqkv + i * H, ld, weights[i], H, i == 0 ? beta : 1.0f, dx, H);
    }
    if (g->dqkv16) be->unbind_half(be, dqkv); /* the workspace is the caller's next */
}
