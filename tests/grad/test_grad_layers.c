/* Gradient checks: every layer's backward against central finite differences of its forward, the way
 * a user would verify a new layer before training with it (Caffe's check_gradient).
 *
 * For a layer y = f(x, θ) we take a fixed random projection L = Σ r ⊙ y (accumulated in double), feed
 * dy = r to the backward pass, and compare each analytic ∂L/∂v with (L(v+ε) - L(v-ε)) / (2ε), where the
 * step actually taken in float32 is used instead of 2ε.
 *
 * Tolerance. The forward runs in float32: each y carries a rounding error of ~6e-8·|y|, so L carries
 * ~6e-8·Σ|r y| of noise and the difference quotient ~6e-8·Σ|r y| / ε. With ε = 1e-2 and Σ|r y| ≲ 1e2
 * that is ≲ 1e-3 absolute; the O(ε²) truncation error is zero for layers linear in the checked value
 * and ~1e-4 relative otherwise. We therefore accept |analytic - numeric| ≤ 1e-2·max(|a|,|n|) + atol with
 * atol = 2e-3 · (largest |analytic| of the tensor, at least 1e-1), while a wrong backward (a missing
 * transpose, a dropped term, a wrong mask) is off by O(1) relative. Kinks are avoided: ReLU inputs are
 * kept at |x| ≥ 0.1 > ε (Caffe), max-pool inputs are distinct values at least 0.05 apart. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "math/hs_math.h"
#include "models/cnn.h"
#include "nn/layers.h"
#include "nn/params.h"

#define TEST_SEED 20240611ULL

/* ---- helpers ------------------------------------------------------------------------------------- */

static const hs_backend *be;

static float *buf(size_t n) { return be->alloc(n * sizeof(float)); }

/* v[n] ~ U(lo, hi), reproducible from `stream` */
static void fill_uniform(float *v, size_t n, float lo, float hi, uint64_t stream) {
    const uint64_t key = hs_rng_key(TEST_SEED, 7, stream);
    for (size_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * hs_uniform(key, 0, i);
}

/* L = Σ r ⊙ y in double */
static double project(const float *y, const float *r, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)r[i] * (double)y[i];
    return s;
}

/* What the checker perturbs and how it recomputes the scalar loss. */
typedef struct grad_case {
    double (*loss)(void *state); /* forward, then the scalar */
    void *state;
    float eps;
    int skip_kinks; /* 1: skip coordinates whose [v-ε, v+ε] contains a kink (see check_gradient) */
} grad_case;

/* Compares analytic[count] with central differences of c->loss w.r.t. value[count]; checks every
 * `stride`-th coordinate (1 = all). Returns the number of mismatches (and prints them).
 * With skip_kinks, a coordinate whose one-sided differences (L(v+ε)-L(v))/ε and (L(v)-L(v-ε))/ε
 * disagree by more than the tolerance has a ReLU/max-pool kink inside [v-ε, v+ε] (on a smooth stretch
 * they differ by only ~ε·L''); the central difference means nothing there, so it is skipped. At most a
 * quarter of the coordinates may be skipped. */
static int check_gradient(const char *what, const grad_case *c, float *value, const float *analytic, size_t count,
                          size_t stride) {
    float grad_scale = 1e-1f;
    for (size_t i = 0; i < count; i++) grad_scale = fmaxf(grad_scale, fabsf(analytic[i]));
    const double atol = 2e-3 * grad_scale, rtol = 1e-2;
    int bad = 0, skipped = 0, checked = 0;
    double worst = 0.0;
    const double loss_at = c->skip_kinks ? c->loss(c->state) : 0.0;
    for (size_t i = 0; i < count; i += stride) {
        const float v = value[i];
        const float up = v + c->eps, down = v - c->eps;
        value[i] = up;
        const double loss_up = c->loss(c->state);
        value[i] = down;
        const double loss_down = c->loss(c->state);
        value[i] = v;
        const double numeric = (loss_up - loss_down) / ((double)up - (double)down);
        const double a = analytic[i], err = fabs(a - numeric);
        const double allowed = rtol * fmax(fabs(a), fabs(numeric)) + atol;
        checked++;
        if (c->skip_kinks) {
            const double right = (loss_up - loss_at) / ((double)up - (double)v);
            const double left = (loss_at - loss_down) / ((double)v - (double)down);
            if (fabs(right - left) > allowed) {
                skipped++;
                continue;
            }
        }
        if (err / allowed > worst) worst = err / allowed;
        if (err > allowed) {
            if (bad < 5) fprintf(stderr, "  %s[%zu]: analytic %.6g numeric %.6g\n", what, i, a, numeric);
            bad++;
        }
    }
    fprintf(stderr, "  %-30s %6d values checked, %d skipped at kinks, worst error/allowed %.3f%s\n", what,
            checked, skipped, worst, bad ? "  FAILED" : "");
    if (skipped * 4 > checked) {
        fprintf(stderr, "  %s: too many kinks (%d of %d)\n", what, skipped, checked);
        bad++;
    }
    return bad;
}

