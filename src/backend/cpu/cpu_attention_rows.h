/* Row kernels shared by the two CPU attentions (cpu_attention.c, cpu_rel_attention.c): attention
 * dropout recorded in the sign bits of the stored probabilities, and the softmax backward through it.
 * A dropped probability is stored as -P (-0.0 for a zero), so the backward pass reads keep = !signbit
 * and |P| from the same array and the random numbers are drawn once per forward pass. */
#ifndef HS_BACKEND_CPU_ATTENTION_ROWS_H
#define HS_BACKEND_CPU_ATTENTION_ROWS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/cpu/cpu_simd.h"
#include "math/dropout.h"

/* P'[n] = keep·P/(1-p) for the n probabilities of one dropout row (columns 0..n-1; its key row_key,
 * hs_attention_row_key, in the sample whose key is sample_key); dropped probabilities get their sign bit
 * set in P. */
static HS_SIMD_CLONES void hs_attn_drop_probs(float *dropped, float *probs, int n, uint64_t sample_key,
                                              uint32_t row_key, hs_dropout_rate rate) {
    /* columns two at a time: one hash per pair (kernels/math/dropout.h), written out so that the loop
     * vectorises over pairs */
#pragma omp simd
    for (int q = 0; q < n / 2; q++) {
        float f0, f1;
        hs_attention_pair_factors(sample_key, row_key, (uint32_t)q, rate, &f0, &f1);
        const float p0 = probs[2 * q], p1 = probs[2 * q + 1];
        dropped[2 * q] = p0 * f0, dropped[2 * q + 1] = p1 * f1;
        probs[2 * q] = f0 == 0.0f ? -p0 : p0; /* sign bit marks a dropped probability */
        probs[2 * q + 1] = f1 == 0.0f ? -p1 : p1;
    }
    if (n % 2) {
        const int e = n - 1;
        const float f = hs_attention_dropout_factor(sample_key, row_key, (uint32_t)e, rate);
        dropped[e] = probs[e] * f;
        probs[e] = f == 0.0f ? -probs[e] : probs[e];
    }
}

/* P'[n] from the stored P and its sign bits */
static HS_SIMD_CLONES void hs_attn_kept_probs(float *dropped, const float *probs, size_t n, float keep_scale) {
#pragma omp simd
    for (size_t e = 0; e < n; e++) dropped[e] = signbit(probs[e]) ? 0.0f : probs[e] * keep_scale;
}

/* One row of the softmax backward through the dropout: dP = keep·dP'/(1-p) (keep = !signbit(P); with
 * dropout == 0 every entry is kept and P is read as stored), then dS = |P| ⊙ (dP - Σ |P| ⊙ dP), in place
 * in dp. Masked keys have P = 0, so their dS is 0. */
static HS_SIMD_CLONES void hs_attn_softmax_backward_row(float *dp, const float *pr, int n, int dropout,
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

#endif
