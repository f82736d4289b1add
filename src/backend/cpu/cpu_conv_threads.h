/* Workspace slots and threads of the CPU convolutions, shared by im2col + GEMM (cpu_conv.c) and
 * Winograd (cpu_winograd.c), which dispatch to each other only one way (conv -> Winograd). */
#ifndef HS_BACKEND_CPU_CPU_CONV_THREADS_H
#define HS_BACKEND_CPU_CPU_CONV_THREADS_H

#ifdef _OPENMP
#include <omp.h>
#endif

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

#endif
