/* Losses of the CUDA backend: log-softmax + NLL (the CNN head) and softmax + cross-entropy (BERT's MLM
 * and NSP heads). The CPU references are src/backend/cpu/cpu_loss.c and cpu_softmax_xent.c; the row
 * formulas are kernels/math/softmax_nll.h and the CPU's softmax_xent_row:
 *
 *   log_softmax_nll  m = max x,  log_norm = m + log Σ exp(x - m)   (exponentials and sum in double)
 *                    logprob = x - log_norm,  NLL = log_norm - x_label;  dlogit = scale·(e^logprob - 1[c = label])
 *   softmax_xent     m = max x,  e = hs_exp_fast(x - m) (float),  S = Σ e (double),  p = e·(float)(1/S)
 *                    NLL = m + log S - x_label (double);  dlogit = scale·p - scale·1[c = label]
 *                    (rows with label < 0 are ignored: no statistics, zero gradient)
 *   argmax = the first index holding the maximum (torch.argmax's rule, as the CPU).
 *
 * Forward: one warp per row, or for rows of at least HS_WIDE_ROW_COLS columns one block per row
 * (row_group): BERT's MLM head has 1280 rows of 30522 columns, and Transformer-XL's tail clusters a few
 * hundred rows of up to 160 000, and a warp each would leave a GPU a few warps per SM to stream them.
 * Thread t of a row's group owns columns t, t+size, ...: it alone reads and writes them, so probs may
 * alias logits, and the thread owning the label column (label % size) reads x_label before it
 * overwrites it. A thread's sums run over its columns in order, then a fixed xor butterfly over the warp
 * (and for a block, the warps in order), so every thread holds the same bits; which group a row gets
 * depends on its length alone. The row's NLL, count and correctness go to per-row slots in scratch, and
 * one block adds them up in a fixed order (strided per thread, then a fixed tree) into stats[0..2] (+=):
 * the statistics are the same bits on every run, and no float atomics are used. */
#include <limits.h>
#include <math.h>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "warp.cuh"
#include "slots.cuh"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"
#include "math/fast_exp_erf.h"
#include "util/lowp.h"
#include "math/softmax_nll.h"

