// Self-test kernels of the emulated CUDA device: correct kernels and kernels with the bugs the
// emulator must expose. Written the way hetseq kernels are (kernels/hs_cuda.h), so that this file
// compiles unchanged with nvcc (tests/cuda_emu/test_emu_nvcc.sh) and with the host compiler.
#include <type_traits>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include "hs_cuda.h"
#include "selftest_kernels.h"

namespace {

constexpr unsigned kFull = 0xffffffffu;

template <int BLOCK> __global__ void block_sum(const float *x, float *partial, int n) {
  HS_SHARED(float[BLOCK], s);
  const int t = threadIdx.x;
  const int i = blockIdx.x * BLOCK + t;
  s[t] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] = s[0];
}

template <int BLOCK> __global__ void block_sum_missing_sync(const float *x, float *partial, int n) {
  HS_SHARED(float[BLOCK], s);
  const int t = threadIdx.x;
  const int i = blockIdx.x * BLOCK + t;
  s[t] = i < n ? x[i] : 0.0f;
  // BUG: no __syncthreads() here; the first round reads s[t + stride] that another thread may not
  // have written yet
  for (int stride = BLOCK / 2; stride > 0; stride /= 2) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) partial[blockIdx.x] = s[0];
}

__device__ float warp_reduce_xor(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFull, v, offset);
  return v;
}

__global__ void warp_sum(const float *x, float *totals, int n) {
  HS_SHARED(float[32], warp_totals);
  const int t = threadIdx.x, lane = t % 32, warp = t / 32, nwarps = (blockDim.x + 31) / 32;
  const int i = blockIdx.x * blockDim.x + t;
  const float v = warp_reduce_xor(i < n ? x[i] : 0.0f); // every lane holds its warp's sum
  if (lane == 0) warp_totals[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < nwarps ? warp_totals[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) w += __shfl_down_sync(kFull, w, offset);
    if (lane == 0) totals[blockIdx.x] = w;
  }
}

__global__ void histogram(const int *values, int n, int *bins, int nbins, unsigned long long *count, float *sum,
                          int *maxv) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    atomicAdd(&bins[values[i] % nbins], 1);
    atomicAdd(count, 1ull);
    atomicAdd(sum, static_cast<float>(values[i]));
    atomicMax(maxv, values[i]);
  }
}

__global__ void index_grid(int *hits, int width, int height) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < width && y < height) hits[y * width + x] += 1; // each element has exactly one thread
}

__global__ void warp_functions(const int *x, int *scan16, int *bcast8, unsigned *ballot, int *any_all) {
  HS_SHARED(int[64], staged);
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int v = x[i];
  int sum = v;
  for (int d = 1; d < 16; d *= 2) {
    const int up = __shfl_up_sync(kFull, sum, d, 16);
    if (i % 16 >= d) sum += up;
  }
  staged[threadIdx.x] = sum;
  __syncwarp();
  scan16[i ^ 1] = staged[threadIdx.x ^ 1]; // each lane stores its neighbour's result
  bcast8[i] = __shfl_sync(kFull, v, 5, 8);
  ballot[i] = __ballot_sync(kFull, v > 0);
  any_all[i] = __any_sync(kFull, v > 0) + 2 * __all_sync(kFull, v > 0);
}

__global__ void dynamic_reverse(const float *x, float *y, int n) {
  HS_DYNAMIC_SHARED(float, buf);
  const int t = threadIdx.x, base = blockIdx.x * blockDim.x;
  buf[t] = base + t < n ? x[base + t] : 0.0f;
  __syncthreads();
  const int r = blockDim.x - 1 - t;
  if (base + t < n) y[base + t] = buf[r];
}

__global__ void spin_lock(int *lock, int *counter) {
  while (atomicCAS(lock, 0, 1) != 0) {
  }
  __threadfence();
  *counter = *counter + 1; // protected by the lock
  __threadfence();
  atomicExch(lock, 0);
}

