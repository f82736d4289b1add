/* bf16 against fp32 matrix products on the CPU at BERT-mini's GEMM shapes (not a test; numbers for
 * docs/performance.md): OpenBLAS SGEMM, the bf16 product hetseq runs (oneDNN matmul, bf16 inputs, fp32
 * sums) and the portable bf16 path (round the operands, then SGEMM). GFLOP/s = 2·M·N·K / time, best
 * of `reps` after one warm-up call. Usage: bench/bf16_gemm_bench [reps]; threads from OMP_NUM_THREADS. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_bf16.h"
#include "util/check.h"
#include "util/timer.h"

typedef void (*gemm_fn)(int m, int n, int k, const float *a, const float *b, float *c);

static const hs_backend *bf16;

static void run_sgemm(int m, int n, int k, const float *a, const float *b, float *c) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}
static void run_dnnl(int m, int n, int k, const float *a, const float *b, float *c) {
    hs_cpu_bf16_set_path(1);
    bf16->gemm(bf16, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
}
static float *ra, *rb; /* rounded copies for the portable path */
static void run_rounded(int m, int n, int k, const float *a, const float *b, float *c) {
    hs_bf16_round_array(ra, a, (size_t)m * (size_t)k);
    hs_bf16_round_array(rb, b, (size_t)k * (size_t)n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, ra, k, rb, n, 0.0f, c, n);
}

static double gflops(gemm_fn f, int reps, int m, int n, int k, const float *a, const float *b, float *c) {
    f(m, n, k, a, b, c);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        const double t0 = hs_now();
        f(m, n, k, a, b, c);
        const double t = hs_now() - t0;
        if (t < best) best = t;
    }
    return 2.0 * m * n * k / best / 1e9;
}

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 10;
    char why[256];
    bf16 = hs_backend_cpu_bf16(why, sizeof why);
    if (!bf16) {
        fprintf(stderr, "%s\n", why);
        return 1;
    }
    static const int shapes[][3] = {{4096, 768, 256}, {4096, 1024, 256}, {4096, 256, 1024}};
    printf("threads %d\n%-20s %12s %12s %14s\n", omp_get_max_threads(), "M x N x K", "SGEMM", "bf16 oneDNN",
           "bf16 round+SGEMM");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        float *a, *b, *c;
        HS_ALLOC(a, (size_t)m * k);
        HS_ALLOC(b, (size_t)k * n);
        HS_ALLOC(c, (size_t)m * n);
        HS_ALLOC(ra, (size_t)m * k);
        HS_ALLOC(rb, (size_t)k * n);
        for (size_t i = 0; i < (size_t)m * k; i++) a[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
        for (size_t i = 0; i < (size_t)k * n; i++) b[i] = (float)((i * 2246822519u) % 1000) / 1000.0f - 0.5f;
        const double g_s = gflops(run_sgemm, reps, m, n, k, a, b, c);
        const double g_d = gflops(run_dnnl, reps, m, n, k, a, b, c);
        const double g_r = gflops(run_rounded, reps, m, n, k, a, b, c);
        printf("%5d x %4d x %4d %12.1f %12.1f %14.1f   GFLOP/s\n", m, n, k, g_s, g_d, g_r);
        free(a);
        free(b);
        free(c);
        free(ra);
        free(rb);
    }
    return 0;
}
