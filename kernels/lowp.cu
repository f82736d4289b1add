/* Conversions between fp32 and the 16-bit types of the tensor cores (precision = "bf16" | "fp16" on
 * CUDA): GEMM operands, gradient buckets to and from their 16-bit all-reduce transit type, and the
 * activations a model stores for its backward pass in 16 bits (the seam's to_half / from_half).
 * fp32 -> CUDA_R_16BF / CUDA_R_16F bit patterns round to nearest, ties to even, NaN kept, sign kept
 * (-0.0 too), fp16 overflow to ±inf — the functions of src/util/lowp.h, so the CPU backend's values and
 * the GPU's are the same bits; 16 -> 32 bits is exact. One templated kernel per direction, the type a
 * template argument (BF16: bfloat16, else IEEE half). HS_VEC elements per thread step of a
 * grid-stride loop (16-byte fp32 loads) where the pointers are aligned for it; nothing crosses elements. */
#include <stdint.h>
#include <string.h>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "util/check.h"
#include "util/lowp.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"

namespace {

/* Thread t of a grid-stride loop takes groups k = first, first + stride, ... < n4 of HS_VEC elements
 * (n4 = 0 where the host found the pointers unaligned for vector steps), then the elements from
 * n4·HS_VEC on one by one. */
#define THREAD_FIRST ((size_t)blockIdx.x * blockDim.x + threadIdx.x)
#define THREAD_STRIDE ((size_t)gridDim.x * blockDim.x)

template <bool BF16> __device__ __forceinline__ uint16_t half_bits(float v) {
  return BF16 ? hs_bf16_bits(v) : hs_fp16_bits(v);
}
template <bool BF16> __device__ __forceinline__ float half_value(uint16_t h) {
  return BF16 ? hs_bf16_to_float(h) : hs_fp16_to_float(h);
}
template <bool BF16> __device__ __forceinline__ float half_round(float v) {
  return BF16 ? hs_bf16_round(v) : hs_fp16_round(v);
}

/* y[n] = the 16-bit patterns of x[n] (element 2j in the low half of 32-bit word j: little-endian); first,
 * stride: the thread's place in the grid-stride loop */
template <bool BF16>
__device__ __forceinline__ void to_half_span(uint16_t *y, const float *x, size_t n, bool vec, size_t first, size_t stride) {
  const size_t n4 = vec ? n / HS_VEC : 0;
  for (size_t k = first; k < n4; k += stride) {
    const float4 v = HS_VECTOR_AT(const float4, x)[k];
    uint2 o;
    o.x = (uint32_t)half_bits<BF16>(v.x) | (uint32_t)half_bits<BF16>(v.y) << 16;
    o.y = (uint32_t)half_bits<BF16>(v.z) | (uint32_t)half_bits<BF16>(v.w) << 16;
    HS_VECTOR_AT(uint2, y)[k] = o;
  }
  for (size_t i = n4 * HS_VEC + first; i < n; i += stride) y[i] = half_bits<BF16>(x[i]);
}

/* y[n] = x[n] widened to fp32 (exact) */
template <bool BF16>
__device__ __forceinline__ void from_half_span(float *y, const uint16_t *x, size_t n, bool vec, size_t first,
                                               size_t stride) {
  const size_t n4 = vec ? n / HS_VEC : 0;
  for (size_t k = first; k < n4; k += stride) {
    const uint2 h = HS_VECTOR_AT(const uint2, x)[k];
    float4 o;
    o.x = half_value<BF16>((uint16_t)(h.x & 0xffffu));
    o.y = half_value<BF16>((uint16_t)(h.x >> 16));
    o.z = half_value<BF16>((uint16_t)(h.y & 0xffffu));
    o.w = half_value<BF16>((uint16_t)(h.y >> 16));
    HS_VECTOR_AT(float4, y)[k] = o;
  }
  for (size_t i = n4 * HS_VEC + first; i < n; i += stride) y[i] = half_value<BF16>(x[i]);
}

template <bool BF16>
__global__ void to_half_kernel(uint16_t *y, const float *x, size_t n, bool vec) {
  to_half_span<BF16>(y, x, n, vec, THREAD_FIRST, THREAD_STRIDE);
}

template <bool BF16>
__global__ void from_half_kernel(float *y, const uint16_t *x, size_t n, bool vec) {
  from_half_span<BF16>(y, x, n, vec, THREAD_FIRST, THREAD_STRIDE);
}

/* convert_halves: conversion blockIdx.y of the batch, a grid-stride loop over its elements in x */
struct conversions {
  float *f[HS_HALF_CONVERSIONS_MAX];
  uint16_t *h[HS_HALF_CONVERSIONS_MAX];
  size_t n[HS_HALF_CONVERSIONS_MAX];
  unsigned char to_half[HS_HALF_CONVERSIONS_MAX], vec[HS_HALF_CONVERSIONS_MAX];
};

template <bool BF16>
__global__ void convert_halves_kernel(conversions c) {
  const int k = blockIdx.y;
  if (c.to_half[k])
    to_half_span<BF16>(c.h[k], c.f[k], c.n[k], c.vec[k] != 0, THREAD_FIRST, THREAD_STRIDE);
  else
    from_half_span<BF16>(c.f[k], c.h[k], c.n[k], c.vec[k] != 0, THREAD_FIRST, THREAD_STRIDE);
}

/* y[n] = x[n] rounded and kept as fp32 (y may alias x): the operands of a convolution under bf16 or fp16 */
template <bool BF16>
__global__ void round_kernel(float *y, const float *x, size_t n, bool vec) {
  const size_t n4 = vec ? n / HS_VEC : 0;
  for (size_t k = THREAD_FIRST; k < n4; k += THREAD_STRIDE) {
    float4 v = HS_VECTOR_AT(const float4, x)[k];
    v.x = half_round<BF16>(v.x);
    v.y = half_round<BF16>(v.y);
    v.z = half_round<BF16>(v.z);
    v.w = half_round<BF16>(v.w);
    HS_VECTOR_AT(float4, y)[k] = v;
  }
  for (size_t i = n4 * HS_VEC + THREAD_FIRST; i < n; i += THREAD_STRIDE) y[i] = half_round<BF16>(x[i]);
}

/* 16-byte steps for the fp32 side, 8-byte for the 16-bit side */
static bool vec_ok(const void *f32, const void *f16) { return hs_aligned(f32, 16) && hs_aligned(f16, 8); }
static unsigned grid_for(size_t n, bool vec) { return hs_grid_for(vec ? n / HS_VEC + n % HS_VEC : n); }

/* What a conversion is for, each its own row of the device-op ledger: GEMM_OPERAND "to_half_kernel (GEMM
 * operand)", the conversions the bf16/fp16 products make of their fp32 operands
 * (tests/cuda/test_device_budget.sh bounds them per update); PARAMETER_COPY "to_half_kernel (parameter
 * copy)", a whole parameter arena's 16-bit copy made again after a write other than the optimizer's
 * (src/backend/cuda/cuda_shadow.c: at the start, after a broadcast or a checkpoint load, not per update). */
enum conversion { OTHER, GEMM_OPERAND, PARAMETER_COPY, TWIN_CHECK };

void to_half(cudaStream_t stream, uint16_t *y, const float *x, size_t n, bool bf16, conversion what = OTHER) {
  const bool vec = vec_ok(x, y);
  if (bf16)
    HS_LAUNCH(grid_for(n, vec), HS_BLOCK, 0, stream, to_half_kernel<true>)(y, x, n, vec);
  else
    HS_LAUNCH(grid_for(n, vec), HS_BLOCK, 0, stream, to_half_kernel<false>)(y, x, n, vec);
  if (what == GEMM_OPERAND)
    HS_CUDA_LAUNCHED("to_half_kernel (GEMM operand)", n * (sizeof(float) + sizeof(uint16_t)));
  else if (what == PARAMETER_COPY)
    HS_CUDA_LAUNCHED("to_half_kernel (parameter copy)", n * (sizeof(float) + sizeof(uint16_t)));
  else if (what == TWIN_CHECK) /* HETSEQ_CHECK_HALF_TWINS only (src/backend/cuda/cuda_twins.c) */
    HS_CUDA_LAUNCHED("to_half_kernel (twin check)", n * (sizeof(float) + sizeof(uint16_t)));
  else
    HS_CUDA_LAUNCHED("to_half_kernel", n * (sizeof(float) + sizeof(uint16_t)));
}

void from_half(cudaStream_t stream, float *y, const uint16_t *x, size_t n, bool bf16) {
  const bool vec = vec_ok(y, x);
  if (bf16)
    HS_LAUNCH(grid_for(n, vec), HS_BLOCK, 0, stream, from_half_kernel<true>)(y, x, n, vec);
  else
    HS_LAUNCH(grid_for(n, vec), HS_BLOCK, 0, stream, from_half_kernel<false>)(y, x, n, vec);
  HS_CUDA_LAUNCHED("from_half_kernel", n * (sizeof(float) + sizeof(uint16_t)));
}

} // namespace

