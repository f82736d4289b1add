/* Training throughput of the MNIST CNN on the CPU backend: images per second for forward + backward +
 * a plain SGD step (p -= lr·g, done as a rank-1 GEMM so only backend calls are used), batch 64 by
 * default, with OMP_NUM_THREADS threads. Synthetic inputs: the cost does not depend on pixel values.
 *   usage: cnn_bench [BATCH [ITERATIONS]] */
#include <stdio.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend/backend.h"
#include "math/hs_math.h"
#include "models/cnn.h"
#include "nn/params.h"
#include "util/timer.h"

int main(int argc, char **argv) {
    const int batch = argc > 1 ? atoi(argv[1]) : 64;
    const int iterations = argc > 2 ? atoi(argv[2]) : 30;
    if (batch < 1 || iterations < 1) {
        fprintf(stderr, "usage: %s [BATCH [ITERATIONS]]\n", argv[0]);
        return 2;
    }
    const hs_backend *be = hs_backend_cpu();
    hs_params params = {0};
    hs_cnn *model = hs_cnn_create(&params, batch, 0.25f, 0.5f);
    hs_params_allocate(&params, be);
    hs_cnn_setup(model);
    hs_cnn_init_params(model, 1);

    const size_t nx = (size_t)batch * 28 * 28;
    float *x_host = malloc(nx * sizeof *x_host);
    int32_t *labels_host = malloc((size_t)batch * sizeof *labels_host);
    if (!x_host || !labels_host) return 1;
    const uint64_t key = hs_rng_key(7, 0, 0);
    for (size_t i = 0; i < nx; i++) x_host[i] = 3.0f * hs_uniform(key, 0, i) - 0.8f;
    for (int i = 0; i < batch; i++) labels_host[i] = i % 10;
    float *x = be->alloc(be, nx * sizeof *x);
    int32_t *labels = be->alloc(be, (size_t)batch * sizeof *labels);
    float *one = be->alloc(be, sizeof *one);
    const float one_host = 1.0f;
    be->upload(be, x, x_host, nx * sizeof *x);
    be->upload(be, labels, labels_host, (size_t)batch * sizeof *labels);
    be->upload(be, one, &one_host, sizeof one_host);

    double t0 = 0.0;
    double *stats = be->alloc(be, HS_STATS_NDOUBLE * sizeof(double)); /* device stats */
    const int warmup = 3;
    for (int it = 0; it < warmup + iterations; it++) {
        if (it == warmup) {
            be->synchronize(be);
            t0 = hs_now();
        }
        const hs_step_ctx ctx = {.seed = 1, .update = (uint64_t)it, .training = 1, .loss_scale = {1.0 / batch, 0.0}};
        hs_params_zero_grad(&params);
        hs_cnn_forward_backward(model, x, labels, batch, (int64_t)it * batch, &ctx, stats);
        /* SGD: data[1,total] += (-lr) · one[1,1] · grad[1,total] */
        be->gemm(be, 0, 0, 1, (int)params.total, 1, -1e-3f, one, 1, params.grad, (int)params.total, 1.0f, params.data,
                 (int)params.total);
    }
    be->synchronize(be);
    const double seconds = hs_now() - t0;
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    printf("hetseq  CNN training: %8.1f images/s  (batch %d, %d threads, %d iterations, %.2f ms/iteration)\n",
           (double)batch * iterations / seconds, batch, threads, iterations, 1e3 * seconds / iterations);
    be->free(be, x), be->free(be, labels), be->free(be, one);
    free(x_host), free(labels_host);
    hs_cnn_free(model);
    hs_params_free(&params);
    return 0;
}
