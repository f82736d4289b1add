/* The comparison harness of the op-conformance test (conformance.h). */
#include "conformance.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"

const size_t hs_conf_sizes[] = {1, 31, 33, 127, 256, 1000, 4097};
const int hs_conf_nsizes = (int)(sizeof hs_conf_sizes / sizeof hs_conf_sizes[0]);

static double worst_of_op; /* worst err/bound ratio of the current op */
static int checks_of_op;

static void finish_op(hs_conf *t) {
    if (t->op && checks_of_op) printf("  %-28s %4d checks, worst err/bound %.3g\n", t->op, checks_of_op, worst_of_op);
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

hs_conf_pair hs_conf_pair_of(hs_conf *t, const void *host, size_t bytes) {
    hs_conf_pair p;
    hs_conf_both(t, host, bytes, &p.cpu, &p.cuda);
    return p;
}

void hs_conf_pair_free(hs_conf *t, hs_conf_pair p) { hs_conf_free_both(t, p.cpu, p.cuda); }

void *hs_conf_fetch(const hs_backend *be, const void *dev, size_t bytes) {
    void *h = malloc(bytes ? bytes : 1);
    if (!h) HS_FATAL("out of memory", "malloc(%zu)", bytes);
    if (bytes) be->download(be, h, dev, bytes);
    return h;
}

void hs_conf_fail(hs_conf *t) {
    t->checks++;
    t->failures++;
}

void hs_conf_same_on(hs_conf *t, const hs_backend *be, const char *what, const void *a_dev, const void *b_dev,
                     size_t bytes) {
    unsigned char *a = hs_conf_fetch(be, a_dev, bytes), *b = hs_conf_fetch(be, b_dev, bytes);
    if (!memcmp(a, b, bytes)) {
        t->checks++;
    } else { /* hs_conf_fail counts the check */
        hs_conf_fail(t);
        printf("FAIL %s: %s on %s: not the same bits\n", t->op ? t->op : "?", what, be->name);
    }
    free(a), free(b);
}

void hs_conf_same_bits(hs_conf *t, const char *what, const void *a_dev, const void *b_dev, size_t bytes) {
    unsigned char *a = hs_conf_fetch(t->cuda, a_dev, bytes), *b = hs_conf_fetch(t->cuda, b_dev, bytes);
    size_t first = 0, bad = 0;
    for (size_t i = 0; i < bytes; i++)
        if (a[i] != b[i] && !bad++) first = i;
    if (bad) {
        hs_conf_fail(t);
        printf("FAIL %s: %s: two CUDA runs differ in %zu of %zu bytes (first at byte %zu): not deterministic\n",
               t->op ? t->op : "?", what, bad, bytes, first);
    } else {
        t->checks++;
    }
    free(a), free(b);
}

void hs_conf_same_signs(hs_conf *t, const char *what, const float *cpu_dev, const float *cuda_dev, size_t n) {
    float *a = hs_conf_fetch(t->cpu, cpu_dev, n * sizeof *a), *b = hs_conf_fetch(t->cuda, cuda_dev, n * sizeof *b);
    size_t first = 0, bad = 0;
    for (size_t i = 0; i < n; i++)
        if (!signbit(a[i]) != !signbit(b[i]) && !bad++) first = i;
    if (bad) {
        hs_conf_fail(t);
        printf("FAIL %s: %s: %zu of %zu sign bits (dropout marks) differ; first at [%zu]: cpu %g cuda %g\n",
               t->op ? t->op : "?", what, bad, n, first, a[first], b[first]);
    } else {
        t->checks++;
    }
    free(a), free(b);
}

/* a[i] (CPU) against b[i] (CUDA) in double: |a_i - b_i| <= bound[i] (conformance.h), or INFINITY if a
 * value is not finite on one side only. Reports the worst element by err/bound. */
static void compare_bound(hs_conf *t, const char *what, const double *a, const double *b, size_t n,
                          const double *bound) {
    double worst = 0.0;
    size_t worst_i = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        double ratio;
        if (!isfinite(a[i]) || !isfinite(b[i]))
            ratio = (isnan(a[i]) && isnan(b[i])) || a[i] == b[i] ? 0.0 : INFINITY;
        else {
            const double err = fabs(a[i] - b[i]);
            ratio = err == 0.0 ? 0.0 : bound[i] > 0.0 ? err / bound[i] : INFINITY;
        }
        if (ratio > 1.0) bad++;
        if (ratio > worst || (isinf(ratio) && !isinf(worst))) {
            worst = ratio;
            worst_i = i;
        }
    }
    t->checks++;
    checks_of_op++;
    if (worst > worst_of_op) worst_of_op = worst;
    static int verbose = -1; /* HS_CONF_VERBOSE=1: every check's worst err/bound, to compare kernels or seeds */
    if (verbose < 0) verbose = getenv("HS_CONF_VERBOSE") && atoi(getenv("HS_CONF_VERBOSE")) > 0;
    if (verbose) printf("  check %s: %s: worst err/bound %.3g\n", t->op ? t->op : "?", what, worst);
    if (bad) {
        t->failures++;
        printf("FAIL %s: %s: %zu of %zu values differ by more than their bound; worst at [%zu]: cpu %.9g cuda %.9g "
               "bound %.3g (err/bound %.3g)\n",
               t->op ? t->op : "?", what, bad, n, worst_i, a[worst_i], b[worst_i], n ? bound[worst_i] : 0.0, worst);
    }
}

