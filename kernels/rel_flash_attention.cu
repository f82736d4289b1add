/* Fused (flash-style) relative-position attention for Transformer-XL on the CUDA backend: the contract
 * is rel_flash_attention_forward/backward (src/backend/ops.def), the index math
 * kernels/math/rel_attention.h, the reference src/backend/cpu/cpu_rel_flash_attention.c. No
 * [qlen, klen] tensor is ever stored: the forward keeps ctx and lse [b, n, qlen] (the log-sum-exp of
 * each query row's scaled scores), the backward recomputes the probabilities from them.
 *
 * Tiles are 16 x 16 (kTile); every product is kernels/tile_mma.cuh's warp_tile_mma on shared-memory
 * tiles whose inner dimension is the head size padded with zeros to dp (a multiple of 16). A block is
 * one warp. For a query tile [i0, i0+16) and a key tile [j0, j0+16):
 *   AC[a][b]  = (q_{i0+a} + r_w_bias)·k_{j0+b}                                 one tile product
 *   BD[a][b]  = (q_{i0+a} + r_r_bias)·r[t],  t = j0+b + qlen-1-(i0+a)          (the relative shift)
 * t - (j0 - i0 + qlen-1-15) = 15 + b - a lies in [0, 31): the BD entries of a tile pair need only the
 * 31 r rows of a window starting at t0 = j0 - i0 + qlen - 16. BDwin[a][w] = Qr_a·r[t0 + w] (w < 32,
 * two tile products, rows outside [0, klen) zero) is computed into shared memory and the shifted
 * diagonal BD[a][b] = BDwin[a][15 + b - a] picked from it.
 *
 * Forward (rel_flash_forward_kernel, a block per (query tile, sequence·head)): key tiles streamed in
 * order, scores s = scale·(AC + BD) masked (causal j <= mlen + i; same_length j > i - lower_shift),
 * online softmax per row (running max m and sum l, the context rescaled when m grows), dropout from
 * the counter hash on the unnormalised weights, ctx = O / l, lse = m + log l.
 *
 * Backward, with P = exp(s - lse), P' = keep·P/(1-p), dP' = dC·Vᵀ, D_i = rowsum(dC ∘ ctx) =
 * Σ_j P'_ij dP'_ij, dS = P ⊙ (keep/(1-p)·dP' - D):
 *   D                        d_kernel, a thread per query row
 *   dQw = scale·dS·K, dQr = scale·dBDwin·Rwin   rel_flash_dq_kernel: a block per query tile, key tiles
 *       streamed; dBDwin[a][w] = dS[a][w - 15 + a] is the shift undone in the window; dq = dQw + dQr
 *       into dqkv, dQw and dQr kept for the bias gradients
 *   dV = P'ᵀ·dC, dK = scale·dSᵀ·Qw   rel_flash_dkv_kernel: a block per key tile, query tiles streamed
 *       (also the memory rows' q columns, 0)
 *   dr[t] = scale·Σ_s Σ_i dS[i][t-(qlen-1-i)]·Qr_i   rel_flash_dr_kernel: a block per (r-row tile,
 *       head), the sequences and query tiles in order: for query tile i0 and r rows [t0, t0+16) the
 *       keys j = t - (qlen-1) + i lie in a 32-key window from t0 - (qlen-1) + i0 (AC and dP' two tile
 *       products on it), while the BD term of (a, tt) is Qr_a·r[t0 + tt] (one tile product on the r
 *       tile itself); dS is recomputed on that diagonal, dBD[a][tt] = dS[a][a + tt], and dBDᵀ·Qr summed
 *   dr_w_bias += Σ_s Σ_i dQw, dr_r_bias += Σ_s Σ_i dQr   bias_grad_kernel, the CPU's order
 * Determinism: every output element is written by one block (no atomics); each block's sums run over
 * tiles in an order fixed by the shapes, and the sum over sequences of dr runs inside one block.
 *
 * 16-bit outputs (optional): ctx16, dqkv16, dr16 get to_half's bits of each value as it is written (the
 * 16-bit type of the precision: bfloat16 under bf16, IEEE half otherwise), the twins the products read.
 *
 * Operand storage: float under fp32 / tf32 (fp32 products), bf16 / fp16 tiles under bf16 / fp16, the
 * operands the unfused path's GEMMs round (q + bias, k, v, r, P', dC, dS, the shifted dS). Sums,
 * softmax, lse and D stay fp32. head_dim <= 64 (the shared memory of one block stays under 48 KiB). */
#include <math.h>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "tile_mma.cuh"
#include "math/dropout.h"
#include "math/fast_exp_erf.h"
#include "math/rel_attention.h"
#include "util/lowp.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"
#include "util/check.h"

namespace {

constexpr int kMaxHeadDim = 64;

__host__ __device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }
__host__ __device__ __forceinline__ int imax(int a, int b) { return a > b ? a : b; }

/* The shapes and scalars every kernel reads. */
struct rf_args {
  const float *qkv, *r, *rwb, *rrb;
  int batch, qlen, mlen, klen, heads, d, dp, H, ld, lower_shift;
  float scale, p, keep_scale;
  uint64_t key;
  int64_t first_sample;
  int bf16; /* the 16-bit outputs' type (ctx16, dqkv16, dr16): 1 bfloat16, 0 IEEE half */
};

/* to_half's bits of v in the 16-bit type of the precision */
__device__ __forceinline__ uint16_t half_bits(const rf_args &g, float v) {
  return g.bf16 ? hs_bf16_bits(v) : hs_fp16_bits(v);
}

