/* LayerNorm over the last dimension on the CUDA backend (the CPU reference: src/backend/cpu/cpu_layernorm.c;
 * the element formulas: kernels/math/layernorm.h).
 *
 *   forward   in = x (+ residual, stored to x_sum); per row of C values, in double:
 *             mean = Σ in / C,  var = Σ (in - mean)² / C (biased),  rstd = 1/sqrt(var + eps);
 *             y = gamma·(in - mean)·rstd + beta
 *   backward  x̂ = (x - mean)·rstd, g = dy·gamma;  dx = rstd·(g - mean(g) - x̂·mean(g·x̂))  (sums in double)
 *             dgamma += Σ_rows dy·x̂,  dbeta += Σ_rows dy
 *
 * One warp per row (HS_ROWS_PER_BLOCK rows per block): lane l owns columns l, l+32, ... and is the only
 * thread that reads or writes them, so x_sum may alias x or residual, and dx may alias dy. A lane sums
 * its columns in order, then a fixed xor butterfly over the 32 lanes gives every lane the same row sum.
 *
 * dgamma/dbeta: never float atomics. Rows are cut into chunks of HS_LN_ROW_CHUNK rows (the CPU's row
 * blocks); the backward's dx kernel runs one block per chunk, whose threads first sum dy·x̂ and dy over
 * the chunk's rows in row order into a double partial per column, then compute the chunk's dx (so dx may
 * still alias dy); then one thread per column adds the chunks' partials in chunk order and rounds once.
 * This is the CPU's order exactly, so the two backends agree to the bit unless a compiler fuses a
 * multiply-add differently.
 *
 * A sublayer's end (dropout_add_layernorm_forward, layernorm_dropout_backward) is the same kernels with a
 * dropout folded in: the forward takes the input as dropout(x) + residual (the factor of dropout_kernel,
 * kernels/math/dropout.h, drawn per element), the backward's dx kernel also writes dx times that factor
 * (the sublayer's gradient): one pass over the rows instead of a dropout kernel more each way. */
#include <type_traits>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "warp.cuh"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_ops.h"
#include "math/dropout.h"
#include "math/layernorm.h"
#include "slots.cuh"
#include "util/lowp.h"

