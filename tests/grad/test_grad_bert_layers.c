/* Gradient checks of BERT's layers: every backward pass against central finite differences of its
 * forward pass, the way a user would verify a layer before training BERT with it.
 *
 * As in test_grad_layers.c (the shared checker is in fd_check.h): a fixed random projection
 * L = Σ r ⊙ y (accumulated in double) gives dy = r; each analytic ∂L/∂v is compared with
 * (L(v+ε) - L(v-ε)) / (step actually taken in float32).
 * Accepted: |analytic - numeric| ≤ 2e-3·max(|a|,|n|) + 2e-4·max(1, largest |analytic| of the tensor).
 * The float32 forward adds ~1e-7 relative noise per output, i.e. ≲ 1e-5 on the quotients at ε = 1e-2;
 * the O(ε²) truncation error of the non-linear layers (LayerNorm, GELU, tanh, softmax) is ≲ 1e-4
 * relative for the O(1) inputs used here. A wrong backward (missing term, transposed product, wrong
 * head offset, wrong mask, a 1% scale error) fails by orders of magnitude more.
 * Softmax cross-entropy and attention use smaller inputs so no probability saturates. */
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
#include "nn/layers.h"

#include "fd_check.h"

#define TEST_SEED 20240917ULL
#define TEST_LN_EPS 1e-12f /* BERT's LayerNorm epsilon */

/* ---- helpers --------------------------------------------------------------------------------------- */

static const hs_backend *be;

static float *buf(size_t n) { return be->alloc(be, n * sizeof(float)); }

/* v[n] ~ U(lo, hi), reproducible from `stream` */
static void fill_uniform(float *v, size_t n, float lo, float hi, uint64_t stream) {
    fd_fill_uniform(v, n, lo, hi, hs_rng_key(TEST_SEED, 11, stream));
}

/* ---- embeddings: word + position + token type, summed in place ----------------------------------------- */

enum { EMB_B = 3, EMB_L = 4, EMB_H = 6, EMB_V = 7, EMB_TYPES = 2, EMB_POS = 5 };

typedef struct embedding_state {
    float *word, *pos, *type, *y, *r;
    int32_t *ids, *segments;
} embedding_state;

static double embedding_loss(void *p) {
    embedding_state *s = p;
    const int T = EMB_B * EMB_L;
    hs_embedding_forward(be, s->y, s->word, s->ids, T, EMB_H, EMB_V, 0);
    hs_position_embedding_forward(be, s->y, s->pos, EMB_B, EMB_L, EMB_H);
    hs_embedding_forward(be, s->y, s->type, s->segments, T, EMB_H, EMB_TYPES, 1);
    return fd_project(s->y, s->r, (size_t)T * EMB_H);
}