/* ---- linear ---------------------------------------------------------------------------------------- */

typedef struct linear_state {
    int batch, in, out;
    float *x, *w, *b, *y, *r;
} linear_state;

static double linear_loss(void *p) {
    linear_state *s = p;
    hs_linear_forward(be, s->y, s->x, s->w, s->b, s->batch, s->in, s->out);
    return project(s->y, s->r, (size_t)s->batch * s->out);
}

static void test_linear(void **unused) {
    (void)unused;
    linear_state s = {.batch = 5, .in = 13, .out = 7};
    const size_t nx = (size_t)s.batch * s.in, nw = (size_t)s.out * s.in, ny = (size_t)s.batch * s.out;
    s.x = buf(nx), s.w = buf(nw), s.b = buf(s.out), s.y = buf(ny), s.r = buf(ny);
    float *dx = buf(nx), *dw = buf(nw), *db = buf(s.out);
    fill_uniform(s.x, nx, -1, 1, 1);
    fill_uniform(s.w, nw, -1, 1, 2);
    fill_uniform(s.b, s.out, -1, 1, 3);
    fill_uniform(s.r, ny, -1, 1, 4);
    hs_linear_forward(be, s.y, s.x, s.w, s.b, s.batch, s.in, s.out);
    hs_linear_backward(be, dx, dw, db, s.r, s.x, s.w, s.batch, s.in, s.out);
    grad_case c = {linear_loss, &s, 1e-2f};
    int bad = check_gradient("linear dx", &c, s.x, dx, nx, 1);
    bad += check_gradient("linear dW", &c, s.w, dw, nw, 1);
    bad += check_gradient("linear db", &c, s.b, db, s.out, 1);
    assert_int_equal(bad, 0);

    /* Parameter gradients accumulate over micro-batches: a second backward doubles them. */
    float *dw1 = buf(nw);
    memcpy(dw1, dw, nw * sizeof *dw);
    hs_linear_backward(be, dx, dw, db, s.r, s.x, s.w, s.batch, s.in, s.out);
    for (size_t i = 0; i < nw; i++) assert_float_equal(dw[i], 2.0f * dw1[i], 1e-5f * (1.0f + fabsf(dw1[i])));
    float *bufs[] = {s.x, s.w, s.b, s.y, s.r, dx, dw, db, dw1};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->free(bufs[i]);
}

/* ---- conv2d ------------------------------------------------------------------------------------------ */

typedef struct conv_state {
    hs_conv2d_shape s;
    float *x, *w, *b, *y, *r;
    hs_workspace ws;
} conv_state;

static double conv_loss(void *p) {
    conv_state *c = p;
    hs_conv2d_forward(be, &c->s, c->y, c->x, c->w, c->b, &c->ws);
    return project(c->y, c->r, (size_t)c->s.n * c->s.c_out * c->s.oh * c->s.ow);
}

