/* Fused (flash-style) scaled-dot-product attention on the CUDA backend (ops.def: flash_attention_forward
 * / _backward; the CPU's reference is src/backend/cpu/cpu_flash_attention.c). No L×L tensor is ever in
 * device memory: the scores of a tile of query rows against a tile of keys live in shared memory only.
 *
 *   qkv[B,L,3H]   per token q | k | v; head h of each third at columns h·d (H = heads·d), read in place;
 *                 or its 16-bit copy qkv16 (same layout), read instead when given (the tiles hold the same
 *                 bits under bf16/fp16: load_rows rounds either to T)
 *   ctx[B,L,H]    head h at columns h·d, written in place;  lse[B,heads,L] fp32 log-sum-exp per row
 *   dqkv[B,L,3H]  overwritten by the backward, written in place (no split/merge-heads copies)
 *
 * Forward, one block per (query tile of BQ rows, unit (b, h)): the Q tile stays in shared memory while
 * the K and V tiles of BK keys stream through one buffer. Online softmax (Milakov & Gimelshein 2018;
 * Dao et al. 2022), per row: s_j = q·k_j/√d + mask_bias[b,j]; m' = max(m, max_j s_j); α = e^{m - m'};
 * l ← α·l + Σ_j e^{s_j - m'}; O ← α·O + Σ_j e^{s_j - m'}·f_j·v_j (f_j the dropout factor keep/(1-p) or
 * 0, drawn from the same counters as the unfused op); at the end ctx = O/l and lse = m + log l.
 *
 * Backward (D_i = dctx_i·ctx_i = Σ_j P_ij dP_ij first, one thread per row):
 *   P_ij = e^{s_ij - lse_i};  dP'_ij = dctx_i·v_j;  dP_ij = f_ij·dP'_ij;  dS_ij = P_ij (dP_ij - D_i)
 *   dQ_i = Σ_j dS_ij k_j/√d   (one block per query tile, streaming K, V tiles)
 *   dK_j = Σ_i dS_ij q_i/√d,  dV_j = Σ_i P_ij f_ij dctx_i   (one block per key tile, streaming Q, dctx)
 * Each block owns its outputs and sums over the streamed tiles in increasing order: deterministic, no
 * atomics. P and the dropout are recomputed in both backward kernels (no mask buffer).
 *
 * Tile products are kernels/tile_mma.cuh's warp_tile_mma, a warp per 16×16 output tile. Operands are
 * stored in T: float under fp32/tf32, hs_tile_bf16/hs_tile_fp16 under bf16/fp16 — the values the unfused
 * path's GEMMs would round (Q, K; P', V; dctx, V; P', dctx; dS, K; dS, Q), P' and dS rounded from fp32 as
 * they are stored. Tiles keep warp_tile_mma's rules: head_dim padded with zeros to DP (a multiple of 16),
 * key/query padding rows zero, row lengths DMAX, BQ, BK (multiples of 16), every tile 32-byte aligned.
 * Shared memory (static, under 48 KiB): DMAX = 64 or 128 picks the tile sizes (head_dim up to 128). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "flash_tiles.cuh"
#include "tile_mma.cuh"
#include "mma_sync.cuh"
#include "slots.cuh"
#include "warp.cuh"
#include "math/dropout.h"
#include "math/fast_exp_erf.h"
#include "math/softmax.h"
#include "util/lowp.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_ops.h"
#include "util/check.h"

namespace {

constexpr int kWarps = 4, kThreads = kWarps * HS_WARP;

/* The shape of one call, as the kernels read it. */
struct flash_shape {
  int L, heads, d, dp; /* dp: d rounded up to 16 (the products' k, zero padded) */
  float scale, p;
  hs_dropout_rate rate; /* p as the draws compare it, and 1/(1-p) */
  uint64_t key;
  int64_t first_sample;
  const hs_dropout_slot *slot; /* key and first_sample in device memory (a graph region), or NULL */
  uint16_t *out16;      /* NULL, or the 16-bit twin of the output (ctx16 / dqkv16, same layout): to_half's bits */
  const uint16_t *in16; /* NULL, or qkv16: the 16-bit q|k|v read instead of qkv */
  uint16_t *qkv16_out;  /* forward: NULL, or receives round(qkv) (to_half's bits) from the tiles it loads */
  const uint16_t *dctx16; /* backward with 16-bit tiles: dctx rounded by the row-dot kernel, read by dQ and
                           * dK/dV instead of dctx (the same tile values, half the bytes); else NULL */
  int bf16;             /* out16's, in16's and qkv16_out's type: 1 bfloat16, 0 IEEE half */
};

/* dst[rows][dp] = rows row0.. of q, k, v or dctx (src, row stride ld: head h's columns), from its 16-bit
 * copy src16 when there is one (flash_tiles.cuh load_rows, either form: the same tile values) */
template <class T>
__device__ __forceinline__ void load_head_rows(T *dst, int rows, int dp, const flash_shape &s, const float *src,
                                         const uint16_t *src16, size_t ld, int row0) {
  if (src16)
    load_rows(dst, rows, dp, src16, s.bf16, ld, row0, s.L, s.d);
  else
    load_rows(dst, rows, dp, src, ld, row0, s.L, s.d, (const float *)nullptr);
}

/* head h's q of sample b in the 16-bit copy (k, v: + H, + 2H), or NULL without one */
__device__ __forceinline__ const uint16_t *qkv16_of(const flash_shape &s, int b, int h) {
  const size_t H = (size_t)s.heads * s.d;
  return s.in16 ? s.in16 + (size_t)b * (size_t)s.L * 3 * H + (size_t)h * (size_t)s.d : nullptr;
}

/* out[i] = v, and its 16-bit twin when the call asked for one (the rounding of src/util/lowp.h, as to_half);
 * out NULL: the twin alone (the forward's ctx under the 16-bit dataflow) */
__device__ __forceinline__ void put(const flash_shape &s, float *out, size_t i, float v) {
  if (out) out[i] = v;
  if (s.out16) s.out16[i] = s.bf16 ? hs_bf16_bits(v) : hs_fp16_bits(v);
}

/* The forward's copy of q|k|v in 16 bits (qkv16_out): rows row0.. of a loaded tile (row stride DMAX, the
 * bits of the tile's values rounded to the output's type: to_half's bits of the fp32 input, as load_rows
 * rounds it to a 16-bit T the same way) into the copy's head-h columns starting at dst (row stride ld) */
template <class T>
__device__ __forceinline__ void keep_rows16(const flash_shape &s, uint16_t *dst, const T *tile, int stride, int rows,
                                            size_t ld, int row0) {
  for (int idx = threadIdx.x; idx < rows * s.d; idx += blockDim.x) {
    const int r = idx / s.d, e = idx % s.d;
    if (row0 + r >= s.L) continue;
    const float v = tile_value(tile[r * stride + e]);
    dst[(size_t)(row0 + r) * ld + e] = s.bf16 ? hs_bf16_bits(v) : hs_fp16_bits(v);
  }
}

/* The key of unit (b, h)'s sample for its dropout draws (kernels/math/dropout.h), made once per thread after
 * hs_dropout_slot_resolve (2 registers held, where the site key and first sample took 4); 0 without dropout */
__device__ __forceinline__ uint64_t unit_sample_key(const flash_shape &s, int b) {
  return s.p > 0.0f ? hs_attention_sample_key(s.key, (uint64_t)(s.first_sample + b)) : 0;
}

/* The dropout key of query row i of head h (hs_attention_row_key) */
__device__ __forceinline__ uint32_t row_key_of(const flash_shape &s, uint64_t sample_key, int h, int i) {
  return hs_attention_row_key(sample_key, hs_attention_dropout_row(h, i, s.L));
}

/* The dropout factors of keys j and j + 1 (j even) in the query row whose key is row_key, in the sample
 * whose key is sample_key, from one hash (hs_attention_pair_factors): keep/(1-p), or 1 without dropout.
 * The loops below take a row's keys two at a time. */
__device__ __forceinline__ void drop_factors2(const flash_shape &s, uint64_t sample_key, uint32_t row_key, int j,
                                              float f[2]) {
  if (s.p <= 0.0f) {
    f[0] = f[1] = 1.0f;
    return;
  }
  hs_attention_pair_factors(sample_key, row_key, (uint32_t)j >> 1, s.rate, &f[0], &f[1]);
}

/* A warp's share of an output of `tiles` 16 x 16 tiles (row-major, tiles_per_row to a row of tiles),
 * summed over the loop in registers: tile t = warp + kWarps·n is acc[n] (at most N per warp). */
template <class T, int N> struct warp_tiles {
  tile_acc<T> acc[N];
  __device__ __forceinline__ void zero() {
    HS_UNROLL
    for (int n = 0; n < N; n++) acc[n].zero();
  }
  /* f(acc[n], tile row, tile column) for each of the warp's tiles t < tiles (a product into it, a scaling) */
  template <class F> __device__ __forceinline__ void each(int warp, int tiles, int tiles_per_row, F &&f) {
    HS_UNROLL
    for (int n = 0; n < N; n++) {
      const int t = warp + kWarps * n; /* warp-uniform */
      if (t < tiles) f(acc[n], t / tiles_per_row, t % tiles_per_row);
    }
  }
  /* out(row, column, value) for each element of the warp's tiles, through its 16 x 16 staging tile in
   * shared memory (the padded head columns and rows past L are the caller's to skip) */
  template <class Out>
  __device__ __forceinline__ void write(int warp, int tiles, int tiles_per_row, float *stage, Out &&out) {
    HS_UNROLL
    for (int n = 0; n < N; n++) {
      const int t = warp + kWarps * n, r0 = (t / tiles_per_row) * kTile, c0 = (t % tiles_per_row) * kTile;
      if (t < tiles) acc[n].write(stage, [&](int r, int c, float v) { out(r0 + r, c0 + c, v); });
    }
  }
};

/* ---- forward ------------------------------------------------------------------------------------------- */

/* The forward keeps the unnormalised output O [BQ, dp] in registers (tile_acc: WMMA fragments on tensor
 * cores, 8 floats a lane on the scalar path): the α·O rescale of each key step is a multiply per
 * register, where in shared memory it read and wrote all of O, and the P'·V products load and store no
 * C. Resident blocks per SM asked of the register allocator: 16-bit tiles 6 up to head_dim 64 (at most
 * 80 registers a thread; ptxas needs 78–80, and spills at 72) and 5 beyond (96: at 80 the head_dim-128
 * forward spilled 40 bytes on sm_90), TF32 tiles 5 (96; they spill at 80), the scalar path 5 (96: fp32
 * tiles, and bf16 or TF32 before sm_80; ptxas needs 89–96, and spills at 80).
 * tests/cuda/test_kernel_spills.sh holds every fused attention kernel to no spill on sm_75, sm_80, sm_90. */
