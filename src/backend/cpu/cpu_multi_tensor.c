/* Multi-tensor ops on the CPU (the family of kernels/multi_tensor.cu): optimizer updates, one OpenMP
 * loop per tensor over the shared per-element formulas of kernels/math/optim_math.h, and the norms and
 * clipping at the end of the file. Elements are independent, so the result does not depend on the
 * number of threads (LAMB's norms and the sums of squares are summed in fixed blocks for the same
 * reason). */
#include <stdlib.h>

#include "backend/cpu/cpu_ops.h"
#include "math/optim_math.h"
#include "util/check.h"

/* Below this many elements a parallel region costs more than it saves. */
#define HS_OPTIM_PARALLEL_MIN 16384

/* The table's contract (backend.h): tensors in increasing offset order, disjoint, none of negative size.
 * The CUDA kernels rely on it without reading the table on the host; the CPU checks it on every call. */
static void check_table(const hs_tensor_span *table, int count, const char *op) {
    for (int i = 0; i < count; i++) {
        if (table[i].numel < 0 || table[i].offset < 0 ||
            (i > 0 && table[i].offset < table[i - 1].offset + table[i - 1].numel))
            HS_FATAL("build tensor tables in increasing offset order, without overlaps",
                     "%s: tensor %d of the table (offset %lld, %lld elements) is out of order or overlaps the one before",
                     op, i, (long long)table[i].offset, (long long)table[i].numel);
    }
}

/* Tensor i of the table: its span of a flat buffer (NULL stays NULL). */
#define AT(buf, t) ((buf) ? (buf) + (t)->offset : NULL)

void hs_cpu_adam_update(const hs_backend *be, float *p, const float *g, float *m, float *v, const hs_tensor_span *table,
                        int count, const hs_adam_hparams *h) {
    (void)be;
    check_table(table, count, "adam_update");
    for (int i = 0; i < count; i++) {
        /* p[n], g[n], m[n] (exp_avg), v[n] (exp_avg_sq) of tensor i */
        const hs_tensor_span *t = &table[i];
        const double wd = !h->decay_flagged_only || t->decay ? h->weight_decay : 0.0;
        const hs_adam_coefs c = hs_adam_make_coefs(h->lr, h->beta1, h->beta2, h->eps, wd, h->step, h->decoupled);
        float *pt = AT(p, t), *mt = AT(m, t), *vt = AT(v, t);
        const float *gt = AT(g, t);
        const long long n = (long long)t->numel;
#pragma omp parallel for schedule(static) if (n >= HS_OPTIM_PARALLEL_MIN)
        for (long long e = 0; e < n; e++) hs_adam_elem(&pt[e], gt[e], &mt[e], &vt[e], &c);
    }
}

void hs_cpu_adadelta_update(const hs_backend *be, float *p, const float *g, float *sq, float *acc,
                            const hs_tensor_span *table, int count, double lr, double rho, double eps,
                            double weight_decay) {
    (void)be;
    check_table(table, count, "adadelta_update");
    const hs_adadelta_coefs c = hs_adadelta_make_coefs(lr, rho, eps, weight_decay);
    for (int i = 0; i < count; i++) {
        /* p[n], g[n], sq[n] (square_avg), acc[n] (acc_delta) of tensor i */
        const hs_tensor_span *t = &table[i];
        float *pt = AT(p, t), *st = AT(sq, t), *at = AT(acc, t);
        const float *gt = AT(g, t);
        const long long n = (long long)t->numel;
#pragma omp parallel for schedule(static) if (n >= HS_OPTIM_PARALLEL_MIN)
        for (long long e = 0; e < n; e++) hs_adadelta_elem(&pt[e], gt[e], &st[e], &at[e], &c);
    }
}

