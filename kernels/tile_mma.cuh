/* A warp's 16 x 16 tile products from shared memory: the inner products of the fused attention kernels
 * (kernels/flash_*.cu). One place decides how a tile product is computed, so the fused kernels read the
 * same with fp32 operands and with 16-bit ones, on the emulated device and on a GPU.
 *
 *   warp_tile_mma(c, ldc, a, lda, b, ldb, k, b_transposed, accumulate)        (T deduced)
 *   warp_tile_mma<float, true>(c, ldc, a, lda, b, ldb, k, b_transposed, accumulate)  (TF32 permitted)
 *     C[16,16] = (accumulate ? C : 0) + A[16,k] · B[k,16]
 *     A row-major [16][lda]; B row-major [k][ldb], or, b_transposed, Bᵀ row-major [16][ldb] (a K tile
 *     for Q·Kᵀ); C fp32 row-major [16][ldc]. All in shared memory.
 *   tile_acc<T, TF32> acc; acc.zero() or acc.load(c, ldc); acc.mma(a, lda, b, ldb, k, b_transposed)
 *     (C += A·B, any number of times); acc.scale_rows(factor, rows) (C[r][:] *= factor[r]);
 *     acc.store(c, ldc) or acc.write(stage, out) (out(r, c, C[r][c]) for each element);
 *     tile_acc_write_pair(x, y, stage_x, stage_y, out) (out(r, c, X[r][c], Y[r][c]))
 *     the same C held in registers across products (a loop's sum of tile products: no shared memory
 *     for C and no load and store of it per product); the same arithmetic in the same order.
 *
 * Operand storage types T (a, b the same):
 *   float         fp32 operands, fp32 fused multiply-adds in k order (precision fp32). With the
 *                 template argument TF32 = true (precision tf32): operands rounded to TF32 (11
 *                 significant bits, to nearest, ties away from zero) and fp32 sums where TF32 tensor
 *                 cores exist, fp32 otherwise (a permission, as for the libraries: docs/gpu.md).
 *   hs_tile_bf16  bfloat16 bit patterns; hs_tile_fp16 IEEE half bit patterns: a product of two 16-bit
 *                 values is exact in fp32 and the sums are fp32 — the tensor cores' arithmetic
 *                 (precision bf16 / fp16: the operands the unfused path's GEMMs would round).
 *   hs_tile_tf32  fp32 values stored rounded to TF32 (nearest, ties to even, as the CPU backend rounds a
 *                 tf32 product's operands): a product of two is exact in fp32 and the sums are fp32, on
 *                 TF32 tensor cores (m16n16k8) from sm_80, the scalar loop before (precision tf32).
 *
 * Which path runs where:
 *   16-bit operands on tensor cores through nvcuda::wmma (m16n16k16, fp32 accumulator): fp16 where
 *   __CUDA_ARCH__ >= 700, bf16 where __CUDA_ARCH__ >= 800, and always on the emulated device (its
 *   mma.h, docs/gpu-emulation.md); hs_tile_tf32, and float with TF32, likewise (m16n16k8) from sm_80 and
 *   on the emulator. Elsewhere (bf16 and TF32 on sm_75) and for plain float: the scalar loop (tile_acc_scalar),
 *   lane l computing the elements e = l + 32 t of C in k order. For 16-bit operands the two paths
 *   compute the same exact products and fp32 sums and differ only in the order of the sums (the
 *   tensor cores' order is unspecified; the emulator's is pairwise within each 16-wide k step, the
 *   steps in k order): compare results within a gamma_k bound, never bit for bit.
 *
 * Rules a caller keeps (the WMMA path needs them; the scalar path takes the same calls): k is a multiple
 * of 16 (pad tiles with zeros); lda and ldb are multiples of 8 elements and ldc a multiple of 4 (16
 * bytes); a, b and c start 32-byte aligned (declare shared tiles with HS_SHARED_ALIGNED(32, ...), or
 * carve them from dynamic shared memory, which starts 32-byte aligned, at offsets that are multiples of
 * 32 bytes; the emulator reports a tile aligned only by chance); every lane of the warp calls it with
 * the same arguments
 * (warp-collective: never in lane-divergent code, never with a partial warp); A, B and, accumulating,
 * C are visible to all lanes before the call (__syncwarp after lanes wrote them, __syncthreads after
 * other warps did), and the lanes __syncwarp() before reading C. The emulated device checks these rules
 * on every path (tile_rules_check: a tile that changes between the first lane's arrival and the last's
 * is reported; its WMMA gives NaN to a lane that reads a stored C before a __syncwarp). */
