/* Scaled dot-product attention on the CUDA backend, with exactly the semantics of the CPU
 * (src/backend/cpu/cpu_attention.c):
 *
 *   qkv[B,L,3H]   per token q | k | v; head h of each third at columns h·d (H = heads·d)
 *   probs[B,heads,L,L]  P = softmax(Q·Kᵀ/√d + mask_bias[b,:]) per row; a probability that dropout
 *                 removed is stored with its sign bit set (-P, -0.0 for 0), so the backward pass needs
 *                 no mask buffer
 *   ctx[B,L,H]    head h at columns h·d: P'·V, P' = P ⊙ keep/(1-p),
 *                 keep(b,h,i,j) = hs_attention_uniform(sk, hs_attention_row_key(sk, h·L + i), j) >= p,
 *                 sk = hs_attention_sample_key(key, first_sample + b)  (none when p <= 0;
 *                 kernels/math/dropout.h)
 *
 * Backward, per (b, h) unit:
 *   dP' = dC·Vᵀ;  dV = P'ᵀ·dC;  dP = keep·dP'/(1-p);  dS = P ⊙ (dP - rowsum(P ⊙ dP));
 *   dQ = dS·K/√d;  dK = dSᵀ·Q/√d     (dqkv overwritten)
 *
 * Each product is ONE strided-batched GEMM over the B·heads units (hs_cuda_gemm_strided_batched). In
 * qkv[B,L,3H] and ctx[B,L,H] a unit (b, h) starts at b·L·ld + h·d, which is no single stride over
 * b·heads + h, so Q, K, V (and dC in the backward pass) are first copied head-major, [B,heads,L,d] with
 * unit stride L·d (one split-heads kernel per tensor), and the products that make ctx or dqkv write
 * head-major copies that one merge-heads kernel puts back: 2 GEMMs + 2 copies forward instead of
 * 2·min(B, heads) GEMMs (BERT-large at micro-batch 64: 32), 4 GEMMs + 3 copies backward instead of 64.
 * The copies are exact, so the results are those of the per-unit products. The L×L scores live in
 * probs itself; P' (forward with dropout), dP, P' (backward) and the head-major copies live in one
 * hs_cuda_scratch region.
 *
 * The softmax and its backward are one warp per row: each lane walks columns lane, lane+32, ... in
 * order and the lanes combine by a butterfly of __shfl_xor_sync (a fixed shape, and float addition is
 * commutative, so every lane holds the same bits): deterministic, no atomics. Element math is the
 * CPU's: kernels/math/fast_exp_erf.h's exp, kernels/math/dropout.h's keep rule and
 * kernels/math/softmax.h's dropout counter. */
#include <math.h>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "attention_common.cuh"
#include "heads.cuh"
#include "slots.cuh"
#include "warp.cuh"
#include "math/dropout.h"
#include "math/fast_exp_erf.h"
#include "math/softmax.h"

#include "backend/cuda/cuda_blas.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"

