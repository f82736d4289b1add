/* Inverted dropout mask, shared by the CPU backend and the CUDA kernels. The mask is a pure function
 * of (key, sample index, group index), so the backward pass recomputes it instead of storing it, and
 * every rank/thread layout draws the same mask for the same global sample. */
#ifndef HS_KERNELS_MATH_DROPOUT_H
#define HS_KERNELS_MATH_DROPOUT_H

#include <stdint.h>

#include "math/hs_math.h"

/* Multiplier of group `group` of global sample `sample`: kept (u >= p) -> 1/(1-p), dropped -> 0.
 * keep_scale = 1/(1-p) is passed in so it is computed once per call. p >= 1 drops everything (u < 1). */
HS_HD static inline float hs_dropout_factor(uint64_t key, uint64_t sample, uint64_t group, float p,
                                            float keep_scale) {
    return hs_uniform(key, sample, group) >= p ? keep_scale : 0.0f;
}

/* 1/(1-p), or 0 when everything is dropped (avoids inf * 0 = NaN). */
HS_HD static inline float hs_dropout_keep_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

#endif
