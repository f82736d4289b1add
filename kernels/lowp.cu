/* Conversion of GEMM operands to the 16-bit types of the tensor cores (precision = "bf16" | "fp16" on
 * CUDA), and of gradient buckets to and from their 16-bit all-reduce transit type: fp32 -> CUDA_R_16BF / CUDA_R_16F bit patterns, round to nearest, ties to even, NaN kept, fp16
 * overflow to ±inf — the functions of src/util/lowp.h, so the CPU backend's rounded operands and the
 * GPU's are the same bits. One element per thread step of a grid-stride loop; nothing crosses elements. */
#include <stdint.h>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "util/lowp.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"

namespace {

/* y[n] = bf16 bits of x[n] */
__global__ void to_bf16_kernel(uint16_t *y, const float *x, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = hs_bf16_bits(x[i]);
}

/* y[n] = fp16 bits of x[n] */
__global__ void to_fp16_kernel(uint16_t *y, const float *x, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = hs_fp16_bits(x[i]);
}

/* y[n] = round_p(x[n]) kept as fp32 (y may alias x): the operands of a convolution under bf16 or fp16 */
__global__ void round_bf16_kernel(float *y, const float *x, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = hs_bf16_round(x[i]);
}
__global__ void round_fp16_kernel(float *y, const float *x, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = hs_fp16_round(x[i]);
}

/* y[n] = x[n] widened to fp32 (exact) */
__global__ void from_bf16_kernel(float *y, const uint16_t *x, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = hs_bf16_to_float(x[i]);
}
__global__ void from_fp16_kernel(float *y, const uint16_t *x, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = hs_fp16_to_float(x[i]);
}

} // namespace

/* The gradient all-reduce's 16-bit transit (distributed.allreduce_dtype, cuda_nccl.c): the same
 * roundings on the stream the collective runs on (bf16 != 0: bfloat16, else IEEE half). */
extern "C" void hs_cuda_grad_to16(cudaStream_t stream, uint16_t *y, const float *x, size_t n, int bf16) {
  if (bf16)
    HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, stream, to_bf16_kernel)(y, x, n);
  else
    HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, stream, to_fp16_kernel)(y, x, n);
  HS_CUDA_LAUNCHED("to_bf16_kernel/to_fp16_kernel");
}

extern "C" void hs_cuda_grad_from16(cudaStream_t stream, float *y, const uint16_t *x, size_t n, int bf16) {
  if (bf16)
    HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, stream, from_bf16_kernel)(y, x, n);
  else
    HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, stream, from_fp16_kernel)(y, x, n);
  HS_CUDA_LAUNCHED("from_bf16_kernel/from_fp16_kernel");
}

extern "C" void hs_cuda_to_half_bits(const hs_backend *be, int precision, uint16_t *y, const float *x, size_t n) {
  if (precision == HS_PRECISION_BF16)
    HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), to_bf16_kernel)(y, x, n);
  else
    HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), to_fp16_kernel)(y, x, n);
  HS_CUDA_LAUNCHED("to_bf16_kernel/to_fp16_kernel");
}

extern "C" void hs_cuda_round_floats(const hs_backend *be, int precision, float *y, const float *x, size_t n) {
  if (precision == HS_PRECISION_BF16)
    HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), round_bf16_kernel)(y, x, n);
  else
    HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), round_fp16_kernel)(y, x, n);
  HS_CUDA_LAUNCHED("round_bf16_kernel/round_fp16_kernel");
}