/* batch 5: not a multiple of the backend's sample grouping; non-square kernel and image */
static void test_conv2d(void **unused) {
    (void)unused;
    conv_state c = {.s = {.n = 5, .c_in = 3, .h = 7, .w = 8, .c_out = 4, .kh = 3, .kw = 2}};
    c.s.oh = c.s.h - c.s.kh + 1;
    c.s.ow = c.s.w - c.s.kw + 1;
    const size_t nx = (size_t)c.s.n * c.s.c_in * c.s.h * c.s.w, nw = (size_t)c.s.c_out * c.s.c_in * c.s.kh * c.s.kw;
    const size_t ny = (size_t)c.s.n * c.s.c_out * c.s.oh * c.s.ow;
    c.x = buf(nx), c.w = buf(nw), c.b = buf(c.s.c_out), c.y = buf(ny), c.r = buf(ny);
    float *dx = buf(nx), *dw = buf(nw), *db = buf(c.s.c_out);
    fill_uniform(c.x, nx, -1, 1, 11);
    fill_uniform(c.w, nw, -1, 1, 12);
    fill_uniform(c.b, c.s.c_out, -1, 1, 13);
    fill_uniform(c.r, ny, -1, 1, 14);
    conv_loss(&c);
    hs_conv2d_backward(be, &c.s, dx, dw, db, c.r, c.x, c.w, &c.ws);
    grad_case gc = {conv_loss, &c, 1e-2f};
    int bad = check_gradient("conv2d dx", &gc, c.x, dx, nx, 1);
    bad += check_gradient("conv2d dW", &gc, c.w, dw, nw, 1);
    bad += check_gradient("conv2d db", &gc, c.b, db, c.s.c_out, 1);
    assert_int_equal(bad, 0);
    hs_workspace_release(be, &c.ws);
    float *bufs[] = {c.x, c.w, c.b, c.y, c.r, dx, dw, db};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->free(bufs[i]);
}

/* ---- max pooling -------------------------------------------------------------------------------------- */

typedef struct pool_state {
    int n, c, h, w, k;
    float *x, *y, *r;
    int32_t *argmax;
} pool_state;

static double pool_loss(void *p) {
    pool_state *s = p;
    hs_maxpool2d_forward(be, s->y, s->argmax, s->x, s->n, s->c, s->h, s->w, s->k);
    return project(s->y, s->r, (size_t)s->n * s->c * (s->h / s->k) * (s->w / s->k));
}

static void test_maxpool(void **unused) {
    (void)unused;
    pool_state s = {.n = 2, .c = 3, .h = 6, .w = 8, .k = 2};
    const size_t nx = (size_t)s.n * s.c * s.h * s.w, ny = nx / 4;
    s.x = buf(nx), s.y = buf(ny), s.r = buf(ny);
    s.argmax = be->alloc(ny * sizeof(int32_t));
    float *dx = buf(nx);
    /* distinct values 0.05 apart in a scrambled order: no window has a near-tie within ε */
    for (size_t i = 0; i < nx; i++) s.x[i] = 0.05f * (float)((i * 37) % nx) - 1.0f;
    fill_uniform(s.r, ny, -1, 1, 21);
    pool_loss(&s);
    hs_maxpool2d_backward(be, dx, s.r, s.argmax, s.n, s.c, s.h, s.w, s.k);
    grad_case gc = {pool_loss, &s, 1e-2f};
    assert_int_equal(check_gradient("maxpool dx", &gc, s.x, dx, nx, 1), 0);
    be->free(s.x), be->free(s.y), be->free(s.r), be->free(s.argmax), be->free(dx);
}

/* ---- ReLU -------------------------------------------------------------------------------------------- */

typedef struct relu_state {
    size_t n;
    float *x, *y, *r;
} relu_state;

static double relu_loss(void *p) {
    relu_state *s = p;
    hs_relu_forward(be, s->y, s->x, s->n);
    return project(s->y, s->r, s->n);
}

static void test_relu(void **unused) {
    (void)unused;
    relu_state s = {.n = 200};
    s.x = buf(s.n), s.y = buf(s.n), s.r = buf(s.n);
    float *dx = buf(s.n);
    fill_uniform(s.x, s.n, 0.1f, 1.0f, 31);
    for (size_t i = 0; i < s.n; i += 2) s.x[i] = -s.x[i]; /* half negative, all |x| >= 0.1 */
    fill_uniform(s.r, s.n, -1, 1, 32);
    relu_loss(&s);
    hs_relu_backward(be, dx, s.r, s.y, s.n);
    grad_case gc = {relu_loss, &s, 1e-2f};
    assert_int_equal(check_gradient("relu dx", &gc, s.x, dx, s.n, 1), 0);
    be->free(s.x), be->free(s.y), be->free(s.r), be->free(dx);
}