template <class T> constexpr bool kTf32Tiles = std::is_same<T, hs_tile_tf32>::value;
template <class T, int DMAX>
constexpr int kFwdBlocksPerSM = tile_on_tensor_cores<T> && !kTf32Tiles<T> ? (DMAX <= 64 ? 6 : 5) : 5;

template <class T, int DMAX, int BQ, int BK> struct fwd_smem {
  alignas(32) T q[BQ * DMAX];  /* the query tile */
  alignas(32) T kv[BK * DMAX]; /* a K tile, then the V tile of the same keys */
  alignas(32) T p[BQ * BK];    /* e^{s - m}·f, the P'·V operand */
  /* S [BQ,BK] in the loop; before and after it each warp's 16 x 16 scratch and staging tile */
  alignas(32) float s[imax(BQ * BK, kWarps * kTile * kTile)];
  float m[BQ], l[BQ], alpha[BQ];
};

template <class T, int DMAX, int BQ, int BK>
__global__ void __launch_bounds__(kThreads, kFwdBlocksPerSM<T, DMAX>)
    flash_attention_forward_kernel(float *ctx, float *lse, const float *qkv, const float *mask_bias, flash_shape sh) {
  hs_dropout_slot_resolve(sh); /* the slot read once per thread, not per element */
  typedef fwd_smem<T, DMAX, BQ, BK> smem_t;
  HS_SHARED(smem_t, sm);
  const int unit = blockIdx.y, b = unit / sh.heads, h = unit % sh.heads, i0 = blockIdx.x * BQ;
  const uint64_t sample_key = unit_sample_key(sh, b);
  const int L = sh.L, d = sh.d, H = sh.heads * d, warp = threadIdx.x / HS_WARP;
  const size_t ld = 3 * (size_t)H;
  const float *q = qkv + (size_t)b * (size_t)L * ld + (size_t)h * (size_t)d, *k = q + H, *v = q + 2 * H;
  const uint16_t *q16 = qkv16_of(sh, b, h), *k16 = q16 ? q16 + H : nullptr, *v16 = q16 ? q16 + 2 * H : nullptr;
  const float *mb = mask_bias + (size_t)b * (size_t)L;
  /* qkv16_out: every block its query rows; the first query tile's block the keys' k and v, as it streams them */
  uint16_t *q_out = sh.qkv16_out ? sh.qkv16_out + (size_t)b * (size_t)L * ld + (size_t)h * (size_t)d : nullptr;
  uint16_t *kv_out = q_out && blockIdx.x == 0 ? q_out + H : nullptr;
  /* the unnormalised output O [BQ, dp] in registers, the warps' tiles of 16 x 16 */
  const int o_tiles = (BQ / kTile) * (sh.dp / kTile), o_per_row = sh.dp / kTile;
  constexpr int omax = (BQ / kTile) * (DMAX / kTile);
  warp_tiles<T, ceil_div(omax, kWarps)> o;
  typename tile_acc<T>::rows_t o_rows;
  o.zero();
  o_rows.init(sm.s + warp * kTile * kTile); /* S is written after the loop's first barrier */
  load_head_rows(sm.q, BQ, DMAX, sh, q, q16, ld, i0);
  if (threadIdx.x < BQ) sm.m[threadIdx.x] = -INFINITY, sm.l[threadIdx.x] = 0.0f;
  /* the dropout key of this thread's softmax row (below: kThreads / BQ threads per row) */
  const uint32_t row_key = row_key_of(sh, sample_key, h, i0 + (int)threadIdx.x / (kThreads / BQ));
  for (int j0 = 0; j0 < L; j0 += BK) {
    load_head_rows(sm.kv, BK, DMAX, sh, k, k16, ld, j0);
    __syncthreads();
    if (q_out && j0 == 0) keep_rows16(sh, q_out, sm.q, DMAX, BQ, ld, i0);
    if (kv_out) keep_rows16(sh, kv_out, sm.kv, DMAX, BK, ld, j0); /* read before the V tile replaces it */
    /* S[BQ,BK] = Q·Kᵀ */
    for (int t = warp; t < (BQ / kTile) * (BK / kTile); t += kWarps) {
      const int ti = t / (BK / kTile), tj = t % (BK / kTile);
      warp_tile_mma(sm.s + ti * kTile * BK + tj * kTile, BK, sm.q + ti * kTile * DMAX, DMAX,
                    sm.kv + tj * kTile * DMAX, DMAX, sh.dp, true, false);
    }
    __syncthreads();
    /* the online softmax, kRowThreads adjacent threads per row (every thread of the block: the exps and
     * the dropout draws are most of the kernel's instructions), thread t of a row taking columns
     * t + kRowThreads·c; the row's max and sum by a butterfly over its threads */
    {
      constexpr int kRowThreads = kThreads / BQ;
      static_assert(kThreads % BQ == 0 && HS_WARP % kRowThreads == 0, "a row's threads lie in one warp");
      const int r = threadIdx.x / kRowThreads, part = threadIdx.x % kRowThreads, i = i0 + r;
      const int n = L - j0 < BK ? L - j0 : BK;
      float *s = sm.s + r * BK;
      const float m_old = sm.m[r];
      float m = m_old;
      for (int j = part; j < n; j += kRowThreads) {
        s[j] = s[j] * sh.scale + mb[j0 + j];
        m = s[j] > m ? s[j] : m;
      }
      m = group_max<kRowThreads>(m);
      const float alpha = tile_softmax_exp<T>(m_old - m); /* 0 on the first tile (e^{-inf}) */
      float sum = 0.0f;
      /* keys two at a time (j0 and BK even): one dropout hash for both */
      static_assert(BK % 2 == 0, "key pairs");
      for (int j = 2 * part; j < BK; j += 2 * kRowThreads) {
        float f[2];
        drop_factors2(sh, sample_key, row_key, j0 + j, f);
        for (int c = 0; c < 2; c++) {
          float pj = 0.0f;
          if (j + c < n) {
            const float e = tile_softmax_exp<T>(s[j + c] - m);
            sum += e;
            pj = i < L ? e * f[c] : 0.0f;
          }
          tile_store(sm.p[r * BK + j + c], pj);
        }
      }
      sum = group_sum<kRowThreads>(sum);
      __syncwarp(); /* every thread of the row (one warp's) has read sm.m[r] */
      if (part == 0) {
        sm.l[r] = sm.l[r] * alpha + sum;
        sm.m[r] = m;
        sm.alpha[r] = alpha;
      }
    }
    __syncthreads();
    /* the V tile into the K tile's buffer (S is computed) */
    load_head_rows(sm.kv, BK, DMAX, sh, v, v16, ld, j0);
    __syncthreads();
    if (kv_out) keep_rows16(sh, kv_out + H, sm.kv, DMAX, BK, ld, j0);
    /* O[BQ,dp] ← α·O + P'·V */
    o.each(warp, o_tiles, o_per_row, [&](tile_acc<T> &acc, int ti, int tn) {
      acc.scale_rows(sm.alpha + ti * kTile, o_rows);
      acc.mma(sm.p + ti * kTile * BK, BK, sm.kv + tn * kTile, DMAX, BK, false);
    });
    __syncthreads();
  }
  /* ctx = O / l; from registers through the warps' staging tiles (S is free) */
  auto out = [&](int r, int e, float v) {
    if (i0 + r < L && e < d) put(sh, ctx, ((size_t)b * L + i0 + r) * H + (size_t)h * d + e, v / sm.l[r]);
  };
  o.write(warp, o_tiles, o_per_row, sm.s + warp * kTile * kTile, out);
  if (threadIdx.x < BQ && i0 + (int)threadIdx.x < L)
    lse[(size_t)unit * L + i0 + threadIdx.x] = sm.m[threadIdx.x] + logf(sm.l[threadIdx.x]);
}

/* ---- forward on register fragments (16-bit tiles, head_dim <= 64, sm_80 and later) ---------------------- */

/* The same forward with the scores, probabilities and output in registers (FlashAttention-2's layout,
 * Dao 2023): a block of 4 warps per (tile of 64 query rows, unit (b, h)), each warp 16 query rows; per
 * tile of 64 keys a warp computes S [16, 64] = Q·Kᵀ with
 * mma.sync m16n8k16 (kernels/mma_sync.cuh) into registers, the online softmax on the values it holds (a
 * row lies in the 4 lanes of a quad: its max and sum by two shuffles), rounds P' = e^{s - m}·f straight
 * into the A fragments of O += P'·V and rescales O [16, 64] in registers. Shared memory holds only the
 * Q, K and V tiles, row-major as they are in q|k|v; every fragment comes from them by ldmatrix (one
 * instruction per A fragment or per two B fragments; .trans for V's, kernels/mma_sync.cuh). Two barriers
 * per key tile where the WMMA kernel above makes five and writes S and P to shared memory and reads them
 * back. The same values in the same roles (Q, K, P', V rounded to T; s = q·k·scale + mask; the exps, the
 * dropout draws, lse = m + log l, ctx = O / l), the products' sums in another order: within the same
 * bounds. Rows of the tiles are kRegsRow 16-bit values (144 bytes) apart: the 8 rows of 16 bytes one
 * matrix of an ldmatrix reads (consecutive tile rows, one column block) then lie in 8 different 16-byte
 * bank groups (144·r mod 128 = 16·r), no conflict; the loaders' 16-byte stores fill a row per 8 lanes. */
constexpr int kRegsTile = 64, kRegsRow = kRegsTile + 8;
/* resident blocks per SM the register kernels ask of the register allocator: 4 (128 registers a thread; 16
 * warps an SM) */
constexpr int kRegsBlocksPerSM = 4;

struct fwd_regs_smem {
  alignas(16) uint16_t q[kRegsTile * kRegsRow]; /* q[row][dim] */
  alignas(16) uint16_t k[kRegsTile * kRegsRow]; /* k[key][dim] */
  alignas(16) uint16_t v[kRegsTile * kRegsRow]; /* v[key][dim] */
};

/* Where a loader puts tile row r (of kRegsRow values each): row r, or with paired the row that makes keys 2g
 * and 2g + 1 of each 16 (the dK/dV kernel's fragment rows g and g + 8) rows g and g + 8, so that kernel's
 * A fragments are plain ldmatrix loads of consecutive rows (its even keys 2·144 bytes apart hit 4 bank
 * groups twice) */
__device__ __forceinline__ int regs_row_at(int r, bool paired) {
  return paired ? (r & ~15) | (r & 1) << 3 | (r & 15) >> 1 : r;
}

/* ROWS rows row0 .. of q, k, v or dctx (head h's columns of src or src16, row stride ld) rounded to the
 * 16-bit type as load_rows rounds them, into dst[regs_row_at(row, paired)][dim], kRegsRow values a row;
 * rows past L and dims past d (up to 64) are 0. Block-wide. */
