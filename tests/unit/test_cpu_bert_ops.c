/* The CPU backend's BERT operations against hand-computed vectors and independent float64 loops —
 * what a user moving BERT from PyTorch relies on (exact-erf GELU, TF-style LayerNorm with eps inside
 * the sqrt, the -10000 padding mask, ignore_index -1, argmax ties) — and the property data-parallel
 * training relies on: the same bits on 1 and 2 OpenMP threads for every reduction. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <cmocka.h>

#include "backend/backend.h"
#include "math/dropout.h"
#include "math/fast_exp_erf.h"
#include "math/hs_math.h"

static const hs_backend *be;

static void fill(float *v, size_t n, float lo, float hi, uint64_t stream) {
    const uint64_t key = hs_rng_key(4242, 3, stream);
    for (size_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * hs_uniform(key, 0, i);
}

static float *fbuf(size_t n) { return be->alloc(be, n * sizeof(float)); }

static void set_threads(int t) {
#ifdef _OPENMP
    omp_set_num_threads(t);
#else
    (void)t;
#endif
}

/* ---- the vectorisable exp and erf ------------------------------------------------------------------- */

/* exp within 3 ulp (3.6e-7 relative) over the whole normal range, exact at 0, exactly 0 below -87,
 * NaN in → NaN out; erf within 2.5e-7 absolute (A&S 7.1.26 promises 1.5e-7, plus float rounding). */
static void test_exp_and_erf_accuracy(void **unused) {
    (void)unused;
    double worst_exp = 0.0, worst_erf = 0.0;
    for (int i = 0; i <= 200000; i++) {
        const float x = -87.0f + 175.0f * (float)i / 200000.0f;
        const double ref = exp((double)x);
        worst_exp = fmax(worst_exp, fabs((double)hs_exp_fast(x) - ref) / ref);
        const float z = -6.0f + 12.0f * (float)i / 200000.0f;
        worst_erf = fmax(worst_erf, fabs((double)hs_erf_fast(z) - erf((double)z)));
    }
    assert_true(worst_exp < 3.6e-7);
    assert_true(worst_erf < 2.5e-7);
    assert_true(hs_exp_fast(0.0f) == 1.0f);
    assert_true(hs_exp_fast(-87.5f) == 0.0f && hs_exp_fast(-10000.0f) == 0.0f && hs_exp_fast(-INFINITY) == 0.0f);
    assert_true(isnan(hs_exp_fast(NAN)));
    assert_true(hs_erf_fast(0.0f) == 0.0f || fabsf(hs_erf_fast(0.0f)) < 1e-8f);
    assert_true(hs_erf_fast(10.0f) == 1.0f && hs_erf_fast(-10.0f) == -1.0f);
}

/* ---- row gathers and strided bias -------------------------------------------------------------------- */

static void test_gather_and_scatter_rows(void **unused) {
    (void)unused;
    const float x[4 * 2] = {1, 2, 3, 4, 5, 6, 7, 8};
    const int32_t index[3] = {2, 0, 2};
    float y[3 * 2] = {10, 10, 10, 10, 10, 10};
    be->gather_rows(be, y, x, index, 3, 2, 4, 0);
    const float copy[6] = {5, 6, 1, 2, 5, 6};
    for (int i = 0; i < 6; i++) assert_true(y[i] == copy[i]);
    be->gather_rows(be, y, x, index, 3, 2, 4, 1); /* accumulate: doubles the rows */
    for (int i = 0; i < 6; i++) assert_true(y[i] == 2 * copy[i]);
    float dx[4 * 2] = {1, 1, 1, 1, 1, 1, 1, 1};
    const float dy[3 * 2] = {1, 2, 3, 4, 5, 6};
    be->scatter_add_rows(be, dx, dy, index, 3, 2, 4); /* row 2 gets rows 0 and 2 of dy; rows 1, 3 untouched */
    const float expect[8] = {4, 5, 1, 1, 7, 9, 1, 1};
    for (int i = 0; i < 8; i++) assert_true(dx[i] == expect[i]);
}

