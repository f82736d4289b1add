/* Row gathers and scatter-adds on the CUDA backend (embedding lookups, the pooler's first token, masked
 * positions) — src/backend/cpu/cpu_rows.c on the CPU.
 *
 *   gather_rows       y[i, :] (+)= x[index[i], :] (0 for index < 0)  forward of a lookup
 *   scatter_add_rows  dx[index[i], :] += dy[i, :], i in order   its backward
 *   copy_rows         dst[r, :cols] = src[r, :cols], rows ld apart  pitched copies (Transformer-XL memory)
 *   add_rows          dst[r, :cols] += src[r, :cols], rows ld apart pitched adds (its memory's gradient rows)
 *
 * The scatter-add is deterministic for repeated indices without float atomics: the ids are sorted by
 * (destination row, source row) inside the op (a bitonic sort of unique integer keys in shared memory:
 * integer work, the same order every run), and each run of one destination row is summed by a warp per
 * 32 columns in ascending source row, so the float additions into each dx element happen in exactly the
 * CPU's order (the same bits). Parallelism is (distinct rows) x (columns); one run is a chain of
 * dependent additions that no split may reorder, so an id repeated n times costs n steps: a long run
 * (token types, padding) gets a whole block loading its rows through shared memory (sum_segments). */
#include "hs_cuda.h"
#include "hs_launch.h"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_ops.h"

namespace {

/* ---- forward: gather -------------------------------------------------------------------------------- */

/* y[count,cols] = x[index[i], :] (ACCUMULATE: +=); x[x_rows,cols]; each index < x_rows (checked while
 * the batch was staged), index < 0 a row of zeros (a padding row). Grid (column blocks, rows), both
 * grid-strided; V = 4 moves 16 bytes per thread step (cols % 4 == 0 and x, y 16-byte aligned: the host
 * checked). */
template <class T, bool ACCUMULATE, int V>
__global__ void gather_rows_kernel(T *y, const T *x, const int32_t *index, int count, size_t cols) {
  const size_t groups = cols / V;
  for (size_t i = blockIdx.y; i < (size_t)count; i += gridDim.y) {
    const int32_t j = index[i];
    T *dst = y + i * cols;
    if (j < 0) { /* a padding row: zeros (accumulating: nothing) */
      if (!ACCUMULATE)
        for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < cols; k += (size_t)gridDim.x * blockDim.x)
          dst[k] = (T)0.0f;
      continue;
    }
    const T *src = x + (size_t)j * cols;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < groups; k += (size_t)gridDim.x * blockDim.x) {
      if constexpr (V == 4) {
        const float4 v = HS_VECTOR_AT(const float4, src)[k];
        float4 o = v;
        if (ACCUMULATE) {
          const float4 a = HS_VECTOR_AT(const float4, dst)[k];
          o = make_float4(a.x + v.x, a.y + v.y, a.z + v.z, a.w + v.w);
        }
        HS_VECTOR_AT(float4, dst)[k] = o;
      } else {
        const T v = src[k];
        dst[k] = ACCUMULATE ? (T)((float)dst[k] + (float)v) : v;
      }
    }
  }
}

/* ---- backward: deterministic scatter-add as a segmented reduction ------------------------------------ */

/* The ids are sorted by (destination row, source row i): key = row << ibits | i, unique, so any correct
 * sort gives the same order and, within one destination row, the source rows in ascending i. A segment
 * (the run of one destination row) is summed per 32 columns, in order, into a register started from dx: the float additions into each dx element are exactly the CPU's (dx + dy[i0]) + dy[i1]
 * + ... with i0 < i1 < ..., the same bits, and every distinct row of dx is read and written once. */
constexpr int kSortBlock = 1024;            /* threads of a block that sorts (and then sums) */
constexpr int kSharedKeysBytes = 32 * 1024; /* keys sorted in shared memory up to this size */
constexpr int kPrefetch = 8;                /* dy rows loaded ahead of the additions, per lane */

/* keys[0, n_pow2) = the (row, i) keys of index[0, count), padded with the largest key; n_pow2 a power of
 * two >= count. Every thread of the block calls it. */