template <bool BF16, int ROWS>
__device__ __forceinline__ void regs_load_rows(uint16_t *dst, bool paired, const flash_shape &s, const float *src,
                                               const uint16_t *src16, size_t ld, int row0) {
  static_assert(kRegsRow % 8 == 0, "rows of whole 16-byte blocks (ldmatrix's rows)");
  /* 16-bit rows whose head columns start 16-byte aligned (BERT's head_dim 64 in its q|k|v copy): 8 values
   * per 16-byte load, 8 threads a row */
  if (src16 && s.d % 8 == 0 && ld % 8 == 0 && ((uintptr_t)src16 & 15u) == 0) {
    for (int idx = threadIdx.x; idx < ROWS * (kRegsTile / 8); idx += blockDim.x) {
      const int r = idx / (kRegsTile / 8), e = idx % (kRegsTile / 8) * 8, row = row0 + r;
      uint4 w = {0u, 0u, 0u, 0u};
      if (row < s.L && e < s.d) w = *HS_VECTOR_AT(const uint4, src16 + (size_t)row * ld + e);
      *HS_VECTOR_AT(uint4, dst + regs_row_at(r, paired) * kRegsRow + e) = w;
    }
    return;
  }
  for (int idx = threadIdx.x; idx < ROWS * kRegsTile; idx += blockDim.x) {
    const int r = idx / kRegsTile, e = idx % kRegsTile, row = row0 + r;
    uint16_t u = 0;
    if (row < s.L && e < s.d) {
      const size_t at = (size_t)row * ld + e;
      u = src16 ? src16[at] : (BF16 ? hs_bf16_bits(src[at]) : hs_fp16_bits(src[at]));
    }
    dst[regs_row_at(r, paired) * kRegsRow + e] = u;
  }
}

/* The A fragment of rows row0 .. row0 + 15, columns c0 .. c0 + 15 of a row-major tile in shared memory
 * (kRegsRow values a row): one ldmatrix, its matrices a[0..3] = (rows 0-7 | 8-15) × (columns 0-7 | 8-15) in
 * kernels/mma_sync.cuh's order; lane l names row row0 + l % 8 + 8·(l / 8 mod 2), column c0 + 8·(l / 16) */
__device__ __forceinline__ void regs_a_fragment(uint32_t a[4], const uint16_t *tile, int row0, int c0, int lane) {
  hs_ldmatrix_x4<false>(a, tile + (row0 + (lane & 7) + (lane & 8)) * kRegsRow + c0 + (lane >> 4 << 3));
}
/* The B fragments of two 8-column tiles, columns n0 .. n0 + 15 (b[0..1] the first, b[2..3] the second), k rows
 * k0 .. k0 + 15, of a B stored [n][k] (row n of the tile is column n of B: K for Q·Kᵀ, Q and dC for K·Qᵀ and
 * V·dCᵀ): one ldmatrix, matrices (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15); lane l
 * names row n0 + l % 8 + 8·(l / 16), column k0 + 8·(l / 8 mod 2) */
/* The B fragment of one 8-column tile, columns n0 .. n0 + 7, k rows k0 .. k0 + 15, of a B stored [n][k]: one
 * ldmatrix.x2, matrices (k 0-7), (k 8-15); lane l < 16 names row n0 + l % 8, column k0 + 8·(l / 8) (the other
 * lanes' addresses are not read; they name the same rows) */
__device__ __forceinline__ void regs_b_fragment(uint32_t b[2], const uint16_t *tile, int n0, int k0, int lane) {
  hs_ldmatrix_x2(b, tile + (n0 + (lane & 7)) * kRegsRow + k0 + (lane & 8));
}
__device__ __forceinline__ void regs_b_fragments2(uint32_t b[4], const uint16_t *tile, int n0, int k0, int lane) {
  hs_ldmatrix_x4<false>(b, tile + (n0 + (lane & 7) + (lane >> 4 << 3)) * kRegsRow + k0 + (lane & 8));
}

/* The A fragment [16 x 16] of two C tiles [16 x 8] side by side (columns 0-7 and 8-15), rounded to the
 * 16-bit type: a product's result as the next product's operand without leaving the registers (the C
 * layout of a lane's elements is the A layout's, kernels/mma_sync.cuh) */
template <bool BF16> __device__ __forceinline__ void regs_a_of_c(uint32_t a[4], const float lo[4], const float hi[4]) {
  a[0] = hs_mma_pack2<BF16>(lo[0], lo[1]), a[1] = hs_mma_pack2<BF16>(lo[2], lo[3]);
  a[2] = hs_mma_pack2<BF16>(hi[0], hi[1]), a[3] = hs_mma_pack2<BF16>(hi[2], hi[3]);
}

/* acc[n] += A·B_n for the dtiles 8-column tiles n of a B [16 x 8·dtiles] stored row-major [k][n] (V for
 * P'·V, K for dS·K, dC and Q for P'ᵀ·dC and dSᵀ·Q), its k rows from k0: a warp's [16, 64] output. Per two
 * tiles one ldmatrix.trans, matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15); lane
 * l names row k0 + l % 8 + 8·(l / 8 mod 2), column 16p + 8·(l / 16). dtiles is even (head_dim padded to 16). */
template <bool BF16>
__device__ __forceinline__ void regs_mma_row(float acc[8][4], const uint32_t a[4], const uint16_t *tile, int k0, int dtiles,
                                             int lane) {
  const uint16_t *row = tile + (k0 + (lane & 7) + (lane & 8)) * kRegsRow + (lane >> 4 << 3);
  HS_UNROLL
  for (int p = 0; p < 4; p++) {
    if (2 * p >= dtiles) break;
    uint32_t bf[4];
    hs_ldmatrix_x4<true>(bf, row + 16 * p);
    hs_mma_16816<BF16>(acc[2 * p], a, bf);
    hs_mma_16816<BF16>(acc[2 * p + 1], a, bf + 2);
  }
}

/* out(r, e, acc[n][2r + c]) for each element a lane holds of a [16, 64] output: fragment row g + 8r, column
 * e = 8n + 2t + c < d */
template <class Out> __device__ __forceinline__ void regs_each_output(const float acc[8][4], int t, int d, Out &&out) {
  HS_UNROLL
  for (int r = 0; r < 2; r++)
    HS_UNROLL
    for (int n = 0; n < 8; n++)
      HS_UNROLL
      for (int c = 0; c < 2; c++) {
        const int e = 8 * n + 2 * t + c;
        if (e < d) out(r, e, acc[n][2 * r + c]);
      }
}

/* The forward's copy of q|k|v in 16 bits (qkv16_out): the rows row0 .. of a loaded tile (kRegsRow values a
 * row), which hold to_half's bits of the fp32 input, into the copy's head-h columns starting at dst (row
 * stride ld). Block-wide. */
template <int ROWS>
__device__ __forceinline__ void regs_keep_rows16(const flash_shape &s, uint16_t *dst, const uint16_t *tile, size_t ld,
                                                 int row0) {
  for (int idx = threadIdx.x; idx < ROWS * s.d; idx += blockDim.x) {
    const int r = idx / s.d, e = idx % s.d;
    if (row0 + r < s.L) dst[(size_t)(row0 + r) * ld + e] = tile[r * kRegsRow + e];
  }
}

/* A register kernel's block (blockIdx.y: unit (b, h)): head h's columns of sample b in q|k|v (and its 16-bit
 * copy, or NULL), in dctx and its 16-bit copy (the backward's; NULL in the forward), the sample's mask row
 * and dropout key; and the calling lane's place, warp and (g, t) = (lane / 4, lane % 4) */
struct regs_block {
  int b, h, H, warp, lane, g, t;
  size_t ld; /* q|k|v's row stride, 3H */
  uint64_t sample_key;
  const float *q, *k, *v, *dc, *mb;
  const uint16_t *q16, *k16, *v16, *dc16;
};
__device__ __forceinline__ regs_block regs_block_of(flash_shape &sh, const float *qkv, const float *dctx,
                                                    const float *mask_bias) {
  hs_dropout_slot_resolve(sh); /* the slot read once per thread, not per element */
  regs_block u;
  u.b = blockIdx.y / sh.heads, u.h = blockIdx.y % sh.heads, u.H = sh.heads * sh.d;
  u.warp = threadIdx.x / HS_WARP, u.lane = threadIdx.x % HS_WARP, u.g = u.lane >> 2, u.t = u.lane & 3;
  u.ld = 3 * (size_t)u.H;
  u.sample_key = unit_sample_key(sh, u.b);
  u.q = qkv + (size_t)u.b * (size_t)sh.L * u.ld + (size_t)u.h * (size_t)sh.d, u.k = u.q + u.H, u.v = u.q + 2 * u.H;
  u.q16 = qkv16_of(sh, u.b, u.h);
  u.k16 = u.q16 ? u.q16 + u.H : nullptr, u.v16 = u.q16 ? u.q16 + 2 * u.H : nullptr;
  const size_t dc_off = (size_t)u.b * (size_t)sh.L * (size_t)u.H + (size_t)u.h * (size_t)sh.d;
  u.dc = dctx ? dctx + dc_off : nullptr;
  u.dc16 = sh.dctx16 ? sh.dctx16 + dc_off : nullptr;
  u.mb = mask_bias + (size_t)u.b * (size_t)sh.L;
  return u;
}

