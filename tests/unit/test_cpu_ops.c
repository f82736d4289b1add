/* The CPU backend's compute operations against exact, hand-computed vectors and independent float64
 * loops: what a user relies on when moving a model from PyTorch (tie rules, stable log-softmax,
 * transposes, accumulation) and what data-parallel training relies on (results that do not depend on
 * the thread count). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <cmocka.h>

#include "backend/backend.h"
#include "math/dropout.h"
#include "math/hs_math.h"

static const hs_backend *be;

static void fill(float *v, size_t n, uint64_t stream) {
    const uint64_t key = hs_rng_key(99, 1, stream);
    for (size_t i = 0; i < n; i++) v[i] = 2.0f * hs_uniform(key, 0, i) - 1.0f;
}

static void set_threads(int t) {
#ifdef _OPENMP
    omp_set_num_threads(t);
#else
    (void)t;
#endif
}

static void test_alloc_is_aligned_and_zeroed(void **unused) {
    (void)unused;
    const size_t sizes[] = {1, 3, 64, 1000, 1 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        unsigned char *p = be->alloc(be, sizes[k]);
        assert_int_equal((uintptr_t)p % 64, 0);
        for (size_t i = 0; i < sizes[k]; i++) assert_int_equal(p[i], 0);
        be->free(be, p);
    }
}

/* c = alpha·op(a)·op(b) + beta·c for all four transpose combinations, against a float64 triple loop */
static void test_gemm_transposes(void **unused) {
    (void)unused;
    enum { M = 5, N = 7, K = 9 };
    float a[M * K], b[K * N], c[M * N], c0[M * N];
    fill(a, M * K, 1), fill(b, K * N, 2), fill(c0, M * N, 3);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            memcpy(c, c0, sizeof c);
            be->gemm(be, ta, tb, M, N, K, 0.5f, a, ta ? M : K, b, tb ? K : N, 2.0f, c, N);
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double s = 0;
                    for (int k = 0; k < K; k++)
                        s += (double)(ta ? a[k * M + i] : a[i * K + k]) * (tb ? b[j * K + k] : b[k * N + j]);
                    assert_float_equal(c[i * N + j], 0.5 * s + 2.0 * c0[i * N + j], 1e-5);
                }
        }
}

static void test_bias_add_and_grad(void **unused) {
    (void)unused;
    float y[6] = {1, 2, 3, 4, 5, 6}, bias[3] = {10, 20, 30}, db[3] = {1, 1, 1};
    be->add_bias(be, y, bias, 2, 3);
    const float y_expect[6] = {11, 22, 33, 14, 25, 36};
    for (int i = 0; i < 6; i++) assert_float_equal(y[i], y_expect[i], 0);
    be->bias_grad(be, db, y_expect, 2, 3); /* accumulates: 1 + column sums */
    assert_float_equal(db[0], 26, 0), assert_float_equal(db[1], 48, 0), assert_float_equal(db[2], 70, 0);
}

static void test_relu_and_u8(void **unused) {
    (void)unused;
    const float x[5] = {-2.0f, -0.0f, 0.0f, 0.5f, 3.0f};
    float y[5], dx[5];
    const float dy[5] = {1, 1, 1, 1, 1};
    be->relu_forward(be, y, x, 5);
    const float y_expect[5] = {0, 0, 0, 0.5f, 3.0f};
    for (int i = 0; i < 5; i++) assert_float_equal(y[i], y_expect[i], 0);
    be->relu_backward(be, dx, dy, y, 5); /* gradient 0 at the kink, as PyTorch */
    const float dx_expect[5] = {0, 0, 0, 1, 1};
    for (int i = 0; i < 5; i++) assert_float_equal(dx[i], dx_expect[i], 0);
    const uint8_t px[3] = {0, 51, 255};
    float v[3];
    be->u8_to_float(be, v, px, 3, 1.0f / 255.0f, -0.5f);
    assert_float_equal(v[0], -0.5f, 1e-7), assert_float_equal(v[1], -0.3f, 1e-7), assert_float_equal(v[2], 0.5f, 1e-7);
}