template <class K>
__device__ void load_keys(K *keys, const int32_t *index, int count, int n_pow2, int ibits) {
  for (int e = threadIdx.x; e < n_pow2; e += blockDim.x)
    keys[e] = e < count ? ((K)(uint32_t)index[e] << ibits) | (K)e : ~(K)0;
  __syncthreads();
}

/* Ascending bitonic sort of keys[0, n_pow2) by the whole block: for each merge size k and distance j,
 * pair p compares positions lo and lo + j, lo = p with a 0 bit inserted at j, ascending where lo & k is
 * 0. Keys are unique (padding aside, which sorts last), so the result is the one sorted order. */
template <class K> __device__ void block_bitonic_sort(K *keys, int n_pow2) {
  for (int k = 2; k <= n_pow2; k <<= 1)
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int p = threadIdx.x; p < n_pow2 / 2; p += blockDim.x) {
        const int lo = ((p & ~(j - 1)) << 1) | (p & (j - 1)), hi = lo | j;
        const K a = keys[lo], b = keys[hi];
        if ((a > b) == ((lo & k) == 0)) {
          keys[lo] = b;
          keys[hi] = a;
        }
      }
      __syncthreads();
    }
}

/* Segments of at least long_min ids are summed by a whole block (below), the others by one warp. With
 * at most kMaxLong such segments: long_min = max(kLongMin, count / kMaxLong). */
constexpr int kLongMin = 128;
constexpr int kMaxLong = 64;
constexpr int kStageRows = 64; /* dy rows a block stages in shared memory per step of a long segment */

__host__ __device__ inline int long_min_for(int count) {
  return count / kMaxLong > kLongMin ? count / kMaxLong : kLongMin;
}

/* The end of the segment of `row` that starts at k: the first position whose key's row is larger
 * (binary search; keys sorted). */