/* Shared-memory carving: count elements of X, every region 32-byte aligned (tile_mma's rule). */
template <class X>
__device__ __forceinline__ X *carve(unsigned char *&at, int count) {
  X *p = reinterpret_cast<X *>(at);
  at += ((size_t)count * sizeof(X) + 31) / 32 * 32;
  return p;
}
template <class T>
inline size_t carve_bytes(int count) {
  return ((size_t)count * sizeof(T) + 31) / 32 * 32;
}

/* dst[rows][dp] = src rows row0..row0+rows-1 (row stride ld) + bias, rounded to T; rows outside
 * [0, row_end) and columns >= d are 0. */
template <class T>
__device__ void load_rows(T *dst, int rows, int dp, const float *src, size_t ld, int row0, int row_end, int d,
                          const float *bias) {
  for (int e = threadIdx.x; e < rows * dp; e += blockDim.x) {
    const int rr = e / dp, c = e % dp, row = row0 + rr;
    float v = 0.0f;
    if (c < d && row >= 0 && row < row_end) {
      v = src[(size_t)row * ld + c];
      if (bias) v += bias[c];
    }
    tile_store(dst[e], v);
  }
}

/* vals[16] = src[unit·qlen + i0 + a] for query rows a < qlen, else 0 */
__device__ void load_row_stats(float *vals, const float *src, size_t unit, int qlen, int i0) {
  for (int a = threadIdx.x; a < kTile; a += blockDim.x) vals[a] = i0 + a < qlen ? src[unit * qlen + i0 + a] : 0.0f;
}

__device__ __forceinline__ bool allowed(const rf_args &g, int i, int j) {
  return i < g.qlen && j >= 0 && j >= hs_rel_key_lo(i, g.lower_shift) && j <= hs_rel_key_hi(i, g.mlen);
}

__device__ __forceinline__ float drop_factor(const rf_args &g, int s, int h, int i, int j) {
  if (g.p <= 0.0f) return 1.0f;
  return hs_dropout_factor(g.key, (uint64_t)(g.first_sample + s), hs_rel_dropout_elem(h, i, j, g.qlen, g.klen), g.p,
                           g.keep_scale);
}

/* First and last key tile a query tile [i0, i0+16) attends to. */
__device__ __forceinline__ void key_tiles(const rf_args &g, int i0, int &first, int &last) {
  first = hs_rel_key_lo(i0, g.lower_shift) / kTile * kTile;
  const int i_last = imin(i0 + kTile, g.qlen) - 1;
  last = imin(g.klen - 1, hs_rel_key_hi(i_last, g.mlen));
}

/* The first r row of a tile pair's 32-row window. */
__device__ __forceinline__ int r_window(const rf_args &g, int i0, int j0) { return j0 - i0 + g.qlen - 1 - 15; }

/* S[16][16] = scale·(Qw·Kᵀ + BD) for query tile i0, key tile j0 (masked: -inf); bdw fp32 [16][32]
 * scratch; rwin the 32 r rows from r_window(i0, j0). */
template <class T>
__device__ void score_tile(const rf_args &g, float *S, float *bdw, const T *qw, const T *qr, const T *kt,
                           const T *rwin, int i0, int j0) {
  const int dp = g.dp;
  warp_tile_mma(S, kTile, qw, dp, kt, dp, dp, true, false);
  warp_tile_mma(bdw, 2 * kTile, qr, dp, rwin, dp, dp, true, false);
  warp_tile_mma(bdw + kTile, 2 * kTile, qr, dp, rwin + kTile * dp, dp, dp, true, false);
  __syncwarp();
  for (int e = threadIdx.x; e < kTile * kTile; e += blockDim.x) {
    const int a = e / kTile, b = e % kTile;
    S[e] = allowed(g, i0 + a, j0 + b) ? g.scale * (S[e] + bdw[a * 2 * kTile + 15 + b - a]) : -INFINITY;
  }
  __syncwarp();
}

/* From scores S (replaced by dS): P = exp(S - lse), dP' = dC·Vᵀ into dpp [16][16], dS = P·(f·dP' - D);
 * P' = f·P into pt (row-major, or transposed [b][a]) when pt is not null. */
template <class T>
__device__ void ds_tile(const rf_args &g, float *S, float *dpp, T *pt, bool pt_transposed, const T *dct,
                        const T *vt, const float *lse_t, const float *d_t, int s, int h, int i0, int j0) {
  warp_tile_mma(dpp, kTile, dct, g.dp, vt, g.dp, g.dp, true, false);
  __syncwarp();
  for (int e = threadIdx.x; e < kTile * kTile; e += blockDim.x) {
    const int a = e / kTile, b = e % kTile;
    const float sc = S[e];
    const float pr = sc == -INFINITY ? 0.0f : hs_exp_fast(sc - lse_t[a]);
    const float f = pr != 0.0f ? drop_factor(g, s, h, i0 + a, j0 + b) : 0.0f;
    if (pt) tile_store(pt[pt_transposed ? b * kTile + a : e], pr * f);
    S[e] = pr * (f * dpp[e] - d_t[a]);
  }
  __syncwarp();
}

/* ---- forward ------------------------------------------------------------------------------------- */

