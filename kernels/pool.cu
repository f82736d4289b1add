/* Max pooling k×k with stride k on the CUDA backend: x[n,c,h,w] -> y[n,c,h/k,w/k] and argmax[n,c,h/k,w/k]
 * (the flat index of the winner within its h·w plane), and the backward routing dy to the winners.
 *
 * Same rules as the CPU (src/backend/cpu/cpu_conv.c): the window is scanned in row-major order and the
 * first maximum wins (PyTorch's tie rule); a NaN wins over a number (PyTorch propagates NaN). Rows and
 * columns beyond the last full window (h or w not a multiple of k) belong to no window: their dx is 0.
 *
 * Backward without atomics: with stride == kernel size the windows do not overlap, so each dx element
 * has at most one source (the window containing it, if its argmax points there). One thread per dx
 * element GATHERS from that window instead of scattering, so every element is written exactly once and
 * the zero-fill is the same pass. */
#include "hs_cuda.h"
#include "hs_launch.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"

namespace {

/* v replaces the current best: strictly greater, or a NaN over a number (cpu_conv.c's window_wins) */
__device__ __forceinline__ bool window_wins(float v, float best) { return v > best || (v != v && best == best); }

/* One thread per output element (plane, oy, ox): y = max of its k×k window, argmax = flat index in the
 * plane of the first maximum. */
template <class T>
__global__ void maxpool2d_forward_kernel(T *y, int32_t *argmax, const T *x, size_t outputs, int h, int w, int k) {
  const int oh = h / k, ow = w / k;
  const size_t plane_out = (size_t)oh * (size_t)ow;
  for (size_t o = (size_t)blockIdx.x * blockDim.x + threadIdx.x; o < outputs; o += (size_t)gridDim.x * blockDim.x) {
    const size_t pl = o / plane_out;
    const int q = (int)(o % plane_out), oy = q / ow, ox = q % ow;
    const T *xp = x + pl * (size_t)h * (size_t)w;
    int best = oy * k * w + ox * k;
    float best_v = (float)xp[best];
    for (int i = 0; i < k; i++)
      for (int j = 0; j < k; j++) {
        const int idx = (oy * k + i) * w + ox * k + j;
        const float v = (float)xp[idx];
        if (window_wins(v, best_v)) best_v = v, best = idx;
      }
    y[o] = (T)best_v;
    argmax[o] = best;
  }
}

/* One thread per input element (plane, yy, xx): dx = dy of its window if the window's argmax is this
 * element, else 0. (0 + dy, not dy: the CPU adds into a zeroed plane, which turns -0 into +0.) */
template <class T>
__global__ void maxpool2d_backward_kernel(T *dx, const T *dy, const int32_t *argmax, size_t inputs, int h, int w,
                                          int k) {
  const int oh = h / k, ow = w / k;
  const size_t plane_in = (size_t)h * (size_t)w, plane_out = (size_t)oh * (size_t)ow;
  for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < inputs; e += (size_t)gridDim.x * blockDim.x) {
    const size_t pl = e / plane_in;
    const int pos = (int)(e % plane_in), yy = pos / w, xx = pos % w, oy = yy / k, ox = xx / k;
    float g = 0.0f;
    if (oy < oh && ox < ow) {
      const size_t o = pl * plane_out + (size_t)oy * (size_t)ow + (size_t)ox;
      if (argmax[o] == pos) g = 0.0f + (float)dy[o];
    }
    dx[e] = (T)g;
  }
}

} // namespace

/* ---- forward ------------------------------------------------------------------------------------------ */

extern "C" void hs_cuda_maxpool2d_forward(const hs_backend *be, float *y, int32_t *argmax, const float *x, int n,
                                          int c, int h, int w, int k) {
  if (n <= 0 || c <= 0 || k <= 0 || h / k <= 0 || w / k <= 0) return;
  const size_t outputs = (size_t)n * (size_t)c * (size_t)(h / k) * (size_t)(w / k);
  HS_LAUNCH(hs_grid_for(outputs), HS_BLOCK, 0, hs_cuda_stream(be), maxpool2d_forward_kernel<float>)(
      y, argmax, x, outputs, h, w, k);
  /* x once (the windows do not overlap), y and argmax */
  HS_CUDA_LAUNCHED("maxpool2d_forward_kernel", outputs * ((size_t)k * (size_t)k * sizeof(float) + sizeof(float) + sizeof(int32_t)));
}

/* ---- backward ------------------------------------------------------------------------------------------ */

extern "C" void hs_cuda_maxpool2d_backward(const hs_backend *be, float *dx, const float *dy, const int32_t *argmax,
                                           int n, int c, int h, int w, int k) {
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || k <= 0) return;
  const size_t inputs = (size_t)n * (size_t)c * (size_t)h * (size_t)w;
  HS_LAUNCH(hs_grid_for(inputs), HS_BLOCK, 0, hs_cuda_stream(be), maxpool2d_backward_kernel<float>)(
      dx, dy, argmax, inputs, h, w, k);
  /* dx, and dy and argmax of each input's window */
  HS_CUDA_LAUNCHED("maxpool2d_backward_kernel", inputs * sizeof(float) + (inputs / ((size_t)k * (size_t)k)) * (sizeof(float) + sizeof(int32_t)));
}
