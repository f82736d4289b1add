/* Split and merge attention heads on the CUDA backend: between a token-major tensor src[batch, rows, ld]
 * whose columns col0 + p·H + h·d + e (p < parts, H = heads·d) hold `parts` multi-head tensors (q | k | v of
 * a projection, or one context), and head-major copies part[p][batch, heads, rows, d], in which unit
 * (s, h) starts at (s·heads + h)·rows·d: ONE stride over the batch × heads units, so an attention product
 * is one strided-batched GEMM (kernels/attention.cu, kernels/rel_attention.cu). Exact copies, one element
 * per thread, contiguous in e on both sides. */
#ifndef HS_KERNELS_HEADS_CUH
#define HS_KERNELS_HEADS_CUH

#include <stddef.h>

#include "hs_cuda.h"
#include "hs_launch.h"

#include "backend/cuda/cuda_check.h"

namespace {

/* Up to three head-major tensors [batch, heads, rows, d]. */
template <class T> struct head_parts {
  T *part[3];
};

struct heads_shape {
  size_t batch, rows; /* samples, rows (tokens) per sample */
  int ld, col0, parts, heads, d;
};

/* element e of the token-major side: (token t, column c of the parts) and its head-major offset */
__device__ __forceinline__ size_t head_major_offset(const heads_shape &sh, size_t t, size_t in_part) {
  const size_t s = t / sh.rows, i = t % sh.rows, h = in_part / (size_t)sh.d;
  return ((s * (size_t)sh.heads + h) * sh.rows + i) * (size_t)sh.d + in_part % (size_t)sh.d;
}

template <class T> __global__ void split_heads_kernel(head_parts<T> dst, const T *src, heads_shape sh) {
  const size_t H = (size_t)sh.heads * (size_t)sh.d, width = (size_t)sh.parts * H, n = sh.batch * sh.rows * width;
  for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
    const size_t t = e / width, c = e % width;
    dst.part[c / H][head_major_offset(sh, t, c % H)] = src[t * (size_t)sh.ld + (size_t)sh.col0 + c];
  }
}

template <class T> __global__ void merge_heads_kernel(T *dst, head_parts<const T> src, heads_shape sh) {
  const size_t H = (size_t)sh.heads * (size_t)sh.d, width = (size_t)sh.parts * H, n = sh.batch * sh.rows * width;
  for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
    const size_t t = e / width, c = e % width;
    dst[t * (size_t)sh.ld + (size_t)sh.col0 + c] = src.part[c / H][head_major_offset(sh, t, c % H)];
  }
}

/* part[p] = head-major copy of the p-th tensor of src (one launch) */
template <class T> void split_heads(cudaStream_t stream, head_parts<T> dst, const T *src, heads_shape sh) {
  const size_t n = sh.batch * sh.rows * (size_t)sh.parts * (size_t)sh.heads * (size_t)sh.d;
  if (n == 0) return;
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, stream, split_heads_kernel<T>)(dst, src, sh);
  HS_CUDA_LAUNCHED("split_heads_kernel", 2 * n * sizeof(T)); /* each element read once, written once */
}

/* the inverse: src's head-major tensors written into dst's columns (one launch) */
template <class T> void merge_heads(cudaStream_t stream, T *dst, head_parts<const T> src, heads_shape sh) {
  const size_t n = sh.batch * sh.rows * (size_t)sh.parts * (size_t)sh.heads * (size_t)sh.d;
  if (n == 0) return;
  HS_LAUNCH(hs_grid_for(n), HS_BLOCK, 0, stream, merge_heads_kernel<T>)(dst, src, sh);
  HS_CUDA_LAUNCHED("merge_heads_kernel", 2 * n * sizeof(T));
}

} // namespace

#endif