template <bool BF16>
__global__ void __launch_bounds__(kThreads, kRegsBlocksPerSM)
    flash_attention_forward_regs_kernel(float *ctx, float *lse, const float *qkv, const float *mask_bias,
                                        flash_shape sh) {
  typedef typename std::conditional<BF16, hs_tile_bf16, hs_tile_fp16>::type T;
  HS_SHARED(fwd_regs_smem, sm);
  const regs_block u = regs_block_of(sh, qkv, nullptr, mask_bias);
  const int unit = blockIdx.y, b = u.b, h = u.h, i0 = blockIdx.x * kRegsTile, L = sh.L, d = sh.d, H = u.H;
  const int warp = u.warp, lane = u.lane, t = u.t;
  const uint64_t sample_key = u.sample_key;
  const size_t ld = u.ld;
  const float *mb = u.mb;
  const int ksteps = sh.dp / 16, dtiles = sh.dp / 8; /* the products' k steps over head_dim; O's 8-wide tiles */
  /* this lane's two query rows (tile rows r0 and r0 + 8) and their dropout keys (made only with dropout on) */
  const int r0 = warp * 16 + u.g;
  const bool drop = sh.p > 0.0f;
  const uint32_t row_key[2] = {drop ? row_key_of(sh, sample_key, h, i0 + r0) : 0u,
                               drop ? row_key_of(sh, sample_key, h, i0 + r0 + 8) : 0u};

  regs_load_rows<BF16, kRegsTile>(sm.q, false, sh, u.q, u.q16, ld, i0); /* read by the first key tile's barrier on */
  /* qkv16_out: every block its query rows; the first query tile's block the keys' k and v, as it loads them */
  uint16_t *q_out = sh.qkv16_out ? sh.qkv16_out + (size_t)b * (size_t)L * ld + (size_t)h * (size_t)d : nullptr;
  uint16_t *kv_out = q_out && blockIdx.x == 0 ? q_out + H : nullptr;
  float o[8][4]; /* O [16, 64]: 8 tiles of 16 x 8 */
  HS_UNROLL
  for (int n = 0; n < 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  for (int j0 = 0; j0 < L; j0 += kRegsTile) {
    __syncthreads(); /* every warp is done with the previous K and V tiles */
    regs_load_rows<BF16, kRegsTile>(sm.k, false, sh, u.k, u.k16, ld, j0);
    regs_load_rows<BF16, kRegsTile>(sm.v, false, sh, u.v, u.v16, ld, j0);
    __syncthreads();
    if (q_out && j0 == 0) regs_keep_rows16<kRegsTile>(sh, q_out, sm.q, ld, i0);
    if (kv_out) {
      regs_keep_rows16<kRegsTile>(sh, kv_out, sm.k, ld, j0);
      regs_keep_rows16<kRegsTile>(sh, kv_out + H, sm.v, ld, j0);
    }
    /* S [16, 64] = Q·Kᵀ: tile n holds keys j0 + 8n .. + 7; tiles past L are skipped (warp-uniform). The
     * warp's Q fragments are reloaded from shared memory per k step (16 loads a key tile) rather than held:
     * held, they took 16 registers more than the 128 a thread has at 4 blocks an SM, and spilled. */
    float s[8][4];
    HS_UNROLL
    for (int n = 0; n < 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
    HS_UNROLL
    for (int ks = 0; ks < 4; ks++) {
      if (ks >= ksteps) break;
      uint32_t qa[4];
      regs_a_fragment(qa, sm.q, warp * 16, 16 * ks, lane);
      HS_UNROLL
      for (int n = 0; n < 8; n += 2) { /* key tiles n and n + 1 (rows past L are zeros in sm.k) */
        if (j0 + 8 * n >= L) break;
        uint32_t kb[4];
        regs_b_fragments2(kb, sm.k, 8 * n, 16 * ks, lane);
        hs_mma_16816<BF16>(s[n], qa, kb);
        if (j0 + 8 * n + 8 < L) hs_mma_16816<BF16>(s[n + 1], qa, kb + 2);
      }
    }
    /* s = q·k·scale + mask, -inf past L; the rows' maxima over the quad */
    float mx[2] = {m[0], m[1]};
    HS_UNROLL
    for (int n = 0; n < 8; n++)
      HS_UNROLL
      for (int e = 0; e < 4; e++) {
        const int j = j0 + 8 * n + 2 * t + (e & 1);
        const float x = j < L ? s[n][e] * sh.scale + mb[j] : -INFINITY;
        s[n][e] = x;
        mx[e >> 1] = fmaxf(mx[e >> 1], x);
      }
    float alpha[2], sum[2] = {0.0f, 0.0f};
    HS_UNROLL
    for (int r = 0; r < 2; r++) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      alpha[r] = tile_softmax_exp<T>(m[r] - mx[r]); /* 0 on the first tile (e^{-inf}) */
      m[r] = mx[r];
    }
    /* P' = e^{s - m}·f, keys two at a time (one dropout hash for both); l sums e^{s - m} before the dropout */
    HS_UNROLL
    for (int n = 0; n < 8; n++) {
      const int j = j0 + 8 * n + 2 * t; /* even */
      HS_UNROLL
      for (int r = 0; r < 2; r++) {
        float f[2];
        drop_factors2(sh, sample_key, row_key[r], j, f);
        HS_UNROLL
        for (int c = 0; c < 2; c++) {
          const float e = tile_softmax_exp<T>(s[n][2 * r + c] - m[r]); /* 0 past L */
          sum[r] += e;
          s[n][2 * r + c] = e * f[c];
        }
      }
    }
    HS_UNROLL
    for (int r = 0; r < 2; r++) {
      sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 1);
      sum[r] += __shfl_xor_sync(0xffffffffu, sum[r], 2);
      l[r] = l[r] * alpha[r] + sum[r];
    }
    HS_UNROLL
    for (int n = 0; n < 8; n++) o[n][0] *= alpha[0], o[n][1] *= alpha[0], o[n][2] *= alpha[1], o[n][3] *= alpha[1];
    /* O += P'·V: k step kk takes keys j0 + 16kk .. + 15, score tiles 2kk and 2kk + 1 as its A fragment */
    HS_UNROLL
    for (int kk = 0; kk < 4; kk++) {
      if (j0 + 16 * kk >= L) break;
      uint32_t pa[4];
      regs_a_of_c<BF16>(pa, s[2 * kk], s[2 * kk + 1]);
      regs_mma_row<BF16>(o, pa, sm.v, 16 * kk, dtiles, lane);
    }
  }
  /* ctx = O / l (each lane holds l of its rows, summed over the quad); lse = m + log l */
  regs_each_output(o, t, d, [&](int r, int e, float v) {
    const int i = i0 + r0 + 8 * r;
    if (i < L) put(sh, ctx, ((size_t)b * L + i) * H + (size_t)h * d + e, v / l[r]);
  });
  HS_UNROLL
  for (int r = 0; r < 2; r++) {
    const int i = i0 + r0 + 8 * r;
    if (i < L && t == 0) lse[(size_t)unit * L + i] = m[r] + logf(l[r]);
  }
}

/* ---- backward ------------------------------------------------------------------------------------------ */

/* Resident blocks per SM the backward kernels ask the register allocator for (__launch_bounds__): on
 * tensor cores with 16-bit tiles (whose 17–22 KiB of shared memory a block would allow 10–12), dQ 8 (at
 * most 64 registers a thread; it needs 58–63) and dK/dV 6 (at most 80; 78–80 with its dK and dV
 * fragments), where ptxas alone takes 72 and 94 and so holds them to 7 and 5; with TF32 tiles 6 and 5
 * (80 and 96: at 64 and 80 they spill; beyond head_dim 64 dK/dV 4, 128 registers: at 96 it spilled 4
 * bytes on sm_90); on the scalar path (fp32 tiles, or bf16 and TF32 before sm_80) 5 and 4 (at most 102
 * and 128 registers; ptxas takes 80–83 and 122–128). */
template <class T> constexpr int kDqBlocksPerSM = tile_on_tensor_cores<T> ? (kTf32Tiles<T> ? 6 : 8) : 5;
template <class T, int DMAX>
constexpr int kDkvBlocksPerSM = tile_on_tensor_cores<T> ? (kTf32Tiles<T> ? (DMAX <= 64 ? 5 : 4) : 6) : 4;

template <class T, int DMAX, int BQ, int BK> struct dq_smem {
  alignas(32) T q[BQ * DMAX];
  alignas(32) T dc[BQ * DMAX];
  alignas(32) T k[BK * DMAX];
  alignas(32) T v[BK * DMAX];
  alignas(32) T ds[BQ * BK];
  /* S [BQ,BK] then dP' [BQ,BK] in the loop; after it, each warp's staging tile of dQ [16,16] */
  alignas(32) float sdp[imax(2 * BQ * BK, kWarps * kTile * kTile)];
  float lse[BQ], D[BQ];
  uint32_t row_key[BQ]; /* the query rows' dropout keys, made once per row (a thread meets several rows) */
};

/* dQ of a tile of BQ query rows: Σ over key tiles of dS·K, times 1/√d at the end */
template <class T, int DMAX, int BQ, int BK>
__global__ void __launch_bounds__(kThreads, kDqBlocksPerSM<T>)
    flash_attention_dq_kernel(float *dqkv, const float *dctx, const float *qkv, const float *mask_bias,
                              const float *lse, const float *D, flash_shape sh) {
  hs_dropout_slot_resolve(sh); /* the slot read once per thread, not per element */
  typedef dq_smem<T, DMAX, BQ, BK> smem_t;
  HS_SHARED(smem_t, sm);
  const int unit = blockIdx.y, b = unit / sh.heads, h = unit % sh.heads, i0 = blockIdx.x * BQ;
  const uint64_t sample_key = unit_sample_key(sh, b);
  const int L = sh.L, d = sh.d, H = sh.heads * d, warp = threadIdx.x / HS_WARP;
  const size_t ld = 3 * (size_t)H;
  const float *q = qkv + (size_t)b * (size_t)L * ld + (size_t)h * (size_t)d, *k = q + H, *v = q + 2 * H;
  const uint16_t *q16 = qkv16_of(sh, b, h), *k16 = q16 ? q16 + H : nullptr, *v16 = q16 ? q16 + 2 * H : nullptr;
  const size_t dc_off = (size_t)b * (size_t)L * (size_t)H + (size_t)h * (size_t)d;
  const float *dc = dctx + dc_off;
  const uint16_t *dc16 = sh.dctx16 ? sh.dctx16 + dc_off : nullptr;
  const float *mb = mask_bias + (size_t)b * (size_t)L;
  float *const S = sm.sdp, *const dP = sm.sdp + BQ * BK;
  /* dQ [BQ, dp] in registers, the warps' tiles of 16 x 16 */
  const int dq_tiles = (BQ / kTile) * (sh.dp / kTile), dq_per_row = sh.dp / kTile;
  warp_tiles<T, ceil_div((BQ / kTile) * (DMAX / kTile), kWarps)> dq;
  dq.zero();
  load_head_rows(sm.q, BQ, DMAX, sh, q, q16, ld, i0);
  load_head_rows(sm.dc, BQ, DMAX, sh, dc, dc16, (size_t)H, i0);
  load_row_stats(sm.lse, BQ, lse + (size_t)unit * L, i0, L);
  load_row_stats(sm.D, BQ, D + (size_t)unit * L, i0, L);
  if (threadIdx.x < BQ) sm.row_key[threadIdx.x] = row_key_of(sh, sample_key, h, i0 + threadIdx.x);
  for (int j0 = 0; j0 < L; j0 += BK) {
    load_head_rows(sm.k, BK, DMAX, sh, k, k16, ld, j0);
    load_head_rows(sm.v, BK, DMAX, sh, v, v16, ld, j0);
    __syncthreads();
    /* S = Q·Kᵀ and dP' = dC·Vᵀ, [BQ,BK] each */
    constexpr int nt = (BQ / kTile) * (BK / kTile);
    for (int t = warp; t < 2 * nt; t += kWarps) {
      const int u = t % nt, ti = u / (BK / kTile), tj = u % (BK / kTile);
      if (t < nt)
        warp_tile_mma(S + ti * kTile * BK + tj * kTile, BK, sm.q + ti * kTile * DMAX, DMAX,
                      sm.k + tj * kTile * DMAX, DMAX, sh.dp, true, false);
      else
        warp_tile_mma(dP + ti * kTile * BK + tj * kTile, BK, sm.dc + ti * kTile * DMAX, DMAX,
                      sm.v + tj * kTile * DMAX, DMAX, sh.dp, true, false);
    }
    __syncthreads();
    /* dS = P (f·dP' - D), keys two at a time (BK even): one dropout hash for both */
    for (int idx = 2 * threadIdx.x; idx < BQ * BK; idx += 2 * blockDim.x) {
      const int r = idx / BK, c0 = idx % BK, i = i0 + r;
      float f[2];
      drop_factors2(sh, sample_key, sm.row_key[r], j0 + c0, f);
      for (int c = 0; c < 2; c++) {
        const int j = j0 + c0 + c;
        float ds = 0.0f;
        if (i < L && j < L) {
          const float pij = tile_softmax_exp<T>((S[idx + c] * sh.scale + mb[j]) - sm.lse[r]);
          ds = pij * (dP[idx + c] * f[c] - sm.D[r]);
        }
        tile_store(sm.ds[idx + c], ds);
      }
    }
    __syncthreads();
    /* dQ[BQ,dp] += dS·K */
    dq.each(warp, dq_tiles, dq_per_row, [&](tile_acc<T> &acc, int ti, int tn) {
      acc.mma(sm.ds + ti * kTile * BK, BK, sm.k + tn * kTile, DMAX, BK, false);
    });
    __syncthreads();
  }
  /* S and dP' are free: the warps' staging tiles */
  dq.write(warp, dq_tiles, dq_per_row, sm.sdp + warp * kTile * kTile, [&](int r, int e, float v) {
    if (i0 + r < L && e < d) put(sh, dqkv, ((size_t)b * L + i0 + r) * ld + (size_t)h * d + e, v * sh.scale);
  });
}

