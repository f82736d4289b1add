/* Element-wise kernels over memory-bound data, by quads: thread t of a grid-stride loop takes quads
 * q = t, t + stride, ... of HS_VEC (4) consecutive elements, the last possibly short. Where the host found
 * every pointer aligned (fp32 to 16 bytes, 16-bit data to 8), a whole quad moves with one vector load
 * or store per array: a scalar 2- or 4-byte load per thread keeps too few bytes in flight to reach a
 * GPU's bandwidth. Which elements a thread owns does not depend on the vector step, and nothing crosses
 * elements, so the results are the scalar loop's bits. */
#ifndef HS_KERNELS_QUADS_CUH
#define HS_KERNELS_QUADS_CUH

#include "hs_cuda.h"
#include "hs_launch.h"
#include "util/lowp.h"

#include <initializer_list>

namespace {

/* The quad loop: for (size_t i = quad_first(); i < n; i += quad_stride()), quad_len(i, n) elements from i. */
__device__ __forceinline__ size_t quad_first() { return ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * HS_VEC; }
__device__ __forceinline__ size_t quad_stride() { return (size_t)gridDim.x * blockDim.x * HS_VEC; }
__device__ __forceinline__ int quad_len(size_t i, size_t n) { return n - i < HS_VEC ? (int)(n - i) : HS_VEC; }

/* x[0..n) = a[i..i+n) (n <= HS_VEC; the rest 0): one 16-byte load where `vector` */
__device__ __forceinline__ void load4(float (&x)[HS_VEC], const float *a, size_t i, int n, bool vector) {
  if (vector) {
    const float4 v = *HS_VECTOR_AT(const float4, a + i);
    x[0] = v.x, x[1] = v.y, x[2] = v.z, x[3] = v.w;
  } else {
    for (int j = 0; j < HS_VEC; j++) x[j] = j < n ? a[i + j] : 0.0f;
  }
}

/* a[i..i+n) = x[0..n): one 16-byte store where `vector` */
__device__ __forceinline__ void store4(float *a, size_t i, const float (&x)[HS_VEC], int n, bool vector) {
  if (vector) {
    *HS_VECTOR_AT(float4, a + i) = make_float4(x[0], x[1], x[2], x[3]);
  } else {
    for (int j = 0; j < n; j++) a[i + j] = x[j];
  }
}

/* x[0..n) = the 16-bit values a[i..i+n) widened (exact; bfloat16 where bf16, else IEEE half): one
 * 8-byte load where `vector` */
__device__ __forceinline__ void load4_half(float (&x)[HS_VEC], const uint16_t *a, size_t i, int n, bool vector,
                                           int bf16) {
  uint16_t h[HS_VEC] = {0, 0, 0, 0};
  if (vector) {
    const uint2 v = *HS_VECTOR_AT(const uint2, a + i);
    h[0] = (uint16_t)(v.x & 0xffffu), h[1] = (uint16_t)(v.x >> 16), h[2] = (uint16_t)(v.y & 0xffffu),
    h[3] = (uint16_t)(v.y >> 16);
  } else {
    for (int j = 0; j < n; j++) h[j] = a[i + j];
  }
  for (int j = 0; j < HS_VEC; j++) x[j] = bf16 ? hs_bf16_to_float(h[j]) : hs_fp16_to_float(h[j]);
}

/* a[i..i+n) = round(x[0..n)) (to_half's rounding, src/util/lowp.h): one 8-byte store where `vector` */
__device__ __forceinline__ void store4_half(uint16_t *a, size_t i, const float (&x)[HS_VEC], int n, bool vector,
                                            int bf16) {
  uint16_t h[HS_VEC];
  for (int j = 0; j < HS_VEC; j++) h[j] = bf16 ? hs_bf16_bits(x[j]) : hs_fp16_bits(x[j]);
  if (vector) {
    uint2 v;
    v.x = (uint32_t)h[0] | (uint32_t)h[1] << 16;
    v.y = (uint32_t)h[2] | (uint32_t)h[3] << 16;
    *HS_VECTOR_AT(uint2, a + i) = v;
  } else {
    for (int j = 0; j < n; j++) a[i + j] = h[j];
  }
}

} // namespace

/* Whether every pointer given is aligned for the quads' vector steps: fp32 arrays to 16 bytes, 16-bit
 * ones to 8 (NULL pointers pass). */
static inline bool hs_quads_aligned(std::initializer_list<const float *> f32,
                                    std::initializer_list<const uint16_t *> f16 = {}) {
  for (const float *p : f32)
    if (p && !hs_aligned(p, 16)) return false;
  for (const uint16_t *p : f16)
    if (p && !hs_aligned(p, 8)) return false;
  return true;
}

/* The grid of a quad loop over n elements. */
static inline unsigned hs_grid_for_quads(size_t n) { return hs_grid_for((n + HS_VEC - 1) / HS_VEC); }

#endif