__global__ void barrier_votes(const int *x, int *out) {
  const int p = x[threadIdx.x] > 0;
  const int count = __syncthreads_count(p), all = __syncthreads_and(p), any = __syncthreads_or(p);
  if (threadIdx.x == 0) {
    out[0] = count;
    out[1] = all;
    out[2] = any;
  }
}

__global__ void block_order(int *counter, int *order) {
  if (threadIdx.x == 0) order[atomicAdd(counter, 1)] = blockIdx.x;
}

__global__ void produce(float *x, int n, float base) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = base + static_cast<float>(i);
}

__global__ void consume(const float *x, float *y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}

// y = a*b + c written as two operations: nvcc (--fmad=true, its default) contracts it to one fma, as
// the emulated kernels' compiler does (configure.ac, CUDA_EMU_KERNEL_CXXFLAGS)
__global__ void mul_add(const float *a, const float *b, const float *c, float *y, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a[i] * b[i] + c[i];
}

// blocks from sync_from on reverse x through shared memory behind a __syncthreads (data-dependent:
// the barrier is reached only there); the others double x and never wait
__global__ void maybe_sync_reverse(const float *x, float *y, int sync_from) {
  HS_SHARED(float[64], s);
  const int t = threadIdx.x, i = blockIdx.x * 64 + t;
  if (static_cast<int>(blockIdx.x) < sync_from) {
    y[i] = 2.0f * x[i];
    return;
  }
  s[t] = x[i];
  __syncthreads();
  y[i] = s[63 - t];
}

// warps whose first element is positive replace x by the warp's sum (__shfl_xor_sync); the others
// copy x: some warps of a block exit without waiting while others wait in a warp function
__global__ void maybe_warp_sum(const float *x, float *y) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int first = i - static_cast<int>(threadIdx.x % 32);
  y[i] = x[first] > 0.0f ? warp_reduce_xor(x[i]) : x[i];
}

__global__ void sync_in_branch(int *out) {
  if (threadIdx.x < blockDim.x / 2) __syncthreads(); // BUG: only half of the block reaches it
  out[threadIdx.x] = 1;
}

__global__ void early_return_sync(const float *x, float *y, int n) {
  HS_SHARED(float[128], s);
  const int t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
  if (i >= n) return; // BUG: these threads never reach the __syncthreads below
  s[t] = x[i];
  __syncthreads();
  y[i] = s[t] + s[(t + 1) % blockDim.x];
}

__global__ void read_uninit_shared(float *out) {
  HS_SHARED(float[64], s);
  if (threadIdx.x == 0) s[0] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x]; // BUG: only s[0] was written
}

__global__ void write_past_end(float *x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) x[i] = 1.0f; // BUG: <= instead of <
}

__global__ void shfl_from_exited(const float *x, float *y) {
  const int lane = threadIdx.x % 32;
  if (lane >= 16) return; // BUG: the shuffle below reads lanes 16..31
  y[lane] = __shfl_down_sync(kFull, x[lane], 16);
}

__global__ void warp_deadlock(int *out) {
  if (threadIdx.x % 32 < 16)
    __syncwarp(); // BUG: waits for lanes 16..31, which wait at the __syncthreads below
  else
    __syncthreads();
  out[threadIdx.x] = 1;
}

// One warp: C[16,16] (+)= A[16,k] B[k,16] with nvcuda::wmma from global memory, W = __half or
// __nv_bfloat16 bit patterns; A row-major (lda = k), B row-major [k][16] or column-major (Bᵀ
// row-major [16][k]); C loaded and stored row- or column-major with ldc = 16.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
constexpr bool kBf16Wmma = false; // bf16 fragments need sm_80
#else
constexpr bool kBf16Wmma = true;
#endif

