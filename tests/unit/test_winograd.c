/* 3×3 convolutions with 8+ channels run through Winograd F(4×4,3×3) on the CPU (cpu_winograd.c). A
 * user training such a layer relies on forward, data gradient and filter gradient matching the plain
 * convolution, on edge tiles being handled when the output is not a multiple of 4, and on results that
 * do not depend on the thread count. Each case below runs the backend's conv2d entry points and
 * compares with a float64 direct convolution.
 *
 * Tolerance. Every output is a sum of products; a float32 computation of it can be wrong by a few
 * units of 6e-8 times the sum of the |products| (not of the result, which may cancel), so errors are
 * measured against the "absolute" convolution of |x|, |w| and |dy| (scale = largest such sum in the
 * tensor). Direct float32 summation stays around 1e-7 of that scale; Winograd's transforms multiply
 * values by up to 8 (Aᵀ), 5 (Bᵀ) and 1/24 (G) and add them back, which costs one to two decimal digits
 * (Lavin & Gray; Barabasz et al., "Error analysis and improving the accuracy of Winograd convolution",
 * 2020). Measured here: at most ~1e-6 of the scale for the forward pass and both gradients. We accept 1e-5:
 * 10× the measured error and 10× tighter than the 1e-4 the PyTorch cross-check of the whole CNN allows,
 * while mistakes land far above it (tried: one transform coefficient off by 1e-4 of its value gives
 * ~1e-4; a lost overlap in the data gradient or a lost sample, ~1e-1). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <cmocka.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_winograd.h"
#include "math/hs_math.h"

#define WINO_TOLERANCE 1e-5

static const hs_backend *be;

static void set_threads(int t) {
#ifdef _OPENMP
    omp_set_num_threads(t);
#else
    (void)t;
#endif
}

/* v[i] uniform in [lo, hi) */
static void fill(float *v, size_t n, uint64_t stream, float lo, float hi) {
    const uint64_t key = hs_rng_key(2024, 3, stream);
    for (size_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * hs_uniform(key, 0, i);
}

/* Float64 direct convolution and its gradients, with the matching |·| sums that scale the error:
 * y = b + Σ w x, dx = Σ w dy, dw = dw0 + Σ x dy, db = db0 + Σ dy (dw0, db0: what was accumulated before). */
typedef struct reference {
    double *y, *dx, *dw, *db;
    double *y_abs, *dx_abs, *dw_abs, *db_abs;
} reference;

static reference direct_conv(const hs_conv2d_shape *s, const float *x, const float *w, const float *b,
                             const float *dy, const float *dw0, const float *db0) {
    const size_t nx = (size_t)s->n * s->c_in * s->h * s->w, ny = (size_t)s->n * s->c_out * s->oh * s->ow;
    const size_t nw = (size_t)s->c_out * s->c_in * 9;
    reference r;
    r.y = calloc(ny, sizeof(double)), r.y_abs = calloc(ny, sizeof(double));
    r.dx = calloc(nx, sizeof(double)), r.dx_abs = calloc(nx, sizeof(double));
    r.dw = calloc(nw, sizeof(double)), r.dw_abs = calloc(nw, sizeof(double));
    r.db = calloc((size_t)s->c_out, sizeof(double)), r.db_abs = calloc((size_t)s->c_out, sizeof(double));
    assert_non_null(r.y), assert_non_null(r.y_abs), assert_non_null(r.dx), assert_non_null(r.dx_abs);
    assert_non_null(r.dw), assert_non_null(r.dw_abs), assert_non_null(r.db), assert_non_null(r.db_abs);
    for (size_t i = 0; i < nw; i++) r.dw[i] = dw0[i], r.dw_abs[i] = fabs(dw0[i]);
    for (int k = 0; k < s->c_out; k++) r.db[k] = db0[k], r.db_abs[k] = fabs(db0[k]);
    for (int n = 0; n < s->n; n++)
        for (int k = 0; k < s->c_out; k++)
            for (int oy = 0; oy < s->oh; oy++)
                for (int ox = 0; ox < s->ow; ox++) {
                    const size_t yi = (((size_t)n * s->c_out + k) * s->oh + oy) * s->ow + ox;
                    const double g = dy[yi];
                    double acc = b[k], acc_abs = fabs(b[k]);
                    for (int c = 0; c < s->c_in; c++)
                        for (int i = 0; i < 3; i++)
                            for (int j = 0; j < 3; j++) {
                                const size_t xi = (((size_t)n * s->c_in + c) * s->h + oy + i) * s->w + ox + j;
                                const size_t wi = (((size_t)k * s->c_in + c) * 3 + i) * 3 + j;
                                acc += (double)w[wi] * x[xi], acc_abs += fabs((double)w[wi] * x[xi]);
                                r.dx[xi] += g * w[wi], r.dx_abs[xi] += fabs(g * w[wi]);
                                r.dw[wi] += g * x[xi], r.dw_abs[wi] += fabs(g * x[xi]);
                            }
                    r.y[yi] = acc, r.y_abs[yi] = acc_abs;
                    r.db[k] += g, r.db_abs[k] += fabs(g);
                }
    return r;
}

static void free_reference(reference *r) {
    free(r->y), free(r->dx), free(r->dw), free(r->db);
    free(r->y_abs), free(r->dx_abs), free(r->dw_abs), free(r->db_abs);
}

/* max |got - want| / max |·|-sum, printed, and held to the tolerance */
static void expect_close(const char *what, const float *got, const double *want, const double *scale, size_t n) {
    double err = 0.0, top = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)got[i] - want[i]);
        if (e > err || e != e) err = e != e ? INFINITY : e;
        if (scale[i] > top) top = scale[i];
    }
    const double rel = err / top;
    printf("  %-3s max error %.2e of scale %.3g\n", what, rel, top);
    assert_true(rel <= WINO_TOLERANCE);
}

