/* Scaled dot-product attention on the CPU. The projected activations stay in one token-major buffer
 * qkv[B,L,3H] (per token q | k | v, head h at columns h·d of each third), so a head's Q, K and V are
 * plain [L,d] matrices with leading dimension 3H: no split-heads copy, and the context GEMM writes
 * straight into ctx[B,L,H] at column h·d (no merge-heads copy). The B·heads (sample, head) units run in
 * parallel; each unit's products are single-threaded OpenBLAS calls (OpenBLAS runs serially inside an
 * OpenMP parallel region), and a unit's L×L scores, softmax and dropout stay in cache between them.
 *
 * Attention dropout without a mask buffer: probs keeps the softmax P before dropout, and a dropped
 * probability is stored with its sign bit set (-P; -0.0 for a zero). The backward pass reads keep =
 * !signbit and |P| from the same array, so the random numbers are drawn once per forward pass (the row
 * kernels of cpu_attention_rows.h, shared with cpu_rel_attention.c). */
/* Floating-point exceptions are never trapped here, so let GCC turn the selects inside the
 * kernels/math formulas into vector blends (with trapping math it keeps them as branches and the
 * exp/erf loops stay scalar). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <cblas.h>
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/cpu_rounded_gemm.h"
#include "backend/cpu/cpu_attention_rows.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_simd.h"
#include "math/dropout.h"
#include "math/fast_exp_erf.h"
#include "math/softmax.h"
#include "util/check.h"

/* The sizes of one call: L tokens per sample, d per head, H = heads·d, rows of qkv ld = 3H apart; the
 * score scale 1/√d and the dropout's keep scale 1/(1-p). */
typedef struct attn_shape {
    int L, d, H, ld, dropout;
    float score_scale;
    hs_dropout_rate rate; /* its keep_scale 1/(1-p) */
    size_t LL; /* L·L probabilities per (sample, head) unit */
} attn_shape;

static attn_shape attn_shape_of(int seq_len, int heads, int head_dim, float p) {
    const int H = heads * head_dim;
    return (attn_shape){.L = seq_len, .d = head_dim, .H = H, .ld = 3 * H, .dropout = p > 0.0f,
                        .score_scale = 1.0f / sqrtf((float)head_dim), .rate = hs_dropout_rate_of(p),
                        .LL = (size_t)seq_len * (size_t)seq_len};
}

/* P row i of unit (b, head): scores s[L] -> softmax in place; returns nothing. mask_bias row [L]. */
static HS_SIMD_CLONES void softmax_row(float *s, const float *mask_bias, int seq_len) {
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int j = 0; j < seq_len; j++) {
        s[j] += mask_bias[j];
        m = s[j] > m ? s[j] : m;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < seq_len; j++) {
        const float e = hs_exp_fast(s[j] - m);
        s[j] = e;
        sum += e;
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (int j = 0; j < seq_len; j++) s[j] *= inv;
}

void hs_cpu_attention_forward(const hs_backend *be, float *ctx, float *probs, const float *qkv, const float *mask_bias,
                              int batch, int seq_len, int heads, int head_dim, float p, uint64_t key,
                              int64_t first_sample) {
    const attn_shape a = attn_shape_of(seq_len, heads, head_dim, p);
    const int L = a.L, d = a.d, H = a.H, ld = a.ld;
#pragma omp parallel
    {
        float *dropped = NULL; /* [L,L] keep·P/(1-p) of the current unit */
        if (a.dropout) HS_ALLOC(dropped, a.LL);
#pragma omp for schedule(static)
        for (int u = 0; u < batch * heads; u++) {
            const int b = u / heads, h = u % heads;
            const float *q = qkv + (size_t)b * (size_t)L * (size_t)ld + (size_t)h * (size_t)d;
            const float *k = q + H, *v = q + 2 * H;
            float *pu = probs + (size_t)u * a.LL;
            /* scores[L,L] = Q·Kᵀ/√d */
            hs_cpu_precision_gemm(be, 0, 1, L, L, d, a.score_scale, q, ld, k, ld, 0.0f, pu, L);
            for (int i = 0; i < L; i++) softmax_row(pu + (size_t)i * (size_t)L, mask_bias + (size_t)b * (size_t)L, L);
            const float *pv = pu;
            if (a.dropout) {
                const uint64_t sample_key = hs_attention_sample_key(key, (uint64_t)(first_sample + b));
                for (int i = 0; i < L; i++)
                    hs_attn_drop_probs(dropped + (size_t)i * (size_t)L, pu + (size_t)i * (size_t)L, L, sample_key,
                                       hs_attention_row_key(sample_key, hs_attention_dropout_row(h, i, L)),
                                       a.rate);
                pv = dropped;
            }
            /* ctx[b, :, h·d:(h+1)·d] = P'·V */
            hs_cpu_precision_gemm(be, 0, 0, L, d, L, 1.0f, pv, L, v, ld, 0.0f,
                                  ctx + (size_t)b * (size_t)L * (size_t)H + (size_t)h * (size_t)d, H);
        }
        free(dropped);
    }
}

