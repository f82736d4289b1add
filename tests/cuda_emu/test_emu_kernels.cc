// Correct kernels give exactly the right answers on the emulated CUDA device, under several seeds
// (thread, block and stream orders differ per seed): a shared-memory block reduction with
// __syncthreads, warp-shuffle reductions, atomics, grids of many blocks with odd block sizes, the
// warp functions' exact lane semantics, dynamic shared memory, and a spin lock within a block; and a*b + c
// in a kernel is one fused multiply-add, as nvcc's default --fmad=true compiles it; and nvcuda::wmma
// tile products (every fragment layout, __half and __nv_bfloat16) with mma.h's stated summation order.
#include <cstdint>
#include <vector>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include "hs_emu/control.h"
#include "selftest.h"
#include "selftest_kernels.h"

namespace {

template <class T> T *to_device(const std::vector<T> &h) {
  T *d = nullptr;
  CUDA_OK(cudaMalloc(&d, h.size() * sizeof(T)));
  CUDA_OK(cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <class T> std::vector<T> to_host(const T *d, size_t n) {
  std::vector<T> h(n);
  CUDA_OK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}

void test_block_sum() {
  const int n = 1000, blocks = 4; // the last block is partly empty
  std::vector<float> x(n);
  for (int i = 0; i < n; i++) x[i] = static_cast<float>(i % 7 - 3); // small integers: exact sums
  float *dx = to_device(x), *dp = nullptr;
  CUDA_OK(cudaMalloc(&dp, blocks * sizeof(float)));
  st_block_sum(dx, dp, n, 0);
  CUDA_OK(cudaGetLastError());
  const std::vector<float> p = to_host(dp, blocks);
  for (int b = 0; b < blocks; b++) {
    float want = 0;
    for (int i = b * 256; i < n && i < (b + 1) * 256; i++) want += x[i];
    CHECK(p[b] == want);
  }
  CUDA_OK(cudaFree(dx));
  CUDA_OK(cudaFree(dp));
}

void test_warp_sum() {
  for (int block : {32, 96, 256, 1024}) {
    const int n = 3 * block - 5;
    const int blocks = (n + block - 1) / block;
    std::vector<float> x(n);
    for (int i = 0; i < n; i++) x[i] = static_cast<float>((i * 13) % 11) - 5.0f;
    float *dx = to_device(x), *dt = nullptr;
    CUDA_OK(cudaMalloc(&dt, blocks * sizeof(float)));
    st_warp_sum(dx, dt, n, block, 0);
    CUDA_OK(cudaGetLastError());
    const std::vector<float> t = to_host(dt, blocks);
    for (int b = 0; b < blocks; b++) {
      float want = 0;
      for (int i = b * block; i < n && i < (b + 1) * block; i++) want += x[i];
      CHECK(t[b] == want);
    }
    CUDA_OK(cudaFree(dx));
    CUDA_OK(cudaFree(dt));
  }
}

void test_histogram() {
  const int n = 5000, nbins = 17;
  std::vector<int> v(n);
  uint32_t r = 12345;
  for (int i = 0; i < n; i++) {
    r = r * 1664525u + 1013904223u;
    v[i] = static_cast<int>(r >> 22); // 0..1023
  }
  int *dv = to_device(v), *dbins = nullptr, *dmax = nullptr;
  unsigned long long *dcount = nullptr;
  float *dsum = nullptr;
  CUDA_OK(cudaMalloc(&dsum, sizeof(float)));
  CUDA_OK(cudaMemset(dsum, 0, sizeof(float)));
  CUDA_OK(cudaMalloc(&dbins, nbins * sizeof(int)));
  CUDA_OK(cudaMalloc(&dcount, sizeof(unsigned long long)));
  CUDA_OK(cudaMalloc(&dmax, sizeof(int)));
  CUDA_OK(cudaMemset(dbins, 0, nbins * sizeof(int)));
  CUDA_OK(cudaMemset(dcount, 0, sizeof(unsigned long long)));
  CUDA_OK(cudaMemset(dmax, 0, sizeof(int)));
  st_histogram(dv, n, dbins, nbins, dcount, dsum, dmax, 0);
  CUDA_OK(cudaGetLastError());
  const std::vector<int> bins = to_host(dbins, nbins);
  std::vector<int> want(nbins, 0);
  int maxv = 0;
  float sum = 0.0f; // integers below 2^24: exact in any order
  for (int x : v) {
    want[x % nbins]++;
    maxv = x > maxv ? x : maxv;
    sum += static_cast<float>(x);
  }
  CHECK(bins == want);
  CHECK(to_host(dsum, 1)[0] == sum);
  CHECK(to_host(dcount, 1)[0] == static_cast<unsigned long long>(n));
  CHECK(to_host(dmax, 1)[0] == maxv);
  CUDA_OK(cudaFree(dv));
  CUDA_OK(cudaFree(dbins));
  CUDA_OK(cudaFree(dcount));
  CUDA_OK(cudaFree(dmax));
  CUDA_OK(cudaFree(dsum));
}

void test_index_grid() {
  struct Case {
    dim3 block;
    int width, height;
  };
  const Case cases[] = {{dim3(1), 777, 3},    {dim3(31), 1000, 2},  {dim3(33), 1000, 2}, {dim3(127), 4001, 1},
                        {dim3(33, 3), 101, 13}, {dim3(7, 5), 50, 21}, {dim3(1, 31), 3, 95}};
  for (const Case &c : cases) {
    const size_t n = static_cast<size_t>(c.width) * c.height;
    int *hits = nullptr;
    CUDA_OK(cudaMalloc(&hits, n * sizeof(int)));
    CUDA_OK(cudaMemset(hits, 0, n * sizeof(int)));
    st_index_grid(hits, c.width, c.height, c.block, 0);
    CUDA_OK(cudaGetLastError());
    const std::vector<int> h = to_host(hits, n);
    for (size_t i = 0; i < n; i++) CHECK(h[i] == 1); // every element once, none twice, none missed
    CUDA_OK(cudaFree(hits));
  }
}

void test_warp_functions() {
  std::vector<int> x(64);
  for (int i = 0; i < 64; i++) x[i] = (i * 7) % 5 - 1; // some <= 0
  x[40] = 0;                                           // warp 1 not all positive
  for (int i = 0; i < 32; i++) x[i] = i + 1;           // warp 0 all positive
  int *dx = to_device(x), *dscan = nullptr, *dbcast = nullptr, *danyall = nullptr;
  unsigned *dballot = nullptr;
  CUDA_OK(cudaMalloc(&dscan, 64 * sizeof(int)));
  CUDA_OK(cudaMalloc(&dbcast, 64 * sizeof(int)));
  CUDA_OK(cudaMalloc(&dballot, 64 * sizeof(unsigned)));
  CUDA_OK(cudaMalloc(&danyall, 64 * sizeof(int)));
  st_warp_functions(dx, dscan, dbcast, dballot, danyall, 0);
  CUDA_OK(cudaGetLastError());
  const std::vector<int> scan = to_host(dscan, 64), bcast = to_host(dbcast, 64), anyall = to_host(danyall, 64);
  const std::vector<unsigned> ballot = to_host(dballot, 64);
  for (int i = 0; i < 64; i++) {
    int want = 0;
    for (int j = i - i % 16; j <= i; j++) want += x[j];
    CHECK(scan[i] == want);
    CHECK(bcast[i] == x[i - i % 8 + 5]);
    const int w = i / 32 * 32;
    unsigned want_ballot = 0;
    for (int l = 0; l < 32; l++)
      if (x[w + l] > 0) want_ballot |= 1u << l;
    CHECK(ballot[i] == want_ballot);
    CHECK(anyall[i] == (want_ballot != 0) + 2 * (want_ballot == 0xffffffffu));
  }
  CHECK(anyall[0] == 3 && anyall[40] == 1);
  CUDA_OK(cudaFree(dx));
  CUDA_OK(cudaFree(dscan));
  CUDA_OK(cudaFree(dbcast));
  CUDA_OK(cudaFree(dballot));
  CUDA_OK(cudaFree(danyall));
}

void test_dynamic_reverse() {
  for (int block : {1, 33, 127, 256}) {
    const int n = 5 * block - 1;
    std::vector<float> x(n);
    for (int i = 0; i < n; i++) x[i] = static_cast<float>(i);
    float *dx = to_device(x), *dy = nullptr;
    CUDA_OK(cudaMalloc(&dy, n * sizeof(float)));
    st_dynamic_reverse(dx, dy, n, block, block * sizeof(float), 0);
    CUDA_OK(cudaGetLastError());
    const std::vector<float> y = to_host(dy, n);
    for (int i = 0; i < n; i++) {
      const int base = i / block * block, r = base + block - 1 - (i - base);
      CHECK(y[i] == (r < n ? x[r] : 0.0f));
    }
    CUDA_OK(cudaFree(dx));
    CUDA_OK(cudaFree(dy));
  }
}

void test_spin_lock() {
  for (int block : {2, 64, 256}) {
    int *d = nullptr;
    CUDA_OK(cudaMalloc(&d, 2 * sizeof(int)));
    CUDA_OK(cudaMemset(d, 0, 2 * sizeof(int)));
    st_spin_lock(d, d + 1, block, 0);
    CUDA_OK(cudaGetLastError());
    const std::vector<int> h = to_host(d, 2);
    CHECK(h[0] == 0 && h[1] == block);
    CUDA_OK(cudaFree(d));
  }
}

void test_barrier_votes() {
  for (int block : {1, 37, 256}) {
    std::vector<int> x(block);
    int positive = 0;
    for (int i = 0; i < block; i++) {
      x[i] = (i % 3 == 0) ? 1 : -1;
      positive += x[i] > 0;
    }
    int *dx = to_device(x), *dout = nullptr;
    CUDA_OK(cudaMalloc(&dout, 3 * sizeof(int)));
    st_barrier_votes(dx, dout, block, 0);
    CUDA_OK(cudaGetLastError());
    const std::vector<int> out = to_host(dout, 3);
    CHECK(out[0] == positive && out[1] == (positive == block) && out[2] == (positive > 0));
    CUDA_OK(cudaFree(dx));
    CUDA_OK(cudaFree(dout));
  }
}

// Blocks start in a seeded random order: returns true if this seed's order is not 0, 1, 2, ...
bool test_block_order() {
  const int nblocks = 50;
  int *d = nullptr;
  CUDA_OK(cudaMalloc(&d, (nblocks + 1) * sizeof(int)));
  CUDA_OK(cudaMemset(d, 0, sizeof(int)));
  st_block_order(d, d + 1, nblocks, 0);
  CUDA_OK(cudaGetLastError());
  const std::vector<int> order = to_host(d + 1, nblocks);
  std::vector<int> seen(nblocks, 0);
  bool shuffled = false;
  for (int k = 0; k < nblocks; k++) {
    CHECK(order[k] >= 0 && order[k] < nblocks && seen[order[k]]++ == 0); // each block once
    shuffled = shuffled || order[k] != k;
  }
  CUDA_OK(cudaFree(d));
  return shuffled;
}

// FMA contraction (nvcc's default --fmad=true): a = b = 1 + 2^-12, c = -(1 + 2^-11). The exact a*b is
// 1 + 2^-11 + 2^-24; rounded to float on its own it is 1 + 2^-11 (2^-24 is half an ulp of 1, a tie,
// to even), so a*b + c is 0 with two roundings and 2^-24 with one (a fused multiply-add), as on a GPU.
void test_fma_contraction() {
  const float a = 1.0f + 0x1p-12f, c = -(1.0f + 0x1p-11f);
  const std::vector<float> va(3, a), vc(3, c);
  float *da = to_device(va), *dc = to_device(vc), *dy = nullptr;
  CUDA_OK(cudaMalloc(&dy, 3 * sizeof(float)));
  st_mul_add(da, da, dc, dy, 3, 0);
  CUDA_OK(cudaGetLastError());
  const std::vector<float> y = to_host(dy, 3);
  if (st_kernels_contract()) {
    for (float v : y) CHECK(v == 0x1p-24f);
    printf("ok   a*b + c in an emulated kernel is one fused multiply-add (%g), as nvcc --fmad=true compiles it\n",
           static_cast<double>(y[0]));
  } else {
    for (float v : y) CHECK(v == 0.0f);
    printf("ok   this CPU has no FMA instruction: a*b + c in an emulated kernel rounds twice (%g); on a GPU it "
           "is one fma\n",
           static_cast<double>(y[0]));
  }
  CUDA_OK(cudaFree(da));
  CUDA_OK(cudaFree(dc));
  CUDA_OK(cudaFree(dy));
}

hs_emu_stats stats() {
  hs_emu_stats st;
  hs_emu_get_stats(&st);
  return st;
}

// The fast path (runtime/block.cc): blocks whose threads never wait run as a loop on one fiber.
void test_fast_path_taken() {
  hs_emu_set_fast_path(1);
  float *dx = nullptr, *dy = nullptr;
  CUDA_OK(cudaMalloc(&dx, 1024 * sizeof(float)));
  CUDA_OK(cudaMalloc(&dy, 1024 * sizeof(float)));
  // element-wise: 8 blocks of 128 threads, 2 fiber switches per block
  hs_emu_stats a = stats();
  st_produce(dx, 1000, 0.0f, 0);
  CUDA_OK(cudaDeviceSynchronize());
  hs_emu_stats b = stats();
  CHECK(b.loop_blocks - a.loop_blocks == 8);
  CHECK(b.fiber_switches - a.fiber_switches == 2 * 8);
  CHECK(b.chained_threads - a.chained_threads == 1000 - 8 + 24); // 1024 threads, the first of each block switched to
  // __syncthreads in every block: no block is a loop
  a = stats();
  st_block_sum(dx, dy, 1000, 0);
  CUDA_OK(cudaDeviceSynchronize());
  b = stats();
  CHECK(b.loop_blocks == a.loop_blocks);
  // a data-dependent barrier: blocks from sync_from on reach it, on some launches none do
  std::vector<float> x(6 * 64);
  for (size_t i = 0; i < x.size(); i++) x[i] = static_cast<float>(i);
  CUDA_OK(cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  for (int sync_from : {6, 3, 0, 5, 6}) {
    a = stats();
    st_maybe_sync_reverse(dx, dy, 6, sync_from, 0);
    CUDA_OK(cudaGetLastError());
    const std::vector<float> y = to_host(dy, x.size());
    b = stats();
    CHECK(b.loop_blocks - a.loop_blocks == static_cast<uint64_t>(sync_from));
    for (int i = 0; i < 6 * 64; i++) {
      const int blk = i / 64, t = i % 64;
      CHECK(y[i] == (blk < sync_from ? 2.0f * x[i] : x[blk * 64 + 63 - t]));
    }
  }
  // a warp function reached by some warps after other warps of the block exited on the loop
  for (size_t i = 0; i < x.size(); i++) x[i] = (i / 32 % 3 == 1 && i >= 128) ? 1.0f + static_cast<float>(i % 5) : -1.0f;
  CUDA_OK(cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  a = stats();
  st_maybe_warp_sum(dx, dy, 3, 128, 0);
  CUDA_OK(cudaGetLastError());
  const std::vector<float> y = to_host(dy, 3 * 128);
  b = stats();
  CHECK(b.loop_blocks - a.loop_blocks == 1); // block 0: no warp sums
  for (int i = 0; i < 3 * 128; i++) {
    float want = x[i];
    if (x[i / 32 * 32] > 0.0f) {
      want = 0;
      for (int j = i / 32 * 32; j < i / 32 * 32 + 32; j++) want += x[j];
    }
    CHECK(y[i] == want);
  }
  CUDA_OK(cudaFree(dx));
  CUDA_OK(cudaFree(dy));
}

// With the fast path on and off, the same seed gives the same thread and block orders: the same
// results, and the generator left in the same state (the next grid's block order).
std::vector<float> run_mixed(uint64_t seed, int fast) {
  hs_emu_set_fast_path(fast);
  hs_emu_set_seed(seed);
  const int n = 6 * 64;
  std::vector<float> x(n), out;
  for (int i = 0; i < n; i++) x[i] = (i / 32 % 2 == 0) ? 0.1f * static_cast<float>(i % 7) + 0.3f : -1.0f;
  float *dx = to_device(x), *dy = nullptr;
  CUDA_OK(cudaMalloc(&dy, n * sizeof(float)));
  const uint64_t loops = stats().loop_blocks;
  st_maybe_sync_reverse(dx, dy, 6, 3, 0);
  std::vector<float> y = to_host(dy, n);
  out.insert(out.end(), y.begin(), y.end());
  st_maybe_warp_sum(dx, dy, 3, 128, 0);
  y = to_host(dy, n);
  out.insert(out.end(), y.begin(), y.end());
  st_consume(dx, dy, n, 0);
  y = to_host(dy, n);
  out.insert(out.end(), y.begin(), y.end());
  CHECK((stats().loop_blocks > loops) == (fast != 0));
  int *dc = nullptr, *dorder = nullptr;
  CUDA_OK(cudaMalloc(&dc, sizeof(int)));
  CUDA_OK(cudaMalloc(&dorder, 64 * sizeof(int)));
  CUDA_OK(cudaMemset(dc, 0, sizeof(int)));
  st_block_order(dc, dorder, 64, 0);
  for (int v : to_host(dorder, 64)) out.push_back(static_cast<float>(v));
  CUDA_OK(cudaFree(dx));
  CUDA_OK(cudaFree(dy));
  CUDA_OK(cudaFree(dc));
  CUDA_OK(cudaFree(dorder));
  return out;
}

// nvcuda::wmma (mma.h): C (+)= A B for small integers (exact in any order) over every combination of
// type, B layout, C layout and accumulate; then one row whose sum shows the stated order: products
// 2^24, 1, ..., 1 sum pairwise to 2^24 + 14 (a loop in k order gives 2^24, the exact sum 2^24 + 15).
void test_wmma() {
  const int k = 48;
  std::vector<unsigned short> a(16 * k), b(k * 16);
  std::vector<float> av(16 * k), bv(k * 16), c0(256);
  for (int i = 0; i < 16 * k; i++) av[i] = static_cast<float>(static_cast<int>((i * 7 + 3) % 17) - 8);
  for (int i = 0; i < k * 16; i++) bv[i] = static_cast<float>(static_cast<int>((i * 5 + 1) % 13) - 6);
  for (int i = 0; i < 256; i++) c0[i] = static_cast<float>(i % 9) - 4.0f;
  unsigned short *da = nullptr, *db = nullptr;
  CUDA_OK(cudaMalloc(&da, a.size() * 2));
  CUDA_OK(cudaMalloc(&db, b.size() * 2));
  float *dc = nullptr;
  CUDA_OK(cudaMalloc(&dc, 256 * sizeof(float)));
  int cases = 0;
  for (int bf16 = 0; bf16 < 2; bf16++)
    for (int b_col = 0; b_col < 2; b_col++)
      for (int acc = 0; acc < 2; acc++)
        for (int c_col = 0; c_col < 2; c_col++) {
          auto bits = [bf16](float v) {
            return bf16 ? hs_emu_float_to_bf16_bits(v) : hs_emu_float_to_half_bits(v);
          };
          for (int i = 0; i < 16 * k; i++) a[i] = bits(av[i]);
          // B[kk][n] = bv[kk * 16 + n]; b_col stores Bᵀ row-major [16][k]
          for (int kk = 0; kk < k; kk++)
            for (int n = 0; n < 16; n++) b[b_col ? n * k + kk : kk * 16 + n] = bits(bv[kk * 16 + n]);
          CUDA_OK(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
          CUDA_OK(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
          CUDA_OK(cudaMemcpy(dc, c0.data(), 256 * sizeof(float), cudaMemcpyHostToDevice));
          st_wmma_product(da, db, dc, k, bf16, b_col, acc, c_col, 0);
          const std::vector<float> c = to_host(dc, 256);
          for (int m = 0; m < 16; m++)
            for (int n = 0; n < 16; n++) {
              const int ci = c_col ? n * 16 + m : m * 16 + n; // where C[m][n] is stored
              double want = acc ? c0[ci] : 0.0;
              for (int kk = 0; kk < k; kk++) want += static_cast<double>(av[m * k + kk]) * bv[kk * 16 + n];
              CHECK(c[ci] == want);
            }
          cases++;
        }
  std::fill(a.begin(), a.end(), 0);
  std::fill(b.begin(), b.end(), 0);
  a[0] = hs_emu_float_to_half_bits(4096.0f); // A[0][0] B[0][0] = 2^24
  b[0] = hs_emu_float_to_half_bits(4096.0f);
  for (int kk = 1; kk < 16; kk++) {
    a[kk] = hs_emu_float_to_half_bits(1.0f);
    b[kk * 16] = hs_emu_float_to_half_bits(1.0f);
  }
  CUDA_OK(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  st_wmma_product(da, db, dc, 16, false, false, false, false, 0);
  const std::vector<float> c = to_host(dc, 256);
  CHECK(c[0] == 16777230.0f); // 2^24 + 14
  CHECK(c[1] == 0.0f);
  // __float_to_tf32 rounds to nearest at 2^-10, ties away from zero (cvt.rna.tf32.f32)
  CHECK(nvcuda::wmma::__float_to_tf32(1.0f + 0x1p-11f) == 1.0f + 0x1p-10f);
  CHECK(nvcuda::wmma::__float_to_tf32(-(1.0f + 0x1p-11f)) == -(1.0f + 0x1p-10f));
  CHECK(nvcuda::wmma::__float_to_tf32(1.0f + 0x1p-11f - 0x1p-23f) == 1.0f);
  CHECK(nvcuda::wmma::__float_to_tf32(1.0f + 0x1p-10f + 0x1p-11f) == 1.0f + 0x1p-9f);
  CUDA_OK(cudaFree(da));
  CUDA_OK(cudaFree(db));
  CUDA_OK(cudaFree(dc));
  CHECK(cases == 16);
}

// The fragments' layouts (mma.h): lane l's x[t] holds element l + 32 t (row-major), or under
// HS_CUDA_EMU_WMMA_LAYOUT=shuffled another permutation for each kind of fragment, so that code reading
// elements by position gives other results there (the products above hold under either).
void test_wmma_layout() {
  std::vector<unsigned short> a(256);
  std::vector<float> c(256);
  for (int e = 0; e < 256; e++) a[e] = hs_emu_float_to_half_bits(static_cast<float>(e)), c[e] = static_cast<float>(e);
  unsigned short *da = nullptr;
  float *dc = nullptr, *dout = nullptr;
  CUDA_OK(cudaMalloc(&da, 256 * 2));
  CUDA_OK(cudaMalloc(&dc, 256 * sizeof(float)));
  CUDA_OK(cudaMalloc(&dout, 768 * sizeof(float)));
  CUDA_OK(cudaMemcpy(da, a.data(), 256 * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dc, c.data(), 256 * sizeof(float), cudaMemcpyHostToDevice));
  st_wmma_positions(da, dc, dout, 0);
  const std::vector<float> out = to_host(dout, 768);
  const bool shuffled = nvcuda::wmma::emu::wmma_layout_shuffled();
  int same_as_rowmajor[3] = {0, 0, 0}, same_as_c[3] = {0, 0, 0};
  for (int k = 0; k < 3; k++) {
    std::vector<int> seen(256, 0);
    for (int l = 0; l < 32; l++)
      for (int t = 0; t < 8; t++) {
        const int e = static_cast<int>(out[k * 256 + l * 8 + t]);
        // A holds the matrix as stored; B col-major reads a as Bᵀ: element e of B is a[(e%16)·16 + e/16]
        const int rowmajor = k == 2 ? (l + 32 * t) % 16 * 16 + (l + 32 * t) / 16 : l + 32 * t;
        CHECK(e >= 0 && e < 256);
        seen[e]++;
        same_as_rowmajor[k] += e == rowmajor;
        same_as_c[k] += static_cast<int>(out[l * 8 + t]) == e;
      }
    for (int e = 0; e < 256; e++) CHECK(seen[e] == 1); // a permutation
  }
  for (int k = 0; k < 3; k++) CHECK(shuffled ? same_as_rowmajor[k] < 32 : same_as_rowmajor[k] == 256);
  if (shuffled) CHECK(same_as_c[1] < 32 && same_as_c[2] < 32); // A's and B's layouts are not C's
  CUDA_OK(cudaFree(da));
  CUDA_OK(cudaFree(dc));
  CUDA_OK(cudaFree(dout));
}

void test_fast_path_same_results() {
  for (uint64_t seed : {1ull, 7ull, 1000003ull}) {
    const std::vector<float> on = run_mixed(seed, 1), off = run_mixed(seed, 0);
    CHECK(on.size() == off.size() && memcmp(on.data(), off.data(), on.size() * sizeof(float)) == 0);
  }
}

// The special-function unit's 2^t (hs_emu_ex2_approx_ftz, PTX ex2.approx.ftz.f32): within 2.5 ulp of
// 2^t over the range a softmax uses and beyond, off by up to 2 ulp as often as a GPU may be (not the host's
// nearly exact exp2f), the same value for the same t, and the flushes and specials of the instruction.
void test_ex2_approx_model() {
  int moved = 0, n = 0;
  double worst = 0.0;
  for (float t = -126.0f; t <= 127.0f; t += 0.0123f, n++) {
    const float y = hs_emu_ex2_approx_ftz(t);
    const double exact = exp2((double)t);
    const double ulp = ldexp(1.0, ilogb(exact) - 23);
    const double err = fabs((double)y - exact) / ulp;
    worst = err > worst ? err : worst;
    moved += err > 0.75;
    CHECK(y == hs_emu_ex2_approx_ftz(t));
  }
  CHECK(worst <= 2.5 && worst > 1.5);
  CHECK(moved > n / 3);
  CHECK(hs_emu_ex2_approx_ftz(0.0f) == 1.0f && hs_emu_ex2_approx_ftz(1e-40f) == 1.0f);
  CHECK(hs_emu_ex2_approx_ftz(-126.5f) == 0.0f && hs_emu_ex2_approx_ftz(-14427.0f) == 0.0f);
  CHECK(hs_emu_ex2_approx_ftz(-INFINITY) == 0.0f && !signbit(hs_emu_ex2_approx_ftz(-INFINITY)));
  CHECK(isinf(hs_emu_ex2_approx_ftz(INFINITY)) && isinf(hs_emu_ex2_approx_ftz(200.0f)));
  CHECK(isnan(hs_emu_ex2_approx_ftz(NAN)));
  // 1/x: within 1 ulp, moved as often as not, exact at the specials
  int rmoved = 0, rn = 0;
  double rworst = 0.0;
  for (float x = 1.0f; x < 8.0f; x += 0.00137f, rn++) {
    const double exact = 1.0 / (double)x;
    const double err = fabs((double)hs_emu_rcp_approx_ftz(x) - exact) / ldexp(1.0, ilogb(exact) - 23);
    rworst = err > rworst ? err : rworst;
    rmoved += err > 0.5;
  }
  CHECK(rworst <= 1.5 && rworst > 1.0 && rmoved > rn / 3);
  CHECK(hs_emu_rcp_approx_ftz(1.0f) == 1.0f && hs_emu_rcp_approx_ftz(-1.0f) == -1.0f);
  CHECK(isinf(hs_emu_rcp_approx_ftz(0.0f)) && isinf(hs_emu_rcp_approx_ftz(1e-40f)));
  CHECK(hs_emu_rcp_approx_ftz(INFINITY) == 0.0f && hs_emu_rcp_approx_ftz(1e38f) == 0.0f);
  CHECK(isnan(hs_emu_rcp_approx_ftz(NAN)));
}

} // namespace

int main() {
  const int fast = hs_emu_fast_path(); // HS_CUDA_EMU_FAST_PATH: the other tests run as it says
  test_fast_path_taken();
  test_fast_path_same_results();
  hs_emu_set_fast_path(fast);
  printf("ok   fast path: element-wise blocks run as a loop, blocks with barriers do not, a data-dependent "
         "barrier or warp function on the loop is correct, same results and orders with it off\n");
  test_fma_contraction();
  test_ex2_approx_model();
  printf("ok   the special-function unit's 2^t and 1/x within 2.5 and 1.5 ulp, moved as a GPU's may be, flushes and "
         "specials\n");
  int shuffled = 0;
  for (uint64_t seed : {1ull, 2ull, 3ull, 1000003ull}) {
    hs_emu_set_seed(seed);
    test_block_sum();
    test_warp_sum();
    test_histogram();
    test_index_grid();
    test_warp_functions();
    test_dynamic_reverse();
    test_spin_lock();
    test_barrier_votes();
    test_wmma();
    shuffled += test_block_order();
    printf("ok   seed %llu: block reduction, warp reductions, atomics, odd grids, warp functions, dynamic "
           "shared memory, spin lock, barrier votes, wmma tile products\n",
           static_cast<unsigned long long>(seed));
  }
  CHECK(shuffled == 4);
  printf("ok   blocks start in a different order under each seed\n");
  test_wmma_layout();
  printf("ok   wmma fragments hold their elements in the %s layout\n",
         nvcuda::wmma::emu::wmma_layout_shuffled() ? "shuffled" : "row-major");
  hs_emu_stats st;
  hs_emu_get_stats(&st);
  printf("     %llu kernels, %llu blocks (%llu as a loop), %llu threads, %llu fiber switches, %llu stream work "
         "items\n",
         static_cast<unsigned long long>(st.kernels), static_cast<unsigned long long>(st.blocks),
         static_cast<unsigned long long>(st.loop_blocks), static_cast<unsigned long long>(st.threads),
         static_cast<unsigned long long>(st.fiber_switches), static_cast<unsigned long long>(st.work_items));
  return 0;
}
