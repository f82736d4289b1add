/* Element-wise math written once for both backends: __host__ __device__ under nvcc, plain static
 * inline under gcc, so the CPU backend runs (and the CPU tests cover) the same formulas the CUDA
 * kernels use. */
#ifndef HS_KERNELS_MATH_H
#define HS_KERNELS_MATH_H

#include <stdint.h>

#ifdef __CUDACC__
#define HS_HD __host__ __device__
#else
#define HS_HD
#endif

/* HS_HD_INLINE: HS_HD static inline, and forced inline: for a function the CPU backend calls inside
 * loops it compiles for several vector widths (src/backend/cpu/cpu_simd.h), where GCC would otherwise
 * keep a scalar out-of-line call and the loop would not vectorise. */
#if defined(__CUDACC__)
#define HS_HD_INLINE __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define HS_HD_INLINE __attribute__((always_inline)) static inline
#else
#define HS_HD_INLINE static inline
#endif

/* Counter-based random numbers: pure functions of (key, counter), never of rank or thread, so a run gives
 * the same numbers on 1, 2 or N ranks and after a resume. splitmix64 finalizer mixing. hs_uniform (a
 * uniform in [0,1)) draws the parameters' initialisation and Transformer-XL's sequence lengths; dropout
 * masks draw from the cheaper 32-bit streams of math/dropout.h, keyed by hs_rng_key. */
HS_HD static inline uint64_t hs_mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Key for a (seed, update, layer) triple; combine with a sample index and element offset. */
HS_HD static inline uint64_t hs_rng_key(uint64_t seed, uint64_t update, uint64_t layer) {
    return hs_mix64(hs_mix64(hs_mix64(seed) ^ update) ^ (layer * 0xd1342543de82ef95ULL));
}

HS_HD static inline float hs_uniform(uint64_t key, uint64_t sample, uint64_t elem) {
    uint64_t h = hs_mix64(key ^ hs_mix64(sample * 0x9e3779b97f4a7c15ULL + elem));
    return (float)(h >> 40) * (1.0f / 16777216.0f); /* 24 random bits */
}

#endif
