/* Smooth activations of the CUDA backend (the family of src/backend/cpu/cpu_activations.c): exact-erf
 * GELU (alone, with the bias add fused in, and from a 16-bit pre-activation) and tanh. Every formula is the kernels/math helper
 * (math/gelu.h, math/activations.h) the CPU uses, so both devices compute the same expression per
 * element; nothing crosses elements, so the results depend on neither the grid nor the thread schedule.
 * Each kernel is one grid-stride loop over a grid from hs_grid_for(n); an element is read and then
 * written by the same thread, so outputs may alias inputs wherever the contract allows. */
#include <math.h>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "math/activations.h"
#include "math/gelu.h"
#include "util/lowp.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_ops.h"

#define GRID_STRIDE_LOOP(i, n) \
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

namespace {

/* An optional 16-bit output (the seam's x16 / y16 / dx16): p[i] = to_half's rounding (src/util/lowp.h) of
 * the fp32 value written at i; p == NULL: none. */
struct half_out {
  uint16_t *p;
  int bf16; /* 1: bfloat16, 0: IEEE half */
};

__device__ __forceinline__ void put_half(const half_out &o, size_t i, float v) {
  if (o.p) o.p[i] = o.bf16 ? hs_bf16_bits(v) : hs_fp16_bits(v);
}

/* ---- GELU (exact erf form): forward, fused bias + forward, backward ------------------------------------ */

/* y = 0.5·x·(1 + erf(x/√2)) */
template <class T> __global__ void gelu_forward_kernel(T *y, const T *x, size_t n) {
  GRID_STRIDE_LOOP(i, n) y[i] = (T)hs_gelu((float)x[i]);
}

/* x[rows,cols] += bias[cols] (kept: it is the pre-activation the backward needs), y = gelu(x); one pass.
 * With x16 the pre-activation goes into x16 only (rounded) and x stays as it was; without y (y16 then
 * given) the output goes into y16 only. */
template <class T>
__global__ void bias_gelu_forward_kernel(T *y, T *x, const T *bias, size_t n, size_t cols, half_out x16,
                                         half_out y16) {
  GRID_STRIDE_LOOP(i, n) {
    const float u = (float)x[i] + (float)bias[i % cols];
    if (!x16.p) x[i] = (T)u;
    const T g = (T)hs_gelu(u);
    if (y) y[i] = g;
    put_half(x16, i, (float)(T)u);
    put_half(y16, i, (float)g);
  }
}

/* y = gelu(x) of a pre-activation that exists in 16 bits only (x16 widened, exact); y and/or its rounding */
__global__ void gelu_forward_half_kernel(float *y, const uint16_t *x16, int x16_bf16, size_t n, half_out y16) {
  GRID_STRIDE_LOOP(i, n) {
    const float g = hs_gelu(x16_bf16 ? hs_bf16_to_float(x16[i]) : hs_fp16_to_float(x16[i]));
    if (y) y[i] = g;
    put_half(y16, i, g);
  }
}

/* dx = dy·gelu'(x) = dy·(Φ(x) + x·φ(x)) from the pre-activation x, or from its 16-bit copy x16 (x NULL:
 * widened here, exact); dy from dy16 (widened, exact) where dy exists in 16 bits only (dy NULL then); dx
 * may alias dy, and dx16 dy16; dx may be NULL (dx16 alone). y, y16: NULL, or gelu(x) recomputed (the
 * forward's output, for a model that did not keep it) and its rounding */
template <class T>
__global__ void gelu_backward_kernel(T *dx, const T *dy, const uint16_t *dy16, const T *x, const uint16_t *x16,
                                     int bf16, size_t n, half_out dx16, T *y, half_out y16) {
  GRID_STRIDE_LOOP(i, n) {
    const float u = x ? (float)x[i] : bf16 ? hs_bf16_to_float(x16[i]) : hs_fp16_to_float(x16[i]);
    const float g_out = dy16 ? (bf16 ? hs_bf16_to_float(dy16[i]) : hs_fp16_to_float(dy16[i])) : (float)dy[i];
    if (y || y16.p) {
      const T g = (T)hs_gelu(u);
      if (y) y[i] = g;
      put_half(y16, i, (float)g);
    }
    const T d = (T)hs_gelu_grad(g_out, u);
    if (dx) dx[i] = d;
    put_half(dx16, i, (float)d);
  }
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
                                          int cols, uint16_t *x16, uint16_t *y16) {
  hs_output_check("bias_gelu_forward: y or y16", y, y16);
  if (rows <= 0 || cols <= 0) return;
  const size_t n = (size_t)rows * (size_t)cols;
  const int bf16 = be->precision == HS_PRECISION_BF16;
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), bias_gelu_forward_kernel<float>)(
      y, x, bias, n, (size_t)cols, half_out{x16, bf16}, half_out{y16, bf16});
  /* x read (and written without x16), y, bias, the 16-bit outputs */
  HS_CUDA_LAUNCHED("bias_gelu_forward_kernel", ((x16 ? 1 : 2) * n + (y ? n : 0) + (size_t)cols) * sizeof(float) +
                                                   ((x16 ? n : 0) + (y16 ? n : 0)) * sizeof(uint16_t));
}