/* grid (query tiles, b·n), one warp: ctx [b, qlen, H] and lse [b, n, qlen] of one query tile */
template <class T>
__global__ void rel_flash_forward_kernel(float *ctx, float *lse, uint16_t *ctx16, rf_args g) {
  const int dp = g.dp, i0 = blockIdx.x * kTile;
  const size_t unit = blockIdx.y;
  const int s = (int)(unit / (size_t)g.heads), h = (int)(unit % (size_t)g.heads);
  HS_DYNAMIC_SHARED(unsigned char, smem);
  unsigned char *at = smem;
  T *qw = carve<T>(at, kTile * dp), *qr = carve<T>(at, kTile * dp), *kt = carve<T>(at, kTile * dp);
  T *vt = carve<T>(at, kTile * dp), *rw = carve<T>(at, 2 * kTile * dp), *pt = carve<T>(at, kTile * kTile);
  float *S = carve<float>(at, kTile * kTile), *bdw = carve<float>(at, 2 * kTile * kTile);
  float *o = carve<float>(at, kTile * dp), *m = carve<float>(at, kTile), *l = carve<float>(at, kTile);

  const float *seq = g.qkv + (size_t)s * g.klen * g.ld + (size_t)h * g.d;
  load_rows(qw, kTile, dp, seq + (size_t)g.mlen * g.ld, g.ld, i0, g.qlen, g.d, g.rwb + (size_t)h * g.d);
  load_rows(qr, kTile, dp, seq + (size_t)g.mlen * g.ld, g.ld, i0, g.qlen, g.d, g.rrb + (size_t)h * g.d);
  for (int e = threadIdx.x; e < kTile * dp; e += blockDim.x) o[e] = 0.0f;
  for (int a = threadIdx.x; a < kTile; a += blockDim.x) m[a] = -INFINITY, l[a] = 0.0f;
  int first, last;
  key_tiles(g, i0, first, last);
  for (int j0 = first; j0 <= last; j0 += kTile) {
    __syncthreads();
    load_rows(kt, kTile, dp, seq + g.H, g.ld, j0, g.klen, g.d, (const float *)nullptr);
    load_rows(vt, kTile, dp, seq + 2 * g.H, g.ld, j0, g.klen, g.d, (const float *)nullptr);
    load_rows(rw, 2 * kTile, dp, g.r + (size_t)h * g.d, (size_t)g.H, r_window(g, i0, j0), g.klen, g.d,
              (const float *)nullptr);
    __syncthreads();
    score_tile(g, S, bdw, qw, qr, kt, rw, i0, j0);
    /* online softmax, a lane per row: rescale the row's context when its max grows */
    for (int a = threadIdx.x; a < kTile; a += blockDim.x) {
      float mx = m[a];
      for (int b = 0; b < kTile; b++) mx = fmaxf(mx, S[a * kTile + b]);
      const float corr = m[a] == -INFINITY ? 0.0f : hs_exp_fast(m[a] - mx);
      float sum = 0.0f;
      for (int b = 0; b < kTile; b++) {
        const float sc = S[a * kTile + b];
        const float e = sc == -INFINITY ? 0.0f : hs_exp_fast(sc - mx);
        sum += e;
        tile_store(pt[a * kTile + b], e == 0.0f ? 0.0f : e * drop_factor(g, s, h, i0 + a, j0 + b));
      }
      l[a] = l[a] * corr + sum;
      m[a] = mx;
      for (int c = 0; c < dp; c++) o[a * dp + c] *= corr;
    }
    __syncwarp();
    for (int cs = 0; cs < dp; cs += kTile) warp_tile_mma(o + cs, dp, pt, kTile, vt + cs, dp, kTile, false, true);
    __syncwarp();
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kTile * g.d; e += blockDim.x) {
    const int a = e / g.d, c = e % g.d, i = i0 + a;
    if (i >= g.qlen) continue;
    const size_t o_at = ((size_t)s * g.qlen + i) * g.H + (size_t)h * g.d + c;
    const float v = o[a * dp + c] / l[a];
    ctx[o_at] = v;
    if (ctx16) ctx16[o_at] = half_bits(g, v);
  }
  for (int a = threadIdx.x; a < kTile; a += blockDim.x)
    if (i0 + a < g.qlen) lse[unit * g.qlen + i0 + a] = m[a] + logf(l[a]);
}

/* ---- backward ------------------------------------------------------------------------------------ */

/* D[b, n, qlen]: D[s,h,i] = Σ_c dctx[s,i,h·d+c]·ctx[s,i,h·d+c], in column order */
__global__ void d_kernel(float *D, const float *dctx, const float *ctx, int batch, int qlen, int heads, int d) {
  const size_t rows = (size_t)batch * heads * qlen, H = (size_t)heads * d;
  for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < rows; e += (size_t)gridDim.x * blockDim.x) {
    const int i = (int)(e % (size_t)qlen);
    const size_t unit = e / (size_t)qlen;
    const size_t s = unit / (size_t)heads, h = unit % (size_t)heads;
    const size_t off = (s * qlen + i) * H + h * d;
    float acc = 0.0f;
    for (int c = 0; c < d; c++) acc += dctx[off + c] * ctx[off + c];
    D[e] = acc;
  }
}

