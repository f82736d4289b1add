/* GELU (exact erf form) and tanh derivative, shared by the CPU backend and the CUDA kernels.
 *   gelu(x)  = x·Φ(x) = 0.5·x·(1 + erf(x/√2))           (torch.nn.functional.gelu, approximate='none')
 *   gelu'(x) = Φ(x) + x·φ(x),  φ(x) = e^{-x²/2}/√(2π)
 * erf(x/√2) and e^{-x²/2} come from one evaluation of kernels/math/fast_exp_erf.h. */
#ifndef HS_KERNELS_MATH_GELU_H
#define HS_KERNELS_MATH_GELU_H

#include "math/fast_exp_erf.h"
#include "math/hs_math.h"

#define HS_INV_SQRT2 0.70710678118654752f
#define HS_INV_SQRT_2PI 0.39894228040143268f

HS_HD_INLINE float hs_gelu(float x) { return 0.5f * x * (1.0f + hs_erf_fast(x * HS_INV_SQRT2)); }

/* dy · gelu'(x) */
HS_HD_INLINE float hs_gelu_grad(float dy, float x) {
    float e; /* e^{-(x/√2)²} = e^{-x²/2} */
    const float erf_v = hs_erf_fast_with_exp(x * HS_INV_SQRT2, &e);
    const float cdf = 0.5f * (1.0f + erf_v);
    return dy * (cdf + x * HS_INV_SQRT_2PI * e);
}

/* dy · tanh'(x) from the output y = tanh(x): 1 - y² */
HS_HD static inline float hs_tanh_grad(float dy, float y) { return dy * (1.0f - y * y); }

#endif
