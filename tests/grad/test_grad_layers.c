/* Gradient checks: every layer's backward against central finite differences of its forward, the way
 * a user would verify a new layer before training with it (Caffe's check_gradient).
 *
 * For a layer y = f(x, θ) we take a fixed random projection L = Σ r ⊙ y (accumulated in double), feed
 * dy = r to the backward pass, and compare each analytic ∂L/∂v with (L(v+ε) - L(v-ε)) / (2ε), where the
 * step actually taken in float32 is used instead of 2ε.
 *
 * Tolerance. The forward runs in float32: each y carries a rounding error of ~6e-8·|y|, so L carries
 * ~6e-8·Σ|r y| of noise and the difference quotient ~6e-8·Σ|r y| / (2ε). With ε = 1e-2 and Σ|r y| ≲ 10
 * in these small cases that is ≲ 3e-5 absolute; the O(ε²) truncation error is zero for layers linear in
 * the checked value (linear, conv, dropout, max-pool and ReLU away from kinks) and ~1e-5 relative for
 * log-softmax. We accept |analytic - numeric| ≤ 2e-3·max(|a|,|n|) + 2e-4·max(1, largest |analytic| of
 * the tensor): about 10x the noise, while a wrong backward (a missing transpose, a dropped term, a wrong
 * mask, a 1% scale error) fails. Kinks are avoided: ReLU inputs are kept at |x| ≥ 0.1 > ε (as Caffe
 * does), max-pool inputs are distinct values at least 0.05 apart. */
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
#include "math/dropout.h"
#include "math/hs_math.h"
#include "models/cnn.h"
#include "nn/layers.h"
#include "nn/params.h"

#include "fd_check.h"

#define TEST_SEED 20240611ULL

/* ---- helpers ------------------------------------------------------------------------------------- */

static const hs_backend *be;

static float *buf(size_t n) { return be->alloc(be, n * sizeof(float)); }

/* v[n] ~ U(lo, hi), reproducible from `stream` */
static void fill_uniform(float *v, size_t n, float lo, float hi, uint64_t stream) {
    fd_fill_uniform(v, n, lo, hi, hs_rng_key(TEST_SEED, 7, stream));
}

/* ---- linear ---------------------------------------------------------------------------------------- */

typedef struct linear_state {
    int batch, in, out;
    float *x, *w, *b, *y, *r;
} linear_state;

static double linear_loss(void *p) {
    linear_state *s = p;
    hs_linear_forward(be, s->y, s->x, s->w, s->b, s->batch, s->in, s->out);
    return fd_project(s->y, s->r, (size_t)s->batch * s->out);
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
    hs_linear_backward(be, dx, dw, db, s.r, s.x, s.w, s.batch, s.in, s.out, 1); /* db is zero-filled */
    fd_case c = {linear_loss, &s, 1e-2f};
    int bad = fd_check_gradient("linear dx", &c, s.x, dx, nx);
    bad += fd_check_gradient("linear dW", &c, s.w, dw, nw);
    bad += fd_check_gradient("linear db", &c, s.b, db, s.out);
    assert_int_equal(bad, 0);

    /* Parameter gradients accumulate over micro-batches: a second backward doubles them. */
    float *dw1 = buf(nw), *db1 = buf(s.out);
    memcpy(dw1, dw, nw * sizeof *dw);
    memcpy(db1, db, s.out * sizeof *db);
    hs_linear_backward(be, dx, dw, db, s.r, s.x, s.w, s.batch, s.in, s.out, 0);
    for (size_t i = 0; i < nw; i++) assert_float_equal(dw[i], 2.0f * dw1[i], 1e-5f * (1.0f + fabsf(dw1[i])));
    for (int i = 0; i < s.out; i++) assert_float_equal(db[i], 2.0f * db1[i], 1e-5f * (1.0f + fabsf(db1[i])));
    /* overwrite = 1 writes both gradients whatever they held (an update's first writer): over NaN, a
     * third pass gives the single pass's bits. */
    for (size_t i = 0; i < nw; i++) dw[i] = NAN;
    for (int i = 0; i < s.out; i++) db[i] = NAN;
    hs_linear_backward(be, dx, dw, db, s.r, s.x, s.w, s.batch, s.in, s.out, 1);
    for (size_t i = 0; i < nw; i++) assert_true(dw[i] == dw1[i]);
    for (int i = 0; i < s.out; i++) assert_true(db[i] == db1[i]);
    float *bufs[] = {s.x, s.w, s.b, s.y, s.r, dx, dw, db, dw1, db1};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->free(be, bufs[i]);
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
    return fd_project(c->y, c->r, (size_t)c->s.n * c->s.c_out * c->s.oh * c->s.ow);
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
    fd_case gc = {conv_loss, &c, 1e-2f};
    int bad = fd_check_gradient("conv2d dx", &gc, c.x, dx, nx);
    bad += fd_check_gradient("conv2d dW", &gc, c.w, dw, nw);
    bad += fd_check_gradient("conv2d db", &gc, c.b, db, c.s.c_out);
    assert_int_equal(bad, 0);
    hs_workspace_release(be, &c.ws);
    float *bufs[] = {c.x, c.w, c.b, c.y, c.r, dx, dw, db};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->free(be, bufs[i]);
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
    return fd_project(s->y, s->r, (size_t)s->n * s->c * (s->h / s->k) * (s->w / s->k));
}

