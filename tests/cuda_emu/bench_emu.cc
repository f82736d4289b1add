// What the emulated CUDA device costs: a fiber switch, a block passing a barrier, an emulated thread
// of an element-wise kernel (fast path off and on), a launch with its synchronisation. Prints the numbers (best of three)
// and fails only if they are far off (the emulator would then make the test suite crawl: e.g.
// ucontext-based fibers cost ~80 us per 256-thread barrier).
#include <chrono>
#include <vector>
#include "hs_cuda.h"
#include "hs_emu/control.h"
#include "selftest.h"
#include "selftest_kernels.h"

namespace {

__global__ void barrier_loop(int iterations) {
  for (int k = 0; k < iterations; k++) __syncthreads();
}

__global__ void shuffle_loop(int iterations, float *out) {
  float v = static_cast<float>(threadIdx.x);
  for (int k = 0; k < iterations; k++) v += __shfl_xor_sync(0xffffffffu, v, 1);
  if (v == -1.0f) out[0] = v; // keeps the loop
}

__global__ void empty_kernel() {}

double seconds_of(const std::function<void()> &f) {
  double best = 1e30;
  for (int rep = 0; rep < 3; rep++) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = s < best ? s : best;
  }
  return best;
}

} // namespace

int main() {
  const double round_trip_ns = hs_emu_measure_fiber_round_trip(2000000);
  printf("fiber switch (Boost.Context continuation)          %8.1f ns (round trip %.1f ns)\n", round_trip_ns / 2,
         round_trip_ns);

  const int iters = 2000;
  double barrier_us[2];
  const int sizes[2] = {256, 1024};
  for (int k = 0; k < 2; k++) {
    const int threads = sizes[k];
    const double s = seconds_of([&] {
      HS_LAUNCH(1, threads, 0, 0, barrier_loop)(iters);
      CUDA_OK(cudaDeviceSynchronize());
    });
    barrier_us[k] = s / iters * 1e6;
    printf("block of %4d threads passing one __syncthreads     %8.2f us (%.1f ns per thread)\n", threads,
           barrier_us[k], barrier_us[k] * 1e3 / threads);
  }

  float *d = nullptr;
  CUDA_OK(cudaMalloc(&d, sizeof(float) << 20));
  const double shfl = seconds_of([&] {
    HS_LAUNCH(1, 256, 0, 0, shuffle_loop)(iters, d);
    CUDA_OK(cudaDeviceSynchronize());
  });
  printf("warp of 32 threads in one __shfl_xor_sync           %8.2f us\n", shfl / iters / 8 * 1e6);

  // element-wise, with the fast path (a block of threads that never wait is a loop on one fiber) off
  // and on, side by side
  const int n = 1 << 20;
  double elementwise_mode[2];
  for (int fast = 0; fast < 2; fast++) {
    hs_emu_set_fast_path(fast);
    elementwise_mode[fast] = seconds_of([&] {
      st_produce(d, n, 0.0f, 0);
      CUDA_OK(cudaDeviceSynchronize());
    });
    printf("element-wise kernel, per emulated thread, fast path %s %5.1f ns (%d threads in %.1f ms)\n",
           fast ? "on " : "off", elementwise_mode[fast] / n * 1e9, n, elementwise_mode[fast] * 1e3);
  }
  const double elementwise = elementwise_mode[1];

  const int launches = 2000;
  const double launch = seconds_of([&] {
    for (int i = 0; i < launches; i++) {
      HS_LAUNCH(1, 1, 0, 0, empty_kernel)();
      CUDA_OK(cudaStreamSynchronize(0));
    }
  });
  printf("launch + cudaStreamSynchronize of an empty kernel   %8.2f us (4 MiB of device memory in use)\n",
         launch / launches * 1e6);
  float *big = nullptr;
  CUDA_OK(cudaMalloc(&big, size_t(512) << 20));
  const double launch_big = seconds_of([&] {
    for (int i = 0; i < launches; i++) {
      HS_LAUNCH(1, 1, 0, 0, empty_kernel)();
      CUDA_OK(cudaStreamSynchronize(0));
    }
  });
  printf("launch + cudaStreamSynchronize of an empty kernel   %8.2f us (516 MiB of device memory in use)\n",
         launch_big / launches * 1e6);
  CUDA_OK(cudaFree(big));
  CUDA_OK(cudaFree(d));

  CHECK(round_trip_ns < 2000.0);
  CHECK(barrier_us[0] < 200.0);
  CHECK(elementwise / n < 5e-6);
  return 0;
}