static void test_embeddings(void **unused) {
    (void)unused;
    const int T = EMB_B * EMB_L;
    embedding_state s;
    s.word = buf((size_t)EMB_V * EMB_H), s.pos = buf((size_t)EMB_POS * EMB_H), s.type = buf((size_t)EMB_TYPES * EMB_H);
    s.y = buf((size_t)T * EMB_H), s.r = buf((size_t)T * EMB_H);
    s.ids = be->alloc(be, (size_t)T * sizeof(int32_t)), s.segments = be->alloc(be, (size_t)T * sizeof(int32_t));
    /* repeated ids (a word used several times gets the sum), id 6 never used (gradient stays 0) */
    const int32_t ids[EMB_B * EMB_L] = {1, 3, 3, 0, 5, 1, 2, 3, 4, 0, 0, 1};
    for (int t = 0; t < T; t++) s.ids[t] = ids[t], s.segments[t] = (t % EMB_L) >= 2;
    fill_uniform(s.word, (size_t)EMB_V * EMB_H, -1, 1, 1);
    fill_uniform(s.pos, (size_t)EMB_POS * EMB_H, -1, 1, 2);
    fill_uniform(s.type, (size_t)EMB_TYPES * EMB_H, -1, 1, 3);
    fill_uniform(s.r, (size_t)T * EMB_H, -1, 1, 4);
    float *dword = buf((size_t)EMB_V * EMB_H), *dpos = buf((size_t)EMB_POS * EMB_H), *dtype = buf((size_t)EMB_TYPES * EMB_H);
    embedding_loss(&s);
    hs_embedding_backward(be, dword, s.r, s.ids, T, EMB_H, EMB_V);
    hs_position_embedding_backward(be, dpos, s.r, EMB_B, EMB_L, EMB_H);
    hs_embedding_backward(be, dtype, s.r, s.segments, T, EMB_H, EMB_TYPES);
    fd_case c = {embedding_loss, &s, 1e-2f};
    int bad = fd_check_gradient("word embedding dtable", &c, s.word, dword, (size_t)EMB_V * EMB_H);
    bad += fd_check_gradient("position embedding dtable", &c, s.pos, dpos, (size_t)EMB_POS * EMB_H);
    bad += fd_check_gradient("token type dtable", &c, s.type, dtype, (size_t)EMB_TYPES * EMB_H);
    assert_int_equal(bad, 0);
    for (int h = 0; h < EMB_H; h++) assert_true(dword[6 * EMB_H + h] == 0.0f); /* unused id */
    for (int h = 0; h < EMB_H; h++) assert_true(dpos[(EMB_POS - 1) * EMB_H + h] == 0.0f); /* position >= L */
    float *bufs[] = {s.word, s.pos, s.type, s.y, s.r, dword, dpos, dtype};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->free(be, bufs[i]);
    be->free(be, s.ids), be->free(be, s.segments);
}

/* ---- LayerNorm, plain and with the residual add folded in --------------------------------------------- */

enum { LN_ROWS = 5, LN_COLS = 16 };

typedef struct layernorm_state {
    float *a, *res, *gamma, *beta, *x_sum, *y, *mean, *rstd, *r;
    int fused;
} layernorm_state;

static double layernorm_loss(void *p) {
    layernorm_state *s = p;
    if (s->fused)
        hs_add_layernorm_forward(be, s->y, s->x_sum, s->mean, s->rstd, s->a, s->res, s->gamma, s->beta, LN_ROWS,
                                 LN_COLS, TEST_LN_EPS);
    else
        hs_layernorm_forward(be, s->y, s->mean, s->rstd, s->a, s->gamma, s->beta, LN_ROWS, LN_COLS,
                             TEST_LN_EPS);
    return fd_project(s->y, s->r, (size_t)LN_ROWS * LN_COLS);
}

static void check_layernorm(int fused) {
    const size_t n = (size_t)LN_ROWS * LN_COLS;
    layernorm_state s = {.fused = fused};
    s.a = buf(n), s.res = buf(n), s.x_sum = buf(n), s.y = buf(n), s.r = buf(n);
    s.gamma = buf(LN_COLS), s.beta = buf(LN_COLS), s.mean = buf(LN_ROWS), s.rstd = buf(LN_ROWS);
    float *dx = buf(n), *dgamma = buf(LN_COLS), *dbeta = buf(LN_COLS);
    fill_uniform(s.a, n, -1, 1, 10);
    for (size_t i = 0; i < LN_COLS; i++) s.a[i] += 3.0f; /* a row far from zero mean */
    fill_uniform(s.res, n, -1, 1, 11);
    fill_uniform(s.gamma, LN_COLS, 0.5f, 1.5f, 12);
    fill_uniform(s.beta, LN_COLS, -1, 1, 13);
    fill_uniform(s.r, n, -1, 1, 14);
    layernorm_loss(&s);
    hs_layernorm_backward(be, dx, dgamma, dbeta, s.r, fused ? s.x_sum : s.a, s.mean, s.rstd, s.gamma, LN_ROWS, LN_COLS);
    fd_case c = {layernorm_loss, &s, 1e-2f};
    int bad = fd_check_gradient(fused ? "add+layernorm d(a)" : "layernorm dx", &c, s.a, dx, n);
    if (fused) bad += fd_check_gradient("add+layernorm d(residual)", &c, s.res, dx, n);
    bad += fd_check_gradient("layernorm dgamma", &c, s.gamma, dgamma, LN_COLS);
    bad += fd_check_gradient("layernorm dbeta", &c, s.beta, dbeta, LN_COLS);
    assert_int_equal(bad, 0);
    float *bufs[] = {s.a, s.res, s.x_sum, s.y, s.r, s.gamma, s.beta, s.mean, s.rstd, dx, dgamma, dbeta};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->free(be, bufs[i]);
}

