/* Fused (flash-style) relative-position attention for Transformer-XL on the CUDA backend: the contract
 * is rel_flash_attention_forward/backward (src/backend/ops.def), the index math
 * kernels/math/rel_attention.h, the reference src/backend/cpu/cpu_rel_flash_attention.c. No
 * [qlen, klen] tensor is ever stored: the forward keeps ctx and lse [b, n, qlen] (the log-sum-exp of
 * each query row's scaled scores), the backward recomputes the probabilities from them.
 *
 * Tiles are 16 x 16 (kTile); every product is kernels/tile_mma.cuh's, on shared-memory operand tiles
 * whose inner dimension is the head size padded with zeros to dp (a multiple of 16). A block is
 * nw = 1..4 warps (chosen per launch for the most resident warps per multiprocessor: the occupancy
 * calculator), warp w owning the w-th of the block's nw consecutive 16-row tiles (query tiles in the
 * forward and dQ, key tiles in dK/dV, r tiles in dr) with its own scratch and its outputs' [16, dp] sums
 * in registers (tile_acc); the rows the warps share (k, v and r
 * for consecutive query tiles, whose r windows overlap in 16·(nw+1) rows; q and dC for consecutive key
 * or r tiles) are loaded once per block. A warp computes exactly the products, in the order, a
 * one-warp block would: the results do not depend on nw. For a query tile [i0, i0+16) and a key tile
 * [j0, j0+16):
 *   AC[a][b]  = (q_{i0+a} + r_w_bias)·k_{j0+b}                                 one tile product
 *   BD[a][b]  = (q_{i0+a} + r_r_bias)·r[t],  t = j0+b + qlen-1-(i0+a)          (the relative shift)
 * t - (j0 - i0 + qlen-1-15) = 15 + b - a lies in [0, 31): the BD entries of a tile pair need only the
 * 31 r rows of a window starting at t0 = j0 - i0 + qlen - 16. BDwin[a][w] = Qr_a·r[t0 + w] (w < 32,
 * two tile products, rows outside [0, klen) zero) is computed into shared memory and the shifted
 * diagonal BD[a][b] = BDwin[a][15 + b - a] picked from it.
 *
 * Forward (rel_flash_forward_kernel, a warp per (query tile, sequence·head)): key tiles streamed in
 * order, scores s = scale·(AC + BD) masked (causal j <= mlen + i; same_length j > i - lower_shift),
 * online softmax per row (running max m and sum l, the context rescaled when m grows), dropout from
 * the counter hash on the unnormalised weights, ctx = O / l, lse = m + log l.
 *
 * Backward, with P = exp(s - lse), P' = keep·P/(1-p), dP' = dC·Vᵀ, D_i = rowsum(dC ∘ ctx) =
 * Σ_j P'_ij dP'_ij, dS = P ⊙ (keep/(1-p)·dP' - D):
 *   D                        flash_row_dot_kernel (flash_tiles.cuh): rows staged in shared memory
 *   dQw = scale·dS·K, dQr = scale·dBDwin·Rwin   rel_flash_dq_kernel: a warp per query tile, key tiles
 *       streamed; dBDwin[a][w] = dS[a][w - 15 + a] is the shift undone in the window; dq = dQw + dQr
 *       into dqkv, dQw and dQr kept for the bias gradients
 *   dV = P'ᵀ·dC, dK = scale·dSᵀ·Qw   rel_flash_dkv_kernel: a warp per key tile, query tiles streamed
 *       (also the memory rows' q columns, 0)
 *   dr[t] = scale·Σ_s Σ_i dS[i][t-(qlen-1-i)]·Qr_i   rel_flash_dr_kernel: a warp per (r-row tile,
 *       head, group of sequences: up to 8 groups, fixed by the batch), the group's sequences and query
 *       tiles in order, the groups' parts added in order by flash_sums_kernel: for query tile i0 and r
 *       rows [t0, t0+16) the keys j = t - (qlen-1) + i lie in a 32-key window from t0 - (qlen-1) + i0
 *       (AC and dP' two tile products on it), while the BD term of (a, tt) is Qr_a·r[t0 + tt] (one
 *       tile product on the r tile itself); dS is recomputed on that diagonal, dBD[a][tt] =
 *       dS[a][a + tt], and dBDᵀ·Qr summed
 *   dr_w_bias += Σ_s Σ_i dQw, dr_r_bias += Σ_s Σ_i dQr   flash_sums_kernel (with dr's), the CPU's order
 * Determinism: every output element is written by one warp or thread (no atomics); each warp's sums
 * run over tiles in an order fixed by the shapes, the sum over sequences of dr in groups fixed by the
 * batch, then the groups in order.
 *
 * 16-bit outputs (optional): ctx16, dqkv16, dr16 get to_half's bits of each value as it is written (the
 * 16-bit type of the precision: bfloat16 under bf16, IEEE half otherwise), the twins the products read.
 *
 * Operand storage: float under fp32 / tf32 (fp32 products), bf16 / fp16 tiles under bf16 / fp16, the
 * operands the unfused path's GEMMs round (q + bias, k, v, r, P', dC, dS, the shifted dS). Sums,
 * softmax, lse and D stay fp32. head_dim <= 128; shared memory is dynamic, carved by one layout per
 * kernel (the same code sizes the launch), above 48 KiB with the kernel's opt-in. */
#include <math.h>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "flash_tiles.cuh"
#include "tile_mma.cuh"
#include "slots.cuh"
#include "warp.cuh"
#include "math/dropout.h"
#include "math/fast_exp_erf.h"
#include "math/rel_attention.h"
#include "util/lowp.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_ops.h"
#include "util/check.h"

