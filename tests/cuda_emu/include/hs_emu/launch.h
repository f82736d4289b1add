// Kernel launch on the emulated device (tests only; tests/cuda_emu/). HS_LAUNCH (kernels/hs_cuda.h)
// expands to hs_emu::launcher(kernel, site, grid, block, shmem, stream)(args...), the counterpart of
// kernel<<<grid, block, shmem, stream>>>(args...) (Programming Guide, "Execution Configuration").
#ifndef HS_EMU_LAUNCH_H
#define HS_EMU_LAUNCH_H
#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>
#include "../cuda_runtime_api.h"

namespace hs_emu {

struct LaunchSite {
  const char *kernel; // the kernel expression as written at the launch
  const char *file;
  int line;
};

// Checks the execution configuration (errors go to cudaGetLastError and nothing is enqueued, as
// with <<<>>>), then enqueues the kernel on the stream; body runs one emulated thread.
void launch_kernel(const void *func, const LaunchSite &site, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream,
                   std::function<void()> body);

template <class... P> class Launcher {
public:
  Launcher(void (*kernel)(P...), LaunchSite site, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream)
      : kernel_(kernel), site_(site), grid_(grid), block_(block), shmem_(shmem), stream_(stream) {}

  template <class... A> void operator()(A &&...args) const {
    static_assert(sizeof...(A) == sizeof...(P), "HS_LAUNCH: wrong number of kernel arguments");
    static_assert(!(std::is_reference<P>::value || ...), "__global__ function parameters are passed by value");
    // The arguments are copied at the launch, like CUDA's parameter buffer; each thread gets its own copy.
    auto params = std::make_shared<const std::tuple<typename std::decay<P>::type...>>(std::forward<A>(args)...);
    void (*kernel)(P...) = kernel_;
    launch_kernel(reinterpret_cast<const void *>(kernel), site_, grid_, block_, shmem_, stream_,
                  [kernel, params] { std::apply(kernel, *params); });
  }

private:
  void (*kernel_)(P...);
  LaunchSite site_;
  dim3 grid_, block_;
  size_t shmem_;
  cudaStream_t stream_;
};

template <class... P>
Launcher<P...> launcher(void (*kernel)(P...), LaunchSite site, dim3 grid, dim3 block, size_t shmem, cudaStream_t stream) {
  return Launcher<P...>(kernel, site, grid, block, shmem, stream);
}

} // namespace hs_emu
#endif