/* Transformer-XL's memory concatenation: 2 rows of 3 values from a source with rows 4 apart into a
 * destination with rows 5 apart; the gaps between destination rows keep their values. */
static void test_copy_rows(void **unused) {
    (void)unused;
    const float src[2 * 4] = {1, 2, 3, 4, 5, 6, 7, 8};
    float dst[2 * 5] = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
    be->copy_rows(be, dst, 5, src + 1, 4, 3, 2);
    const float expect[10] = {2, 3, 4, -1, -1, 6, 7, 8, -1, -1};
    for (int i = 0; i < 10; i++) assert_true(dst[i] == expect[i]);
}

/* its accumulating twin: the same rows added, the gaps untouched */
static void test_add_rows(void **unused) {
    (void)unused;
    const float src[2 * 4] = {1, 2, 3, 4, 5, 6, 7, 8};
    float dst[2 * 5] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    be->add_rows(be, dst, 5, src + 1, 4, 3, 2);
    const float expect[10] = {3, 4, 5, 1, 1, 7, 8, 9, 1, 1};
    for (int i = 0; i < 10; i++) assert_true(dst[i] == expect[i]);
}

/* q|k|v slices of a [rows, 3·cols] matrix: bias into one slice only; its gradient from that slice only */
static void test_strided_bias(void **unused) {
    (void)unused;
    float y[2 * 6] = {0};
    const float bias[2] = {1, 2};
    be->add_bias_strided(be, y + 2, 6, bias, 2, 2);
    const float expect[12] = {0, 0, 1, 2, 0, 0, 0, 0, 1, 2, 0, 0};
    for (int i = 0; i < 12; i++) assert_true(y[i] == expect[i]);
    const float dy[2 * 6] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    float db[2] = {100, 100};
    be->bias_grad_strided(be, db, dy + 4, 6, 2, 2);
    assert_true(db[0] == 100 + 5 + 11 && db[1] == 100 + 6 + 12);
}

/* ---- fused ops = the separate ops, bit for bit (the CPU versions of the CUDA backend's fusions) ------ */

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