/* 2×2 pooling of a 4×4 plane: ties go to the first maximum in row-major window order (PyTorch) */
static void test_maxpool_first_max_on_ties(void **unused) {
    (void)unused;
    const float x[16] = {1, 3, 7, 7,   /* window (0,0): 1 3 / 3 2 -> 3 at index 1 */
                         3, 2, 7, 7,   /* window (0,1): all 7    -> index 2 */
                         -3, -5, 0, 4, /* window (1,0): -3 -5 / -2 -1 -> -1 at index 13 (lower row) */
                         -2, -1, 4, 1}; /* window (1,1): 0 4 / 4 1 -> 4 at index 11 */
    float y[4], dx[16];
    int32_t am[4];
    be->maxpool2d_forward(be, y, am, x, 1, 1, 4, 4, 2);
    const float y_expect[4] = {3, 7, -1, 4};
    const int32_t am_expect[4] = {1, 2, 13, 11};
    for (int i = 0; i < 4; i++) {
        assert_float_equal(y[i], y_expect[i], 0);
        assert_int_equal(am[i], am_expect[i]);
    }
    const float dy[4] = {10, 20, 30, 40};
    be->maxpool2d_backward(be, dx, dy, am, 1, 1, 4, 4, 2);
    for (int i = 0; i < 16; i++) {
        float expect = 0;
        for (int q = 0; q < 4; q++)
            if (am_expect[q] == i) expect = dy[q];
        assert_float_equal(dx[i], expect, 0);
    }
}

/* logits (0, ln 3): softmax (1/4, 3/4). Large logits must not overflow (max subtracted). */
static void test_log_softmax_nll_exact(void **unused) {
    (void)unused;
    const float logits[6] = {0.0f, logf(3.0f), 1000.0f, 1000.0f, 5.0f, 5.0f};
    const int32_t labels[3] = {1, 0, 1};
    float lp[6], d[6];
    double stats[3] = {1.0, 1.0, 1.0}; /* accumulates: Σ NLL, rows, correct */
    be->log_softmax_nll_forward(be, lp, logits, labels, 3, 2, stats, NULL);
    assert_float_equal(lp[0], -logf(4.0f), 1e-6), assert_float_equal(lp[1], logf(0.75f), 1e-6);
    assert_float_equal(lp[2], -logf(2.0f), 1e-6), assert_float_equal(lp[3], -logf(2.0f), 1e-6);
    assert_true(fabs(stats[0] - (1.0 + log(4.0 / 3.0) + 2.0 * log(2.0))) < 1e-6);
    assert_true(stats[1] == 4.0);
    /* row 0: argmax 1 == label; row 1: tie, first max 0 == label; row 2: tie, first max 0 != label 1 */
    assert_true(stats[2] == 3.0);
    be->log_softmax_nll_backward(be, d, lp, NULL, NULL, labels, 3, 2, 0.5f, NULL);
    assert_float_equal(d[0], 0.125f, 1e-6), assert_float_equal(d[1], -0.125f, 1e-6);
    assert_float_equal(d[2], -0.25f, 1e-6), assert_float_equal(d[3], 0.25f, 1e-6);
}

static void test_dropout_edge_rates(void **unused) {
    (void)unused;
    float x[32], y[32];
    fill(x, 32, 5);
    be->dropout_forward(be, y, x, 4, 8, 1, 0.0f, 123, 0); /* p = 0: a copy */
    for (int i = 0; i < 32; i++) assert_float_equal(y[i], x[i], 0);
    be->dropout_forward(be, y, x, 4, 8, 4, 1.0f, 123, 0); /* p = 1: everything dropped, no NaN */
    for (int i = 0; i < 32; i++) assert_float_equal(y[i], 0.0f, 0);
}