namespace {

/* Activations are T (float now; bf16/fp16 with mixed precision), arithmetic is float. */
template <class T> __device__ __forceinline__ float to_float(T v) { return static_cast<float>(v); }
template <class T> __device__ __forceinline__ T from_float(float v) { return static_cast<T>(v); }

/* The dropout folded into a pass: element i of the [batch, per_sample] tensor is multiplied by
 * hs_dropout_factor(hs_dropout_sample_key(key, first_sample + i / per_sample), (i % per_sample) / group,
 * hs_dropout_rate_of(p)). */
struct ln_dropout {
  int on; /* 0: no dropout (the plain ops) */
  hs_dropout_rate rate;
  uint64_t key;
  int64_t first_sample;
  size_t per_sample, group;
  const hs_dropout_slot *slot; /* key and first_sample in device memory (a graph region), or NULL */
};

/* An optional 16-bit output (the seam's y16 / da16): p[i] = the rounding of to_half (src/util/lowp.h) of
 * the fp32 value written at i, in the type of the precision; p == NULL: none. */
struct half_out {
  uint16_t *p;
  int bf16; /* 1: bfloat16, 0: IEEE half */
};

__device__ __forceinline__ void put_half(const half_out &o, size_t i, float v) {
  if (o.p) o.p[i] = o.bf16 ? hs_bf16_bits(v) : hs_fp16_bits(v);
}

static half_out half_out_for(const hs_backend *be, uint16_t *p) {
  return half_out{p, be->precision == HS_PRECISION_BF16};
}

/* The factor of element i of the [batch, per_sample] tensor, from i itself: two 64-bit divisions (on a
 * GPU each about 25 instructions with a reciprocal and two conversions where the values fit in 32 bits,
 * a subroutine call beyond: more than the draw). Out of line: the unrolled
 * column loops call it only for rows that cross samples or draw per group (ln_row_draw). */
__device__ HS_NOINLINE float dropout_factor_divided(uint64_t key, int64_t first_sample, size_t per_sample,
                                                     size_t group, hs_dropout_rate rate, size_t i) {
  return hs_dropout_factor(hs_dropout_sample_key(key, (uint64_t)(first_sample + (int64_t)(i / per_sample))),
                           (i % per_sample) / group, rate);
}

/* Where a row's elements draw, found once per row: the row's first element is value rem0 of the global
 * sample whose key is sample_key, and `inside` says the row lies inside that sample and draws per value
 * (group 1), as BERT's and Transformer-XL's rows do (per_sample is a multiple of the row): column c then
 * draws at rem0 + c, with no division and no sample key per element in a memory-bound pass. */
struct ln_row_draw {
  uint64_t sample_key;
  size_t rem0;
  bool inside;
};

__device__ __forceinline__ ln_row_draw row_draw_at(const ln_dropout &d, size_t off, int cols) {
  if (!d.on) return ln_row_draw{0, 0, false};
  const size_t s = off / d.per_sample, rem0 = off - s * d.per_sample;
  return ln_row_draw{hs_dropout_sample_key(d.key, (uint64_t)(d.first_sample + (int64_t)s)), rem0,
                     d.group == 1 && rem0 + (size_t)cols <= d.per_sample};
}

/* The factor of column c of the row at off: dropout_factor_divided's at i = off + c, either way the same
 * draw. */
__device__ __forceinline__ float dropout_factor_at(const ln_dropout &d, const ln_row_draw &rd, size_t off, int c) {
  if (rd.inside) return hs_dropout_factor(rd.sample_key, rd.rem0 + (size_t)c, d.rate);
  return dropout_factor_divided(d.key, d.first_sample, d.per_sample, d.group, d.rate, off + (size_t)c);
}

/* ---- forward ------------------------------------------------------------------------------------------ */

/* y[rows,cols], x_sum[rows,cols] (only with residual), mean[rows], rstd[rows] from x[rows,cols],
 * residual[rows,cols] or NULL, gamma[cols], beta[cols]. With a residual, x may come from its 16-bit twin
 * x16 instead (widened, exact; x16 of y16's type, x_sum may alias x). One warp per row, rows
 * grid-strided; lane l owns columns l + 32k, k = 0, 1, ...
 * K > 0 (rows of at most K·32 columns): a lane holds its columns' values in registers, so it issues every
 * load of the row (x or x16, residual) before its first store and reads nothing twice. K = 0 (longer
 * rows): the input sum goes through x_sum and is read back (its stores may alias the inputs, so a lane
 * waits for each column's loads in turn). The same columns per lane, summed in the same order, either
 * way: the same bits. */
template <class T, int K>
__global__ void __launch_bounds__(HS_BLOCK)
    layernorm_forward_kernel(T *y, T *x_sum, float *mean, float *rstd, const T *x, const uint16_t *x16,
                             const T *residual, const float *gamma, const float *beta, int rows, int cols, float eps,
                             ln_dropout drop, half_out y16) {
  hs_dropout_slot_resolve(drop); /* the slot read once per thread, not per element */
  const int lane = threadIdx.x % HS_WARP;
  const long long first = (long long)blockIdx.x * HS_ROWS_PER_BLOCK + threadIdx.x / HS_WARP;
  const long long stride = (long long)gridDim.x * HS_ROWS_PER_BLOCK;
  /* f(k, c) for the lane's columns c = lane + 32k < cols, in order */
  auto lane_cols = [&](auto &&f) {
    if (K > 0) {
      HS_UNROLL
      for (int k = 0; k < (K > 0 ? K : 1); k++)
        if (lane + k * HS_WARP < cols) f(k, lane + k * HS_WARP);
    } else {
      for (int c = lane, k = 0; c < cols; c += HS_WARP, k++) f(k, c);
    }
  };
  for (long long r = first; r < rows; r += stride) { /* uniform across the warp */
    const size_t off = (size_t)r * (size_t)cols;
    const ln_row_draw rd = row_draw_at(drop, off, cols);
    float v[K > 0 ? K : 1] = {}; /* K > 0: the lane's columns of the LayerNorm's input */
    const T *in = x + off;     /* K = 0: the input row in memory */
    if (residual) { /* in = dropout(x) + residual, kept for the backward pass */
      float a[K > 0 ? K : 1] = {}, res[K > 0 ? K : 1] = {};
      auto sum_at = [&](int c, float ak, float rk) {
        if (drop.on) /* rounded to T as dropout_kernel stores it */
          ak = to_float(from_float<T>(ak * dropout_factor_at(drop, rd, off, c)));
        const T s = from_float<T>(ak + rk);
        x_sum[off + c] = s;
        return to_float(s);
      };
      auto load_x = [&](int c) {
        return x16 ? (y16.bf16 ? hs_bf16_to_float(x16[off + c]) : hs_fp16_to_float(x16[off + c])) : to_float(x[off + c]);
      };
      if (K > 0) {
        lane_cols([&](int k, int c) { a[k] = load_x(c), res[k] = to_float(residual[off + c]); }); /* every load first */
        lane_cols([&](int k, int c) { v[k] = sum_at(c, a[k], res[k]); });
      } else {
        lane_cols([&](int, int c) { sum_at(c, load_x(c), to_float(residual[off + c])); });
        in = x_sum + off; /* each lane reads back only the columns it wrote */
      }
    } else if (K > 0) {
      lane_cols([&](int k, int c) { v[k] = to_float(x[off + c]); });
    }
    auto value = [&](int k, int c) { return K > 0 ? v[k] : to_float(in[c]); };
    double sum = 0.0;
    lane_cols([&](int k, int c) { sum += (double)value(k, c); });
    const double mu = warp_sum(sum) / cols;
    double sq = 0.0;
    lane_cols([&](int k, int c) {
      const double dv = (double)value(k, c) - mu;
      sq += dv * dv;
    });
    const float m = (float)mu, rs = hs_layernorm_rstd(warp_sum(sq) / cols, eps);
    lane_cols([&](int k, int c) {
      const T o = from_float<T>(hs_layernorm_out(value(k, c), m, rs, gamma[c], beta[c]));
      y[off + c] = o;
      put_half(y16, off + c, to_float(o));
    });
    if (lane == 0) {
      mean[r] = m;
      rstd[r] = rs;
    }
  }
}

/* ---- backward ----------------------------------------------------------------------------------------- */

/* Rows whose loads a thread of the backward's partial sums issues together (registers: 2 per row) */
constexpr int kLnRowsAhead = 16;

/* One row's share of a column's partial sums: sg += dy·x̂, sb += dy, x̂ = (x - mean)·rstd (double sums) */
__device__ __forceinline__ void ln_partial_add(double &sg, double &sb, float xv, float d, float mean_r,
                                               float rstd_r) {
  const float xh = (xv - mean_r) * rstd_r;
  sg += (double)d * (double)xh;
  sb += (double)d;
}

/* One chunk of HS_LN_ROW_CHUNK rows per block (grid: chunks), in two phases separated by __syncthreads:
 *   1. partial[chunk][0][c] = Σ dy·x̂, partial[chunk][1][c] = Σ dy over the chunk's rows in row order
 *      (double), one thread per column (a warp reads 32 consecutive columns of a row);
 *   2. dx[rows,cols] (may alias dy: only this block reads the chunk's rows, and phase 1 has read them)
 *      from dy, x (the forward's input), mean, rstd, gamma; one warp per row.
 * One launch where a partials kernel and a dx kernel were two: the same expressions in the same order,
 * so the same bits. K > 0 (rows of at most K·32 columns): phase 2 holds a lane's x and dy values of the
 * row in registers, loaded before its first store, instead of reading them again for the output (the
 * same expressions on the same values). */
template <class T, int K>
__global__ void __launch_bounds__(HS_BLOCK)
    layernorm_backward_dx_kernel(double *partial, T *dx, T *da, const T *dy, const T *x, const float *mean,
                                 const float *rstd, const float *gamma, int rows, int cols, ln_dropout drop,
                                 half_out da16) {
  hs_dropout_slot_resolve(drop); /* the slot read once per thread, not per element */
  const long long r0 = (long long)blockIdx.x * HS_LN_ROW_CHUNK;
  const long long r1 = r0 + HS_LN_ROW_CHUNK < rows ? r0 + HS_LN_ROW_CHUNK : rows;
  double *pg = partial + (size_t)blockIdx.x * 2 * (size_t)cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    double sg = 0.0, sb = 0.0;
    /* the column's dy·x̂ and dy added row by row, in row order; rows taken kLnRowsAhead at a time, all
     * their loads issued before the first add (a load at a time leaves a thread waiting on DRAM for each
     * row: too few bytes in flight for the bandwidth) */
    long long r = r0;
    for (; r + kLnRowsAhead <= r1; r += kLnRowsAhead) {
      float xs[kLnRowsAhead], ds[kLnRowsAhead];
      HS_UNROLL
      for (int k = 0; k < kLnRowsAhead; k++) {
        const size_t i = (size_t)(r + k) * (size_t)cols + (size_t)c;
        xs[k] = to_float(x[i]);
        ds[k] = to_float(dy[i]);
      }
      HS_UNROLL
      for (int k = 0; k < kLnRowsAhead; k++) ln_partial_add(sg, sb, xs[k], ds[k], mean[r + k], rstd[r + k]);
    }
    for (; r < r1; r++) {
      const size_t i = (size_t)r * (size_t)cols + (size_t)c;
      ln_partial_add(sg, sb, to_float(x[i]), to_float(dy[i]), mean[r], rstd[r]);
    }
    pg[c] = sg;
    pg[cols + c] = sb;
  }
  __syncthreads(); /* dx may overwrite dy below */
  const int lane = threadIdx.x % HS_WARP;
  for (long long r = r0 + threadIdx.x / HS_WARP; r < r1; r += HS_ROWS_PER_BLOCK) {
    const size_t off = (size_t)r * (size_t)cols;
    const float m = mean[r], rs = rstd[r];
    const ln_row_draw rd = row_draw_at(drop, off, cols);
    /* the dx of column c from its x and dy values: the same float expressions either way */
    auto put = [&](int c, float xv, float dyv, float mean_g, float mean_gx) {
      const float xh = (xv - m) * rs;
      const T v = from_float<T>(hs_layernorm_dx(dyv * gamma[c], xh, rs, mean_g, mean_gx));
      dx[off + c] = v;
      if (drop.on) {
        const T d = from_float<T>(to_float(v) * dropout_factor_at(drop, rd, off, c));
        if (da) da[off + c] = d;
        put_half(da16, off + c, to_float(d));
      } else {
        put_half(da16, off + c, to_float(v)); /* da is a copy of dx */
      }
    };
    double sum_g = 0.0, sum_gx = 0.0;
    if (K > 0) {
      float xs[K > 0 ? K : 1], dys[K > 0 ? K : 1];
      HS_UNROLL
      for (int k = 0; k < K; k++) {
        const int c = lane + k * HS_WARP;
        xs[k] = c < cols ? to_float(x[off + c]) : 0.0f;
        dys[k] = c < cols ? to_float(dy[off + c]) : 0.0f;
      }
      HS_UNROLL
      for (int k = 0; k < K; k++) {
        const int c = lane + k * HS_WARP;
        if (c < cols) {
          const float xh = (xs[k] - m) * rs;
          const float g = dys[k] * gamma[c];
          sum_g += (double)g;
          sum_gx += (double)g * (double)xh;
        }
      }
      const float mean_g = (float)(warp_sum(sum_g) / cols), mean_gx = (float)(warp_sum(sum_gx) / cols);
      HS_UNROLL
      for (int k = 0; k < K; k++) {
        const int c = lane + k * HS_WARP;
        if (c < cols) put(c, xs[k], dys[k], mean_g, mean_gx);
      }
    } else {
      for (int c = lane; c < cols; c += HS_WARP) {
        const float xh = (to_float(x[off + c]) - m) * rs;
        const float g = to_float(dy[off + c]) * gamma[c];
        sum_g += (double)g;
        sum_gx += (double)g * (double)xh;
      }
      const float mean_g = (float)(warp_sum(sum_g) / cols), mean_gx = (float)(warp_sum(sum_gx) / cols);
      for (int c = lane; c < cols; c += HS_WARP) put(c, to_float(x[off + c]), to_float(dy[off + c]), mean_g, mean_gx);
    }
  }
}