static void test_fused_ops_are_the_separate_ops(void **unused) {
    (void)unused;
    enum { R = 37, IN = 29, OUT = 23, LDY = 31, B = 37 }; /* B samples of one row each */
    float *x = fbuf(R * IN), *w = fbuf(OUT * IN), *bias = fbuf(OUT), *dy = fbuf(R * LDY);
    float *y1 = fbuf(R * LDY), *y2 = fbuf(R * LDY), *dw1 = fbuf(OUT * IN), *dw2 = fbuf(OUT * IN);
    float *db1 = fbuf(OUT), *db2 = fbuf(OUT);
    fill(x, R * IN, -1, 1, 1), fill(w, OUT * IN, -1, 1, 2), fill(bias, OUT, -1, 1, 3), fill(dy, R * LDY, -1, 1, 4);
    fill(y1, R * LDY, -1, 1, 5), memcpy(y2, y1, R * LDY * sizeof *y1); /* the pad columns must stay */
    /* gemm_bias = gemm + add_bias_strided */
    be->gemm(be, 0, 1, R, OUT, IN, 1.0f, x, IN, w, IN, 0.0f, y1, LDY);
    be->add_bias_strided(be, y1, LDY, bias, R, OUT);
    be->gemm_bias(be, y2, LDY, x, w, bias, R, IN, OUT);
    assert_true(same_bits(y1, y2, R * LDY));
    /* gemm_wgrad_bgrad = gemm + bias_grad_strided: accumulating, and written over a zero dbias */
    fill(dw1, OUT * IN, -1, 1, 6), memcpy(dw2, dw1, OUT * IN * sizeof *dw1);
    fill(db1, OUT, -1, 1, 7), memcpy(db2, db1, OUT * sizeof *db1);
    be->gemm(be, 1, 0, OUT, IN, R, 1.0f, dy, LDY, x, IN, 1.0f, dw1, IN);
    be->bias_grad_strided(be, db1, dy, LDY, R, OUT);
    be->gemm_wgrad_bgrad(be, dw2, db2, dy, LDY, x, R, IN, OUT, 0);
    assert_true(same_bits(dw1, dw2, OUT * IN) && same_bits(db1, db2, OUT));
    memset(db1, 0, OUT * sizeof *db1);
    be->bias_grad_strided(be, db1, dy, LDY, R, OUT);
    fill(db2, OUT, -1, 1, 8); /* overwrite_dbias writes whatever dbias held */
    be->gemm_wgrad_bgrad(be, dw2, db2, dy, LDY, x, R, IN, OUT, 1);
    assert_true(same_bits(db1, db2, OUT));
    /* dropout_add_layernorm_forward = dropout_forward + layernorm_forward with the residual, and its backward
     * = layernorm_backward + dropout_backward (p = 0.25, element-wise groups) */
    const int C = LDY;
    float *a1 = fbuf(R * C), *a2 = fbuf(R * C), *res = fbuf(R * C), *g = fbuf(C), *be_ = fbuf(C);
    float *ln1 = fbuf(R * C), *ln2 = fbuf(R * C), *st1 = fbuf(2 * R), *st2 = fbuf(2 * R);
    float *dg1 = fbuf(C), *dg2 = fbuf(C), *dbt1 = fbuf(C), *dbt2 = fbuf(C), *dx1 = fbuf(R * C), *dx2 = fbuf(R * C);
    float *da1 = fbuf(R * C), *da2 = fbuf(R * C);
    fill(a1, R * C, -2, 2, 9), memcpy(a2, a1, R * C * sizeof *a1), fill(res, R * C, -1, 1, 10);
    fill(g, C, 0.5f, 1.5f, 11), fill(be_, C, -1, 1, 12);
    be->dropout_forward(be, a1, a1, B, C, 1, 0.25f, 77, 5);
    be->layernorm_forward(be, ln1, a1, st1, st1 + R, a1, res, g, be_, R, C, 1e-12f);
    be->dropout_add_layernorm_forward(be, ln2, a2, st2, st2 + R, a2, res, g, be_, R, C, 1e-12f, B, C, 1, 0.25f, 77, 5, NULL);
    assert_true(same_bits(a1, a2, R * C) && same_bits(ln1, ln2, R * C) && same_bits(st1, st2, 2 * R));
    fill(dx1, R * C, -1, 1, 13), memcpy(dx2, dx1, R * C * sizeof *dx1);
    be->layernorm_backward(be, dx1, dg1, dbt1, dx1, a1, st1, st1 + R, g, R, C);
    be->dropout_backward(be, da1, dx1, B, C, 1, 0.25f, 77, 5);
    be->layernorm_dropout_backward(be, dx2, da2, dg2, dbt2, dx2, a2, st2, st2 + R, g, R, C, B, C, 1, 0.25f, 77, 5, NULL);
    assert_true(same_bits(dx1, dx2, R * C) && same_bits(da1, da2, R * C) && same_bits(dg1, dg2, C) &&
                same_bits(dbt1, dbt2, C));
    float *bufs[] = {x, w, bias, dy, y1, y2, dw1, dw2, db1, db2, a1, a2, res, g, be_, ln1, ln2, st1, st2,
                     dg1, dg2, dbt1, dbt2, dx1, dx2, da1, da2};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->free(be, bufs[i]);
}

/* ---- LayerNorm ------------------------------------------------------------------------------------------- */

