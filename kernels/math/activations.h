/* Activation and input-conversion formulas shared by the CPU backend and the CUDA kernels. */
#ifndef HS_KERNELS_MATH_ACTIVATIONS_H
#define HS_KERNELS_MATH_ACTIVATIONS_H

#include <stdint.h>

#include "math/hs_math.h"

/* y = max(x, 0). Written as a comparison so -0.0 and NaN behave as in PyTorch (NaN propagates). */
HS_HD static inline float hs_relu(float x) { return x < 0.0f ? 0.0f : x; }

/* dx = dy * 1[y > 0], from the forward OUTPUT y: y > 0 exactly where x > 0, so the input need not be
 * kept. At the kink x = 0 the gradient is 0 (PyTorch's choice). */
HS_HD static inline float hs_relu_grad(float dy, float y) { return y > 0.0f ? dy : 0.0f; }

/* Image byte to normalised input: (u8 / 255 - mean) / std folded into one multiply-add. */
HS_HD static inline float hs_u8_affine(uint8_t x, float scale, float shift) { return (float)x * scale + shift; }

#endif
