#include "train/mfu.h"

#include <stdio.h>
#include <string.h>

#include "util/timer.h"

double hs_mfu_measure_gemm(const hs_backend *be, int n, double seconds) {
    const size_t bytes = (size_t)n * (size_t)n * sizeof(float);
    /* zero-filled: an FMA on zeros costs what it costs on any normal number */
    float *a = be->alloc(be, bytes), *b = be->alloc(be, bytes), *c = be->alloc(be, bytes);
    const double flops = 2.0 * n * n * (double)n;
    double t = hs_now();
    be->gemm(be, 0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n); /* warm-up: threads started, buffers touched */
    be->synchronize(be);
    const double start = hs_now();
    double best = flops / (start - t); /* only counts if the warm-up alone took longer than the budget */
    int timed = 0;
    while (hs_now() - start < seconds || (timed < 2 && hs_now() - start < 10 * seconds)) {
        t = hs_now();
        be->gemm(be, 0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        be->synchronize(be);
        const double rate = flops / (hs_now() - t);
        if (timed == 0 || rate > best) best = rate;
        timed++;
    }
    be->free(be, a);
    be->free(be, b);
    be->free(be, c);
    return best;
}

/* Published dense peaks (TFLOP/s, boost clock, no sparsity) of one reference GPU per compute
 * capability; 0 = the precision has no hardware path there. */
typedef struct gpu_peak {
    int major, minor;
    const char *name;
    int sms;
    double fp32, tf32, bf16, fp16;
} gpu_peak;
static const gpu_peak TABLE[] = {
    {7, 0, "V100 SXM2", 80, 15.7, 0, 0, 125},
    {7, 5, "T4", 40, 8.1, 0, 0, 65},
    {8, 0, "A100 SXM", 108, 19.5, 156, 312, 312},
    {8, 6, "A10", 72, 31.2, 62.5, 125, 125},
    {8, 9, "L4", 58, 30.3, 60, 121, 121},
    {9, 0, "H100 SXM", 132, 67, 494.7, 989.4, 989.4},
};

double hs_mfu_gpu_peak(int major, int minor, int sm_count, const char *precision, char *source, size_t n) {
    if (source && n) source[0] = 0;
    for (size_t i = 0; i < sizeof TABLE / sizeof TABLE[0]; i++) {
        const gpu_peak *g = &TABLE[i];
        if (g->major != major || g->minor != minor) continue;
        double tflops = 0;
        const char *used = precision;
        if (!strcmp(precision, "fp32")) tflops = g->fp32;
        else if (!strcmp(precision, "tf32") && g->tf32 > 0) tflops = g->tf32;
        else if (!strcmp(precision, "tf32")) { /* no TF32 before 8.0: the GEMMs run in fp32 */
            tflops = g->fp32;
            used = "fp32";
        }
        else if (!strcmp(precision, "bf16")) tflops = g->bf16;
        else if (!strcmp(precision, "fp16")) tflops = g->fp16;
        if (tflops <= 0 || sm_count <= 0) return 0;
        if (source)
            snprintf(source, n, "table: %s %g TFLOP/s %s, scaled to %d SMs", g->name, tflops, used, sm_count);
        return tflops * 1e12 * sm_count / g->sms;
    }
    return 0;
}
