/* Relative-position multi-head attention with segment memory (Transformer-XL) on the CUDA backend, with
 * the semantics of the CPU (src/backend/cpu/cpu_rel_attention.c; contract: rel_attention_forward in
 * src/backend/backend.h; index math: kernels/math/rel_attention.h). b sequences, n heads of d, qlen
 * queries, klen = mlen + qlen keys, H = n·d, unit u = (s, h):
 *
 *   Qw = Q + r_w_bias_h, Qr = Q + r_r_bias_h      bias_kernel, into scratch: Qw [b, n, qlen, d] (unit
 *                                                   order, as probs), Qr [n, b, qlen, d] (head order)
 *   K, V head-major [b, n, klen, d]                one split-heads kernel (kernels/heads.cuh)
 *   AC = Qw·Kᵀ -> probs [b, n, qlen, klen]         ONE strided-batched GEMM over the b·n units
 *   BDraw_h = Qr_h·R_hᵀ -> scratch [n, b·qlen, klen]  one strided-batched GEMM over the heads: R is
 *                                                     shared by the sequences, so a head's b·qlen
 *                                                     query rows make one [b·qlen, d] matrix
 *   P = softmax_j(scale·(AC[i][j] + BDraw[i][j+qlen-1-i])) over the allowed keys, 0 elsewhere; P' =
 *       keep·P/(1-p), dropped P stored with its sign bit set   score_softmax_kernel, a warp per row
 *   ctx = P'·V                                     one GEMM over the units, head-major, then one
 *                                                   merge-heads kernel into ctx [b, qlen, H]
 * (a unit (s, h) starts at s·klen·3H + h·d in qkv, which is no single stride over s·n + h: hence the
 * head-major copies, so that each product is one call rather than min(b, n) calls)
 *
 * Backward (dS = P ⊙ (dP - rowsum(P ⊙ dP)), dP = keep·(dC·Vᵀ)/(1-p), as the CPU):
 *   dV = P'ᵀ·dC;  dK = scale·dSᵀ·Qw;  dQw = scale·dS·K    one GEMM each over the units, on head-major
 *       copies of K, V and dC; dK and dV merged back into dqkv by one merge-heads kernel
 *   dBDraw[i][t] = dS[i][t-(qlen-1-i)] (0 for t < qlen-1-i)               shift_back_kernel
 *   dQr_h = scale·dBDraw_h·R_h;  dr[:, h·d..] = scale·dBDraw_hᵀ·Qr_h       GEMMs over the heads: the
 *       sum over the sequences is the GEMM's inner dimension b·qlen, written straight into dr
 *   dq = dQw + dQr (memory rows' q columns 0)                             dq_kernel
 *   dr_w_bias += Σ_s Σ_i dQw, dr_r_bias += Σ_s Σ_i dQr                   bias_grad_kernel, a thread
 *       per (h, c) summing queries in order per sequence, then sequences in order (the CPU's order)
 * No atomics: every output element is written by one thread or one GEMM; the row reductions are
 * fixed butterflies of __shfl_xor_sync, so results are deterministic. */
#include <math.h>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "attention_common.cuh"
#include "heads.cuh"
#include "slots.cuh"
#include "warp.cuh"
#include "math/dropout.h"
#include "math/fast_exp_erf.h"
#include "math/rel_attention.h"

#include "backend/cuda/cuda_blas.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"

namespace {

#define FOR_EACH_ELEMENT(e, n) \
  for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < (n); e += (size_t)gridDim.x * blockDim.x)

/* qr [n, b, qlen, d], qw [b, n, qlen, d]: element (h, s, i, c) = qkv[s, mlen + i, h·d + c] + r_r_bias /
 * r_w_bias[h, c] */
