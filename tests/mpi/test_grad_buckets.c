/* The bucketed gradient all-reduce (src/comm/grad_buckets.c) on 1-4 CPU ranks, as the trainer drives
 * it: a parameter table of odd-sized tensors, every rank's gradient written tensor by tensor in
 * backward order (last tensor first) with a ready call after each, for bucket caps from below one float
 * to far above the whole buffer and for fp32, bf16 and fp16 in transit. Some ranks declare nothing
 * ready (a rank whose micro-batches were empty) or only every other tensor; each configuration runs two
 * updates on the same buckets. Every rank can compute every rank's gradient (a function of rank and
 * element), so every rank checks, for every element:
 *   fp32: the result is bit-identical to the fp32 sum in rank order ((g0 + g1) + g2) + g3, computed here,
 *         (so bit-identical across caps) and within the fp32 summation bound of the float64 sum;
 *   bf16/fp16: the result is exactly round16(Σ in rank order of round16(g_r)) with an independent
 *         rounding written here (float64 arithmetic), and within one 16-bit rounding of that fp32 sum;
 *   padding between tensors stays 0.
 * usage: test_grad_buckets   (under mpirun with any number of ranks) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "comm/grad_buckets.h"
#include "nn/params.h"

#include "mpi_check.h"

/* element i of rank r's gradient in update u: mostly sign · [1, 2) · 2^e, e in [-26, 6] (fp16 subnormals
 * and values that underflow to 0 included; sums of 4 stay far below 65504), a fifth exact 16-bit ties */
static float grad_value(int r, int64_t i, int u) {
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull ^ (uint64_t)(r + 1) * 0xC2B2AE3D27D4EB4Full ^ (uint64_t)u << 40;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    if ((x >> 20) % 5 == 0) {
        /* exact ties of the 16-bit roundings: fp16 subnormal (2k+1)·2^-25, fp16 normal 1 + (2k+1)·2^-11,
         * bf16 (1 + (2k+1)·2^-8)·2^e */
        const int k = (int)((x >> 24) % 6), kind = (int)((x >> 28) % 3), e = (int)((x >> 32) % 8) - 4;
        const double v = kind == 0 ? ldexp(2 * k + 1, -25) : kind == 1 ? 1.0 + ldexp(2 * k + 1, -11)
                                                                        : ldexp(1.0 + ldexp(2 * k + 1, -8), e);
        return (float)((x & 1) ? -v : v);
    }
    const double m = 1.0 + (double)(x >> 40) / (double)(1ull << 24);
    const int e = (int)((x >> 8) % 33) - 26;
    return (float)((x & 1) ? -ldexp(m, e) : ldexp(m, e));
}

/* x rounded to p significand bits, nearest with ties to even, in float64 arithmetic (independent of the
 * library's bit tricks): quantum 2^(e-p+1) for |x| in [2^e, 2^(e+1)), never below qmin (subnormals);
 * |result| > maxv is infinity. bf16: p = 8, no subnormal floor in range; fp16: p = 11, qmin = 2^-24. */
static float round_bits(float x, int p, double qmin, double maxv) {
    if (x == 0.0f || !isfinite(x)) return x;
    int e;
    frexp((double)x, &e); /* |x| in [2^(e-1), 2^e) */
    double q = ldexp(1.0, e - p);
    if (q < qmin) q = qmin;
    const double r = nearbyint((double)x / q) * q;
    if (fabs(r) > maxv) return x > 0 ? INFINITY : -INFINITY;
    return (float)r;
}
static float round16(int dt, float x) {
    return dt == 1 ? round_bits(x, 8, 0x1p-133, 0x1.fep127) : round_bits(x, 11, 0x1p-24, 65504.0);
}

static const char *const dtypes[3] = {"fp32", "bf16", "fp16"};

