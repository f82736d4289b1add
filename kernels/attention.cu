/* Scaled dot-product attention on the CUDA backend, with exactly the semantics of the CPU
 * (src/backend/cpu/cpu_attention.c):
 *
 *   qkv[B,L,3H]   per token q | k | v; head h of each third at columns h·d (H = heads·d)
 *   probs[B,heads,L,L]  P = softmax(Q·Kᵀ/√d + mask_bias[b,:]) per row; a probability that dropout
 *                 removed is stored with its sign bit set (-P, -0.0 for 0), so the backward pass needs
 *                 no mask buffer
 *   ctx[B,L,H]    head h at columns h·d: P'·V, P' = P ⊙ keep/(1-p),
 *                 keep(b,h,i,j) = hs_uniform(key, first_sample + b, (h·L+i)·L+j) >= p  (none when p <= 0)
 *
 * Backward, per (b, h) unit:
 *   dP' = dC·Vᵀ;  dV = P'ᵀ·dC;  dP = keep·dP'/(1-p);  dS = P ⊙ (dP - rowsum(P ⊙ dP));
 *   dQ = dS·K/√d;  dK = dSᵀ·Q/√d     (dqkv overwritten)
 *
 * The products are strided-batched GEMMs on the compute stream (hs_cuda_gemm_strided_batched) reading
 * Q, K, V in place in qkv (leading dimension 3H, no split-heads copy) and writing ctx / dqkv in place
 * (no merge-heads copy). A unit (b, h) starts at b·stride_b + h·stride_h in every tensor, which is not
 * one linear stride over b·heads + h, so the units go in min(B, heads) calls: per head a batch over the
 * samples, or per sample a batch over the heads. The L×L scores live in probs itself; P' (forward with
 * dropout) and dP, P' (backward) live in one hs_cuda_scratch region.
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
                                               int seq_len, float p, float keep_scale, uint64_t key,
                                               int64_t first_sample) {
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
    for (int j = lane; j < seq_len; j += HS_WARP) {
      const float pj = hs_exp_fast(((float)s[j] + (float)mb[j]) - m) * inv;
      if (dropped) {
        const uint64_t elem = hs_attention_dropout_elem(h, i, j, seq_len);
        const float f = hs_dropout_factor(key, (uint64_t)(first_sample + b), elem, p, keep_scale);
        dropped[r * (size_t)seq_len + j] = (T)(pj * f);
        s[j] = (T)(f == 0.0f ? -pj : pj); /* sign bit marks a dropped probability */
      } else {
        s[j] = (T)pj;
      }
    }
  }
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
  HS_CUDA_LAUNCHED("attention_mask_bias_kernel");
}

/* ---- forward ------------------------------------------------------------------------------------------- */

extern "C" void hs_cuda_attention_forward(const hs_backend *be, float *ctx, float *probs, const float *qkv,
                                          const float *mask_bias, int batch, int seq_len, int heads, int head_dim,
                                          float p, uint64_t key, int64_t first_sample) {
  if (batch <= 0 || seq_len <= 0 || heads <= 0 || head_dim <= 0) return;
  const int L = seq_len, d = head_dim, H = heads * head_dim, ld = 3 * H;
  const float score_scale = 1.0f / sqrtf((float)d);
  const int dropout = p > 0.0f;
  const size_t LL = (size_t)L * (size_t)L, units = (size_t)batch * (size_t)heads, rows = units * (size_t)L;
  const unit_layout tok = {(int64_t)L * ld, d};        /* q, k, v in qkv[B,L,3H] */
  const unit_layout merged = {(int64_t)L * H, d};      /* ctx[B,L,H] */
  const unit_layout square = {(int64_t)heads * (int64_t)LL, (int64_t)LL}; /* [B,heads,L,L] */
  cudaStream_t stream = hs_cuda_stream(be);

  /* scores[L,L] = Q·Kᵀ/√d, into probs */
  gemm_units(be, 0, 1, L, L, d, score_scale, qkv, tok, ld, qkv + H, tok, ld, 0.0f, probs, square, L, batch, heads);

  /* P (and P' with dropout) */
  float *pv = dropout ? (float *)hs_cuda_scratch(be, region_bytes(units * LL)) : probs;
  HS_LAUNCH(hs_grid_for_rows(rows), HS_BLOCK, 0, stream, softmax_dropout_forward_kernel<float>)(
      probs, dropout ? pv : nullptr, mask_bias, rows, heads, L, p, hs_dropout_keep_scale(p), key, first_sample);
  HS_CUDA_LAUNCHED("softmax_dropout_forward_kernel");

  /* ctx[b, :, h·d:(h+1)·d] = P'·V */
  gemm_units(be, 0, 0, L, d, L, 1.0f, pv, square, L, qkv + 2 * H, tok, ld, 0.0f, ctx, merged, H, batch, heads);
}

