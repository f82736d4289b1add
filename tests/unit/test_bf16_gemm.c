/* precision = "bf16" on the CPU: a user who trains in bf16 relies on every matrix product being the
 * product of the bf16-rounded operands summed in fp32 (PyTorch's bf16 autocast), on the fp32 products
 * being untouched by the bf16 code, and on rounding to nearest, ties to even, as torch rounds. The
 * same for precision = "tf32" | "fp16" on the CPU (emulated: tf32- or fp16-rounded operands, fp32 sums);
 * the roundings themselves are checked bit for bit against torch by tests/ref/test_lowp_round.py.
 *
 * Each product is compared with a float64 reference computed from the bf16-rounded inputs. Tolerance:
 * summing k exact products in fp32 errs by at most about k·2⁻²⁴ of the sum of |products| (the
 * reference's own error is negligible), so we accept (k + 2)·2⁻²⁴·scale, scale = alpha·Σ|a||b| +
 * |beta·c|. The same comparison against the UNROUNDED inputs must fail for some element, so a path that
 * forgot to round (plain SGEMM) does not pass: bf16 rounding moves a product by ~2⁻⁸ relative, far
 * above the tolerance. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <cmocka.h>
#include <omp.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_rounded_gemm.h"

static const hs_backend *bf16; /* NULL when this build has no oneDNN */

static uint32_t rng_state = 12345u;
static float uniform(void) { /* in [-1, 1) */
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)((double)(rng_state >> 8) / 8388608.0 - 1.0);
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Round to nearest, ties to even, at the 16th bit; NaN stays NaN; the largest finite values round to ∞. */
static void test_rounding(void **unused) {
    (void)unused;
    assert_true(hs_bf16_round(1.0f) == 1.0f);
    assert_true(hs_bf16_round(1.0f + 0x1p-8f) == 1.0f);              /* tie, 1.0 is even: down */
    assert_true(hs_bf16_round(1.0f + 3 * 0x1p-8f) == 1.0f + 0x1p-6f); /* tie, odd below: up */
    assert_true(hs_bf16_round(1.0f + 0x1p-8f + 0x1p-20f) == 1.0f + 0x1p-7f); /* above the tie: up */
    assert_true(hs_bf16_round(-1.0f - 0x1p-9f) == -1.0f);
    assert_true(isnan(hs_bf16_round(NAN)));
    assert_true(isinf(hs_bf16_round(from_bits(0x7f7fffffu))));
    assert_true(hs_bf16_round(from_bits(0x00000001u)) == 0.0f); /* the smallest subnormal: ties-even to 0 */
    assert_int_equal(hs_bf16_bits(1.5f), 0x3fc0);
}

typedef struct gemm_case {
    int ta, tb, m, n, k, pad; /* pad: extra leading-dimension columns */
    float alpha, beta;
} gemm_case;

/* Runs one case through be->gemm and checks it against the operands rounded as be->precision rounds
 * them; inside = 1 runs it from an OpenMP parallel region (the attention and convolution path). */
static void check_case_on(const hs_backend *be, const gemm_case *g, int inside) {
    const int prec = be->precision;
    const int a_rows = g->ta ? g->k : g->m, a_cols = g->ta ? g->m : g->k;
    const int b_rows = g->tb ? g->n : g->k, b_cols = g->tb ? g->k : g->n;
    const int lda = a_cols + g->pad, ldb = b_cols + g->pad, ldc = g->n + g->pad;
    float *a = malloc(sizeof(float) * (size_t)a_rows * (size_t)lda);
    float *b = malloc(sizeof(float) * (size_t)b_rows * (size_t)ldb);
    float *c = malloc(sizeof(float) * (size_t)g->m * (size_t)ldc);
    float *c0 = malloc(sizeof(float) * (size_t)g->m * (size_t)ldc);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    assert_non_null(c0);
    for (int i = 0; i < a_rows * lda; i++) a[i] = uniform();
    for (int i = 0; i < b_rows * ldb; i++) b[i] = uniform();
    for (int i = 0; i < g->m * ldc; i++) c0[i] = g->beta != 0.0f ? uniform() : NAN; /* beta = 0: c not read */
    memcpy(c, c0, sizeof(float) * (size_t)g->m * (size_t)ldc);
    if (inside) {
#pragma omp parallel num_threads(2)
        {
#pragma omp single
            be->gemm(be, g->ta, g->tb, g->m, g->n, g->k, g->alpha, a, lda, b, ldb, g->beta, c, ldc);
        }
    } else {
        be->gemm(be, g->ta, g->tb, g->m, g->n, g->k, g->alpha, a, lda, b, ldb, g->beta, c, ldc);
    }
    double worst = 0.0;   /* largest error / tolerance against the rounded-input reference */
    double unround = 0.0; /* the same against the unrounded inputs */
    for (int i = 0; i < g->m; i++)
        for (int j = 0; j < g->n; j++) {
            double s = 0.0, s_raw = 0.0, scale = 0.0;
            for (int p = 0; p < g->k; p++) {
                const float av = g->ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
                const float bv = g->tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
                const double prod = (double)hs_lowp_round(prec, av) * (double)hs_lowp_round(prec, bv);
                s += prod;
                s_raw += (double)av * (double)bv;
                scale += fabs(prod);
            }
            const double cin = g->beta != 0.0f ? (double)g->beta * (double)c0[(size_t)i * ldc + j] : 0.0;
            const double ref = (double)g->alpha * s + cin, ref_raw = (double)g->alpha * s_raw + cin;
            const double tol = (g->k + 2) * 0x1p-24 * (fabs((double)g->alpha) * scale + fabs(cin)) + 1e-30;
            const double got = c[(size_t)i * ldc + j];
            assert_false(isnan(got));
            if (fabs(got - ref) / tol > worst) worst = fabs(got - ref) / tol;
            if (fabs(got - ref_raw) / tol > unround) unround = fabs(got - ref_raw) / tol;
        }
    /* the padding columns of c are untouched */
    for (int i = 0; i < g->m; i++)
        for (int j = g->n; j < ldc; j++)
            assert_memory_equal(&c[(size_t)i * ldc + j], &c0[(size_t)i * ldc + j], sizeof(float));
    if (worst > 1.0)
        fail_msg("precision %d ta=%d tb=%d m=%d n=%d k=%d beta=%g inside=%d: error %.3g x the tolerance", prec, g->ta,
                 g->tb, g->m, g->n, g->k, (double)g->beta, inside, worst);
    if (g->k >= 4) assert_true(unround > 1.0); /* the operands really were rounded */
    free(a);
    free(b);
    free(c);
    free(c0);
}