template <class W, class BL>
__device__ void wmma_product_body(const unsigned short *a, const unsigned short *b, float *c, int k, int accumulate,
                                  int c_col) {
  namespace wmma = nvcuda::wmma;
  const wmma::layout_t cl = c_col ? wmma::mem_col_major : wmma::mem_row_major;
  const bool bcol = std::is_same<BL, wmma::col_major>::value;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  if (accumulate) {
    wmma::load_matrix_sync(acc, c, 16, cl);
  } else {
    wmma::fill_fragment(acc, 0.0f);
  }
  const W *aw = reinterpret_cast<const W *>(a), *bw = reinterpret_cast<const W *>(b);
  wmma::fragment<wmma::matrix_a, 16, 16, 16, W, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, W, BL> fb;
  for (int kk = 0; kk < k; kk += 16) {
    wmma::load_matrix_sync(fa, aw + kk, k);
    wmma::load_matrix_sync(fb, bcol ? bw + kk : bw + kk * 16, bcol ? k : 16);
    wmma::mma_sync(acc, fa, fb, acc);
  }
  wmma::store_matrix_sync(c, acc, 16, cl);
}

template <class W, class BL>
__global__ void wmma_product(const unsigned short *a, const unsigned short *b, float *c, int k, int accumulate,
                             int c_col) {
  if constexpr (!std::is_same<W, __nv_bfloat16>::value || kBf16Wmma)
    wmma_product_body<W, BL>(a, b, c, k, accumulate, c_col);
}

// Which matrix element each lane's x[t] holds (one warp): the accumulator loaded from c (16 x 16 floats,
// c[e] = e), then A (row-major) and B (column-major) from a (16 x 16 halves, a[e] = e: exact);
// out[k·256 + lane·8 + t] = x[t] of fragment k (0 C, 1 A, 2 B).
__global__ void wmma_positions(const unsigned short *a, const float *c, float *out) {
  namespace wmma = nvcuda::wmma;
  const __half *h = reinterpret_cast<const __half *>(a);
  const int lane = threadIdx.x % 32;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
  wmma::load_matrix_sync(acc, c, 16, wmma::mem_row_major);
  wmma::load_matrix_sync(fa, h, 16);
  wmma::load_matrix_sync(fb, h, 16);
  for (int t = 0; t < acc.num_elements; t++) out[lane * 8 + t] = acc.x[t];
  for (int t = 0; t < fa.num_elements; t++) out[256 + lane * 8 + t] = __half2float(fa.x[t]);
  for (int t = 0; t < fb.num_elements; t++) out[512 + lane * 8 + t] = __half2float(fb.x[t]);
}

// Misuse of nvcuda::wmma (a: 16 x 64 halves, c: 16 x 16 floats), by mode:
//   0 correct; 1 lanes 0..15 and 16..31 load at different call sites; 2 lane 31 returns first;
//   3 the pointer is 16 bytes past a 32-byte boundary; 4 ldm 20 (not a multiple of 8 halves);
//   5 lanes pass different pointers; 6 the accumulator is stored before it was filled (NaN, no report);
//   7 a shared array declared with HS_SHARED (2-byte alignment), not HS_SHARED_ALIGNED(32, ...)
__global__ void wmma_misuse(const unsigned short *a, float *c, int mode) {
  namespace wmma = nvcuda::wmma;
  const __half *h = reinterpret_cast<const __half *>(a);
  const int lane = threadIdx.x % 32;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  if (mode != 6) wmma::fill_fragment(acc, 0.0f);
  if (mode == 2 && lane == 31) return;
  if (mode == 1 && lane < 16) {
    wmma::load_matrix_sync(fa, h, 64);
  } else {
    HS_SHARED(__half[16 * 64], plain); // declared without HS_SHARED_ALIGNED: 2-byte alignment only
    if (mode == 7) {
      for (int i = lane; i < 16 * 64; i += 32) plain[i] = h[i];
      __syncwarp();
    }
    const __half *p = mode == 3 ? h + 8 : mode == 5 ? h + 16 * (lane % 2) : mode == 7 ? plain : h;
    wmma::load_matrix_sync(fa, p, mode == 4 ? 20 : 64);
  }
  wmma::load_matrix_sync(fb, h + 16, 64);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
}

