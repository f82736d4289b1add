/* Element-wise ops of the CUDA backend: input conversion, ReLU and dropout (the smooth activations, GELU
 * and tanh: activations.cu; BERT's additive attention mask: attention.cu).
 *
 * Every formula is the kernels/math helper the CPU backend uses for the same op
 * (src/backend/cpu/cpu_elementwise.c), so both devices compute the
 * same expression per element; nothing crosses elements, so the results depend on neither the grid nor
 * the thread schedule. Each kernel is one grid-stride loop over a grid from hs_grid_for(n); an element
 * is read and then written by the same thread, so outputs may alias inputs wherever the contract allows. */
#include <math.h>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "math/activations.h"
#include "math/dropout.h"

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

/* ---- dropout: forward and backward are the same multiplication ---------------------------------------- */

/* out[batch, per_sample] = in · m, m = 1/(1-p) if hs_uniform(key, first_sample + sample, group index) >= p
 * else 0, one decision per `group` consecutive values of a sample. The mask is a pure function of
 * (key, global sample, group), so the backward pass redraws it (d(x·m)/dx = m) and every rank layout
 * draws the same mask for the same sample. */
template <class T>
__global__ void dropout_kernel(T *out, const T *in, size_t n, size_t per_sample, size_t group, float p,
                               float keep_scale, uint64_t key, int64_t first_sample) {
  GRID_STRIDE_LOOP(i, n) {
    const size_t sample = i / per_sample, g = (i % per_sample) / group;
    out[i] = (T)((float)in[i] * hs_dropout_factor(key, (uint64_t)(first_sample + (int64_t)sample), g, p, keep_scale));
  }
}

/* ---- dropout host side --------------------------------------------------------------------------------- */

template <class T>
void dropout_apply(const hs_backend *be, T *out, const T *in, int batch, size_t per_sample, size_t group, float p,
                   uint64_t key, int64_t first_sample) {
  const size_t n = (size_t)(batch > 0 ? batch : 0) * per_sample;
  cudaStream_t stream = hs_cuda_stream(be);
  if (p <= 0.0f) { /* identity, as on the CPU (p < 0 would otherwise scale by 1/(1-p)) */
    if (out != in && n) {
      HS_CUDA_CHECK(cudaMemcpyAsync(out, in, n * sizeof(T), cudaMemcpyDeviceToDevice, stream));
      HS_CUDA_COPY_OP("cudaMemcpyAsync device->device", 2 * n * sizeof(T));
    }
    return;
  }
  if (group == 0 || per_sample % group != 0)
    HS_FATAL(NULL, "dropout: group %zu does not divide the %zu values per sample", group, per_sample);
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, stream, dropout_kernel<T>)(out, in, n, per_sample, group, p,
                                                                    hs_dropout_keep_scale(p), key, first_sample);
  HS_CUDA_LAUNCHED("dropout_kernel", 2 * n * sizeof(T)); /* in, out (the mask is recomputed) */
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
  dropout_apply<float>(be, y, x, batch, per_sample, group, p, key, first_sample);
}

extern "C" void hs_cuda_dropout_backward(const hs_backend *be, float *dx, const float *dy, int batch,
                                         size_t per_sample, size_t group, float p, uint64_t key,
                                         int64_t first_sample) {
  dropout_apply<float>(be, dx, dy, batch, per_sample, group, p, key, first_sample);
}