/* The gradient all-reduce's 16-bit transit (distributed.allreduce_dtype, cuda_nccl.c): the same
 * roundings on the stream the collective runs on (bf16 != 0: bfloat16, else IEEE half). */
extern "C" void hs_cuda_grad_to16(cudaStream_t stream, uint16_t *y, const float *x, size_t n, int bf16) {
  to_half(stream, y, x, n, bf16 != 0);
}

extern "C" void hs_cuda_grad_from16(cudaStream_t stream, float *y, const uint16_t *x, size_t n, int bf16) {
  from_half(stream, y, x, n, bf16 != 0);
}

extern "C" void hs_cuda_to_half_bits(const hs_backend *be, int precision, uint16_t *y, const float *x, size_t n) {
  to_half(hs_cuda_stream(be), y, x, n, precision == HS_PRECISION_BF16, GEMM_OPERAND);
}

extern "C" void hs_cuda_to_half_check(const hs_backend *be, int precision, uint16_t *y, const float *x, size_t n) {
  to_half(hs_cuda_stream(be), y, x, n, precision == HS_PRECISION_BF16, TWIN_CHECK);
}

extern "C" void hs_cuda_params_to_half(const hs_backend *be, int precision, uint16_t *y, const float *x, size_t n) {
  to_half(hs_cuda_stream(be), y, x, n, precision == HS_PRECISION_BF16, PARAMETER_COPY);
}

