/* Row gathers and scatter-adds on the CUDA backend (embedding lookups, the pooler's first token, masked
 * positions) — src/backend/cpu/cpu_rows.c on the CPU.
 *
 *   gather_rows       y[i, :] (+)= x[index[i], :]          forward of a lookup
 *   scatter_add_rows  dx[index[i], :] += dy[i, :], i in order   its backward
 *
 * The scatter-add is deterministic for repeated indices without atomics and without a sort: one thread
 * owns a column and walks i = 0..count-1 in order, so the float additions into each dx element happen
 * in exactly the CPU's order (the same bits). The threads of a warp own consecutive columns, so each
 * step reads one contiguous piece of a dy row and updates one of a dx row. Parallelism is `cols`
 * threads (768 for BERT-base): enough for the embedding tables, whose gradient this is. */
#include "hs_cuda.h"
#include "hs_launch.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"

namespace {

/* ---- forward: gather -------------------------------------------------------------------------------- */

/* y[count,cols] = x[index[i], :] (ACCUMULATE: +=); x[x_rows,cols]; each index in [0, x_rows) (checked
 * while the batch was staged). Element-wise over y. */
template <class T, bool ACCUMULATE>
__global__ void gather_rows_kernel(T *y, const T *x, const int32_t *index, size_t n, size_t cols) {
  for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
    const size_t i = e / cols, c = e % cols;
    const T v = x[(size_t)index[i] * cols + c];
    y[e] = ACCUMULATE ? (T)((float)y[e] + (float)v) : v;
  }
}

/* ---- backward: deterministic scatter-add ------------------------------------------------------------ */

/* dx[dx_rows,cols]: dx[index[i], c] += dy[i, c] for i = 0..count-1 in order, one thread per column c */
template <class T>
__global__ void scatter_add_rows_kernel(T *dx, const T *dy, const int32_t *index, int count, size_t cols) {
  for (size_t c = (size_t)blockIdx.x * blockDim.x + threadIdx.x; c < cols; c += (size_t)gridDim.x * blockDim.x)
    for (int i = 0; i < count; i++) {
      T *d = dx + (size_t)index[i] * cols + c;
      *d = (T)((float)*d + (float)dy[(size_t)i * cols + c]);
    }
}

} // namespace

extern "C" void hs_cuda_gather_rows(const hs_backend *be, float *y, const float *x, const int32_t *index, int count,
                                    int cols, int x_rows, int accumulate) {
  (void)x_rows; /* every index is in [0, x_rows): checked while the batch is staged */
  if (count <= 0 || cols <= 0) return;
  const size_t n = (size_t)count * (size_t)cols;
  cudaStream_t stream = hs_cuda_stream(be);
  if (accumulate)
    HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, stream, gather_rows_kernel<float, true>)(y, x, index, n, (size_t)cols);
  else
    HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, stream, gather_rows_kernel<float, false>)(y, x, index, n, (size_t)cols);
  /* index, the gathered rows of x, y written (and read when accumulating) */
  HS_CUDA_LAUNCHED("gather_rows_kernel", (size_t)count * sizeof(int32_t) + (accumulate ? 3 : 2) * n * sizeof(float));
}

extern "C" void hs_cuda_scatter_add_rows(const hs_backend *be, float *dx, const float *dy, const int32_t *index,
                                         int count, int cols, int dx_rows) {
  (void)dx_rows; /* every index is in [0, dx_rows): checked while the batch is staged */
  if (count <= 0 || cols <= 0) return;
  HS_LAUNCH(hs_grid_for((size_t)cols), HS_BLOCK, 0, hs_cuda_stream(be), scatter_add_rows_kernel<float>)(
      dx, dy, index, count, (size_t)cols);
  /* index, dy, and the indexed rows of dx read and written */
  HS_CUDA_LAUNCHED("scatter_add_rows_kernel", (size_t)count * (sizeof(int32_t) + 3 * (size_t)cols * sizeof(float)));
}
