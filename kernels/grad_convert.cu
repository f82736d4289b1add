/* The gradient all-reduce's 16-bit transit on CUDA (distributed.allreduce_dtype = "bf16" | "fp16",
 * src/backend/cuda/cuda_nccl.c): a bucket of fp32 gradients rounded to 16 bits (nearest, ties to
 * even) before ncclAllReduce and widened back after it, on the stream the collective runs on. The
 * formulas are kernels/math/grad16.h, the ones the CPU ranks' algorithm uses, so both round the same. */
#include <stdint.h>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "math/grad16.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_internal.h"

#define GRID_STRIDE_LOOP(i, n) \
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

namespace {

/* y[n] = 16-bit bits of x[n]; bf16 != 0: bfloat16, else IEEE half */
__global__ void grad_to16_kernel(uint16_t *y, const float *x, size_t n, int bf16) {
  GRID_STRIDE_LOOP(i, n) y[i] = bf16 ? hs_grad16_bf16(x[i]) : hs_grad16_fp16(x[i]);
}

/* y[n] = x[n] widened to fp32 (exact) */
__global__ void grad_from16_kernel(float *y, const uint16_t *x, size_t n, int bf16) {
  GRID_STRIDE_LOOP(i, n) y[i] = bf16 ? hs_grad16_bf16_float(x[i]) : hs_grad16_fp16_float(x[i]);
}

} // namespace

extern "C" void hs_cuda_grad_to16(cudaStream_t stream, uint16_t *y, const float *x, size_t n, int bf16) {
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, stream, grad_to16_kernel)(y, x, n, bf16);
  HS_CUDA_LAUNCHED("grad_to16_kernel");
}

extern "C" void hs_cuda_grad_from16(cudaStream_t stream, float *y, const uint16_t *x, size_t n, int bf16) {
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, stream, grad_from16_kernel)(y, x, n, bf16);
  HS_CUDA_LAUNCHED("grad_from16_kernel");
}