/* TF-style LayerNorm in double: biased variance, eps inside the sqrt; and its backward */
static void layernorm_reference(int rows, int cols, const float *x, const float *gamma, const float *beta, float eps,
                                const float *dy, double *y, double *dx, double *dgamma, double *dbeta) {
    for (int c = 0; c < cols; c++) dgamma[c] = dbeta[c] = 0.0;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * cols;
        double mu = 0, var = 0;
        for (int c = 0; c < cols; c++) mu += xr[c];
        mu /= cols;
        for (int c = 0; c < cols; c++) var += (xr[c] - mu) * (xr[c] - mu);
        var /= cols;
        const double rs = 1.0 / sqrt(var + eps);
        double sum_g = 0, sum_gx = 0;
        for (int c = 0; c < cols; c++) {
            const double xh = (xr[c] - mu) * rs, g = (double)dy[(size_t)r * cols + c] * gamma[c];
            y[(size_t)r * cols + c] = gamma[c] * xh + beta[c];
            sum_g += g;
            sum_gx += g * xh;
            dgamma[c] += dy[(size_t)r * cols + c] * xh;
            dbeta[c] += dy[(size_t)r * cols + c];
        }
        for (int c = 0; c < cols; c++) {
            const double xh = (xr[c] - mu) * rs, g = (double)dy[(size_t)r * cols + c] * gamma[c];
            dx[(size_t)r * cols + c] = rs * (g - sum_g / cols - xh * sum_gx / cols);
        }
    }
}

static void test_layernorm_matches_float64(void **unused) {
    (void)unused;
    enum { R = 7, C = 33 };
    float x[R * C], res[R * C], sum[R * C], gamma[C], beta[C], y[R * C], mean[R], rstd[R], dy[R * C], dx[R * C];
    float dgamma[C] = {0}, dbeta[C] = {0};
    double y_ref[R * C], dx_ref[R * C], dgamma_ref[C], dbeta_ref[C];
    fill(x, R * C, -2, 2, 1), fill(res, R * C, -1, 1, 2), fill(gamma, C, 0.5f, 1.5f, 3), fill(beta, C, -1, 1, 4);
    fill(dy, R * C, -1, 1, 5);
    for (int c = 0; c < C; c++) x[c] += 100.0f; /* a mean far from 0: the variance is taken around the mean */
    for (int c = 0; c < C; c++) x[C + c] = 0.25f;                   /* constant row: var 0, eps keeps it finite */
    /* fused form: the input is x + res, written to sum */
    be->layernorm_forward(be, y, sum, mean, rstd, x, res, gamma, beta, R, C, 1e-12f);
    for (int i = 0; i < R * C; i++) assert_true(sum[i] == x[i] + res[i]);
    for (int i = 0; i < R * C; i++) sum[i] = x[i] + res[i];
    be->layernorm_backward(be, dx, dgamma, dbeta, dy, sum, mean, rstd, gamma, R, C);
    layernorm_reference(R, C, sum, gamma, beta, 1e-12f, dy, y_ref, dx_ref, dgamma_ref, dbeta_ref);
    for (int i = 0; i < R * C; i++) {
        assert_float_equal(y[i], y_ref[i], 2e-5 * (1 + fabs(y_ref[i])));
        assert_float_equal(dx[i], dx_ref[i], 2e-5 * (1 + fabs(dx_ref[i])));
    }
    for (int c = 0; c < C; c++) {
        assert_float_equal(dgamma[c], dgamma_ref[c], 1e-5 * (1 + fabs(dgamma_ref[c])));
        assert_float_equal(dbeta[c], dbeta_ref[c], 1e-5 * (1 + fabs(dbeta_ref[c])));
    }
    /* the plain form on the constant row: y = beta exactly (x̂ = 0), rstd = 1/sqrt(1e-12) */
    be->layernorm_forward(be, y, NULL, mean, rstd, x, NULL, gamma, beta, R, C, 1e-12f);
    for (int c = 0; c < C; c++) assert_true(y[C + c] == beta[c]);
    assert_float_equal(rstd[1], 1e6f, 1.0f);
}

/* ---- GELU and tanh ----------------------------------------------------------------------------------------- */