/* dQ on register fragments (16-bit tiles, head_dim <= 64, sm_80 and later): a block of 4 warps per (tile of
 * 64 query rows, unit (b, h)), each warp 16 rows, dQ [16, 64] in registers; per tile of 64 keys (in two
 * halves of 32, to hold S, dP' and dQ in 96 registers) a warp computes S = Q·Kᵀ and dP' = dC·Vᵀ into
 * registers with mma.sync, dS = P (f·dP' - D) with P = e^{s·scale + mask - lse} on the values it holds,
 * rounds dS straight into the A fragments of dQ += dS·K. Shared memory holds Q, dC, K and V row-major (K
 * the B operand of dS·K too, through ldmatrix.trans), two barriers per key tile where the WMMA kernel makes three and writes S, dP'
 * and dS to shared memory. The same values in the same roles as flash_attention_dq_kernel. */
struct dq_regs_smem {
  alignas(16) uint16_t q[kRegsTile * kRegsRow];  /* q[row][dim] */
  alignas(16) uint16_t dc[kRegsTile * kRegsRow]; /* dc[row][dim] */
  alignas(16) uint16_t k[kRegsTile * kRegsRow];  /* k[key][dim]: B of Q·Kᵀ, and by ldmatrix.trans of dS·K */
  alignas(16) uint16_t v[kRegsTile * kRegsRow];  /* v[key][dim] */
};
static_assert(sizeof(dq_regs_smem) <= 48 * 1024, "static shared memory above 48 KiB");

template <bool BF16>
__global__ void __launch_bounds__(kThreads, kRegsBlocksPerSM)
    flash_attention_dq_regs_kernel(float *dqkv, const float *dctx, const float *qkv, const float *mask_bias,
                                   const float *lse, const float *D, flash_shape sh) {
  typedef typename std::conditional<BF16, hs_tile_bf16, hs_tile_fp16>::type T;
  HS_SHARED(dq_regs_smem, sm);
  const regs_block u = regs_block_of(sh, qkv, dctx, mask_bias);
  const int unit = blockIdx.y, b = u.b, h = u.h, i0 = blockIdx.x * kRegsTile, L = sh.L, d = sh.d, H = u.H;
  const int warp = u.warp, lane = u.lane, t = u.t;
  const uint64_t sample_key = u.sample_key;
  const size_t ld = u.ld;
  const float *mb = u.mb;
  const int ksteps = sh.dp / 16, dtiles = sh.dp / 8;
  /* this lane's two query rows: their dropout keys (with dropout on), lse and D (0 past L, where nothing is
   * written) */
  const int r0 = warp * 16 + u.g;
  uint32_t row_key[2];
  float row_lse[2], row_D[2];
  HS_UNROLL
  for (int r = 0; r < 2; r++) {
    const int i = i0 + r0 + 8 * r;
    row_key[r] = sh.p > 0.0f ? row_key_of(sh, sample_key, h, i) : 0u;
    row_lse[r] = i < L ? lse[(size_t)unit * L + i] : 0.0f;
    row_D[r] = i < L ? D[(size_t)unit * L + i] : 0.0f;
  }
  regs_load_rows<BF16, kRegsTile>(sm.q, false, sh, u.q, u.q16, ld, i0);
  regs_load_rows<BF16, kRegsTile>(sm.dc, false, sh, u.dc, u.dc16, (size_t)H, i0);
  float dq[8][4]; /* dQ [16, 64]: 8 tiles of 16 x 8 */
  HS_UNROLL
  for (int n = 0; n < 8; n++) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.0f;

  for (int j0 = 0; j0 < L; j0 += kRegsTile) {
    __syncthreads(); /* every warp is done with the previous K and V tiles */
    regs_load_rows<BF16, kRegsTile>(sm.k, false, sh, u.k, u.k16, ld, j0);
    regs_load_rows<BF16, kRegsTile>(sm.v, false, sh, u.v, u.v16, ld, j0);
    __syncthreads();
    HS_UNROLL
    for (int half = 0; half < 2; half++) {
      const int jh = 32 * half; /* keys j0 + jh .. + 31: tile n holds keys j0 + jh + 8n .. + 7 */
      if (j0 + jh >= L) break;
      float s[4][4], dp[4][4];
      HS_UNROLL
      for (int n = 0; n < 4; n++)
        HS_UNROLL
        for (int e = 0; e < 4; e++) s[n][e] = dp[n][e] = 0.0f;
      /* S = Q·Kᵀ and dP' = dC·Vᵀ, [16, 32] each */
      HS_UNROLL
      for (int ks = 0; ks < 4; ks++) {
        if (ks >= ksteps) break;
        uint32_t qa[4], ca[4];
        regs_a_fragment(qa, sm.q, warp * 16, 16 * ks, lane);
        regs_a_fragment(ca, sm.dc, warp * 16, 16 * ks, lane);
        HS_UNROLL
        for (int n = 0; n < 4; n += 2) { /* key tiles n and n + 1 (rows past L are zeros in sm.k, sm.v) */
          if (j0 + jh + 8 * n >= L) break;
          uint32_t kb[4], vb[4];
          regs_b_fragments2(kb, sm.k, jh + 8 * n, 16 * ks, lane);
          regs_b_fragments2(vb, sm.v, jh + 8 * n, 16 * ks, lane);
          hs_mma_16816<BF16>(s[n], qa, kb);
          hs_mma_16816<BF16>(dp[n], ca, vb);
          if (j0 + jh + 8 * n + 8 < L) {
            hs_mma_16816<BF16>(s[n + 1], qa, kb + 2);
            hs_mma_16816<BF16>(dp[n + 1], ca, vb + 2);
          }
        }
      }
      /* dS = P (f·dP' - D), keys two at a time (one dropout hash for both); 0 past L */
      HS_UNROLL
      for (int n = 0; n < 4; n++) {
        const int j = j0 + jh + 8 * n + 2 * t; /* even */
        HS_UNROLL
        for (int r = 0; r < 2; r++) {
          float f[2];
          drop_factors2(sh, sample_key, row_key[r], j, f);
          HS_UNROLL
          for (int c = 0; c < 2; c++) {
            float ds = 0.0f;
            if (j + c < L) {
              const float pij = tile_softmax_exp<T>((s[n][2 * r + c] * sh.scale + mb[j + c]) - row_lse[r]);
              ds = pij * (dp[n][2 * r + c] * f[c] - row_D[r]);
            }
            s[n][2 * r + c] = ds;
          }
        }
      }
      /* dQ += dS·K: k step kk takes keys j0 + jh + 16kk .. + 15, dS tiles 2kk and 2kk + 1 */
      HS_UNROLL
      for (int kk = 0; kk < 2; kk++) {
        if (j0 + jh + 16 * kk >= L) break;
        uint32_t da[4];
        regs_a_of_c<BF16>(da, s[2 * kk], s[2 * kk + 1]);
        regs_mma_row<BF16>(dq, da, sm.k, jh + 16 * kk, dtiles, lane);
      }
    }
  }
  /* dQ times 1/√d into q's third of dqkv */
  regs_each_output(dq, t, d, [&](int r, int e, float v) {
    const int i = i0 + r0 + 8 * r;
    if (i < L) put(sh, dqkv, ((size_t)b * L + i) * ld + (size_t)h * d + e, v * sh.scale);
  });
}

/* The block's K and V tiles side by side, loaded once before the query tiles stream (every tile
 * configuration leaves room for both under the 48 KiB of static shared memory, fp32 tiles included) */
template <class T, int DMAX, int BQ, int BK> struct dkv_smem {
  alignas(32) T k[BK * DMAX]; /* the block's K tile */
  alignas(32) T v[BK * DMAX]; /* the block's V tile */
  alignas(32) T q[BQ * DMAX];
  alignas(32) T dc[BQ * DMAX];
  alignas(32) T pt[BK * BQ];  /* P'ᵀ */
  alignas(32) T dst[BK * BQ]; /* dSᵀ */
  /* Sᵀ [BK,BQ], then ±P (sign bit: dropped), and dP'ᵀ [BK,BQ] in the loop; after it, each warp's
   * staging tile of dK and dV [16,16] */
  alignas(32) float stdp[imax(2 * BK * BQ, kWarps * kTile * kTile)];
  float lse[BQ], D[BQ];
};

/* dK, dV of a tile of BK keys, key-major (transposed) tiles throughout: Sᵀ = K·Qᵀ, dP'ᵀ = V·dCᵀ,
 * dV += P'ᵀ·dC, dK += dSᵀ·Q over the query tiles in order; dK times 1/√d at the end */