/* ---- backward ------------------------------------------------------------------------------------------ */

extern "C" void hs_cuda_attention_backward(const hs_backend *be, float *dqkv, const float *dctx, const float *qkv,
                                           const float *probs, int batch, int seq_len, int heads, int head_dim,
                                           float p, uint64_t key, int64_t first_sample) {
  (void)key;
  (void)first_sample; /* the dropout decisions are read back from the sign bits of probs, as on the CPU */
  if (batch <= 0 || seq_len <= 0 || heads <= 0 || head_dim <= 0) return;
  const int L = seq_len, d = head_dim, H = heads * head_dim, ld = 3 * H;
  const float score_scale = 1.0f / sqrtf((float)d);
  const int dropout = p > 0.0f;
  const float keep_scale = hs_dropout_keep_scale(p);
  const size_t LL = (size_t)L * (size_t)L, units = (size_t)batch * (size_t)heads, rows = units * (size_t)L;
  const unit_layout tok = {(int64_t)L * ld, d};
  const unit_layout merged = {(int64_t)L * H, d};
  const unit_layout square = {(int64_t)heads * (int64_t)LL, (int64_t)LL};
  cudaStream_t stream = hs_cuda_stream(be);

  /* one scratch region, carved: dp[B,heads,L,L] (dP' then dS), then P'[B,heads,L,L] with dropout */
  const size_t region = region_bytes(units * LL);
  char *scratch = (char *)hs_cuda_scratch(be, dropout ? 2 * region : region);
  float *dp = (float *)scratch;
  const float *pv = probs;
  if (dropout) {
    float *kept = (float *)(scratch + region);
    HS_LAUNCH(hs_grid_for(units * LL), HS_BLOCK, 0, stream, kept_probs_kernel<float>)(kept, probs, units * LL,
                                                                                      keep_scale);
    HS_CUDA_LAUNCHED("kept_probs_kernel");
    pv = kept;
  }

  /* dP'[L,L] = dC·Vᵀ ;  dV[L,d] = P'ᵀ·dC */
  gemm_units(be, 0, 1, L, L, d, 1.0f, dctx, merged, H, qkv + 2 * H, tok, ld, 0.0f, dp, square, L, batch, heads);
  gemm_units(be, 1, 0, L, d, L, 1.0f, pv, square, L, dctx, merged, H, 0.0f, dqkv + 2 * H, tok, ld, batch, heads);

  /* dS = P ⊙ (dP - rowsum(P ⊙ dP)), dP = keep·dP'/(1-p) */
  HS_LAUNCH(hs_grid_for_rows(rows), HS_BLOCK, 0, stream, softmax_dropout_backward_kernel<float>)(
      dp, probs, rows, L, dropout, keep_scale);
  HS_CUDA_LAUNCHED("softmax_dropout_backward_kernel");

  /* dQ = dS·K/√d ;  dK = dSᵀ·Q/√d */
  gemm_units(be, 0, 0, L, d, L, score_scale, dp, square, L, qkv + H, tok, ld, 0.0f, dqkv, tok, ld, batch, heads);
  gemm_units(be, 1, 0, L, d, L, score_scale, dp, square, L, qkv, tok, ld, 0.0f, dqkv + H, tok, ld, batch, heads);
}