/* The seam's to_half / from_half: the 16-bit type of the backend's precision (bfloat16 under bf16,
 * IEEE half otherwise), on the compute stream. */
extern "C" void hs_cuda_to_half(const hs_backend *be, uint16_t *dst, const float *src, size_t n) {
  to_half(hs_cuda_stream(be), dst, src, n, be->precision == HS_PRECISION_BF16);
}

extern "C" void hs_cuda_from_half(const hs_backend *be, float *dst, const uint16_t *src, size_t n) {
  from_half(hs_cuda_stream(be), dst, src, n, be->precision == HS_PRECISION_BF16);
}

/* The conversions of t[count] in one launch: a row of blocks per conversion, as many blocks as the largest
 * needs (the smaller ones' extra blocks find no elements); each conversion's elements as to_half_kernel /
 * from_half_kernel take them, so the same bits. */
extern "C" void hs_cuda_convert_halves(const hs_backend *be, const hs_half_conversion *t, int count) {
  if (count > HS_HALF_CONVERSIONS_MAX)
    HS_FATAL(NULL, "convert_halves: %d conversions, at most %d", count, HS_HALF_CONVERSIONS_MAX);
  conversions c;
  memset(&c, 0, sizeof c);
  int live = 0;
  unsigned blocks = 0;
  size_t bytes = 0;
  for (int k = 0; k < count; k++) {
    if (!t[k].n) continue;
    c.f[live] = t[k].f, c.h[live] = t[k].h, c.n[live] = t[k].n, c.to_half[live] = t[k].to_half != 0;
    const bool vec = vec_ok(t[k].f, t[k].h);
    c.vec[live] = vec;
    const unsigned g = grid_for(t[k].n, vec);
    if (g > blocks) blocks = g;
    bytes += t[k].n * (sizeof(float) + sizeof(uint16_t));
    live++;
  }
  if (!live) return;
  const dim3 grid(blocks, (unsigned)live);
  if (be->precision == HS_PRECISION_BF16)
    HS_LAUNCH(grid, HS_BLOCK, 0, hs_cuda_stream(be), convert_halves_kernel<true>)(c);
  else
    HS_LAUNCH(grid, HS_BLOCK, 0, hs_cuda_stream(be), convert_halves_kernel<false>)(c);
  HS_CUDA_LAUNCHED("convert_halves_kernel", bytes); /* each element read in one width, written in the other */
}

extern "C" void hs_cuda_round_floats(const hs_backend *be, int precision, float *y, const float *x, size_t n) {
  const bool vec = vec_ok(x, y) && hs_aligned(y, 16);
  if (precision == HS_PRECISION_BF16)
    HS_LAUNCH(grid_for(n, vec), HS_BLOCK, 0, hs_cuda_stream(be), round_kernel<true>)(y, x, n, vec);
  else
    HS_LAUNCH(grid_for(n, vec), HS_BLOCK, 0, hs_cuda_stream(be), round_kernel<false>)(y, x, n, vec);
  HS_CUDA_LAUNCHED("round_kernel", 2 * n * sizeof(float));
}