/* grid (query tiles, b·n): dq into dqkv's q columns, dQw and dQr [b, qlen, H] for the bias gradients */
template <class T>
__global__ void rel_flash_dq_kernel(float *dqkv, uint16_t *dqkv16, float *dqw_out, float *dqr_out, const float *dctx,
                                    const float *lse, const float *D, rf_args g) {
  const int dp = g.dp, i0 = blockIdx.x * kTile;
  const size_t unit = blockIdx.y;
  const int s = (int)(unit / (size_t)g.heads), h = (int)(unit % (size_t)g.heads);
  HS_DYNAMIC_SHARED(unsigned char, smem);
  unsigned char *at = smem;
  T *qw = carve<T>(at, kTile * dp), *qr = carve<T>(at, kTile * dp), *dct = carve<T>(at, kTile * dp);
  T *kt = carve<T>(at, kTile * dp), *vt = carve<T>(at, kTile * dp), *rw = carve<T>(at, 2 * kTile * dp);
  T *dst = carve<T>(at, kTile * kTile), *dbw = carve<T>(at, 2 * kTile * kTile);
  float *S = carve<float>(at, kTile * kTile), *bdw = carve<float>(at, 2 * kTile * kTile);
  float *dpp = carve<float>(at, kTile * kTile), *accw = carve<float>(at, kTile * dp);
  float *accr = carve<float>(at, kTile * dp), *lse_t = carve<float>(at, kTile), *d_t = carve<float>(at, kTile);

  const float *seq = g.qkv + (size_t)s * g.klen * g.ld + (size_t)h * g.d;
  load_rows(qw, kTile, dp, seq + (size_t)g.mlen * g.ld, g.ld, i0, g.qlen, g.d, g.rwb + (size_t)h * g.d);
  load_rows(qr, kTile, dp, seq + (size_t)g.mlen * g.ld, g.ld, i0, g.qlen, g.d, g.rrb + (size_t)h * g.d);
  load_rows(dct, kTile, dp, dctx + (size_t)s * g.qlen * g.H + (size_t)h * g.d, (size_t)g.H, i0, g.qlen, g.d,
            (const float *)nullptr);
  load_row_stats(lse_t, lse, unit, g.qlen, i0);
  load_row_stats(d_t, D, unit, g.qlen, i0);
  for (int e = threadIdx.x; e < kTile * dp; e += blockDim.x) accw[e] = accr[e] = 0.0f;
  int first, last;
  key_tiles(g, i0, first, last);
  for (int j0 = first; j0 <= last; j0 += kTile) {
    __syncthreads();
    load_rows(kt, kTile, dp, seq + g.H, g.ld, j0, g.klen, g.d, (const float *)nullptr);
    load_rows(vt, kTile, dp, seq + 2 * g.H, g.ld, j0, g.klen, g.d, (const float *)nullptr);
    load_rows(rw, 2 * kTile, dp, g.r + (size_t)h * g.d, (size_t)g.H, r_window(g, i0, j0), g.klen, g.d,
              (const float *)nullptr);
    __syncthreads();
    score_tile(g, S, bdw, qw, qr, kt, rw, i0, j0);
    ds_tile(g, S, dpp, (T *)nullptr, false, dct, vt, lse_t, d_t, s, h, i0, j0);
    /* dS as an operand, and the shift undone into the window: dBDwin[a][w] = dS[a][w - 15 + a] */
    for (int e = threadIdx.x; e < kTile * kTile; e += blockDim.x) tile_store(dst[e], S[e]);
    for (int e = threadIdx.x; e < 2 * kTile * kTile; e += blockDim.x) {
      const int a = e / (2 * kTile), b = e % (2 * kTile) - 15 + a;
      tile_store(dbw[e], b >= 0 && b < kTile ? S[a * kTile + b] : 0.0f);
    }
    __syncwarp();
    for (int cs = 0; cs < dp; cs += kTile) {
      warp_tile_mma(accw + cs, dp, dst, kTile, kt + cs, dp, kTile, false, true);
      warp_tile_mma(accr + cs, dp, dbw, 2 * kTile, rw + cs, dp, 2 * kTile, false, true);
    }
    __syncwarp();
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kTile * g.d; e += blockDim.x) {
    const int a = e / g.d, c = e % g.d, i = i0 + a;
    if (i >= g.qlen) continue;
    const float w = g.scale * accw[a * dp + c], rr = g.scale * accr[a * dp + c];
    const size_t q_at = ((size_t)s * g.klen + g.mlen + i) * g.ld + (size_t)h * g.d + c;
    dqkv[q_at] = w + rr;
    if (dqkv16) dqkv16[q_at] = half_bits(g, w + rr);
    const size_t o = ((size_t)s * g.qlen + i) * g.H + (size_t)h * g.d + c;
    dqw_out[o] = w;
    dqr_out[o] = rr;
  }
}