template <class T>
__global__ void bias_kernel(T *qw, T *qr, const T *qkv, const T *r_w_bias, const T *r_r_bias, int batch, int qlen,
                            int mlen, int heads, int head_dim) {
  const size_t n = (size_t)heads * batch * qlen * head_dim;
  const int klen = mlen + qlen, H = heads * head_dim;
  FOR_EACH_ELEMENT(e, n) {
    const int c = (int)(e % (size_t)head_dim);
    const size_t row = e / (size_t)head_dim; /* (h·b + s)·qlen + i */
    const int i = (int)(row % (size_t)qlen);
    const size_t hs = row / (size_t)qlen;
    const int s = (int)(hs % (size_t)batch), h = (int)(hs / (size_t)batch);
    const float q = (float)qkv[((size_t)s * klen + (size_t)(mlen + i)) * (size_t)(3 * H) + (size_t)h * head_dim + c];
    const size_t bi = (size_t)h * head_dim + c;
    qw[(((size_t)s * heads + (size_t)h) * qlen + (size_t)i) * head_dim + c] = (T)(q + (float)r_w_bias[bi]);
    qr[e] = (T)(q + (float)r_r_bias[bi]);
  }
}

/* In place on probs [b, n, qlen, klen] (holding AC): row (s, h, i) with bd the raw BD rows
 * [n, b, qlen, klen]. Allowed keys [lo, hi]: s_j = scale·(AC_j + BDraw_{j+qlen-1-i}), P_j =
 * e^{s_j - max}/Σ e^{s_k - max} (the exponential recomputed rather than stored); masked P_j = 0. With
 * dropout (dropped != NULL): P'_j = P_j·factor_j into dropped and P_j stored negated where dropped. */
template <class T>
__global__ void score_softmax_kernel(T *probs, T *dropped, const T *bd, int batch, int qlen, int mlen, int heads,
                                     int lower_shift, float scale, hs_dropout_rate rate, uint64_t key,
                                     int64_t first_sample, const hs_dropout_slot *ds) {
  hs_dropout_slot_read(ds, key, first_sample);
  const int lane = threadIdx.x % HS_WARP;
  const int klen = mlen + qlen;
  const size_t rows = (size_t)batch * heads * qlen;
  FOR_EACH_WARP_ROW(r, rows) {
    const int i = (int)(r % (size_t)qlen);
    const size_t unit = r / (size_t)qlen; /* s·n + h */
    const int s = (int)(unit / (size_t)heads), h = (int)(unit % (size_t)heads);
    T *ac = probs + r * (size_t)klen;
    const T *bdr = bd + (((size_t)h * batch + s) * qlen + i) * (size_t)klen;
    const int lo = hs_rel_key_lo(i, lower_shift), hi = hs_rel_key_hi(i, mlen), shift = hs_rel_shift_col(i, 0, qlen);
    float m = -INFINITY;
    for (int j = lo + lane; j <= hi; j += HS_WARP) {
      const float v = scale * ((float)ac[j] + (float)bdr[j + shift]);
      m = v > m ? v : m;
    }
    m = warp_max(m);
    float sum = 0.0f;
    for (int j = lo + lane; j <= hi; j += HS_WARP)
      sum += hs_exp_fast(scale * ((float)ac[j] + (float)bdr[j + shift]) - m);
    const float inv = 1.0f / warp_sum(sum);
    const uint64_t sample_key = dropped ? hs_attention_sample_key(key, (uint64_t)(first_sample + s)) : 0;
    const uint32_t row_key = hs_attention_row_key(sample_key, hs_attention_dropout_row(h, i, qlen));
    for (int j = lane; j < klen; j += HS_WARP) {
      const float pj =
          j >= lo && j <= hi ? hs_exp_fast(scale * ((float)ac[j] + (float)bdr[j + shift]) - m) * inv : 0.0f;
      if (dropped) {
        const float f = hs_attention_dropout_factor(sample_key, row_key, (uint32_t)j, rate);
        dropped[r * (size_t)klen + j] = (T)(pj * f);
        ac[j] = (T)(f == 0.0f ? -pj : pj); /* sign bit marks a dropped probability */
      } else {
        ac[j] = (T)pj;
      }
    }
  }
}

/* dbd [n, b, qlen, klen] from dS [b, n, qlen, klen]: dbd[h,s,i,t] = dS[s,h,i,t-(qlen-1-i)], 0 for
 * t < qlen-1-i (raw columns no key reads) */
