/* A warp's 16 x 16 tile products from shared memory: the inner products of the fused attention kernels
 * (kernels/flash_*.cu). One place decides how a tile product is computed, so the fused kernels read the
 * same with fp32 operands and with 16-bit ones, on the emulated device and on a GPU.
 *
 *   warp_tile_mma(c, ldc, a, lda, b, ldb, k, b_transposed, accumulate)        (T deduced)
 *   warp_tile_mma<float, true>(c, ldc, a, lda, b, ldb, k, b_transposed, accumulate)  (TF32 permitted)
 *     C[16,16] = (accumulate ? C : 0) + A[16,k] · B[k,16]
 *     A row-major [16][lda]; B row-major [k][ldb], or, b_transposed, Bᵀ row-major [16][ldb] (a K tile
 *     for Q·Kᵀ); C fp32 row-major [16][ldc]. All in shared memory.
 *
 * Operand storage types T (a, b the same):
 *   float         fp32 operands, fp32 fused multiply-adds in k order (precision fp32). With the
 *                 template argument TF32 = true (precision tf32): operands rounded to TF32 (11
 *                 significant bits, to nearest, ties away from zero) and fp32 sums where TF32 tensor
 *                 cores exist, fp32 otherwise (a permission, as for the libraries: docs/gpu.md).
 *   hs_tile_bf16  bfloat16 bit patterns; hs_tile_fp16 IEEE half bit patterns: a product of two 16-bit
 *                 values is exact in fp32 and the sums are fp32 — the tensor cores' arithmetic
 *                 (precision bf16 / fp16: the operands the unfused path's GEMMs would round).
 *
 * Which path runs where:
 *   16-bit operands on tensor cores through nvcuda::wmma (m16n16k16, fp32 accumulator): fp16 where
 *   __CUDA_ARCH__ >= 700, bf16 where __CUDA_ARCH__ >= 800, and always on the emulated device (its
 *   mma.h, docs/gpu-emulation.md); float with TF32 likewise (m16n16k8) from sm_80 and on the emulator.
 *   Elsewhere (bf16 and TF32 on sm_75) and for plain float: the scalar loop (warp_tile_mma_scalar),
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
 * on every path (tile_rules_check). */
#ifndef HS_KERNELS_TILE_MMA_CUH
#define HS_KERNELS_TILE_MMA_CUH

#include <stdint.h>

#include <type_traits>

#include "hs_cuda.h"
#include "hs_launch.h"
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

/* A stored operand's value, and the storing of a value (rounded to the type: nearest, ties to even). */
__device__ __forceinline__ float tile_value(float v) { return v; }
__device__ __forceinline__ float tile_value(hs_tile_bf16 v) { return hs_bf16_to_float(v.bits); }
__device__ __forceinline__ float tile_value(hs_tile_fp16 v) { return hs_fp16_to_float(v.bits); }
__device__ __forceinline__ void tile_store(float &dst, float v) { dst = v; }
__device__ __forceinline__ void tile_store(hs_tile_bf16 &dst, float v) { dst.bits = hs_bf16_bits(v); }
__device__ __forceinline__ void tile_store(hs_tile_fp16 &dst, float v) { dst.bits = hs_fp16_bits(v); }

/* The scalar path: lane l computes the 8 elements e = l + 32·t (t = 0..7) of C, row e / 16, column
 * e % 16, each a chain of fmaf in k order. */
template <class T>
__device__ __forceinline__ void warp_tile_mma_scalar(float *c, int ldc, const T *a, int lda, const T *b, int ldb, int k,
                                                     bool b_transposed, bool accumulate) {
  const int lane = threadIdx.x % HS_WARP;
  for (int t = 0; t < kTile * kTile / HS_WARP; t++) {
    const int e = lane + HS_WARP * t, row = e / kTile, col = e % kTile;
    float s = accumulate ? c[row * ldc + col] : 0.0f;
    const T *ar = a + row * lda;
    if (b_transposed) {
      const T *br = b + col * ldb;
      for (int kk = 0; kk < k; kk++) s = fmaf(tile_value(ar[kk]), tile_value(br[kk]), s);
    } else {
      for (int kk = 0; kk < k; kk++) s = fmaf(tile_value(ar[kk]), tile_value(b[kk * ldb + col]), s);
    }
    c[row * ldc + col] = s;
  }
}

