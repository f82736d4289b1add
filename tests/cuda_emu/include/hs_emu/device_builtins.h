// Device-side CUDA for the emulated device (tests only; tests/cuda_emu/, docs/gpu-emulation.md).
// The function qualifiers, the built-in variables, barriers, warp-level functions, atomics and the
// few device intrinsics hetseq kernels use, for kernels compiled by the host C++ compiler. Each
// emulated thread is a fiber; these functions switch fibers where CUDA threads would wait.
#ifndef HS_EMU_DEVICE_BUILTINS_H
#define HS_EMU_DEVICE_BUILTINS_H
#include <math.h> // kernels call expf, sqrtf, ... unqualified, as under nvcc
#include <stdio.h>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include "../vector_types.h"

// ---- function and variable qualifiers (Programming Guide, "C++ Language Extensions") -----------
// One compilation serves host and device: __global__ and __device__ functions are host functions.
// __CUDA_ARCH__ is not defined, so code must not select device paths with it.
#define __global__
#define __device__
#define __host__
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// Static shared memory must be per block and start undefined; a plain `static` cannot give that, so
// hetseq kernels declare it with HS_SHARED / HS_DYNAMIC_SHARED (kernels/hs_cuda.h).
#define __shared__ _Pragma("GCC error \"declare shared memory with HS_SHARED(type, name) or HS_DYNAMIC_SHARED(type, name) from kernels/hs_cuda.h\"")
#define __constant__ _Pragma("GCC error \"__constant__ memory is not supported by the emulated CUDA device (tests/cuda_emu)\"")
#define __managed__ _Pragma("GCC error \"managed memory is not supported by the emulated CUDA device (tests/cuda_emu)\"")

namespace hs_emu {

// ---- built-in variables (Programming Guide, "Built-in Variables"): per emulated thread ----------
struct ThreadCoords {
  uint3 tid;
  uint3 bid;
  dim3 bdim;
  dim3 gdim;
};
extern ThreadCoords *g_cur; // the emulated thread running now; nullptr in host code
[[noreturn]] void outside_kernel(const char *what);
inline const ThreadCoords &coords(const char *what) {
  if (__builtin_expect(g_cur == nullptr, 0)) outside_kernel(what);
  return *g_cur;
}

// ---- entry points into the block scheduler (runtime/block.cc) ----------------------------------
enum class BarrierKind { Plain, Count, And, Or };
int syncthreads(BarrierKind kind, int predicate, const char *file, int line);
enum class WarpOp : unsigned char { SyncWarp, ShflIdx, ShflUp, ShflDown, ShflXor, Ballot, Any, All, Collective };
// Waits until every non-exited lane named in mask has called the same warp function with the same
// mask, then returns this lane's result (8 bytes; an undefined result is all ones = NaN / -1).
uint64_t warp_op(WarpOp op, unsigned mask, uint64_t value, int b, int width, const char *file, int line);
// A warp-collective operation computed once for the whole warp (the nvcuda::wmma functions, mma.h):
// all 32 lanes of the warp, none exited, must call it at the same call site (file, line) with the same
// complete function. When the last lane arrives, complete(args) runs once, while every lane waits, with
// args[l] the args pointer lane l passed (its arguments, on its stack); it computes every lane's
// result and returns nullptr, or a message that is reported as an error in the kernel. A lane that
// returned from the kernel, a partial last warp, or lanes at different call sites are reported too.
using CollectiveFn = const char *(*)(void *const *args);
void warp_collective(const char *name, CollectiveFn complete, void *args, const char *file, int line);
// How many lanes of the caller's warp wait in a warp-collective function now: 0 before the call makes
// the caller the first to arrive (mma.h and kernels/tile_mma.cuh note the tiles they read then).
int collective_arrived();
// h mixed with the rows x cols matrix at p (row-major, ld elements of esize <= 4 bytes apart per row):
// what the first lane at a warp-collective tile step notes, to see the tile change before the last
// arrives (mma.h, kernels/tile_mma.cuh). NULL p: h.
inline uint64_t matrix_hash(uint64_t h, const void *p, int rows, int cols, size_t ld, size_t esize) {
  if (p == nullptr) return h;
  for (int r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) {
      uint32_t v = 0;
      std::memcpy(&v, static_cast<const unsigned char *>(p) + ((size_t)r * ld + (size_t)c) * esize, esize);
      h = (h ^ v) * 0x100000001B3ull;
    }
  return h;
}
void yield_point();                                                   // lets another thread of the block run
// A vector access (kernels/hs_cuda.h, HS_VECTOR_AT) at an address not aligned to the vector's size: reported
// as a GPU's cudaErrorMisalignedAddress, naming the kernel, the type and the line.
[[noreturn]] void misaligned_vector(const void *p, size_t size, const char *type, const char *file, int line);
template <class V, class P> inline V *vector_at(P *p, const char *type, const char *file, int line) {
  if (reinterpret_cast<uintptr_t>(p) % sizeof(V) != 0) misaligned_vector(p, sizeof(V), type, file, line);
  return reinterpret_cast<V *>(p);
}
void *block_shared(const void *key, size_t size, size_t align, const char *name); // HS_SHARED
void *dynamic_shared();                                               // HS_DYNAMIC_SHARED

template <class T> inline T shuffle(WarpOp op, unsigned mask, T var, int b, int width, const char *file, int line) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "warp shuffles move 4- or 8-byte values");
  uint64_t v = 0;
  std::memcpy(&v, &var, sizeof(T));
  const uint64_t r = warp_op(op, mask, v, b, width, file, line);
  T out;
  std::memcpy(&out, &r, sizeof(T));
  return out;
}

