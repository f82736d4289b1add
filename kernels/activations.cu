/* Smooth activations of the CUDA backend (the family of src/backend/cpu/cpu_activations.c): exact-erf
 * GELU (alone, with the bias add fused in, and from a 16-bit pre-activation) and tanh. Every formula is
 * the kernels/math helper (math/gelu.h, math/activations.h) the CPU uses, so both devices compute the
 * same expression per element, except GELU under bf16/fp16 (its special-function-unit formulas, below);
 * nothing crosses elements, so the results depend on neither the grid nor the thread schedule.
 * Each kernel is one grid-stride loop; GELU's go by quads of four elements with vector loads and stores
 * (kernels/quads.cuh), tanh's element by element. An element is read and then written by the same
 * thread, so outputs may alias inputs wherever the contract allows. */
#include <math.h>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "math/activations.h"
#include "math/gelu.h"
#include "util/lowp.h"
#include "quads.cuh"

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


/* ---- GELU (exact erf form): forward, fused bias + forward, backward ------------------------------------ */
/* Each by quads (kernels/quads.cuh): a thread loads a quad's inputs, then computes, then stores, so an
 * output may alias an input of the same elements. */

/* GELU under bf16 and fp16 (SFU = true), where every value it makes feeds a 16-bit product or is stored in
 * 16 bits: math/gelu.h's Abramowitz & Stegun 7.1.26, erfc(a) = poly(t)·e^{-a²} with t = 1/(1 + p·a),
 * a = |x|/√2, but t and e^{-a²} from the special-function unit (hs_rcp_approx, hs_ex2_approx: 1 and 2 ulp)
 * and Φ assembled without cancellation,
 *   Φ(x) = 1 - ½·erfc(a)  (x >= 0),   ½·erfc(a)  (x < 0),
 *   gelu(x) = x·Φ(x),   gelu'(x) = Φ(x) + x·e^{-x²/2}/√(2π),
 * and no Maclaurin branch near 0 (it keeps erf's relative precision for tiny x; GELU takes Φ, whose
 * absolute error is what reaches it: 1.5e-7 from the formula, a few ulp from the two instructions, far
 * below 16-bit rounding, 2^-9 and 2^-12). About 16 instructions an element where the fp32 path's
 * division, exp and two polynomials take about 45, in passes that move 4 to 8 bytes an element.
 * SFU = false: math/gelu.h, the CPU backend's expressions (fp32, TF32). */
__device__ __forceinline__ void gelu_parts_sfu(float x, float &cdf, float &exp_neg_half_x2) {
  const float a = fabsf(x) * HS_INV_SQRT2;
  const float poly = hs_as7126_poly(hs_rcp_approx(1.0f + HS_AS7126_P * a));
  const float e = hs_ex2_approx(-(a * a) * 1.44269504088896341f); /* e^{-a²} = e^{-x²/2} */
  const float half_erfc = 0.5f * poly * e;
  cdf = x >= 0.0f ? 1.0f - half_erfc : half_erfc;
  exp_neg_half_x2 = e;
}

template <bool SFU> __device__ __forceinline__ float gelu_of(float x) {
  if (!SFU) return hs_gelu(x);
  float cdf, e;
  gelu_parts_sfu(x, cdf, e);
  return x * cdf;
}

/* dy · gelu'(x) */
template <bool SFU> __device__ __forceinline__ float gelu_grad_of(float dy, float x) {
  if (!SFU) return hs_gelu_grad(dy, x);
  float cdf, e;
  gelu_parts_sfu(x, cdf, e);
  return dy * (cdf + x * HS_INV_SQRT_2PI * e);
}

/* y = 0.5·x·(1 + erf(x/√2)) */
template <bool SFU> __global__ void gelu_forward_kernel(float *y, const float *x, size_t n, bool vec) {
  for (size_t i = quad_first(); i < n; i += quad_stride()) {
    const int m = quad_len(i, n);
    const bool v = vec && m == HS_VEC;
    float e[HS_VEC];
    load4(e, x, i, m, v);
    for (int j = 0; j < HS_VEC; j++) e[j] = gelu_of<SFU>(e[j]);
    store4(y, i, e, m, v);
  }
}

/* x[rows,cols] += bias[cols] (kept: it is the pre-activation the backward needs), y = gelu(x); one pass.
 * With x16 the pre-activation goes into x16 only (rounded) and x stays as it was; without y (y16 then
 * given) the output goes into y16 only. */
template <bool SFU> __global__ void bias_gelu_forward_kernel(float *y, float *x, const float *bias, size_t n, size_t cols, half_out x16,
                                         half_out y16, bool vec) {
  for (size_t i = quad_first(); i < n; i += quad_stride()) {
    const int m = quad_len(i, n);
    const bool v = vec && m == HS_VEC;
    float u[HS_VEC], g[HS_VEC];
    load4(u, x, i, m, v);
    size_t c = i % cols; /* one division per quad; the quad's columns follow, wrapping at cols */
    for (int j = 0; j < HS_VEC; j++) {
      if (j < m) u[j] += bias[c];
      g[j] = gelu_of<SFU>(u[j]);
      if (++c == cols) c = 0;
    }
    if (!x16.p) store4(x, i, u, m, v);
    if (y) store4(y, i, g, m, v);
    if (x16.p) store4_half(x16.p, i, u, m, v, x16.bf16);
    if (y16.p) store4_half(y16.p, i, g, m, v, y16.bf16);
  }
}

