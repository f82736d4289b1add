/* Bias passes of the CUDA backend: y += bias over rows (plain or a column slice of a wider matrix) and
 * the bias gradients dbias += Σ_r dy[r,:].
 *
 * The gradients are deterministic and give the CPU's bits (src/backend/cpu/cpu_gemm.c, cpu_rows.c): a
 * column is summed in double, and the sum is rounded to float once before it is added to dbias. A block
 * owns BIAS_COLS = 32 consecutive columns (one per lane, so a warp reads 32 consecutive floats of a
 * row) and BIAS_SLICES = HS_BLOCK/32 row slices: slice s sums rows s, s+BIAS_SLICES, ... in row order,
 * then one thread adds the slices' partial sums in slice order. The order of every addition is fixed
 * by (rows, cols) alone — no float atomics, nothing depends on the grid size or the thread schedule.
 * (The double sums differ from the CPU's row-order double sum only far below float precision, so after
 * the rounding to float the bits agree unless the two straddle a float rounding boundary.) */
#include "hs_cuda.h"
#include "hs_launch.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"

namespace {

constexpr int BIAS_COLS = 32;                      /* columns per block: one per lane */
constexpr int BIAS_SLICES = HS_BLOCK / BIAS_COLS;  /* row slices per block */

/* y[r, c] += bias[c] for r < rows, c < cols, rows ldy apart (ldy = cols: a plain [rows,cols] matrix).
 * Element-wise: each element is read and written by one thread. */
template <class T> __global__ void add_bias_kernel(T *y, int ldy, const T *bias, int rows, int cols) {
  const size_t n = (size_t)rows * (size_t)cols;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const size_t r = i / (size_t)cols, c = i % (size_t)cols;
    T *yp = y + r * (size_t)ldy + c;
    *yp = (T)((float)*yp + (float)bias[c]);
  }
}

/* dbias[c] += (float)Σ_r dy[r, c] (double sum), rows ldy apart. Block (32 lanes x BIAS_SLICES slices)
 * per tile of 32 columns; tiles grid-strided. */
template <class T> __global__ void bias_grad_kernel(T *dbias, const T *dy, int ldy, int rows, int cols) {
  HS_SHARED(double[BIAS_SLICES][BIAS_COLS], partial);
  const int lane = threadIdx.x % BIAS_COLS, slice = threadIdx.x / BIAS_COLS;
  const int tiles = (cols + BIAS_COLS - 1) / BIAS_COLS;
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) { /* uniform across the block */
    const int c = tile * BIAS_COLS + lane;
    double acc = 0.0;
    if (c < cols)
      for (int r = slice; r < rows; r += BIAS_SLICES) acc += (double)dy[(size_t)r * (size_t)ldy + (size_t)c];
    partial[slice][lane] = acc;
    __syncthreads();
    if (slice == 0 && c < cols) {
      double sum = partial[0][lane];
      for (int s = 1; s < BIAS_SLICES; s++) sum += partial[s][lane];
      dbias[c] = (T)((float)dbias[c] + (float)sum);
    }
    __syncthreads(); /* partial is rewritten by the next tile */
  }
}

template <class T> void launch_add_bias(const hs_backend *be, T *y, int ldy, const T *bias, int rows, int cols) {
  if (rows <= 0 || cols <= 0) return;
  const size_t n = (size_t)rows * (size_t)cols;
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, hs_cuda_stream(be), add_bias_kernel<T>)(y, ldy, bias, rows, cols);
  HS_CUDA_LAUNCHED("add_bias_kernel", (2 * n + (size_t)cols) * sizeof(T)); /* y read + written, bias */
}

template <class T> void launch_bias_grad(const hs_backend *be, T *dbias, const T *dy, int ldy, int rows, int cols) {
  if (rows < 0 || cols <= 0) return; /* rows = 0 still adds 0.0f, as the CPU does */
  /* one block per tile of 32 columns: hs_grid_for counts HS_BLOCK-thread blocks for cols·BIAS_SLICES
   * threads, which is exactly ceil(cols / BIAS_COLS) (capped, the kernel strides over the rest) */
  const unsigned grid = hs_grid_for((size_t)cols * BIAS_SLICES);
  HS_LAUNCH(grid, HS_BLOCK, 0, hs_cuda_stream(be), bias_grad_kernel<T>)(dbias, dy, ldy, rows, cols);
  HS_CUDA_LAUNCHED("bias_grad_kernel", ((size_t)rows * (size_t)cols + 2 * (size_t)cols) * sizeof(T)); /* dy; dbias += */
}

} // namespace

/* ---- forward: y += bias ---------------------------------------------------------------------------- */

/* y[rows,cols] += bias[cols] */
extern "C" void hs_cuda_add_bias(const hs_backend *be, float *y, const float *bias, int rows, int cols) {
  launch_add_bias<float>(be, y, cols, bias, rows, cols);
}

/* y[r, 0:cols] += bias[cols], rows ldy apart (a column slice of a wider matrix) */
extern "C" void hs_cuda_add_bias_strided(const hs_backend *be, float *y, int ldy, const float *bias, int rows,
                                         int cols) {
  launch_add_bias<float>(be, y, ldy, bias, rows, cols);
}

/* ---- backward: dbias += Σ_r dy --------------------------------------------------------------------- */

/* dbias[cols] += Σ_r dy[r, cols] */
extern "C" void hs_cuda_bias_grad(const hs_backend *be, float *dbias, const float *dy, int rows, int cols) {
  launch_bias_grad<float>(be, dbias, dy, cols, rows, cols);
}

/* dbias[cols] += Σ_r dy[r, 0:cols], rows ldy apart */
extern "C" void hs_cuda_bias_grad_strided(const hs_backend *be, float *dbias, const float *dy, int ldy, int rows,
                                          int cols) {
  launch_bias_grad<float>(be, dbias, dy, ldy, rows, cols);
}