/* grid (key tiles, b·n): dk, dv into dqkv (and 0 in the q columns of memory rows) */
template <class T>
__global__ void rel_flash_dkv_kernel(float *dqkv, uint16_t *dqkv16, const float *dctx, const float *lse, const float *D,
                                     rf_args g) {
  const int dp = g.dp, j0 = blockIdx.x * kTile;
  const size_t unit = blockIdx.y;
  const int s = (int)(unit / (size_t)g.heads), h = (int)(unit % (size_t)g.heads);
  HS_DYNAMIC_SHARED(unsigned char, smem);
  unsigned char *at = smem;
  T *qw = carve<T>(at, kTile * dp), *qr = carve<T>(at, kTile * dp), *dct = carve<T>(at, kTile * dp);
  T *kt = carve<T>(at, kTile * dp), *vt = carve<T>(at, kTile * dp), *rw = carve<T>(at, 2 * kTile * dp);
  T *ptt = carve<T>(at, kTile * kTile), *dst = carve<T>(at, kTile * kTile);
  float *S = carve<float>(at, kTile * kTile), *bdw = carve<float>(at, 2 * kTile * kTile);
  float *dpp = carve<float>(at, kTile * kTile), *acck = carve<float>(at, kTile * dp);
  float *accv = carve<float>(at, kTile * dp), *lse_t = carve<float>(at, kTile), *d_t = carve<float>(at, kTile);

  const float *seq = g.qkv + (size_t)s * g.klen * g.ld + (size_t)h * g.d;
  load_rows(kt, kTile, dp, seq + g.H, g.ld, j0, g.klen, g.d, (const float *)nullptr);
  load_rows(vt, kTile, dp, seq + 2 * g.H, g.ld, j0, g.klen, g.d, (const float *)nullptr);
  for (int e = threadIdx.x; e < kTile * dp; e += blockDim.x) acck[e] = accv[e] = 0.0f;
  /* query rows that reach a key of the tile: i >= j - mlen (causal), i <= j + lower_shift - 1 (same_length) */
  const int first = imax(0, j0 - g.mlen) / kTile * kTile;
  const int last = g.lower_shift > 0 ? imin(g.qlen - 1, j0 + kTile - 1 + g.lower_shift - 1) : g.qlen - 1;
  for (int i0 = first; i0 <= last; i0 += kTile) {
    __syncthreads();
    load_rows(qw, kTile, dp, seq + (size_t)g.mlen * g.ld, g.ld, i0, g.qlen, g.d, g.rwb + (size_t)h * g.d);
    load_rows(qr, kTile, dp, seq + (size_t)g.mlen * g.ld, g.ld, i0, g.qlen, g.d, g.rrb + (size_t)h * g.d);
    load_rows(dct, kTile, dp, dctx + (size_t)s * g.qlen * g.H + (size_t)h * g.d, (size_t)g.H, i0, g.qlen, g.d,
              (const float *)nullptr);
    load_rows(rw, 2 * kTile, dp, g.r + (size_t)h * g.d, (size_t)g.H, r_window(g, i0, j0), g.klen, g.d,
              (const float *)nullptr);
    load_row_stats(lse_t, lse, unit, g.qlen, i0);
    load_row_stats(d_t, D, unit, g.qlen, i0);
    __syncthreads();
    score_tile(g, S, bdw, qw, qr, kt, rw, i0, j0);
    ds_tile(g, S, dpp, ptt, true, dct, vt, lse_t, d_t, s, h, i0, j0);
    for (int e = threadIdx.x; e < kTile * kTile; e += blockDim.x) tile_store(dst[(e % kTile) * kTile + e / kTile], S[e]);
    __syncwarp();
    for (int cs = 0; cs < dp; cs += kTile) {
      warp_tile_mma(accv + cs, dp, ptt, kTile, dct + cs, dp, kTile, false, true);
      warp_tile_mma(acck + cs, dp, dst, kTile, qw + cs, dp, kTile, false, true);
    }
    __syncwarp();
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kTile * g.d; e += blockDim.x) {
    const int b = e / g.d, c = e % g.d, j = j0 + b;
    if (j >= g.klen) continue;
    const size_t at = ((size_t)s * g.klen + j) * g.ld + (size_t)h * g.d + c;
    float *row = dqkv + at;
    const float dk = g.scale * acck[b * dp + c], dv = accv[b * dp + c];
    row[g.H] = dk;
    row[2 * g.H] = dv;
    if (j < g.mlen) row[0] = 0.0f;
    if (dqkv16) {
      uint16_t *row16 = dqkv16 + at;
      row16[g.H] = half_bits(g, dk);
      row16[2 * g.H] = half_bits(g, dv);
      if (j < g.mlen) row16[0] = half_bits(g, 0.0f);
    }
  }
}

/* grid (r-row tiles, n): dr[t, h·d..] = scale·Σ_s Σ_i dS[s,h,i, t-(qlen-1-i)]·Qr_i, sequences and query
 * tiles in order */