/* ---- dropout ---------------------------------------------------------------------------------------- */

typedef struct dropout_state {
    hs_dropout_mask m;
    int batch;
    size_t per_sample;
    float *x, *y, *r;
} dropout_state;

static double dropout_loss(void *p) {
    dropout_state *s = p;
    hs_dropout_forward(be, &s->m, s->y, s->x, s->batch, s->per_sample);
    return project(s->y, s->r, (size_t)s->batch * s->per_sample);
}

static void check_dropout(size_t group) {
    dropout_state s = {.m = {.p = 0.4f, .group = group, .key = hs_rng_key(TEST_SEED, 3, 1), .first_sample = 17},
                       .batch = 4,
                       .per_sample = 48};
    const size_t n = (size_t)s.batch * s.per_sample;
    s.x = buf(n), s.y = buf(n), s.r = buf(n);
    float *dx = buf(n);
    fill_uniform(s.x, n, 0.5f, 1.5f, 41); /* non-zero, so a dropped value is visible as 0 */
    fill_uniform(s.r, n, -1, 1, 42);
    dropout_loss(&s);
    hs_dropout_backward(be, &s.m, dx, s.r, s.batch, s.per_sample);
    grad_case gc = {dropout_loss, &s, 1e-2f};
    assert_int_equal(check_gradient(group == 1 ? "dropout dx" : "dropout2d dx", &gc, s.x, dx, n, 1), 0);
    dropout_loss(&s); /* y of the unperturbed x again */

    /* The mask is the documented one: keep iff hs_uniform(key, first_sample+i, group j) >= p, kept
     * values scaled by 1/(1-p); whole groups are kept or dropped together. */
    size_t dropped = 0;
    for (int i = 0; i < s.batch; i++)
        for (size_t e = 0; e < s.per_sample; e++) {
            const size_t at = (size_t)i * s.per_sample + e;
            const int keep = hs_uniform(s.m.key, (uint64_t)(s.m.first_sample + i), e / group) >= s.m.p;
            assert_float_equal(s.y[at], keep ? s.x[at] / (1.0f - s.m.p) : 0.0f, 1e-6f);
            dropped += !keep;
        }
    assert_true(dropped > 0 && dropped < n); /* the mask is neither all-keep nor all-drop */
    be->free(s.x), be->free(s.y), be->free(s.r), be->free(dx);
}

static void test_dropout_elementwise(void **unused) {
    (void)unused;
    check_dropout(1);
}

static void test_dropout_channelwise(void **unused) {
    (void)unused;
    check_dropout(12); /* Dropout2d: 4 channels of 12 values per sample */
}

/* ---- log_softmax + NLL ---------------------------------------------------------------------------------- */

typedef struct nll_state {
    int rows, cols;
    float *logits, *logprobs;
    int32_t *labels;
} nll_state;

static double nll_loss(void *p) {
    nll_state *s = p;
    double stats[2] = {0, 0};
    hs_log_softmax_nll_forward(be, s->logprobs, s->logits, s->labels, s->rows, s->cols, stats);
    return stats[0];
}

static void test_log_softmax_nll(void **unused) {
    (void)unused;
    nll_state s = {.rows = 6, .cols = 10};
    const size_t n = (size_t)s.rows * s.cols;
    s.logits = buf(n), s.logprobs = buf(n);
    s.labels = be->alloc((size_t)s.rows * sizeof(int32_t));
    float *dlogits = buf(n);
    fill_uniform(s.logits, n, -3, 3, 51);
    s.logits[7] += 50.0f; /* a large logit: the max-subtraction keeps exp() finite */
    for (int r = 0; r < s.rows; r++) s.labels[r] = (r * 7) % s.cols;
    nll_loss(&s);
    hs_log_softmax_nll_backward(be, dlogits, s.logprobs, s.labels, s.rows, s.cols, 1.0f);
    grad_case gc = {nll_loss, &s, 1e-2f};
    assert_int_equal(check_gradient("log_softmax+nll", &gc, s.logits, dlogits, n, 1), 0);
    be->free(s.logits), be->free(s.logprobs), be->free(s.labels), be->free(dlogits);
}