template <class T>
__global__ void shift_back_kernel(T *dbd, const T *ds, int batch, int qlen, int klen, int heads) {
  const size_t n = (size_t)heads * batch * qlen * klen;
  FOR_EACH_ELEMENT(e, n) {
    const int t = (int)(e % (size_t)klen);
    const size_t row = e / (size_t)klen; /* (h·b + s)·qlen + i */
    const int i = (int)(row % (size_t)qlen);
    const size_t hs = row / (size_t)qlen;
    const int s = (int)(hs % (size_t)batch), h = (int)(hs / (size_t)batch);
    const int j = t - hs_rel_shift_col(i, 0, qlen);
    dbd[e] = j >= 0 ? ds[(((size_t)s * heads + h) * qlen + i) * (size_t)klen + (size_t)j] : (T)0.0f;
  }
}

/* q columns of dqkv [b, klen, 3H]: 0 on the memory rows, dQw ([b, n, qlen, d]) + dQr ([n, b, qlen, d]) on the
 * queries */
template <class T>
__global__ void dq_kernel(T *dqkv, const T *dqw, const T *dqr, int batch, int qlen, int mlen, int heads,
                          int head_dim) {
  const int klen = mlen + qlen, H = heads * head_dim;
  const size_t n = (size_t)batch * klen * H;
  FOR_EACH_ELEMENT(e, n) {
    const int col = (int)(e % (size_t)H);
    const size_t row = e / (size_t)H; /* s·klen + t */
    const int t = (int)(row % (size_t)klen), s = (int)(row / (size_t)klen);
    float v = 0.0f;
    if (t >= mlen) {
      const int h = col / head_dim, c = col % head_dim;
      const size_t src_r = (((size_t)h * batch + s) * qlen + (size_t)(t - mlen)) * head_dim + c;
      const size_t src_w = (((size_t)s * heads + h) * qlen + (size_t)(t - mlen)) * head_dim + c;
      v = (float)dqw[src_w] + (float)dqr[src_r];
    }
    dqkv[row * (size_t)(3 * H) + col] = (T)v;
  }
}

/* dr_w_bias[h, c] += Σ_s (Σ_i dQw[s,h,i,c]), likewise dr_r_bias from dQr[h,s,i,c]: queries in order per
 * sequence, then the sequences in order, as the CPU adds them. */
template <class T>
__global__ void bias_grad_kernel(T *dr_w_bias, T *dr_r_bias, const T *dqw, const T *dqr, int batch, int qlen,
                                 int heads, int head_dim) {
  FOR_EACH_ELEMENT(e, (size_t)heads * head_dim) {
    const int h = (int)(e / (size_t)head_dim), c = (int)(e % (size_t)head_dim);
    float sw = 0.0f, sr = 0.0f;
    for (int s = 0; s < batch; s++) {
      float pw = 0.0f, pr = 0.0f;
      const size_t base_r = ((size_t)h * batch + s) * qlen * (size_t)head_dim + c;
      const size_t base_w = ((size_t)s * heads + h) * qlen * (size_t)head_dim + c;
      for (int i = 0; i < qlen; i++) {
        pw += (float)dqw[base_w + (size_t)i * head_dim];
        pr += (float)dqr[base_r + (size_t)i * head_dim];
      }
      sw += pw;
      sr += pr;
    }
    dr_w_bias[e] = (T)((float)dr_w_bias[e] + sw);
    dr_r_bias[e] = (T)((float)dr_r_bias[e] + sr);
  }
}

/* ---- host side ------------------------------------------------------------------------------------------ */

/* The shapes both passes use. */
struct rel_shape {
  int batch, qlen, mlen, klen, heads, d, H, ld;
  size_t QK, units, heads_q; /* qlen·klen, b·n, b·qlen·d (one head's block of qr) */
  int64_t sq, sk;            /* unit strides of the head-major [.., qlen, d] and [.., klen, d] tensors */
  size_t kv;                 /* floats of one head-major [b, n, klen, d] tensor */
};

rel_shape make_shape(int batch, int qlen, int mlen, int heads, int head_dim) {
  rel_shape r;
  r.batch = batch, r.qlen = qlen, r.mlen = mlen, r.klen = mlen + qlen, r.heads = heads, r.d = head_dim;
  r.H = heads * head_dim, r.ld = 3 * r.H;
  r.QK = (size_t)qlen * (size_t)r.klen, r.units = (size_t)batch * (size_t)heads;
  r.heads_q = (size_t)batch * (size_t)qlen * (size_t)head_dim;
  r.sq = (int64_t)qlen * head_dim, r.sk = (int64_t)r.klen * head_dim;
  r.kv = r.units * (size_t)r.klen * (size_t)head_dim;
  return r;
}