/* The attention dropout's draws (kernels/math/dropout.h): the values tests/ref/hetseq_rng.py's independent
 * implementation gives (the site key, sample keys, the draws, 16 random bits scaled to 24, at rows h·qlen + i of heads 0 and 2,
 * qlen 5), and the statistics a dropout mask needs over a sample of 16 heads x 512 x 512: the keep rate,
 * neighbours in a row and in a column and the same element in the next sample independent at p = 0.1
 * (within 5 standard deviations), and the uniform's 256 bins flat (chi-square, 255 degrees of freedom,
 * below 340: p < 3e-4 of a false alarm). */
static void test_attention_dropout_draws(void **unused) {
    (void)unused;
    const uint64_t key = hs_rng_key(19940802, 7, 16);
    assert_true(key == 0xc3f6cd8fb4bb0a0eULL);
    const uint64_t samples[3] = {0, 1, 12345};
    const uint64_t sample_keys[3] = {0x8d7d7940f5f03735ULL, 0x6a57c54477ab14d9ULL, 0x455fb787959ab8b0ULL};
    const uint32_t rows[3] = {0 * 5 + 0, 0 * 5 + 1, 2 * 5 + 4}, cols[3] = {0, 1, 999};
    const uint32_t u24[3][3][3] = {
        {{10888192, 2041856, 420608}, {7316480, 13172224, 8269568}, {14080000, 16431616, 8103168}},
        {{12352256, 3245824, 3140608}, {3746048, 14952192, 10129408}, {5552128, 9280256, 1607680}},
        {{12664064, 9388288, 10965248}, {996608, 4513536, 3315200}, {4108800, 11745280, 4573184}}};
    for (int s = 0; s < 3; s++) {
        const uint64_t sk = hs_attention_sample_key(key, samples[s]);
        assert_true(sk == sample_keys[s]);
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++)
                assert_true(hs_attention_uniform(sk, hs_attention_row_key(sk, rows[r]), cols[c]) * 16777216.0f ==
                            (float)u24[s][r][c]);
    }
    enum { HEADS = 16, L = 512, N = HEADS * L * L };
    const float p = 0.1f;
    const uint64_t sk = hs_attention_sample_key(key, 3), next = hs_attention_sample_key(key, 4);
    double kept = 0, pair_row = 0, pair_col = 0, pair_sample = 0, bins[256] = {0};
    static int col_above[L];
    for (int row = 0; row < HEADS * L; row++) {
        const uint32_t rk = hs_attention_row_key(sk, (uint32_t)row), rk_next = hs_attention_row_key(next, (uint32_t)row);
        int prev = 0;
        for (int j = 0; j < L; j++) {
            const float u = hs_attention_uniform(sk, rk, (uint32_t)j);
            const int k = u >= p;
            kept += k;
            if (j > 0) pair_row += k && prev;
            if (row > 0) pair_col += k && col_above[j];
            pair_sample += k && hs_attention_uniform(next, rk_next, (uint32_t)j) >= p;
            prev = col_above[j] = k;
            bins[(int)(u * 256.0f)] += 1;
        }
    }
    const double q = 1.0 - p, sd1 = sqrt(q * p / N), sd2 = sqrt(q * q * (1 - q * q) / N);
    assert_true(fabs(kept / N - q) < 5 * sd1);
    assert_true(fabs(pair_row / ((double)HEADS * L * (L - 1)) - q * q) < 5 * sd2);
    assert_true(fabs(pair_col / ((double)(HEADS * L - 1) * L) - q * q) < 5 * sd2);
    assert_true(fabs(pair_sample / N - q * q) < 5 * sd2);
    double chi2 = 0;
    for (int b = 0; b < 256; b++) chi2 += (bins[b] - N / 256.0) * (bins[b] - N / 256.0) / (N / 256.0);
    assert_true(chi2 < 340.0);
}