static void test_layernorm(void **unused) {
    (void)unused;
    check_layernorm(0);
}

static void test_add_layernorm(void **unused) {
    (void)unused;
    check_layernorm(1);
}

/* ---- GELU (plain and bias-fused) and tanh --------------------------------------------------------------- */

enum { ACT_ROWS = 6, ACT_COLS = 25 };

typedef struct activation_state {
    float *x, *u, *bias, *y, *r;
    int kind; /* 0 gelu, 1 bias+gelu, 2 tanh */
} activation_state;

static double activation_loss(void *p) {
    activation_state *s = p;
    const size_t n = (size_t)ACT_ROWS * ACT_COLS;
    if (s->kind == 0) hs_gelu_forward(be, s->y, s->x, n);
    if (s->kind == 1) {
        memcpy(s->u, s->x, n * sizeof *s->u); /* the fused op overwrites its input with x + bias */
        hs_bias_gelu_forward(be, s->y, s->u, s->bias, ACT_ROWS, ACT_COLS, NULL, NULL);
    }
    if (s->kind == 2) hs_tanh_forward(be, s->y, s->x, n);
    return fd_project(s->y, s->r, n);
}

static void check_activation(int kind) {
    const size_t n = (size_t)ACT_ROWS * ACT_COLS;
    activation_state s = {.kind = kind};
    s.x = buf(n), s.u = buf(n), s.bias = buf(ACT_COLS), s.y = buf(n), s.r = buf(n);
    float *dx = buf(n), *dbias = buf(ACT_COLS);
    fill_uniform(s.x, n, -4, 4, 20 + (uint64_t)kind); /* both tails and the curved middle */
    fill_uniform(s.bias, ACT_COLS, -0.5f, 0.5f, 24);
    fill_uniform(s.r, n, -1, 1, 25);
    activation_loss(&s);
    if (kind == 0) hs_gelu_backward(be, dx, s.r, s.x, n, NULL);
    if (kind == 1) {
        hs_gelu_backward(be, dx, s.r, s.u, n, NULL);
        be->bias_grad(be, dbias, dx, ACT_ROWS, ACT_COLS);
    }
    if (kind == 2) hs_tanh_backward(be, dx, s.r, s.y, n);
    fd_case c = {activation_loss, &s, 1e-2f};
    const char *names[] = {"gelu dx", "bias+gelu dx", "tanh dx"};
    int bad = fd_check_gradient(names[kind], &c, s.x, dx, n);
    if (kind == 1) bad += fd_check_gradient("bias+gelu dbias", &c, s.bias, dbias, ACT_COLS);
    assert_int_equal(bad, 0);
    float *bufs[] = {s.x, s.u, s.bias, s.y, s.r, dx, dbias};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->free(be, bufs[i]);
}

static void test_gelu(void **unused) {
    (void)unused;
    check_activation(0);
}

static void test_bias_gelu(void **unused) {
    (void)unused;
    check_activation(1);
}

static void test_tanh(void **unused) {
    (void)unused;
    check_activation(2);
}

/* ---- gather rows (masked positions, first token) -------------------------------------------------------- */

enum { GATHER_X_ROWS = 6, GATHER_COUNT = 5, GATHER_COLS = 7 };

typedef struct gather_state {
    float *x, *y, *r;
    int32_t *index;
} gather_state;

static double gather_loss(void *p) {
    gather_state *s = p;
    hs_gather_rows_forward(be, s->y, s->x, s->index, GATHER_COUNT, GATHER_COLS, GATHER_X_ROWS);
    return fd_project(s->y, s->r, (size_t)GATHER_COUNT * GATHER_COLS);
}

