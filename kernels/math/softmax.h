/* Softmax pieces shared by the CPU backend and the CUDA kernels: BERT's additive attention mask and
 * the attention-dropout decision.
 *   mask bias = (1 - input_mask)·(-10000)    (BertModel's extended_attention_mask)
 *   softmax_j = e^{s_j - max s} / Σ_k e^{s_k - max s}
 *   backward: ds_j = P_j·(dP_j - Σ_k P_k·dP_k)
 * Attention dropout keeps probability (h,i,j) of sample b iff hs_attention_uniform(sample_key,
 * hs_attention_row_key(sample_key, h·L + i), j) >= p, sample_key = hs_attention_sample_key(key, sample)
 * (kernels/math/dropout.h: one decision per element of the sample's [heads,L,L] block). */
#ifndef HS_KERNELS_MATH_SOFTMAX_H
#define HS_KERNELS_MATH_SOFTMAX_H

#include <stdint.h>

#include "math/hs_math.h"

#define HS_ATTENTION_MASK_VALUE (-10000.0f)

HS_HD static inline float hs_attention_mask_bias_of(int32_t mask) {
    return (1.0f - (float)mask) * HS_ATTENTION_MASK_VALUE;
}

#endif