/* The hidden layers' dropout draws (kernels/math/dropout.h): the values tests/ref/hetseq_rng.py's independent
 * implementation gives (24-bit uniforms of elements 0, 1, 999 and 2^32 + 5 of three samples; their sample
 * keys are the attention's, checked above), and the statistics a dropout mask needs over 64 samples of
 * 65536 elements (4 M draws): the keep rate, neighbouring elements and the same element in the next
 * sample independent at p = 0.1 (within 5 standard deviations), and the uniform's 256 bins flat
 * (chi-square, 255 degrees of freedom, below 340). */
static void test_hidden_dropout_draws(void **unused) {
    (void)unused;
    const uint64_t key = hs_rng_key(19940802, 7, 16);
    const uint64_t samples[3] = {0, 1, 12345};
    const uint64_t elems[4] = {0, 1, 999, (1ULL << 32) + 5};
    const uint32_t u24[3][4] = {{6372796, 15404745, 1949625, 8506301},
                                {187316, 14355698, 1816627, 10108090},
                                {11551347, 2032667, 9114353, 5896893}};
    for (int s = 0; s < 3; s++) {
        const uint64_t sk = hs_dropout_sample_key(key, samples[s]);
        assert_true(sk == hs_attention_sample_key(key, samples[s]));
        for (int e = 0; e < 4; e++) assert_true(hs_dropout_uniform(sk, elems[e]) * 16777216.0f == (float)u24[s][e]);
    }
    enum { SAMPLES = 64, PER = 65536, N = SAMPLES * PER };
    const float p = 0.1f;
    double kept = 0, pair_next = 0, pair_sample = 0, bins[256] = {0};
    for (int s = 0; s < SAMPLES; s++) {
        const uint64_t sk = hs_dropout_sample_key(key, (uint64_t)s), next = hs_dropout_sample_key(key, (uint64_t)s + 1);
        int prev = 0;
        for (int e = 0; e < PER; e++) {
            const float u = hs_dropout_uniform(sk, (uint64_t)e);
            const int k = u >= p;
            kept += k;
            if (e > 0) pair_next += k && prev;
            pair_sample += k && hs_dropout_uniform(next, (uint64_t)e) >= p;
            prev = k;
            bins[(int)(u * 256.0f)] += 1;
        }
    }
    const double q = 1.0 - p, sd1 = sqrt(q * p / N), sd2 = sqrt(q * q * (1 - q * q) / N);
    assert_true(fabs(kept / N - q) < 5 * sd1);
    assert_true(fabs(pair_next / ((double)SAMPLES * (PER - 1)) - q * q) < 5 * sd2);
    assert_true(fabs(pair_sample / N - q * q) < 5 * sd2);
    double chi2 = 0;
    for (int b = 0; b < 256; b++) chi2 += (bins[b] - N / 256.0) * (bins[b] - N / 256.0) / (N / 256.0);
    assert_true(chi2 < 340.0);
}

/* A dropout rate's integer threshold keeps exactly what the uniform's float comparison u >= p keeps: every
 * one of the 2^24 draws at rates around the float grid's awkward points (0 and below, the smallest
 * denormal, 2^-24 and its neighbours, 0.1 and its neighbours, 0.5, the largest float below 1, 1 and
 * above), and the factors of a row of draws equal the uniform's decision times 1/(1-p). */