template <class T> inline T atomic_update(T *address, T (*f)(T, T), T val) {
  const T old = *address; // fibers of one host thread never interleave inside this function
  *address = f(old, val);
  return old;
}
template <class T> inline T wrap_add(T a, T b) {
  using U = typename std::make_unsigned<T>::type; // two's-complement wrap, as the GPU does
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
} // namespace hs_emu

#define threadIdx (::hs_emu::coords("threadIdx").tid)
#define blockIdx (::hs_emu::coords("blockIdx").bid)
#define blockDim (::hs_emu::coords("blockDim").bdim)
#define gridDim (::hs_emu::coords("gridDim").gdim)
static constexpr int warpSize = 32;

// ---- barriers (Programming Guide, "Synchronization Functions") ---------------------------------
// Every thread of the block must reach the same __syncthreads; a thread that exited or waits at
// another barrier is reported as an error (the Guide: conditional __syncthreads only if the
// condition is the same across the block). The call site is recorded for the report.
inline void __syncthreads(const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  ::hs_emu::syncthreads(::hs_emu::BarrierKind::Plain, 0, file, line);
}
inline int __syncthreads_count(int predicate, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  return ::hs_emu::syncthreads(::hs_emu::BarrierKind::Count, predicate, file, line);
}
inline int __syncthreads_and(int predicate, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  return ::hs_emu::syncthreads(::hs_emu::BarrierKind::And, predicate, file, line);
}
inline int __syncthreads_or(int predicate, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  return ::hs_emu::syncthreads(::hs_emu::BarrierKind::Or, predicate, file, line);
}
// Memory fences order memory accesses, they do not wait for other threads (Programming Guide,
// "Memory Fence Functions"); on one host thread program order already holds.
inline void __threadfence_block() { std::atomic_signal_fence(std::memory_order_seq_cst); }
inline void __threadfence() { std::atomic_signal_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_signal_fence(std::memory_order_seq_cst); }

// ---- warp-level functions (Programming Guide, "Warp Shuffle Functions", "Warp Vote Functions",
// "Synchronization Functions: __syncwarp"; PTX ISA, shfl.sync / vote.sync / bar.warp.sync).
// Warps are 32 consecutive threads in linear thread order. Each function waits until all
// non-exited threads in mask have executed the same function with the same mask.
inline void __syncwarp(unsigned mask = 0xffffffffu, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  ::hs_emu::warp_op(::hs_emu::WarpOp::SyncWarp, mask, 0, 0, 32, file, line);
}
template <class T>
inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize, const char *file = __builtin_FILE(),
                     int line = __builtin_LINE()) {
  return ::hs_emu::shuffle(::hs_emu::WarpOp::ShflIdx, mask, var, srcLane, width, file, line);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize, const char *file = __builtin_FILE(),
                        int line = __builtin_LINE()) {
  return ::hs_emu::shuffle(::hs_emu::WarpOp::ShflUp, mask, var, static_cast<int>(delta), width, file, line);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize, const char *file = __builtin_FILE(),
                          int line = __builtin_LINE()) {
  return ::hs_emu::shuffle(::hs_emu::WarpOp::ShflDown, mask, var, static_cast<int>(delta), width, file, line);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize, const char *file = __builtin_FILE(),
                         int line = __builtin_LINE()) {
  return ::hs_emu::shuffle(::hs_emu::WarpOp::ShflXor, mask, var, laneMask, width, file, line);
}
inline unsigned __ballot_sync(unsigned mask, int predicate, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  return static_cast<unsigned>(::hs_emu::warp_op(::hs_emu::WarpOp::Ballot, mask, predicate != 0, 0, 32, file, line));
}
inline int __any_sync(unsigned mask, int predicate, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  return static_cast<int>(::hs_emu::warp_op(::hs_emu::WarpOp::Any, mask, predicate != 0, 0, 32, file, line));
}
inline int __all_sync(unsigned mask, int predicate, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  return static_cast<int>(::hs_emu::warp_op(::hs_emu::WarpOp::All, mask, predicate != 0, 0, 32, file, line));
}