/* dgamma[c] += (float)Σ_chunks partial[chunk][0][c], dbeta[c] += (float)Σ_chunks partial[chunk][1][c],
 * chunks in order; one thread per column, grid-strided. */
__global__ void __launch_bounds__(HS_BLOCK)
    layernorm_param_sum_kernel(float *dgamma, float *dbeta, const double *partial, int chunks, int cols) {
  for (long long c = (long long)blockIdx.x * HS_BLOCK + threadIdx.x; c < cols; c += (long long)gridDim.x * HS_BLOCK) {
    double sg = 0.0, sb = 0.0;
    for (int k = 0; k < chunks; k++) {
      sg += partial[(size_t)k * 2 * (size_t)cols + (size_t)c];
      sb += partial[(size_t)k * 2 * (size_t)cols + (size_t)cols + (size_t)c];
    }
    dgamma[c] += (float)sg;
    dbeta[c] += (float)sb;
  }
}

/* launch(K) with K, the kernels' columns per lane held in registers, a compile-time constant
 * (std::integral_constant): the smallest of 4, 8, 16, 24, 32 whose K·32 columns hold a row (rows of up to
 * 1024 columns: BERT's and Transformer-XL's hidden sizes), else 0 (longer rows are read back) */
template <class Launch> void with_cols_per_lane(int cols, Launch &&launch) {
  if (cols <= 4 * HS_WARP) launch(std::integral_constant<int, 4>{});
  else if (cols <= 8 * HS_WARP) launch(std::integral_constant<int, 8>{});
  else if (cols <= 16 * HS_WARP) launch(std::integral_constant<int, 16>{});
  else if (cols <= 24 * HS_WARP) launch(std::integral_constant<int, 24>{});
  else if (cols <= 32 * HS_WARP) launch(std::integral_constant<int, 32>{});
  else launch(std::integral_constant<int, 0>{});
}