void launch_bias(const hs_backend *be, const rel_shape &sh, float *qw, float *qr, const float *qkv,
                 const float *r_w_bias, const float *r_r_bias) {
  HS_LAUNCH(hs_grid_for((size_t)sh.heads * sh.heads_q), HS_BLOCK, 0, hs_cuda_stream(be), bias_kernel<float>)(
      qw, qr, qkv, r_w_bias, r_r_bias, sh.batch, sh.qlen, sh.mlen, sh.heads, sh.d);
  /* q read, qw and qr written, the two biases */
  HS_CUDA_LAUNCHED("rel_attention bias_kernel", (3 * (size_t)sh.heads * sh.heads_q + 2 * (size_t)sh.H) * sizeof(float));
}

} // namespace

/* ---- forward ------------------------------------------------------------------------------------------- */

extern "C" void hs_cuda_rel_attention_forward(const hs_backend *be, float *ctx, float *probs, const float *qkv,
                                              const float *r, const float *r_w_bias, const float *r_r_bias, int batch,
                                              int qlen, int mlen, int heads, int head_dim, int lower_shift,
                                              float scale, float p, uint64_t key, int64_t first_sample) {
  if (batch <= 0 || qlen <= 0 || heads <= 0 || head_dim <= 0) return;
  const rel_shape sh = make_shape(batch, qlen, mlen, heads, head_dim);
  const int dropout = p > 0.0f;
  cudaStream_t stream = hs_cuda_stream(be);
  const hs_dropout_slot *ds = dropout ? hs_cuda_dropout_slot(be, key, first_sample) : nullptr;
  if (hs_cuda_slots_only(be)) return; /* recorded: the slots only (cuda_slots.h) */

  /* scratch: qw [b, n, qlen, d], qr [n, b, qlen, d] (and ctx head-major [b, n, qlen, d] after qw); k, v
   * [b, n, klen, d]; BDraw [n, b, qlen, klen]; P' [b, n, qlen, klen] with dropout */
  const size_t rq = region_bytes((size_t)heads * sh.heads_q), rs = region_bytes(sh.units * sh.QK);
  const size_t rk = region_bytes(sh.kv);
  char *scratch = (char *)hs_cuda_scratch(be, 3 * rq + 2 * rk + rs + (dropout ? rs : 0));
  float *qw = (float *)scratch, *qr = (float *)(scratch + rq), *ctx_h = (float *)(scratch + 2 * rq);
  float *k = (float *)(scratch + 3 * rq), *v = (float *)(scratch + 3 * rq + rk);
  float *bd = (float *)(scratch + 3 * rq + 2 * rk);
  float *dropped = dropout ? (float *)(scratch + 3 * rq + 2 * rk + rs) : nullptr;

  launch_bias(be, sh, qw, qr, qkv, r_w_bias, r_r_bias);
  split_heads(stream, head_parts<float>{{k, v, nullptr}}, qkv,
              heads_shape{(size_t)batch, (size_t)sh.klen, sh.ld, sh.H, 2, heads, head_dim});
  /* AC = Qw·Kᵀ into probs */
  gemm_units(be, 0, 1, qlen, sh.klen, head_dim, 1.0f, qw, head_dim, sh.sq, k, head_dim, sh.sk, probs, sh.klen,
             (int64_t)sh.QK, sh.units);
  /* BDraw_h [b·qlen, klen] = Qr_h·R_hᵀ, one batch over the heads */
  hs_cuda_gemm_strided_batched(be, 0, 1, batch * qlen, sh.klen, head_dim, 1.0f, qr, head_dim, (int64_t)sh.heads_q, r,
                               sh.H, head_dim, 0.0f, bd, sh.klen, (int64_t)batch * (int64_t)sh.QK, heads);
  const size_t rows = sh.units * (size_t)qlen;
  HS_LAUNCH(hs_grid_for_rows(rows), HS_BLOCK, 0, stream, score_softmax_kernel<float>)(
      probs, dropped, bd, batch, qlen, mlen, heads, lower_shift, scale, hs_dropout_rate_of(p), key,
      first_sample, ds);
  /* AC read, P written over it, BDraw read (P' written with dropout) */
  HS_CUDA_LAUNCHED("score_softmax_kernel", sh.units * sh.QK * (dropout ? 4 : 3) * sizeof(float));
  /* ctx[s, :, h·d:(h+1)·d] = P'·V, head-major, then merged */
  gemm_units(be, 0, 0, qlen, head_dim, sh.klen, 1.0f, dropout ? dropped : probs, sh.klen, (int64_t)sh.QK, v, head_dim,
             sh.sk, ctx_h, head_dim, sh.sq, sh.units);
  merge_heads(stream, ctx, head_parts<const float>{{ctx_h, nullptr, nullptr}},
              heads_shape{(size_t)batch, (size_t)qlen, sh.H, 0, 1, heads, head_dim});
}

