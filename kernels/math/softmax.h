/* Softmax pieces shared by the CPU backend and the CUDA kernels: BERT's additive attention mask and
 * the attention-dropout decision.
 *   mask bias = (1 - input_mask)·(-10000)    (BertModel's extended_attention_mask)
 *   softmax_j = e^{s_j - max s} / Σ_k e^{s_k - max s}
 *   backward: ds_j = P_j·(dP_j - Σ_k P_k·dP_k)
 * Attention dropout keeps probability (h,i,j) of sample b iff hs_uniform(key, sample, (h·L+i)·L+j) >= p
 * (kernels/math/dropout.h's rule with one decision per element of the sample's [heads,L,L] block). */
#ifndef HS_KERNELS_MATH_SOFTMAX_H
#define HS_KERNELS_MATH_SOFTMAX_H

#include <stdint.h>

#include "math/hs_math.h"

#define HS_ATTENTION_MASK_VALUE (-10000.0f)

HS_HD static inline float hs_attention_mask_bias_of(int32_t mask) {
    return (1.0f - (float)mask) * HS_ATTENTION_MASK_VALUE;
}

/* Element index of probability (head, query i, key j) within a sample's dropout counter space. */
HS_HD static inline uint64_t hs_attention_dropout_elem(int head, int i, int j, int seq_len) {
    return ((uint64_t)head * (uint64_t)seq_len + (uint64_t)i) * (uint64_t)seq_len + (uint64_t)j;
}

#endif