// The ordering rules of kernels/tile_mma.cuh: lanes write a 16 x 16 tile A of halves into shared memory,
// the warp loads it as A and (column-major) as B, stores A Aᵀ into a shared fp32 tile and the lanes copy
// that out. mode bit 0: __syncwarp() between the writes and the loads; bit 1: between the store and
// the reads. On a GPU both are needed; the emulator reports the first missing and gives NaN for the
// second.
__global__ void wmma_ordering(const unsigned short *a, float *c, int mode) {
  namespace wmma = nvcuda::wmma;
  const __half *h = reinterpret_cast<const __half *>(a);
  const int lane = threadIdx.x % 32;
  HS_SHARED_ALIGNED(32, __half[16 * 16], tile_a);
  HS_SHARED_ALIGNED(32, float[16 * 16], tile_c);
  for (int i = lane; i < 256; i += 32) tile_a[i] = h[i];
  if (mode & 1) __syncwarp();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(fa, tile_a, 16);
  wmma::load_matrix_sync(fb, tile_a, 16);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(tile_c, acc, 16, wmma::mem_row_major);
  if (mode & 2) __syncwarp();
  for (int i = lane; i < 256; i += 32) c[i] = tile_c[i];
}

// A float4 load from x + offset: aligned where offset is a multiple of 4 (x from cudaMalloc)
__global__ void vector_load(const float *x, float *y, int offset) {
  const float4 v = HS_VECTOR_AT(const float4, x + offset)[threadIdx.x];
  y[threadIdx.x] = v.x + v.y + v.z + v.w;
}

int blocks_for(int n, int block) { return (n + block - 1) / block; }

} // namespace