static void test_gelu_and_tanh_match_float64(void **unused) {
    (void)unused;
    enum { N = 4001, R = 3, C = 7 };
    float *x = fbuf(N), *y = fbuf(N), *dx = fbuf(N), *dy = fbuf(N);
    for (int i = 0; i < N; i++) x[i] = -8.0f + 16.0f * (float)i / (N - 1);
    fill(dy, N, -1, 1, 9);
    be->gelu_forward(be, y, x, N);
    be->gelu_backward(be, dx, dy, x, NULL, N, NULL, NULL, NULL);
    for (int i = 0; i < N; i++) {
        const double xd = x[i], cdf = 0.5 * (1.0 + erf(xd / sqrt(2.0)));
        const double pdf = exp(-0.5 * xd * xd) / sqrt(2.0 * M_PI);
        assert_float_equal(y[i], xd * cdf, 1e-7 + 2e-7 * fabs(xd));
        assert_float_equal(dx[i], dy[i] * (cdf + xd * pdf), 3e-7 * (1 + fabs(xd)));
    }
    assert_true(y[N / 2] == 0.0f); /* gelu(0) = 0 */
    /* fused bias + GELU = GELU of (x + bias), and x is left holding x + bias */
    float u[R * C], u0[R * C], bias[C], yb[R * C];
    fill(u, R * C, -3, 3, 10), fill(bias, C, -1, 1, 11);
    memcpy(u0, u, sizeof u);
    be->bias_gelu_forward(be, yb, u, bias, R, C, NULL, NULL);
    for (int i = 0; i < R * C; i++) {
        float single;
        const float pre = u0[i] + bias[i % C];
        be->gelu_forward(be, &single, &pre, 1);
        assert_true(u[i] == pre && yb[i] == single);
    }
    be->tanh_forward(be, y, x, N);
    be->tanh_backward(be, dx, dy, y, N);
    for (int i = 0; i < N; i++) {
        const double t = tanh((double)x[i]);
        assert_float_equal(y[i], t, 2e-7);
        assert_float_equal(dx[i], dy[i] * (1.0 - (double)y[i] * y[i]), 2e-7);
    }
    be->free(be, x), be->free(be, y), be->free(be, dx), be->free(be, dy);
}

/* ---- attention core ---------------------------------------------------------------------------------------- */

enum { AB = 2, AL = 6, AHEADS = 2, AD = 4, AH = AHEADS * AD };

