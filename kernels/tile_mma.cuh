/* A warp's 16 x 16 tile products from shared memory: the inner products of the fused attention kernels
 * (kernels/flash_*.cu). One place decides how a tile product is computed, so the fused kernels read the
 * same with fp32 operands and with 16-bit ones, on the emulated device and on a GPU.
 *
 *   warp_tile_mma(c, ldc, a, lda, b, ldb, k, b_transposed, accumulate):
 *     C[16,16] = (accumulate ? C : 0) + A[16,k] · B[k,16]
 *     A row-major [16][lda]; B row-major [k][ldb], or, b_transposed, Bᵀ row-major [16][ldb] (a K tile
 *     for Q·Kᵀ); C fp32 row-major [16][ldc]. All in shared memory.
 *
 * Operand storage types T (a, b the same):
 *   float         fp32 operands, fp32 fused multiply-adds in k order (precision fp32; tf32 too).
 *   hs_tile_bf16  bfloat16 bit patterns; hs_tile_fp16 IEEE half bit patterns: a product of two 16-bit
 *                 values is exact in fp32 and the sums are fp32 — the tensor cores' arithmetic
 *                 (precision bf16 / fp16: the operands the unfused path's GEMMs would round).
 * Rules a caller keeps so a tensor-core (WMMA) form can take the same calls: k is a multiple of 16
 * (pad tiles with zeros), lda and ldb are multiples of 8 elements, a, b and c start 32-byte aligned,
 * and every lane of the warp calls it with the same arguments (warp-collective; the lanes __syncwarp()
 * before reading C). Sums over k in increasing order, per element. */
#ifndef HS_KERNELS_TILE_MMA_CUH
#define HS_KERNELS_TILE_MMA_CUH

#include <stdint.h>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "util/lowp.h"

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

/* Lane l computes the 8 elements e = l + 32·t (t = 0..7) of C, row e / 16, column e % 16. */
template <class T>
__device__ __forceinline__ void warp_tile_mma(float *c, int ldc, const T *a, int lda, const T *b, int ldb, int k,
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

} // namespace

#endif
