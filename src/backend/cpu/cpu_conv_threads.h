/* Workspace slots, threads and buffer alignment of the CPU convolutions, shared by im2col + GEMM
 * (cpu_conv.c) and Winograd (cpu_winograd.c), which dispatch to each other only one way (conv ->
 * Winograd). */
#ifndef HS_BACKEND_CPU_CPU_CONV_THREADS_H
#define HS_BACKEND_CPU_CPU_CONV_THREADS_H

#ifdef _OPENMP
#include <omp.h>
#endif

#include <stddef.h>

#define HS_CPU_CONV_ALIGN 16 /* floats: every buffer in a convolution workspace starts on a 64-byte line */

/* n floats rounded up to a whole number of HS_CPU_CONV_ALIGN */
static inline size_t hs_cpu_conv_round_up(size_t n) {
    return (n + HS_CPU_CONV_ALIGN - 1) / HS_CPU_CONV_ALIGN * HS_CPU_CONV_ALIGN;
}

/* Column buffers in the workspace: one per processor available to this process (omp_get_num_procs is
 * fixed for the process, so a workspace sized once stays large enough whatever OMP_NUM_THREADS says). */
static inline int hs_cpu_conv_slots(void) {
#ifdef _OPENMP
    return omp_get_num_procs();
#else
    return 1;
#endif
}

/* Threads a convolution runs on: the OpenMP setting, capped by the workspace's column buffers. */
static inline int hs_cpu_conv_threads(int slots) {
#ifdef _OPENMP
    const int t = omp_get_max_threads();
    return t < slots ? t : slots;
#else
    (void)slots;
    return 1;
#endif
}

/* The calling thread's number and the size of its team inside a parallel region (0 and 1 without OpenMP) */
static inline int hs_cpu_conv_thread_num(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

static inline int hs_cpu_conv_team_size(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

#endif