static void test_maxpool(void **unused) {
    (void)unused;
    pool_state s = {.n = 2, .c = 3, .h = 6, .w = 8, .k = 2};
    const size_t nx = (size_t)s.n * s.c * s.h * s.w, ny = nx / 4;
    s.x = buf(nx), s.y = buf(ny), s.r = buf(ny);
    s.argmax = be->alloc(be, ny * sizeof(int32_t));
    float *dx = buf(nx);
    /* distinct values 0.05 apart in a scrambled order: no window has a near-tie within ε */
    for (size_t i = 0; i < nx; i++) s.x[i] = 0.05f * (float)((i * 37) % nx) - 1.0f;
    fill_uniform(s.r, ny, -1, 1, 21);
    pool_loss(&s);
    hs_maxpool2d_backward(be, dx, s.r, s.argmax, s.n, s.c, s.h, s.w, s.k);
    fd_case gc = {pool_loss, &s, 1e-2f};
    assert_int_equal(fd_check_gradient("maxpool dx", &gc, s.x, dx, nx), 0);
    be->free(be, s.x), be->free(be, s.y), be->free(be, s.r), be->free(be, s.argmax), be->free(be, dx);
}

/* ---- ReLU -------------------------------------------------------------------------------------------- */

typedef struct relu_state {
    size_t n;
    float *x, *y, *r;
} relu_state;

static double relu_loss(void *p) {
    relu_state *s = p;
    hs_relu_forward(be, s->y, s->x, s->n);
    return fd_project(s->y, s->r, s->n);
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
    fd_case gc = {relu_loss, &s, 1e-2f};
    assert_int_equal(fd_check_gradient("relu dx", &gc, s.x, dx, s.n), 0);
    be->free(be, s.x), be->free(be, s.y), be->free(be, s.r), be->free(be, dx);
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
    return fd_project(s->y, s->r, (size_t)s->batch * s->per_sample);
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
    fd_case gc = {dropout_loss, &s, 1e-2f};
    assert_int_equal(fd_check_gradient(group == 1 ? "dropout dx" : "dropout2d dx", &gc, s.x, dx, n), 0);
    dropout_loss(&s); /* y of the unperturbed x again */

    /* The mask is the documented one: keep iff hs_dropout_uniform(sample key of first_sample+i, group j) >= p,
     * kept values scaled by 1/(1-p); whole groups are kept or dropped together. */
    size_t dropped = 0;
    for (int i = 0; i < s.batch; i++)
        for (size_t e = 0; e < s.per_sample; e++) {
            const size_t at = (size_t)i * s.per_sample + e;
            const int keep =
                hs_dropout_uniform(hs_dropout_sample_key(s.m.key, (uint64_t)(s.m.first_sample + i)), e / group) >= s.m.p;
            assert_float_equal(s.y[at], keep ? s.x[at] / (1.0f - s.m.p) : 0.0f, 1e-6f);
            dropped += !keep;
        }
    assert_true(dropped > 0 && dropped < n); /* the mask is neither all-keep nor all-drop */
    be->free(be, s.x), be->free(be, s.y), be->free(be, s.r), be->free(be, dx);
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
    double stats[3] = {0, 0, 0}; /* NLL sum, rows, correct */
    hs_log_softmax_nll_forward(be, s->logprobs, s->logits, s->labels, s->rows, s->cols, stats);
    return stats[0];
}

