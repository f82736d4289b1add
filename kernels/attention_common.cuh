/* What the two attention kernel files (attention.cu, rel_attention.cu) share, one copy: the warp-per-row
 * loop, attention dropout read back from the sign bits of the stored probabilities (P' and the softmax
 * backward through the dropout: the CPU's rule, src/backend/cpu/cpu_attention_rows.h) and the host-side
 * batched per-(sample, head) GEMM and scratch regions. Templates and functions in an unnamed namespace, as in
 * warp.cuh: each kernel file gets its own copy. */
#ifndef HS_KERNELS_ATTENTION_COMMON_CUH
#define HS_KERNELS_ATTENTION_COMMON_CUH

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "warp.cuh"

#include "backend/cuda/cuda_blas.h"

/* Rows go one per warp, HS_ROWS_PER_BLOCK per block, grid-strided over hs_grid_for_rows(rows) blocks.
 * The row index is the same for every lane of a warp, so the loop (and the shuffles in it) is
 * warp-uniform; HS_BLOCK is a multiple of 32, so every warp is full. */
#define FOR_EACH_WARP_ROW(r, rows)                                                          \
  for (size_t r = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / HS_WARP; r < (rows);    \
       r += (size_t)gridDim.x * blockDim.x / HS_WARP)

namespace {

/* kept[n] = P' = keep·P/(1-p), keep = !signbit(P) */
template <class T> __global__ void kept_probs_kernel(T *kept, const T *probs, size_t n, float keep_scale) {
  for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (size_t)gridDim.x * blockDim.x) {
    const float pe = (float)probs[e];
    kept[e] = (T)(signbit(pe) ? 0.0f : pe * keep_scale);
  }
}

/* In place on dp [rows, n] (dP' on entry, dS on return), row by row:
 *   dropout:  g_j = keep_j·dP'_j/(1-p);  dS_j = |P_j|·(g_j - Σ_k |P_k|·g_k)
 *   none:     dS_j = P_j·(dP_j - Σ_k P_k·dP_k) */
template <class T>
__global__ void softmax_dropout_backward_kernel(T *dp, const T *probs, size_t rows, int n, int dropout,
                                                float keep_scale) {
  const int lane = threadIdx.x % HS_WARP;
  FOR_EACH_WARP_ROW(r, rows) {
    T *g = dp + r * (size_t)n;
    const T *pr = probs + r * (size_t)n;
    float dot = 0.0f;
    if (dropout) {
      for (int j = lane; j < n; j += HS_WARP) {
        const float pj = (float)pr[j];
        const float gj = signbit(pj) ? 0.0f : (float)g[j] * keep_scale;
        g[j] = (T)gj; /* this lane's own element, re-read below */
        dot += fabsf(pj) * gj;
      }
      dot = warp_sum(dot);
      for (int j = lane; j < n; j += HS_WARP) g[j] = (T)(fabsf((float)pr[j]) * ((float)g[j] - dot));
    } else {
      for (int j = lane; j < n; j += HS_WARP) dot += (float)pr[j] * (float)g[j];
      dot = warp_sum(dot);
      for (int j = lane; j < n; j += HS_WARP) g[j] = (T)((float)pr[j] * ((float)g[j] - dot));
    }
  }
}

/* ---- host side ------------------------------------------------------------------------------------------ */

/* C_u = alpha·op(A_u)·op(B_u) for every unit u = s·heads + h: one strided-batched call (every operand is
 * unit-ordered with one stride: sa, sb, sc elements from one unit to the next). */
inline void gemm_units(const hs_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                       const float *a, int lda, int64_t sa, const float *b, int ldb, int64_t sb, float *c, int ldc,
                       int64_t sc, size_t units) {
  hs_cuda_gemm_strided_batched(be, trans_a, trans_b, m, n, k, alpha, a, lda, sa, b, ldb, sb, 0.0f, c, ldc, sc,
                               (int)units);
}

/* Bytes of a float region of the scratch, rounded up so the next region stays aligned like a
 * cudaMalloc'ed pointer (256 bytes). */
inline size_t region_bytes(size_t floats) { return (floats * sizeof(float) + 255) / 256 * 256; }

} // namespace

#endif