template <class T>
void launch_layernorm_forward(const hs_backend *be, T *y, T *x_sum, float *mean, float *rstd, const T *x,
                              const T *residual, const float *gamma, const float *beta, int rows, int cols,
                              float eps, ln_dropout drop, half_out y16 = half_out{}) {
  if (rows <= 0 || cols <= 0) return;
  const size_t n = (size_t)rows * (size_t)cols;
  /* with a residual, x may exist only in 16 bits (bind_half_only: a 16-bit linear layer's output) */
  const uint16_t *x16 = residual ? hs_cuda_twin_only16(x, n) : nullptr;
  const unsigned grid = hs_grid_for_rows((size_t)rows);
  const cudaStream_t stream = hs_cuda_stream(be);
  const T *xf = x16 ? nullptr : x;
  with_cols_per_lane(cols, [&](auto k) {
    HS_LAUNCH(grid, HS_BLOCK, 0, stream, layernorm_forward_kernel<T, decltype(k)::value>)(
        y, x_sum, mean, rstd, xf, x16, residual, gamma, beta, rows, cols, eps, drop, y16);
  });
  /* x (in fp32 or 16 bits; + residual, and their sum written), y, mean and rstd, gamma and beta (the
   * dropout's mask is recomputed from its counter, not read) */
  HS_CUDA_LAUNCHED("layernorm_forward_kernel", n * (sizeof(T) * (residual ? 3 : 2) +
                                                    (residual ? (x16 ? sizeof(uint16_t) : sizeof(T)) : 0)) +
                                                   (y16.p ? n * sizeof(uint16_t) : 0) +
                                                   (size_t)rows * 2 * sizeof(float) + (size_t)cols * 2 * sizeof(float));
}