static void test_log_softmax_nll(void **unused) {
    (void)unused;
    nll_state s = {.rows = 6, .cols = 10};
    const size_t n = (size_t)s.rows * s.cols;
    s.logits = buf(n), s.logprobs = buf(n);
    s.labels = be->alloc(be, (size_t)s.rows * sizeof(int32_t));
    float *dlogits = buf(n);
    fill_uniform(s.logits, n, -3, 3, 51);
    s.logits[7] += 50.0f; /* a large logit: the max-subtraction keeps exp() finite */
    for (int r = 0; r < s.rows; r++) s.labels[r] = (r * 7) % s.cols;
    nll_loss(&s);
    hs_log_softmax_nll_backward(be, dlogits, s.logprobs, s.labels, s.rows, s.cols, 1.0f);
    fd_case gc = {nll_loss, &s, 1e-2f};
    assert_int_equal(fd_check_gradient("log_softmax+nll", &gc, s.logits, dlogits, n), 0);
    be->free(be, s.logits), be->free(be, s.logprobs), be->free(be, s.labels), be->free(be, dlogits);
}

/* ---- the whole MNIST CNN ---------------------------------------------------------------------------------- */
/* Finite differences straight on the float32 model do not work for the whole network: one conv weight
 * moves ~40k ReLU inputs and ~10k max-pool windows at once, so any ε large enough to rise above float32
 * noise (ε ≳ 1e-3) crosses dozens of kinks and the difference quotient is off by several percent. So
 * the differences are taken on a float64 twin of MNISTNet written out here with plain loops (direct
 * convolution, the documented dropout masks and keys), where ε = 1e-6 crosses essentially no kink and the
 * quotient is exact to ~1e-9. The twin's loss must equal hs_cnn's (1e-5 relative), and hs_cnn's float32
 * gradient must match the twin's differences to 1e-3 relative + 1e-4 of the tensor's largest gradient
 * (float32 accumulation over up to 1152 terms per value stays near 1e-5). */

enum { CNN_BATCH = 2, CNN_FIRST_SAMPLE = 40 };

/* float64 twin: params in the hs_params layout (same offsets), x[B,1,28,28]; returns Σ NLL */
typedef struct twin {
    const hs_params *layout;
    double *theta; /* [layout->total] */
    const float *x;
    const int32_t *labels;
    hs_step_ctx ctx;
    float p_conv, p_fc;
} twin;

static const double *twin_param(const twin *t, const char *name) {
    return t->theta + t->layout->tensors[hs_params_find(t->layout, name)].offset;
}

static double twin_loss(void *state) {
    const twin *t = state;
    const double *w1 = twin_param(t, "conv1.weight"), *b1 = twin_param(t, "conv1.bias");
    const double *w2 = twin_param(t, "conv2.weight"), *b2 = twin_param(t, "conv2.bias");
    const double *w3 = twin_param(t, "fc1.weight"), *b3 = twin_param(t, "fc1.bias");
    const double *w4 = twin_param(t, "fc2.weight"), *b4 = twin_param(t, "fc2.bias");
    static double h1[32][26][26], h2[64][24][24], flat[9216], hid[128], logit[10];
    const int on = t->ctx.training;
    const uint64_t key_conv = hs_rng_key(t->ctx.seed, t->ctx.update, 1), key_fc = hs_rng_key(t->ctx.seed, t->ctx.update, 2);
    double loss = 0.0;
    for (int b = 0; b < CNN_BATCH; b++) {
        const float *xb = t->x + (size_t)b * 784;
        const uint64_t sample = (uint64_t)(CNN_FIRST_SAMPLE + b);
        for (int co = 0; co < 32; co++)
            for (int y = 0; y < 26; y++)
                for (int x = 0; x < 26; x++) {
                    double s = b1[co];
                    for (int i = 0; i < 3; i++)
                        for (int j = 0; j < 3; j++) s += w1[co * 9 + i * 3 + j] * xb[(y + i) * 28 + x + j];
                    h1[co][y][x] = s > 0 ? s : 0;
                }
        for (int co = 0; co < 64; co++)
            for (int y = 0; y < 24; y++)
                for (int x = 0; x < 24; x++) {
                    double s = b2[co];
                    for (int c = 0; c < 32; c++)
                        for (int i = 0; i < 3; i++)
                            for (int j = 0; j < 3; j++) s += w2[((co * 32 + c) * 3 + i) * 3 + j] * h1[c][y + i][x + j];
                    h2[co][y][x] = s > 0 ? s : 0;
                }
        for (int c = 0; c < 64; c++) {
            const double keep = !on ? 1.0
                                : hs_dropout_uniform(hs_dropout_sample_key(key_conv, sample), (uint64_t)c) >= t->p_conv
                                    ? 1.0 / (1.0 - t->p_conv)
                                    : 0.0;
            for (int y = 0; y < 12; y++)
                for (int x = 0; x < 12; x++) {
                    double m = h2[c][2 * y][2 * x];
                    for (int i = 0; i < 2; i++)
                        for (int j = 0; j < 2; j++) m = fmax(m, h2[c][2 * y + i][2 * x + j]);
                    flat[(c * 12 + y) * 12 + x] = m * keep;
                }
        }
        for (int o = 0; o < 128; o++) {
            double s = b3[o];
            for (int k = 0; k < 9216; k++) s += w3[(size_t)o * 9216 + k] * flat[k];
            const double keep = !on ? 1.0
                                : hs_dropout_uniform(hs_dropout_sample_key(key_fc, sample), (uint64_t)o) >= t->p_fc
                                    ? 1.0 / (1.0 - t->p_fc)
                                    : 0.0;
            hid[o] = (s > 0 ? s : 0) * keep;
        }
        double mx = -INFINITY, sum = 0.0;
        for (int o = 0; o < 10; o++) {
            double s = b4[o];
            for (int k = 0; k < 128; k++) s += w4[o * 128 + k] * hid[k];
            logit[o] = s;
            mx = fmax(mx, s);
        }
        for (int o = 0; o < 10; o++) sum += exp(logit[o] - mx);
        loss += mx + log(sum) - logit[t->labels[b]];
    }
    return loss;
}

