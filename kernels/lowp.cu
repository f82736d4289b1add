/* Conversions between fp32 and the 16-bit types of the tensor cores (precision = "bf16" | "fp16" on
 * CUDA): GEMM operands, gradient buckets to and from their 16-bit all-reduce transit type, and the
 * activations a model stores for its backward pass in 16 bits (the seam's to_half / from_half).
 * fp32 -> CUDA_R_16BF / CUDA_R_16F bit patterns round to nearest, ties to even, NaN kept, sign kept
 * (-0.0 too), fp16 overflow to ±inf — the functions of src/util/lowp.h, so the CPU backend's values and
 * the GPU's are the same bits; 16 -> 32 bits is exact. One templated kernel per direction, the type a
 * template argument (BF16: bfloat16, else IEEE half). One element per thread step of a grid-stride
 * loop; nothing crosses elements. */
#include <stdint.h>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "util/lowp.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"

namespace {

/* y[n] = the 16-bit patterns of x[n] */
template <bool BF16>
__global__ void to_half_kernel(uint16_t *y, const float *x, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = BF16 ? hs_bf16_bits(x[i]) : hs_fp16_bits(x[i]);
}

/* y[n] = x[n] widened to fp32 (exact) */
template <bool BF16>
__global__ void from_half_kernel(float *y, const uint16_t *x, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = BF16 ? hs_bf16_to_float(x[i]) : hs_fp16_to_float(x[i]);
}

/* y[n] = x[n] rounded and kept as fp32 (y may alias x): the operands of a convolution under bf16 or fp16 */
template <bool BF16>
__global__ void round_kernel(float *y, const float *x, size_t n) {
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = BF16 ? hs_bf16_round(x[i]) : hs_fp16_round(x[i]);
}

/* gemm_operand: counted in the device-op ledger as its own row, "to_half_kernel (GEMM operand)": the
 * conversions the bf16/fp16 products make of their fp32 operands (tests/cuda/test_device_ledger.sh
 * bounds them per update) */
void to_half(cudaStream_t stream, uint16_t *y, const float *x, size_t n, bool bf16, bool gemm_operand = false) {
  if (bf16)
    HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, stream, to_half_kernel<true>)(y, x, n);
  else
    HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, stream, to_half_kernel<false>)(y, x, n);
  if (gemm_operand)
    HS_CUDA_LAUNCHED("to_half_kernel (GEMM operand)", n * (sizeof(float) + sizeof(uint16_t)));
  else
    HS_CUDA_LAUNCHED("to_half_kernel", n * (sizeof(float) + sizeof(uint16_t)));
}

void from_half(cudaStream_t stream, float *y, const uint16_t *x, size_t n, bool bf16) {
  if (bf16)
    HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, stream, from_half_kernel<true>)(y, x, n);
  else
    HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, stream, from_half_kernel<false>)(y, x, n);
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
  to_half(hs_cuda_stream(be), y, x, n, precision == HS_PRECISION_BF16, true);
}

/* The seam's to_half / from_half: the 16-bit type of the backend's precision (bfloat16 under bf16,
 * IEEE half otherwise), on the compute stream. */
extern "C" void hs_cuda_to_half(const hs_backend *be, uint16_t *dst, const float *src, size_t n) {
  to_half(hs_cuda_stream(be), dst, src, n, be->precision == HS_PRECISION_BF16);
}

extern "C" void hs_cuda_from_half(const hs_backend *be, float *dst, const uint16_t *src, size_t n) {
  from_half(hs_cuda_stream(be), dst, src, n, be->precision == HS_PRECISION_BF16);
}

extern "C" void hs_cuda_round_floats(const hs_backend *be, int precision, float *y, const float *x, size_t n) {
  if (precision == HS_PRECISION_BF16)
    HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), round_kernel<true>)(y, x, n);
  else
    HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), round_kernel<false>)(y, x, n);
  HS_CUDA_LAUNCHED("round_kernel", 2 * n * sizeof(float));
}