#if HS_TILE_WMMA_FP16 || HS_TILE_WMMA_BF16
/* The WMMA path: C's fragment is loaded (or zeroed), k / STEP steps of mma_sync add A[:, kk:kk+STEP] ·
 * B[kk:kk+STEP, :], and C is stored back. B row-major [k][ldb] is a row_major matrix_b; Bᵀ row-major
 * [16][ldb] is B column-major with the same ldb, a col_major matrix_b. W is WMMA's operand type:
 * __nv_bfloat16 / __half (the same 16-bit storage as hs_tile_bf16 / hs_tile_fp16; E = W, STEP 16), or
 * precision::tf32 (E = float, STEP 8), whose loaded operands are rounded to TF32 (to nearest, ties away
 * from zero: the tensor core itself would drop the 13 low bits). */
template <class W, class E, int STEP, class BLayout>
__device__ __forceinline__ void warp_tile_wmma_steps(float *c, int ldc, const E *a, int lda, const E *b, int ldb, int k,
                                                     bool accumulate) {
  namespace wmma = nvcuda::wmma;
  const bool col = std::is_same<BLayout, wmma::col_major>::value;
  wmma::fragment<wmma::accumulator, kTile, kTile, STEP, float> acc;
  if (accumulate) {
    wmma::load_matrix_sync(acc, c, ldc, wmma::mem_row_major);
  } else {
    wmma::fill_fragment(acc, 0.0f);
  }
  wmma::fragment<wmma::matrix_a, kTile, kTile, STEP, W, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, kTile, kTile, STEP, W, BLayout> fb;
  for (int kk = 0; kk < k; kk += STEP) {
    wmma::load_matrix_sync(fa, a + kk, lda);
    wmma::load_matrix_sync(fb, col ? b + kk : b + static_cast<size_t>(kk) * ldb, ldb);
#if HS_TILE_WMMA_TF32 /* (__float_to_tf32 exists from sm_80) */
    if constexpr (STEP == 8) {
      for (int i = 0; i < fa.num_elements; i++) fa.x[i] = wmma::__float_to_tf32(fa.x[i]);
      for (int i = 0; i < fb.num_elements; i++) fb.x[i] = wmma::__float_to_tf32(fb.x[i]);
    }
#endif
    wmma::mma_sync(acc, fa, fb, acc);
  }
  wmma::store_matrix_sync(c, acc, ldc, wmma::mem_row_major);
}

/* The tile storage type T read as WMMA's element type E, B's layout chosen. */
template <class W, class E, int STEP, class T>
__device__ __forceinline__ void warp_tile_wmma(float *c, int ldc, const T *a, int lda, const T *b, int ldb, int k,
                                               bool b_transposed, bool accumulate) {
  static_assert(sizeof(E) == sizeof(T), "the tile type and the CUDA type share the storage");
  const E *ae = reinterpret_cast<const E *>(a), *be = reinterpret_cast<const E *>(b);
  if (b_transposed) {
    warp_tile_wmma_steps<W, E, STEP, nvcuda::wmma::col_major>(c, ldc, ae, lda, be, ldb, k, accumulate);
  } else {
    warp_tile_wmma_steps<W, E, STEP, nvcuda::wmma::row_major>(c, ldc, ae, lda, be, ldb, k, accumulate);
  }
}
#endif

