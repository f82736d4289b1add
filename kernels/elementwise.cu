/* Element-wise ops of the CUDA backend: input conversion, ReLU and dropout (the smooth activations, GELU
 * and tanh: activations.cu; BERT's additive attention mask: attention.cu).
 *
 * Every formula is the kernels/math helper the CPU backend uses for the same op
 * (src/backend/cpu/cpu_elementwise.c), so both devices compute the
 * same expression per element; nothing crosses elements, so the results depend on neither the grid nor
 * the thread schedule. Each kernel is one grid-stride loop; dropout and ReLU + dropout go by quads of
 * four elements with vector loads (kernels/quads.cuh). An element is read and then written by the same
 * thread, so outputs may alias inputs wherever the contract allows. */
#include <math.h>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "quads.cuh"
#include "math/activations.h"
#include "math/dropout.h"
#include "slots.cuh"
#include "util/lowp.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"

#define GRID_STRIDE_LOOP(i, n) \
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

namespace {

/* ---- input conversion ------------------------------------------------------------------------------- */

/* y[n] = (float)x[n]·scale + shift: image bytes to the normalised input */
template <class T> __global__ void u8_to_float_kernel(T *y, const uint8_t *x, size_t n, float scale, float shift) {
  GRID_STRIDE_LOOP(i, n) y[i] = (T)hs_u8_affine(x[i], scale, shift);
}

/* ---- ReLU: forward and backward ---------------------------------------------------------------------- */

/* y = max(x, 0) as a comparison (NaN propagates, as in PyTorch) */
template <class T> __global__ void relu_forward_kernel(T *y, const T *x, size_t n) {
  GRID_STRIDE_LOOP(i, n) y[i] = (T)hs_relu((float)x[i]);
}

/* dx = dy·1[y > 0] from the forward output y (y > 0 exactly where x > 0) */
template <class T> __global__ void relu_backward_kernel(T *dx, const T *dy, const T *y, size_t n) {
  GRID_STRIDE_LOOP(i, n) dx[i] = (T)hs_relu_grad((float)dy[i], (float)y[i]);
}

/* ---- dropout, and ReLU and dropout in one pass (Transformer-XL's FFN activation) ---------------------- */

/* f[j] = the dropout factor of element i + j of a [batch, per_sample] tensor (one decision per `group`
 * consecutive values of a sample): 1/(1-p) if hs_dropout_uniform(sample key of first_sample + sample, group
 * index) >= p, else 0. The mask is a pure function of (key, global sample, group), so the backward pass
 * redraws it (d(x·m)/dx = m) and every rank layout draws the same mask for the same sample. One division
 * finds the quad's first (sample, offset), the next three step on from it; the sample's key is made once
 * per quad, and again where the quad crosses into the next sample. */
__device__ __forceinline__ void quad_dropout_factors(float (&f)[HS_VEC], size_t i, size_t per_sample, size_t group,
                                                     hs_dropout_rate rate, uint64_t key, int64_t first_sample) {
  size_t sample = i / per_sample, rem = i - sample * per_sample;
  uint64_t sample_key = hs_dropout_sample_key(key, (uint64_t)(first_sample + (int64_t)sample));
  for (int j = 0; j < HS_VEC; j++, rem++) {
    if (rem == per_sample) {
      sample++, rem = 0;
      sample_key = hs_dropout_sample_key(key, (uint64_t)(first_sample + (int64_t)sample));
    }
    f[j] = hs_dropout_factor(sample_key, group == 1 ? rem : rem / group, rate);
  }
}

/* out[batch, per_sample] = in · m (forward and backward are the same multiplication), by quads
 * (kernels/quads.cuh) */
__global__ void dropout_kernel(float *out, const float *in, size_t n, size_t per_sample, size_t group,
                               hs_dropout_rate rate, uint64_t key, int64_t first_sample, const hs_dropout_slot *ds,
                               bool vec) {
  hs_dropout_slot_read(ds, key, first_sample);
  for (size_t i = quad_first(); i < n; i += quad_stride()) {
    const int m = quad_len(i, n);
    const bool v = vec && m == HS_VEC;
    float e[HS_VEC], f[HS_VEC];
    load4(e, in, i, m, v);
    quad_dropout_factors(f, i, per_sample, group, rate, key, first_sample);
    for (int j = 0; j < HS_VEC; j++) e[j] = e[j] * f[j];
    store4(out, i, e, m, v);
  }
}

/* BACKWARD = false: out = relu(in)·m; true: out = relu_grad(in·m, y). m as dropout_kernel's (1 when
 * p <= 0), the formulas of the two separate kernels in their order, so the same bits; o16 = round(out)
 * if set (out NULL: o16 alone). */
template <bool BACKWARD>
__global__ void relu_dropout_kernel(float *out, const float *in, const float *y, size_t n, size_t per_sample, float p,
                                    hs_dropout_rate rate, uint64_t key, int64_t first_sample, const hs_dropout_slot *ds,
                                    uint16_t *o16, int bf16, bool vec) {
  hs_dropout_slot_read(ds, key, first_sample);
  for (size_t i = quad_first(); i < n; i += quad_stride()) {
    const int m = quad_len(i, n);
    const bool v = vec && m == HS_VEC;
    float e[HS_VEC], ys[HS_VEC], f[HS_VEC];
    load4(e, in, i, m, v);
    if (BACKWARD) load4(ys, y, i, m, v);
    if (p > 0.0f) quad_dropout_factors(f, i, per_sample, 1, rate, key, first_sample);
    for (int j = 0; j < HS_VEC; j++) {
      float x = e[j];
      if (!BACKWARD) x = hs_relu(x);
      if (p > 0.0f) x = x * f[j];
      if (BACKWARD) x = hs_relu_grad(x, ys[j]);
      e[j] = x;
    }
    if (out) store4(out, i, e, m, v);
    if (o16) store4_half(o16, i, e, m, v, bf16);
  }
}

/* ---- dropout host side --------------------------------------------------------------------------------- */

void dropout_apply(const hs_backend *be, float *out, const float *in, int batch, size_t per_sample, size_t group, float p,
                   uint64_t key, int64_t first_sample) {
  const size_t n = (size_t)(batch > 0 ? batch : 0) * per_sample;
  cudaStream_t stream = hs_cuda_stream(be);
  if (p <= 0.0f) { /* identity, as on the CPU (p < 0 would otherwise scale by 1/(1-p)) */
    if (hs_cuda_slots_only(be)) return;
    if (out != in && n) {
      HS_CUDA_CHECK(cudaMemcpyAsync(out, in, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
      HS_CUDA_COPY_OP("cudaMemcpyAsync device->device", 2 * n * sizeof(float));
    }
    return;
  }
  if (group == 0 || per_sample % group != 0)
    HS_FATAL(NULL, "dropout: group %zu does not divide the %zu values per sample", group, per_sample);
  const hs_dropout_slot *ds = hs_cuda_dropout_slot(be, key, first_sample);
  if (hs_cuda_slots_only(be)) return; /* recorded: the slots only (cuda_slots.h) */
  HS_LAUNCH(hs_grid_for_quads(n), HS_BLOCK, 0, stream, dropout_kernel)(out, in, n, per_sample, group,
                                                                        hs_dropout_rate_of(p), key, first_sample, ds,
                                                                        hs_quads_aligned({out, in}));
  HS_CUDA_LAUNCHED("dropout_kernel", 2 * n * sizeof(float)); /* in, out (the mask is recomputed) */
}

} // namespace

/* ---- the seam's ops -------------------------------------------------------------------------------------- */

extern "C" void hs_cuda_u8_to_float(const hs_backend *be, float *y, const uint8_t *x, size_t n, float scale,
                                    float shift) {
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), u8_to_float_kernel<float>)(y, x, n, scale, shift);
  HS_CUDA_LAUNCHED("u8_to_float_kernel", n * (1 + sizeof(float)));
}