namespace {

/* Activations are T (float now; bf16/fp16 with mixed precision), arithmetic is float / double. */
template <class T> __device__ __forceinline__ float to_float(T v) { return static_cast<float>(v); }
template <class T> __device__ __forceinline__ T from_float(float v) { return static_cast<T>(v); }

/* The threads that share a row: a warp (WIDE false; HS_ROWS_PER_BLOCK rows per block) or the whole block
 * (WIDE: one row per block). rank: the thread's place in the group; rows first_row(), + row_stride(), ... */
template <bool WIDE> struct row_group {
  static constexpr int size = WIDE ? HS_BLOCK : HS_WARP;
  __device__ static int rank() { return WIDE ? (int)threadIdx.x : (int)(threadIdx.x % HS_WARP); }
  __device__ static long long first_row() {
    return WIDE ? (long long)blockIdx.x : (long long)blockIdx.x * HS_ROWS_PER_BLOCK + threadIdx.x / HS_WARP;
  }
  __device__ static long long row_stride() {
    return WIDE ? (long long)gridDim.x : (long long)gridDim.x * HS_ROWS_PER_BLOCK;
  }
  template <class V> __device__ static V sum(V v) { return WIDE ? block_sum(v) : warp_sum(v); }
  template <class V> __device__ static void argmax(V &m, int &best) {
    if (WIDE) block_argmax(m, best);
    else warp_argmax(m, best);
  }
};

/* Rows of at least this many columns get a block each (row_group<true>) */
#define HS_WIDE_ROW_COLS 4096

/* This thread's columns of x[cols]: first maximum (strict >, the first column taken as it is, as the
 * CPU takes x[0]), then the group's. */
template <bool WIDE, class T> __device__ __forceinline__ void row_argmax(const T *x, int cols, float &m, int &best) {
  m = -INFINITY;
  best = INT_MAX;
  for (int c = row_group<WIDE>::rank(); c < cols; c += row_group<WIDE>::size) {
    const float v = to_float(x[c]);
    if (best == INT_MAX || v > m) {
      m = v;
      best = c;
    }
  }
  row_group<WIDE>::argmax(m, best);
}

/* Per-row statistics in scratch: row_stats[0*rows + r] = NLL, [1*rows + r] = counted (0/1),
 * [2*rows + r] = correct (0/1). */

/* ---- log-softmax + NLL -------------------------------------------------------------------------------- */

/* logprobs[rows,cols] = log_softmax(logits[rows,cols]) (NULL: not written) and log_norm[rows] (NULL: not);
 * row_stats as above, zeros for rows with label < 0. One row per row_group<WIDE>. */
template <bool WIDE, class T>
__global__ void __launch_bounds__(HS_BLOCK)
    log_softmax_nll_forward_kernel(T *logprobs, const T *logits, const int32_t *labels, int rows, int cols,
                                   double *row_stats, double *log_norm_out) {
  using group = row_group<WIDE>;
  const int rank = group::rank();
  for (long long r = group::first_row(); r < rows; r += group::row_stride()) { /* uniform across the group */
    const size_t off = (size_t)r * (size_t)cols;
    const T *x = logits + off;
    const int label = labels[r]; /* < 0: an ignored (padding) row, its statistics zeros */
    float m;
    int best;
    row_argmax<WIDE>(x, cols, m, best);
    const bool owner = label >= 0 ? rank == label % group::size : rank == 0; /* the thread holding column `label` */
    const double x_label = label >= 0 && owner ? (double)to_float(x[label]) : 0.0; /* before logprobs is written */
    double sum = 0.0;
    for (int c = rank; c < cols; c += group::size) sum += exp((double)to_float(x[c]) - (double)m);
    const double log_norm = (double)m + log(group::sum(sum));
    if (logprobs)
      for (int c = rank; c < cols; c += group::size) logprobs[off + c] = from_float<T>(hs_logprob(to_float(x[c]), log_norm));
    if (log_norm_out && rank == 0) log_norm_out[r] = log_norm;
    if (owner) {
      row_stats[r] = label >= 0 ? log_norm - x_label : 0.0;
      row_stats[(size_t)rows + r] = label >= 0 ? 1.0 : 0.0;
      row_stats[2 * (size_t)rows + r] = label >= 0 && best == label ? 1.0 : 0.0;
    }
  }
}

/* dlogits[rows,cols] = scale·(exp(logprobs) - onehot(labels)), 0 on rows with label < 0, the log-probabilities
 * read, or (logprobs NULL) recomputed from logits and log_norm (dlogits may alias logits: each element is
 * read, then written, by one thread); element-wise over grid (column blocks, rows), both grid-strided. */
template <class T>
__global__ void __launch_bounds__(HS_BLOCK)
    log_softmax_nll_backward_kernel(T *dlogits, const T *logprobs, const T *logits, const double *log_norm,
                                    const int32_t *labels, int rows, int cols, float scale, const float *scale_slot,
                                    uint16_t *dlogits16, int bf16) {
  scale = hs_slot(scale_slot, scale);
  for (size_t r = blockIdx.y; r < (size_t)rows; r += gridDim.y) {
    const int label = labels[r];
    const size_t off = r * (size_t)cols;
    for (size_t c = (size_t)blockIdx.x * HS_BLOCK + threadIdx.x; c < (size_t)cols; c += (size_t)gridDim.x * HS_BLOCK) {
      const float lp = logprobs ? to_float(logprobs[off + c]) : hs_logprob(to_float(logits[off + c]), log_norm[r]);
      const T d = from_float<T>(label >= 0 ? hs_nll_logit_grad(lp, (int)c == label, scale) : 0.0f);
      if (dlogits) dlogits[off + c] = d;
      if (dlogits16) dlogits16[off + c] = bf16 ? hs_bf16_bits(to_float(d)) : hs_fp16_bits(to_float(d));
    }
  }
}

/* ---- softmax + cross-entropy -------------------------------------------------------------------------- */

/* probs[rows,cols] = softmax(logits) (probs may alias logits); row_stats as above, zeros for rows with
 * label < 0. One row per row_group<WIDE>. */
template <bool WIDE, class T>
__global__ void __launch_bounds__(HS_BLOCK)
    softmax_xent_forward_kernel(T *probs, const T *logits, const int32_t *labels, int rows, int cols,
                                double *row_stats) {
  using group = row_group<WIDE>;
  const int rank = group::rank();
  for (long long r = group::first_row(); r < rows; r += group::row_stride()) { /* uniform across the group */
    const size_t off = (size_t)r * (size_t)cols;
    const T *x = logits + off;
    T *pr = probs + off;
    const int label = labels[r];
    float m;
    int best;
    row_argmax<WIDE>(x, cols, m, best);
    const bool owner = label >= 0 ? rank == label % group::size : rank == 0;
    const float x_label = label >= 0 && owner ? to_float(x[label]) : 0.0f; /* before pr overwrites it */
    double sum = 0.0;
    for (int c = rank; c < cols; c += group::size) {
      const float e = hs_exp_fast(to_float(x[c]) - m);
      pr[c] = from_float<T>(e);
      sum += (double)e;
    }
    const double total = group::sum(sum);
    const float inv = (float)(1.0 / total);
    for (int c = rank; c < cols; c += group::size) pr[c] = from_float<T>(to_float(pr[c]) * inv);
    if (owner) {
      row_stats[r] = label >= 0 ? (double)m + log(total) - (double)x_label : 0.0;
      row_stats[(size_t)rows + r] = label >= 0 ? 1.0 : 0.0;
      row_stats[2 * (size_t)rows + r] = label >= 0 && best == label ? 1.0 : 0.0;
    }
  }
}

/* dlogits[rows,cols] = scale·probs - scale·onehot(label), 0 on rows with label < 0 (dlogits may alias
 * probs: element-wise). */
template <class T>
__global__ void __launch_bounds__(HS_BLOCK)
    softmax_xent_backward_kernel(T *dlogits, const T *probs, const int32_t *labels, int rows, int cols,
                                 float scale, const float *scale_slot) {
  scale = hs_slot(scale_slot, scale);
  for (size_t r = blockIdx.y; r < (size_t)rows; r += gridDim.y) {
    const int label = labels[r];
    const size_t off = r * (size_t)cols;
    for (size_t c = (size_t)blockIdx.x * HS_BLOCK + threadIdx.x; c < (size_t)cols; c += (size_t)gridDim.x * HS_BLOCK) {
      float g = 0.0f;
      if (label >= 0) {
        g = scale * to_float(probs[off + c]);
        if ((int)c == label) g -= scale;
      }
      dlogits[off + c] = from_float<T>(g);
    }
  }
}

/* ---- statistics --------------------------------------------------------------------------------------- */

/* stats[k] += Σ_r row_stats[k·rows + r] for k = 0, 1, 2. One block: thread t sums rows t, t+HS_BLOCK, ...
 * in order, then block_sum's fixed tree; the order depends on rows alone. */
__global__ void __launch_bounds__(HS_BLOCK) loss_stats_kernel(double *stats, const double *row_stats, int rows) {
  double s[3] = {0.0, 0.0, 0.0};
  for (int r = threadIdx.x; r < rows; r += HS_BLOCK)
    for (int k = 0; k < 3; k++) s[k] += row_stats[(size_t)k * (size_t)rows + (size_t)r];
  for (int k = 0; k < 3; k++) {
    const double total = block_sum(s[k]);
    if (threadIdx.x == 0) stats[k] += total;
  }
}

/* blocks for one row per block, rows strided over at most HS_MAX_GRID of them */
unsigned grid_for_wide_rows(int rows) { return (unsigned)(rows < HS_MAX_GRID ? rows : HS_MAX_GRID); }

/* row_stats[3][rows] in scratch, filled by a forward kernel, then added to stats. */
double *row_stats_scratch(const hs_backend *be, int rows) {
  return static_cast<double *>(hs_cuda_scratch(be, 3 * (size_t)rows * sizeof(double)));
}

void launch_loss_stats(const hs_backend *be, double *stats, const double *row_stats, int rows) {
  HS_LAUNCH(1, HS_BLOCK, 0, hs_cuda_stream(be), loss_stats_kernel)(stats, row_stats, rows);
  HS_CUDA_LAUNCHED("loss_stats_kernel", (3 * (size_t)rows + 6) * sizeof(double)); /* row_stats; stats += */
}

template <class T>
void launch_log_softmax_nll_forward(const hs_backend *be, T *logprobs, const T *logits, const int32_t *labels,
                                    int rows, int cols, double *stats, double *log_norm) {
  hs_output_check("log_softmax_nll_forward: logprobs or log_norm", logprobs, log_norm);
  if (rows <= 0 || cols <= 0) return;
  double *row_stats = row_stats_scratch(be, rows);
  if (cols >= HS_WIDE_ROW_COLS)
    HS_LAUNCH(grid_for_wide_rows(rows), HS_BLOCK, 0, hs_cuda_stream(be), log_softmax_nll_forward_kernel<true, T>)(
        logprobs, logits, labels, rows, cols, row_stats, log_norm);
  else
    HS_LAUNCH(hs_grid_for_rows((size_t)rows), HS_BLOCK, 0, hs_cuda_stream(be), log_softmax_nll_forward_kernel<false, T>)(
        logprobs, logits, labels, rows, cols, row_stats, log_norm);
  /* logits, logprobs, labels, the per-row statistics, log_norm */
  HS_CUDA_LAUNCHED("log_softmax_nll_forward_kernel",
                   (logprobs ? 2 : 1) * (size_t)rows * (size_t)cols * sizeof(T) +
                       (size_t)rows * (sizeof(int32_t) + (log_norm ? 4 : 3) * sizeof(double)));
  launch_loss_stats(be, stats, row_stats, rows);
}

template <class T>
void launch_log_softmax_nll_backward(const hs_backend *be, T *dlogits, const T *logprobs, const T *logits,
                                     const double *log_norm, const int32_t *labels, int rows, int cols, float scale,
                                     uint16_t *dlogits16) {
  if (rows <= 0 || cols <= 0) return;
  const size_t n = (size_t)rows * (size_t)cols;
  const dim3 grid(hs_grid_cols((size_t)cols), hs_grid_rows_y((size_t)rows));
  const float *scale_slot = hs_cuda_slot_f32(be, scale);
  if (hs_cuda_slots_only(be)) return; /* recorded: the slots only (cuda_slots.h) */
  HS_LAUNCH(grid, HS_BLOCK, 0, hs_cuda_stream(be), log_softmax_nll_backward_kernel<T>)(
      dlogits, logprobs, logits, log_norm, labels, rows, cols, scale, scale_slot, dlogits16,
      be->precision == HS_PRECISION_BF16);
  HS_CUDA_LAUNCHED("log_softmax_nll_backward_kernel", (dlogits ? 2 : 1) * n * sizeof(T) +
                                                          (size_t)rows * (sizeof(int32_t) + (logprobs ? 0 : sizeof(double))) +
                                                          (dlogits16 ? n * sizeof(uint16_t) : 0));
}

template <class T>
void launch_softmax_xent_forward(const hs_backend *be, T *probs, const T *logits, const int32_t *labels, int rows,
                                 int cols, double *stats) {
  if (rows <= 0 || cols <= 0) return;
  double *row_stats = row_stats_scratch(be, rows);
  if (cols >= HS_WIDE_ROW_COLS)
    HS_LAUNCH(grid_for_wide_rows(rows), HS_BLOCK, 0, hs_cuda_stream(be), softmax_xent_forward_kernel<true, T>)(
        probs, logits, labels, rows, cols, row_stats);
  else
    HS_LAUNCH(hs_grid_for_rows((size_t)rows), HS_BLOCK, 0, hs_cuda_stream(be), softmax_xent_forward_kernel<false, T>)(
        probs, logits, labels, rows, cols, row_stats);
  /* logits, probs, labels, the per-row statistics */
  HS_CUDA_LAUNCHED("softmax_xent_forward_kernel",
                   2 * (size_t)rows * (size_t)cols * sizeof(T) + (size_t)rows * (sizeof(int32_t) + 3 * sizeof(double)));
  launch_loss_stats(be, stats, row_stats, rows);
}

template <class T>
void launch_softmax_xent_backward(const hs_backend *be, T *dlogits, const T *probs, const int32_t *labels, int rows,
                                  int cols, float scale) {
  if (rows <= 0 || cols <= 0) return;
  const size_t n = (size_t)rows * (size_t)cols;
  const dim3 grid(hs_grid_cols((size_t)cols), hs_grid_rows_y((size_t)rows));
  const float *scale_slot = hs_cuda_slot_f32(be, scale);
  if (hs_cuda_slots_only(be)) return; /* recorded: the slots only (cuda_slots.h) */
  HS_LAUNCH(grid, HS_BLOCK, 0, hs_cuda_stream(be), softmax_xent_backward_kernel<T>)(dlogits, probs, labels, rows,
                                                                                    cols, scale, scale_slot);
  HS_CUDA_LAUNCHED("softmax_xent_backward_kernel", 2 * n * sizeof(T) + (size_t)rows * sizeof(int32_t));
}

} // namespace