/* y = gelu(x) of a pre-activation that exists in 16 bits only (x16 widened, exact); y and/or its rounding */
template <bool SFU> __global__ void gelu_forward_half_kernel(float *y, const uint16_t *x16, int x16_bf16, size_t n, half_out y16,
                                         bool vec) {
  for (size_t i = quad_first(); i < n; i += quad_stride()) {
    const int m = quad_len(i, n);
    const bool v = vec && m == HS_VEC;
    float g[HS_VEC];
    load4_half(g, x16, i, m, v, x16_bf16);
    for (int j = 0; j < HS_VEC; j++) g[j] = gelu_of<SFU>(g[j]);
    if (y) store4(y, i, g, m, v);
    if (y16.p) store4_half(y16.p, i, g, m, v, y16.bf16);
  }
}

/* dx = dy·gelu'(x) = dy·(Φ(x) + x·φ(x)) from the pre-activation x, or from its 16-bit copy x16 (x NULL:
 * widened here, exact); dy from dy16 (widened, exact) where dy exists in 16 bits only (dy NULL then); dx
 * may alias dy, and dx16 dy16; dx may be NULL (dx16 alone). y, y16: NULL, or gelu(x) recomputed (the
 * forward's output, for a model that did not keep it) and its rounding */
template <bool SFU> __global__ void gelu_backward_kernel(float *dx, const float *dy, const uint16_t *dy16, const float *x,
                                     const uint16_t *x16, int bf16, size_t n, half_out dx16, float *y, half_out y16,
                                     bool vec) {
  for (size_t i = quad_first(); i < n; i += quad_stride()) {
    const int m = quad_len(i, n);
    const bool v = vec && m == HS_VEC;
    float u[HS_VEC], g_out[HS_VEC], d[HS_VEC];
    if (x) load4(u, x, i, m, v);
    else load4_half(u, x16, i, m, v, bf16);
    if (dy16) load4_half(g_out, dy16, i, m, v, bf16);
    else load4(g_out, dy, i, m, v);
    if (y || y16.p) {
      float g[HS_VEC];
      for (int j = 0; j < HS_VEC; j++) g[j] = gelu_of<SFU>(u[j]);
      if (y) store4(y, i, g, m, v);
      if (y16.p) store4_half(y16.p, i, g, m, v, y16.bf16);
    }
    for (int j = 0; j < HS_VEC; j++) d[j] = gelu_grad_of<SFU>(g_out[j], u[j]);
    if (dx) store4(dx, i, d, m, v);
    if (dx16.p) store4_half(dx16.p, i, d, m, v, dx16.bf16);
  }
}

/* ---- tanh ---------------------------------------------------------------------------------------------- */

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

/* The GELU kernel of the precision: the special-function-unit formulas under bf16 and fp16 (above) */
template <class K> static K gelu_kernel_for(const hs_backend *be, K sfu, K exact) {
  return hs_precision_is_16bit(be->precision) ? sfu : exact;
}

extern "C" void hs_cuda_gelu_forward(const hs_backend *be, float *y, const float *x, size_t n) {
  HS_LAUNCH(hs_grid_for_quads(n), HS_BLOCK, 0, hs_cuda_stream(be), gelu_kernel_for(be, gelu_forward_kernel<true>, gelu_forward_kernel<false>))(y, x, n,
                                                                                     hs_quads_aligned({y, x}));
  HS_CUDA_LAUNCHED("gelu_forward_kernel", 2 * n * sizeof(float));
}

extern "C" void hs_cuda_bias_gelu_forward(const hs_backend *be, float *y, float *x, const float *bias, int rows,
                                          int cols, uint16_t *x16, uint16_t *y16) {
  hs_output_check("bias_gelu_forward: y or y16", y, y16);
  if (rows <= 0 || cols <= 0) return;
  const size_t n = (size_t)rows * (size_t)cols;
  const int bf16 = be->precision == HS_PRECISION_BF16;
  HS_LAUNCH(hs_grid_for_quads(n), HS_BLOCK, 0, hs_cuda_stream(be), gelu_kernel_for(be, bias_gelu_forward_kernel<true>, bias_gelu_forward_kernel<false>))(
      y, x, bias, n, (size_t)cols, half_out{x16, bf16}, half_out{y16, bf16}, hs_quads_aligned({y, x}, {x16, y16}));
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
  HS_LAUNCH(hs_grid_for_quads(n), HS_BLOCK, 0, hs_cuda_stream(be), gelu_kernel_for(be, gelu_forward_half_kernel<true>, gelu_forward_half_kernel<false>))(
      y, x16, bf16, n, half_out{y16, bf16}, hs_quads_aligned({y}, {x16, y16}));
  /* x16 read, y and y16 written */
  HS_CUDA_LAUNCHED("gelu_forward_half_kernel", (y ? n : 0) * sizeof(float) + ((y16 ? n : 0) + n) * sizeof(uint16_t));
}

extern "C" void hs_cuda_gelu_backward(const hs_backend *be, float *dx, const float *dy, const float *x,
                                      const uint16_t *x16, size_t n, uint16_t *dx16, float *y, uint16_t *y16) {
  hs_gelu_backward_check(be, dx, dx16, x, x16);
  const int bf16 = be->precision == HS_PRECISION_BF16;
  /* dy exists only in 16 bits where the model bound it so (bind_half_only): read from its twin */
  const uint16_t *dy16 = hs_cuda_twin_only16(dy, n);
  HS_LAUNCH(hs_grid_for_quads(n), HS_BLOCK, 0, hs_cuda_stream(be), gelu_kernel_for(be, gelu_backward_kernel<true>, gelu_backward_kernel<false>))(
      dx, dy16 ? nullptr : dy, dy16, x, x16, bf16, n, half_out{dx16, bf16}, y, half_out{y16, bf16},
      hs_quads_aligned({dx, dy16 ? nullptr : dy, x, y}, {dy16, x16, dx16, y16}));
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