/* ---- backward ------------------------------------------------------------------------------------------ */

extern "C" void hs_cuda_rel_attention_backward(const hs_backend *be, float *dqkv, float *dr, float *dr_w_bias,
                                               float *dr_r_bias, const float *dctx, const float *qkv, const float *r,
                                               const float *r_w_bias, const float *r_r_bias, const float *probs,
                                               int batch, int qlen, int mlen, int heads, int head_dim, int lower_shift,
                                               float scale, float p, uint64_t key, int64_t first_sample) {
  (void)key;
  (void)first_sample; /* the dropout decisions are read back from the sign bits of probs, as on the CPU */
  (void)lower_shift;  /* masked keys have P = 0, hence dS = 0 */
  if (hs_cuda_slots_only(be)) return; /* recorded: no slots */
  if (qlen <= 0 || heads <= 0 || head_dim <= 0) return;
  if (batch <= 0) { /* dr is a sum over no sequences */
    be->zero(be, dr, (size_t)(mlen + qlen) * (size_t)heads * (size_t)head_dim * sizeof(float));
    return;
  }
  const rel_shape sh = make_shape(batch, qlen, mlen, heads, head_dim);
  const int dropout = p > 0.0f;
  const float keep_scale = hs_dropout_keep_scale(p);
  cudaStream_t stream = hs_cuda_stream(be);

  /* scratch: qw, dQw [b, n, qlen, d], qr, dQr [n, b, qlen, d], dC [b, n, qlen, d]; k, v [b, n, klen, d];
   * dP (then dS) [b, n, qlen, klen]; dBDraw [n, b, qlen, klen]; P' [b, n, qlen, klen] with dropout. dV
   * goes into v once dP' = dC·Vᵀ has read it, dK into k once dQw = scale·dS·K has. */
  const size_t rq = region_bytes((size_t)heads * sh.heads_q), rs = region_bytes(sh.units * sh.QK);
  const size_t rk = region_bytes(sh.kv);
  char *scratch = (char *)hs_cuda_scratch(be, 5 * rq + 2 * rk + 2 * rs + (dropout ? rs : 0));
  float *qw = (float *)scratch, *qr = (float *)(scratch + rq), *dqw = (float *)(scratch + 2 * rq),
        *dqr = (float *)(scratch + 3 * rq), *dc = (float *)(scratch + 4 * rq);
  float *k = (float *)(scratch + 5 * rq), *v = (float *)(scratch + 5 * rq + rk);
  float *dp = (float *)(scratch + 5 * rq + 2 * rk), *dbd = (float *)(scratch + 5 * rq + 2 * rk + rs);
  const float *pv = probs;
  if (dropout) {
    float *kept = (float *)(scratch + 5 * rq + 2 * rk + 2 * rs);
    HS_LAUNCH(hs_grid_for(sh.units * sh.QK), HS_BLOCK, 0, stream, kept_probs_kernel<float>)(kept, probs,
                                                                                          sh.units * sh.QK, keep_scale);
    HS_CUDA_LAUNCHED("kept_probs_kernel", 2 * sh.units * sh.QK * sizeof(float));
    pv = kept;
  }
  launch_bias(be, sh, qw, qr, qkv, r_w_bias, r_r_bias);
  split_heads(stream, head_parts<float>{{k, v, nullptr}}, qkv,
              heads_shape{(size_t)batch, (size_t)sh.klen, sh.ld, sh.H, 2, heads, head_dim});
  split_heads(stream, head_parts<float>{{dc, nullptr, nullptr}}, dctx,
              heads_shape{(size_t)batch, (size_t)qlen, sh.H, 0, 1, heads, head_dim});

  /* dP' = dC·Vᵀ ;  dV = P'ᵀ·dC (into v) */
  gemm_units(be, 0, 1, qlen, sh.klen, head_dim, 1.0f, dc, head_dim, sh.sq, v, head_dim, sh.sk, dp, sh.klen,
             (int64_t)sh.QK, sh.units);
  gemm_units(be, 1, 0, sh.klen, head_dim, qlen, 1.0f, pv, sh.klen, (int64_t)sh.QK, dc, head_dim, sh.sq, v, head_dim,
             sh.sk, sh.units);
  /* dS */
  const size_t rows = sh.units * (size_t)qlen;
  HS_LAUNCH(hs_grid_for_rows(rows), HS_BLOCK, 0, stream, softmax_dropout_backward_kernel<float>)(
      dp, probs, rows, sh.klen, dropout, keep_scale);
  /* dp read + written, P */
  HS_CUDA_LAUNCHED("softmax_dropout_backward_kernel", 3 * sh.units * sh.QK * sizeof(float));
  /* dQw = scale·dS·K ;  dK = scale·dSᵀ·Qw (into k); dK | dV merged into dqkv's k and v columns */
  gemm_units(be, 0, 0, qlen, head_dim, sh.klen, scale, dp, sh.klen, (int64_t)sh.QK, k, head_dim, sh.sk, dqw, head_dim,
             sh.sq, sh.units);
  gemm_units(be, 1, 0, sh.klen, head_dim, qlen, scale, dp, sh.klen, (int64_t)sh.QK, qw, head_dim, sh.sq, k, head_dim,
             sh.sk, sh.units);
  merge_heads(stream, dqkv, head_parts<const float>{{k, v, nullptr}},
              heads_shape{(size_t)batch, (size_t)sh.klen, sh.ld, sh.H, 2, heads, head_dim});
  /* dBDraw, then per head: dQr_h = scale·dBDraw_h·R_h ; dr[:, h·d..] = scale·dBDraw_hᵀ·Qr_h (Σ over s) */
  HS_LAUNCH(hs_grid_for(sh.units * sh.QK), HS_BLOCK, 0, stream, shift_back_kernel<float>)(dbd, dp, batch, qlen,
                                                                                        sh.klen, heads);
  HS_CUDA_LAUNCHED("shift_back_kernel", 2 * sh.units * sh.QK * sizeof(float));
  const int64_t bd_stride = (int64_t)batch * (int64_t)sh.QK;
  hs_cuda_gemm_strided_batched(be, 0, 0, batch * qlen, head_dim, sh.klen, scale, dbd, sh.klen, bd_stride, r, sh.H,
                               head_dim, 0.0f, dqr, head_dim, (int64_t)sh.heads_q, heads);
  hs_cuda_gemm_strided_batched(be, 1, 0, sh.klen, head_dim, batch * qlen, scale, dbd, sh.klen, bd_stride, qr,
                               head_dim, (int64_t)sh.heads_q, 0.0f, dr, sh.H, head_dim, heads);
  /* dq, then the bias gradients */
  HS_LAUNCH(hs_grid_for((size_t)batch * sh.klen * sh.H), HS_BLOCK, 0, stream, dq_kernel<float>)(
      dqkv, dqw, dqr, batch, qlen, mlen, heads, head_dim);
  /* the q columns of dqkv written, dQw and dQr read */
  HS_CUDA_LAUNCHED("dq_kernel", ((size_t)batch * sh.klen * sh.H + 2 * (size_t)heads * sh.heads_q) * sizeof(float));
  HS_LAUNCH(hs_grid_for((size_t)sh.H), HS_BLOCK, 0, stream, bias_grad_kernel<float>)(dr_w_bias, dr_r_bias, dqw, dqr,
                                                                                   batch, qlen, heads, head_dim);
  /* dQw, dQr read, the two bias gradients read and written */
  HS_CUDA_LAUNCHED("rel_attention bias_grad_kernel", (2 * (size_t)heads * sh.heads_q + 4 * (size_t)sh.H) * sizeof(float));
}