/* logprobs[rows,cols] = log_softmax(logits); stats[0] += Σ NLL, [1] += rows, [2] += correct */
extern "C" void hs_cuda_log_softmax_nll_forward(const hs_backend *be, float *logprobs, const float *logits,
                                                const int32_t *labels, int rows, int cols, double *stats,
                                                double *log_norm) {
  launch_log_softmax_nll_forward<float>(be, logprobs, logits, labels, rows, cols, stats, log_norm);
}

/* dlogits[rows,cols] = scale·(softmax - onehot(label)) from the stored log-probabilities */
extern "C" void hs_cuda_log_softmax_nll_backward(const hs_backend *be, float *dlogits, const float *logprobs,
                                                 const float *logits, const double *log_norm, const int32_t *labels,
                                                 int rows, int cols, float scale, uint16_t *dlogits16) {
  if (dlogits16) hs_half_precision_check(be, "log_softmax_nll_backward: dlogits16");
  hs_output_check("log_softmax_nll_backward: dlogits or dlogits16", dlogits, dlogits16);
  hs_log_softmax_nll_backward_check(logprobs, logits, log_norm);
  launch_log_softmax_nll_backward<float>(be, dlogits, logprobs, logits, log_norm, labels, rows, cols, scale, dlogits16);
}

/* probs[rows,cols] = softmax(logits) (may alias); per row with label >= 0: stats[0] += NLL, [1] += 1,
 * [2] += (argmax == label) */
extern "C" void hs_cuda_softmax_xent_forward(const hs_backend *be, float *probs, const float *logits,
                                             const int32_t *labels, int rows, int cols, double *stats) {
  launch_softmax_xent_forward<float>(be, probs, logits, labels, rows, cols, stats);
}

/* dlogits[rows,cols] = scale·(probs - onehot(label)), 0 on rows with label < 0 (may alias probs) */
extern "C" void hs_cuda_softmax_xent_backward(const hs_backend *be, float *dlogits, const float *probs,
                                              const int32_t *labels, int rows, int cols, float scale) {
  launch_softmax_xent_backward<float>(be, dlogits, probs, labels, rows, cols, scale);
}