/* float64 scaled dot-product attention with the documented mask, dropout rule and sign-bit record */
static void attention_reference(const float *qkv, const float *mask_bias, float p, uint64_t key, int64_t first,
                                const float *dctx, double *ctx, double *probs, int *dropped, double *dqkv) {
    const int ld = 3 * AH;
    const double scale = 1.0 / sqrt((double)AD), keep_scale = p > 0 ? 1.0 / (1.0 - p) : 1.0;
    memset(dqkv, 0, sizeof(double) * AB * AL * ld);
    for (int b = 0; b < AB; b++)
        for (int h = 0; h < AHEADS; h++) {
            double P[AL][AL], Pd[AL][AL], dP[AL][AL];
            for (int i = 0; i < AL; i++) {
                double s[AL], m = -INFINITY, z = 0;
                for (int j = 0; j < AL; j++) {
                    double dot = 0;
                    for (int e = 0; e < AD; e++)
                        dot += (double)qkv[(b * AL + i) * ld + h * AD + e] * qkv[(b * AL + j) * ld + AH + h * AD + e];
                    s[j] = dot * scale + mask_bias[b * AL + j];
                    m = fmax(m, s[j]);
                }
                for (int j = 0; j < AL; j++) z += exp(s[j] - m);
                for (int j = 0; j < AL; j++) {
                    P[i][j] = exp(s[j] - m) / z;
                    const size_t at = (((size_t)b * AHEADS + h) * AL + i) * AL + j;
                    const uint64_t sk = hs_attention_sample_key(key, (uint64_t)(first + b));
                    const int keep =
                        p <= 0 || hs_attention_uniform(sk, hs_attention_row_key(sk, (uint32_t)(h * AL + i)), (uint32_t)j) >= p;
                    probs[at] = P[i][j];
                    dropped[at] = !keep;
                    Pd[i][j] = keep ? P[i][j] * keep_scale : 0.0;
                }
            }
            for (int i = 0; i < AL; i++)
                for (int e = 0; e < AD; e++) {
                    double c = 0;
                    for (int j = 0; j < AL; j++) c += Pd[i][j] * qkv[(b * AL + j) * ld + 2 * AH + h * AD + e];
                    ctx[(b * AL + i) * AH + h * AD + e] = c;
                }
            /* backward */
            for (int i = 0; i < AL; i++)
                for (int j = 0; j < AL; j++) {
                    double g = 0;
                    for (int e = 0; e < AD; e++)
                        g += (double)dctx[(b * AL + i) * AH + h * AD + e] * qkv[(b * AL + j) * ld + 2 * AH + h * AD + e];
                    const int was_dropped = dropped[(((size_t)b * AHEADS + h) * AL + i) * AL + j];
                    dP[i][j] = was_dropped ? 0.0 : g * keep_scale;
                }
            for (int j = 0; j < AL; j++)
                for (int e = 0; e < AD; e++) {
                    double g = 0;
                    for (int i = 0; i < AL; i++) g += Pd[i][j] * dctx[(b * AL + i) * AH + h * AD + e];
                    dqkv[(b * AL + j) * ld + 2 * AH + h * AD + e] = g;
                }
            for (int i = 0; i < AL; i++) {
                double dot = 0;
                for (int j = 0; j < AL; j++) dot += P[i][j] * dP[i][j];
                for (int j = 0; j < AL; j++) dP[i][j] = P[i][j] * (dP[i][j] - dot) * scale; /* dS/√d */
            }
            for (int i = 0; i < AL; i++)
                for (int e = 0; e < AD; e++) {
                    double gq = 0, gk = 0;
                    for (int j = 0; j < AL; j++) {
                        gq += dP[i][j] * qkv[(b * AL + j) * ld + AH + h * AD + e];
                        gk += dP[j][i] * qkv[(b * AL + j) * ld + h * AD + e];
                    }
                    dqkv[(b * AL + i) * ld + h * AD + e] = gq;
                    dqkv[(b * AL + i) * ld + AH + h * AD + e] = gk;
                }
        }
}

static void check_attention_core(float p) {
    const int ld = 3 * AH;
    const size_t nqkv = (size_t)AB * AL * ld, nctx = (size_t)AB * AL * AH, np = (size_t)AB * AHEADS * AL * AL;
    float *qkv = fbuf(nqkv), *ctx = fbuf(nctx), *probs = fbuf(np), *dctx = fbuf(nctx), *dqkv = fbuf(nqkv);
    float mask_bias[AB * AL];
    int32_t input_mask[AB * AL];
    for (int i = 0; i < AB * AL; i++) input_mask[i] = !(i >= AL + 4); /* sample 1: last 2 positions padding */
    be->attention_mask_bias(be, mask_bias, input_mask, AB * AL);
    for (int i = 0; i < AB * AL; i++) assert_true(mask_bias[i] == (input_mask[i] ? 0.0f : -10000.0f));
    fill(qkv, nqkv, -1.5f, 1.5f, 20), fill(dctx, nctx, -1, 1, 21);
    const uint64_t key = hs_rng_key(7, 1, 2);
    double *ctx_ref = malloc(nctx * sizeof(double)), *probs_ref = malloc(np * sizeof(double));
    double *dqkv_ref = malloc(nqkv * sizeof(double));
    int *dropped = malloc(np * sizeof(int));
    assert_non_null(ctx_ref), assert_non_null(probs_ref), assert_non_null(dqkv_ref), assert_non_null(dropped);
    be->attention_forward(be, ctx, probs, qkv, mask_bias, AB, AL, AHEADS, AD, p, key, 30);
    be->attention_backward(be, dqkv, dctx, qkv, probs, AB, AL, AHEADS, AD, p, key, 30);
    attention_reference(qkv, mask_bias, p, key, 30, dctx, ctx_ref, probs_ref, dropped, dqkv_ref);
    int ndropped = 0;
    for (size_t i = 0; i < np; i++) {
        assert_float_equal(fabsf(probs[i]), probs_ref[i], 1e-6);
        assert_int_equal(signbit(probs[i]) != 0, dropped[i]);
        ndropped += dropped[i];
    }
    if (p > 0) assert_true(ndropped > 0 && (size_t)ndropped < np);
    for (size_t i = 0; i < nctx; i++) assert_float_equal(ctx[i], ctx_ref[i], 1e-5);
    for (size_t i = 0; i < nqkv; i++) assert_float_equal(dqkv[i], dqkv_ref[i], 1e-5);
    free(ctx_ref), free(probs_ref), free(dqkv_ref), free(dropped);
    be->free(be, qkv), be->free(be, ctx), be->free(be, probs), be->free(be, dctx), be->free(be, dqkv);
}