extern "C" void hs_cuda_gelu_forward_half(const hs_backend *be, float *y, const uint16_t *x16, size_t n,
                                          uint16_t *y16) {
  hs_half_precision_check(be, "gelu_forward_half");
  hs_output_check("gelu_forward_half: y or y16", y, y16);
  if (n == 0) return;
  const int bf16 = be->precision == HS_PRECISION_BF16;
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), gelu_forward_half_kernel)(y, x16, bf16, n,
                                                                                      half_out{y16, bf16});
  /* x16 read, y and y16 written */
  HS_CUDA_LAUNCHED("gelu_forward_half_kernel", (y ? n : 0) * sizeof(float) + ((y16 ? n : 0) + n) * sizeof(uint16_t));
}

extern "C" void hs_cuda_gelu_backward(const hs_backend *be, float *dx, const float *dy, const float *x,
                                      const uint16_t *x16, size_t n, uint16_t *dx16, float *y, uint16_t *y16) {
  hs_gelu_backward_check(be, dx, dx16, x, x16);
  const int bf16 = be->precision == HS_PRECISION_BF16;
  /* dy exists only in 16 bits where the model bound it so (bind_half_only): read from its twin */
  const uint16_t *dy16 = hs_cuda_twin_only16(dy, n);
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), gelu_backward_kernel<float>)(
      dx, dy16 ? nullptr : dy, dy16, x, x16, bf16, n, half_out{dx16, bf16}, y, half_out{y16, bf16});
  /* dy read in fp32 or 16 bits, dx written, x read in fp32 or 16 bits, y and the 16-bit outputs written */
  HS_CUDA_LAUNCHED("gelu_backward_kernel",
                   ((dy16 ? 0 : n) + (dx ? n : 0) + (x ? n : 0) + (y ? n : 0)) * sizeof(float) +
                       ((dy16 ? n : 0) + (x16 ? n : 0) + (dx16 ? n : 0) + (y16 ? n : 0)) * sizeof(uint16_t));
}

extern "C" void hs_cuda_tanh_forward(const hs_backend *be, float *y, const float *x, size_t n) {
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), tanh_forward_kernel<float>)(y, x, n);
  HS_CUDA_LAUNCHED("tanh_forward_kernel", 2 * n * sizeof(float));
}

extern "C" void hs_cuda_tanh_backward(const hs_backend *be, float *dx, const float *dy, const float *y, size_t n) {
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), tanh_backward_kernel<float>)(dx, dy, y, n);
  HS_CUDA_LAUNCHED("tanh_backward_kernel", 3 * n * sizeof(float));
}
