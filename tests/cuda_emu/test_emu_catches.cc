// Bugs the emulated CUDA device must expose, each as a wrong result (under at least one seed) or as
// a report and a crash in a child process. The control cases (the correct code) must pass.
#include <cstdint>
#include <vector>
#include "hs_cuda.h"
#include "hs_emu/control.h"
#include "selftest.h"
#include "selftest_kernels.h"

namespace {

// ---- emulator-only kernels (nvcc would refuse the first one, so it is not in selftest_kernels.cu)
__global__ void too_much_static_shared(float *out) {
  HS_SHARED(float[16384], big); // 64 KiB: more static shared memory than CUDA allows
  big[threadIdx.x] = 1.0f;
  out[threadIdx.x] = big[threadIdx.x];
}

__global__ void dynamic_shared_overrun(float *out) {
  HS_DYNAMIC_SHARED(float, buf);
  buf[threadIdx.x + 1] = 1.0f; // BUG: one element past the launch's dynamic shared memory
  out[threadIdx.x] = buf[threadIdx.x];
}

__global__ void big_stack_frame(float *out) {
  volatile float local[64 << 10]; // 256 KiB of locals: more than an emulated thread's stack
  local[threadIdx.x] = 1.0f;
  out[threadIdx.x] = local[threadIdx.x];
}

constexpr int kSeeds = 8;

float *device_floats(size_t n) {
  float *d = nullptr;
  CUDA_OK(cudaMalloc(&d, n * sizeof(float)));
  return d;
}

// (a) a missing __syncthreads between writing and reading shared memory: wrong under some seed
void missing_syncthreads() {
  const int n = 1024, blocks = 4;
  std::vector<float> x(n);
  for (int i = 0; i < n; i++) x[i] = static_cast<float>(i % 4);
  float *dx = device_floats(n), *dp = device_floats(blocks);
  CUDA_OK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  int wrong = 0;
  for (int seed = 1; seed <= kSeeds; seed++) {
    hs_emu_set_seed(seed);
    std::vector<float> good(blocks), bad(blocks);
    st_block_sum(dx, dp, n, 0);
    CUDA_OK(cudaMemcpy(good.data(), dp, sizeof(float) * blocks, cudaMemcpyDeviceToHost));
    st_block_sum_missing_sync(dx, dp, n, 0);
    CUDA_OK(cudaMemcpy(bad.data(), dp, sizeof(float) * blocks, cudaMemcpyDeviceToHost));
    for (int b = 0; b < blocks; b++) CHECK(good[b] == 384.0f); // control: 64 * (0 + 1 + 2 + 3)
    wrong += bad != good;
  }
  CHECK(wrong >= 1);
  printf("ok   missing __syncthreads before reading shared memory: wrong sums under %d of %d seeds\n", wrong, kSeeds);
  CUDA_OK(cudaFree(dx));
  CUDA_OK(cudaFree(dp));
}

// (b) a __syncthreads not reached by every thread of the block
void divergent_barriers() {
  int *out = nullptr;
  CUDA_OK(cudaMalloc(&out, 256 * sizeof(int)));
  expect_death("__syncthreads in a divergent branch", [out] {
    st_sync_in_branch(out, 128, 0);
    cudaDeviceSynchronize();
  }, SIGABRT, {"error in kernel sync_in_branch", "__syncthreads", "selftest_kernels.cu"});
  float *x = device_floats(200), *y = device_floats(200);
  expect_death("__syncthreads after an early return", [x, y] {
    st_early_return_sync(x, y, 200, 0);
    cudaDeviceSynchronize();
  }, SIGABRT, {"error in kernel early_return_sync", "returned from the kernel", "__syncthreads"});
  expect_death("warp deadlock (__syncwarp vs __syncthreads)", [out] {
    st_warp_deadlock(out, 0);
    cudaDeviceSynchronize();
  }, SIGABRT, {"error in kernel warp_deadlock", "deadlock", "__syncwarp(mask 0xffffffff)", "__syncthreads()"});
  CUDA_OK(cudaFree(out));
  CUDA_OK(cudaFree(x));
  CUDA_OK(cudaFree(y));
}

// (c) host code dereferencing device memory, and other illegal accesses
void illegal_accesses() {
  float *d = device_floats(16);
  expect_death("host read of device memory", [d] {
    volatile float v = d[3];
    (void)v;
  }, SIGSEGV, {"host code accessed device memory"});
  expect_death("host write of device memory", [d] { d[0] = 1.0f; }, SIGSEGV, {"host code accessed device memory"});
  expect_death("kernel writing past the end of an allocation", [d] {
    st_write_past_end(d, 16, 0);
    cudaDeviceSynchronize();
  }, SIGABRT, {"kernel write_past_end", "wrote past the end of a 64-byte device allocation"});
  expect_death("dynamic shared memory overrun", [d] {
    HS_LAUNCH(1, 16, 16 * sizeof(float), 0, dynamic_shared_overrun)(d);
    cudaDeviceSynchronize();
  }, SIGSEGV, {"illegal memory access in kernel dynamic_shared_overrun", "past the end of the block's shared memory"});
  expect_death("static shared memory over 48 KiB", [d] {
    HS_LAUNCH(1, 16, 0, 0, too_much_static_shared)(d);
    cudaDeviceSynchronize();
  }, SIGABRT, {"error in kernel too_much_static_shared", "does not fit"});
  expect_death("emulated thread stack overflow", [d] {
    HS_LAUNCH(1, 4, 0, 0, big_stack_frame)(d);
    cudaDeviceSynchronize();
  }, SIGSEGV, {"illegal memory access in kernel big_stack_frame", "stack overflow"});
  expect_death("threadIdx in host code", [] {
    volatile unsigned t = threadIdx.x;
    (void)t;
  }, SIGABRT, {"threadIdx used outside a kernel"});
  CUDA_OK(cudaFree(d));
}

// (d) reads of undefined values give NaN, not plausible numbers
void undefined_values() {
  float *out = device_floats(64);
  st_read_uninit_shared(out, 64, 0);
  std::vector<float> h(64);
  CUDA_OK(cudaMemcpy(h.data(), out, sizeof(float) * 64, cudaMemcpyDeviceToHost));
  CHECK(h[0] == 1.0f);
  for (int i = 1; i < 64; i++) CHECK(std::isnan(h[i]));
  printf("ok   shared memory read before any write: NaN\n");

  float *x = device_floats(32), *y = device_floats(32);
  std::vector<float> hx(32, 3.0f);
  CUDA_OK(cudaMemcpy(x, hx.data(), sizeof(float) * 32, cudaMemcpyHostToDevice));
  st_shfl_from_exited(x, y, 0);
  CUDA_OK(cudaMemcpy(h.data(), y, sizeof(float) * 16, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 16; i++) CHECK(std::isnan(h[i]));
  printf("ok   __shfl_down_sync from lanes that returned: NaN\n");

  st_produce(x, 32, 1.0f, 0);
  CUDA_OK(cudaFree(x)); // BUG below: the kernel reads freed memory
  st_consume(x, y, 32, 0);
  CUDA_OK(cudaMemcpy(h.data(), y, sizeof(float) * 32, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 32; i++) CHECK(std::isnan(h[i]));
  printf("ok   kernel reading device memory after cudaFree: NaN\n");
  CUDA_OK(cudaFree(y));
  CUDA_OK(cudaFree(out));
}

// (e) host reads pinned memory after cudaMemcpyAsync without synchronising: stale data; and a
// staging buffer refilled before its upload ran: the device gets the new contents
void missing_host_sync() {
  const int n = 256;
  float *d = device_floats(n), *pinned = nullptr;
  CUDA_OK(cudaMallocHost(&pinned, n * sizeof(float)));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  for (int i = 0; i < n; i++) pinned[i] = -1.0f;
  st_produce(d, n, 100.0f, s);
  CUDA_OK(cudaMemcpyAsync(pinned, d, n * sizeof(float), cudaMemcpyDeviceToHost, s));
  for (int i = 0; i < n; i++) CHECK(pinned[i] == -1.0f); // BUG: read before cudaStreamSynchronize
  CUDA_OK(cudaStreamSynchronize(s));
  for (int i = 0; i < n; i++) CHECK(pinned[i] == 100.0f + i); // control: after the sync
  printf("ok   pinned buffer read right after cudaMemcpyAsync D2H: stale; after cudaStreamSynchronize: right\n");

  for (int i = 0; i < n; i++) pinned[i] = 1.0f;
  CUDA_OK(cudaMemcpyAsync(d, pinned, n * sizeof(float), cudaMemcpyHostToDevice, s));
  for (int i = 0; i < n; i++) pinned[i] = 2.0f; // BUG: refilled before the upload ran
  std::vector<float> h(n);
  CUDA_OK(cudaStreamSynchronize(s));
  CUDA_OK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(h[0] == 2.0f);
  printf("ok   staging buffer refilled before its cudaMemcpyAsync H2D ran: the device gets the new data\n");
  CUDA_OK(cudaStreamDestroy(s));
  CUDA_OK(cudaFreeHost(pinned));
  CUDA_OK(cudaFree(d));
}

// (f) a compute stream and a second stream (standing in for NCCL's): without an event between them
// the consumer runs before the producer under some seed; with cudaEventRecord + cudaStreamWaitEvent
// never
void missing_event() {
  const int n = 1000;
  float *x = device_floats(n), *y = device_floats(n);
  cudaStream_t compute, comm;
  CUDA_OK(cudaStreamCreate(&compute));
  CUDA_OK(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking));
  cudaEvent_t produced;
  CUDA_OK(cudaEventCreateWithFlags(&produced, cudaEventDisableTiming));
  std::vector<float> h(n);
  int wrong_without = 0, wrong_with = 0;
  for (int seed = 1; seed <= kSeeds; seed++) {
    hs_emu_set_seed(seed);
    const float base = static_cast<float>(10 * seed);
    st_produce(x, n, base, compute);
    st_consume(x, y, n, comm); // BUG: comm does not wait for compute
    CUDA_OK(cudaStreamSynchronize(comm));
    CUDA_OK(cudaMemcpy(h.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
    wrong_without += h[n - 1] != 2.0f * (base + n - 1);
    CUDA_OK(cudaDeviceSynchronize());

    st_produce(x, n, base + 1.0f, compute);
    CUDA_OK(cudaEventRecord(produced, compute));
    CUDA_OK(cudaStreamWaitEvent(comm, produced, 0));
    st_consume(x, y, n, comm);
    CUDA_OK(cudaStreamSynchronize(comm));
    CUDA_OK(cudaMemcpy(h.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost));
    for (int i = 0; i < n; i++) wrong_with += h[i] != 2.0f * (base + 1.0f + i);
  }
  CHECK(wrong_without >= 1);
  CHECK(wrong_with == 0);
  printf("ok   missing cudaStreamWaitEvent between a compute and a communication stream: wrong under %d of %d "
         "seeds; with the event: right under all\n",
         wrong_without, kSeeds);
  CUDA_OK(cudaEventDestroy(produced));
  CUDA_OK(cudaStreamDestroy(compute));
  CUDA_OK(cudaStreamDestroy(comm));
  CUDA_OK(cudaFree(x));
  CUDA_OK(cudaFree(y));
}

// (g) nvcuda::wmma misuse (mma.h): warp-collective calls that diverge, miss a lane or get different
// arguments, a misaligned pointer (also a shared array that is not declared 32-byte aligned, which the
// emulator places 16 bytes off), a bad ldm, a partial warp; an unfilled accumulator gives NaN
void wmma_misuse() {
  unsigned short *a = nullptr;
  CUDA_OK(cudaMalloc(&a, 16 * 64 * 2));
  CUDA_OK(cudaMemset(a, 0, 16 * 64 * 2));
  float *c = device_floats(256);
  st_wmma_misuse(a, c, 0, 32, 0); // control
  std::vector<float> h(256);
  CUDA_OK(cudaMemcpy(h.data(), c, sizeof(float) * 256, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 256; i++) CHECK(h[i] == 0.0f);
  auto dies = [a, c](const char *name, int mode, int block, std::initializer_list<const char *> needles) {
    expect_death(name, [a, c, mode, block] {
      st_wmma_misuse(a, c, mode, block, 0);
      cudaDeviceSynchronize();
    }, SIGABRT, needles);
  };
  dies("wmma load at two call sites (divergent lanes)", 1, 32,
       {"error in kernel wmma_misuse", "divergent warp-collective call", "nvcuda::wmma::load_matrix_sync"});
  dies("wmma with a lane that returned", 2, 32,
       {"error in kernel wmma_misuse", "lane 31, which returned from the kernel", "warp-collective"});
  dies("wmma pointer not 32-byte aligned", 3, 32,
       {"error in kernel wmma_misuse", "nvcuda::wmma::load_matrix_sync", "not 256-bit (32-byte) aligned"});
  dies("wmma ldm not a multiple of 8 halves", 4, 32, {"error in kernel wmma_misuse", "ldm 20 is not a multiple of 8"});
  dies("wmma lanes with different pointers", 5, 32,
       {"error in kernel wmma_misuse", "every lane of the warp must pass the same arguments"});
  dies("wmma by a partial warp", 0, 48, {"error in kernel wmma_misuse", "partial warp", "only 16 lanes"});
  dies("wmma on a shared array declared without HS_SHARED_ALIGNED", 7, 32,
       {"error in kernel wmma_misuse", "not 256-bit (32-byte) aligned"});
  st_wmma_misuse(a, c, 6, 32, 0);
  CUDA_OK(cudaMemcpy(h.data(), c, sizeof(float) * 256, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 256; i++) CHECK(std::isnan(h[i]));
  printf("ok   wmma accumulator used before fill_fragment or a load: NaN\n");
  CUDA_OK(cudaFree(a));
  CUDA_OK(cudaFree(c));
}

// (h) WMMA loads and stores do not order memory between the lanes of a warp (on a GPU): a tile the
// lanes wrote needs __syncwarp() before load_matrix_sync (reported), and the lanes need __syncwarp()
// after store_matrix_sync before reading what other lanes stored (NaN)
void wmma_ordering() {
  std::vector<unsigned short> ha(256);
  std::vector<float> va(256);
  for (int i = 0; i < 256; i++) { // A: 1, -1 or 0 (halves' bits), so A Aᵀ is exact
    const int k = (i * 7 + i / 16) % 3;
    ha[i] = k == 0 ? 0x3C00 : k == 1 ? 0xBC00 : 0x0000;
    va[i] = k == 0 ? 1.0f : k == 1 ? -1.0f : 0.0f;
  }
  unsigned short *a = nullptr;
  CUDA_OK(cudaMalloc(&a, 256 * 2));
  CUDA_OK(cudaMemcpy(a, ha.data(), 256 * 2, cudaMemcpyHostToDevice));
  float *c = device_floats(256);
  std::vector<float> h(256);
  st_wmma_ordering(a, c, 3, 0); // both __syncwarp: A Aᵀ
  CUDA_OK(cudaMemcpy(h.data(), c, sizeof(float) * 256, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 16; j++) {
      float s = 0;
      for (int k = 0; k < 16; k++) s += va[i * 16 + k] * va[j * 16 + k];
      CHECK(h[i * 16 + j] == s);
    }
  expect_death("wmma load of a tile the lanes wrote, without __syncwarp", [a, c] {
    st_wmma_ordering(a, c, 2, 0);
    cudaDeviceSynchronize();
  }, SIGABRT, {"error in kernel wmma_ordering", "nvcuda::wmma::load_matrix_sync", "changed after lane", "before the whole warp had",
               "__syncwarp()"});
  st_wmma_ordering(a, c, 1, 0); // no __syncwarp after the store
  CUDA_OK(cudaMemcpy(h.data(), c, sizeof(float) * 256, cudaMemcpyDeviceToHost));
  int nans = 0;
  for (int i = 0; i < 256; i++) nans += std::isnan(h[i]);
  CHECK(nans > 0);
  printf("ok   reading a wmma store's tile without __syncwarp: %d of 256 values NaN; with it: exact\n", nans);
  CUDA_OK(cudaFree(a));
  CUDA_OK(cudaFree(c));
}

// (i) a vector access at an address not aligned to its size, which a GPU refuses
// (cudaErrorMisalignedAddress) and a host CPU would make: reported
void misaligned_vector() {
  float *x = device_floats(64), *y = device_floats(8);
  std::vector<float> hx(64);
  for (int i = 0; i < 64; i++) hx[i] = (float)i;
  CUDA_OK(cudaMemcpy(x, hx.data(), sizeof(float) * 64, cudaMemcpyHostToDevice));
  st_vector_load(x, y, 4, 8, 0); // aligned: the sums of x[4 + 4t ..]
  std::vector<float> h(8);
  CUDA_OK(cudaMemcpy(h.data(), y, sizeof(float) * 8, cudaMemcpyDeviceToHost));
  for (int t = 0; t < 8; t++) CHECK(h[t] == (float)(4 * (4 + 4 * t) + 6));
  expect_death("float4 load 4 bytes past 16-byte alignment", [x, y] {
    st_vector_load(x, y, 1, 8, 0);
    cudaDeviceSynchronize();
  }, SIGABRT, {"error in kernel vector_load", "misaligned address", "const float4", "cudaErrorMisalignedAddress"});
  CUDA_OK(cudaFree(x));
  CUDA_OK(cudaFree(y));
}

} // namespace

int main() {
  missing_syncthreads();
  divergent_barriers();
  illegal_accesses();
  undefined_values();
  missing_host_sync();
  missing_event();
  wmma_misuse();
  wmma_ordering();
  misaligned_vector();
  return 0;
}
