/* LayerNorm element formulas (TF-style BertLayerNorm), shared by the CPU backend and the CUDA kernels.
 * Per row of C values: mean = Σx/C, var = Σ(x-mean)²/C (biased), rstd = 1/sqrt(var + eps),
 * x̂ = (x - mean)·rstd, y = gamma·x̂ + beta.
 * Backward, with g = dy·gamma: dx = rstd·(g - mean(g) - x̂·mean(g·x̂)), dgamma = Σ_rows dy·x̂,
 * dbeta = Σ_rows dy. Row sums are taken in double by the callers. */
#ifndef HS_KERNELS_MATH_LAYERNORM_H
#define HS_KERNELS_MATH_LAYERNORM_H

#include <math.h>

#include "math/hs_math.h"

/* rstd from the double-precision variance, as 1/sqrt in double then rounded once */
HS_HD static inline float hs_layernorm_rstd(double var, float eps) { return (float)(1.0 / sqrt(var + (double)eps)); }

HS_HD static inline float hs_layernorm_out(float x, float mean, float rstd, float gamma, float beta) {
    return (x - mean) * rstd * gamma + beta;
}

/* dx of one element: rstd·(g - mean_g - x̂·mean_gx), with g = dy·gamma */
HS_HD static inline float hs_layernorm_dx(float g, float xhat, float rstd, float mean_g, float mean_gx) {
    return rstd * (g - mean_g - xhat * mean_gx);
}

#endif