/* both downloads as double arrays (free both) */
static void download_pair_f32(hs_conf *t, const float *cpu_dev, const float *cuda_dev, size_t n, double **da,
                              double **db) {
    float *a = hs_conf_fetch(t->cpu, cpu_dev, n * sizeof *a), *b = hs_conf_fetch(t->cuda, cuda_dev, n * sizeof *b);
    HS_ALLOC(*da, n ? n : 1);
    HS_ALLOC(*db, n ? n : 1);
    for (size_t i = 0; i < n; i++) {
        (*da)[i] = a[i];
        (*db)[i] = b[i];
    }
    free(a), free(b);
}

float *hs_conf_download_f32(const hs_backend *be, const void *dev, size_t n) { return hs_conf_fetch(be, dev, n * sizeof(float)); }

double hs_conf_gamma(double n, double u) { return n * u / (1.0 - n * u); }

double hs_conf_operand_roundoff(const hs_conf *t) {
    switch (t->precision) {
    case HS_PRECISION_BF16: return 0x1p-8; /* 8 significant bits: u = 2^-8 */
    case HS_PRECISION_TF32: return 0x1p-10; /* a full TF32 ulp: a library may truncate (conformance.h) */
    case HS_PRECISION_FP16: return 0x1p-11;
    default: return 0.0;
    }
}

double hs_conf_dot_factor(const hs_conf *t, double k) {
    const double uo = hs_conf_operand_roundoff(t);
    return HS_CONF_C * (2.0 * uo + uo * uo + hs_conf_gamma(k < 1 ? 1 : k, HS_CONF_U32));
}

void hs_conf_check_bound(hs_conf *t, const char *what, const float *cpu_dev, const float *cuda_dev, size_t n,
                         const double *bound) {
    double *da, *db;
    download_pair_f32(t, cpu_dev, cuda_dev, n, &da, &db);
    compare_bound(t, what, da, db, n, bound);
    free(da), free(db);
}

void hs_conf_check_bound_f64(hs_conf *t, const char *what, const double *cpu_dev, const double *cuda_dev, size_t n,
                             const double *bound) {
    double *a = hs_conf_fetch(t->cpu, cpu_dev, n * sizeof *a), *b = hs_conf_fetch(t->cuda, cuda_dev, n * sizeof *b);
    compare_bound(t, what, a, b, n, bound);
    free(a), free(b);
}