static void test_dropout_rate_threshold(void **unused) {
    (void)unused;
    const float rates[] = {-0.5f, 0.0f, 1e-45f, 5.9604645e-08f, nextafterf(5.9604645e-08f, 0.0f),
                           nextafterf(5.9604645e-08f, 1.0f), 0.1f, nextafterf(0.1f, 0.0f), nextafterf(0.1f, 1.0f),
                           0.5f, 0.3333333f, nextafterf(1.0f, 0.0f), 1.0f, 1.5f};
    for (size_t r = 0; r < sizeof rates / sizeof rates[0]; r++) {
        const float p = rates[r];
        const hs_dropout_rate rate = hs_dropout_rate_of(p);
        assert_true(rate.keep_scale == hs_dropout_keep_scale(p));
        size_t disagree = 0;
        for (uint32_t b = 0; b < (1U << 24); b++)
            disagree += ((float)b * (1.0f / 16777216.0f) >= p) != (b >= rate.threshold);
        assert_int_equal(disagree, 0);
    }
    const uint64_t sk = hs_dropout_sample_key(hs_rng_key(19940802, 7, 16), 3);
    const uint32_t rk = hs_attention_row_key(sk, 17);
    const float p = 0.1f;
    const hs_dropout_rate rate = hs_dropout_rate_of(p);
    size_t dropped = 0;
    for (uint32_t e = 0; e < 4096; e++) {
        const float fh = hs_dropout_factor(sk, e, rate), fa = hs_attention_dropout_factor(sk, rk, e, rate);
        assert_true(fh == (hs_dropout_uniform(sk, e) >= p ? hs_dropout_keep_scale(p) : 0.0f));
        assert_true(fa == (hs_attention_uniform(sk, rk, e) >= p ? hs_dropout_keep_scale(p) : 0.0f));
        if (e % 2 == 0) { /* a pair's two decisions from one hash: the per-column ones */
            float f[2];
            hs_attention_pair_factors(sk, rk, e / 2, rate, &f[0], &f[1]);
            assert_true(f[0] == fa && f[1] == hs_attention_dropout_factor(sk, rk, e + 1, rate));
        }
        dropped += fh == 0.0f;
    }
    /* a pair's factors (half_threshold) are the per-column decisions (threshold) at every rate, for words
     * whose halves sweep every 16-bit value */
    for (size_t r = 0; r < sizeof rates / sizeof rates[0]; r++) {
        const hs_dropout_rate ra = hs_dropout_rate_of(rates[r]);
        size_t disagree = 0;
        for (uint32_t b16 = 0; b16 < 65536; b16++) {
            const uint32_t x = b16 | (65535U - b16) << 16, bits[2] = {hs_attention_bits_of_pair(x, 0),
                                                                      hs_attention_bits_of_pair(x, 1)};
            const float want[2] = {bits[0] >= ra.threshold ? ra.keep_scale : 0.0f,
                                   bits[1] >= ra.threshold ? ra.keep_scale : 0.0f};
            float got[2];
            hs_attention_factors_of_pair(x, ra, &got[0], &got[1]);
            disagree += got[0] != want[0] || got[1] != want[1];
        }
        assert_int_equal(disagree, 0);
    }
    /* the 16-bit draws keep with probability 1 - ceil(p·2^16)/2^16 exactly: every b16 once */
    size_t kept16 = 0;
    for (uint32_t b16 = 0; b16 < 65536; b16++) kept16 += hs_attention_bits_of_pair(b16, 0) >= rate.threshold;
    assert_int_equal(kept16, 65536 - (size_t)ceil(0.1f * 65536.0));
    assert_true(dropped > 300 && dropped < 520); /* about 410 of 4096 at p = 0.1: both outcomes exercised */
}

/* Σ x² per tensor of a table and in all, in double: exact for small integers, padding between tensors
 * ignored, and the same bits on 1 and 2 threads */
static void test_sumsq_exact_and_thread_independent(void **unused) {
    (void)unused;
    enum { N = 100003, M = 37, OFF = 100016 };
    float *x = be->alloc(be, (OFF + M) * sizeof *x);
    const hs_tensor_span table[2] = {{.offset = 0, .numel = N}, {.offset = OFF, .numel = M}};
    double expect[2] = {0, 0};
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i % 7 - 3);
        expect[0] += (double)(i % 7 - 3) * (i % 7 - 3);
    }
    for (int i = N; i < OFF; i++) x[i] = 1000.0f; /* padding: not counted */
    for (int i = 0; i < M; i++) {
        x[OFF + i] = (float)i;
        expect[1] += (double)i * i;
    }
    double one[3], r1[3], r2[3];
    set_threads(1);
    be->sumsq_tensors(be, one, one + 2, x, table, 2);
    fill(x, N, 6);
    be->sumsq_tensors(be, r1, r1 + 2, x, table, 2);
    set_threads(2);
    be->sumsq_tensors(be, r2, r2 + 2, x, table, 2);
    assert_true(one[0] == expect[0] && one[1] == expect[1] && one[2] == expect[0] + expect[1]);
    assert_memory_equal(r1, r2, sizeof r1);
    be->free(be, x);
}