int main(int argc, char **argv) {
    hs_comm c;
    hs_comm_init(&c, &argc, &argv);
    g_rank = c.rank;
    const int P = c.size;
    const hs_backend *be = hs_backend_cpu();
    /* odd sizes (padding between tensors), one tensor larger than the middle caps */
    static const int64_t sizes[] = {7, 1, 33, 1000, 3, 517, 64, 1, 20000, 129, 5, 2049, 11, 300, 1, 17};
    const int nt = (int)(sizeof sizes / sizeof sizes[0]);
    hs_params p;
    memset(&p, 0, sizeof p);
    for (int i = 0; i < nt; i++) {
        char name[32];
        snprintf(name, sizeof name, "t%d", i);
        hs_params_declare(&p, name, 1, &sizes[i], 1);
    }
    hs_params_allocate(&p, be);
    const size_t total = p.total;
    char *is_elem = calloc(total, 1);
    float *expect = malloc(total * sizeof *expect);
    float *first = malloc(2 * total * sizeof *first); /* [update][element]: the result with one bucket */
    CHECK(is_elem && expect && first, "out of memory");
    for (int i = 0; i < nt; i++) memset(is_elem + p.tensors[i].offset, 1, p.tensors[i].numel);
    static const double caps[] = {0, 1e-7, 1e-4, 1e-3, 4e-3, 0.02, 0.05, 1, 25, 1e5};
    const int ncaps = (int)(sizeof caps / sizeof caps[0]);
    int configs = 0;
    for (int dt = 0; dt < 3; dt++) {
        for (int ci = 0; ci < ncaps; ci++) {
            hs_grad_buckets *b = hs_grad_buckets_create(&c, be, &p, caps[ci], dtypes[dt]);
            for (int u = 0; u < 2; u++) {
                hs_params_zero_grad(&p);
                hs_grad_buckets_start(b);
                /* backward order: the tensor at the highest offset first */
                for (int k = nt - 1; k >= 0; k--) {
                    const hs_tensor_info *t = &p.tensors[k];
                    for (size_t j = 0; j < t->numel; j++)
                        p.grad[t->offset + j] = grad_value(c.rank, (int64_t)(t->offset + j), u);
                    const int declare = c.rank == 1 ? 0 : c.rank == 2 ? (k % 2 == 0) : 1;
                    if (declare) hs_grad_buckets_ready(b, (int64_t)t->offset);
                }
                hs_grad_buckets_finish(b);
                for (size_t i = 0; i < total; i++) {
                    if (!is_elem[i]) {
                        CHECK(p.grad[i] == 0.0f, "%s cap %g: padding element %zu is %g", dtypes[dt], caps[ci], i,
                              (double)p.grad[i]);
                        expect[i] = 0.0f;
                        continue;
                    }
                    float s = 0.0f, abs_sum = 0.0f;
                    double s64 = 0.0;
                    for (int r = 0; r < P; r++) {
                        const float g = grad_value(r, (int64_t)i, u);
                        const float gt = dt == 0 || P == 1 ? g : round16(dt, g);
                        s = r == 0 ? gt : s + gt;
                        s64 += (double)gt;
                        abs_sum += fabsf(gt);
                    }
                    const float e = dt == 0 || P == 1 ? s : round16(dt, s);
                    expect[i] = e;
                    CHECK(memcmp(&p.grad[i], &e, sizeof e) == 0,
                          "%s cap %g update %d: element %zu is %.9g, the rank-ordered sum is %.9g", dtypes[dt],
                          caps[ci], u, i, (double)p.grad[i], (double)e);
                    /* the fp32 sum of P terms is within (P-1)·2^-24·Σ|g| of the exact sum */
                    CHECK(fabs((double)s - s64) <= (P - 1) * 0x1p-24 * (double)abs_sum * 1.0000001,
                          "fp32 summation bound at %zu", i);
                    if (dt != 0 && P > 1) {
                        /* one 16-bit rounding of s: half a unit in the last place (bf16 2^-8, fp16 2^-11
                         * relative; fp16 subnormals 2^-25 absolute) */
                        const double rel = dt == 1 ? 0x1p-8 : 0x1p-11;
                        CHECK(fabs((double)e - (double)s) <= rel * fabs((double)s) + (dt == 2 ? 0x1p-25 : 0.0),
                              "%s: %.9g is more than one rounding from the fp32 sum %.9g", dtypes[dt], (double)e,
                              (double)s);
                    }
                }
                if (ci == 0) memcpy(first + u * total, p.grad, total * sizeof *first);
                else CHECK(memcmp(first + u * total, p.grad, total * sizeof *first) == 0,
                           "%s: cap %g differs from one bucket", dtypes[dt], caps[ci]);
                configs++;
            }
            hs_grad_buckets_free(b);
        }
    }
    /* some 16-bit results differ from the fp32 sums (else the data would not exercise the 16-bit path) */
    int rounded = 0;
    for (size_t i = 0; i < total && !rounded; i++)
        if (is_elem[i]) {
            float s = 0.0f;
            for (int r = 0; r < P; r++) s = r == 0 ? grad_value(r, (int64_t)i, 1) : s + grad_value(r, (int64_t)i, 1);
            rounded = s != expect[i];
        }
    CHECK(P == 1 || rounded, "no 16-bit result differed from the fp32 sum: the data does not exercise rounding");
    if (c.rank == 0) printf("ok: %d rank(s): %d configurations of %zu floats, %d tensors\n", P, configs, total, nt);
    free(is_elem);
    free(expect);
    free(first);
    hs_params_free(&p);
    hs_comm_finalize(&c);
    return 0;
}