namespace {

constexpr int kMaxHeadDim = 128;
constexpr int kMaxWarps = 4; /* warps per block: tiles of 16 rows side by side */
constexpr int kDrGroups = 8; /* dr's sum over sequences: at most this many groups, each its grid slice */

/* The shapes and scalars every kernel reads. */
struct rf_args {
  const float *qkv, *r, *rwb, *rrb;
  const uint16_t *qkv16, *r16; /* q|k|v's, r's 16-bit twins where they exist in 16 bits only (bind_half_only), or
                                * NULL: the tiles load from these instead (the same tile bits: the fp32 values
                                * would be these widened) */
  const uint16_t *dctx16; /* backward under bf16/fp16: dctx rounded by flash_row_dot_kernel, which the dq,
                           * dk|dv and dr kernels load their dC tiles from (the tiles' bits: they round dC to
                           * that type), or NULL: from dctx */
  int batch, qlen, mlen, klen, heads, d, dp, H, ld, lower_shift;
  float scale, p;
  hs_dropout_rate rate; /* p as the draws compare it, and 1/(1-p) */
  uint64_t key;
  int64_t first_sample;
  const hs_dropout_slot *slot; /* key and first_sample in device memory (a graph region), or NULL */
  int bf16; /* the 16-bit outputs' type (ctx16, dqkv16, dr16): 1 bfloat16, 0 IEEE half */
};

/* to_half's bits of v in the 16-bit type of the precision */
__device__ __forceinline__ uint16_t half_bits(const rf_args &g, float v) {
  return g.bf16 ? hs_bf16_bits(v) : hs_fp16_bits(v);
}

/* Rows of q|k|v or of r: the fp32 rows, or their 16-bit twin (u, when the model keeps them in 16 bits
 * only); + moves both by the same element offset. */
struct src_rows {
  const float *f;
  const uint16_t *u;
  int bf16;
  __device__ src_rows operator+(size_t o) const { return src_rows{f + o, u ? u + o : nullptr, bf16}; }
};
__device__ __forceinline__ src_rows qkv_rows(const rf_args &g) { return src_rows{g.qkv, g.qkv16, g.bf16}; }
__device__ __forceinline__ src_rows r_rows(const rf_args &g) { return src_rows{g.r, g.r16, g.bf16}; }
__device__ __forceinline__ src_rows dc_rows(const rf_args &g, const float *dctx) { return src_rows{dctx, g.dctx16, g.bf16}; }

/* load_rows (flash_tiles.cuh) from whichever src holds */
template <class T>
__device__ __forceinline__ void load_src(T *dst, int rows, int dp, const src_rows &src, size_t ld, int row0,
                                         int row_end, int d, const float *bias) {
  if (src.u)
    load_rows(dst, rows, dp, src.u, src.bf16, ld, row0, row_end, d, bias);
  else
    load_rows(dst, rows, dp, src.f, ld, row0, row_end, d, bias);
}

/* The block's warps: nw of them, this thread's warp w and lane. */
struct warp_id {
  int nw, w, lane;
};
__device__ __forceinline__ warp_id this_warp() {
  return warp_id{(int)(blockDim.x / HS_WARP), (int)(threadIdx.x / HS_WARP), (int)(threadIdx.x % HS_WARP)};
}

__device__ __forceinline__ bool allowed(const rf_args &g, int i, int j) {
  return i < g.qlen && j >= 0 && j >= hs_rel_key_lo(i, g.lower_shift) && j <= hs_rel_key_hi(i, g.mlen);
}

/* The key of sequence s's sample for its dropout draws (kernels/math/dropout.h), made once per thread (per
 * sequence in dr's loop) after hs_dropout_slot_resolve; 0 without dropout */
__device__ __forceinline__ uint64_t seq_sample_key(const rf_args &g, int s) {
  return g.p > 0.0f ? hs_attention_sample_key(g.key, (uint64_t)(g.first_sample + s)) : 0;
}

/* The dropout key of query row i of head h (hs_attention_row_key): made once per row, not per element */
__device__ __forceinline__ uint32_t row_key_of(const rf_args &g, uint64_t sample_key, int h, int i) {
  return hs_attention_row_key(sample_key, hs_attention_dropout_row(h, i, g.qlen));
}

/* keys[rows] = the dropout keys of query rows i0.. of head h: a query tile's, beside its lse and D (a
 * lane's elements of a 16 x 16 tile lie in 8 rows). Separate from lse and D: held in one struct with
 * them, the 16-bit dK/dV kernel at head_dim 64 took 14 more registers (ptxas, sm_90). */
__device__ __forceinline__ void load_row_keys(uint32_t *keys, int rows, const rf_args &g, uint64_t sample_key, int h,
                                              int i0) {
  if (g.p > 0.0f)
    for (int a = threadIdx.x; a < rows; a += blockDim.x) keys[a] = row_key_of(g, sample_key, h, i0 + a);
}

/* The factors of keys j and j + 1 (j even) of a row whose probabilities are pr[2] (0: a masked key, or
 * one outside the caller's window): keep/(1-p) from one hash (hs_attention_pair_factors), drawn only when
 * dropout is on and one of the two is not masked; 1 without dropout; 0 for a masked key */
__device__ __forceinline__ void drop_factors2(const rf_args &g, uint64_t sample_key, uint32_t row_key, int j,
                                              const float pr[2], float f[2]) {
  f[0] = f[1] = 1.0f;
  if (g.p > 0.0f && (pr[0] != 0.0f || pr[1] != 0.0f))
    hs_attention_pair_factors(sample_key, row_key, (uint32_t)j >> 1, g.rate, &f[0], &f[1]);
  for (int c = 0; c < 2; c++) f[c] = pr[c] == 0.0f ? 0.0f : f[c];
}

/* First and last key tile a query tile [i0, i0+16) (i0 < qlen) attends to. */
__host__ __device__ __forceinline__ void key_tiles(const rf_args &g, int i0, int &first, int &last) {
  first = hs_rel_key_lo(i0, g.lower_shift) / kTile * kTile;
  const int i_last = imin(i0 + kTile, g.qlen) - 1;
  last = imin(g.klen - 1, hs_rel_key_hi(i_last, g.mlen));
}

/* First and last query row that reaches a key of the key tile [j0, j0+16): i >= j - mlen (causal),
 * i <= j + lower_shift - 1 (same_length); first rounded down to a tile. */
__host__ __device__ __forceinline__ void query_tiles(const rf_args &g, int j0, int &first, int &last) {
  first = imax(0, j0 - g.mlen) / kTile * kTile;
  last = g.lower_shift > 0 ? imin(g.qlen - 1, j0 + kTile - 1 + g.lower_shift - 1) : g.qlen - 1;
}

/* The last 16-row tile start of a block's nw tiles from r0 that lies below n (the block's other tiles
 * past n do nothing). */
__host__ __device__ __forceinline__ int last_tile(int r0, int nw, int n) { return imin(r0 + (nw - 1) * kTile, (n - 1) / kTile * kTile); }

/* The first r row of a tile pair's 32-row window. */
__host__ __device__ __forceinline__ int r_window(const rf_args &g, int i0, int j0) { return j0 - i0 + g.qlen - 1 - 15; }

/* Per-warp steps below: lane-strided loops over one warp's tiles, __syncwarp between them. */

/* S[16][16] = scale·(Qw·Kᵀ + BD) for query tile i0, key tile j0 (masked: -inf); bdw fp32 [16][32]
 * scratch; rwin the 32 r rows from r_window(i0, j0). */
template <class T>
__device__ void score_tile(const rf_args &g, int lane, float *S, float *bdw, const T *qw, const T *qr, const T *kt,
                           const T *rwin, int i0, int j0) {
  const int dp = g.dp;
  warp_tile_mma(S, kTile, qw, dp, kt, dp, dp, true, false);
  warp_tile_mma(bdw, 2 * kTile, qr, dp, rwin, dp, dp, true, false);
  warp_tile_mma(bdw + kTile, 2 * kTile, qr, dp, rwin + kTile * dp, dp, dp, true, false);
  __syncwarp();
  for (int e = lane; e < kTile * kTile; e += HS_WARP) {
    const int a = e / kTile, b = e % kTile;
    S[e] = allowed(g, i0 + a, j0 + b) ? g.scale * (S[e] + bdw[a * 2 * kTile + 15 + b - a]) : -INFINITY;
  }
  __syncwarp();
}

/* From scores S (replaced by dS): P = exp(S - lse), dP' = dC·Vᵀ into dpp [16][16], dS = P·(f·dP' - D);
 * P' = f·P into pt (row-major, or transposed [b][a]) when pt is not null. lse_t, d_t and keys_t: the query
 * tile's rows' lse, D and dropout keys; j0 the key tile. */
template <class T>
__device__ void ds_tile(const rf_args &g, int lane, float *S, float *dpp, T *pt, bool pt_transposed, const T *dct,
                        const T *vt, const float *lse_t, const float *d_t, const uint32_t *keys_t, uint64_t sample_key,
                        int j0) {
  warp_tile_mma(dpp, kTile, dct, g.dp, vt, g.dp, g.dp, true, false);
  __syncwarp();
  /* keys two at a time (j0 a multiple of 16): one dropout hash for both */
  for (int e0 = 2 * lane; e0 < kTile * kTile; e0 += 2 * HS_WARP) {
    const int a = e0 / kTile;
    float pr[2], f[2];
    for (int c = 0; c < 2; c++) {
      const float sc = S[e0 + c];
      pr[c] = sc == -INFINITY ? 0.0f : tile_softmax_exp<T>(sc - lse_t[a]);
    }
    /* the row's key read only with dropout on (keys_t unset without it) */
    drop_factors2(g, sample_key, g.p > 0.0f ? keys_t[a] : 0U, j0 + e0 % kTile, pr, f);
    for (int c = 0; c < 2; c++) {
      const int e = e0 + c, b = e % kTile;
      if (pt) tile_store(pt[pt_transposed ? b * kTile + a : e], pr[c] * f[c]);
      S[e] = pr[c] * (f[c] * dpp[e] - d_t[a]);
    }
  }
  __syncwarp();
}

/* ---- forward ------------------------------------------------------------------------------------- */

/* Shared memory of the forward (nw warps, rows = 16·nw query rows; "per warp" regions are nw slices
 * side by side, warp w's at w·(slice)): */
template <class T> struct fwd_layout {
  T *qw, *qr;        /* [rows][dp] q + r_w_bias, q + r_r_bias (per warp) */
  T *kt, *vt;        /* [16][dp] the key tile's k, v (shared) */
  T *rw;             /* [16·(nw+1)][dp] the r rows every warp's 32-row window lies in (shared) */
  T *pt;             /* [nw][16][16] f·e^{s-m}, the P'·V operand */
  float *S, *bdw;    /* [nw][16][16] scores (before and after the loop: the warp's scratch and staging
                      * tile), [nw][16][32] BD window */
  float *m, *l, *corr; /* [rows] running max and sum, the context's rescale factor of the key step */
  /* (the unnormalised context, the warps' [16, dp], is in registers) */
  __host__ __device__ size_t carve(unsigned char *base, int dp, int nw) {
    smem_carver c{base, 0};
    const int rows = nw * kTile;
    qw = c.take<T>(rows * dp), qr = c.take<T>(rows * dp), kt = c.take<T>(kTile * dp), vt = c.take<T>(kTile * dp);
    rw = c.take<T>((nw + 1) * kTile * dp), pt = c.take<T>(nw * kTile * kTile);
    S = c.take<float>(nw * kTile * kTile), bdw = c.take<float>(nw * 2 * kTile * kTile);
    m = c.take<float>(rows), l = c.take<float>(rows), corr = c.take<float>(rows);
    return c.off;
  }
};

/* grid (query blocks of 16·nw rows, b·n), nw warps, warp w owning query tile i0 = I0 + 16w: ctx
 * [b, qlen, H] and lse [b, n, qlen] of its rows. The warps stream the key tiles of the union of their
 * ranges together (k, v and the r rows loaded once for all); a warp computes exactly the tiles, in
 * the order, a block of its own would. */
template <class T, int NT>
__global__ void rel_flash_forward_kernel(float *ctx, float *lse, uint16_t *ctx16, rf_args g) {
  hs_dropout_slot_resolve(g); /* the slot read once per thread, not per element */
  const warp_id wi = this_warp();
  const int dp = g.dp, rows = wi.nw * kTile, I0 = blockIdx.x * rows, i0 = I0 + wi.w * kTile;
  const size_t unit = blockIdx.y;
  const int s = (int)(unit / (size_t)g.heads), h = (int)(unit % (size_t)g.heads);
  const uint64_t sample_key = seq_sample_key(g, s);
  HS_DYNAMIC_SHARED(unsigned char, smem);
  fwd_layout<T> sm;
  sm.carve(smem, dp, wi.nw);
  const int ws = wi.w * kTile * dp, wt = wi.w * kTile * kTile; /* this warp's slices */
  T *qw = sm.qw + ws, *qr = sm.qr + ws, *pt = sm.pt + wt;
  float *S = sm.S + wt, *bdw = sm.bdw + 2 * wt, *m = sm.m + wi.w * kTile, *l = sm.l + wi.w * kTile;
  float *corr = sm.corr + wi.w * kTile;
  /* the warp's unnormalised context [16][dp] in registers, tile n of 16 columns (n < dp/16 <= NT) in o[n] */
  tile_acc<T> o[NT];
  HS_UNROLL
  for (int n = 0; n < NT; n++) o[n].zero();
  typename tile_acc<T>::rows_t o_rows;
  o_rows.init(S); /* the warp's own scratch until its first scores */

  const src_rows seq = qkv_rows(g) + ((size_t)s * g.klen * g.ld + (size_t)h * g.d);
  load_src(sm.qw, rows, dp, seq + (size_t)g.mlen * g.ld, g.ld, I0, g.qlen, g.d, g.rwb + (size_t)h * g.d);
  load_src(sm.qr, rows, dp, seq + (size_t)g.mlen * g.ld, g.ld, I0, g.qlen, g.d, g.rrb + (size_t)h * g.d);
  for (int a = threadIdx.x; a < rows; a += blockDim.x) sm.m[a] = -INFINITY, sm.l[a] = 0.0f;
  int first, last, bfirst, blast, unused;
  key_tiles(g, i0, first, last);
  key_tiles(g, I0, bfirst, unused);
  key_tiles(g, last_tile(I0, wi.nw, g.qlen), unused, blast);
  const bool live = i0 < g.qlen;
  constexpr int kRowLanes = HS_WARP / kTile; /* the online softmax's lanes per row (below) */
  const uint32_t row_key = row_key_of(g, sample_key, h, i0 + wi.lane / kRowLanes); /* the lane's one row */
  for (int j0 = bfirst; j0 <= blast; j0 += kTile) {
    __syncthreads();
    load_src(sm.kt, kTile, dp, seq + g.H, g.ld, j0, g.klen, g.d, (const float *)nullptr);
    load_src(sm.vt, kTile, dp, seq + 2 * g.H, g.ld, j0, g.klen, g.d, (const float *)nullptr);
    /* warp w's window starts at r_window(I0 + 16w, j0) = the last warp's + 16·(nw-1-w) */
    load_src(sm.rw, rows + kTile, dp, r_rows(g) + (size_t)h * g.d, (size_t)g.H, r_window(g, I0 + rows - kTile, j0), g.klen,
              g.d, (const float *)nullptr);
    __syncthreads();
    if (!live || j0 < first || j0 > last) continue; /* warp-uniform */
    score_tile(g, wi.lane, S, bdw, qw, qr, sm.kt, sm.rw + (wi.nw - 1 - wi.w) * kTile * dp, i0, j0);
    /* online softmax, kRowLanes adjacent lanes per row (the warp's 32 lanes over its 16 rows), lane t of
     * a row taking columns t + kRowLanes·c: rescale the row's context when its max grows */
    {
      const int a = wi.lane / kRowLanes, part = wi.lane % kRowLanes;
      float mx = m[a];
      for (int b = part; b < kTile; b += kRowLanes) mx = fmaxf(mx, S[a * kTile + b]);
      for (int k = kRowLanes / 2; k > 0; k /= 2) mx = fmaxf(mx, __shfl_xor_sync(kWarpFullMask, mx, k));
      const float corr_a = m[a] == -INFINITY ? 0.0f : tile_softmax_exp<T>(m[a] - mx);
      float sum = 0.0f;
      /* keys two at a time (j0 a multiple of 16): one dropout hash for both */
      for (int b = 2 * part; b < kTile; b += 2 * kRowLanes) {
        float e[2], f[2];
        for (int c = 0; c < 2; c++) {
          const float sc = S[a * kTile + b + c];
          e[c] = sc == -INFINITY ? 0.0f : tile_softmax_exp<T>(sc - mx);
          sum += e[c];
        }
        drop_factors2(g, sample_key, row_key, j0 + b, e, f);
        for (int c = 0; c < 2; c++) tile_store(pt[a * kTile + b + c], e[c] * f[c]);
      }
      sum = group_sum<kRowLanes>(sum);
      __syncwarp(); /* every lane of the row has read m[a] */
      if (part == 0) {
        l[a] = l[a] * corr_a + sum;
        m[a] = mx;
        corr[a] = corr_a;
      }
    }
    __syncwarp();
    /* O ← corr·O + P'·V, by rows of 16 x 16 tiles */
    HS_UNROLL
    for (int n = 0; n < NT; n++)
      if (n * kTile < dp) {
        o[n].scale_rows(corr, o_rows);
        o[n].mma(pt, kTile, sm.vt + n * kTile, dp, kTile, false);
      }
    __syncwarp();
  }
  __syncthreads();
  /* ctx = O / l, the warp's rows, a 16 x 16 tile at a time through its staging tile (S) */
  HS_UNROLL
  for (int n = 0; n < NT; n++) {
    if (n * kTile >= dp) continue;
    o[n].write(S, [&](int a, int cn, float v) {
      const int c = n * kTile + cn, i = i0 + a;
      if (i >= g.qlen || c >= g.d) return;
      const size_t o_at = ((size_t)s * g.qlen + i) * g.H + (size_t)h * g.d + c;
      if (ctx) ctx[o_at] = v / l[a]; /* NULL: the context only in 16 bits (bind_half_only) */
      if (ctx16) ctx16[o_at] = half_bits(g, v / l[a]);
    });
  }
  for (int a = threadIdx.x; a < rows; a += blockDim.x)
    if (I0 + a < g.qlen) lse[unit * g.qlen + I0 + a] = sm.m[a] + logf(sm.l[a]);
}

/* ---- backward ------------------------------------------------------------------------------------ */

template <class T> struct dq_layout {
  T *qw, *qr, *dct;       /* [rows][dp] per warp */
  T *kt, *vt, *rw;        /* [16][dp], [16][dp], [16·(nw+1)][dp] shared */
  T *dst, *dbw;           /* [nw][16][16] dS, [nw][16][32] dS shifted into the window */
  float *S, *bdw, *dpp;   /* [nw][16][16], [nw][16][32], [nw][16][16] (S and dpp: the staging tiles at the end) */
  float *lse_t, *d_t;     /* [rows] */
  uint32_t *keys_t;       /* [rows] the rows' dropout keys */
  /* (Σ dS·K and Σ dBDwin·Rwin, the warp's [16, dp] each, are in registers) */
  __host__ __device__ size_t carve(unsigned char *base, int dp, int nw) {
    smem_carver c{base, 0};
    const int rows = nw * kTile, t = nw * kTile * kTile;
    qw = c.take<T>(rows * dp), qr = c.take<T>(rows * dp), dct = c.take<T>(rows * dp);
    kt = c.take<T>(kTile * dp), vt = c.take<T>(kTile * dp), rw = c.take<T>((nw + 1) * kTile * dp);
    dst = c.take<T>(t), dbw = c.take<T>(2 * t);
    S = c.take<float>(t), bdw = c.take<float>(2 * t), dpp = c.take<float>(t);
    lse_t = c.take<float>(rows), d_t = c.take<float>(rows), keys_t = c.take<uint32_t>(rows);
    return c.off;
  }
};

/* grid (query blocks of 16·nw rows, b·n), warp w owning query tile I0 + 16w (as the forward): dq into
 * dqkv's q columns, dQw and dQr [b, qlen, H] for the bias gradients */
template <class T, int NT>
__global__ void rel_flash_dq_kernel(float *dqkv, uint16_t *dqkv16, float *dqw_out, float *dqr_out, const float *dctx,
                                    const float *lse, const float *D, rf_args g) {
  hs_dropout_slot_resolve(g); /* the slot read once per thread, not per element */
  const warp_id wi = this_warp();
  const int dp = g.dp, rows = wi.nw * kTile, I0 = blockIdx.x * rows, i0 = I0 + wi.w * kTile;
  const size_t unit = blockIdx.y;
  const int s = (int)(unit / (size_t)g.heads), h = (int)(unit % (size_t)g.heads);
  const uint64_t sample_key = seq_sample_key(g, s);
  HS_DYNAMIC_SHARED(unsigned char, smem);
  dq_layout<T> sm;
  sm.carve(smem, dp, wi.nw);
  const int ws = wi.w * kTile * dp, wt = wi.w * kTile * kTile;
  T *qw = sm.qw + ws, *qr = sm.qr + ws, *dct = sm.dct + ws, *dst = sm.dst + wt, *dbw = sm.dbw + 2 * wt;
  float *S = sm.S + wt, *bdw = sm.bdw + 2 * wt, *dpp = sm.dpp + wt;
  const float *lse_t = sm.lse_t + wi.w * kTile, *d_t = sm.d_t + wi.w * kTile;
  const uint32_t *keys_t = sm.keys_t + wi.w * kTile;
  /* the warp's Σ dS·K and Σ dBDwin·Rwin [16][dp] in registers, tile n of 16 columns (n < dp/16 <= NT) */
  tile_acc<T> accw[NT], accr[NT];
  HS_UNROLL
  for (int n = 0; n < NT; n++) accw[n].zero(), accr[n].zero();

  const src_rows seq = qkv_rows(g) + ((size_t)s * g.klen * g.ld + (size_t)h * g.d);
  load_src(sm.qw, rows, dp, seq + (size_t)g.mlen * g.ld, g.ld, I0, g.qlen, g.d, g.rwb + (size_t)h * g.d);
  load_src(sm.qr, rows, dp, seq + (size_t)g.mlen * g.ld, g.ld, I0, g.qlen, g.d, g.rrb + (size_t)h * g.d);
  load_src(sm.dct, rows, dp, dc_rows(g, dctx) + (size_t)s * g.qlen * g.H + (size_t)h * g.d, (size_t)g.H, I0, g.qlen, g.d,
            (const float *)nullptr);
  load_row_stats(sm.lse_t, rows, lse + unit * g.qlen, I0, g.qlen);
  load_row_stats(sm.d_t, rows, D + unit * g.qlen, I0, g.qlen);
  load_row_keys(sm.keys_t, rows, g, sample_key, h, I0);
  int first, last, bfirst, blast, unused;
  key_tiles(g, i0, first, last);
  key_tiles(g, I0, bfirst, unused);
  key_tiles(g, last_tile(I0, wi.nw, g.qlen), unused, blast);
  const bool live = i0 < g.qlen;
  for (int j0 = bfirst; j0 <= blast; j0 += kTile) {
    __syncthreads();
    load_src(sm.kt, kTile, dp, seq + g.H, g.ld, j0, g.klen, g.d, (const float *)nullptr);
    load_src(sm.vt, kTile, dp, seq + 2 * g.H, g.ld, j0, g.klen, g.d, (const float *)nullptr);
    load_src(sm.rw, rows + kTile, dp, r_rows(g) + (size_t)h * g.d, (size_t)g.H, r_window(g, I0 + rows - kTile, j0), g.klen,
              g.d, (const float *)nullptr);
    __syncthreads();
    if (!live || j0 < first || j0 > last) continue; /* warp-uniform */
    const T *rwin = sm.rw + (wi.nw - 1 - wi.w) * kTile * dp;
    score_tile(g, wi.lane, S, bdw, qw, qr, sm.kt, rwin, i0, j0);
    ds_tile(g, wi.lane, S, dpp, (T *)nullptr, false, dct, sm.vt, lse_t, d_t, keys_t, sample_key, j0);
    /* dS as an operand, and the shift undone into the window: dBDwin[a][w] = dS[a][w - 15 + a] */
    for (int e = wi.lane; e < kTile * kTile; e += HS_WARP) tile_store(dst[e], S[e]);
    for (int e = wi.lane; e < 2 * kTile * kTile; e += HS_WARP) {
      const int a = e / (2 * kTile), b = e % (2 * kTile) - 15 + a;
      tile_store(dbw[e], b >= 0 && b < kTile ? S[a * kTile + b] : 0.0f);
    }
    __syncwarp();
    HS_UNROLL
    for (int n = 0; n < NT; n++)
      if (n * kTile < dp) {
        accw[n].mma(dst, kTile, sm.kt + n * kTile, dp, kTile, false);
        accr[n].mma(dbw, 2 * kTile, rwin + n * kTile, dp, 2 * kTile, false);
      }
    __syncwarp();
  }
  __syncthreads();
  if (!live) return; /* warp-uniform; no barrier follows */
  /* the warp's rows, a 16 x 16 tile of each sum at a time through its staging tiles S and dpp */
  HS_UNROLL
  for (int n = 0; n < NT; n++) {
    if (n * kTile >= dp) continue;
    tile_acc_write_pair(accw[n], accr[n], S, dpp, [&](int a, int cn, float sw, float sr) {
      const int c = n * kTile + cn, i = i0 + a;
      if (i >= g.qlen || c >= g.d) return;
      const float w = g.scale * sw, rr = g.scale * sr;
      const size_t q_at = ((size_t)s * g.klen + g.mlen + i) * g.ld + (size_t)h * g.d + c;
      dqkv[q_at] = w + rr;
      if (dqkv16) dqkv16[q_at] = half_bits(g, w + rr);
      const size_t o = ((size_t)s * g.qlen + i) * g.H + (size_t)h * g.d + c;
      dqw_out[o] = w;
      dqr_out[o] = rr;
    });
  }
}

template <class T> struct dkv_layout {
  T *kt, *vt;                /* [rows][dp] per warp: the warp's key tile */
  T *qw, *qr, *dct, *rw;     /* [16][dp] x 3 the query tile, [16·(nw+1)][dp] r rows (shared) */
  T *ptt, *dst;              /* [nw][16][16] P'ᵀ, dSᵀ */
  float *S, *bdw, *dpp;      /* [nw][16][16], [nw][16][32], [nw][16][16] (S and dpp: the staging tiles at the end) */
  float *lse_t, *d_t;        /* [16] the query tile's */
  uint32_t *keys_t;          /* [16] the query tile's rows' dropout keys */
  /* (Σ dSᵀ·Qw and Σ P'ᵀ·dC, the warp's [16, dp] each, are in registers) */
  __host__ __device__ size_t carve(unsigned char *base, int dp, int nw) {
    smem_carver c{base, 0};
    const int rows = nw * kTile, t = nw * kTile * kTile;
    kt = c.take<T>(rows * dp), vt = c.take<T>(rows * dp);
    qw = c.take<T>(kTile * dp), qr = c.take<T>(kTile * dp), dct = c.take<T>(kTile * dp);
    rw = c.take<T>((nw + 1) * kTile * dp), ptt = c.take<T>(t), dst = c.take<T>(t);
    S = c.take<float>(t), bdw = c.take<float>(2 * t), dpp = c.take<float>(t);
    lse_t = c.take<float>(kTile), d_t = c.take<float>(kTile), keys_t = c.take<uint32_t>(kTile);
    return c.off;
  }
};

/* grid (key blocks of 16·nw keys, b·n), warp w owning key tile J0 + 16w, query tiles streamed (q, dC
 * and the r rows loaded once for all warps): dk, dv into dqkv (and 0 in the q columns of memory rows) */
template <class T, int NT>
__global__ void rel_flash_dkv_kernel(float *dqkv, uint16_t *dqkv16, const float *dctx, const float *lse, const float *D,
                                     rf_args g) {
  hs_dropout_slot_resolve(g); /* the slot read once per thread, not per element */
  const warp_id wi = this_warp();
  const int dp = g.dp, rows = wi.nw * kTile, J0 = blockIdx.x * rows, j0 = J0 + wi.w * kTile;
  const size_t unit = blockIdx.y;
  const int s = (int)(unit / (size_t)g.heads), h = (int)(unit % (size_t)g.heads);
  const uint64_t sample_key = seq_sample_key(g, s);
  HS_DYNAMIC_SHARED(unsigned char, smem);
  dkv_layout<T> sm;
  sm.carve(smem, dp, wi.nw);
  const int ws = wi.w * kTile * dp, wt = wi.w * kTile * kTile;
  T *kt = sm.kt + ws, *vt = sm.vt + ws, *ptt = sm.ptt + wt, *dst = sm.dst + wt;
  float *S = sm.S + wt, *bdw = sm.bdw + 2 * wt, *dpp = sm.dpp + wt;
  /* the warp's Σ dSᵀ·Qw and Σ P'ᵀ·dC [16][dp] in registers, tile n of 16 columns (n < dp/16 <= NT) */
  tile_acc<T> acck[NT], accv[NT];
  HS_UNROLL
  for (int n = 0; n < NT; n++) acck[n].zero(), accv[n].zero();

  const src_rows seq = qkv_rows(g) + ((size_t)s * g.klen * g.ld + (size_t)h * g.d);
  load_src(sm.kt, rows, dp, seq + g.H, g.ld, J0, g.klen, g.d, (const float *)nullptr);
  load_src(sm.vt, rows, dp, seq + 2 * g.H, g.ld, J0, g.klen, g.d, (const float *)nullptr);
  int first, last, bfirst, blast, unused;
  query_tiles(g, j0, first, last);
  query_tiles(g, J0, bfirst, unused);
  query_tiles(g, last_tile(J0, wi.nw, g.klen), unused, blast);
  const bool live = j0 < g.klen;
  for (int i0 = bfirst; i0 <= blast; i0 += kTile) {
    __syncthreads();
    load_src(sm.qw, kTile, dp, seq + (size_t)g.mlen * g.ld, g.ld, i0, g.qlen, g.d, g.rwb + (size_t)h * g.d);
    load_src(sm.qr, kTile, dp, seq + (size_t)g.mlen * g.ld, g.ld, i0, g.qlen, g.d, g.rrb + (size_t)h * g.d);
    load_src(sm.dct, kTile, dp, dc_rows(g, dctx) + (size_t)s * g.qlen * g.H + (size_t)h * g.d, (size_t)g.H, i0, g.qlen, g.d,
              (const float *)nullptr);
    /* warp w's window starts at r_window(i0, J0 + 16w) = the first warp's + 16w */
    load_src(sm.rw, rows + kTile, dp, r_rows(g) + (size_t)h * g.d, (size_t)g.H, r_window(g, i0, J0), g.klen, g.d,
              (const float *)nullptr);
    load_row_stats(sm.lse_t, kTile, lse + unit * g.qlen, i0, g.qlen);
    load_row_stats(sm.d_t, kTile, D + unit * g.qlen, i0, g.qlen);
    load_row_keys(sm.keys_t, kTile, g, sample_key, h, i0);
    __syncthreads();
    if (!live || i0 < first || i0 > last) continue; /* warp-uniform */
    score_tile(g, wi.lane, S, bdw, sm.qw, sm.qr, kt, sm.rw + wi.w * kTile * dp, i0, j0);
    ds_tile(g, wi.lane, S, dpp, ptt, true, sm.dct, vt, sm.lse_t, sm.d_t, sm.keys_t, sample_key, j0);
    for (int e = wi.lane; e < kTile * kTile; e += HS_WARP) tile_store(dst[(e % kTile) * kTile + e / kTile], S[e]);
    __syncwarp();
    HS_UNROLL
    for (int n = 0; n < NT; n++)
      if (n * kTile < dp) {
        accv[n].mma(ptt, kTile, sm.dct + n * kTile, dp, kTile, false);
        acck[n].mma(dst, kTile, sm.qw + n * kTile, dp, kTile, false);
      }
    __syncwarp();
  }
  __syncthreads();
  if (!live) return; /* warp-uniform; no barrier follows */
  /* the warp's key rows, a 16 x 16 tile of each sum at a time through its staging tiles S and dpp */
  HS_UNROLL
  for (int n = 0; n < NT; n++) {
    if (n * kTile >= dp) continue;
    tile_acc_write_pair(acck[n], accv[n], S, dpp, [&](int b, int cn, float sk, float sv) {
      const int c = n * kTile + cn, j = j0 + b;
      if (j >= g.klen || c >= g.d) return;
      const size_t at = ((size_t)s * g.klen + j) * g.ld + (size_t)h * g.d + c;
      float *row = dqkv + at;
      const float dk = g.scale * sk, dv = sv;
      row[g.H] = dk;
      row[2 * g.H] = dv;
      if (j < g.mlen) row[0] = 0.0f;
      if (dqkv16) {
        uint16_t *row16 = dqkv16 + at;
        row16[g.H] = half_bits(g, dk);
        row16[2 * g.H] = half_bits(g, dv);
        if (j < g.mlen) row16[0] = half_bits(g, 0.0f);
      }
    });
  }
}

template <class T> struct dr_layout {
  T *qw, *qr, *dct;        /* [16][dp] the query tile (shared) */
  T *rt;                   /* [rows][dp] per warp: the warp's r tile */
  T *buf;                  /* [16·(nw+1)][dp] the K, then the V rows of every warp's 32-key window (shared) */
  T *dbt;                  /* [nw][16][16] dBDᵀ */
  float *sac, *bd, *dpp, *sd; /* [nw][16][32], [nw][16][16], [nw][16][32], [nw][16][16] (sd: at the end,
                                 * the warp's staging tile of its dr rows) */
  float *lse_t, *d_t;      /* [16] */
  uint32_t *keys_t;        /* [16] the query tile's rows' dropout keys */
  /* (the warps' dr rows [16][dp] are in registers: dr_acc) */
  __host__ __device__ size_t carve(unsigned char *base, int dp, int nw) {
    smem_carver c{base, 0};
    const int rows = nw * kTile, t = nw * kTile * kTile;
    qw = c.take<T>(kTile * dp), qr = c.take<T>(kTile * dp), dct = c.take<T>(kTile * dp);
    rt = c.take<T>(rows * dp), buf = c.take<T>((nw + 1) * kTile * dp), dbt = c.take<T>(t);
    sac = c.take<float>(2 * t), bd = c.take<float>(t), dpp = c.take<float>(2 * t), sd = c.take<float>(t);
    lse_t = c.take<float>(kTile), d_t = c.take<float>(kTile), keys_t = c.take<uint32_t>(kTile);
    return c.off;
  }
};

/* grid (r-row blocks of 16·nw rows, n, sequence groups), warp w owning r tile T0 + 16w: the group's
 * part of dr, part[group][t, h·d..] = Σ_{s in group} Σ_i dS[s,h,i, t-(qlen-1-i)]·Qr_i, sequences and
 * query tiles in order (q, dC and the k, v windows loaded once for all warps); flash_sums_kernel adds
 * the groups in order and scales. Group z holds sequences [z·per_group, (z+1)·per_group). */
constexpr int kDrPairs = kTile / 2 + 1; /* key pairs a row's 16-key window of dr can touch */

template <class T, int NT>
__global__ void rel_flash_dr_kernel(float *part, const float *dctx, const float *lse, const float *D, rf_args g,
                                    int per_group) {
  hs_dropout_slot_resolve(g); /* the slot read once per thread, not per element */
  const warp_id wi = this_warp();
  const int dp = g.dp, rows = wi.nw * kTile, T0 = blockIdx.x * rows, t0 = T0 + wi.w * kTile, h = blockIdx.y;
  const int s_first = blockIdx.z * per_group, s_end = imin(g.batch, s_first + per_group);
  HS_DYNAMIC_SHARED(unsigned char, smem);
  dr_layout<T> sm;
  sm.carve(smem, dp, wi.nw);
  const int ws = wi.w * kTile * dp, wt = wi.w * kTile * kTile;
  T *rt = sm.rt + ws, *dbt = sm.dbt + wt;
  float *sac = sm.sac + 2 * wt, *bd = sm.bd + wt, *dpp = sm.dpp + 2 * wt, *sd = sm.sd + wt;
  const T *win = sm.buf + wi.w * kTile * dp; /* warp w's 32 keys (k, then v) start 16w after the first warp's */
  /* the warp's dr rows [16][dp] in registers, tile n of 16 columns (n < dp/16 <= NT) in acc[n] */
  tile_acc<T> acc[NT];
  HS_UNROLL
  for (int n = 0; n < NT; n++) acc[n].zero();
  const src_rows rh = r_rows(g) + (size_t)h * g.d;
  /* (a, x = a + tt) reads r row t0 + x - a = t0 + tt: BD of the diagonal is Qr·R_tileᵀ */
  load_src(sm.rt, rows, dp, rh, (size_t)g.H, T0, g.klen, g.d, (const float *)nullptr);
  /* a query row i reaches r row t through key j = t - (qlen-1) + i >= 0: i >= qlen - 1 - t */
  const int first = imax(0, g.qlen - 1 - (t0 + kTile - 1)) / kTile * kTile;
  const int bfirst = imax(0, g.qlen - 1 - (last_tile(T0, wi.nw, g.klen) + kTile - 1)) / kTile * kTile;
  const bool live = t0 < g.klen;
  for (int s = s_first; s < s_end; s++) {
    const size_t unit = (size_t)s * g.heads + h;
    const uint64_t sample_key = seq_sample_key(g, s);
    const src_rows seq = qkv_rows(g) + ((size_t)s * g.klen * g.ld + (size_t)h * g.d);
    for (int i0 = bfirst; i0 < g.qlen; i0 += kTile) {
      const int jbase = t0 - (g.qlen - 1) + i0, Jbase = T0 - (g.qlen - 1) + i0; /* key x of the window: jbase + x */
      const bool on = live && i0 >= first; /* warp-uniform */
      __syncthreads();
      load_src(sm.qw, kTile, dp, seq + (size_t)g.mlen * g.ld, g.ld, i0, g.qlen, g.d, g.rwb + (size_t)h * g.d);
      load_src(sm.qr, kTile, dp, seq + (size_t)g.mlen * g.ld, g.ld, i0, g.qlen, g.d, g.rrb + (size_t)h * g.d);
      load_src(sm.dct, kTile, dp, dc_rows(g, dctx) + (size_t)s * g.qlen * g.H + (size_t)h * g.d, (size_t)g.H, i0, g.qlen, g.d,
                (const float *)nullptr);
      load_row_stats(sm.lse_t, kTile, lse + unit * g.qlen, i0, g.qlen);
      load_row_stats(sm.d_t, kTile, D + unit * g.qlen, i0, g.qlen);
      load_row_keys(sm.keys_t, kTile, g, sample_key, h, i0);
      load_src(sm.buf, rows + kTile, dp, seq + g.H, g.ld, Jbase, g.klen, g.d, (const float *)nullptr); /* K */
      __syncthreads();
      if (on) {
        warp_tile_mma(sac, 2 * kTile, sm.qw, dp, win, dp, dp, true, false);
        warp_tile_mma(sac + kTile, 2 * kTile, sm.qw, dp, win + kTile * dp, dp, dp, true, false);
        warp_tile_mma(bd, kTile, sm.qr, dp, rt, dp, dp, true, false);
        __syncwarp();
        for (int e = wi.lane; e < kTile * kTile; e += HS_WARP) {
          const int a = e / kTile, tt = e % kTile, x = a + tt;
          const bool ok = t0 + tt < g.klen && allowed(g, i0 + a, jbase + x);
          sd[e] = ok ? g.scale * (sac[a * 2 * kTile + x] + bd[e]) : -INFINITY;
        }
      }
      __syncthreads();
      load_src(sm.buf, rows + kTile, dp, seq + 2 * g.H, g.ld, Jbase, g.klen, g.d, (const float *)nullptr); /* V */
      __syncthreads();
      if (!on) continue;
      warp_tile_mma(dpp, 2 * kTile, sm.dct, dp, win, dp, dp, true, false);
      warp_tile_mma(dpp + kTile, 2 * kTile, sm.dct, dp, win + kTile * dp, dp, dp, true, false);
      __syncwarp();
      /* keys two at a time, as the forward draws them (one dropout hash for keys 2q and 2q + 1): row a's
       * window holds keys jbase + a .. jbase + a + 15, 8 such pairs, or 9 where it starts at an odd key
       * (the end pairs then hold one key of the window each) */
      for (int w = wi.lane; w < kTile * kDrPairs; w += HS_WARP) {
        const int a = w / kDrPairs, jlo = jbase + a, j0 = jlo - (jlo & 1) + 2 * (w % kDrPairs);
        if (j0 >= jlo + kTile) continue; /* the ninth pair of a window that starts at an even key */
        float pr[2], f[2];
        for (int c = 0; c < 2; c++) {
          const int tt = j0 + c - jlo;
          const float sc = tt >= 0 && tt < kTile ? sd[a * kTile + tt] : -INFINITY;
          pr[c] = sc == -INFINITY ? 0.0f : tile_softmax_exp<T>(sc - sm.lse_t[a]);
        }
        /* the row's key read only with dropout on (keys_t unset without it) */
        drop_factors2(g, sample_key, g.p > 0.0f ? sm.keys_t[a] : 0U, j0, pr, f);
        for (int c = 0; c < 2; c++) {
          const int tt = j0 + c - jlo;
          if (tt >= 0 && tt < kTile) tile_store(dbt[tt * kTile + a], pr[c] * (f[c] * dpp[a * 2 * kTile + a + tt] - sm.d_t[a]));
        }
      }
      __syncwarp();
      HS_UNROLL
      for (int n = 0; n < NT; n++)
        if (n * kTile < dp) acc[n].mma(dbt, kTile, sm.qr + n * kTile, dp, kTile, false);
      __syncwarp();
    }
  }
  /* the warp's rows t0.. of the part, a 16 x 16 tile at a time through its staging tile (sd) */
  HS_UNROLL
  for (int n = 0; n < NT; n++) {
    if (n * kTile >= dp) continue;
    acc[n].write(sd, [&](int tt, int cn, float v) {
      const int c = n * kTile + cn, t = t0 + tt;
      if (t < g.klen && c < g.d) part[((size_t)blockIdx.z * g.klen + t) * g.H + (size_t)h * g.d + c] = v;
    });
  }
}

/* The backward's last sums, a thread per element e of dr [klen, H]:
 *   dr[e] = scale·Σ_z part[z][e], the sequence groups in order (and dr16[e] its 16 bits);
 *   e < H: dr_w_bias[e] += Σ_s (Σ_i dQw[s,i,e]), likewise dr_r_bias from dQr: queries in order per
 *   sequence, then the sequences in order (the CPU's order) */
__global__ void flash_sums_kernel(float *dr, uint16_t *dr16, int bf16, const float *part, int groups, size_t n_r,
                                  float scale, float *dr_w_bias, float *dr_r_bias, const float *dqw, const float *dqr,
                                  int batch, int qlen, int H) {
  for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n_r; e += (size_t)gridDim.x * blockDim.x) {
    float sum = part[e];
    for (int z = 1; z < groups; z++) sum += part[(size_t)z * n_r + e];
    dr[e] = scale * sum;
    if (dr16) dr16[e] = bf16 ? hs_bf16_bits(scale * sum) : hs_fp16_bits(scale * sum);
    if (e >= (size_t)H) continue;
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

rf_args make_args(const hs_backend *be, const float *qkv, const float *r, const float *rwb, const float *rrb, int batch,
                  int qlen, int mlen,
                  int heads, int head_dim, int lower_shift, float scale, float p, uint64_t key,
                  int64_t first_sample, int bf16) {
  if (head_dim > kMaxHeadDim)
    HS_FATAL("attention = \"unfused\" takes any head size", "fused relative attention: head_dim %d > %d", head_dim,
             kMaxHeadDim);
  rf_args g;
  g.qkv = qkv, g.r = r, g.rwb = rwb, g.rrb = rrb;
  g.batch = batch, g.qlen = qlen, g.mlen = mlen, g.klen = mlen + qlen, g.heads = heads, g.d = head_dim;
  g.dp = (head_dim + kTile - 1) / kTile * kTile, g.H = heads * head_dim, g.ld = 3 * g.H;
  g.lower_shift = lower_shift, g.scale = scale, g.p = p, g.rate = hs_dropout_rate_of(p);
  g.key = key, g.first_sample = first_sample, g.bf16 = bf16;
  g.slot = p > 0.0f ? hs_cuda_dropout_slot(be, key, first_sample) : nullptr;
  /* q|k|v and r where the model keeps them in 16 bits only (bind_half_only): read from there */
  g.qkv16 = hs_cuda_twin_only16(qkv, (size_t)batch * g.klen * g.ld);
  g.r16 = hs_cuda_twin_only16(r, (size_t)g.klen * g.H);
  g.dctx16 = nullptr; /* backward_t's */
  return g;
}

inline unsigned tiles(int n) { return (unsigned)((n + kTile - 1) / kTile); }

/* A launch's warps per block: of 1 to kMaxWarps (and no more than the n rows have 16-row tiles), the
 * count that keeps the most warps of `kernel` resident per multiprocessor (shared memory bounds it: each
 * warp brings its own tiles and accumulators, the shared k, v, q and r rows are what grows slower; and
 * registers, where a warp's outputs live in them: the occupancy calculator, flash_resident_warps), the
 * larger on a tie (fewer loads of the shared rows). Which count runs does not change a bit of the
 * results: each warp computes its tile as a block of its own would. The first query opts the kernel into
 * the device's shared memory per block. */
int warp_cap;    /* hs_cuda_rel_flash_max_warps */
int dctx16_off;  /* hs_cuda_rel_flash_dctx16(0) */

struct launch_cfg {
  int warps;
  size_t smem;
  unsigned blocks;
};
template <class L, class K>
launch_cfg pick(const rf_args &g, int n, const char *name, K *kernel) {
  launch_cfg best{0, 0, 0};
  int best_resident = 0;
  for (int nw = 1; nw <= imin(warp_cap > 0 ? warp_cap : kMaxWarps, imin(kMaxWarps, (int)tiles(n))); nw++) {
    L layout;
    const size_t bytes = layout.carve(nullptr, g.dp, nw);
    const int resident = flash_resident_warps(kernel, nw, bytes);
    if (resident > 0 && resident >= best_resident)
      best_resident = resident, best = launch_cfg{nw, bytes, (tiles(n) + nw - 1) / nw};
  }
  if (best.warps == 0) {
    L layout;
    HS_FATAL("attention = \"unfused\" takes any head size",
             "fused relative attention: %s needs %zu bytes of shared memory at head_dim %d, this GPU allows %zu per block",
             name, layout.carve(nullptr, g.dp, 1), g.d, flash_smem_limit());
  }
  return best;
}

/* Bytes each fused kernel moves in device memory for its launch configuration, the kernel's own loops
 * replayed on the host: load_rows reads only the rows inside [0, row_end) (d values each, plus the d
 * floats of a bias), the rows a block shares are read once per block per streamed tile, every block of
 * a grid row (b·n units, or n heads by sequence groups) loops alike. q|k|v, r and dC elements are 4 bytes,
 * or 2 read from their 16-bit twins (g.qkv16, g.r16, g.dctx16); everything else fp32, plus 16-bit outputs
 * where asked (h16: 2 bytes an element, 0 without). */
size_t rows_in(int row0, int rows, int end) { return (size_t)imax(0, imin(row0 + rows, end) - imax(row0, 0)); }

/* elements read of q|k|v (qk), of r (rr) and of dC (dc), floats (fl) and 16-bit outputs (el16), in bytes */
size_t counted_bytes(const rf_args &g, size_t qk, size_t rr, size_t dc, size_t fl, size_t el16, size_t h16) {
  return qk * (g.qkv16 ? sizeof(uint16_t) : sizeof(float)) + rr * (g.r16 ? sizeof(uint16_t) : sizeof(float)) +
         dc * (g.dctx16 ? sizeof(uint16_t) : sizeof(float)) + fl * sizeof(float) + el16 * h16;
}

/* forward (h16 = 16-bit ctx) and dQ (h16 = 16-bit dq): per query block I0 (nq = its rows in qlen),
 * Σ_{j0} (k + v + r window rows)·d, then forward: q twice, 2d bias, ctx, lse; dQ: q twice, dC, 2d bias,
 * lse, D, then dq, dQw, dQr written */
size_t query_block_bytes(const rf_args &g, const launch_cfg &c, bool dq, size_t h16) {
  const int rows = c.warps * kTile;
  size_t qk = 0, rr = 0, dc = 0, fl = 0, el16 = 0;
  for (unsigned bx = 0; bx < c.blocks; bx++) {
    const int I0 = (int)bx * rows;
    const size_t nq = rows_in(I0, rows, g.qlen);
    int bfirst, blast, unused;
    key_tiles(g, I0, bfirst, unused);
    key_tiles(g, last_tile(I0, c.warps, g.qlen), unused, blast);
    for (int j0 = bfirst; j0 <= blast; j0 += kTile) {
      qk += 2 * rows_in(j0, kTile, g.klen) * g.d;
      rr += rows_in(r_window(g, I0 + rows - kTile, j0), rows + kTile, g.klen) * g.d;
    }
    qk += nq * 2 * g.d;
    dc += dq ? nq * g.d : 0;
    fl += dq ? 2 * nq + 2 * g.d + nq * 3 * g.d : 2 * g.d + nq * (g.d + 1);
    el16 += nq * g.d;
  }
  return (size_t)g.batch * g.heads * counted_bytes(g, qk, rr, dc, fl, el16, h16);
}

/* dK/dV: per key block J0 (nk = its rows in klen), k and v rows, Σ_{i0} (q twice + dC + the r window
 * rows)·d + 2d bias + lse, D; dk, dv written (and 0 into the memory rows' q columns) */
size_t dkv_bytes(const rf_args &g, const launch_cfg &c, size_t h16) {
  const int rows = c.warps * kTile;
  size_t qk = 0, rr = 0, dc = 0, fl = 0, el16 = 0;
  for (unsigned bx = 0; bx < c.blocks; bx++) {
    const int J0 = (int)bx * rows;
    const size_t nk = rows_in(J0, rows, g.klen), out = (2 * nk + rows_in(J0, rows, g.mlen)) * g.d;
    int bfirst, blast, unused;
    query_tiles(g, J0, bfirst, unused);
    query_tiles(g, last_tile(J0, c.warps, g.klen), unused, blast);
    for (int i0 = bfirst; i0 <= blast; i0 += kTile) {
      const size_t nq = rows_in(i0, kTile, g.qlen);
      qk += 2 * nq * g.d;
      dc += nq * g.d;
      fl += 2 * g.d + 2 * nq;
      rr += rows_in(r_window(g, i0, J0), rows + kTile, g.klen) * g.d;
    }
    qk += 2 * nk * g.d;
    fl += out;
    el16 += out;
  }
  return (size_t)g.batch * g.heads * counted_bytes(g, qk, rr, dc, fl, el16, h16);
}

/* dr: per (r block T0, head, group) the r rows and the part written; per sequence Σ_{i0} (q twice + dC)
 * ·d + 2d bias + lse, D + the k and v windows of 16·(nw+1) rows from T0 - (qlen-1) + i0 */
size_t dr_bytes(const rf_args &g, const launch_cfg &c, int groups) {
  const int rows = c.warps * kTile;
  size_t qk = 0, dc = 0, fl = 0, rr = 0, part = 0; /* per head: per sequence (qk, dc, fl), per group (rr, part) */
  for (unsigned bx = 0; bx < c.blocks; bx++) {
    const int T0 = (int)bx * rows;
    const int bfirst = imax(0, g.qlen - 1 - (last_tile(T0, c.warps, g.klen) + kTile - 1)) / kTile * kTile;
    for (int i0 = bfirst; i0 < g.qlen; i0 += kTile) {
      const size_t nq = rows_in(i0, kTile, g.qlen);
      qk += 2 * nq * g.d + 2 * rows_in(T0 - (g.qlen - 1) + i0, rows + kTile, g.klen) * g.d;
      dc += nq * g.d;
      fl += 2 * g.d + 2 * nq;
    }
    rr += rows_in(T0, rows, g.klen) * g.d;
    part += rows_in(T0, rows, g.klen) * g.d;
  }
  const size_t b = (size_t)g.batch, z = (size_t)groups;
  return (size_t)g.heads * counted_bytes(g, b * qk, z * rr, b * dc, b * fl + z * part, 0, 0);
}

template <class T>
void forward_t(const hs_backend *be, float *ctx, float *lse, uint16_t *ctx16, const rf_args &g) {
  /* the context's register tiles: 4 of 16 columns up to head_dim 64, else 8 (head_dim <= 128) */
  auto kernel = g.dp <= 4 * kTile ? rel_flash_forward_kernel<T, 4> : rel_flash_forward_kernel<T, 8>;
  const launch_cfg c = pick<fwd_layout<T>>(g, g.qlen, "the forward", kernel);
  HS_LAUNCH(dim3(c.blocks, (unsigned)(g.batch * g.heads)), c.warps * HS_WARP, c.smem, hs_cuda_stream(be), kernel)(
      ctx, lse, ctx16, g);
  /* b·n·Σ_blocks [Σ_{key tiles} (k + v + r window rows)·d + 2·q rows·d + 2d + ctx rows·d + lse] (+ ctx16) */
  HS_CUDA_LAUNCHED("rel_flash_forward_kernel", query_block_bytes(g, c, false, ctx16 ? sizeof(uint16_t) : 0) -
                                                   (ctx ? 0 : (size_t)g.batch * g.heads * g.qlen * g.d * sizeof(float)));
}

template <class T>
void backward_t(const hs_backend *be, float *dqkv, float *dr, float *dr_w_bias, float *dr_r_bias, const float *dctx,
                const float *ctx, const float *lse, uint16_t *dqkv16, uint16_t *dr16, const rf_args &args) {
  cudaStream_t stream = hs_cuda_stream(be);
  rf_args g = args;
  const size_t rows = (size_t)g.batch * g.heads * g.qlen, qh = (size_t)g.batch * g.qlen * g.H;
  /* dr's sum over the sequences runs in groups of per_group (up to kDrGroups groups, fixed by the batch
   * alone: the same bits on every device), one grid slice each, then the groups in order */
  const int per_group = (g.batch + kDrGroups - 1) / kDrGroups, groups = (g.batch + per_group - 1) / per_group;
  const size_t n_r = (size_t)g.klen * g.H;
  /* scratch: D [b, n, qlen], dQw and dQr [b, qlen, H], dr's parts [groups, klen, H]; 16-bit tiles (bf16,
   * fp16): dctx16 [b, qlen, H] */
  const bool tiles16 = sizeof(T) == sizeof(uint16_t) && !dctx16_off;
  const size_t rd = (rows * sizeof(float) + 255) / 256 * 256, rq = (qh * sizeof(float) + 255) / 256 * 256;
  const size_t rp = ((size_t)groups * n_r * sizeof(float) + 255) / 256 * 256;
  /* dctx exists only in 16 bits where the model bound it so (bind_half_only: its 16-bit output gradient):
   * the tiles' dC copy is then that one, whatever hs_cuda_rel_flash_dctx16 says (there is no fp32 dctx) */
  const uint16_t *dctx_only16 = sizeof(T) == sizeof(uint16_t) ? hs_cuda_twin_only16(dctx, qh) : nullptr;
  const bool round_dctx = tiles16 && !dctx_only16;
  char *scratch = (char *)hs_cuda_scratch(be, rd + 2 * rq + rp + (round_dctx ? qh * sizeof(uint16_t) : 0));
  float *D = (float *)scratch, *dqw = (float *)(scratch + rd), *dqr = (float *)(scratch + rd + rq);
  float *part = (float *)(scratch + rd + 2 * rq);
  uint16_t *dctx16 = round_dctx ? (uint16_t *)(scratch + rd + 2 * rq + rp) : nullptr;
  g.dctx16 = dctx_only16 ? dctx_only16 : dctx16;
  /* the context exists only in 16 bits where the model bound it so (bind_half_only): read from there */
  const uint16_t *ctx16 = hs_cuda_twin_only16(ctx, qh);
  /* D[s, h, i] = dctx_i·ctx_i (head h's columns), and dctx's 16-bit copy (flash_tiles.cuh) */
  HS_LAUNCH(flash_row_dot_grid(rows), HS_BLOCK, 0, stream, flash_row_dot_kernel)(
      D, dctx16, dctx_only16 ? nullptr : dctx, dctx_only16, ctx, ctx16, g.bf16, g.batch, g.qlen, g.heads, g.d);
  HS_CUDA_LAUNCHED("flash_row_dot_kernel (relative attention)",
                   flash_row_dot_bytes(qh, rows, dctx_only16, ctx16, dctx16));
  const unsigned units = (unsigned)(g.batch * g.heads);
  /* the sums' register tiles, as the forward's: 4 of 16 columns up to head_dim 64, else 8 */
  auto dq_kernel = g.dp <= 4 * kTile ? rel_flash_dq_kernel<T, 4> : rel_flash_dq_kernel<T, 8>;
  const launch_cfg cq = pick<dq_layout<T>>(g, g.qlen, "dQ", dq_kernel);
  HS_LAUNCH(dim3(cq.blocks, units), cq.warps * HS_WARP, cq.smem, stream, dq_kernel)(dqkv, dqkv16, dqw, dqr, dctx, lse,
                                                                                     D, g);
  /* b·n·Σ_blocks [Σ_{key tiles} (k + v + r window rows)·d + (3 loads + 3 outputs)·rows·d + 2d + lse, D]·4 */
  HS_CUDA_LAUNCHED("rel_flash_dq_kernel", query_block_bytes(g, cq, true, dqkv16 ? sizeof(uint16_t) : 0));
  auto dkv_kernel = g.dp <= 4 * kTile ? rel_flash_dkv_kernel<T, 4> : rel_flash_dkv_kernel<T, 8>;
  const launch_cfg ck = pick<dkv_layout<T>>(g, g.klen, "dK/dV", dkv_kernel);
  HS_LAUNCH(dim3(ck.blocks, units), ck.warps * HS_WARP, ck.smem, stream, dkv_kernel)(dqkv, dqkv16, dctx, lse, D, g);
  /* b·n·Σ_blocks [Σ_{query tiles} (3·q rows + r window rows)·d + 2d + lse, D + (k, v, dk, dv, memory dq)·d]·4 */
  HS_CUDA_LAUNCHED("rel_flash_dkv_kernel", dkv_bytes(g, ck, dqkv16 ? sizeof(uint16_t) : 0));
  /* the dr rows' register tiles: 4 of 16 columns up to head_dim 64, else 8 (head_dim <= 128) */
  auto dr_kernel = g.dp <= 4 * kTile ? rel_flash_dr_kernel<T, 4> : rel_flash_dr_kernel<T, 8>;
  const launch_cfg cr = pick<dr_layout<T>>(g, g.klen, "dr", dr_kernel);
  HS_LAUNCH(dim3(cr.blocks, (unsigned)g.heads, (unsigned)groups), cr.warps * HS_WARP, cr.smem, stream, dr_kernel)(
      part, dctx, lse, D, g, per_group);
  /* n·[b·Σ_blocks Σ_{query tiles} (3·q rows + k, v windows)·d + 2d + lse, D + groups·Σ_blocks (r, part)·d]·4 */
  HS_CUDA_LAUNCHED("rel_flash_dr_kernel", dr_bytes(g, cr, groups));
  HS_LAUNCH(hs_grid_for(n_r), HS_BLOCK, 0, stream, flash_sums_kernel)(dr, dr16, g.bf16, part, groups, n_r, g.scale,
                                                                      dr_w_bias, dr_r_bias, dqw, dqr, g.batch, g.qlen,
                                                                      g.H);
  /* the parts read, dr written (and dr16); dQw, dQr read, the two bias gradients read and written */
  HS_CUDA_LAUNCHED("rel_flash sums_kernel", ((groups + 1) * n_r + 2 * qh + 4 * (size_t)g.H) * sizeof(float) +
                                                (dr16 ? n_r * sizeof(uint16_t) : 0));
}

} // namespace

extern "C" void hs_cuda_rel_flash_max_warps(int warps) { warp_cap = warps; }
extern "C" void hs_cuda_rel_flash_dctx16(int on) { dctx16_off = !on; }

extern "C" void hs_cuda_rel_flash_attention_forward(const hs_backend *be, float *ctx, float *lse, const float *qkv,
                                                    const float *r, const float *r_w_bias, const float *r_r_bias,
                                                    int batch, int qlen, int mlen, int heads, int head_dim,
                                                    int lower_shift, float scale, float p, uint64_t key,
                                                    int64_t first_sample, uint16_t *ctx16) {
  hs_output_check("rel_flash_attention_forward: ctx or ctx16", ctx, ctx16);
  if (batch <= 0 || qlen <= 0 || heads <= 0 || head_dim <= 0) return;
  const rf_args g = make_args(be, qkv, r, r_w_bias, r_r_bias, batch, qlen, mlen, heads, head_dim, lower_shift, scale, p,
                              key, first_sample, be->precision == HS_PRECISION_BF16);
  if (hs_cuda_slots_only(be)) return; /* recorded: the slots only (cuda_slots.h) */
  if (be->precision == HS_PRECISION_BF16)
    forward_t<hs_tile_bf16>(be, ctx, lse, ctx16, g);
  else if (be->precision == HS_PRECISION_FP16)
    forward_t<hs_tile_fp16>(be, ctx, lse, ctx16, g);
  else if (be->precision == HS_PRECISION_TF32)
    forward_t<hs_tile_tf32>(be, ctx, lse, ctx16, g);
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
    if (hs_cuda_slots_only(be)) return;
    const size_t n = (size_t)(mlen + qlen) * (size_t)heads * (size_t)head_dim;
    be->zero(be, dr, n * sizeof(float));
    if (dr16) be->zero(be, dr16, n * sizeof(uint16_t));
    return;
  }
  const rf_args g = make_args(be, qkv, r, r_w_bias, r_r_bias, batch, qlen, mlen, heads, head_dim, lower_shift, scale, p,
                              key, first_sample, be->precision == HS_PRECISION_BF16);
  if (hs_cuda_slots_only(be)) return; /* recorded: the slots only (cuda_slots.h) */
  if (be->precision == HS_PRECISION_BF16)
    backward_t<hs_tile_bf16>(be, dqkv, dr, dr_w_bias, dr_r_bias, dctx, ctx, lse, dqkv16, dr16, g);
  else if (be->precision == HS_PRECISION_FP16)
    backward_t<hs_tile_fp16>(be, dqkv, dr, dr_w_bias, dr_r_bias, dctx, ctx, lse, dqkv16, dr16, g);
  else if (be->precision == HS_PRECISION_TF32)
    backward_t<hs_tile_tf32>(be, dqkv, dr, dr_w_bias, dr_r_bias, dctx, ctx, lse, dqkv16, dr16, g);
  else
    backward_t<float>(be, dqkv, dr, dr_w_bias, dr_r_bias, dctx, ctx, lse, dqkv16, dr16, g);
}