template <class T>
void launch_layernorm_backward(const hs_backend *be, T *dx, T *da, float *dgamma, float *dbeta, const T *dy,
                               const T *x, const float *mean, const float *rstd, const float *gamma, int rows,
                               int cols, ln_dropout drop, half_out da16 = half_out{}) {
  if (rows <= 0 || cols <= 0) return;
  const cudaStream_t stream = hs_cuda_stream(be);
  const int chunks = (rows + HS_LN_ROW_CHUNK - 1) / HS_LN_ROW_CHUNK;
  /* scratch: partial[chunks][2][cols] doubles */
  double *partial = static_cast<double *>(hs_cuda_scratch(be, (size_t)chunks * 2 * (size_t)cols * sizeof(double)));
  with_cols_per_lane(cols, [&](auto k) {
    HS_LAUNCH(dim3((unsigned)chunks), HS_BLOCK, 0, stream, layernorm_backward_dx_kernel<T, decltype(k)::value>)(
        partial, dx, da, dy, x, mean, rstd, gamma, rows, cols, drop, da16);
  });
  /* dy and x (counted once: the partials' rereads of a chunk just read), dx (and the dropout's gradient da
   * where it is written); mean, rstd; gamma; the partial sums written */
  HS_CUDA_LAUNCHED("layernorm_backward_dx_kernel", (size_t)rows * (size_t)cols * (drop.on && da ? 4 : 3) * sizeof(T) +
                                                       (da16.p ? (size_t)rows * (size_t)cols * sizeof(uint16_t) : 0) +
                                                       (size_t)rows * 2 * sizeof(float) + (size_t)cols * sizeof(float) +
                                                       (size_t)chunks * 2 * (size_t)cols * sizeof(double));
  /* after every chunk's partials */
  HS_LAUNCH(hs_grid_for((size_t)cols), HS_BLOCK, 0, stream, layernorm_param_sum_kernel)(dgamma, dbeta, partial,
                                                                                         chunks, cols);
  /* the partial sums; dgamma, dbeta read and written */
  HS_CUDA_LAUNCHED("layernorm_param_sum_kernel",
                   (size_t)chunks * 2 * (size_t)cols * sizeof(double) + (size_t)cols * 4 * sizeof(float));
}

