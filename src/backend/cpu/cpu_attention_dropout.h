/* A row's attention-dropout multipliers for the CPU's fused (flash) attentions (cpu_flash_attention.c,
 * cpu_rel_flash_attention.c), two columns per hash of the attention stream (kernels/math/dropout.h). */
#ifndef HS_BACKEND_CPU_ATTENTION_DROPOUT_H
#define HS_BACKEND_CPU_ATTENTION_DROPOUT_H

#include <stdint.h>

#include "math/dropout.h"

/* f[j] = the multiplier of column j for j in [lo, hi] of a row (f indexed by column), a pair per hash:
 * the CPU loops' form */
static inline void hs_attn_row_factors(uint64_t sample_key, uint32_t row_key, int lo, int hi,
                                       hs_dropout_rate rate, float *f) {
    if (hi < lo) return;
    float f0, f1;
    if (lo & 1) { /* an odd first column: its pair's second */
        hs_attention_pair_factors(sample_key, row_key, (uint32_t)lo >> 1, rate, &f0, &f1);
        f[lo++] = f1;
    }
    const int pairs = (hi - lo + 1) / 2, q0 = lo / 2;
#pragma omp simd
    for (int q = q0; q < q0 + pairs; q++) { /* written out so that the loop vectorises over pairs */
        float g0, g1;
        hs_attention_pair_factors(sample_key, row_key, (uint32_t)q, rate, &g0, &g1);
        f[2 * q] = g0, f[2 * q + 1] = g1;
    }
    if ((hi - lo + 1) % 2) { /* an even last column: its pair's first */
        hs_attention_pair_factors(sample_key, row_key, (uint32_t)hi >> 1, rate, &f0, &f1);
        f[hi] = f0;
    }
}

#endif
