/* Scaled dot-product attention on the CPU. The projected activations stay in one token-major buffer
 * qkv[B,L,3H] (per token q | k | v, head h at columns h·d of each third), so a head's Q, K and V are
 * plain [L,d] matrices with leading dimension 3H: no split-heads copy, and the context GEMM writes
 * straight into ctx[B,L,H] at column h·d (no merge-heads copy). The B·heads (sample, head) units run in
 * parallel; each unit's products are single-threaded OpenBLAS calls (OpenBLAS runs serially inside an
 * OpenMP parallel region), and a unit's L×L scores, softmax and dropout stay in cache between them.
 *
 * Attention dropout without a mask buffer: probs keeps the softmax P before dropout, and a dropped
 * probability is stored with its sign bit set (-P; -0.0 for a zero). The backward pass reads keep =
 * !signbit and |P| from the same array, so the random numbers are drawn once per forward pass. */
/* Floating-point exceptions are never trapped here, so let GCC turn the selects inside the
 * kernels/math formulas into vector blends (with trapping math it keeps them as branches and the
 * exp/erf loops stay scalar). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <cblas.h>
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/cpu_bf16.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_simd.h"
#include "math/dropout.h"
#include "math/fast_exp_erf.h"
#include "math/softmax.h"
#include "util/check.h"

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

/* P'[n] = keep·P/(1-p) for the n probabilities of one (sample, head) unit, whose dropout counters start
 * at `base`; dropped probabilities get their sign bit set in P. */
static HS_SIMD_CLONES void drop_probs(float *dropped, float *probs, size_t n, uint64_t key, uint64_t sample,
                                      uint64_t base, float p, float keep_scale) {
#pragma omp simd
    for (size_t e = 0; e < n; e++) {
        const float f = hs_dropout_factor(key, sample, base + e, p, keep_scale);
        dropped[e] = probs[e] * f;
        probs[e] = f == 0.0f ? -probs[e] : probs[e]; /* sign bit marks a dropped probability */
    }
}

/* P' from the stored P and its sign bits */
static HS_SIMD_CLONES void kept_probs(float *dropped, const float *probs, size_t n, float keep_scale) {
#pragma omp simd
    for (size_t e = 0; e < n; e++) dropped[e] = signbit(probs[e]) ? 0.0f : probs[e] * keep_scale;
}

/* One row of the softmax backward through the dropout: dP = keep·dP'/(1-p) (keep = !signbit(P); all
 * kept when keep_scale == 0 means no dropout), then dS = |P| ⊙ (dP - Σ |P| ⊙ dP), in place in dp. */
static HS_SIMD_CLONES void softmax_dropout_backward_row(float *dp, const float *pr, int n, int dropout,
                                                        float keep_scale) {
    float dot = 0.0f;
    if (dropout) {
#pragma omp simd reduction(+ : dot)
        for (int j = 0; j < n; j++) {
            const float g = signbit(pr[j]) ? 0.0f : dp[j] * keep_scale;
            dp[j] = g;
            dot += fabsf(pr[j]) * g;
        }
#pragma omp simd
        for (int j = 0; j < n; j++) dp[j] = fabsf(pr[j]) * (dp[j] - dot);
    } else {
#pragma omp simd reduction(+ : dot)
        for (int j = 0; j < n; j++) dot += pr[j] * dp[j];
#pragma omp simd
        for (int j = 0; j < n; j++) dp[j] = pr[j] * (dp[j] - dot);
    }
}

void hs_cpu_attention_forward(const hs_backend *be, float *ctx, float *probs, const float *qkv, const float *mask_bias,
                              int batch, int seq_len, int heads, int head_dim, float p, uint64_t key,
                              int64_t first_sample) {
    const int L = seq_len, d = head_dim, H = heads * head_dim, ld = 3 * H;
    const float score_scale = 1.0f / sqrtf((float)d);
    const int dropout = p > 0.0f;
    const float keep_scale = hs_dropout_keep_scale(p);
    const size_t LL = (size_t)L * (size_t)L;
#pragma omp parallel
    {
        float *dropped = NULL; /* [L,L] keep·P/(1-p) of the current unit */
        if (dropout) HS_ALLOC(dropped, LL);
#pragma omp for schedule(static)
        for (int u = 0; u < batch * heads; u++) {
            const int b = u / heads, h = u % heads;
            const float *q = qkv + (size_t)b * (size_t)L * (size_t)ld + (size_t)h * (size_t)d;
            const float *k = q + H, *v = q + 2 * H;
            float *pu = probs + (size_t)u * LL;
            /* scores[L,L] = Q·Kᵀ/√d */
            hs_cpu_mm(be, 0, 1, L, L, d, score_scale, q, ld, k, ld, 0.0f, pu, L);
            for (int i = 0; i < L; i++) softmax_row(pu + (size_t)i * (size_t)L, mask_bias + (size_t)b * (size_t)L, L);
            const float *pv = pu;
            if (dropout) {
                drop_probs(dropped, pu, LL, key, (uint64_t)(first_sample + b), hs_attention_dropout_elem(h, 0, 0, L), p,
                           keep_scale);
                pv = dropped;
            }
            /* ctx[b, :, h·d:(h+1)·d] = P'·V */
            hs_cpu_mm(be, 0, 0, L, d, L, 1.0f, pv, L, v, ld, 0.0f,
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
    const int L = seq_len, d = head_dim, H = heads * head_dim, ld = 3 * H;
    const float score_scale = 1.0f / sqrtf((float)d);
    const int dropout = p > 0.0f;
    const float keep_scale = hs_dropout_keep_scale(p);
    const size_t LL = (size_t)L * (size_t)L;
#pragma omp parallel
    {
        float *dp, *pd = NULL; /* [L,L] each: dP then dS; P' */
        HS_ALLOC(dp, LL);
        if (dropout) HS_ALLOC(pd, LL);
#pragma omp for schedule(static)
        for (int u = 0; u < batch * heads; u++) {
            const int b = u / heads, h = u % heads;
            const size_t tok0 = (size_t)b * (size_t)L;
            const float *q = qkv + tok0 * (size_t)ld + (size_t)h * (size_t)d;
            const float *k = q + H, *v = q + 2 * H;
            float *dq = dqkv + tok0 * (size_t)ld + (size_t)h * (size_t)d;
            float *dk = dq + H, *dv = dq + 2 * H;
            const float *dc = dctx + tok0 * (size_t)H + (size_t)h * (size_t)d;
            const float *pu = probs + (size_t)u * LL;
            const float *pv = pu;
            if (dropout) {
                kept_probs(pd, pu, LL, keep_scale);
                pv = pd;
            }
            /* dP'[L,L] = dC·Vᵀ ; dV[L,d] = P'ᵀ·dC */
            hs_cpu_mm(be, 0, 1, L, L, d, 1.0f, dc, H, v, ld, 0.0f, dp, L);
            hs_cpu_mm(be, 1, 0, L, d, L, 1.0f, pv, L, dc, H, 0.0f, dv, ld);
            for (int i = 0; i < L; i++)
                softmax_dropout_backward_row(dp + (size_t)i * (size_t)L, pu + (size_t)i * (size_t)L, L, dropout, keep_scale);
            /* dQ = dS·K/√d ; dK = dSᵀ·Q/√d */
            hs_cpu_mm(be, 0, 0, L, d, L, score_scale, dp, L, k, ld, 0.0f, dq, ld);
            hs_cpu_mm(be, 1, 0, L, d, L, score_scale, dp, L, q, ld, 0.0f, dk, ld);
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