static void check_case(const gemm_case *g, int inside) { check_case_on(bf16, g, inside); }

static const gemm_case cases[] = {
    {0, 0, 7, 13, 5, 0, 1.0f, 0.0f},     {0, 1, 33, 17, 65, 3, 1.0f, 0.5f}, {1, 0, 19, 31, 40, 1, 0.75f, 0.0f},
    {1, 1, 5, 9, 300, 2, -1.25f, 1.0f},  {0, 0, 1, 1, 1, 0, 1.0f, 0.0f},    {0, 1, 64, 48, 257, 0, 0.125f, 1.0f},
    {1, 0, 128, 96, 64, 5, 1.0f, -0.5f}, {0, 0, 2, 300, 3, 1, 1.0f, 2.0f},
};

/* The products of the backend's gemm member, called as the layers call it, through oneDNN's matmul
 * (the path of CPUs with BF16 instructions; oneDNN emulates them elsewhere, so it runs on every CPU). */
static void test_gemm_against_reference(void **unused) {
    (void)unused;
    if (!bf16) skip();
    hs_cpu_bf16_set_path(1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i], 0);
    /* again: the cached per-shape plans give the same checked results */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i], 0);
}

/* The same through the path of CPUs without BF16 instructions (rounded operands, SGEMM). */
static void test_gemm_rounded_path(void **unused) {
    (void)unused;
    if (!bf16) skip();
    hs_cpu_bf16_set_path(0);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i], 0);
    hs_cpu_bf16_set_path(1);
}

/* The same products from inside a parallel region (attention heads, convolution samples). */
static void test_gemm_inside_parallel_region(void **unused) {
    (void)unused;
    if (!bf16) skip();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i], 1);
}

/* tf32 and fp16: rounded operands, exact products, fp32 sums, outside and inside parallel regions; one
 * table per precision, the same one on every call. */
static void test_tf32_fp16_gemm(void **unused) {
    (void)unused;
    const hs_backend *cpu = hs_backend_cpu();
    const char *names[2] = {"tf32", "fp16"};
    const int precs[2] = {HS_PRECISION_TF32, HS_PRECISION_FP16};
    for (int t = 0; t < 2; t++) {
        const hs_backend *be = hs_backend_with_precision(cpu, names[t]);
        assert_int_equal(be->precision, precs[t]);
        assert_string_equal(be->name, "cpu");
        assert_ptr_equal(hs_backend_with_precision(cpu, names[t]), be);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            check_case_on(be, &cases[i], 0);
            check_case_on(be, &cases[i], 1);
        }
    }
}

/* fp32 stays OpenBLAS's SGEMM, bit for bit, and precision = "fp32" keeps the plain backend. */
static void test_fp32_unchanged(void **unused) {
    (void)unused;
    const hs_backend *cpu = hs_backend_cpu();
    assert_ptr_equal(hs_backend_with_precision(cpu, "fp32"), cpu);
    assert_int_equal(cpu->precision, HS_PRECISION_FP32);
    enum { M = 37, N = 29, K = 71 };
    float a[M * K], b[K * N], c1[M * N], c2[M * N];
    for (int i = 0; i < M * K; i++) a[i] = uniform();
    for (int i = 0; i < K * N; i++) b[i] = uniform();
    for (int i = 0; i < M * N; i++) c1[i] = c2[i] = uniform();
    cpu->gemm(cpu, 0, 0, M, N, K, 0.5f, a, K, b, N, 0.25f, c1, N);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 0.5f, a, K, b, N, 0.25f, c2, N);
    assert_memory_equal(c1, c2, sizeof c1);
}

/* Without oneDNN the bf16 backend is refused with the package to install. */
static void test_availability(void **unused) {
    (void)unused;
    char why[256] = "";
    const hs_backend *be = hs_backend_cpu_bf16(why, sizeof why);
    if (be) {
        assert_int_equal(be->precision, HS_PRECISION_BF16);
        assert_string_equal(be->name, "cpu");
    } else {
        assert_non_null(strstr(why, "libdnnl-dev"));
    }
}

int main(void) {
    char why[256];
    bf16 = hs_backend_cpu_bf16(why, sizeof why);
    if (!bf16) fprintf(stderr, "bf16 products not built: %s\n", why);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounding),
        cmocka_unit_test(test_gemm_against_reference),
        cmocka_unit_test(test_gemm_rounded_path),
        cmocka_unit_test(test_gemm_inside_parallel_region),
        cmocka_unit_test(test_tf32_fp16_gemm),
        cmocka_unit_test(test_fp32_unchanged),
        cmocka_unit_test(test_availability),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
