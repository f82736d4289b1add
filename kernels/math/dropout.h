/* Dropout masks, shared by the CPU backend and the CUDA kernels. A mask is a pure function of (key, sample
 * index, element or group index), so the backward pass recomputes it instead of storing it, and every
 * rank/thread layout draws the same mask for the same global sample. */
#ifndef HS_KERNELS_MATH_DROPOUT_H
#define HS_KERNELS_MATH_DROPOUT_H

#include <math.h>
#include <stdint.h>

#include "math/hs_math.h"

/* Wellons' 32-bit finaliser (lowbias32): two 32-bit multiplies, a bijection of 32-bit values. */
HS_HD static inline uint32_t hs_lowbias32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    return x ^ (x >> 16);
}

/* The key of a (site, sample): mix64(key ^ mix64(sample·φ)), splitmix64's finaliser twice. Made once per
 * sample (a row, a span of a sample), never per element. */
HS_HD static inline uint64_t hs_dropout_sample_key(uint64_t key, uint64_t sample) {
    return hs_mix64(key ^ hs_mix64(sample * 0x9e3779b97f4a7c15ULL));
}

/* A dropout rate as the draws use it: the decision threshold and the kept values' multiplier, made once
 * per call (hs_dropout_rate_of), never per element. A draw is 24 random bits b, its uniform u = b / 2^24
 * (exact in float), and u >= p  <=>  b >= p·2^24  <=>  b >= ceil(p·2^24) (p·2^24 is exact: a power-of-two
 * scaling), so the integer threshold keeps exactly the elements the float comparison u >= p keeps, without
 * the integer-to-float conversion per element (a GPU converts at an eighth of its arithmetic rate, and
 * the fused attention decides every score three times). p <= 0 keeps everything (threshold 0), p >= 1
 * drops everything (threshold 2^24, above every b). */
typedef struct hs_dropout_rate {
    uint32_t threshold;      /* keep iff the 24 random bits are >= threshold */
    uint32_t half_threshold; /* the attention stream's 16-bit draws: ceil(p·2^16)·2^16 mod 2^32, so a draw
                              * in a word's high half keeps iff the word is >= it (ceil(p·2^16) = 2^16,
                              * every draw dropped, wraps to 0: half_keep_scale is 0 then) */
    float keep_scale;        /* 1/(1-p) for kept values, 0 when p >= 1 (no inf · 0 = NaN) */
    float half_keep_scale;   /* keep_scale, or 0 where every 16-bit draw drops (p > 1 - 2^-16) */
} hs_dropout_rate;

/* 1/(1-p), or 0 when everything is dropped (avoids inf * 0 = NaN). */
HS_HD static inline float hs_dropout_keep_scale(float p) { return p < 1.0f ? 1.0f / (1.0f - p) : 0.0f; }

HS_HD static inline hs_dropout_rate hs_dropout_rate_of(float p) {
    hs_dropout_rate r;
    r.threshold = p > 0.0f ? (p < 1.0f ? (uint32_t)ceilf(p * 16777216.0f) : 16777216U) : 0U;
    const uint32_t t16 = (r.threshold + 255U) >> 8; /* ceil(ceil(p·2^24)/2^8) = ceil(p·2^16) */
    r.half_threshold = t16 << 16;
    r.keep_scale = hs_dropout_keep_scale(p);
    r.half_keep_scale = t16 < 65536U ? r.keep_scale : 0.0f;
    return r;
}

/* Hidden-layer dropout (the dropout op, and the dropout fused into LayerNorm and into Transformer-XL's
 * ReLU): the 24 random bits of element (or group) e of the sample whose key is sample_key,
 *   x = lowbias32(lowbias32(lo(e) ^ hi(sample_key)) ^ (lo(sample_key) + hi(e)·0x9e3779b9))
 *   b = x >> 8,  u = b / 2^24                                               24 random bits
 * 32-bit arithmetic per element: 4 32-bit multiplies (5 where hi(e) is not known to be 0) and about 20
 * machine instructions (sm_90), where a
 * 64-bit counter through two splitmix64 finalisers (hs_uniform) took about 56 with 20 integer
 * multiply-adds and a 64-bit integer-to-float conversion: more than the memory-bound passes that draw
 * (LayerNorm with dropout and the residual, forward and backward) move per element on a GPU. Both rounds
 * are bijections of lo(e), so a sample's elements below 2^32 get distinct values; hi(e) (0 in practice)
 * offsets the second round's key. tests/ref/hetseq_rng.py has it in Python. */
HS_HD static inline uint32_t hs_dropout_bits(uint64_t sample_key, uint64_t e) {
    const uint32_t x = hs_lowbias32(hs_lowbias32((uint32_t)e ^ (uint32_t)(sample_key >> 32)) ^
                                    ((uint32_t)sample_key + (uint32_t)(e >> 32) * 0x9e3779b9U));
    return x >> 8;
}

HS_HD static inline float hs_dropout_uniform(uint64_t sample_key, uint64_t e) {
    return (float)hs_dropout_bits(sample_key, e) * (1.0f / 16777216.0f);
}

/* Multiplier of element (or group) e of the sample whose key is sample_key (hs_dropout_sample_key): kept
 * (u >= p) -> 1/(1-p), dropped -> 0. */
HS_HD static inline float hs_dropout_factor(uint64_t sample_key, uint64_t e, hs_dropout_rate rate) {
    return hs_dropout_bits(sample_key, e) >= rate.threshold ? rate.keep_scale : 0.0f;
}