void hs_conf_check_dot(hs_conf *t, const char *what, const float *cpu_dev, const float *cuda_dev, size_t n,
                       const double *absdot, double k) {
    const double f = hs_conf_dot_factor(t, k);
    double *bound;
    HS_ALLOC(bound, n ? n : 1);
    for (size_t i = 0; i < n; i++) bound[i] = f * absdot[i];
    hs_conf_check_bound(t, what, cpu_dev, cuda_dev, n, bound);
    free(bound);
}

void hs_conf_check_ew(hs_conf *t, const char *what, const float *cpu_dev, const float *cuda_dev, size_t n,
                      double in_scale) {
    double *da, *db, *bound;
    download_pair_f32(t, cpu_dev, cuda_dev, n, &da, &db);
    HS_ALLOC(bound, n ? n : 1);
    if (in_scale <= 0.0)
        for (size_t i = 0; i < n; i++)
            if (isfinite(da[i]) && fabs(da[i]) > in_scale) in_scale = fabs(da[i]);
    for (size_t i = 0; i < n; i++) bound[i] = HS_CONF_EW_ULPS * HS_CONF_U32 * (fabs(da[i]) + in_scale);
    compare_bound(t, what, da, db, n, bound);
    free(da), free(db), free(bound);
}

void hs_conf_check_sum_f64(hs_conf *t, const char *what, const double *cpu_dev, const double *cuda_dev, size_t n,
                           const double *abssum, double n_terms, double term_err, double acc_u) {
    double *a = hs_conf_fetch(t->cpu, cpu_dev, n * sizeof *a), *b = hs_conf_fetch(t->cuda, cuda_dev, n * sizeof *b), *bound;
    HS_ALLOC(bound, n ? n : 1);
    const double f = HS_CONF_C * (term_err + hs_conf_gamma(n_terms < 1 ? 1 : n_terms, acc_u));
    for (size_t i = 0; i < n; i++) bound[i] = f * (abssum ? abssum[i] : fabs(a[i]));
    compare_bound(t, what, a, b, n, bound);
    free(a), free(b), free(bound);
}

void hs_conf_check_sum_f32(hs_conf *t, const char *what, const float *cpu_dev, const float *cuda_dev, size_t n,
                           double abssum_scale, double n_terms, double term_err) {
    double *da, *db, *bound;
    download_pair_f32(t, cpu_dev, cuda_dev, n, &da, &db);
    HS_ALLOC(bound, n ? n : 1);
    const double f = HS_CONF_C * (term_err + hs_conf_gamma(n_terms < 1 ? 1 : n_terms, HS_CONF_U32));
    for (size_t i = 0; i < n; i++) bound[i] = f * (abssum_scale + fabs(da[i]));
    compare_bound(t, what, da, db, n, bound);
    free(da), free(db), free(bound);
}

void hs_conf_check_i32(hs_conf *t, const char *what, const int32_t *cpu_dev, const int32_t *cuda_dev, size_t n) {
    int32_t *a = hs_conf_fetch(t->cpu, cpu_dev, n * sizeof *a), *b = hs_conf_fetch(t->cuda, cuda_dev, n * sizeof *b);
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

void hs_conf_check_rounded(hs_conf *t, const char *what, const float *fp32_dev, const float *cuda_dev, size_t n) {
    float *a = hs_conf_fetch(t->cpu_fp32, fp32_dev, n * sizeof *a), *b = hs_conf_fetch(t->cuda, cuda_dev, n * sizeof *b);
    double scale = 0.0, worst = 0.0;
    for (size_t i = 0; i < n; i++)
        if (fabs((double)a[i]) > scale) scale = fabs((double)a[i]);
    for (size_t i = 0; i < n; i++)
        if (scale > 0.0 && fabs((double)a[i] - (double)b[i]) / scale > worst) worst = fabs((double)a[i] - (double)b[i]) / scale;
    t->checks++;
    checks_of_op++;
    if (!(worst > HS_CONF_ROUNDED_MIN)) {
        t->failures++;
        printf("FAIL %s: %s: the result is within %g of fp32 (relative %.3g): the products' operands were not rounded\n",
               t->op ? t->op : "?", what, HS_CONF_ROUNDED_MIN, worst);
    }
    free(a), free(b);
}