static void check_cnn(int dropout_on) {
    hs_params params = {0};
    hs_cnn *model = hs_cnn_create(&params, CNN_BATCH, 0.25f, 0.5f);
    hs_params_allocate(&params, be);
    hs_cnn_setup(model);
    hs_cnn_init_params(model, TEST_SEED);
    float *x = buf((size_t)CNN_BATCH * 784);
    int32_t *labels = be->alloc(be, CNN_BATCH * sizeof(int32_t));
    fill_uniform(x, (size_t)CNN_BATCH * 784, -0.8f, 2.8f, 61); /* the range of normalised pixels */
    for (int i = 0; i < CNN_BATCH; i++) labels[i] = 3 * i + 1;
    const hs_step_ctx ctx = {.seed = TEST_SEED, .update = 5, .training = dropout_on, .loss_scale = {1.0, 0.0}};

    double *st_dev = be->alloc(be, HS_STATS_NDOUBLE * sizeof(double)); /* device stats, zero-filled */
    hs_params_zero_grad(&params);
    hs_cnn_forward_backward(model, x, labels, CNN_BATCH, CNN_FIRST_SAMPLE, &ctx, st_dev);
    hs_stats st;
    be->download(be, &st, st_dev, sizeof st);
    be->free(be, st_dev);
    assert_true(st.sample_count == CNN_BATCH);

    twin t = {.layout = &params, .x = x, .labels = labels, .ctx = ctx, .p_conv = 0.25f, .p_fc = 0.5f};
    t.theta = malloc(params.total * sizeof *t.theta);
    assert_non_null(t.theta);
    for (size_t i = 0; i < params.total; i++) t.theta[i] = params.data[i];
    const double twin_at = twin_loss(&t);
    fprintf(stderr, "  cnn%s: loss %.9g, float64 twin %.9g\n", dropout_on ? " (dropout)" : "", st.loss_sum, twin_at);
    assert_true(fabs(st.loss_sum - twin_at) <= 1e-5 * fabs(twin_at));

    const double eps = 1e-6;
    int bad = 0;
    for (int ti = 0; ti < params.count; ti++) {
        const hs_tensor_info *info = &params.tensors[ti];
        const float *g = hs_param_grad(&params, ti);
        double scale = 0.0, worst = 0.0;
        for (size_t i = 0; i < info->numel; i++) scale = fmax(scale, fabs(g[i]));
        const size_t stride = info->numel > 12 ? info->numel / 12 + 1 : 1; /* ~12 coordinates per tensor */
        int checked = 0;
        for (size_t i = 0; i < info->numel; i += stride, checked++) {
            double *v = t.theta + info->offset + i;
            const double v0 = *v;
            *v = v0 + eps;
            const double up = twin_loss(&t);
            *v = v0 - eps;
            const double down = twin_loss(&t);
            *v = v0;
            const double numeric = (up - down) / (2 * eps), err = fabs(numeric - g[i]);
            const double allowed = 1e-3 * fabs(numeric) + 1e-4 * scale;
            worst = fmax(worst, err / allowed);
            if (err > allowed) {
                fprintf(stderr, "  %s[%zu]: analytic %.7g numeric %.7g\n", info->name, i, (double)g[i], numeric);
                bad++;
            }
        }
        fprintf(stderr, "  cnn %-14s%s %3d values checked, worst error/allowed %.3f\n", info->name,
                dropout_on ? " (dropout)" : "", checked, worst);
    }
    assert_int_equal(bad, 0);
    free(t.theta);
    be->free(be, x), be->free(be, labels);
    hs_cnn_free(model);
    hs_params_free(&params);
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