void st_block_sum(const float *x, float *partial, int n, cudaStream_t s) {
  HS_LAUNCH(blocks_for(n, 256), 256, 0, s, block_sum<256>)(x, partial, n);
}
void st_block_sum_missing_sync(const float *x, float *partial, int n, cudaStream_t s) {
  HS_LAUNCH(blocks_for(n, 256), 256, 0, s, block_sum_missing_sync<256>)(x, partial, n);
}
void st_warp_sum(const float *x, float *totals, int n, int block, cudaStream_t s) {
  HS_LAUNCH(blocks_for(n, block), block, 0, s, warp_sum)(x, totals, n);
}
void st_histogram(const int *values, int n, int *bins, int nbins, unsigned long long *count, float *sum, int *maxv,
                  cudaStream_t s) {
  HS_LAUNCH(7, 96, 0, s, histogram)(values, n, bins, nbins, count, sum, maxv);
}
void st_index_grid(int *hits, int width, int height, dim3 block, cudaStream_t s) {
  const dim3 grid(blocks_for(width, block.x), blocks_for(height, block.y));
  HS_LAUNCH(grid, block, 0, s, index_grid)(hits, width, height);
}
void st_warp_functions(const int *x, int *scan16, int *bcast8, unsigned *ballot, int *any_all, cudaStream_t s) {
  HS_LAUNCH(1, 64, 0, s, warp_functions)(x, scan16, bcast8, ballot, any_all);
}
void st_dynamic_reverse(const float *x, float *y, int n, int block, size_t shmem_bytes, cudaStream_t s) {
  HS_LAUNCH(blocks_for(n, block), block, shmem_bytes, s, dynamic_reverse)(x, y, n);
}
cudaError_t st_dynamic_reverse_allow(int bytes) {
  return cudaFuncSetAttribute(dynamic_reverse, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
}
cudaError_t st_dynamic_reverse_occupancy(int *blocks, int block, size_t shmem_bytes) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, dynamic_reverse, block, shmem_bytes);
}
void st_spin_lock(int *lock, int *counter, int block, cudaStream_t s) {
  HS_LAUNCH(1, block, 0, s, spin_lock)(lock, counter);
}
void st_barrier_votes(const int *x, int *out, int block, cudaStream_t s) {
  HS_LAUNCH(1, block, 0, s, barrier_votes)(x, out);
}
void st_block_order(int *counter, int *order, int nblocks, cudaStream_t s) {
  HS_LAUNCH(nblocks, 32, 0, s, block_order)(counter, order);
}
void st_produce(float *x, int n, float base, cudaStream_t s) {
  HS_LAUNCH(blocks_for(n, 128), 128, 0, s, produce)(x, n, base);
}
void st_consume(const float *x, float *y, int n, cudaStream_t s) {
  HS_LAUNCH(blocks_for(n, 128), 128, 0, s, consume)(x, y, n);
}
void st_mul_add(const float *a, const float *b, const float *c, float *y, int n, cudaStream_t s) {
  HS_LAUNCH(blocks_for(n, 128), 128, 0, s, mul_add)(a, b, c, y, n);
}
void st_maybe_sync_reverse(const float *x, float *y, int nblocks, int sync_from, cudaStream_t s) {
  HS_LAUNCH(nblocks, 64, 0, s, maybe_sync_reverse)(x, y, sync_from);
}
void st_maybe_warp_sum(const float *x, float *y, int nblocks, int block, cudaStream_t s) {
  HS_LAUNCH(nblocks, block, 0, s, maybe_warp_sum)(x, y);
}
bool st_kernels_contract() {
#if defined(__CUDACC__) || defined(__FMA__) || defined(__ARM_FEATURE_FMA)
  return true; // nvcc's device code, or a host compiler that has a fused multiply-add to contract to
#else
  return false;
#endif
}
void st_sync_in_branch(int *out, int block, cudaStream_t s) { HS_LAUNCH(1, block, 0, s, sync_in_branch)(out); }
void st_early_return_sync(const float *x, float *y, int n, cudaStream_t s) {
  HS_LAUNCH(blocks_for(n, 128), 128, 0, s, early_return_sync)(x, y, n);
}
void st_read_uninit_shared(float *out, int block, cudaStream_t s) {
  HS_LAUNCH(1, block, 0, s, read_uninit_shared)(out);
}
void st_write_past_end(float *x, int n, cudaStream_t s) {
  HS_LAUNCH(blocks_for(n + 1, 64), 64, 0, s, write_past_end)(x, n);
}
void st_shfl_from_exited(const float *x, float *y, cudaStream_t s) {
  HS_LAUNCH(1, 32, 0, s, shfl_from_exited)(x, y);
}
void st_warp_deadlock(int *out, cudaStream_t s) { HS_LAUNCH(1, 64, 0, s, warp_deadlock)(out); }
void st_wmma_product(const unsigned short *a, const unsigned short *b, float *c, int k, bool bf16, bool b_col,
                     bool accumulate, bool c_col, cudaStream_t s) {
  using nvcuda::wmma::col_major;
  using nvcuda::wmma::row_major;
  const int acc = accumulate, ccol = c_col;
  if (bf16 && b_col) HS_LAUNCH(1, 32, 0, s, wmma_product<__nv_bfloat16, col_major>)(a, b, c, k, acc, ccol);
  if (bf16 && !b_col) HS_LAUNCH(1, 32, 0, s, wmma_product<__nv_bfloat16, row_major>)(a, b, c, k, acc, ccol);
  if (!bf16 && b_col) HS_LAUNCH(1, 32, 0, s, wmma_product<__half, col_major>)(a, b, c, k, acc, ccol);
  if (!bf16 && !b_col) HS_LAUNCH(1, 32, 0, s, wmma_product<__half, row_major>)(a, b, c, k, acc, ccol);
}
void st_wmma_positions(const unsigned short *a, const float *c, float *out, cudaStream_t s) {
  HS_LAUNCH(1, 32, 0, s, wmma_positions)(a, c, out);
}
void st_wmma_misuse(const unsigned short *a, float *c, int mode, int block, cudaStream_t s) {
  HS_LAUNCH(1, block, 0, s, wmma_misuse)(a, c, mode);
}
void st_vector_load(const float *x, float *y, int offset, int threads, cudaStream_t s) {
  HS_LAUNCH(1, threads, 0, s, vector_load)(x, y, offset);
}
void st_wmma_ordering(const unsigned short *a, float *c, int mode, cudaStream_t s) {
  HS_LAUNCH(1, 32, 0, s, wmma_ordering)(a, c, mode);
}