template <class K> __device__ int segment_end(const K *keys, int k, int count, K row, int ibits) {
  int lo = k + 1, hi = count;
  while (lo < hi) {
    const int mid = lo + (hi - lo) / 2;
    if (keys[mid] >> ibits == row) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* dx[row, c] += dy[i, c] over the sorted keys[0, count). Block (x, y) owns columns x·32 .. x·32+31.
 *
 * A long segment (an id repeated long_min times or more: token types, padding) is one chain of
 * dependent additions per column, and one warp cannot keep enough loads in flight to stream it: the
 * block of y = row % gridDim.y takes it whole, all its threads loading kStageRows rows of the 32
 * columns into shared memory per step, then warp 0's lanes adding them in order.
 * Short segments: the warps of all y together own consecutive chunks of sorted positions; a warp sums
 * every short segment that starts in its chunk (to the segment's end, past the chunk if need be), with
 * kPrefetch loads per lane in flight. Every thread of the block calls this. */
template <class K>
__device__ void sum_segments(float *dx, const float *dy, const K *keys, int count, int ibits, size_t cols) {
  HS_SHARED(int[kMaxLong][2], long_seg); /* [begin, end) of this block's long segments */
  HS_SHARED(int, n_long);
  HS_SHARED(float[kStageRows][HS_WARP], stage);
  const int lane = threadIdx.x % HS_WARP, warp = threadIdx.x / HS_WARP, warps_per_block = blockDim.x / HS_WARP;
  const size_t c = (size_t)blockIdx.x * HS_WARP + lane;
  const bool active = c < cols;
  const K imask = ((K)1 << ibits) - 1;
  const int long_min = long_min_for(count);

  /* ---- long segments: this block's list (in any order: they touch distinct rows) */
  if (threadIdx.x == 0) n_long = 0;
  __syncthreads();
  for (int k = threadIdx.x; k < count; k += blockDim.x) {
    const K row = keys[k] >> ibits;
    if ((k > 0 && keys[k - 1] >> ibits == row) || row % gridDim.y != blockIdx.y) continue;
    const int end = segment_end(keys, k, count, row, ibits);
    if (end - k >= long_min) {
      const int j = atomicAdd(&n_long, 1); /* < kMaxLong: at most count / long_min such segments */
      long_seg[j][0] = k;
      long_seg[j][1] = end;
    }
  }
  __syncthreads();
  for (int j = 0; j < n_long; j++) { /* uniform across the block */
    const int begin = long_seg[j][0], end = long_seg[j][1];
    float *d = dx + (size_t)(keys[begin] >> ibits) * cols + c;
    float acc = warp == 0 && active ? *d : 0.0f;
    for (int e0 = begin; e0 < end; e0 += kStageRows) {
      const int rows = end - e0 < kStageRows ? end - e0 : kStageRows;
      for (int r = warp; r < rows; r += warps_per_block)
        if (active) stage[r][lane] = dy[(size_t)(keys[e0 + r] & imask) * cols + c];
      __syncthreads();
      if (warp == 0 && active)
        for (int r = 0; r < rows; r++) acc += stage[r][lane]; /* in ascending i: the CPU's order */
      __syncthreads(); /* stage is refilled by the next step */
    }
    if (warp == 0 && active) *d = acc;
  }

  /* ---- short segments, one warp each */
  const int warps = (int)gridDim.y * warps_per_block, w = (int)blockIdx.y * warps_per_block + warp;
  const int chunk = (count + warps - 1) / warps;
  const int first = w * chunk, last = first + chunk < count ? first + chunk : count;
  for (int k = first; k < last; k++) {
    const K row = keys[k] >> ibits;
    if (k > 0 && keys[k - 1] >> ibits == row) continue; /* not the start of a segment */
    int end = k + 1;
    while (end < count && end - k < long_min && keys[end] >> ibits == row) end++;
    if (end - k >= long_min) { /* a long one, summed above */
      k = segment_end(keys, k, count, row, ibits) - 1;
      continue;
    }
    if (active) {
      float *d = dx + (size_t)row * cols + c;
      float acc = *d;
      int e = k;
      for (; e + kPrefetch <= end; e += kPrefetch) {
        float v[kPrefetch];
        for (int b = 0; b < kPrefetch; b++) v[b] = dy[(size_t)(keys[e + b] & imask) * cols + c];
        for (int b = 0; b < kPrefetch; b++) acc += v[b]; /* in ascending i: the CPU's order */
      }
      for (; e < end; e++) acc += dy[(size_t)(keys[e] & imask) * cols + c];
      *d = acc;
    }
    k = end - 1;
  }
}

/* One launch: every block sorts the keys in its shared memory (n_pow2 * sizeof(K) <= kSharedKeysBytes),
 * then sums its share of the segments. The sort is repeated per block: blocks run side by side, so it
 * costs time once, and it saves a launch and a round trip through device memory. */
template <class K>
__global__ void scatter_add_rows_kernel(float *dx, const float *dy, const int32_t *index, int count, int n_pow2,
                                        int ibits, size_t cols) {
  HS_DYNAMIC_SHARED(K, keys);
  load_keys(keys, index, count, n_pow2, ibits);
  block_bitonic_sort(keys, n_pow2);
  sum_segments(dx, dy, keys, count, ibits, cols);
}

/* More ids than shared memory holds: one block sorts 64-bit keys in device scratch, then
 * scatter_add_sorted_kernel sums (two launches). */
__global__ void sort_row_keys_kernel(uint64_t *keys, const int32_t *index, int count, int n_pow2, int ibits) {
  load_keys(keys, index, count, n_pow2, ibits);
  block_bitonic_sort(keys, n_pow2);
}

__global__ void scatter_add_sorted_kernel(float *dx, const float *dy, const uint64_t *keys, int count, int ibits,
                                          size_t cols) {
  sum_segments(dx, dy, keys, count, ibits, cols);
}

/* ---- pitched row copies ----------------------------------------------------------------------------- */

/* dst[r·dst_ld + c] = src[r·src_ld + c] (ADD: +=, one float add: add_bias' bits); grid (column blocks,
 * rows) both grid-strided; V = 4 moves 16 bytes per thread step (cols, both ld multiples of 4 and both
 * pointers 16-byte aligned: the host checked). */
template <int V, bool ADD>
__global__ void copy_rows_kernel(float *dst, size_t dst_ld, const float *src, size_t src_ld, size_t cols, int rows) {
  const size_t groups = cols / V;
  for (size_t r = blockIdx.y; r < (size_t)rows; r += gridDim.y) {
    const float *s = src + r * src_ld;
    float *d = dst + r * dst_ld;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < groups; k += (size_t)gridDim.x * blockDim.x) {
      if constexpr (V == 4 && ADD) {
        const float4 a = HS_VECTOR_AT(const float4, s)[k];
        float4 y = HS_VECTOR_AT(float4, d)[k];
        y.x += a.x, y.y += a.y, y.z += a.z, y.w += a.w;
        HS_VECTOR_AT(float4, d)[k] = y;
      } else if constexpr (V == 4) {
        HS_VECTOR_AT(float4, d)[k] = HS_VECTOR_AT(const float4, s)[k];
      } else if constexpr (ADD) {
        d[k] += s[k];
      } else {
        d[k] = s[k];
      }
    }
  }
}

/* copy_rows / add_rows: the vector path where the shapes and pointers allow it */
template <bool ADD>
void launch_copy_rows(const hs_backend *be, float *dst, size_t dst_ld, const float *src, size_t src_ld, size_t cols,
                      int rows) {
  cudaStream_t stream = hs_cuda_stream(be);
  const bool vec = cols % 4 == 0 && dst_ld % 4 == 0 && src_ld % 4 == 0 && hs_aligned(dst, 16) && hs_aligned(src, 16);
  const dim3 grid(hs_grid_cols(vec ? cols / 4 : cols), hs_grid_rows_y((size_t)rows));
  if (vec)
    HS_LAUNCH(grid, HS_BLOCK, 0, stream, copy_rows_kernel<4, ADD>)(dst, dst_ld, src, src_ld, cols, rows);
  else
    HS_LAUNCH(grid, HS_BLOCK, 0, stream, copy_rows_kernel<1, ADD>)(dst, dst_ld, src, src_ld, cols, rows);
}

} // namespace

extern "C" void hs_cuda_gather_rows(const hs_backend *be, float *y, const float *x, const int32_t *index, int count,
                                    int cols, int x_rows, int accumulate) {
  (void)x_rows; /* every index is in [0, x_rows): checked while the batch is staged */
  if (count <= 0 || cols <= 0) return;
  const size_t n = (size_t)count * (size_t)cols;
  cudaStream_t stream = hs_cuda_stream(be);
  const bool vec = cols % 4 == 0 && hs_aligned(x, 16) && hs_aligned(y, 16);
  const dim3 grid(hs_grid_cols((size_t)(vec ? cols / 4 : cols)), hs_grid_rows_y((size_t)count));
  if (vec && accumulate)
    HS_LAUNCH(grid, HS_BLOCK, 0, stream, gather_rows_kernel<float, true, 4>)(y, x, index, count, (size_t)cols);
  else if (vec)
    HS_LAUNCH(grid, HS_BLOCK, 0, stream, gather_rows_kernel<float, false, 4>)(y, x, index, count, (size_t)cols);
  else if (accumulate)
    HS_LAUNCH(grid, HS_BLOCK, 0, stream, gather_rows_kernel<float, true, 1>)(y, x, index, count, (size_t)cols);
  else
    HS_LAUNCH(grid, HS_BLOCK, 0, stream, gather_rows_kernel<float, false, 1>)(y, x, index, count, (size_t)cols);
  /* index, the gathered rows of x, y written (and read when accumulating) */
  HS_CUDA_LAUNCHED("gather_rows_kernel", (size_t)count * sizeof(int32_t) + (accumulate ? 3 : 2) * n * sizeof(float));
}

/* bits to hold every value in [0, n): at least 1 */
static int bits_for(size_t n) {
  int b = 1;
  while (b < 63 && ((size_t)1 << b) < n) b++;
  return b;
}

extern "C" void hs_cuda_scatter_add_rows(const hs_backend *be, float *dx, const float *dy, const int32_t *index,
                                         int count, int cols, int dx_rows) {
  /* every index is in [0, dx_rows): checked while the batch is staged */
  if (count <= 0 || cols <= 0) return;
  cudaStream_t stream = hs_cuda_stream(be);
  const int ibits = bits_for((size_t)count), rbits = bits_for((size_t)dx_rows);
  int n_pow2 = 1;
  while (n_pow2 < count) n_pow2 <<= 1;
  /* blocks: one per 32 columns, times enough segment groups to fill the device once (each group's
   * warps share the sorted positions; the grid changes no bits) */
  const size_t tiles = ((size_t)cols + HS_WARP - 1) / HS_WARP;
  size_t groups = ((size_t)hs_cuda_dev(be)->sm_count + tiles - 1) / tiles;
  if (groups > 8) groups = 8;
  if (groups < 1) groups = 1;
  const dim3 grid((unsigned)tiles, (unsigned)groups);
  const size_t touched = (size_t)(count < dx_rows ? count : dx_rows); /* distinct dx rows, at most */
  const size_t sum_bytes = (size_t)count * cols * sizeof(float) + 2 * touched * cols * sizeof(float);
  if (ibits + rbits <= 32 && (size_t)n_pow2 * sizeof(uint32_t) <= (size_t)kSharedKeysBytes) {
    HS_LAUNCH(grid, kSortBlock, (size_t)n_pow2 * sizeof(uint32_t), stream, scatter_add_rows_kernel<uint32_t>)(
        dx, dy, index, count, n_pow2, ibits, (size_t)cols);
    /* index, dy, and the indexed rows of dx read and written once each */
    HS_CUDA_LAUNCHED("scatter_add_rows_kernel", (size_t)count * sizeof(int32_t) + sum_bytes);
  } else if ((size_t)n_pow2 * sizeof(uint64_t) <= (size_t)kSharedKeysBytes) {
    HS_LAUNCH(grid, kSortBlock, (size_t)n_pow2 * sizeof(uint64_t), stream, scatter_add_rows_kernel<uint64_t>)(
        dx, dy, index, count, n_pow2, ibits, (size_t)cols);
    HS_CUDA_LAUNCHED("scatter_add_rows_kernel", (size_t)count * sizeof(int32_t) + sum_bytes);
  } else {
    uint64_t *keys = (uint64_t *)hs_cuda_scratch(be, (size_t)n_pow2 * sizeof(uint64_t));
    HS_LAUNCH(1, kSortBlock, 0, stream, sort_row_keys_kernel)(keys, index, count, n_pow2, ibits);
    /* index read, the keys written (the sort's passes stay in the one block's cache, mostly) */
    HS_CUDA_LAUNCHED("sort_row_keys_kernel", (size_t)count * sizeof(int32_t) + (size_t)n_pow2 * sizeof(uint64_t));
    HS_LAUNCH(grid, kSortBlock, 0, stream, scatter_add_sorted_kernel)(dx, dy, keys, count, ibits, (size_t)cols);
    HS_CUDA_LAUNCHED("scatter_add_sorted_kernel", (size_t)count * sizeof(uint64_t) + sum_bytes);
  }
}

extern "C" void hs_cuda_copy_rows(const hs_backend *be, float *dst, size_t dst_ld, const float *src, size_t src_ld,
                                  size_t cols, int rows) {
  if (rows <= 0 || cols == 0) return;
  hs_cuda_memory_written(dst, ((size_t)(rows - 1) * dst_ld + cols) * sizeof(float));
  launch_copy_rows<false>(be, dst, dst_ld, src, src_ld, cols, rows);
  HS_CUDA_LAUNCHED("copy_rows_kernel", 2 * (size_t)rows * cols * sizeof(float)); /* read + write */
}

extern "C" void hs_cuda_add_rows(const hs_backend *be, float *dst, size_t dst_ld, const float *src, size_t src_ld,
                                 size_t cols, int rows) {
  if (rows <= 0 || cols == 0) return;
  hs_cuda_memory_written(dst, ((size_t)(rows - 1) * dst_ld + cols) * sizeof(float));
  launch_copy_rows<true>(be, dst, dst_ld, src, src_ld, cols, rows);
  HS_CUDA_LAUNCHED("add_rows_kernel", 3 * (size_t)rows * cols * sizeof(float)); /* src read, dst read + write */
}