/* Per unit, with P' = keep·P/(1-p):
 *   dP' = dC·Vᵀ;  dV = P'ᵀ·dC;  dP = keep·dP'/(1-p);  dS = P ⊙ (dP - rowsum(P ⊙ dP));
 *   dQ = dS·K/√d;  dK = dSᵀ·Q/√d. */
void hs_cpu_attention_backward(const hs_backend *be, float *dqkv, const float *dctx, const float *qkv,
                               const float *probs, int batch, int seq_len, int heads, int head_dim, float p,
                               uint64_t key, int64_t first_sample) {
    (void)key;
    (void)first_sample; /* the dropout decisions are read back from the sign bits of probs */
    const attn_shape a = attn_shape_of(seq_len, heads, head_dim, p);
    const int L = a.L, d = a.d, H = a.H, ld = a.ld;
#pragma omp parallel
    {
        float *dp, *pd = NULL; /* [L,L] each: dP then dS; P' */
        HS_ALLOC(dp, a.LL);
        if (a.dropout) HS_ALLOC(pd, a.LL);
#pragma omp for schedule(static)
        for (int u = 0; u < batch * heads; u++) {
            const int b = u / heads, h = u % heads;
            const size_t tok0 = (size_t)b * (size_t)L;
            const float *q = qkv + tok0 * (size_t)ld + (size_t)h * (size_t)d;
            const float *k = q + H, *v = q + 2 * H;
            float *dq = dqkv + tok0 * (size_t)ld + (size_t)h * (size_t)d;
            float *dk = dq + H, *dv = dq + 2 * H;
            const float *dc = dctx + tok0 * (size_t)H + (size_t)h * (size_t)d;
            const float *pu = probs + (size_t)u * a.LL;
            const float *pv = pu;
            if (a.dropout) {
                hs_attn_kept_probs(pd, pu, a.LL, a.rate.keep_scale);
                pv = pd;
            }
            /* dP'[L,L] = dC·Vᵀ ; dV[L,d] = P'ᵀ·dC */
            hs_cpu_precision_gemm(be, 0, 1, L, L, d, 1.0f, dc, H, v, ld, 0.0f, dp, L);
            hs_cpu_precision_gemm(be, 1, 0, L, d, L, 1.0f, pv, L, dc, H, 0.0f, dv, ld);
            for (int i = 0; i < L; i++)
                hs_attn_softmax_backward_row(dp + (size_t)i * (size_t)L, pu + (size_t)i * (size_t)L, L, a.dropout,
                                             a.rate.keep_scale);
            /* dQ = dS·K/√d ; dK = dSᵀ·Q/√d */
            hs_cpu_precision_gemm(be, 0, 0, L, d, L, a.score_scale, dp, L, k, ld, 0.0f, dq, ld);
            hs_cpu_precision_gemm(be, 1, 0, L, d, L, a.score_scale, dp, L, q, ld, 0.0f, dk, ld);
        }
        free(dp);
        free(pd);
    }
}

/* ---- additive attention mask ---------------------------------------------------------------------------- */

/* bias[n] = (1 - mask[n])·(-10000) */
void hs_cpu_attention_mask_bias(const hs_backend *be, float *bias, const int32_t *mask, size_t n) {
    (void)be;
    for (size_t i = 0; i < n; i++) bias[i] = hs_attention_mask_bias_of(mask[i]);
}