/* A user's layer of shape s: forward, then backward into gradients that already hold values (they
 * accumulate), on 1 and 2 threads; both must match the direct convolution and each other bit for bit. */
static void check_shape(const hs_conv2d_shape *s) {
    printf("conv %d×%d×%d×%d -> %d channels, %d×%d outputs\n", s->n, s->c_in, s->h, s->w, s->c_out, s->oh, s->ow);
    assert_true(hs_cpu_winograd_applies(s));
    const size_t nx = (size_t)s->n * s->c_in * s->h * s->w, ny = (size_t)s->n * s->c_out * s->oh * s->ow;
    const size_t nw = (size_t)s->c_out * s->c_in * 9, nb = (size_t)s->c_out;
    float *x = be->alloc(be, nx * 4), *w = be->alloc(be, nw * 4), *b = be->alloc(be, nb * 4), *dy = be->alloc(be, ny * 4);
    float *dw0 = be->alloc(be, nw * 4), *db0 = be->alloc(be, nb * 4);
    fill(x, nx, 1, 0.0f, 2.0f); /* post-ReLU-like inputs: all >= 0 */
    fill(w, nw, 2, -0.3f, 0.3f), fill(b, nb, 3, -0.1f, 0.1f), fill(dy, ny, 4, -1e-3f, 1e-3f);
    fill(dw0, nw, 5, -0.01f, 0.01f), fill(db0, nb, 6, -0.01f, 0.01f);
    reference r = direct_conv(s, x, w, b, dy, dw0, db0);

    float *y[2], *dx[2], *dw[2], *db[2];
    set_threads(1); /* a workspace sized while one thread is set still serves two */
    void *ws = be->alloc(be, be->conv2d_workspace_bytes(be, s));
    for (int t = 0; t < 2; t++) {
        set_threads(t + 1);
        y[t] = be->alloc(be, ny * 4), dx[t] = be->alloc(be, nx * 4), dw[t] = be->alloc(be, nw * 4), db[t] = be->alloc(be, nb * 4);
        memcpy(dw[t], dw0, nw * 4), memcpy(db[t], db0, nb * 4);
        be->conv2d_forward(be, s, y[t], x, w, b, ws);
        be->conv2d_backward(be, s, dx[t], dw[t], db[t], dy, x, w, ws);
    }
    expect_close("y", y[0], r.y, r.y_abs, ny);
    expect_close("dx", dx[0], r.dx, r.dx_abs, nx);
    expect_close("dw", dw[0], r.dw, r.dw_abs, nw);
    expect_close("db", db[0], r.db, r.db_abs, nb);
    assert_memory_equal(y[0], y[1], ny * 4);
    assert_memory_equal(dx[0], dx[1], nx * 4);
    assert_memory_equal(dw[0], dw[1], nw * 4);
    assert_memory_equal(db[0], db[1], nb * 4);

    /* The first layer of a network has no data gradient: dx = NULL still gives the same dw, db. */
    float *dw_only = be->alloc(be, nw * 4), *db_only = be->alloc(be, nb * 4);
    memcpy(dw_only, dw0, nw * 4), memcpy(db_only, db0, nb * 4);
    be->conv2d_backward(be, s, NULL, dw_only, db_only, dy, x, w, ws);
    assert_memory_equal(dw_only, dw[1], nw * 4);
    assert_memory_equal(db_only, db[1], nb * 4);

    set_threads(2);
    free_reference(&r);
    for (int t = 0; t < 2; t++) be->free(be, y[t]), be->free(be, dx[t]), be->free(be, dw[t]), be->free(be, db[t]);
    be->free(be, x), be->free(be, w), be->free(be, b), be->free(be, dy), be->free(be, dw0), be->free(be, db0), be->free(be, ws);
    be->free(be, dw_only), be->free(be, db_only);
}

/* The MNIST CNN's conv2 (32 -> 64 channels on 26×26: 24×24 outputs, exactly 6×6 tiles), with a batch
 * that leaves the last filter-gradient group of samples short. */
static void test_mnist_conv2(void **unused) {
    (void)unused;
    const hs_conv2d_shape s = {.n = 5, .c_in = 32, .h = 26, .w = 26, .c_out = 64, .kh = 3, .kw = 3, .oh = 24, .ow = 24};
    check_shape(&s);
}

/* Odd sizes: 11×8 outputs (edge tiles cut in both directions), 9 in / 11 out channels, 3 samples. */
static void test_odd_shape(void **unused) {
    (void)unused;
    const hs_conv2d_shape s = {.n = 3, .c_in = 9, .h = 13, .w = 10, .c_out = 11, .kh = 3, .kw = 3, .oh = 11, .ow = 8};
    check_shape(&s);
}

/* Smaller than one tile (3×5 outputs) and the fewest channels that take this path. */
static void test_smaller_than_a_tile(void **unused) {
    (void)unused;
    const hs_conv2d_shape s = {.n = 2, .c_in = 8, .h = 5, .w = 7, .c_out = 8, .kh = 3, .kw = 3, .oh = 3, .ow = 5};
    check_shape(&s);
}

/* More channels than one vector block of the transforms (70 in, 66 out), 7×6 outputs. */
static void test_many_channels(void **unused) {
    (void)unused;
    const hs_conv2d_shape s = {.n = 2, .c_in = 70, .h = 9, .w = 8, .c_out = 66, .kh = 3, .kw = 3, .oh = 7, .ow = 6};
    check_shape(&s);
}

int main(void) {
    be = hs_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mnist_conv2),
        cmocka_unit_test(test_odd_shape),
        cmocka_unit_test(test_smaller_than_a_tile),
        cmocka_unit_test(test_many_channels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