/* The dropout of dropout_forward(batch, per_sample, group, p, key, first_sample); off when p <= 0 (the
 * identity, as dropout_forward). */
ln_dropout make_dropout(const hs_backend *be, int rows, int cols, int batch, size_t per_sample, size_t group, float p,
                        uint64_t key, int64_t first_sample) {
  ln_dropout d = {0, hs_dropout_rate_of(p), key, first_sample, per_sample, group, nullptr};
  if (p <= 0.0f || rows <= 0 || cols <= 0) return d;
  if (group == 0 || per_sample == 0 || per_sample % group != 0 ||
      (size_t)(batch > 0 ? batch : 0) * per_sample != (size_t)rows * (size_t)cols)
    HS_FATAL(NULL, "dropout + LayerNorm: %d samples of %zu values in groups of %zu do not tile %d rows of %d", batch,
             per_sample, group, rows, cols);
  d.on = 1;
  d.slot = hs_cuda_dropout_slot(be, key, first_sample);
  return d;
}

} // namespace

/* y, x_sum (with residual), mean[rows], rstd[rows] = LayerNorm(x (+ residual)) over rows of cols values */
extern "C" void hs_cuda_layernorm_forward(const hs_backend *be, float *y, float *x_sum, float *mean, float *rstd,
                                          const float *x, const float *residual, const float *gamma,
                                          const float *beta, int rows, int cols, float eps) {
  launch_layernorm_forward<float>(be, y, x_sum, mean, rstd, x, residual, gamma, beta, rows, cols, eps,
                                  ln_dropout{});
}

/* dx[rows,cols] (may alias dy); dgamma[cols] += Σ dy·x̂, dbeta[cols] += Σ dy */
extern "C" void hs_cuda_layernorm_backward(const hs_backend *be, float *dx, float *dgamma, float *dbeta,
                                           const float *dy, const float *x, const float *mean, const float *rstd,
                                           const float *gamma, int rows, int cols) {
  launch_layernorm_backward<float>(be, dx, nullptr, dgamma, dbeta, dy, x, mean, rstd, gamma, rows, cols,
                                   ln_dropout{});
}

/* x_sum = dropout(a) + residual, y = LayerNorm(x_sum): one kernel */
extern "C" void hs_cuda_dropout_add_layernorm_forward(const hs_backend *be, float *y, float *x_sum, float *mean,
                                                      float *rstd, const float *a, const float *residual,
                                                      const float *gamma, const float *beta, int rows, int cols,
                                                      float eps, int batch, size_t per_sample, size_t group, float p,
                                                      uint64_t key, int64_t first_sample, uint16_t *y16) {
  const ln_dropout drop = make_dropout(be, rows, cols, batch, per_sample, group, p, key, first_sample);
  if (hs_cuda_slots_only(be)) return; /* recorded: the slots only (cuda_slots.h) */
  launch_layernorm_forward<float>(be, y, x_sum, mean, rstd, a, residual, gamma, beta, rows, cols, eps, drop,
                                  half_out_for(be, y16));
}

/* dx = LayerNorm backward (may alias dy), da = dx·dropout factor: the dx kernel writes both (da NULL: only
 * its rounding da16) */
extern "C" void hs_cuda_layernorm_dropout_backward(const hs_backend *be, float *dx, float *da, float *dgamma,
                                                   float *dbeta, const float *dy, const float *x, const float *mean,
                                                   const float *rstd, const float *gamma, int rows, int cols,
                                                   int batch, size_t per_sample, size_t group, float p, uint64_t key,
                                                   int64_t first_sample, uint16_t *da16) {
  hs_output_check("layernorm_dropout_backward: da or da16", da, da16);
  const ln_dropout drop = make_dropout(be, rows, cols, batch, per_sample, group, p, key, first_sample);
  if (hs_cuda_slots_only(be)) return; /* recorded: the slots only (cuda_slots.h) */
  launch_layernorm_backward<float>(be, dx, da, dgamma, dbeta, dy, x, mean, rstd, gamma, rows, cols, drop,
                                   half_out_for(be, da16));
  if (!drop.on && da && rows > 0 && cols > 0) /* no dropout: da is a copy of dx, as dropout_backward makes it */
    HS_CUDA_CHECK(cudaMemcpyAsync(da, dx, (size_t)rows * (size_t)cols * sizeof(float), cudaMemcpyDeviceToDevice,
                                  hs_cuda_stream(be)));
}