/* Attention dropout (BERT's attention probabilities, Transformer-XL's dropatt) draws from a cheaper
 * stream of the same kind: a sample has heads·L·L decisions, L times the hidden layers' count, and the
 * fused attention kernels redraw each one in the forward, dQ and dK/dV passes. Everything per element is
 * 32-bit, and one hash serves two neighbouring columns: a decision is addressed by its row (head h,
 * query i: row = h·qlen + i) and column (key j), and
 *   sample_key = mix64(key ^ mix64(sample·φ))                  once per (site, sample)
 *   row_key    = lowbias32(row ^ hi(sample_key))                once per row
 *   x          = lowbias32(lowbias32(⌊j/2⌋ ^ row_key) ^ (row_key + lo(sample_key)))   once per column pair
 *   b16        = x mod 2^16 for even j, ⌊x / 2^16⌋ for odd j    16 random bits
 *   b          = b16 · 2^8,  u = b / 2^24 = b16 / 2^16          the 24-bit draw the threshold compares
 * (lowbias32: Wellons' 32-bit finaliser, two 32-bit multiplies). Each step is a bijection, so a sample's
 * rows get distinct row keys and a row's column pairs distinct values; two rows differ in both rounds'
 * keys, so one row's draws are not another's at xor-shifted columns (as with the row key in the first
 * round only: u(r2, j) = u(r1, j ^ row_key1 ^ row_key2)). The two halves of a finalised word are as
 * independent as two words for a dropout mask (test_cpu_ops checks neighbours in a row). With 16 bits a
 * draw keeps with probability 1 - ⌈p·2^16⌉/2^16 (p = 0.1: 0.899994): the 24-bit threshold of
 * hs_dropout_rate_of compares b16·2^8 >= ⌈p·2^24⌉ <=> b16 >= ⌈p·2^16⌉, so the rate needs no second form.
 * Two decisions per hash halve the stream's arithmetic, which is most of the fused attention's scalar
 * work beside the exponential (docs/gpu.md, the phase-2 ledger); FlashAttention packs four 8-bit
 * decisions into a word, at p's resolution 1/256. A pure function of (key, sample, row, column): the
 * same masks on every backend, rank count and thread layout. tests/ref/hetseq_rng.py has it in Python. */
/* the sample's key: hs_dropout_sample_key's */
HS_HD static inline uint64_t hs_attention_sample_key(uint64_t key, uint64_t sample) {
    return hs_dropout_sample_key(key, sample);
}

/* Dropout row of query i of head `head` in a sample's [heads, qlen, klen] block of attention decisions */
HS_HD static inline uint32_t hs_attention_dropout_row(int head, int i, int qlen) {
    return (uint32_t)head * (uint32_t)qlen + (uint32_t)i;
}

HS_HD static inline uint32_t hs_attention_row_key(uint64_t sample_key, uint32_t row) {
    return hs_lowbias32(row ^ (uint32_t)(sample_key >> 32));
}

/* The 32 random bits x of column pair `pair` (columns 2·pair and 2·pair + 1) of the row whose key is row_key */
HS_HD static inline uint32_t hs_attention_pair_bits(uint64_t sample_key, uint32_t row_key, uint32_t pair) {
    return hs_lowbias32(hs_lowbias32(pair ^ row_key) ^ (row_key + (uint32_t)sample_key));
}

/* Column col's 24-bit draw b from its pair's x: b16 (x's low half for an even column, its high half for
 * an odd one) times 2^8 */
HS_HD static inline uint32_t hs_attention_bits_of_pair(uint32_t x, uint32_t col) {
    return ((col & 1U) ? x >> 16 : x & 0xffffU) << 8;
}

HS_HD static inline uint32_t hs_attention_bits(uint64_t sample_key, uint32_t row_key, uint32_t col) {
    return hs_attention_bits_of_pair(hs_attention_pair_bits(sample_key, row_key, col >> 1), col);
}

HS_HD static inline float hs_attention_uniform(uint64_t sample_key, uint32_t row_key, uint32_t col) {
    return (float)hs_attention_bits(sample_key, row_key, col) * (1.0f / 16777216.0f);
}

/* Multiplier of column col of the row whose key is row_key (hs_attention_row_key) in the sample whose key
 * is sample_key: 1/(1-p) if kept (u >= p), else 0. */
HS_HD static inline float hs_attention_dropout_factor(uint64_t sample_key, uint32_t row_key, uint32_t col,
                                                      hs_dropout_rate rate) {
    return hs_attention_bits(sample_key, row_key, col) >= rate.threshold ? rate.keep_scale : 0.0f;
}

/* The multipliers of columns 2·pair (*f0) and 2·pair + 1 (*f1) from one hash: what a loop over a row's
 * columns calls once per pair. Each half compared in the word's high half (x·2^16 for the low one), with
 * half_threshold: b16 >= ceil(p·2^16), the decisions of hs_attention_dropout_factor, in two or three
 * instructions a column (a GPU's shift, compare and select). */
HS_HD static inline void hs_attention_factors_of_pair(uint32_t x, hs_dropout_rate rate, float *f0, float *f1) {
    *f0 = x << 16 >= rate.half_threshold ? rate.half_keep_scale : 0.0f;
    *f1 = x >= rate.half_threshold ? rate.half_keep_scale : 0.0f;
}

HS_HD static inline void hs_attention_pair_factors(uint64_t sample_key, uint32_t row_key, uint32_t pair,
                                                   hs_dropout_rate rate, float *f0, float *f1) {
    hs_attention_factors_of_pair(hs_attention_pair_bits(sample_key, row_key, pair), rate, f0, f1);
}

#endif
