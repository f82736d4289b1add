// Launch wrappers of the emulator's self-test kernels (tests/cuda_emu/selftest_kernels.cu). The
// kernels are written as hetseq kernels are, through kernels/hs_cuda.h, and the same file is compiled
// by nvcc (test_emu_nvcc.sh) and by the host compiler for the emulated device.
#ifndef HS_EMU_SELFTEST_KERNELS_H
#define HS_EMU_SELFTEST_KERNELS_H
#include <cuda_runtime_api.h>

// ---- correct kernels -------------------------------------------------------------------------------
// partial[b] = sum of x over block b (256 threads, shared-memory tree with __syncthreads)
void st_block_sum(const float *x, float *partial, int n, cudaStream_t s);
// totals[b] = sum of x over block b, by warp shuffles (__shfl_xor_sync, then __shfl_down_sync)
void st_warp_sum(const float *x, float *totals, int n, int block, cudaStream_t s);
// bins[v % nbins] += 1, *count += 1, *sum += v, *maxv = max(v): atomicAdd (int, unsigned long long,
// float), atomicMax
void st_histogram(const int *values, int n, int *bins, int nbins, unsigned long long *count, float *sum, int *maxv,
                  cudaStream_t s);
// hits[y * width + x] += 1 for every (x, y) of a 2-D grid of 2-D blocks (hits starts at 0)
void st_index_grid(int *hits, int width, int height, dim3 block, cudaStream_t s);
// per element i of 64: inclusive scan of x within 16-lane segments (__shfl_up_sync), x of lane 5 of
// each 8-lane segment (__shfl_sync), __ballot_sync(x > 0), and __any_sync + 2 * __all_sync of x > 0;
// scan16 goes through shared memory ordered by __syncwarp
void st_warp_functions(const int *x, int *scan16, int *bcast8, unsigned *ballot, int *any_all, cudaStream_t s);
// y = x reversed within each block, through dynamic shared memory (shmem_bytes >= block * 4)
void st_dynamic_reverse(const float *x, float *y, int n, int block, size_t shmem_bytes, cudaStream_t s);
// cudaFuncSetAttribute(dynamic_reverse, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes)
cudaError_t st_dynamic_reverse_allow(int bytes);
// cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, dynamic_reverse, block, shmem_bytes)
cudaError_t st_dynamic_reverse_occupancy(int *blocks, int block, size_t shmem_bytes);
// every thread of one block takes a spin lock (atomicCAS / atomicExch) and increments *counter
void st_spin_lock(int *lock, int *counter, int block, cudaStream_t s);
// out[0..2] = __syncthreads_count / _and / _or of x[t] > 0 over one block of `block` threads
void st_barrier_votes(const int *x, int *out, int block, cudaStream_t s);
// order[k] = the k-th block (of nblocks) to start; *counter must start at 0
void st_block_order(int *counter, int *order, int nblocks, cudaStream_t s);
// x[i] = base + i
void st_produce(float *x, int n, float base, cudaStream_t s);
// y[i] = 2 * x[i]
void st_consume(const float *x, float *y, int n, cudaStream_t s);
// y[i] = a[i] * b[i] + c[i], written as a product and a sum (contracted to one fma where the kernels
// are compiled with FMA contraction, as nvcc --fmad=true does)
void st_mul_add(const float *a, const float *b, const float *c, float *y, int n, cudaStream_t s);
// blocks b < sync_from: y = 2 x; the others: y = x reversed within the block, through shared memory
// behind a __syncthreads (64 threads per block, nblocks * 64 elements)
void st_maybe_sync_reverse(const float *x, float *y, int nblocks, int sync_from, cudaStream_t s);
// per warp (block a multiple of 32, nblocks * block elements): y = the warp's sum of x
// (__shfl_xor_sync) where the warp's first x is positive, else y = x
void st_maybe_warp_sum(const float *x, float *y, int nblocks, int block, cudaStream_t s);
// one warp: C[16,16] (+)= A[16,k] B[k,16] by nvcuda::wmma (k a multiple of 16) from global memory: A
// row-major [16][k] of __half (bf16: __nv_bfloat16) bit patterns; B row-major [k][16] or, b_col,
// Bᵀ row-major [16][k]; C (ldc 16) row-major or, c_col, column-major; accumulate: C += A B
void st_wmma_product(const unsigned short *a, const unsigned short *b, float *c, int k, bool bf16, bool b_col,
                     bool accumulate, bool c_col, cudaStream_t s);
// one warp: which element of a 16 x 16 matrix each lane's x[t] holds, for the accumulator (loaded from c,
// c[e] = e), A row-major and B column-major (from a, 16 x 16 half bit patterns, a[e] = e):
// out[k·256 + lane·8 + t], k = 0 C, 1 A, 2 B (768 floats)
void st_wmma_positions(const unsigned short *a, const float *c, float *out, cudaStream_t s);
// whether the self-test kernels were compiled where a*b+c can contract to a fused multiply-add
bool st_kernels_contract();

// ---- kernels with bugs the emulated device must expose ------------------------------------------
// st_block_sum without the __syncthreads between filling shared memory and the first read of it
void st_block_sum_missing_sync(const float *x, float *partial, int n, cudaStream_t s);
// half of the block calls __syncthreads
void st_sync_in_branch(int *out, int block, cudaStream_t s);
// threads past n return before a __syncthreads the others reach
void st_early_return_sync(const float *x, float *y, int n, cudaStream_t s);
// out[i] = a shared-memory element nobody wrote
void st_read_uninit_shared(float *out, int block, cudaStream_t s);
// writes x[n], one element past the end
void st_write_past_end(float *x, int n, cudaStream_t s);
// lanes 16..31 return, lanes 0..15 read them with __shfl_down_sync (one warp); y[lane] = result
void st_shfl_from_exited(const float *x, float *y, cudaStream_t s);
// lanes 0..15 wait at __syncwarp(full mask) while lanes 16..31 wait at __syncthreads
void st_warp_deadlock(int *out, cudaStream_t s);
// nvcuda::wmma misuse on a (16 x 64 __half bit patterns) into c (16 x 16 floats), by mode: 0 none; 1 lanes
// at two call sites; 2 lane 31 returns first; 3 a pointer 16 bytes off 32-byte alignment; 4 ldm 20;
// 5 lanes pass different pointers; 6 an accumulator used unfilled; 7 a shared array not declared 32-byte
// aligned. block threads (48: a partial warp)
void st_wmma_misuse(const unsigned short *a, float *c, int mode, int block, cudaStream_t s);
// lanes write a tile of halves A (a: 16 x 16) to shared memory, the warp computes A Aᵀ with WMMA into
// a shared tile that the lanes copy to c; mode bit 0 / 1: __syncwarp() before the loads / after the store
void st_wmma_ordering(const unsigned short *a, float *c, int mode, cudaStream_t s);
// y[t] = the sum of the float4 at x + offset + 4t (HS_VECTOR_AT), t < threads
void st_vector_load(const float *x, float *y, int offset, int threads, cudaStream_t s);

#endif