static void test_gather_rows(void **unused) {
    (void)unused;
    gather_state s;
    s.x = buf((size_t)GATHER_X_ROWS * GATHER_COLS), s.y = buf((size_t)GATHER_COUNT * GATHER_COLS);
    s.r = buf((size_t)GATHER_COUNT * GATHER_COLS);
    s.index = be->alloc(be, GATHER_COUNT * sizeof(int32_t));
    const int32_t index[GATHER_COUNT] = {4, 0, 2, 4, 5}; /* row 4 twice, rows 1 and 3 never */
    memcpy(s.index, index, sizeof index);
    fill_uniform(s.x, (size_t)GATHER_X_ROWS * GATHER_COLS, -1, 1, 30);
    fill_uniform(s.r, (size_t)GATHER_COUNT * GATHER_COLS, -1, 1, 31);
    float *dx = buf((size_t)GATHER_X_ROWS * GATHER_COLS);
    gather_loss(&s);
    hs_gather_rows_backward(be, dx, s.r, s.index, GATHER_COUNT, GATHER_COLS, GATHER_X_ROWS);
    fd_case c = {gather_loss, &s, 1e-2f};
    assert_int_equal(fd_check_gradient("gather rows dx", &c, s.x, dx, (size_t)GATHER_X_ROWS * GATHER_COLS), 0);
    be->free(be, s.x), be->free(be, s.y), be->free(be, s.r), be->free(be, s.index), be->free(be, dx);
}

/* ---- softmax cross-entropy: MLM-like (wide, some rows ignored) and NSP (2 classes) ---------------------- */

typedef struct xent_state {
    int rows, classes;
    float *logits, *probs;
    int32_t *labels;
} xent_state;

static double xent_loss(void *p) {
    xent_state *s = p;
    double stats[3] = {0, 0, 0};
    hs_softmax_xent_forward(be, s->probs, s->logits, s->labels, s->rows, s->classes, stats);
    return stats[0];
}

static void check_xent(int rows, int classes, const int32_t *labels, const char *what) {
    xent_state s = {.rows = rows, .classes = classes};
    const size_t n = (size_t)rows * classes;
    s.logits = buf(n), s.probs = buf(n);
    s.labels = be->alloc(be, (size_t)rows * sizeof(int32_t));
    memcpy(s.labels, labels, (size_t)rows * sizeof(int32_t));
    fill_uniform(s.logits, n, -2, 2, 40 + (uint64_t)classes);
    s.logits[3] += 30.0f; /* a dominant logit: the max subtraction keeps exp() finite */
    float *dlogits = buf(n);
    xent_loss(&s);
    hs_softmax_xent_backward(be, dlogits, s.probs, s.labels, rows, classes, 1.0f);
    fd_case c = {xent_loss, &s, 1e-2f};
    assert_int_equal(fd_check_gradient(what, &c, s.logits, dlogits, n), 0);
    for (int r = 0; r < rows; r++)
        if (labels[r] < 0)
            for (int k = 0; k < classes; k++) assert_true(dlogits[(size_t)r * classes + k] == 0.0f);
    be->free(be, s.logits), be->free(be, s.probs), be->free(be, s.labels), be->free(be, dlogits);
}

static void test_softmax_xent_mlm(void **unused) {
    (void)unused;
    const int32_t labels[6] = {3, -1, 0, 12, -1, 7};
    check_xent(6, 13, labels, "xent (13 classes) dlogits");
}

static void test_softmax_xent_nsp(void **unused) {
    (void)unused;
    const int32_t labels[4] = {0, 1, 1, 0};
    check_xent(4, 2, labels, "xent (2 classes) dlogits");
}

/* ---- self-attention --------------------------------------------------------------------------------------- */

enum { ATT_B = 2, ATT_L = 5, ATT_H = 8, ATT_HEADS = 2 };