void hs_cpu_sgd_update(const hs_backend *be, float *p, const float *g, float *buf, const hs_tensor_span *table,
                       int count, double lr, double momentum, double weight_decay, int first_step) {
    (void)be;
    check_table(table, count, "sgd_update");
    const float lr_f = (float)lr, momentum_f = (float)momentum, weight_decay_f = (float)weight_decay;
    for (int i = 0; i < count; i++) {
        /* p[n], g[n], buf[n] (momentum_buffer) or NULL, of tensor i */
        const hs_tensor_span *t = &table[i];
        float *pt = AT(p, t), *bt = AT(buf, t);
        const float *gt = AT(g, t);
        const long long n = (long long)t->numel;
#pragma omp parallel for schedule(static) if (n >= HS_OPTIM_PARALLEL_MIN)
        for (long long e = 0; e < n; e++)
            hs_sgd_elem(&pt[e], gt[e], bt ? &bt[e] : NULL, lr_f, momentum_f, weight_decay_f, first_step);
    }
}

/* LAMB's per-tensor norms are sums over fixed blocks of HS_LAMB_BLOCK elements, added in block order;
 * inside a block element i adds into lane i % HS_LAMB_LANES and the lanes are added in order at the
 * end. The order is fixed by the data layout alone, so the sums do not depend on the number of threads
 * or on how the compiler vectorizes the lanes. */
#define HS_LAMB_BLOCK 16384
#define HS_LAMB_LANES 8

static hs_lamb_coefs lamb_coefs(const hs_lamb_hparams *h, double weight_decay) {
    return hs_lamb_make_coefs(h->beta1, h->beta2, h->eps, weight_decay, h->grad_divisor, h->step);
}

/* Stage 1 of one tensor: moments, and sums[0] = Σ p², sums[1] = Σ u². */
static void lamb_moments(const float *p, const float *g, float *m, float *v, size_t n, const hs_lamb_coefs *cp,
                         double sums[2]) {
    /* p[n], g[n], m[n] (exp_avg), v[n] (exp_avg_sq); block_sums[nblocks][2] = (Σ p², Σ u²) per block */
    const hs_lamb_coefs c = *cp;
    const long long nblocks = (long long)((n + HS_LAMB_BLOCK - 1) / HS_LAMB_BLOCK);
    double block_sums_small[2 * 8], *block_sums = block_sums_small;
    if (nblocks > 8) HS_ALLOC(block_sums, 2 * (size_t)nblocks);
#pragma omp parallel for schedule(static) if (nblocks > 1)
    for (long long b = 0; b < nblocks; b++) {
        const size_t lo = (size_t)b * HS_LAMB_BLOCK, hi = lo + HS_LAMB_BLOCK < n ? lo + HS_LAMB_BLOCK : n;
        double p_lane[HS_LAMB_LANES] = {0}, u_lane[HS_LAMB_LANES] = {0};
        size_t i = lo;
        for (; i + HS_LAMB_LANES <= hi; i += HS_LAMB_LANES) {
#pragma omp simd
            for (int j = 0; j < HS_LAMB_LANES; j++) {
                const float u = hs_lamb_moments_elem(p[i + j], g[i + j], &m[i + j], &v[i + j], &c);
                p_lane[j] += (double)p[i + j] * (double)p[i + j];
                u_lane[j] += (double)u * (double)u;
            }
        }
        for (int j = 0; i < hi; i++, j++) {
            const float u = hs_lamb_moments_elem(p[i], g[i], &m[i], &v[i], &c);
            p_lane[j] += (double)p[i] * (double)p[i];
            u_lane[j] += (double)u * (double)u;
        }
        double p_sumsq = 0.0, u_sumsq = 0.0;
        for (int j = 0; j < HS_LAMB_LANES; j++) {
            p_sumsq += p_lane[j];
            u_sumsq += u_lane[j];
        }
        block_sums[2 * b] = p_sumsq;
        block_sums[2 * b + 1] = u_sumsq;
    }
    sums[0] = sums[1] = 0.0;
    for (long long b = 0; b < nblocks; b++) {
        sums[0] += block_sums[2 * b];
        sums[1] += block_sums[2 * b + 1];
    }
    if (block_sums != block_sums_small) free(block_sums);
}

/* Stage 2 of one tensor: p -= step·u. */
static void lamb_apply(float *p, const float *m, const float *v, size_t n, const hs_lamb_coefs *cp, double step) {
    /* p[n], m[n], v[n] */
    const hs_lamb_coefs c = *cp;
    const float step_f = (float)step;
    const long long count = (long long)n;
#pragma omp parallel for simd schedule(static) if (count >= HS_OPTIM_PARALLEL_MIN)
    for (long long i = 0; i < count; i++) hs_lamb_apply_elem(&p[i], m[i], v[i], step_f, &c);
}