namespace {

/* ---- forward: softmax (+ mask, + dropout) ---------------------------------------------------------------- */

/* In place on scores[B,heads,L,L] (= probs, holding Q·Kᵀ/√d): row (b,h,i)
 *   s_j = scores_j + mask_bias[b,j];  P_j = e^{s_j - max s} / Σ_k e^{s_k - max s}
 * in the CPU's operations (the exponential recomputed rather than stored: one more exp instead of a
 * write and a read). With dropout (dropped != NULL) also P'_j = P_j·factor_j into dropped, and P_j
 * stored with its sign bit set where factor_j = 0. */
template <class T>
__global__ void softmax_dropout_forward_kernel(T *probs, T *dropped, const T *mask_bias, size_t rows, int heads,
                                               int seq_len, hs_dropout_rate rate, uint64_t key,
                                               int64_t first_sample, const hs_dropout_slot *ds) {
  hs_dropout_slot_read(ds, key, first_sample);
  const int lane = threadIdx.x % HS_WARP;
  FOR_EACH_WARP_ROW(r, rows) {
    const size_t unit = r / (size_t)seq_len; /* b·heads + h */
    const int i = (int)(r % (size_t)seq_len), b = (int)(unit / (size_t)heads), h = (int)(unit % (size_t)heads);
    T *s = probs + r * (size_t)seq_len;
    const T *mb = mask_bias + (size_t)b * (size_t)seq_len;
    float m = -INFINITY;
    for (int j = lane; j < seq_len; j += HS_WARP) {
      const float v = (float)s[j] + (float)mb[j];
      m = v > m ? v : m;
    }
    m = warp_max(m);
    float sum = 0.0f;
    for (int j = lane; j < seq_len; j += HS_WARP) sum += hs_exp_fast(((float)s[j] + (float)mb[j]) - m);
    const float inv = 1.0f / warp_sum(sum);
    const uint64_t sample_key = dropped ? hs_attention_sample_key(key, (uint64_t)(first_sample + b)) : 0;
    const uint32_t row_key = hs_attention_row_key(sample_key, hs_attention_dropout_row(h, i, seq_len));
    for (int j = lane; j < seq_len; j += HS_WARP) {
      const float pj = hs_exp_fast(((float)s[j] + (float)mb[j]) - m) * inv;
      if (dropped) {
        const float f = hs_attention_dropout_factor(sample_key, row_key, (uint32_t)j, rate);
        dropped[r * (size_t)seq_len + j] = (T)(pj * f);
        s[j] = (T)(f == 0.0f ? -pj : pj); /* sign bit marks a dropped probability */
      } else {
        s[j] = (T)pj;
      }
    }
  }
}

/* ---- host side ------------------------------------------------------------------------------------------ */

/* gemm_units (attention_common.cuh) where every operand is [units, L, L] (stride L²) or head-major
 * [units, L, d] (stride L·d), so its ld is its row length and its unit stride L·ld. */
void gemm_units(const hs_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                int lda, const float *b, int ldb, float *c, int ldc, int L, size_t units) {
  gemm_units(be, trans_a, trans_b, m, n, k, alpha, a, lda, (int64_t)L * lda, b, ldb, (int64_t)L * ldb, c, ldc,
             (int64_t)L * ldc, units);
}

/* ---- attention mask ---------------------------------------------------------------------------------- */

/* bias[n] = (1 - mask[n])·(-10000): BertModel's extended attention mask */
template <class T> __global__ void attention_mask_bias_kernel(T *bias, const int32_t *mask, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    bias[i] = (T)hs_attention_mask_bias_of(mask[i]);
}

} // namespace

extern "C" void hs_cuda_attention_mask_bias(const hs_backend *be, float *bias, const int32_t *mask, size_t n) {
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), attention_mask_bias_kernel<float>)(bias, mask, n);
  HS_CUDA_LAUNCHED("attention_mask_bias_kernel", n * (sizeof(int32_t) + sizeof(float)));
}

/* ---- forward ------------------------------------------------------------------------------------------- */

extern "C" void hs_cuda_attention_forward(const hs_backend *be, float *ctx, float *probs, const float *qkv,
                                          const float *mask_bias, int batch, int seq_len, int heads, int head_dim,
                                          float p, uint64_t key, int64_t first_sample) {
  if (batch <= 0 || seq_len <= 0 || heads <= 0 || head_dim <= 0) return;
  const int L = seq_len, d = head_dim, H = heads * head_dim;
  const float score_scale = 1.0f / sqrtf((float)d);
  const int dropout = p > 0.0f;
  const size_t LL = (size_t)L * (size_t)L, units = (size_t)batch * (size_t)heads, rows = units * (size_t)L;
  const size_t tokens = (size_t)batch * (size_t)L, th = region_bytes(tokens * (size_t)H);
  cudaStream_t stream = hs_cuda_stream(be);
  const hs_dropout_slot *ds = dropout ? hs_cuda_dropout_slot(be, key, first_sample) : nullptr;
  if (hs_cuda_slots_only(be)) return; /* recorded: the slots only (cuda_slots.h) */

  /* scratch: q, k, v and ctx head-major [B,heads,L,d], then P' [B,heads,L,L] with dropout */
  char *scratch = (char *)hs_cuda_scratch(be, 4 * th + (dropout ? region_bytes(units * LL) : 0));
  float *q = (float *)scratch, *k = (float *)(scratch + th), *v = (float *)(scratch + 2 * th);
  float *ctx_h = (float *)(scratch + 3 * th);
  split_heads(stream, head_parts<float>{{q, k, v}}, qkv,
              heads_shape{(size_t)batch, (size_t)L, 3 * H, 0, 3, heads, d});

  /* scores[L,L] = Q·Kᵀ/√d, into probs */
  gemm_units(be, 0, 1, L, L, d, score_scale, q, d, k, d, probs, L, L, units);

  /* P (and P' with dropout) */
  float *pv = dropout ? (float *)(scratch + 4 * th) : probs;
  HS_LAUNCH(hs_grid_for_rows(rows), HS_BLOCK, 0, stream, softmax_dropout_forward_kernel<float>)(
      probs, dropout ? pv : nullptr, mask_bias, rows, heads, L, hs_dropout_rate_of(p), key, first_sample, ds);
  /* the scores read, P written (P' too with dropout), the key mask */
  HS_CUDA_LAUNCHED("softmax_dropout_forward_kernel",
                   units * LL * sizeof(float) * (dropout ? 3 : 2) + (size_t)batch * (size_t)L * sizeof(float));

  /* ctx[b, :, h·d:(h+1)·d] = P'·V, head-major, then merged */
  gemm_units(be, 0, 0, L, d, L, 1.0f, pv, L, v, d, ctx_h, d, L, units);
  merge_heads(stream, ctx, head_parts<const float>{{ctx_h, nullptr, nullptr}},
              heads_shape{(size_t)batch, (size_t)L, H, 0, 1, heads, d});
}

