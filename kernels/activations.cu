/* Smooth activations of the CUDA backend (the family of src/backend/cpu/cpu_activations.c): exact-erf
 * GELU (alone and with the bias add fused in) and tanh. Every formula is the kernels/math helper
 * (math/gelu.h, math/activations.h) the CPU uses, so both devices compute the same expression per
 * element; nothing crosses elements, so the results depend on neither the grid nor the thread schedule.
 * Each kernel is one grid-stride loop over a grid from hs_grid_for(n); an element is read and then
 * written by the same thread, so outputs may alias inputs wherever the contract allows. */
#include <math.h>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "math/activations.h"
#include "math/gelu.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"

#define GRID_STRIDE_LOOP(i, n) \
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

namespace {

/* ---- GELU (exact erf form): forward, fused bias + forward, backward ------------------------------------ */

/* y = 0.5·x·(1 + erf(x/√2)) */
template <class T> __global__ void gelu_forward_kernel(T *y, const T *x, size_t n) {
  GRID_STRIDE_LOOP(i, n) y[i] = (T)hs_gelu((float)x[i]);
}

/* x[rows,cols] += bias[cols] (kept: it is the pre-activation the backward needs), y = gelu(x); one pass */
template <class T> __global__ void bias_gelu_forward_kernel(T *y, T *x, const T *bias, size_t n, size_t cols) {
  GRID_STRIDE_LOOP(i, n) {
    const float u = (float)x[i] + (float)bias[i % cols];
    x[i] = (T)u;
    y[i] = (T)hs_gelu(u);
  }
}

/* dx = dy·gelu'(x) = dy·(Φ(x) + x·φ(x)) from the pre-activation x; dx may alias dy */
template <class T> __global__ void gelu_backward_kernel(T *dx, const T *dy, const T *x, size_t n) {
  GRID_STRIDE_LOOP(i, n) dx[i] = (T)hs_gelu_grad((float)dy[i], (float)x[i]);
}

/* ---- tanh: forward and backward ------------------------------------------------------------------------ */

/* y = tanh(x) (the math library's tanhf, as the CPU: only the pooler uses it, exactness over speed) */
template <class T> __global__ void tanh_forward_kernel(T *y, const T *x, size_t n) {
  GRID_STRIDE_LOOP(i, n) y[i] = (T)tanhf((float)x[i]);
}

/* dx = dy·(1 - y²) from the output y; any may alias */
template <class T> __global__ void tanh_backward_kernel(T *dx, const T *dy, const T *y, size_t n) {
  GRID_STRIDE_LOOP(i, n) dx[i] = (T)hs_tanh_grad((float)dy[i], (float)y[i]);
}

} // namespace

/* ---- the seam's ops -------------------------------------------------------------------------------------- */

extern "C" void hs_cuda_gelu_forward(const hs_backend *be, float *y, const float *x, size_t n) {
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), gelu_forward_kernel<float>)(y, x, n);
  HS_CUDA_LAUNCHED("gelu_forward_kernel", 2 * n * sizeof(float));
}

extern "C" void hs_cuda_bias_gelu_forward(const hs_backend *be, float *y, float *x, const float *bias, int rows,
                                          int cols) {
  if (rows <= 0 || cols <= 0) return;
  const size_t n = (size_t)rows * (size_t)cols;
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), bias_gelu_forward_kernel<float>)(y, x, bias, n,
                                                                                               (size_t)cols);
  HS_CUDA_LAUNCHED("bias_gelu_forward_kernel", (3 * n + (size_t)cols) * sizeof(float)); /* x read + written, y, bias */
}

extern "C" void hs_cuda_gelu_backward(const hs_backend *be, float *dx, const float *dy, const float *x, size_t n) {
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), gelu_backward_kernel<float>)(dx, dy, x, n);
  HS_CUDA_LAUNCHED("gelu_backward_kernel", 3 * n * sizeof(float));
}

extern "C" void hs_cuda_tanh_forward(const hs_backend *be, float *y, const float *x, size_t n) {
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), tanh_forward_kernel<float>)(y, x, n);
  HS_CUDA_LAUNCHED("tanh_forward_kernel", 2 * n * sizeof(float));
}

extern "C" void hs_cuda_tanh_backward(const hs_backend *be, float *dx, const float *dy, const float *y, size_t n) {
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), tanh_backward_kernel<float>)(dx, dy, y, n);
  HS_CUDA_LAUNCHED("tanh_backward_kernel", 3 * n * sizeof(float));
}
