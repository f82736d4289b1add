/* Fixed-shape warp and block reductions, the one copy every row kernel uses (attention, rel_attention,
 * layernorm, loss, multi_tensor). Deterministic by shape: a warp combines its 32 lanes by an xor
 * butterfly of __shfl_xor_sync (lane i adds v_i + v_{i^k}, lane i^k adds v_{i^k} + v_i: the same bits,
 * so every lane ends with the same result whatever the schedule), and a block sums its warps' results in
 * warp order. Each combines in exactly this order on the GPU and on the emulated device, so a kernel's
 * bits do not depend on which file it lives in. Every lane of the warp (every thread of the block for
 * block_sum) must call them: the loops that reach them are warp-uniform.
 * Templates in an unnamed namespace: each kernel file gets its own copy and instantiates only the ones it
 * uses (T is float or double). */
#ifndef HS_KERNELS_WARP_CUH
#define HS_KERNELS_WARP_CUH

#include "hs_cuda.h"
#include "hs_launch.h"

namespace {

constexpr unsigned kWarpFullMask = 0xffffffffu;

/* Σ of v over each group of W adjacent lanes (W a power of two up to 32: lanes with the same lane / W),
 * the butterfly restricted to the group; every lane of the warp calls it. */
template <int W, class T> __device__ __forceinline__ T group_sum(T v) {
  static_assert(W > 0 && W <= HS_WARP && (W & (W - 1)) == 0, "a group is a power of two of lanes");
  for (int k = W / 2; k > 0; k /= 2) v += __shfl_xor_sync(kWarpFullMask, v, k);
  return v;
}

/* max of v over each group of W adjacent lanes (NaN: as `u > v ? u : v` takes it, lane by lane). */
template <int W, class T> __device__ __forceinline__ T group_max(T v) {
  static_assert(W > 0 && W <= HS_WARP && (W & (W - 1)) == 0, "a group is a power of two of lanes");
  for (int k = W / 2; k > 0; k /= 2) {
    const T u = __shfl_xor_sync(kWarpFullMask, v, k);
    v = u > v ? u : v;
  }
  return v;
}

/* Σ and max of v over the 32 lanes. */
template <class T> __device__ __forceinline__ T warp_sum(T v) { return group_sum<HS_WARP>(v); }
template <class T> __device__ __forceinline__ T warp_max(T v) { return group_max<HS_WARP>(v); }

/* (max, first index of the max) over a row whose lane-strided part this lane holds in (m, best);
 * best = INT_MAX for a lane without columns. The combine takes the larger value, the smaller index on
 * equal values: a total order, so the butterfly gives every lane the row's first maximum. */
template <class T> __device__ __forceinline__ void warp_argmax(T &m, int &best) {
  for (int k = HS_WARP / 2; k > 0; k /= 2) {
    const T om = __shfl_xor_sync(kWarpFullMask, m, k);
    const int ob = __shfl_xor_sync(kWarpFullMask, best, k);
    if (om > m || (om == m && ob < best)) {
      m = om;
      best = ob;
    }
  }
}

/* Σ of v over the block (HS_BLOCK threads), the same bits in every thread: warp butterflies, then the
 * warps' sums in warp order. */
template <class T> __device__ T block_sum(T v) {
  HS_SHARED(T[HS_BLOCK / HS_WARP], warp_sums);
  v = warp_sum(v);
  if (threadIdx.x % HS_WARP == 0) warp_sums[threadIdx.x / HS_WARP] = v;
  __syncthreads();
  T s = 0;
  for (int w = 0; w < HS_BLOCK / HS_WARP; w++) s += warp_sums[w];
  __syncthreads(); /* warp_sums is rewritten by the next call */
  return s;
}

/* (max, first index of the max) over the block, each thread holding its part in (m, best) as for
 * warp_argmax: the warps' results, then the warps in warp order by the same rule. Every thread gets the
 * result. */
template <class T> __device__ void block_argmax(T &m, int &best) {
  HS_SHARED(T[HS_BLOCK / HS_WARP], warp_m);
  HS_SHARED(int[HS_BLOCK / HS_WARP], warp_best);
  warp_argmax(m, best);
  if (threadIdx.x % HS_WARP == 0) warp_m[threadIdx.x / HS_WARP] = m, warp_best[threadIdx.x / HS_WARP] = best;
  __syncthreads();
  m = warp_m[0], best = warp_best[0];
  for (int w = 1; w < HS_BLOCK / HS_WARP; w++)
    if (warp_m[w] > m || (warp_m[w] == m && warp_best[w] < best)) m = warp_m[w], best = warp_best[w];
  __syncthreads(); /* warp_m is rewritten by the next call */
}

} // namespace

#endif