/* ---- backward ------------------------------------------------------------------------------------------ */

extern "C" void hs_cuda_attention_backward(const hs_backend *be, float *dqkv, const float *dctx, const float *qkv,
                                           const float *probs, int batch, int seq_len, int heads, int head_dim,
                                           float p, uint64_t key, int64_t first_sample) {
  (void)key;
  (void)first_sample; /* the dropout decisions are read back from the sign bits of probs, as on the CPU */
  if (hs_cuda_slots_only(be)) return; /* recorded: no slots */
  if (batch <= 0 || seq_len <= 0 || heads <= 0 || head_dim <= 0) return;
  const int L = seq_len, d = head_dim, H = heads * head_dim;
  const float score_scale = 1.0f / sqrtf((float)d);
  const int dropout = p > 0.0f;
  const float keep_scale = hs_dropout_keep_scale(p);
  const size_t LL = (size_t)L * (size_t)L, units = (size_t)batch * (size_t)heads, rows = units * (size_t)L;
  const size_t tokens = (size_t)batch * (size_t)L, th = region_bytes(tokens * (size_t)H);
  cudaStream_t stream = hs_cuda_stream(be);

  /* one scratch region, carved: q, k, v, dC head-major [B,heads,L,d]; dp[B,heads,L,L] (dP' then dS); then
   * P'[B,heads,L,L] with dropout. The gradients reuse the copies once their last reader has run (the
   * stream orders them): dV into v (after dP' = dC·Vᵀ), dQ into dc (after dV = P'ᵀ·dC), dK into k (after
   * dQ = dS·K). */
  const size_t region = region_bytes(units * LL);
  char *scratch = (char *)hs_cuda_scratch(be, 4 * th + (dropout ? 2 * region : region));
  float *q = (float *)scratch, *k = (float *)(scratch + th), *v = (float *)(scratch + 2 * th);
  float *dc = (float *)(scratch + 3 * th);
  float *dp = (float *)(scratch + 4 * th);
  split_heads(stream, head_parts<float>{{q, k, v}}, qkv,
              heads_shape{(size_t)batch, (size_t)L, 3 * H, 0, 3, heads, d});
  split_heads(stream, head_parts<float>{{dc, nullptr, nullptr}}, dctx,
              heads_shape{(size_t)batch, (size_t)L, H, 0, 1, heads, d});
  const float *pv = probs;
  if (dropout) {
    float *kept = (float *)(scratch + 4 * th + region);
    HS_LAUNCH(hs_grid_for(units * LL), HS_BLOCK, 0, stream, kept_probs_kernel<float>)(kept, probs, units * LL,
                                                                                      keep_scale);
    HS_CUDA_LAUNCHED("kept_probs_kernel", 2 * units * LL * sizeof(float));
    pv = kept;
  }

  /* dP'[L,L] = dC·Vᵀ ;  dV[L,d] = P'ᵀ·dC (into v) */
  gemm_units(be, 0, 1, L, L, d, 1.0f, dc, d, v, d, dp, L, L, units);
  gemm_units(be, 1, 0, L, d, L, 1.0f, pv, L, dc, d, v, d, L, units);

  /* dS = P ⊙ (dP - rowsum(P ⊙ dP)), dP = keep·dP'/(1-p) */
  HS_LAUNCH(hs_grid_for_rows(rows), HS_BLOCK, 0, stream, softmax_dropout_backward_kernel<float>)(
      dp, probs, rows, L, dropout, keep_scale);
  HS_CUDA_LAUNCHED("softmax_dropout_backward_kernel", 3 * units * LL * sizeof(float)); /* dp read + written, P */

  /* dQ = dS·K/√d (into dc) ;  dK = dSᵀ·Q/√d (into k); then dqkv[B,L,3H] = dQ | dK | dV merged */
  gemm_units(be, 0, 0, L, d, L, score_scale, dp, L, k, d, dc, d, L, units);
  gemm_units(be, 1, 0, L, d, L, score_scale, dp, L, q, d, k, d, L, units);
  merge_heads(stream, dqkv, head_parts<const float>{{dc, k, v}},
              heads_shape{(size_t)batch, (size_t)L, 3 * H, 0, 3, heads, d});
}