#ifndef HS_KERNELS_TILE_MMA_CUH
#define HS_KERNELS_TILE_MMA_CUH

#include <stdint.h>

#include <type_traits>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "math/fast_exp_erf.h"
#include "util/lowp.h"

/* Where WMMA has the operand type: fp16 from sm_70, bf16 and TF32 from sm_80; the emulator always. */
#if defined(HS_CUDA_EMU) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
#define HS_TILE_WMMA_FP16 1
#define HS_TILE_WMMA_BF16 1
#define HS_TILE_WMMA_TF32 1
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
#define HS_TILE_WMMA_FP16 1
#define HS_TILE_WMMA_BF16 0
#define HS_TILE_WMMA_TF32 0
#else
#define HS_TILE_WMMA_FP16 0
#define HS_TILE_WMMA_BF16 0
#define HS_TILE_WMMA_TF32 0
#endif
#if HS_TILE_WMMA_FP16 || HS_TILE_WMMA_BF16
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#endif

namespace {

constexpr int kTile = 16; /* the tile edge: WMMA's m16n16k16 */

struct hs_tile_bf16 {
  uint16_t bits;
};
struct hs_tile_fp16 {
  uint16_t bits;
};
/* an fp32 value rounded to TF32 (nearest, ties to even: hs_tf32_round, the CPU backend's rounding of a
 * tf32 product's operands), its 13 low bits zero */
struct hs_tile_tf32 {
  float v;
};

/* A stored operand's value, and the storing of a value (rounded to the type: nearest, ties to even). */
__device__ __forceinline__ float tile_value(float v) { return v; }
__device__ __forceinline__ float tile_value(hs_tile_bf16 v) { return hs_bf16_to_float(v.bits); }
__device__ __forceinline__ float tile_value(hs_tile_fp16 v) { return hs_fp16_to_float(v.bits); }
__device__ __forceinline__ float tile_value(hs_tile_tf32 v) { return v.v; }
__device__ __forceinline__ void tile_store(float &dst, float v) { dst = v; }
__device__ __forceinline__ void tile_store(hs_tile_bf16 &dst, float v) { dst.bits = hs_bf16_bits(v); }
__device__ __forceinline__ void tile_store(hs_tile_fp16 &dst, float v) { dst.bits = hs_fp16_bits(v); }
__device__ __forceinline__ void tile_store(hs_tile_tf32 &dst, float v) { dst.v = hs_tf32_round(v); }

/* e^x for a softmax whose probabilities are stored as T (the fused attention kernels: x = score - max or
 * score - lse <= 0, and -10000-ish for masked keys). Reduced-precision tiles (bf16, fp16, TF32): the
 * special-function unit's 2^(x·log2 e) (hs_ex2_approx: one MUFU instruction and a multiply, where
 * hs_exp_fast is about 18 arithmetic instructions and the fused attention computes an exponential for
 * every score in each of its three passes). Its error, 2 ulp of 2^t and |x|·2^-24 relative from rounding
 * x·log2 e (1.7e-7 at x = -20, where P = 2e-9), is far below the rounding of P to the tile's type that
 * follows (2^-9 bf16, 2^-11 TF32, 2^-12 fp16) and of the sums of P·V it feeds; masked keys' exact 0
 * stays 0 (flushed). fp32 tiles: hs_exp_fast, the CPU backend's exponential, so fp32 agrees with the CPU
 * to float rounding. */
template <class T> __device__ __forceinline__ float tile_softmax_exp(float x) {
  if (std::is_same<T, float>::value) return hs_exp_fast(x);
  return hs_ex2_approx(x * 1.44269504088896341f);
}

/* 2 consecutive stored operands p[0..1] as floats, in one load (p 8-byte aligned for 4-byte types, 4 for
 * 16-bit ones) */
__device__ __forceinline__ void tile_load2(const float *p, float out[2]) {
  const float2 x = *HS_VECTOR_AT(const float2, p);
  out[0] = x.x, out[1] = x.y;
}
__device__ __forceinline__ void tile_load2(const hs_tile_tf32 *p, float out[2]) {
  tile_load2(reinterpret_cast<const float *>(p), out);
}
template <class T16> __device__ __forceinline__ void tile_load2(const T16 *p, float out[2]) {
  static_assert(sizeof(T16) == 2, "a 16-bit tile type");
  const uint32_t x = *reinterpret_cast<const uint32_t *>(p);
  out[0] = tile_value(T16{(uint16_t)(x & 0xffffu)});
  out[1] = tile_value(T16{(uint16_t)(x >> 16)});
}

/* The scalar path: lane l holds the 8 elements e = l + 32·t (t = 0..7) of C, row e / 16, column e % 16;
 * a product adds to each a chain of fmaf in k order. */
template <class T> struct tile_acc_scalar {
  float v[kTile * kTile / HS_WARP];
  /* element t's row: (lane + 32·t) / 16 */
  struct rows_t {
    __device__ __forceinline__ void init(float *scratch) { (void)scratch; }
    __device__ __forceinline__ int row(int t) const { return (int)(threadIdx.x % HS_WARP) / kTile + 2 * t; }
  };
  __device__ __forceinline__ void scale_rows(const float *factor, const rows_t &rows) {
    HS_UNROLL
    for (int t = 0; t < kTile * kTile / HS_WARP; t++) v[t] *= factor[rows.row(t)];
  }
  __device__ __forceinline__ void zero() {
    HS_UNROLL
    for (int t = 0; t < kTile * kTile / HS_WARP; t++) v[t] = 0.0f;
  }
  __device__ __forceinline__ void load(const float *c, int ldc) {
    const int lane = threadIdx.x % HS_WARP;
    HS_UNROLL
    for (int t = 0; t < kTile * kTile / HS_WARP; t++) {
      const int e = lane + HS_WARP * t;
      v[t] = c[(e / kTile) * ldc + e % kTile];
    }
  }
  __device__ __forceinline__ void store(float *c, int ldc) const {
    const int lane = threadIdx.x % HS_WARP;
    HS_UNROLL
    for (int t = 0; t < kTile * kTile / HS_WARP; t++) {
      const int e = lane + HS_WARP * t;
      c[(e / kTile) * ldc + e % kTile] = v[t];
    }
  }
  /* Each element's chain of fmaf runs in k order whatever the loop order, so k is the outer loop: a
   * step of 2 loads the lane's B column values once for its 8 rows (one 2-wide load where B is
   * transposed), and each row's 2 A values in one load (8 bytes of fp32, 4 of a 16-bit type: aligned,
   * as the caller rules make tiles 32-byte aligned, lda and ldb multiples of 8 and k of 16). Before,
   * rows outer, every fmaf loaded both operands: 2 shared-memory loads a fmaf, here 9 to 10 per 16.
   * (Steps of 4 would halve that again but hold 36 operand registers, which the fp32 dK/dV kernels'
   * 128-register bound spills.) */
  __device__ __forceinline__ void mma(const T *a, int lda, const T *b, int ldb, int k, bool b_transposed) {
    const int lane = threadIdx.x % HS_WARP, col = lane % kTile, row0 = lane / kTile; /* row of v[t]: row0 + 2t */
    HS_NO_UNROLL /* one step's operands live at a time: unrolled, the fp32 dK/dV kernels spill */
    for (int kk = 0; kk < k; kk += 2) {
      float bq[2];
      if (b_transposed) {
        tile_load2(b + col * ldb + kk, bq);
      } else {
        bq[0] = tile_value(b[kk * ldb + col]);
        bq[1] = tile_value(b[(kk + 1) * ldb + col]);
      }
      HS_UNROLL
      for (int t = 0; t < kTile * kTile / HS_WARP; t++) {
        float aq[2];
        tile_load2(a + (row0 + 2 * t) * lda + kk, aq);
        HS_UNROLL
        for (int q = 0; q < 2; q++) v[t] = fmaf(aq[q], bq[q], v[t]);
      }
    }
  }
};

#if HS_TILE_WMMA_FP16 || HS_TILE_WMMA_BF16
/* The WMMA path: C is an accumulator fragment; a product runs k / STEP steps of mma_sync adding
 * A[:, kk:kk+STEP] · B[kk:kk+STEP, :]. B row-major [k][ldb] is a row_major matrix_b; Bᵀ row-major
 * [16][ldb] is B column-major with the same ldb, a col_major matrix_b. W is WMMA's operand type:
 * __nv_bfloat16 / __half (the same 16-bit storage as hs_tile_bf16 / hs_tile_fp16; E = W, STEP 16), or
 * precision::tf32 (E = float, STEP 8), whose loaded operands are rounded to TF32 (to nearest, ties away
 * from zero: the tensor core itself would drop the 13 low bits). T is the tile storage type, read as E. */
template <class W, class E, int STEP, class T> struct tile_acc_wmma {
  static_assert(sizeof(E) == sizeof(T), "the tile type and the CUDA type share the storage");
  typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, kTile, kTile, STEP, float> frag_t;
  frag_t f;
  static_assert(frag_t::num_elements <= 8, "a row index per element packs into 32 bits");
  /* element i's row: the fragment layout is opaque, so init loads a tile whose entries are their row
   * indices into a fragment of the same type (the same layout) and packs its 8 rows, 4 bits each */
  struct rows_t {
    uint32_t packed;
    __device__ __forceinline__ void init(float *scratch) {
      for (int e = threadIdx.x % HS_WARP; e < kTile * kTile; e += HS_WARP) scratch[e] = (float)(e / kTile);
      __syncwarp();
      frag_t r;
      nvcuda::wmma::load_matrix_sync(r, scratch, kTile, nvcuda::wmma::mem_row_major);
      packed = 0;
      for (int i = 0; i < frag_t::num_elements; i++) packed |= (uint32_t)r.x[i] << (4 * i);
      __syncwarp();
    }
    __device__ __forceinline__ int row(int i) const { return (int)(packed >> (4 * i)) & 15; }
  };
  __device__ __forceinline__ void scale_rows(const float *factor, const rows_t &rows) {
    HS_UNROLL
    for (int i = 0; i < frag_t::num_elements; i++) f.x[i] *= factor[rows.row(i)];
  }
  __device__ __forceinline__ void zero() { nvcuda::wmma::fill_fragment(f, 0.0f); }
  __device__ __forceinline__ void load(const float *c, int ldc) {
    nvcuda::wmma::load_matrix_sync(f, c, ldc, nvcuda::wmma::mem_row_major);
  }
  __device__ __forceinline__ void store(float *c, int ldc) const {
    nvcuda::wmma::store_matrix_sync(c, f, ldc, nvcuda::wmma::mem_row_major);
  }
  template <class BLayout> __device__ __forceinline__ void steps(const E *a, int lda, const E *b, int ldb, int k) {
    namespace wmma = nvcuda::wmma;
    const bool col = std::is_same<BLayout, wmma::col_major>::value;
    wmma::fragment<wmma::matrix_a, kTile, kTile, STEP, W, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, kTile, kTile, STEP, W, BLayout> fb;
    for (int kk = 0; kk < k; kk += STEP) {
      wmma::load_matrix_sync(fa, a + kk, lda);
      wmma::load_matrix_sync(fb, col ? b + kk : b + static_cast<size_t>(kk) * ldb, ldb);
#if HS_TILE_WMMA_TF32 /* (__float_to_tf32 exists from sm_80) */
      if constexpr (STEP == 8 && std::is_same<T, float>::value) { /* hs_tile_tf32 tiles are TF32 values already */
        for (int i = 0; i < fa.num_elements; i++) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
        for (int i = 0; i < fb.num_elements; i++) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
      }
#endif
      wmma::mma_sync(f, fa, fb, f);
    }
  }
  __device__ __forceinline__ void mma(const T *a, int lda, const T *b, int ldb, int k, bool b_transposed) {
    const E *ae = reinterpret_cast<const E *>(a), *be = reinterpret_cast<const E *>(b);
    if (b_transposed) {
      steps<nvcuda::wmma::col_major>(ae, lda, be, ldb, k);
    } else {
      steps<nvcuda::wmma::row_major>(ae, lda, be, ldb, k);
    }
  }
};
#endif

/* Which path a (type, TF32) pair takes: the scalar loop unless specialised below. */
template <class T, bool TF32> struct TileAcc {
  static_assert(!TF32, "TF32 tile products take float operands");
  typedef tile_acc_scalar<T> type;
};
template <> struct TileAcc<hs_tile_bf16, false> {
#if HS_TILE_WMMA_BF16
  typedef tile_acc_wmma<__nv_bfloat16, __nv_bfloat16, kTile, hs_tile_bf16> type;
#else
  typedef tile_acc_scalar<hs_tile_bf16> type;
#endif
};
template <> struct TileAcc<hs_tile_fp16, false> {
#if HS_TILE_WMMA_FP16
  typedef tile_acc_wmma<__half, __half, kTile, hs_tile_fp16> type;
#else
  typedef tile_acc_scalar<hs_tile_fp16> type;
#endif
};
template <> struct TileAcc<float, true> {
#if HS_TILE_WMMA_TF32
  typedef tile_acc_wmma<nvcuda::wmma::precision::tf32, float, 8, float> type;
#else
  typedef tile_acc_scalar<float> type;
#endif
};
template <> struct TileAcc<hs_tile_tf32, false> {
#if HS_TILE_WMMA_TF32
  typedef tile_acc_wmma<nvcuda::wmma::precision::tf32, float, 8, hs_tile_tf32> type;
#else
  typedef tile_acc_scalar<hs_tile_tf32> type;
#endif
};

/* Whether (T, TF32) takes the tensor cores here (this compilation's architecture): a kernel's register
 * budget depends on it (the scalar path holds 8 floats per lane and tile, the fragments as many) */
template <class T, bool TF32 = false>
constexpr bool tile_on_tensor_cores = !std::is_same<typename TileAcc<T, TF32>::type, tile_acc_scalar<T>>::value;

#if defined(HS_CUDA_EMU)
/* The emulated device checks the caller rules above on every path (the scalar loop would not need
 * them, a GPU's WMMA would fault or compute garbage without them): one warp-collective step before the
 * product, which also reports lanes that are missing or pass other arguments (tests/cuda_emu/include/
 * hs_emu/device_builtins.h, warp_collective). */
struct TileRules {
  const void *c, *a, *b;
  int ldc, lda, ldb, k;
  bool b_transposed, accumulate;
  int esize;     /* bytes of an A or B element (0: no A, B) */
  bool hashed;   /* this lane arrived first, and noted */
  uint64_t hash; /* the tiles this step reads (A, B; C where it accumulates) then */
};
/* What a step reads: A [16][k], B [k][16] (Bᵀ [16][k] where transposed), C [16][16] fp32 accumulating */
inline uint64_t tile_rules_inputs(const TileRules &r) {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  if (r.esize > 0 && r.k > 0 && r.k % kTile == 0) {
    h = ::hs_emu::matrix_hash(h, r.a, kTile, r.k, r.lda, r.esize);
    h = r.b_transposed ? ::hs_emu::matrix_hash(h, r.b, kTile, r.k, r.ldb, r.esize)
                       : ::hs_emu::matrix_hash(h, r.b, r.k, kTile, r.ldb, r.esize);
  }
  if (r.accumulate) h = ::hs_emu::matrix_hash(h, r.c, kTile, kTile, r.ldc, 4);
  return h;
}
/* The preconditions of a step's arguments: NULL where they hold, else what is wrong (in msg, where
 * given; else a non-NULL pointer) */
inline const char *tile_rules_args_error(const TileRules &r, char *msg, size_t size) {
  /* a tile_acc's product has no C, its load and store no A, B (NULL: not checked) */
  const bool has_ab = r.a || r.b, has_c = r.c != nullptr;
  if (has_ab && (r.k <= 0 || r.k % kTile != 0)) {
    snprintf(msg, size, "k = %d is not a positive multiple of 16 (pad the tiles with zeros; "
             "kernels/tile_mma.cuh)", r.k);
  } else if ((has_ab && (r.lda % 8 != 0 || r.ldb % 8 != 0)) || (has_c && r.ldc % 4 != 0)) {
    snprintf(msg, size, "lda = %d, ldb = %d, ldc = %d: lda and ldb must be multiples of 8 elements, ldc of 4 "
             "(kernels/tile_mma.cuh)", r.lda, r.ldb, r.ldc);
  } else if (reinterpret_cast<uintptr_t>(r.a) % 32 != 0 || reinterpret_cast<uintptr_t>(r.b) % 32 != 0 ||
             reinterpret_cast<uintptr_t>(r.c) % 32 != 0) {
    snprintf(msg, size, "a = %p, b = %p, c = %p: every tile must start 32-byte aligned (HS_SHARED_ALIGNED(32, "
             "...); kernels/tile_mma.cuh)", r.a, r.b, r.c);
  } else {
    return nullptr;
  }
  return msg ? msg : "";
}
inline const char *tile_rules_check(void *const *args) {
  static thread_local char msg[400];
  const TileRules &r = *static_cast<const TileRules *>(args[0]);
  for (int l = 1; l < HS_WARP; l++) {
    const TileRules &o = *static_cast<const TileRules *>(args[l]);
    if (o.c != r.c || o.a != r.a || o.b != r.b || o.ldc != r.ldc || o.lda != r.lda || o.ldb != r.ldb || o.k != r.k ||
        o.b_transposed != r.b_transposed || o.accumulate != r.accumulate) {
      snprintf(msg, sizeof msg, "lane %d passes other arguments than lane 0: every lane of the warp must pass the same "
               "(kernels/tile_mma.cuh)", l);
      return msg;
    }
  }
  if (tile_rules_args_error(r, msg, sizeof msg) == nullptr) {
    /* On a GPU nothing here orders memory between the lanes (the scalar loop has no barrier, WMMA
     * loads do not order): the tiles must be whole before the first lane arrives (__syncwarp() after
     * the lanes wrote them, __syncthreads() after other warps did) */
    const uint64_t now = tile_rules_inputs(r);
    for (int l = 0; l < HS_WARP; l++)
      if (static_cast<const TileRules *>(args[l])->hashed && static_cast<const TileRules *>(args[l])->hash != now) {
        snprintf(msg, sizeof msg, "a = %p, b = %p, c = %p: a tile this step reads changed after lane %d arrived and "
                 "before the whole warp had: write the tiles, then __syncwarp() (__syncthreads() where other warps "
                 "wrote them), then the step (kernels/tile_mma.cuh)", r.a, r.b, r.accumulate ? r.c : nullptr, l);
        return msg;
      }
    return nullptr;
  }
  return msg;
}
#endif

/* The emulated device's check of a warp-collective tile step (nothing on a GPU). */
__device__ __forceinline__ void tile_rules(const char *what, const void *c, int ldc, const void *a, int lda, const void *b,
                                           int ldb, int k, bool b_transposed, bool accumulate, int esize = 0) {
#if defined(HS_CUDA_EMU)
  TileRules rules{c, a, b, ldc, lda, ldb, k, b_transposed, accumulate, esize, false, 0};
  /* the first lane notes the tiles (a write after it is a write after any lane's arrival), where the
   * arguments say where they are (else the check reports them) */
  rules.hashed = ::hs_emu::collective_arrived() == 0 && tile_rules_args_error(rules, nullptr, 0) == nullptr;
  if (rules.hashed) rules.hash = tile_rules_inputs(rules);
  ::hs_emu::warp_collective(what, tile_rules_check, &rules, __FILE__, __LINE__);
#else
  (void)what, (void)c, (void)ldc, (void)a, (void)lda, (void)b, (void)ldb, (void)k, (void)b_transposed,
      (void)accumulate, (void)esize;
#endif
}

/* A warp's 16 x 16 fp32 accumulator kept in registers across tile products (a pure sum over a loop:
 * no load and store of C per product, no shared memory for it), on the path warp_tile_mma takes for
 * (T, TF32). zero / load C / mma (C += A·B, warp_tile_mma's rules for a, b, k) / store C, each
 * warp-collective. The same arithmetic as warp_tile_mma with accumulate, in the same order: the same
 * bits. Keep a tile_acc at a compile-time index (an unrolled loop), or it leaves the registers. */
template <class T, bool TF32 = false> struct tile_acc {
  typename TileAcc<T, TF32>::type impl;
  /* each element's row in the tile, for scale_rows: init(scratch) once per warp, warp-collective, with
   * a 16 x 16 fp32 shared-memory scratch tile (32-byte aligned; free again when init returns) */
  typedef typename TileAcc<T, TF32>::type::rows_t rows_t;
  /* C[r][c] *= factor[r] (factor: 16 values in shared memory; an exact fp32 multiply per element, the
   * same as scaling C in shared memory) */
  __device__ __forceinline__ void scale_rows(const float *factor, const rows_t &r) { impl.scale_rows(factor, r); }
  __device__ __forceinline__ void zero() { impl.zero(); }
  __device__ __forceinline__ void load(const float *c, int ldc) {
    tile_rules("tile_acc::load", c, ldc, nullptr, 0, nullptr, 0, 0, false, true);
    impl.load(c, ldc);
  }
  __device__ __forceinline__ void store(float *c, int ldc) const {
    tile_rules("tile_acc::store", c, ldc, nullptr, 0, nullptr, 0, 0, false, false);
    impl.store(c, ldc);
  }
  /* out(row, column, value) for each of C's 256 elements, through stage (the warp's own 16 x 16 fp32
   * shared-memory tile, 32-byte aligned): a register tile's way to device memory, lanes taking
   * consecutive columns of a row */
  template <class Out> __device__ __forceinline__ void write(float *stage, Out &&out) const {
    store(stage, kTile);
    __syncwarp();
    for (int e = threadIdx.x % HS_WARP; e < kTile * kTile; e += HS_WARP) out(e / kTile, e % kTile, stage[e]);
    __syncwarp();
  }
  __device__ __forceinline__ void mma(const T *a, int lda, const T *b, int ldb, int k, bool b_transposed) {
    tile_rules("tile_acc::mma", nullptr, 0, a, lda, b, ldb, k, b_transposed, true, (int)sizeof(T));
    impl.mma(a, lda, b, ldb, k, b_transposed);
  }
};

/* out(row, column, x's value, y's value) for each element of two register tiles of a warp, through its
 * two 16 x 16 staging tiles (as tile_acc::write: a kernel's two sums of the same rows, written together) */
template <class T, bool TF32, class Out>
__device__ __forceinline__ void tile_acc_write_pair(const tile_acc<T, TF32> &x, const tile_acc<T, TF32> &y,
                                                    float *stage_x, float *stage_y, Out &&out) {
  x.store(stage_x, kTile);
  y.store(stage_y, kTile);
  __syncwarp();
  for (int e = threadIdx.x % HS_WARP; e < kTile * kTile; e += HS_WARP)
    out(e / kTile, e % kTile, stage_x[e], stage_y[e]);
  __syncwarp();
}

/* The tile product (contract above): WMMA where the architecture has it for the operands, the scalar
 * loop otherwise. TF32 (float operands only) permits TF32 tensor cores; it is a permission, as the
 * precision tf32 is for the libraries: without them (sm_75) the product is fp32. */
template <class T, bool TF32 = false>
__device__ __forceinline__ void warp_tile_mma(float *c, int ldc, const T *a, int lda, const T *b, int ldb, int k,
                                              bool b_transposed, bool accumulate) {
  tile_rules("warp_tile_mma", c, ldc, a, lda, b, ldb, k, b_transposed, accumulate, (int)sizeof(T));
  typename TileAcc<T, TF32>::type acc;
  if (accumulate) {
    acc.load(c, ldc);
  } else {
    acc.zero();
  }
  acc.mma(a, lda, b, ldb, k, b_transposed);
  acc.store(c, ldc);
}

} // namespace

#endif