template <class T>
__global__ void rel_flash_dr_kernel(float *dr, uint16_t *dr16, const float *dctx, const float *lse, const float *D,
                                    rf_args g) {
  const int dp = g.dp, t0 = blockIdx.x * kTile, h = blockIdx.y;
  HS_DYNAMIC_SHARED(unsigned char, smem);
  unsigned char *at = smem;
  T *qw = carve<T>(at, kTile * dp), *qr = carve<T>(at, kTile * dp), *dct = carve<T>(at, kTile * dp);
  T *buf = carve<T>(at, 2 * kTile * dp), *dbt = carve<T>(at, kTile * kTile);
  float *sac = carve<float>(at, 2 * kTile * kTile), *bd = carve<float>(at, kTile * kTile);
  float *dpp = carve<float>(at, 2 * kTile * kTile), *sd = carve<float>(at, kTile * kTile);
  float *acc = carve<float>(at, kTile * dp), *lse_t = carve<float>(at, kTile), *d_t = carve<float>(at, kTile);
  for (int e = threadIdx.x; e < kTile * dp; e += blockDim.x) acc[e] = 0.0f;
  const float *rh = g.r + (size_t)h * g.d;
  /* a query row i reaches r row t through key j = t - (qlen-1) + i >= 0: i >= qlen - 1 - t */
  const int first = imax(0, g.qlen - 1 - (t0 + kTile - 1)) / kTile * kTile;
  for (int s = 0; s < g.batch; s++) {
    const size_t unit = (size_t)s * g.heads + h;
    const float *seq = g.qkv + (size_t)s * g.klen * g.ld + (size_t)h * g.d;
    for (int i0 = first; i0 < g.qlen; i0 += kTile) {
      const int jbase = t0 - (g.qlen - 1) + i0; /* key x of the window: jbase + x, x = a + tt */
      __syncthreads();
      load_rows(qw, kTile, dp, seq + (size_t)g.mlen * g.ld, g.ld, i0, g.qlen, g.d, g.rwb + (size_t)h * g.d);
      load_rows(qr, kTile, dp, seq + (size_t)g.mlen * g.ld, g.ld, i0, g.qlen, g.d, g.rrb + (size_t)h * g.d);
      load_rows(dct, kTile, dp, dctx + (size_t)s * g.qlen * g.H + (size_t)h * g.d, (size_t)g.H, i0, g.qlen, g.d,
                (const float *)nullptr);
      load_row_stats(lse_t, lse, unit, g.qlen, i0);
      load_row_stats(d_t, D, unit, g.qlen, i0);
      load_rows(buf, 2 * kTile, dp, seq + g.H, g.ld, jbase, g.klen, g.d, (const float *)nullptr); /* K window */
      __syncthreads();
      warp_tile_mma(sac, 2 * kTile, qw, dp, buf, dp, dp, true, false);
      warp_tile_mma(sac + kTile, 2 * kTile, qw, dp, buf + kTile * dp, dp, dp, true, false);
      __syncthreads();
      /* (a, x = a + tt) reads r row t0 + x - a = t0 + tt: BD of the diagonal is Qr·R_tileᵀ */
      load_rows(buf, kTile, dp, rh, (size_t)g.H, t0, g.klen, g.d, (const float *)nullptr);
      __syncthreads();
      warp_tile_mma(bd, kTile, qr, dp, buf, dp, dp, true, false);
      __syncthreads();
      for (int e = threadIdx.x; e < kTile * kTile; e += blockDim.x) {
        const int a = e / kTile, tt = e % kTile, x = a + tt;
        const bool ok = t0 + tt < g.klen && allowed(g, i0 + a, jbase + x);
        sd[e] = ok ? g.scale * (sac[a * 2 * kTile + x] + bd[e]) : -INFINITY;
      }
      __syncthreads();
      load_rows(buf, 2 * kTile, dp, seq + 2 * g.H, g.ld, jbase, g.klen, g.d, (const float *)nullptr); /* V window */
      __syncthreads();
      warp_tile_mma(dpp, 2 * kTile, dct, dp, buf, dp, dp, true, false);
      warp_tile_mma(dpp + kTile, 2 * kTile, dct, dp, buf + kTile * dp, dp, dp, true, false);
      __syncthreads();
      for (int e = threadIdx.x; e < kTile * kTile; e += blockDim.x) {
        const int a = e / kTile, tt = e % kTile, x = a + tt;
        const float sc = sd[e];
        const float pr = sc == -INFINITY ? 0.0f : hs_exp_fast(sc - lse_t[a]);
        const float f = pr != 0.0f ? drop_factor(g, s, h, i0 + a, jbase + x) : 0.0f;
        tile_store(dbt[tt * kTile + a], pr * (f * dpp[a * 2 * kTile + x] - d_t[a]));
      }
      __syncthreads();
      for (int cs = 0; cs < dp; cs += kTile) warp_tile_mma(acc + cs, dp, dbt, kTile, qr + cs, dp, kTile, false, true);
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kTile * g.d; e += blockDim.x) {
    const int tt = e / g.d, c = e % g.d, t = t0 + tt;
    if (t >= g.klen) continue;
    const float v = g.scale * acc[tt * dp + c];
    dr[(size_t)t * g.H + (size_t)h * g.d + c] = v;
    if (dr16) dr16[(size_t)t * g.H + (size_t)h * g.d + c] = half_bits(g, v);
  }
}

/* dr_w_bias[h, c] += Σ_s (Σ_i dQw[s,i,h·d+c]), likewise dr_r_bias from dQr: queries in order per sequence,
 * then the sequences in order (the CPU's order) */
__global__ void flash_bias_grad_kernel(float *dr_w_bias, float *dr_r_bias, const float *dqw, const float *dqr,
                                       int batch, int qlen, int H) {
  for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < (size_t)H; e += (size_t)gridDim.x * blockDim.x) {
    float sw = 0.0f, sr = 0.0f;
    for (int s = 0; s < batch; s++) {
      float pw = 0.0f, pr = 0.0f;
      for (int i = 0; i < qlen; i++) {
        const size_t o = ((size_t)s * qlen + i) * (size_t)H + e;
        pw += dqw[o];
        pr += dqr[o];
      }
      sw += pw;
      sr += pr;
    }
    dr_w_bias[e] += sw;
    dr_r_bias[e] += sr;
  }
}

/* ---- host side ----------------------------------------------------------------------------------- */

