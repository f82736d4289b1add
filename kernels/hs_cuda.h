/* hetseq's CUDA seam for kernels: the one header every CUDA source under kernels/ includes.
 *
 * Compiled two ways from the same source (docs/gpu-emulation.md):
 *   - by nvcc (__CUDACC__): NVIDIA's cuda_runtime.h, and the macros below map to real CUDA;
 *   - by the host C++ compiler for the emulated device (tests only; -DHS_CUDA_EMU and
 *     -Itests/cuda_emu/include first): the emulator's cuda_runtime.h supplies __global__,
 *     __device__, threadIdx, __syncthreads, the warp functions, atomics and the runtime API, and the
 *     macros below map to its launcher and per-block shared memory.
 *
 * Write kernels with:
 *   HS_LAUNCH(grid, block, shmem_bytes, stream, kernel)(args...);
 *       instead of kernel<<<grid, block, shmem_bytes, stream>>>(args...). kernel may be a template
 *       instance (HS_LAUNCH(g, b, 0, s, reduce<float, 256>)(...)). Errors arrive at cudaGetLastError.
 *   HS_SHARED(float[256], tile);
 *       instead of __shared__ float tile[256];  (any type: HS_SHARED(int, count); HS_SHARED(T[N][M], t))
 *   HS_SHARED_ALIGNED(32, float[16][16], tile);
 *       instead of __shared__ __align__(32) float tile[16][16];  (an alignment attribute inside HS_SHARED's
 *       type would be dropped by the host compiler; WMMA tiles, kernels/tile_mma.cuh, need 32 bytes)
 *   HS_DYNAMIC_SHARED(float, buf);
 *       instead of extern __shared__ float buf[];  (buf is a float *, 32-byte aligned; the size is the
 *       launch's shmem)
 *   HS_UNROLL for (...)
 *       instead of #pragma unroll (the host compiler would warn of an unknown pragma): a loop of a
 *       constant trip count whose arrays must stay in registers
 *   HS_NO_UNROLL for (...)
 *       instead of #pragma unroll 1: a loop nvcc must not unroll (its unrolled body would hold more
 *       registers than the kernel's bound allows, and spill)
 *   HS_VECTOR_AT(const float4, p)[k]
 *       instead of reinterpret_cast<const float4 *>(p)[k]: a vector access (float4, float2, uint2), which
 *       a GPU makes only at an address aligned to the vector's size (else the kernel stops with
 *       cudaErrorMisalignedAddress); the emulated device, whose host CPU loads any address, stops the
 *       kernel with that report too, naming the kernel, the access and its line
 * Plain __shared__ does not compile under the emulator, on purpose: a per-block variable that starts
 * undefined needs the macro.
 */
#ifndef HS_CUDA_H
#define HS_CUDA_H

#if defined(__CUDACC__)
#include <cuda_runtime.h>

template <class T> using hs_cuda_type = T; /* lets HS_SHARED take array types */

#define HS_LAUNCH(grid, block, shmem, stream, ...) __VA_ARGS__<<<(grid), (block), (shmem), (stream)>>>
#define HS_SHARED(type, name) __shared__ hs_cuda_type<type> name
#define HS_SHARED_ALIGNED(align, type, name) __shared__ __align__(align) hs_cuda_type<type> name
#define HS_DYNAMIC_SHARED(type, name)                               \
  extern __shared__ __align__(32) unsigned char hs_dynamic_shared_[]; \
  type *name = reinterpret_cast<type *>(hs_dynamic_shared_)
#define HS_UNROLL _Pragma("unroll")
#define HS_NO_UNROLL _Pragma("unroll 1")
#define HS_NOINLINE __noinline__ /* a device function kept out of line (a rare path in an unrolled loop) */
#define HS_VECTOR_AT(type, p) (reinterpret_cast<type *>(p))

#elif defined(HS_CUDA_EMU)
#include <cuda_runtime.h>
#ifndef HS_CUDA_EMU_RUNTIME
#error "kernels/hs_cuda.h: HS_CUDA_EMU is defined but <cuda_runtime.h> is NVIDIA's; put -I tests/cuda_emu/include first"
#endif

template <class T> using hs_cuda_type = T;

#define HS_LAUNCH(grid, block, shmem, stream, ...) \
  ::hs_emu::launcher(__VA_ARGS__, ::hs_emu::LaunchSite{#__VA_ARGS__, __FILE__, __LINE__}, grid, block, shmem, stream)
/* One block-local allocation per declaration, keyed by the address of a static tag (writable, so
 * that no linker or compiler option can merge two tags into one). */
#define HS_SHARED(type, name)                                                                             \
  static char hs_shared_tag_##name;                                                                       \
  hs_cuda_type<type> &name = *static_cast<hs_cuda_type<type> *>(::hs_emu::block_shared(                  \
      &hs_shared_tag_##name, sizeof(hs_cuda_type<type>), alignof(hs_cuda_type<type>), #name))
#define HS_SHARED_ALIGNED(align, type, name)                                                                \
  static char hs_shared_tag_##name;                                                                       \
  hs_cuda_type<type> &name = *static_cast<hs_cuda_type<type> *>(::hs_emu::block_shared(                  \
      &hs_shared_tag_##name, sizeof(hs_cuda_type<type>),                                                  \
      (align) > alignof(hs_cuda_type<type>) ? (align) : alignof(hs_cuda_type<type>), #name))
#define HS_DYNAMIC_SHARED(type, name) type *name = static_cast<type *>(::hs_emu::dynamic_shared())
#define HS_UNROLL
#define HS_NO_UNROLL
#define HS_NOINLINE __attribute__((noinline))
#define HS_VECTOR_AT(type, p) (::hs_emu::vector_at<type>((p), #type, __FILE__, __LINE__))

#else
#error "kernels/hs_cuda.h: compile with nvcc, or for the emulated device with -DHS_CUDA_EMU (tests/cuda_emu)"
#endif

/* 1/x by the GPU's special-function unit: PTX rcp.approx.ftz.f32, one MUFU.RCP instruction, within 1 ulp
 * (an IEEE division, 1.0f / x, is about 8 instructions around it and a slow-path branch); subnormal
 * inputs and results are flushed to zero. Modelled on the emulated device with that error. */
__device__ __forceinline__ float hs_rcp_approx(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#elif defined(HS_CUDA_EMU)
  return hs_emu_rcp_approx_ftz(x);
#else
  return 1.0f / x; /* nvcc's host pass compiles device code it never runs */
#endif
}

/* 2^t by the GPU's special-function unit: PTX ex2.approx.ftz.f32, one MUFU.EX2 instruction (at an eighth
 * of the arithmetic rate, on its own pipe), within 2 ulp; subnormal inputs and results are flushed to
 * zero (2^t < 2^-126 gives +0), 2^-inf = +0. The emulated device models the error
 * (tests/cuda_emu/include/hs_emu/device_builtins.h), so tests bound it as a GPU's. */
__device__ __forceinline__ float hs_ex2_approx(float t) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(t));
  return y;
#elif defined(HS_CUDA_EMU)
  return hs_emu_ex2_approx_ftz(t);
#else
  return exp2f(t); /* nvcc's host pass compiles device code it never runs */
#endif
}

#endif