/* conv2d forward against a float64 direct convolution; backward bit-identical on 1 and 2 threads */
static void test_conv2d_direct_and_deterministic(void **unused) {
    (void)unused;
    const hs_conv2d_shape s = {.n = 10, .c_in = 3, .h = 9, .w = 8, .c_out = 5, .kh = 3, .kw = 3, .oh = 7, .ow = 6};
    const size_t nx = 10 * 3 * 9 * 8, nw = 5 * 3 * 9, ny = 10 * 5 * 7 * 6;
    float *x = be->alloc(be, nx * 4), *w = be->alloc(be, nw * 4), *b = be->alloc(be, 5 * 4), *y = be->alloc(be, ny * 4);
    float *dy = be->alloc(be, ny * 4), *dx[2], *dw[2], *db[2];
    fill(x, nx, 7), fill(w, nw, 8), fill(b, 5, 9), fill(dy, ny, 10);
    set_threads(1); /* a workspace sized while one thread is set still serves two */
    void *ws = be->alloc(be, be->conv2d_workspace_bytes(be, &s));
    be->conv2d_forward(be, &s, y, x, w, b, ws);
    for (int n = 0; n < s.n; n++)
        for (int co = 0; co < s.c_out; co++)
            for (int oy = 0; oy < s.oh; oy++)
                for (int ox = 0; ox < s.ow; ox++) {
                    double acc = b[co];
                    for (int c = 0; c < s.c_in; c++)
                        for (int i = 0; i < 3; i++)
                            for (int j = 0; j < 3; j++)
                                acc += (double)w[((co * 3 + c) * 3 + i) * 3 + j] * x[((n * 3 + c) * 9 + oy + i) * 8 + ox + j];
                    assert_float_equal(y[((n * 5 + co) * 7 + oy) * 6 + ox], acc, 1e-5);
                }
    for (int t = 0; t < 2; t++) {
        set_threads(t + 1);
        dx[t] = be->alloc(be, nx * 4), dw[t] = be->alloc(be, nw * 4), db[t] = be->alloc(be, 5 * 4);
        be->conv2d_backward(be, &s, dx[t], dw[t], db[t], dy, x, w, ws);
    }
    assert_memory_equal(dx[0], dx[1], nx * 4);
    assert_memory_equal(dw[0], dw[1], nw * 4);
    assert_memory_equal(db[0], db[1], 5 * 4);
    set_threads(2);
    be->free(be, x), be->free(be, w), be->free(be, b), be->free(be, y), be->free(be, dy), be->free(be, ws);
    for (int t = 0; t < 2; t++) be->free(be, dx[t]), be->free(be, dw[t]), be->free(be, db[t]);
}

int main(void) {
    be = hs_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alloc_is_aligned_and_zeroed),
        cmocka_unit_test(test_gemm_transposes),
        cmocka_unit_test(test_bias_add_and_grad),
        cmocka_unit_test(test_relu_and_u8),
        cmocka_unit_test(test_maxpool_first_max_on_ties),
        cmocka_unit_test(test_log_softmax_nll_exact),
        cmocka_unit_test(test_dropout_edge_rates),
        cmocka_unit_test(test_attention_dropout_draws),
        cmocka_unit_test(test_hidden_dropout_draws),
        cmocka_unit_test(test_dropout_rate_threshold),
        cmocka_unit_test(test_sumsq_exact_and_thread_independent),
        cmocka_unit_test(test_conv2d_direct_and_deterministic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