rf_args make_args(const float *qkv, const float *r, const float *rwb, const float *rrb, int batch, int qlen, int mlen,
                  int heads, int head_dim, int lower_shift, float scale, float p, uint64_t key,
                  int64_t first_sample, int bf16) {
  if (head_dim > kMaxHeadDim)
    HS_FATAL("attention = \"unfused\" takes any head size", "fused relative attention: head_dim %d > %d", head_dim,
             kMaxHeadDim);
  rf_args g;
  g.qkv = qkv, g.r = r, g.rwb = rwb, g.rrb = rrb;
  g.batch = batch, g.qlen = qlen, g.mlen = mlen, g.klen = mlen + qlen, g.heads = heads, g.d = head_dim;
  g.dp = (head_dim + kTile - 1) / kTile * kTile, g.H = heads * head_dim, g.ld = 3 * g.H;
  g.lower_shift = lower_shift, g.scale = scale, g.p = p, g.keep_scale = hs_dropout_keep_scale(p);
  g.key = key, g.first_sample = first_sample, g.bf16 = bf16;
  return g;
}

inline unsigned tiles(int n) { return (unsigned)((n + kTile - 1) / kTile); }

/* Shared bytes of each kernel, as it carves them (T the operand type, dp the padded head size). */
template <class T>
size_t forward_smem(int dp) {
  return 4 * carve_bytes<T>(kTile * dp) + carve_bytes<T>(2 * kTile * dp) + carve_bytes<T>(kTile * kTile) +
         carve_bytes<float>(kTile * kTile) + carve_bytes<float>(2 * kTile * kTile) + carve_bytes<float>(kTile * dp) +
         2 * carve_bytes<float>(kTile);
}
template <class T>
size_t dq_smem(int dp) {
  return 5 * carve_bytes<T>(kTile * dp) + carve_bytes<T>(2 * kTile * dp) + carve_bytes<T>(kTile * kTile) +
         carve_bytes<T>(2 * kTile * kTile) + 2 * carve_bytes<float>(kTile * kTile) +
         carve_bytes<float>(2 * kTile * kTile) + 2 * carve_bytes<float>(kTile * dp) + 2 * carve_bytes<float>(kTile);
}
template <class T>
size_t dkv_smem(int dp) {
  return 5 * carve_bytes<T>(kTile * dp) + carve_bytes<T>(2 * kTile * dp) + 2 * carve_bytes<T>(kTile * kTile) +
         2 * carve_bytes<float>(kTile * kTile) + carve_bytes<float>(2 * kTile * kTile) +
         2 * carve_bytes<float>(kTile * dp) + 2 * carve_bytes<float>(kTile);
}
template <class T>
size_t dr_smem(int dp) {
  return 3 * carve_bytes<T>(kTile * dp) + carve_bytes<T>(2 * kTile * dp) + carve_bytes<T>(kTile * kTile) +
         2 * carve_bytes<float>(2 * kTile * kTile) + 2 * carve_bytes<float>(kTile * kTile) +
         carve_bytes<float>(kTile * dp) + 2 * carve_bytes<float>(kTile);
}

/* Bytes a tile loop moves: per tile pair the q, dC, k, v tiles and the r window read from memory. */
size_t pair_bytes(const rf_args &g, int tensors) { return (size_t)tensors * kTile * g.d * sizeof(float); }

/* Pairs of (query tile, key tile) the causal mask leaves, at most: (query tiles)·(key tiles). */
size_t tile_pairs(const rf_args &g) { return (size_t)tiles(g.qlen) * tiles(g.klen) * (size_t)g.batch * g.heads; }

template <class T>
void forward_t(const hs_backend *be, float *ctx, float *lse, uint16_t *ctx16, const rf_args &g) {
  HS_LAUNCH(dim3(tiles(g.qlen), (unsigned)(g.batch * g.heads)), HS_WARP, forward_smem<T>(g.dp), hs_cuda_stream(be),
            rel_flash_forward_kernel<T>)(ctx, lse, ctx16, g);
  /* q read twice per query tile, k, v and two r tiles per pair; ctx and lse written (and ctx16) */
  HS_CUDA_LAUNCHED("rel_flash_forward_kernel",
                   tile_pairs(g) * pair_bytes(g, 4) + (size_t)g.batch * g.qlen * (g.H + g.heads) * 3 * sizeof(float) +
                       (ctx16 ? (size_t)g.batch * g.qlen * g.H * sizeof(uint16_t) : 0));
}