static void test_attention_matches_float64(void **unused) {
    (void)unused;
    check_attention_core(0.0f);
}

static void test_attention_dropout_matches_float64(void **unused) {
    (void)unused;
    check_attention_core(0.25f);
}

/* ---- softmax cross-entropy --------------------------------------------------------------------------------- */

static void test_softmax_xent_exact(void **unused) {
    (void)unused;
    enum { R = 4, C = 4 };
    /* row 0: probabilities 0.1 0.2 0.3 0.4, label 2 (argmax 3: wrong);
     * row 1: a tie at the top, label 0 = the first maximum (right);
     * row 2: ignored (-1);  row 3: huge logits, label = the maximum (NLL ~ 0, right) */
    float z[R * C] = {logf(1), logf(2), logf(3), logf(4), 5, 5, 1, 0, 9, 9, 9, 9, -1000, 1000, 0, 999};
    const int32_t labels[R] = {2, 0, -1, 1};
    double stats[3] = {1, 1, 1}; /* accumulates */
    be->softmax_xent_forward(be, z, z, labels, R, C, stats); /* in place */
    const double nll0 = -log(0.3), nll1 = log(2 + exp(-4.0) + exp(-5.0)), nll3 = log(1 + exp(-1.0));
    assert_float_equal(stats[0], 1 + nll0 + nll1 + nll3, 1e-6);
    assert_true(stats[1] == 1 + 3 && stats[2] == 1 + 2);
    const float p0[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    for (int c = 0; c < C; c++) assert_float_equal(z[c], p0[c], 1e-7);
    be->softmax_xent_backward(be, z, z, labels, R, C, 0.5f); /* in place, scale 1/2 */
    const float g0[4] = {0.05f, 0.1f, 0.15f - 0.5f, 0.2f};
    for (int c = 0; c < C; c++) assert_float_equal(z[c], g0[c], 1e-7);
    for (int c = 0; c < C; c++) assert_true(z[2 * C + c] == 0.0f);
    assert_float_equal(z[3 * C + 1], 0.5 * (1.0 / (1 + exp(-1.0)) - 1.0), 1e-7);
}

/* ---- the same bits on 1 and 2 threads ---------------------------------------------------------------------- */

static void test_reductions_do_not_depend_on_thread_count(void **unused) {
    (void)unused;
    enum { R = 1000, C = 96, N = 3000, V = 50, B = 4, L = 32, HEADS = 2, D = 16 };
    float *x = fbuf((size_t)R * C), *dy = fbuf((size_t)R * C), *gamma = fbuf(C), *beta = fbuf(C);
    float *y = fbuf((size_t)R * C), *mean = fbuf(R), *rstd = fbuf(R);
    fill(x, (size_t)R * C, -2, 2, 30), fill(dy, (size_t)R * C, -1, 1, 31), fill(gamma, C, 0.5f, 1.5f, 32);
    float *rows_dy = fbuf((size_t)N * C);
    fill(rows_dy, (size_t)N * C, -1, 1, 33);
    int32_t *index = be->alloc(be, N * sizeof(int32_t));
    for (int i = 0; i < N; i++) index[i] = (i * 7) % V; /* every row index repeats 60 times */
    const size_t nqkv = (size_t)B * L * 3 * HEADS * D, nctx = (size_t)B * L * HEADS * D, np = (size_t)B * HEADS * L * L;
    float *qkv = fbuf(nqkv), *dctx = fbuf(nctx), *mask_bias = fbuf((size_t)B * L);
    fill(qkv, nqkv, -2, 2, 34), fill(dctx, nctx, -1, 1, 35);
    int32_t *labels = be->alloc(be, R * sizeof(int32_t));
    for (int r = 0; r < R; r++) labels[r] = r % 5 == 0 ? -1 : (r * 13) % C;

    float *out[2][6];
    double stats[2][3] = {{0}};
    for (int run = 0; run < 2; run++) {
        set_threads(run + 1);
        float *dx = fbuf((size_t)R * C), *dgamma = fbuf(C), *dbeta = fbuf(C), *table = fbuf((size_t)V * C);
        float *ctx = fbuf(nctx), *probs = fbuf(np), *dqkv = fbuf(nqkv), *db = fbuf(C), *sm = fbuf((size_t)R * C);
        be->layernorm_forward(be, y, NULL, mean, rstd, x, NULL, gamma, beta, R, C, 1e-12f);
        be->layernorm_backward(be, dx, dgamma, dbeta, dy, x, mean, rstd, gamma, R, C);
        be->scatter_add_rows(be, table, rows_dy, index, N, C, V);
        be->bias_grad_strided(be, db, x, C, R, C / 2);
        be->attention_forward(be, ctx, probs, qkv, mask_bias, B, L, HEADS, D, 0.1f, 99, 5);
        be->attention_backward(be, dqkv, dctx, qkv, probs, B, L, HEADS, D, 0.1f, 99, 5);
        be->softmax_xent_forward(be, sm, x, labels, R, C, stats[run]);
        be->free(be, ctx), be->free(be, probs), be->free(be, sm);
        float *keep[6] = {dx, dgamma, dbeta, table, db, dqkv};
        memcpy(out[run], keep, sizeof keep);
    }
    set_threads(1);
    const size_t sizes[6] = {(size_t)R * C, C, C, (size_t)V * C, C, nqkv};
    for (int k = 0; k < 6; k++) assert_memory_equal(out[0][k], out[1][k], sizes[k] * sizeof(float));
    assert_memory_equal(stats[0], stats[1], sizeof stats[0]);
    for (int run = 0; run < 2; run++)
        for (int k = 0; k < 6; k++) be->free(be, out[run][k]);
    float *bufs[] = {x, dy, gamma, beta, y, mean, rstd, rows_dy, qkv, dctx, mask_bias};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->free(be, bufs[i]);
    be->free(be, index), be->free(be, labels);
}

int main(void) {
    be = hs_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp_and_erf_accuracy),
        cmocka_unit_test(test_gather_and_scatter_rows),
        cmocka_unit_test(test_copy_rows),
        cmocka_unit_test(test_add_rows),
        cmocka_unit_test(test_strided_bias),
        cmocka_unit_test(test_fused_ops_are_the_separate_ops),
        cmocka_unit_test(test_layernorm_matches_float64),
        cmocka_unit_test(test_gelu_and_tanh_match_float64),
        cmocka_unit_test(test_attention_matches_float64),
        cmocka_unit_test(test_attention_dropout_matches_float64),
        cmocka_unit_test(test_softmax_xent_exact),
        cmocka_unit_test(test_reductions_do_not_depend_on_thread_count),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