template <class T, int DMAX, int BQ, int BK>
__global__ void __launch_bounds__(kThreads, kDkvBlocksPerSM<T, DMAX>)
    flash_attention_dkv_kernel(float *dqkv, const float *dctx, const float *qkv, const float *mask_bias,
                               const float *lse, const float *D, flash_shape sh) {
  hs_dropout_slot_resolve(sh); /* the slot read once per thread, not per element */
  typedef dkv_smem<T, DMAX, BQ, BK> smem_t;
  static_assert(sizeof(smem_t) <= 48 * 1024, "static shared memory above 48 KiB");
  HS_SHARED(smem_t, sm);
  const int unit = blockIdx.y, b = unit / sh.heads, h = unit % sh.heads, j0 = blockIdx.x * BK;
  const uint64_t sample_key = unit_sample_key(sh, b);
  const int L = sh.L, d = sh.d, H = sh.heads * d, warp = threadIdx.x / HS_WARP;
  const size_t ld = 3 * (size_t)H;
  const float *q = qkv + (size_t)b * (size_t)L * ld + (size_t)h * (size_t)d, *k = q + H, *v = q + 2 * H;
  const uint16_t *q16 = qkv16_of(sh, b, h), *k16 = q16 ? q16 + H : nullptr, *v16 = q16 ? q16 + 2 * H : nullptr;
  const size_t dc_off = (size_t)b * (size_t)L * (size_t)H + (size_t)h * (size_t)d;
  const float *dc = dctx + dc_off;
  const uint16_t *dc16 = sh.dctx16 ? sh.dctx16 + dc_off : nullptr;
  const float *mb = mask_bias + (size_t)b * (size_t)L;
  float *const st = sm.stdp, *const dpt = sm.stdp + BK * BQ;
  /* dK, dV [BK, dp] in registers, the warps' tiles of 16 x 16 */
  const int kv_tiles = (BK / kTile) * (sh.dp / kTile), kv_per_row = sh.dp / kTile;
  warp_tiles<T, ceil_div((BK / kTile) * (DMAX / kTile), kWarps)> dk, dv;
  dk.zero();
  dv.zero();
  constexpr int nt = (BK / kTile) * (BQ / kTile);
  /* once: the loop's first barrier orders them before their readers */
  load_head_rows(sm.k, BK, DMAX, sh, k, k16, ld, j0);
  load_head_rows(sm.v, BK, DMAX, sh, v, v16, ld, j0);
  for (int i0 = 0; i0 < L; i0 += BQ) {
    load_head_rows(sm.q, BQ, DMAX, sh, q, q16, ld, i0);
    load_head_rows(sm.dc, BQ, DMAX, sh, dc, dc16, (size_t)H, i0);
    load_row_stats(sm.lse, BQ, lse + (size_t)unit * L, i0, L);
    load_row_stats(sm.D, BQ, D + (size_t)unit * L, i0, L);
    __syncthreads();
    /* Sᵀ[BK,BQ] = K·Qᵀ */
    for (int t = warp; t < nt; t += kWarps) {
      const int tk = t / (BQ / kTile), tq = t % (BQ / kTile);
      warp_tile_mma(st + tk * kTile * BQ + tq * kTile, BQ, sm.k + tk * kTile * DMAX, DMAX,
                    sm.q + tq * kTile * DMAX, DMAX, sh.dp, true, false);
    }
    __syncthreads();
    /* P (sign bit set where dropped) and P'ᵀ. A thread's
     * elements all lie in query row threadIdx.x % BQ (blockDim.x = kThreads, a multiple of BQ): its
     * dropout key is made once. It takes keys two at a time (j0 and BK even): c and c + 1 of one
     * dropout hash, rows BQ apart in Sᵀ. */
    static_assert(kThreads % BQ == 0 && BK % 2 == 0, "a thread's elements lie in one query row; key pairs");
    const uint32_t row_key = row_key_of(sh, sample_key, h, i0 + (int)threadIdx.x % BQ);
    for (int t = threadIdx.x; t < BK / 2 * BQ; t += blockDim.x) {
      const int r = t % BQ, c0 = 2 * (t / BQ), i = i0 + r;
      float f[2];
      drop_factors2(sh, sample_key, row_key, j0 + c0, f);
      for (int c = 0; c < 2; c++) {
        const int idx = (c0 + c) * BQ + r, j = j0 + c0 + c;
        float pij = 0.0f, fc = 1.0f;
        if (i < L && j < L) {
          pij = tile_softmax_exp<T>((st[idx] * sh.scale + mb[j]) - sm.lse[r]);
          fc = f[c];
        }
        st[idx] = fc == 0.0f ? -pij : pij;
        tile_store(sm.pt[idx], pij * fc);
      }
    }
    __syncthreads();
    /* dP'ᵀ[BK,BQ] = V·dCᵀ;  dV[BK,dp] += P'ᵀ·dC (the warps' dV tiles after their dP' tiles) */
    for (int t = warp; t < nt; t += kWarps) {
      const int tk = t / (BQ / kTile), tq = t % (BQ / kTile);
      warp_tile_mma(dpt + tk * kTile * BQ + tq * kTile, BQ, sm.v + tk * kTile * DMAX, DMAX, sm.dc + tq * kTile * DMAX,
                    DMAX, sh.dp, true, false);
    }
    dv.each(warp, kv_tiles, kv_per_row, [&](tile_acc<T> &acc, int tk, int tn) {
      acc.mma(sm.pt + tk * kTile * BQ, BQ, sm.dc + tn * kTile, DMAX, BQ, false);
    });
    __syncthreads();
    /* dSᵀ = |P| (keep·dP'/(1-p) - D) */
    for (int idx = threadIdx.x; idx < BK * BQ; idx += blockDim.x) {
      const int r = idx % BQ;
      const float pij = st[idx];
      const float g = sh.p > 0.0f ? (signbit(pij) ? 0.0f : dpt[idx] * sh.rate.keep_scale) : dpt[idx];
      tile_store(sm.dst[idx], fabsf(pij) * (g - sm.D[r]));
    }
    __syncthreads();
    /* dK[BK,dp] += dSᵀ·Q */
    dk.each(warp, kv_tiles, kv_per_row, [&](tile_acc<T> &acc, int tk, int tn) {
      acc.mma(sm.dst + tk * kTile * BQ, BQ, sm.q + tn * kTile, DMAX, BQ, false);
    });
    __syncthreads();
  }
  /* Sᵀ and dP'ᵀ are free: the warps' staging tiles */
  float *stage = sm.stdp + warp * kTile * kTile;
  const size_t row0 = ((size_t)b * L + j0) * ld + (size_t)h * d;
  dk.write(warp, kv_tiles, kv_per_row, stage, [&](int c, int e, float v) {
    if (j0 + c < L && e < d) put(sh, dqkv, row0 + (size_t)c * ld + H + e, v * sh.scale);
  });
  dv.write(warp, kv_tiles, kv_per_row, stage, [&](int c, int e, float v) {
    if (j0 + c < L && e < d) put(sh, dqkv, row0 + (size_t)c * ld + 2 * (size_t)H + e, v);
  });
}

/* dK and dV on register fragments (16-bit tiles, head_dim <= 64, sm_80 and later): a block of 4 warps per
 * (tile of 64 keys, unit (b, h)), each warp 16 keys, dK and dV [16, 64] in registers, over the query
 * tiles of 32 in order. Key-major products as the WMMA kernel's: Sᵀ = K·Qᵀ and dP'ᵀ = V·dCᵀ into
 * registers, P = e^{s·scale + mask - lse}, P'ᵀ = P·f and dSᵀ = P (f·dP' - D) on the values a lane holds,
 * rounded straight into the A fragments of dV += P'ᵀ·dC and dK += dSᵀ·Q. A warp's fragment rows g and
 * g + 8 are its keys 2g and 2g + 1, so a lane holds both keys of a dropout pair for each query it holds:
 * one hash for both decisions. Shared memory: the block's K and V (rows paired, regs_row_at: a warp's keys
 * 2g and 2g + 1 stored as its rows g and g + 8, so its A fragments are ldmatrix loads of consecutive rows),
 * the query tile's Q and dC row-major (the B operands of K·Qᵀ and V·dCᵀ, and through ldmatrix.trans of dSᵀ·Q
 * and P'ᵀ·dC), its lse, D and dropout row keys; two barriers a query tile, where the WMMA kernel makes four
 * and writes Sᵀ, P'ᵀ, dP'ᵀ and dSᵀ to shared memory. The same values in the same roles as
 * flash_attention_dkv_kernel. */
constexpr int kRegsQTile = 32;
struct dkv_regs_smem {
  alignas(16) uint16_t k[kRegsTile * kRegsRow];  /* k[key][dim], rows paired (regs_row_at) */
  alignas(16) uint16_t v[kRegsTile * kRegsRow];  /* v[key][dim], rows paired */
  alignas(16) uint16_t q[kRegsQTile * kRegsRow];  /* q[query][dim]: B of K·Qᵀ, and by ldmatrix.trans of dSᵀ·Q */
  alignas(16) uint16_t dc[kRegsQTile * kRegsRow]; /* dc[query][dim]: B of V·dCᵀ, and by ldmatrix.trans of P'ᵀ·dC */
  float lse[kRegsQTile], D[kRegsQTile];
  uint32_t row_key[kRegsQTile]; /* the queries' dropout keys, made once per query tile (a lane meets 8) */
};
static_assert(sizeof(dkv_regs_smem) <= 48 * 1024, "static shared memory above 48 KiB");