template <class T>
void backward_t(const hs_backend *be, float *dqkv, float *dr, float *dr_w_bias, float *dr_r_bias, const float *dctx,
                const float *ctx, const float *lse, uint16_t *dqkv16, uint16_t *dr16, const rf_args &g) {
  cudaStream_t stream = hs_cuda_stream(be);
  const size_t rows = (size_t)g.batch * g.heads * g.qlen, qh = (size_t)g.batch * g.qlen * g.H;
  /* scratch: D [b, n, qlen], dQw and dQr [b, qlen, H] */
  const size_t rd = (rows * sizeof(float) + 255) / 256 * 256, rq = (qh * sizeof(float) + 255) / 256 * 256;
  char *scratch = (char *)hs_cuda_scratch(be, rd + 2 * rq);
  float *D = (float *)scratch, *dqw = (float *)(scratch + rd), *dqr = (float *)(scratch + rd + rq);
  HS_LAUNCH(hs_grid_for(rows), HS_BLOCK, 0, stream, d_kernel)(D, dctx, ctx, g.batch, g.qlen, g.heads, g.d);
  HS_CUDA_LAUNCHED("rel_flash d_kernel", (2 * qh + rows) * sizeof(float)); /* dctx, ctx read, D written */
  const dim3 units_q(tiles(g.qlen), (unsigned)(g.batch * g.heads)), units_k(tiles(g.klen), (unsigned)(g.batch * g.heads));
  HS_LAUNCH(units_q, HS_WARP, dq_smem<T>(g.dp), stream, rel_flash_dq_kernel<T>)(dqkv, dqkv16, dqw, dqr, dctx, lse, D,
                                                                                       g);
  /* per pair k, v, two r tiles; q, dC once per query tile; dq, dQw, dQr written (and dq's 16 bits) */
  HS_CUDA_LAUNCHED("rel_flash_dq_kernel",
                   tile_pairs(g) * pair_bytes(g, 4) + 5 * qh * sizeof(float) + (dqkv16 ? qh * sizeof(uint16_t) : 0));
  HS_LAUNCH(units_k, HS_WARP, dkv_smem<T>(g.dp), stream, rel_flash_dkv_kernel<T>)(dqkv, dqkv16, dctx, lse, D, g);
  /* per pair q, dC, two r tiles; k, v once per key tile; dk, dv (and memory rows' dq) written (and their
   * 16 bits) */
  const size_t kvh = (size_t)g.batch * g.klen * g.H;
  HS_CUDA_LAUNCHED("rel_flash_dkv_kernel",
                   tile_pairs(g) * pair_bytes(g, 5) + kvh * 5 * sizeof(float) + (dqkv16 ? 3 * kvh * sizeof(uint16_t) : 0));
  HS_LAUNCH(dim3(tiles(g.klen), (unsigned)g.heads), HS_WARP, dr_smem<T>(g.dp), stream, rel_flash_dr_kernel<T>)(
      dr, dr16, dctx, lse, D, g);
  /* per (r tile, query tile, sequence): q, dC, the 32-row k and v windows, the 48-row r window; dr (dr16) */
  HS_CUDA_LAUNCHED("rel_flash_dr_kernel", tile_pairs(g) * pair_bytes(g, 10) + (size_t)g.klen * g.H * sizeof(float) +
                                              (dr16 ? (size_t)g.klen * g.H * sizeof(uint16_t) : 0));
  HS_LAUNCH(hs_grid_for((size_t)g.H), HS_BLOCK, 0, stream, flash_bias_grad_kernel)(dr_w_bias, dr_r_bias, dqw, dqr,
                                                                                  g.batch, g.qlen, g.H);
  /* dQw, dQr read, the two bias gradients read and written */
  HS_CUDA_LAUNCHED("rel_flash bias_grad_kernel", (2 * qh + 4 * (size_t)g.H) * sizeof(float));
}

} // namespace

extern "C" void hs_cuda_rel_flash_attention_forward(const hs_backend *be, float *ctx, float *lse, const float *qkv,
                                                    const float *r, const float *r_w_bias, const float *r_r_bias,
                                                    int batch, int qlen, int mlen, int heads, int head_dim,
                                                    int lower_shift, float scale, float p, uint64_t key,
                                                    int64_t first_sample, uint16_t *ctx16) {
  if (batch <= 0 || qlen <= 0 || heads <= 0 || head_dim <= 0) return;
  const rf_args g = make_args(qkv, r, r_w_bias, r_r_bias, batch, qlen, mlen, heads, head_dim, lower_shift, scale, p,
                              key, first_sample, be->precision == HS_PRECISION_BF16);
  if (be->precision == HS_PRECISION_BF16)
    forward_t<hs_tile_bf16>(be, ctx, lse, ctx16, g);
  else if (be->precision == HS_PRECISION_FP16)
    forward_t<hs_tile_fp16>(be, ctx, lse, ctx16, g);
  else
    forward_t<float>(be, ctx, lse, ctx16, g);
}

extern "C" void hs_cuda_rel_flash_attention_backward(const hs_backend *be, float *dqkv, float *dr, float *dr_w_bias,
                                                     float *dr_r_bias, const float *dctx, const float *qkv,
                                                     const float *r, const float *r_w_bias, const float *r_r_bias,
                                                     const float *ctx, const float *lse, int batch, int qlen, int mlen,
                                                     int heads, int head_dim, int lower_shift, float scale, float p,
                                                     uint64_t key, int64_t first_sample, uint16_t *dqkv16,
                                                     uint16_t *dr16) {
  if (qlen <= 0 || heads <= 0 || head_dim <= 0) return;
  if (batch <= 0) { /* dr is a sum over no sequences: +0, whose 16 bits are 0 in both types */
    const size_t n = (size_t)(mlen + qlen) * (size_t)heads * (size_t)head_dim;
    be->zero(be, dr, n * sizeof(float));
    if (dr16) be->zero(be, dr16, n * sizeof(uint16_t));
    return;
  }
  const rf_args g = make_args(qkv, r, r_w_bias, r_r_bias, batch, qlen, mlen, heads, head_dim, lower_shift, scale, p,
                              key, first_sample, be->precision == HS_PRECISION_BF16);
  if (be->precision == HS_PRECISION_BF16)
    backward_t<hs_tile_bf16>(be, dqkv, dr, dr_w_bias, dr_r_bias, dctx, ctx, lse, dqkv16, dr16, g);
  else if (be->precision == HS_PRECISION_FP16)
    backward_t<hs_tile_fp16>(be, dqkv, dr, dr_w_bias, dr_r_bias, dctx, ctx, lse, dqkv16, dr16, g);
  else
    backward_t<float>(be, dqkv, dr, dr_w_bias, dr_r_bias, dctx, ctx, lse, dqkv16, dr16, g);
}