/* ---- the whole MNIST CNN ---------------------------------------------------------------------------------- */

enum { CNN_BATCH = 3 };
#ifndef CNN_EPS
#define CNN_EPS 1e-3f
#endif

typedef struct cnn_state {
    hs_params params;
    hs_cnn *model;
    float *x;
    int32_t *labels;
    hs_step_ctx ctx;
} cnn_state;

/* Training-mode forward (with the fixed dropout masks of ctx) returning the NLL sum. The backward it
 * also runs only adds into params.grad, which the checker does not read any more. */
static double cnn_loss(void *p) {
    cnn_state *s = p;
    hs_stats st = {0};
    hs_cnn_forward_backward(s->model, s->x, s->labels, CNN_BATCH, 40, &s->ctx, &st);
    return st.loss_sum;
}

static void check_cnn(int dropout_on) {
    cnn_state s = {.ctx = {.seed = TEST_SEED, .update = 5, .training = dropout_on}};
    s.model = hs_cnn_create(&s.params, CNN_BATCH, 0.25f, 0.5f);
    hs_params_allocate(&s.params, be);
    hs_cnn_setup(s.model);
    hs_cnn_init_params(s.model, TEST_SEED);
    s.x = buf((size_t)CNN_BATCH * 28 * 28);
    s.labels = be->alloc(CNN_BATCH * sizeof(int32_t));
    fill_uniform(s.x, (size_t)CNN_BATCH * 28 * 28, -0.5f, 2.5f, 61); /* like normalised pixels */
    for (int i = 0; i < CNN_BATCH; i++) s.labels[i] = 3 * i + 1;

    hs_stats st = {0};
    hs_params_zero_grad(&s.params);
    hs_cnn_forward_backward(s.model, s.x, s.labels, CNN_BATCH, 40, &s.ctx, &st);
    assert_true(st.sample_count == CNN_BATCH);
    float *analytic = malloc(s.params.total * sizeof(float));
    assert_non_null(analytic);
    memcpy(analytic, s.params.grad, s.params.total * sizeof(float));

    /* ε = 1e-3 here: a parameter moves many units at once, and a smaller step makes crossing a ReLU or
     * max-pool kink unlikely; the loss noise (NLL sum of 3 samples, ~1e-6) over 2ε stays ≪ atol. */
    grad_case gc = {cnn_loss, &s, CNN_EPS, 1};
    int bad = 0;
    for (int t = 0; t < s.params.count; t++) {
        const hs_tensor_info *ti = &s.params.tensors[t];
        const size_t stride = ti->numel > 40 ? ti->numel / 40 + 1 : 1; /* ~40 coordinates per tensor */
        char what[HS_NAME_MAX + 32];
        snprintf(what, sizeof what, "cnn %s%s", ti->name, dropout_on ? " (dropout)" : "");
        bad += check_gradient(what, &gc, hs_param_data(&s.params, t), analytic + ti->offset, ti->numel, stride);
    }
    assert_int_equal(bad, 0);
    free(analytic);
    be->free(s.x), be->free(s.labels);
    hs_cnn_free(s.model);
    hs_params_free(&s.params);
}

static void test_cnn_dropout_off(void **unused) {
    (void)unused;
    check_cnn(0);
}

static void test_cnn_dropout_on(void **unused) {
    (void)unused;
    check_cnn(1);
}

int main(void) {
    be = hs_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_maxpool),
        cmocka_unit_test(test_relu),
        cmocka_unit_test(test_dropout_elementwise),
        cmocka_unit_test(test_dropout_channelwise),
        cmocka_unit_test(test_log_softmax_nll),
        cmocka_unit_test(test_cnn_dropout_off),
        cmocka_unit_test(test_cnn_dropout_on),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
