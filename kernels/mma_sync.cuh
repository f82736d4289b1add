/* Tensor-core products on registers: PTX mma.sync.aligned.m16n8k16 (bf16 or fp16 operands, fp32 accumulator),
 * whose fragments have a documented layout (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating
 * point type"), unlike nvcuda::wmma's opaque one. With g = lane / 4 and t = lane % 4, a lane holds
 *
 *   A [16 x 16]  a[0] = A[g][2t, 2t+1]   a[1] = A[g+8][2t, 2t+1]   a[2] = A[g][2t+8, 2t+9]   a[3] = A[g+8][2t+8, 2t+9]
 *   B [16 x  8]  b[0] = B[2t, 2t+1][g]   b[1] = B[2t+8, 2t+9][g]
 *   C [16 x  8]  c[0], c[1] = C[g][2t, 2t+1]   c[2], c[3] = C[g+8][2t, 2t+1]
 *
 * (a 32-bit register holds two 16-bit values, the lower index in the low half). So a kernel can work on
 * the values it holds: a row of C lies in the 4 lanes of a quad (its max and sum by two shuffles), and
 * two C tiles side by side, [16 x 16], are the A fragment of the next product once rounded to 16 bits
 * (hs_mma_pack2): the fused attention's P never goes through shared memory (kernels/flash_attention.cu).
 *
 *   hs_mma_16816<BF16>(acc, a, b)   acc[4] += A·B, warp-collective (every lane, one call site)
 *   hs_mma_pack2<BF16>(lo, hi)      two floats rounded to nearest-even 16-bit values, lo in the low half
 *   hs_ldmatrix_x4<TRANS>(r, row)   four 8 x 8 matrices of 16-bit values from shared memory into fragments
 *   hs_ldmatrix_x2(r, row)          two (lanes 0-15 name the rows)
 *
 * ldmatrix (PTX ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16), warp-collective: lane l names row l % 8
 * of matrix l / 8 (8 consecutive 16-bit values, 16-byte aligned; any row anywhere in shared memory), and
 * every lane receives in r[m] matrix m's (row g, columns 2t, 2t+1), or with TRANS its (rows 2t, 2t+1,
 * column g). So one instruction loads an A fragment of a row-major tile (matrices: rows 0-7 / 8-15 ×
 * columns 0-7 / 8-15, in a's order) or the B fragments of two 8-column tiles of a matrix stored [n][k]; with
 * TRANS, those of a matrix stored [k][n] (V for P·V, K for dS·K): no transposed copy in shared memory.
 *
 * Where it runs: nvcc for sm_80 and later (bf16 and fp16 m16n8k16 need sm_80), and the emulated device
 * (tests/cuda_emu/include/hs_emu/mma_sync.h: the same layout, the products summed as its WMMA sums them).
 * HS_MMA_SYNC says whether this compilation has it; host code asks hs_mma_sync_usable(be) before launching
 * a kernel that needs it. */
#ifndef HS_KERNELS_MMA_SYNC_CUH
#define HS_KERNELS_MMA_SYNC_CUH

#include <stdint.h>

#include "hs_cuda.h"
#include "util/lowp.h"
#if defined(HS_CUDA_EMU)
#include "hs_emu/mma_sync.h"
#endif

#if defined(HS_CUDA_EMU) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800)
#define HS_MMA_SYNC 1
#else
#define HS_MMA_SYNC 0
#endif

#if defined(HS_CUDA_EMU)
template <bool BF16>
__device__ __forceinline__ void hs_mma_16816(float acc[4], const uint32_t a[4], const uint32_t b[2],
                                             const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  ::hs_emu::mma_m16n8k16(acc, a, b, acc, BF16, file, line);
}
#else
template <bool BF16>
__device__ __forceinline__ void hs_mma_16816(float acc[4], const uint32_t a[4], const uint32_t b[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (BF16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(__CUDA_ARCH__)
  (void)acc, (void)a, (void)b;
  __trap(); /* never launched below sm_80: the host asks hs_mma_sync_usable first */
#else
  (void)acc, (void)a, (void)b; /* nvcc's host pass compiles device code it never runs */
#endif
}
#endif

#if defined(HS_CUDA_EMU)
template <bool TRANS>
__device__ __forceinline__ void hs_ldmatrix_x4(uint32_t r[4], const uint16_t *row, const char *file = __builtin_FILE(),
                                               int line = __builtin_LINE()) {
  ::hs_emu::ldmatrix_x4(r, row, TRANS, file, line);
}
#else
template <bool TRANS> __device__ __forceinline__ void hs_ldmatrix_x4(uint32_t r[4], const uint16_t *row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned addr = (unsigned)__cvta_generic_to_shared(row);
  if (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#elif defined(__CUDA_ARCH__)
  (void)r, (void)row;
  __trap(); /* the kernels that call it need mma.sync (sm_80), which the host asks for first */
#else
  (void)r, (void)row;
#endif
}
#endif

/* The same for two matrices (ldmatrix .x2): lanes 0-15 name their rows (the others' addresses are not read) */
#if defined(HS_CUDA_EMU)
__device__ __forceinline__ void hs_ldmatrix_x2(uint32_t r[2], const uint16_t *row, const char *file = __builtin_FILE(),
                                               int line = __builtin_LINE()) {
  ::hs_emu::ldmatrix_x2(r, row, file, line);
}
#else
__device__ __forceinline__ void hs_ldmatrix_x2(uint32_t r[2], const uint16_t *row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const unsigned addr = (unsigned)__cvta_generic_to_shared(row);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
#elif defined(__CUDA_ARCH__)
  (void)r, (void)row;
  __trap();
#else
  (void)r, (void)row;
#endif
}
#endif

/* round(lo) | round(hi) << 16, to nearest, ties to even (util/lowp.h's rounding, which every 16-bit operand
 * of hetseq takes); on sm_80+ one cvt.rn.{bf16,f16}x2.f32 instruction, the same bits for every finite value */
template <bool BF16> __device__ __forceinline__ uint32_t hs_mma_pack2(float lo, float hi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t r;
  if (BF16)
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return BF16 ? (uint32_t)hs_bf16_bits(lo) | (uint32_t)hs_bf16_bits(hi) << 16
              : (uint32_t)hs_fp16_bits(lo) | (uint32_t)hs_fp16_bits(hi) << 16;
#endif
}

#endif