extern "C" void hs_cuda_relu_forward(const hs_backend *be, float *y, const float *x, size_t n) {
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), relu_forward_kernel<float>)(y, x, n);
  HS_CUDA_LAUNCHED("relu_forward_kernel", 2 * n * sizeof(float));
}

extern "C" void hs_cuda_relu_backward(const hs_backend *be, float *dx, const float *dy, const float *y, size_t n) {
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), relu_backward_kernel<float>)(dx, dy, y, n);
  HS_CUDA_LAUNCHED("relu_backward_kernel", 3 * n * sizeof(float));
}

extern "C" void hs_cuda_dropout_forward(const hs_backend *be, float *y, const float *x, int batch, size_t per_sample,
                                        size_t group, float p, uint64_t key, int64_t first_sample) {
  dropout_apply(be, y, x, batch, per_sample, group, p, key, first_sample);
}

extern "C" void hs_cuda_dropout_backward(const hs_backend *be, float *dx, const float *dy, int batch,
                                         size_t per_sample, size_t group, float p, uint64_t key,
                                         int64_t first_sample) {
  dropout_apply(be, dx, dy, batch, per_sample, group, p, key, first_sample);
}

template <bool BACKWARD>
static void relu_dropout(const hs_backend *be, float *out, const float *in, const float *y, int batch,
                         size_t per_sample, float p, uint64_t key, int64_t first_sample, uint16_t *o16) {
  hs_output_check(BACKWARD ? "relu_dropout_backward: dx or dx16" : "relu_dropout_forward: y or y16", out, o16);
  const size_t n = (size_t)(batch > 0 ? batch : 0) * per_sample;
  if (n == 0) return;
  const int bf16 = be->precision == HS_PRECISION_BF16;
  const hs_dropout_slot *ds = p > 0.0f ? hs_cuda_dropout_slot(be, key, first_sample) : nullptr;
  if (hs_cuda_slots_only(be)) return; /* recorded: the slots only (cuda_slots.h) */
  HS_LAUNCH(hs_grid_for_quads(n), HS_BLOCK, 0, hs_cuda_stream(be), relu_dropout_kernel<BACKWARD>)(
      out, in, y, n, per_sample, p, hs_dropout_rate_of(p), key, first_sample, ds, o16, bf16,
      hs_quads_aligned({out, in, y}, {o16}));
  /* in, out (and y backward; the mask is recomputed), the 16-bit output */
  const size_t bytes = ((BACKWARD ? 2 : 1) + (out ? 1 : 0)) * n * sizeof(float) + (o16 ? n * sizeof(uint16_t) : 0);
  if (BACKWARD)
    HS_CUDA_LAUNCHED("relu_dropout_backward_kernel", bytes);
  else
    HS_CUDA_LAUNCHED("relu_dropout_forward_kernel", bytes);
}

extern "C" void hs_cuda_relu_dropout_forward(const hs_backend *be, float *y, const float *x, int batch,
                                             size_t per_sample, float p, uint64_t key, int64_t first_sample,
                                             uint16_t *y16) {
  relu_dropout<false>(be, y, x, nullptr, batch, per_sample, p, key, first_sample, y16);
}

extern "C" void hs_cuda_relu_dropout_backward(const hs_backend *be, float *dx, const float *dy, const float *y,
                                              int batch, size_t per_sample, float p, uint64_t key,
                                              int64_t first_sample, uint16_t *dx16) {
  relu_dropout<true>(be, dx, dy, y, batch, per_sample, p, key, first_sample, dx16);
}
