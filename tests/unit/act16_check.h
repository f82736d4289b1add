/* Shared by the tests of the 16-bit activation storage (test_bert_act16.c, test_txl_act16.c): the
 * device in a precision, and the norm-wise difference of a gradient between two models. */
#ifndef HS_TESTS_ACT16_CHECK_H
#define HS_TESTS_ACT16_CHECK_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "nn/params.h"

/* `device` ("cpu" | "cuda") computing its products in `precision`; NULL for bf16 on a CPU build without
 * oneDNN (the caller skips). */
static inline const hs_backend *act16_backend(const char *device, int precision) {
    static const char *names[] = {[HS_PRECISION_FP32] = "fp32", [HS_PRECISION_TF32] = "tf32",
                                  [HS_PRECISION_BF16] = "bf16", [HS_PRECISION_FP16] = "fp16"};
    if (strcmp(device, "cpu") != 0) return hs_backend_with_precision(hs_backend_select(device, 0), names[precision]);
    switch (precision) {
    case HS_PRECISION_BF16: return hs_backend_cpu_bf16(NULL, 0);
    case HS_PRECISION_FP16:
    case HS_PRECISION_TF32: return hs_backend_cpu_rounded(precision);
    default: return hs_backend_cpu();
    }
}

/* Gradient of tensor t in model a against model b (same layout): *d2 = Σ (a - b)², *r2 = Σ b². */
static inline void act16_grad_diff(const hs_params *a, const hs_params *b, int t, double *d2, double *r2) {
    const hs_backend *be = a->be;
    const size_t n = a->tensors[t].numel;
    float *ga = malloc(n * sizeof *ga), *gb = malloc(n * sizeof *gb);
    if (!ga || !gb) abort();
    be->download(be, ga, hs_param_grad(a, t), n * sizeof *ga);
    b->be->download(b->be, gb, hs_param_grad(b, t), n * sizeof *gb);
    *d2 = 0.0, *r2 = 0.0;
    for (size_t e = 0; e < n; e++) {
        const double d = (double)ga[e] - (double)gb[e];
        *d2 += d * d, *r2 += (double)gb[e] * gb[e];
    }
    free(ga), free(gb);
}

#endif