void hs_cpu_lamb_update(const hs_backend *be, float *p, const float *g, float *m, float *v, const hs_tensor_span *table,
                        int count, double *norms, const hs_lamb_hparams *h) {
    (void)be;
    check_table(table, count, "lamb_update");
    for (int i = 0; i < count; i++) {
        const hs_tensor_span *t = &table[i];
        const double wd = t->decay ? h->weight_decay : 0.0;
        const hs_lamb_coefs c = lamb_coefs(h, wd);
        double *sums = norms + 2 * i; /* Σ p², Σ u² */
        lamb_moments(p + t->offset, g + t->offset, m + t->offset, v + t->offset, (size_t)t->numel, &c, sums);
        const double step = hs_lamb_step(h->lr, sums[0], sums[1], wd != 0.0 || h->trust_ratio_on_no_decay);
        lamb_apply(p + t->offset, m + t->offset, v + t->offset, (size_t)t->numel, &c, step);
    }
}

/* ---- norms and clipping ------------------------------------------------------------------------------- */
/* Floating-point exceptions are never trapped in the functions below (as in cpu_elementwise.c): the
 * pragma applies to the functions defined after it. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#define HS_PAR_MIN 32768

/* sum x^2 in double. The vector is cut into fixed blocks of HS_SUMSQ_BLOCK values whatever the thread
 * count; blocks are summed in parallel and the block sums added in block order, so the same vector
 * always gives the same bits (on 1 thread or 64). */
#define HS_SUMSQ_BLOCK 16384
static double sumsq(const float *x, size_t n) {
    const size_t nblocks = (n + HS_SUMSQ_BLOCK - 1) / HS_SUMSQ_BLOCK;
    if (nblocks == 0) return 0.0;
    double *block_sum;
    HS_ALLOC(block_sum, nblocks);
#pragma omp parallel for schedule(static) if (nblocks > 1)
    for (size_t b = 0; b < nblocks; b++) {
        const size_t lo = b * HS_SUMSQ_BLOCK, hi = lo + HS_SUMSQ_BLOCK < n ? lo + HS_SUMSQ_BLOCK : n;
        double s = 0.0;
        for (size_t i = lo; i < hi; i++) s += (double)x[i] * (double)x[i];
        block_sum[b] = s;
    }
    double total = 0.0;
    for (size_t b = 0; b < nblocks; b++) total += block_sum[b];
    free(block_sum);
    return total;
}

/* sumsq[i] = Σ x² of tensor i (blocks above), total = Σ_i sumsq[i] in table order */
void hs_cpu_sumsq_tensors(const hs_backend *be, double *sumsq_out, double *total, const float *flat,
                          const hs_tensor_span *table, int count) {
    (void)be;
    check_table(table, count, "sumsq_tensors");
    double sum = 0.0;
    for (int i = 0; i < count; i++) {
        sumsq_out[i] = sumsq(flat + table[i].offset, (size_t)table[i].numel);
        sum += sumsq_out[i];
    }
    *total = sum;
}

/* x *= a, tensor by tensor */
void hs_cpu_scale_tensors(const hs_backend *be, float *flat, float a, const hs_tensor_span *table, int count) {
    (void)be;
    check_table(table, count, "scale_tensors");
    for (int i = 0; i < count; i++) {
        float *x = flat + table[i].offset;
        const size_t n = (size_t)table[i].numel;
#pragma omp parallel for simd schedule(static) if (n > HS_PAR_MIN)
        for (size_t e = 0; e < n; e++) x[e] *= a;
    }
}

void hs_cpu_zero_tensors(const hs_backend *be, float *flat, const hs_tensor_span *table, int count) {
    (void)be;
    check_table(table, count, "zero_tensors");
    for (int i = 0; i < count; i++) {
        float *x = flat + table[i].offset;
        const size_t n = (size_t)table[i].numel;
#pragma omp parallel for simd schedule(static) if (n > HS_PAR_MIN)
        for (size_t e = 0; e < n; e++) x[e] = 0.0f;
    }
}
