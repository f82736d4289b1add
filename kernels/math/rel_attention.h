/* Index math of relative-position attention (Transformer-XL), shared by the CPU backend and the CUDA
 * kernels. One (sequence, head) unit has qlen queries and klen = mlen + qlen keys; query i sits at key
 * position mlen + i.
 *
 * Relative shift. BDraw[i][t] = (q_i + r_r_bias)·r[t] with r row t for relative distance klen-1-t.
 * The score of (i, j) needs distance mlen + i - j, i.e. row t = klen-1-(mlen+i-j) = j + qlen-1-i: a
 * pure index map (NVIDIA's _rel_shift pads, reshapes and slices to get the same entries for the
 * allowed keys; what it leaves at masked keys is never used). For j <= mlen + i, t <= klen-1; t >= 0
 * always, so every allowed key reads a valid column and raw columns t < qlen-1-i are never read.
 *
 * Allowed keys (NVIDIA's dec_attn_mask, True = masked): triu(ones, 1 + mlen) masks j > mlen + i;
 * same_length adds tril(ones, -lower_shift), masking j <= i - lower_shift. So row i keeps
 * [hs_rel_key_lo, mlen + i]; key mlen + i is always kept when lower_shift >= 1.
 *
 * Attention dropout keeps probability (h, i, j) of sequence s iff hs_attention_uniform(sample_key,
 * hs_attention_row_key(sample_key, h·qlen + i), j) >= p, sample_key = hs_attention_sample_key(key,
 * first_sample + s) (kernels/math/dropout.h). */
#ifndef HS_KERNELS_MATH_REL_ATTENTION_H
#define HS_KERNELS_MATH_REL_ATTENTION_H

#include <stdint.h>

#include "math/hs_math.h"

/* Column of BDraw holding BD[i][j] (relative distance mlen + i - j). */
HS_HD static inline int hs_rel_shift_col(int i, int j, int qlen) { return j + qlen - 1 - i; }

/* First allowed key of query i: 0, or i - lower_shift + 1 with same_length (lower_shift > 0). */
HS_HD static inline int hs_rel_key_lo(int i, int lower_shift) {
    const int lo = i - lower_shift + 1;
    return lower_shift > 0 && lo > 0 ? lo : 0;
}

/* Last allowed key of query i (causal: itself, at key position mlen + i). */
HS_HD static inline int hs_rel_key_hi(int i, int mlen) { return mlen + i; }

#endif
