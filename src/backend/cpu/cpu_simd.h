/* Run-time choice of the widest vector unit for the CPU backend's element-wise kernels. The build
 * uses the compiler's baseline (SSE2 on x86-64) so one binary runs on every node; HS_SIMD_CLONES makes
 * GCC compile a function also for x86-64-v3 (AVX2+FMA) and x86-64-v4 (AVX-512) and pick the best one
 * when the program loads (ifunc). Kernels marked with it are row or span functions called from the
 * OpenMP loops. Under -std=c11 GCC does not contract a·b+c into FMA, so element-wise results are the
 * same bits in every version; only vectorised sums (omp simd reductions) may round differently between
 * CPU generations — never between thread counts or runs on the same machine. */
#ifndef HS_BACKEND_CPU_SIMD_H
#define HS_BACKEND_CPU_SIMD_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define HS_SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define HS_SIMD_CLONES
#endif

#endif