/* Which path a (type, TF32) pair takes: the scalar loop unless specialised below. */
template <class T, bool TF32> struct TileMma {
  static_assert(!TF32, "TF32 tile products take float operands");
  __device__ static __forceinline__ void run(float *c, int ldc, const T *a, int lda, const T *b, int ldb, int k,
                                             bool b_transposed, bool accumulate) {
    warp_tile_mma_scalar(c, ldc, a, lda, b, ldb, k, b_transposed, accumulate);
  }
};
template <> struct TileMma<hs_tile_bf16, false> {
  __device__ static __forceinline__ void run(float *c, int ldc, const hs_tile_bf16 *a, int lda, const hs_tile_bf16 *b,
                                             int ldb, int k, bool b_transposed, bool accumulate) {
#if HS_TILE_WMMA_BF16
    warp_tile_wmma<__nv_bfloat16, __nv_bfloat16, kTile>(c, ldc, a, lda, b, ldb, k, b_transposed, accumulate);
#else
    warp_tile_mma_scalar(c, ldc, a, lda, b, ldb, k, b_transposed, accumulate);
#endif
  }
};
template <> struct TileMma<hs_tile_fp16, false> {
  __device__ static __forceinline__ void run(float *c, int ldc, const hs_tile_fp16 *a, int lda, const hs_tile_fp16 *b,
                                             int ldb, int k, bool b_transposed, bool accumulate) {
#if HS_TILE_WMMA_FP16
    warp_tile_wmma<__half, __half, kTile>(c, ldc, a, lda, b, ldb, k, b_transposed, accumulate);
#else
    warp_tile_mma_scalar(c, ldc, a, lda, b, ldb, k, b_transposed, accumulate);
#endif
  }
};
template <> struct TileMma<float, true> {
  __device__ static __forceinline__ void run(float *c, int ldc, const float *a, int lda, const float *b, int ldb, int k,
                                             bool b_transposed, bool accumulate) {
#if HS_TILE_WMMA_TF32
    warp_tile_wmma<nvcuda::wmma::precision::tf32, float, 8>(c, ldc, a, lda, b, ldb, k, b_transposed, accumulate);
#else
    warp_tile_mma_scalar(c, ldc, a, lda, b, ldb, k, b_transposed, accumulate);
#endif
  }
};

#if defined(HS_CUDA_EMU)
/* The emulated device checks the caller rules above on every path (the scalar loop would not need
 * them, a GPU's WMMA would fault or compute garbage without them): one warp-collective step before the
 * product, which also reports lanes that are missing or pass other arguments (tests/cuda_emu/include/
 * hs_emu/device_builtins.h, warp_collective). */
struct TileRules {
  const void *c, *a, *b;
  int ldc, lda, ldb, k;
  bool b_transposed, accumulate;
};
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
  if (r.k <= 0 || r.k % kTile != 0) {
    snprintf(msg, sizeof msg, "k = %d is not a positive multiple of 16 (pad the tiles with zeros; "
             "kernels/tile_mma.cuh)", r.k);
  } else if (r.lda % 8 != 0 || r.ldb % 8 != 0 || r.ldc % 4 != 0) {
    snprintf(msg, sizeof msg, "lda = %d, ldb = %d, ldc = %d: lda and ldb must be multiples of 8 elements, ldc of 4 "
             "(kernels/tile_mma.cuh)", r.lda, r.ldb, r.ldc);
  } else if (reinterpret_cast<uintptr_t>(r.a) % 32 != 0 || reinterpret_cast<uintptr_t>(r.b) % 32 != 0 ||
             reinterpret_cast<uintptr_t>(r.c) % 32 != 0) {
    snprintf(msg, sizeof msg, "a = %p, b = %p, c = %p: every tile must start 32-byte aligned (HS_SHARED_ALIGNED(32, "
             "...); kernels/tile_mma.cuh)", r.a, r.b, r.c);
  } else {
    return nullptr;
  }
  return msg;
}
#endif

/* The tile product (contract above): WMMA where the architecture has it for the operands, the scalar
 * loop otherwise. TF32 (float operands only) permits TF32 tensor cores; it is a permission, as the
 * precision tf32 is for the libraries: without them (sm_75) the product is fp32. */
template <class T, bool TF32 = false>
__device__ __forceinline__ void warp_tile_mma(float *c, int ldc, const T *a, int lda, const T *b, int ldb, int k,
                                              bool b_transposed, bool accumulate) {
#if defined(HS_CUDA_EMU)
  TileRules rules{c, a, b, ldc, lda, ldb, k, b_transposed, accumulate};
  ::hs_emu::warp_collective("warp_tile_mma", tile_rules_check, &rules, __FILE__, __LINE__);
#endif
  TileMma<T, TF32>::run(c, ldc, a, lda, b, ldb, k, b_transposed, accumulate);
}

} // namespace

#endif
