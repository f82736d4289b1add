/* The comparison harness of the op-conformance test (conformance.h). */
#include "conformance.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"

const size_t hs_conf_sizes[] = {1, 31, 33, 127, 256, 1000, 4097};
const int hs_conf_nsizes = (int)(sizeof hs_conf_sizes / sizeof hs_conf_sizes[0]);

static double worst_of_op; /* worst relative error of the current op */
static int checks_of_op;

static void finish_op(hs_conf *t) {
    if (t->op && checks_of_op) printf("  %-28s %4d checks, worst relative difference %.3g\n", t->op, checks_of_op, worst_of_op);
    worst_of_op = 0.0;
    checks_of_op = 0;
}

void hs_conf_op(hs_conf *t, const char *op) {
    finish_op(t);
    t->op = op;
}

static uint64_t next(hs_conf *t) {
    uint64_t x = t->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return t->rng = x;
}

float *hs_conf_rand(hs_conf *t, size_t n, float lo, float hi) {
    float *v;
    HS_ALLOC(v, n ? n : 1);
    for (size_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * (float)((next(t) >> 40) * (1.0 / 16777216.0));
    return v;
}

int32_t *hs_conf_rand_int(hs_conf *t, size_t n, int32_t lo, int32_t hi_excl) {
    int32_t *v;
    HS_ALLOC(v, n ? n : 1);
    for (size_t i = 0; i < n; i++) v[i] = lo + (int32_t)(next(t) % (uint64_t)(hi_excl - lo));
    return v;
}

uint8_t *hs_conf_rand_u8(hs_conf *t, size_t n) {
    uint8_t *v;
    HS_ALLOC(v, n ? n : 1);
    for (size_t i = 0; i < n; i++) v[i] = (uint8_t)(next(t) >> 56);
    return v;
}

void *hs_conf_dev(const hs_backend *be, const void *host, size_t bytes) {
    void *d = be->alloc(be, bytes ? bytes : 1);
    if (bytes && host) be->upload(be, d, host, bytes);
    return d;
}

void hs_conf_both(hs_conf *t, const void *host, size_t bytes, void **cpu_dev, void **cuda_dev) {
    *cpu_dev = hs_conf_dev(t->cpu, host, bytes);
    *cuda_dev = hs_conf_dev(t->cuda, host, bytes);
}

void hs_conf_free_both(hs_conf *t, void *cpu_dev, void *cuda_dev) {
    t->cpu->free(t->cpu, cpu_dev);
    t->cuda->free(t->cuda, cuda_dev);
}

static void *download(const hs_backend *be, const void *dev, size_t bytes) {
    void *h = malloc(bytes ? bytes : 1);
    if (!h) HS_FATAL("out of memory", "malloc(%zu)", bytes);
    if (bytes) be->download(be, h, dev, bytes);
    return h;
}

/* a[i] (CPU) against b[i] (CUDA) in double: the worst |a_i - b_i| over max_j |a_j| (conformance.h), or
 * INFINITY if a value is not finite on one side only. Reports the worst element. */
static void compare(hs_conf *t, const char *what, const double *a, const double *b, size_t n, double tol) {
    double scale = 0.0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(a[i]) && fabs(a[i]) > scale) scale = fabs(a[i]);
    double worst = 0.0;
    size_t worst_i = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        double rel;
        if (!isfinite(a[i]) || !isfinite(b[i]))
            rel = (isnan(a[i]) && isnan(b[i])) || a[i] == b[i] ? 0.0 : INFINITY;
        else if (scale > 0.0)
            rel = fabs(a[i] - b[i]) / scale;
        else
            rel = a[i] == b[i] ? 0.0 : INFINITY;
        if (rel > tol) bad++;
        if (rel > worst || (isinf(rel) && !isinf(worst))) {
            worst = rel;
            worst_i = i;
        }
    }
    t->checks++;
    checks_of_op++;
    if (worst > worst_of_op) worst_of_op = worst;
    if (bad) {
        t->failures++;
        printf("FAIL %s: %s: %zu of %zu values differ by more than %g relative; worst at [%zu]: cpu %.9g cuda %.9g "
               "(relative %.3g)\n",
               t->op ? t->op : "?", what, bad, n, tol, worst_i, a[worst_i], b[worst_i], worst);
    }
}

void hs_conf_check_f32(hs_conf *t, const char *what, const float *cpu_dev, const float *cuda_dev, size_t n,
                       double tol) {
    float *a = download(t->cpu, cpu_dev, n * sizeof *a), *b = download(t->cuda, cuda_dev, n * sizeof *b);
    double *da, *db;
    HS_ALLOC(da, n ? n : 1);
    HS_ALLOC(db, n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        da[i] = a[i];
        db[i] = b[i];
    }
    compare(t, what, da, db, n, tol);
    free(a), free(b), free(da), free(db);
}

void hs_conf_check_f64(hs_conf *t, const char *what, const double *cpu_dev, const double *cuda_dev, size_t n,
                       double tol) {
    double *a = download(t->cpu, cpu_dev, n * sizeof *a), *b = download(t->cuda, cuda_dev, n * sizeof *b);
    compare(t, what, a, b, n, tol);
    free(a), free(b);
}

void hs_conf_check_i32(hs_conf *t, const char *what, const int32_t *cpu_dev, const int32_t *cuda_dev, size_t n) {
    int32_t *a = download(t->cpu, cpu_dev, n * sizeof *a), *b = download(t->cuda, cuda_dev, n * sizeof *b);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i] && !bad++) first = i;
    t->checks++;
    checks_of_op++;
    if (bad) {
        t->failures++;
        printf("FAIL %s: %s: %zu of %zu integers differ; first at [%zu]: cpu %d cuda %d\n", t->op ? t->op : "?", what,
               bad, n, first, a[first], b[first]);
    }
    free(a), free(b);
}

void hs_conf_finish(hs_conf *t) { finish_op(t); }

double hs_conf_unit_roundoff(int precision) {
    switch (precision) {
    case HS_PRECISION_BF16: return 0x1p-9; /* 8 significant bits */
    case HS_PRECISION_TF32:
    case HS_PRECISION_FP16: return 0x1p-11; /* 11 significant bits */
    default: return 0x1p-24;
    }
}

double hs_conf_tol_chained(const hs_conf *t) {
    return t->precision == HS_PRECISION_FP32 ? HS_CONF_TOL : 8.0 * hs_conf_unit_roundoff(t->precision);
}

void hs_conf_check_rounded(hs_conf *t, const char *what, const float *fp32_dev, const float *cuda_dev, size_t n) {
    float *a = download(t->cpu_fp32, fp32_dev, n * sizeof *a), *b = download(t->cuda, cuda_dev, n * sizeof *b);
    double scale = 0.0, worst = 0.0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double)a[i]) > scale) scale = fabs((double)a[i]);
    for (size_t i = 0; i < n; i++)
        if (scale > 0.0 && fabs((double)a[i] - (double)b[i]) / scale > worst) worst = fabs((double)a[i] - (double)b[i]) / scale;
    t->checks++;
    checks_of_op++;
    if (!(worst > HS_CONF_TOL)) {
        t->failures++;
        printf("FAIL %s: %s: the result is within %g of fp32 (relative %.3g): the products' operands were not rounded\n",
               t->op ? t->op : "?", what, HS_CONF_TOL, worst);
    }
    free(a), free(b);
}