template <bool BF16>
__global__ void __launch_bounds__(kThreads, kRegsBlocksPerSM)
    flash_attention_dkv_regs_kernel(float *dqkv, const float *dctx, const float *qkv, const float *mask_bias,
                                    const float *lse, const float *D, flash_shape sh) {
  typedef typename std::conditional<BF16, hs_tile_bf16, hs_tile_fp16>::type T;
  HS_SHARED(dkv_regs_smem, sm);
  const regs_block u = regs_block_of(sh, qkv, dctx, mask_bias);
  const int unit = blockIdx.y, b = u.b, h = u.h, j0 = blockIdx.x * kRegsTile, L = sh.L, d = sh.d, H = u.H;
  const int warp = u.warp, lane = u.lane, t = u.t;
  const uint64_t sample_key = u.sample_key;
  const size_t ld = u.ld;
  const int ksteps = sh.dp / 16, dtiles = sh.dp / 8;
  /* this lane's keys: tile rows ka = 16·warp + 2g (fragment row g) and ka + 1 (row g + 8), their mask; the
   * loader stores them paired, as rows 16·warp + g and 16·warp + g + 8 */
  const int ka = 16 * warp + 2 * u.g, jkey = j0 + ka; /* even */
  const float mbk[2] = {jkey < L ? u.mb[jkey] : 0.0f, jkey + 1 < L ? u.mb[jkey + 1] : 0.0f};
  float dk[8][4], dv[8][4]; /* dK, dV [16, 64] of the warp's keys: 8 tiles of 16 x 8 each */
  HS_UNROLL
  for (int n = 0; n < 8; n++)
    HS_UNROLL
    for (int e = 0; e < 4; e++) dk[n][e] = dv[n][e] = 0.0f;
  /* once: the loop's first barrier orders them before their readers */
  regs_load_rows<BF16, kRegsTile>(sm.k, true, sh, u.k, u.k16, ld, j0);
  regs_load_rows<BF16, kRegsTile>(sm.v, true, sh, u.v, u.v16, ld, j0);
  for (int i0 = 0; i0 < L; i0 += kRegsQTile) {
    __syncthreads(); /* every warp is done with the previous query tile */
    regs_load_rows<BF16, kRegsQTile>(sm.q, false, sh, u.q, u.q16, ld, i0);
    regs_load_rows<BF16, kRegsQTile>(sm.dc, false, sh, u.dc, u.dc16, (size_t)H, i0);
    load_row_stats(sm.lse, kRegsQTile, lse + (size_t)unit * L, i0, L);
    load_row_stats(sm.D, kRegsQTile, D + (size_t)unit * L, i0, L);
    if (sh.p > 0.0f && threadIdx.x < kRegsQTile) sm.row_key[threadIdx.x] = row_key_of(sh, sample_key, h, i0 + threadIdx.x);
    __syncthreads();
    /* Sᵀ = K·Qᵀ and dP'ᵀ = V·dCᵀ, [16 keys, 32 queries] each: tile n holds queries i0 + 8n .. + 7 */
    float st[4][4], dpt[4][4];
    HS_UNROLL
    for (int n = 0; n < 4; n++)
      HS_UNROLL
      for (int e = 0; e < 4; e++) st[n][e] = dpt[n][e] = 0.0f;
    HS_UNROLL
    for (int ks = 0; ks < 4; ks++) {
      if (ks >= ksteps) break;
      uint32_t kfa[4], vfa[4];
      regs_a_fragment(kfa, sm.k, 16 * warp, 16 * ks, lane);
      regs_a_fragment(vfa, sm.v, 16 * warp, 16 * ks, lane);
      HS_UNROLL
      for (int n = 0; n < 4; n++) {
        if (i0 + 8 * n >= L) break;
        uint32_t qb[2], cb[2];
        regs_b_fragment(qb, sm.q, 8 * n, 16 * ks, lane);
        regs_b_fragment(cb, sm.dc, 8 * n, 16 * ks, lane);
        hs_mma_16816<BF16>(st[n], kfa, qb);
        hs_mma_16816<BF16>(dpt[n], vfa, cb);
      }
    }
    /* per query i (the lane's columns) and the lane's two keys: P, P'ᵀ = P·f into st, dSᵀ = P (f·dP' - D)
     * into dpt; one dropout hash per query for the key pair; 0 past L */
    HS_UNROLL
    for (int n = 0; n < 4; n++)
      HS_UNROLL
      for (int c = 0; c < 2; c++) {
        const int col = 8 * n + 2 * t + c, i = i0 + col;
        float f[2];
        drop_factors2(sh, sample_key, sh.p > 0.0f ? sm.row_key[col] : 0u, jkey, f);
        HS_UNROLL
        for (int r = 0; r < 2; r++) { /* r: key jkey + r, fragment row g + 8r, element 2r + c */
          float pt = 0.0f, ds = 0.0f;
          if (i < L && jkey + r < L) {
            const float pij = tile_softmax_exp<T>((st[n][2 * r + c] * sh.scale + mbk[r]) - sm.lse[col]);
            pt = pij * f[r];
            ds = pij * (dpt[n][2 * r + c] * f[r] - sm.D[col]);
          }
          st[n][2 * r + c] = pt;
          dpt[n][2 * r + c] = ds;
        }
      }
    /* dV += P'ᵀ·dC and dK += dSᵀ·Q: k step kk takes queries i0 + 16kk .. + 15, tiles 2kk and 2kk + 1 */
    HS_UNROLL
    for (int kk = 0; kk < 2; kk++) {
      if (i0 + 16 * kk >= L) break;
      uint32_t pa[4], da[4];
      regs_a_of_c<BF16>(pa, st[2 * kk], st[2 * kk + 1]);
      regs_a_of_c<BF16>(da, dpt[2 * kk], dpt[2 * kk + 1]);
      regs_mma_row<BF16>(dv, pa, sm.dc, 16 * kk, dtiles, lane);
      regs_mma_row<BF16>(dk, da, sm.q, 16 * kk, dtiles, lane);
    }
  }
  /* dK times 1/√d and dV into k's and v's thirds of dqkv: fragment row g + 8r is key jkey + r */
  const size_t row0 = ((size_t)b * L + jkey) * ld + (size_t)h * d;
  regs_each_output(dk, t, d, [&](int r, int e, float v) {
    if (jkey + r < L) put(sh, dqkv, row0 + (size_t)r * ld + H + e, v * sh.scale);
  });
  regs_each_output(dv, t, d, [&](int r, int e, float v) {
    if (jkey + r < L) put(sh, dqkv, row0 + (size_t)r * ld + 2 * (size_t)H + e, v);
  });
}

/* ---- host side ------------------------------------------------------------------------------------------ */

flash_shape shape_of(const hs_backend *be, int L, int heads, int d, float p, uint64_t key, int64_t first_sample,
                     uint16_t *out16, const uint16_t *in16, uint16_t *qkv16_out = nullptr) {
  return flash_shape{L, heads, d, (d + kTile - 1) / kTile * kTile, 1.0f / sqrtf((float)d), p,
                     hs_dropout_rate_of(p), key, first_sample,
                     p > 0.0f ? hs_cuda_dropout_slot(be, key, first_sample) : nullptr, out16, in16, qkv16_out,
                     nullptr, be->precision == HS_PRECISION_BF16};
}

/* bytes of one q|k|v element as the kernels read it: fp32, or the 16-bit copy; the same for dctx */
size_t qkv_bytes(const flash_shape &sh) { return sh.in16 ? sizeof(uint16_t) : sizeof(float); }
size_t dctx_bytes(const flash_shape &sh) { return sh.dctx16 ? sizeof(uint16_t) : sizeof(float); }

unsigned tiles(int L, int t) { return (unsigned)((L + t - 1) / t); }

/* Tile sizes by DMAX (each kernel's shared memory under 48 KiB with T = float): forward BQ×BK, dQ BQ×BK,
 * dK/dV BK keys × BQ queries. */
template <int DMAX> struct flash_tiles;
template <> struct flash_tiles<64> {
  static constexpr int fq = 32, fk = 32, qq = 32, qk = 16, kk = 32, kq = 16;
};
template <> struct flash_tiles<128> {
  static constexpr int fq = 16, fk = 32, qq = 16, qk = 16, kk = 16, kq = 16;
};

template <class T, int DMAX>
void forward(const hs_backend *be, float *ctx, float *lse, const float *qkv, const float *mask_bias, int batch,
             const flash_shape &sh) {
  typedef flash_tiles<DMAX> tl;
  const dim3 grid(tiles(sh.L, tl::fq), (unsigned)(batch * sh.heads));
  HS_LAUNCH(grid, kThreads, 0, hs_cuda_stream(be), flash_attention_forward_kernel<T, DMAX, tl::fq, tl::fk>)(
      ctx, lse, qkv, mask_bias, sh);
  /* a block per (query tile, b·h): q once, k, v and the mask row per block (q|k|v fp32 or 16-bit); ctx
   * (and its 16-bit twin), lse written: qkv·tokh·(1 + 2·nq) + (tokh + rows·(1 + nq))·4 (rows = b·h·L);
   * and q|k|v's 16-bit copy (qkv16_out) once: 3·tokh·2 */
  const size_t tokh = (size_t)batch * sh.L * sh.heads * sh.d, nq = tiles(sh.L, tl::fq);
  const size_t rows = (size_t)batch * sh.heads * sh.L;
  HS_CUDA_LAUNCHED("flash_attention_forward_kernel",
                   qkv_bytes(sh) * tokh * (1 + 2 * nq) + sizeof(float) * ((ctx ? tokh : 0) + rows * (1 + nq)) +
                       (sh.out16 ? tokh * sizeof(uint16_t) : 0) + (sh.qkv16_out ? 3 * tokh * sizeof(uint16_t) : 0));
}

/* The register-fragment forward (16-bit tiles, head_dim <= 64): the ledger's bytes as the WMMA forward's,
 * with its 64-row query tiles */
template <bool BF16>
void forward_regs(const hs_backend *be, float *ctx, float *lse, const float *qkv, const float *mask_bias, int batch,
                  const flash_shape &sh) {
  const dim3 grid(tiles(sh.L, kRegsTile), (unsigned)(batch * sh.heads));
  HS_LAUNCH(grid, kThreads, 0, hs_cuda_stream(be), flash_attention_forward_regs_kernel<BF16>)(ctx, lse, qkv, mask_bias,
                                                                                            sh);
  const size_t tokh = (size_t)batch * sh.L * sh.heads * sh.d, nq = tiles(sh.L, kRegsTile);
  const size_t rows = (size_t)batch * sh.heads * sh.L;
  HS_CUDA_LAUNCHED("flash_attention_forward_regs_kernel",
                   qkv_bytes(sh) * tokh * (1 + 2 * nq) + sizeof(float) * ((ctx ? tokh : 0) + rows * (1 + nq)) +
                       (sh.out16 ? tokh * sizeof(uint16_t) : 0) + (sh.qkv16_out ? 3 * tokh * sizeof(uint16_t) : 0));
}

/* Whether the passes run on register fragments (the forward, dQ, dK/dV): 16-bit tiles, head_dim <= 64, a
 * GPU of sm_80 or later (mma.sync m16n8k16; the emulated device is one), and
 * HETSEQ_FLASH_KERNELS not "wmma" (which keeps the WMMA kernels, to compare the two:
 * bench/gpu/kernels_bench, test_op_conformance) */
bool flash_on_regs(const hs_backend *be, int head_dim) {
  if (be->precision != HS_PRECISION_BF16 && be->precision != HS_PRECISION_FP16) return false;
  if (head_dim > kRegsTile || be->cc_major < 8) return false;
  return !hs_cuda_flash_kernels_wmma();
}