// ---- atomic functions (Programming Guide, "Atomic Functions"): return the old value -------------
// atomicCAS and atomicExch (the building blocks of spin locks) and __nanosleep let another thread of
// the block run, so a lock held by another thread of the same block is eventually released.
inline int atomicAdd(int *a, int v) { return ::hs_emu::atomic_update<int>(a, ::hs_emu::wrap_add<int>, v); }
inline unsigned atomicAdd(unsigned *a, unsigned v) { return ::hs_emu::atomic_update<unsigned>(a, ::hs_emu::wrap_add<unsigned>, v); }
inline unsigned long long atomicAdd(unsigned long long *a, unsigned long long v) {
  return ::hs_emu::atomic_update<unsigned long long>(a, ::hs_emu::wrap_add<unsigned long long>, v);
}
inline float atomicAdd(float *a, float v) { return ::hs_emu::atomic_update<float>(a, [](float x, float y) { return x + y; }, v); }
inline double atomicAdd(double *a, double v) { return ::hs_emu::atomic_update<double>(a, [](double x, double y) { return x + y; }, v); }
inline int atomicSub(int *a, int v) { return ::hs_emu::atomic_update<int>(a, [](int x, int y) { return ::hs_emu::wrap_add<int>(x, -y); }, v); }
inline unsigned atomicSub(unsigned *a, unsigned v) { return ::hs_emu::atomic_update<unsigned>(a, [](unsigned x, unsigned y) { return x - y; }, v); }
template <class T> inline T hs_emu_atomic_max(T *a, T v) { return ::hs_emu::atomic_update<T>(a, [](T x, T y) { return x > y ? x : y; }, v); }
template <class T> inline T hs_emu_atomic_min(T *a, T v) { return ::hs_emu::atomic_update<T>(a, [](T x, T y) { return x < y ? x : y; }, v); }
inline int atomicMax(int *a, int v) { return hs_emu_atomic_max(a, v); }
inline unsigned atomicMax(unsigned *a, unsigned v) { return hs_emu_atomic_max(a, v); }
inline long long atomicMax(long long *a, long long v) { return hs_emu_atomic_max(a, v); }
inline unsigned long long atomicMax(unsigned long long *a, unsigned long long v) { return hs_emu_atomic_max(a, v); }
inline int atomicMin(int *a, int v) { return hs_emu_atomic_min(a, v); }
inline unsigned atomicMin(unsigned *a, unsigned v) { return hs_emu_atomic_min(a, v); }
inline long long atomicMin(long long *a, long long v) { return hs_emu_atomic_min(a, v); }
inline unsigned long long atomicMin(unsigned long long *a, unsigned long long v) { return hs_emu_atomic_min(a, v); }
inline unsigned atomicInc(unsigned *a, unsigned v) {
  return ::hs_emu::atomic_update<unsigned>(a, [](unsigned old, unsigned y) { return old >= y ? 0u : old + 1; }, v);
}
inline unsigned atomicDec(unsigned *a, unsigned v) {
  return ::hs_emu::atomic_update<unsigned>(a, [](unsigned old, unsigned y) { return (old == 0 || old > y) ? y : old - 1; }, v);
}
template <class T> inline T hs_emu_atomic_and(T *a, T v) { return ::hs_emu::atomic_update<T>(a, [](T x, T y) { return x & y; }, v); }
template <class T> inline T hs_emu_atomic_or(T *a, T v) { return ::hs_emu::atomic_update<T>(a, [](T x, T y) { return x | y; }, v); }
template <class T> inline T hs_emu_atomic_xor(T *a, T v) { return ::hs_emu::atomic_update<T>(a, [](T x, T y) { return x ^ y; }, v); }
inline int atomicAnd(int *a, int v) { return hs_emu_atomic_and(a, v); }
inline unsigned atomicAnd(unsigned *a, unsigned v) { return hs_emu_atomic_and(a, v); }
inline unsigned long long atomicAnd(unsigned long long *a, unsigned long long v) { return hs_emu_atomic_and(a, v); }
inline int atomicOr(int *a, int v) { return hs_emu_atomic_or(a, v); }
inline unsigned atomicOr(unsigned *a, unsigned v) { return hs_emu_atomic_or(a, v); }
inline unsigned long long atomicOr(unsigned long long *a, unsigned long long v) { return hs_emu_atomic_or(a, v); }
inline int atomicXor(int *a, int v) { return hs_emu_atomic_xor(a, v); }
inline unsigned atomicXor(unsigned *a, unsigned v) { return hs_emu_atomic_xor(a, v); }
inline unsigned long long atomicXor(unsigned long long *a, unsigned long long v) { return hs_emu_atomic_xor(a, v); }
template <class T> inline T hs_emu_atomic_exch(T *a, T v) {
  ::hs_emu::yield_point();
  const T old = *a;
  *a = v;
  return old;
}
inline int atomicExch(int *a, int v) { return hs_emu_atomic_exch(a, v); }
inline unsigned atomicExch(unsigned *a, unsigned v) { return hs_emu_atomic_exch(a, v); }
inline unsigned long long atomicExch(unsigned long long *a, unsigned long long v) { return hs_emu_atomic_exch(a, v); }
inline float atomicExch(float *a, float v) { return hs_emu_atomic_exch(a, v); }
template <class T> inline T hs_emu_atomic_cas(T *a, T compare, T val) {
  ::hs_emu::yield_point();
  const T old = *a;
  if (old == compare) *a = val;
  return old;
}
inline int atomicCAS(int *a, int c, int v) { return hs_emu_atomic_cas(a, c, v); }
inline unsigned atomicCAS(unsigned *a, unsigned c, unsigned v) { return hs_emu_atomic_cas(a, c, v); }
inline unsigned long long atomicCAS(unsigned long long *a, unsigned long long c, unsigned long long v) {
  return hs_emu_atomic_cas(a, c, v);
}
inline unsigned short atomicCAS(unsigned short *a, unsigned short c, unsigned short v) { return hs_emu_atomic_cas(a, c, v); }
inline void __nanosleep(unsigned) { ::hs_emu::yield_point(); }