typedef struct attention_state {
    hs_attention_dims d;
    hs_attention_params w;
    hs_dropout_mask drop;
    float *wq, *wk, *wv, *bq, *bk, *bv; /* writable views of the parameters */
    float *x, *mask_bias, *ctx, *r;
    hs_attention_saved saved;
} attention_state;

static double attention_loss(void *p) {
    attention_state *s = p;
    hs_attention_forward(be, &s->d, &s->w, s->mask_bias, &s->drop, s->x, &s->saved, s->ctx);
    return fd_project(s->ctx, s->r, (size_t)ATT_B * ATT_L * ATT_H);
}

/* adjacent: the three weight matrices one [3H,H] block (one GEMM) or three allocations (three GEMMs);
 * fused: the fused ops (flash_attention_forward/backward: lse kept, P recomputed) instead of probs */
static void check_attention(float p, int adjacent, int fused) {
    const size_t hh = (size_t)ATT_H * ATT_H, nx = (size_t)ATT_B * ATT_L * ATT_H;
    attention_state s = {.d = {ATT_B, ATT_L, ATT_H, ATT_HEADS},
                         .drop = {.p = p, .group = 1, .key = hs_rng_key(TEST_SEED, 5, 3), .first_sample = 11}};
    float *wblock = NULL;
    if (adjacent) {
        wblock = buf(3 * hh);
        s.wq = wblock, s.wk = wblock + hh, s.wv = wblock + 2 * hh;
    } else {
        s.wq = buf(hh), s.wk = buf(hh), s.wv = buf(hh);
    }
    s.bq = buf(ATT_H), s.bk = buf(ATT_H), s.bv = buf(ATT_H);
    s.w = (hs_attention_params){s.wq, s.bq, s.wk, s.bk, s.wv, s.bv};
    s.x = buf(nx), s.ctx = buf(nx), s.r = buf(nx), s.mask_bias = buf((size_t)ATT_B * ATT_L);
    s.saved.qkv = buf(hs_attention_qkv_floats(&s.d));
    if (fused) {
        s.saved.lse = buf(hs_attention_lse_floats(&s.d));
        s.saved.ctx = s.ctx, s.saved.mask_bias = s.mask_bias;
    } else {
        s.saved.probs = buf(hs_attention_probs_floats(&s.d));
    }
    fill_uniform(s.x, nx, -1, 1, 50);
    fill_uniform(s.wq, hh, -0.5f, 0.5f, 51), fill_uniform(s.wk, hh, -0.5f, 0.5f, 52), fill_uniform(s.wv, hh, -0.5f, 0.5f, 53);
    fill_uniform(s.bq, ATT_H, -0.5f, 0.5f, 54), fill_uniform(s.bk, ATT_H, -0.5f, 0.5f, 55), fill_uniform(s.bv, ATT_H, -0.5f, 0.5f, 56);
    fill_uniform(s.r, nx, -1, 1, 57);
    /* sample 0 all real tokens, sample 1 with its last two positions padding */
    int32_t *input_mask = be->alloc(be, (size_t)ATT_B * ATT_L * sizeof(int32_t));
    for (int i = 0; i < ATT_B * ATT_L; i++) input_mask[i] = !(i >= ATT_L + 3);
    hs_attention_mask_bias(be, s.mask_bias, input_mask, ATT_B, ATT_L);

    float *g_block = buf(3 * hh);
    /* the first backward writes the six gradients (overwrite: an update's first writer), whatever they
     * held: NaN here */
    hs_attention_grads g = {g_block, buf(ATT_H), g_block + hh, buf(ATT_H), g_block + 2 * hh, buf(ATT_H), 1, NULL};
    for (size_t i = 0; i < 3 * hh; i++) g_block[i] = NAN;
    for (int i = 0; i < ATT_H; i++) g.query_b[i] = g.key_b[i] = g.value_b[i] = NAN;
    float *dx = buf(nx), *dx_acc = buf(nx);
    hs_workspace ws = {0};
    attention_loss(&s);
    hs_attention_backward(be, &s.d, &s.w, &g, &s.drop, s.x, &s.saved, s.r, dx, 0, &ws);
    fd_case c = {attention_loss, &s, 1e-2f};
    int bad = fd_check_gradient("attention dx", &c, s.x, dx, nx);
    bad += fd_check_gradient("attention d query.weight", &c, s.wq, g.query_w, hh);
    bad += fd_check_gradient("attention d query.bias", &c, s.bq, g.query_b, ATT_H);
    bad += fd_check_gradient("attention d key.weight", &c, s.wk, g.key_w, hh);
    bad += fd_check_gradient("attention d key.bias", &c, s.bk, g.key_b, ATT_H);
    bad += fd_check_gradient("attention d value.weight", &c, s.wv, g.value_w, hh);
    bad += fd_check_gradient("attention d value.bias", &c, s.bv, g.value_b, ATT_H);
    assert_int_equal(bad, 0);

    /* Padding keys get no attention: their probabilities are exactly 0 (e^-10000 underflows). */
    attention_loss(&s);
    for (int h = 0; h < ATT_HEADS && !fused; h++)
        for (int i = 0; i < ATT_L; i++)
            for (int j = 3; j < ATT_L; j++)
                assert_true(fabsf(s.saved.probs[(((size_t)1 * ATT_HEADS + h) * ATT_L + i) * ATT_L + j]) == 0.0f);

    /* With dropout on, some probabilities were dropped (stored with the sign bit set), not all. */
    if (p > 0.0f && !fused) {
        size_t dropped = 0;
        const size_t np = hs_attention_probs_floats(&s.d);
        for (size_t i = 0; i < np; i++) dropped += signbit(s.saved.probs[i]) != 0;
        assert_true(dropped > 0 && dropped < np);
    }

    /* accumulate_dx adds onto what dx holds (the residual path's gradient); parameter grads accumulate */
    for (size_t i = 0; i < nx; i++) dx_acc[i] = 1.0f;
    const float bq0 = g.query_b[0];
    g.overwrite = 0;
    hs_attention_backward(be, &s.d, &s.w, &g, &s.drop, s.x, &s.saved, s.r, dx_acc, 1, &ws);
    for (size_t i = 0; i < nx; i++) assert_float_equal(dx_acc[i], 1.0f + dx[i], 1e-5f);
    assert_float_equal(g.query_b[0], 2.0f * bq0, 1e-5f * (1.0f + fabsf(bq0)));

    hs_workspace_release(be, &ws);
    if (adjacent) {
        be->free(be, wblock);
    } else {
        be->free(be, s.wq), be->free(be, s.wk), be->free(be, s.wv);
    }
    float *bufs[] = {s.bq, s.bk, s.bv, s.x, s.ctx, s.r, s.mask_bias, s.saved.qkv, fused ? s.saved.lse : s.saved.probs,
                     g_block, g.query_b, g.key_b, g.value_b, dx, dx_acc};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) be->free(be, bufs[i]);
    be->free(be, input_mask);
}

static void test_attention_no_dropout(void **unused) {
    (void)unused;
    check_attention(0.0f, 1, 0);
}

static void test_attention_dropout(void **unused) {
    (void)unused;
    check_attention(0.3f, 1, 0);
}

static void test_attention_separate_weights(void **unused) {
    (void)unused;
    check_attention(0.3f, 0, 0);
}

static void test_attention_fused(void **unused) {
    (void)unused;
    check_attention(0.0f, 1, 1);
    check_attention(0.3f, 1, 1);
}

int main(void) {
    be = hs_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embeddings),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_add_layernorm),
        cmocka_unit_test(test_gelu),
        cmocka_unit_test(test_bias_gelu),
        cmocka_unit_test(test_tanh),
        cmocka_unit_test(test_gather_rows),
        cmocka_unit_test(test_softmax_xent_mlm),
        cmocka_unit_test(test_softmax_xent_nsp),
        cmocka_unit_test(test_attention_no_dropout),
        cmocka_unit_test(test_attention_dropout),
        cmocka_unit_test(test_attention_separate_weights),
        cmocka_unit_test(test_attention_fused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