template <class T, int DMAX>
void backward(const hs_backend *be, float *dqkv, const float *dctx, const float *qkv, const float *mask_bias,
              const float *lse, const float *D, int batch, const flash_shape &sh, bool regs) {
  typedef flash_tiles<DMAX> tl;
  cudaStream_t stream = hs_cuda_stream(be);
  const unsigned units = (unsigned)(batch * sh.heads);
  const size_t tokh = (size_t)batch * sh.L * sh.heads * sh.d, rows = (size_t)units * sh.L;
  const size_t nk = tiles(sh.L, tl::kk);
  /* q, dctx, lse, D once; k, v and the mask row once per block (query tile, b·h); dq (and its 16-bit twin)
   * written: qkv·tokh·(1 + 2·nq) + dctx·tokh + (tokh + rows·(2 + nq))·4 */
  const size_t nq = tiles(sh.L, regs ? kRegsTile : tl::qq);
  const size_t dq_bytes = qkv_bytes(sh) * tokh * (1 + 2 * nq) + dctx_bytes(sh) * tokh +
                          sizeof(float) * (tokh + rows * (2 + nq)) + (sh.out16 ? tokh * sizeof(uint16_t) : 0);
  if (regs) {
    constexpr bool bf16 = std::is_same<T, hs_tile_bf16>::value;
    HS_LAUNCH(dim3((unsigned)nq, units), kThreads, 0, stream, flash_attention_dq_regs_kernel<bf16>)(
        dqkv, dctx, qkv, mask_bias, lse, D, sh);
    HS_CUDA_LAUNCHED("flash_attention_dq_regs_kernel", dq_bytes);
  } else {
    HS_LAUNCH(dim3((unsigned)nq, units), kThreads, 0, stream, flash_attention_dq_kernel<T, DMAX, tl::qq, tl::qk>)(
        dqkv, dctx, qkv, mask_bias, lse, D, sh);
    HS_CUDA_LAUNCHED("flash_attention_dq_kernel", dq_bytes);
  }
  /* a block per (key tile, b·h): its k and v once; q, dctx, lse, D once per streamed query tile (each
   * row once per key tile: nk times), its mask entries once per streamed query tile (the register kernel:
   * once); dk, dv (and their 16-bit twins) written: qkv·tokh·(2 + nk) + dctx·tokh·nk + (2·tokh + rows·(2·nk
   * + nkq))·4 */
  if (regs) {
    constexpr bool bf16 = std::is_same<T, hs_tile_bf16>::value;
    const size_t nkr = tiles(sh.L, kRegsTile);
    HS_LAUNCH(dim3((unsigned)nkr, units), kThreads, 0, stream, flash_attention_dkv_regs_kernel<bf16>)(
        dqkv, dctx, qkv, mask_bias, lse, D, sh);
    HS_CUDA_LAUNCHED("flash_attention_dkv_regs_kernel",
                     qkv_bytes(sh) * tokh * (2 + nkr) + dctx_bytes(sh) * tokh * nkr +
                         sizeof(float) * (2 * tokh + rows * (2 * nkr + 1)) + (sh.out16 ? 2 * tokh * sizeof(uint16_t) : 0));
    return;
  }
  HS_LAUNCH(dim3((unsigned)nk, units), kThreads, 0, stream, flash_attention_dkv_kernel<T, DMAX, tl::kq, tl::kk>)(
      dqkv, dctx, qkv, mask_bias, lse, D, sh);
  const size_t nkq = tiles(sh.L, tl::kq);
  HS_CUDA_LAUNCHED("flash_attention_dkv_kernel",
                   qkv_bytes(sh) * tokh * (2 + nk) + dctx_bytes(sh) * tokh * nk +
                       sizeof(float) * (2 * tokh + rows * (2 * nk + nkq)) +
                       (sh.out16 ? 2 * tokh * sizeof(uint16_t) : 0));
}

/* head_dim > 128 has no tile configuration */
void check_head_dim(int d) {
  if (d > 128) hs_die("flash attention: head_dim %d is above the fused kernels' 128 (use attention = \"unfused\")", d);
}

} // namespace

/* HETSEQ_FLASH_KERNELS read each time (tests switch it): 1 for "wmma", 0 unset, empty or "regs"; any other
 * value ends the job with the message (the CUDA backend asks once as it starts, so a typo stops the run
 * before its data is read, not at the first forward) */
int hs_cuda_flash_kernels_wmma(void) {
  const char *choice = getenv("HETSEQ_FLASH_KERNELS");
  if (choice && strcmp(choice, "wmma") == 0) return 1;
  if (choice && *choice && strcmp(choice, "regs") != 0)
    hs_die("HETSEQ_FLASH_KERNELS=\"%s\": expected \"regs\" (the default: the 16-bit fused attention on "
           "register fragments) or \"wmma\" (the WMMA kernels); unset it to take the default",
           choice);
  return 0;
}

extern "C" void hs_cuda_flash_attention_forward(const hs_backend *be, float *ctx, float *lse, const float *qkv,
                                                const uint16_t *qkv16, const float *mask_bias, int batch,
                                                int seq_len, int heads, int head_dim, float p, uint64_t key,
                                                int64_t first_sample, uint16_t *ctx16, uint16_t *qkv16_out) {
  hs_output_check("flash_attention_forward: ctx or ctx16", ctx, ctx16);
  hs_flash_qkv16_out_check(qkv16, qkv16_out);
  if (batch <= 0 || seq_len <= 0 || heads <= 0 || head_dim <= 0) return;
  check_head_dim(head_dim);
  const flash_shape sh = shape_of(be, seq_len, heads, head_dim, p, key, first_sample, ctx16, qkv16, qkv16_out);
  if (hs_cuda_slots_only(be)) return; /* recorded: the slots only (cuda_slots.h) */
  if (flash_on_regs(be, head_dim)) {
    be->precision == HS_PRECISION_BF16 ? forward_regs<true>(be, ctx, lse, qkv, mask_bias, batch, sh)
                                       : forward_regs<false>(be, ctx, lse, qkv, mask_bias, batch, sh);
    return;
  }
  const int big = head_dim > 64;
  switch (be->precision) {
  case HS_PRECISION_BF16:
    big ? forward<hs_tile_bf16, 128>(be, ctx, lse, qkv, mask_bias, batch, sh)
        : forward<hs_tile_bf16, 64>(be, ctx, lse, qkv, mask_bias, batch, sh);
    break;
  case HS_PRECISION_FP16:
    big ? forward<hs_tile_fp16, 128>(be, ctx, lse, qkv, mask_bias, batch, sh)
        : forward<hs_tile_fp16, 64>(be, ctx, lse, qkv, mask_bias, batch, sh);
    break;
  case HS_PRECISION_TF32:
    big ? forward<hs_tile_tf32, 128>(be, ctx, lse, qkv, mask_bias, batch, sh)
        : forward<hs_tile_tf32, 64>(be, ctx, lse, qkv, mask_bias, batch, sh);
    break;
  default:
    big ? forward<float, 128>(be, ctx, lse, qkv, mask_bias, batch, sh)
        : forward<float, 64>(be, ctx, lse, qkv, mask_bias, batch, sh);
  }
}

extern "C" void hs_cuda_flash_attention_backward(const hs_backend *be, float *dqkv, const float *dctx, const float *qkv,
                                                 const uint16_t *qkv16, const float *mask_bias, const float *ctx,
                                                 const float *lse, int batch, int seq_len, int heads, int head_dim,
                                                 float p, uint64_t key, int64_t first_sample, uint16_t *dqkv16) {
  if (batch <= 0 || seq_len <= 0 || heads <= 0 || head_dim <= 0) return;
  check_head_dim(head_dim);
  flash_shape sh = shape_of(be, seq_len, heads, head_dim, p, key, first_sample, dqkv16, qkv16);
  if (hs_cuda_slots_only(be)) return; /* recorded: the slots only (cuda_slots.h) */
  const size_t rows = (size_t)batch * heads * seq_len, tokh = rows * (size_t)head_dim;
  /* scratch: D [B,heads,L]; with 16-bit tiles then dctx rounded [B,L,H], 256-byte aligned, unless dctx
   * exists only in 16 bits (bind_half_only: a model's 16-bit output gradient), which is then that copy */
  const int tiles16 = be->precision == HS_PRECISION_BF16 || be->precision == HS_PRECISION_FP16;
  const uint16_t *dctx_only16 = tiles16 ? hs_cuda_twin_only16(dctx, tokh) : nullptr;
  const size_t d_bytes = (rows * sizeof(float) + 255) & ~(size_t)255;
  char *scratch = (char *)hs_cuda_scratch(be, d_bytes + (tiles16 && !dctx_only16 ? tokh * sizeof(uint16_t) : 0));
  float *D = (float *)scratch;
  uint16_t *dctx16 = tiles16 && !dctx_only16 ? (uint16_t *)(scratch + d_bytes) : nullptr;
  sh.dctx16 = dctx_only16 ? dctx_only16 : dctx16;
  /* the context exists only in 16 bits where the model bound it so (bind_half_only): read from there */
  const uint16_t *ctx16 = hs_cuda_twin_only16(ctx, tokh);
  /* D[unit, i] = dctx_i·ctx_i (head h's columns), and dctx's 16-bit copy (flash_tiles.cuh) */
  HS_LAUNCH(flash_row_dot_grid(rows), HS_BLOCK, 0, hs_cuda_stream(be), flash_row_dot_kernel)(
      D, dctx16, dctx_only16 ? nullptr : dctx, dctx_only16, ctx, ctx16, be->precision == HS_PRECISION_BF16, batch,
      seq_len, heads, head_dim);
  HS_CUDA_LAUNCHED("flash_row_dot_kernel (attention)", flash_row_dot_bytes(tokh, rows, dctx_only16, ctx16, dctx16));
  const int big = head_dim > 64;
  const bool regs = flash_on_regs(be, head_dim);
  switch (be->precision) {
  case HS_PRECISION_BF16:
    big ? backward<hs_tile_bf16, 128>(be, dqkv, dctx, qkv, mask_bias, lse, D, batch, sh, false)
        : backward<hs_tile_bf16, 64>(be, dqkv, dctx, qkv, mask_bias, lse, D, batch, sh, regs);
    break;
  case HS_PRECISION_FP16:
    big ? backward<hs_tile_fp16, 128>(be, dqkv, dctx, qkv, mask_bias, lse, D, batch, sh, false)
        : backward<hs_tile_fp16, 64>(be, dqkv, dctx, qkv, mask_bias, lse, D, batch, sh, regs);
    break;
  case HS_PRECISION_TF32:
    big ? backward<hs_tile_tf32, 128>(be, dqkv, dctx, qkv, mask_bias, lse, D, batch, sh, false)
        : backward<hs_tile_tf32, 64>(be, dqkv, dctx, qkv, mask_bias, lse, D, batch, sh, false);
    break;
  default:
    big ? backward<float, 128>(be, dqkv, dctx, qkv, mask_bias, lse, D, batch, sh, false)
        : backward<float, 64>(be, dqkv, dctx, qkv, mask_bias, lse, D, batch, sh, false);
  }
}