// ---- integer and math intrinsics (CUDA Math API; "Integer Intrinsics", "Single Precision Intrinsics")
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / sqrt(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float x, float y) { return x / y; }
// y moved by -max_ulps..+max_ulps ulps, an amount chosen from the bits of the input x (the same for the
// same x): the special-function unit's error as the models below give it
inline float hs_emu_ulps_moved(float y, float x, int max_ulps) {
  uint32_t xb, yb;
  memcpy(&xb, &x, sizeof xb);
  memcpy(&yb, &y, sizeof yb);
  xb ^= xb >> 16, xb *= 0x7feb352dU, xb ^= xb >> 15, xb *= 0x846ca68bU, xb ^= xb >> 16;
  yb = (uint32_t)((int64_t)yb + (int)(xb % (2U * (uint32_t)max_ulps + 1U)) - max_ulps);
  float r;
  memcpy(&r, &yb, sizeof r);
  return fabsf(r) < 1.17549435e-38f ? copysignf(0.0f, y) : r; // ftz
}

// PTX rcp.approx.ftz.f32 (MUFU.RCP; kernels/hs_cuda.h's hs_rcp_approx): 1/x within 1 ulp, subnormal
// inputs (-> +-inf) and results (-> +-0) flushed. Modelled as the exact quotient moved by -1..+1 ulp;
// 1/+-1, 1/+-0, 1/+-inf and NaN exact.
inline float hs_emu_rcp_approx_ftz(float x) {
  if (x != x) return x;
  if (fabsf(x) < 1.17549435e-38f) x = copysignf(0.0f, x); // ftz: a subnormal input is 0
  const float y = 1.0f / x;
  if (fabsf(y) < 1.17549435e-38f) return copysignf(0.0f, y); // ftz (and 1/inf = 0)
  if (isinf(y) || fabsf(x) == 1.0f) return y;
  return hs_emu_ulps_moved(y, x, 1);
}

// PTX ex2.approx.ftz.f32 (MUFU.EX2; kernels reach it through inline PTX, kernels/hs_cuda.h's
// hs_ex2_approx): 2^t within 2 ulp (the CUDA Math API's bound for exp2f, which is this instruction),
// subnormal inputs and results flushed to zero. Modelled as the host's exp2f (within 0.502 ulp) moved by
// -2..+2 ulp, so a result here is off by as much as a GPU's may be: a model more exact than the hardware
// would let too tight a bound pass here and fail on a GPU. 2^0 = 1 and the specials (NaN, +-inf -> NaN,
// inf, +0) are exact.
inline float hs_emu_ex2_approx_ftz(float t) {
  if (t != t) return t;
  if (fabsf(t) < 1.17549435e-38f) t = 0.0f; // ftz: a subnormal input is 0
  if (t == 0.0f) return 1.0f;
  const float y = exp2f(t);
  if (y < 1.17549435e-38f) return 0.0f; // ftz: a subnormal result is +0
  if (isinf(y)) return y;
  return hs_emu_ulps_moved(y, t, 2);
}
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
template <class T> inline T __ldg(const T *p) { return *p; }
inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline float min(float a, float b) { return fminf(a, b); }
inline double min(double a, double b) { return fmin(a, b); }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float max(float a, float b) { return fmaxf(a, b); }
inline double max(double a, double b) { return fmax(a, b); }

#endif
