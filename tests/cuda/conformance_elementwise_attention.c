/* Conformance cases of the bias passes, element-wise ops, pooling, row gathers/scatter-adds and attention
 * (kernels/bias.cu, elementwise.cu, activations.cu, pool.cu, rows.cu, attention.cu, flash_attention.cu)
 * against the CPU backend.
 *
 * Besides CPU agreement (conformance.h's bounds), the ops that sum across threads (bias gradients,
 * scatter-add, attention) are run twice on the CUDA backend and must give the same bits: on the emulated
 * device the second run has another thread and block order, so an order-dependent sum shows up here. The
 * attention probabilities are also compared sign bit by sign bit (the sign marks a dropped value, and
 * -0.0 == +0.0 for the value comparison). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "util/check.h"

#define MAX_ELEMS ((size_t)1 << 20) /* size combinations above this are skipped (emulator time) */

static void *cuda_copy_of(hs_conf *t, const void *host, size_t bytes) { return hs_conf_dev(t->cuda, host, bytes); }

/* ---- bias passes ------------------------------------------------------------------------------------- */

static const int bias_shapes[][2] = {/* rows, cols */
                                     {1, 1},    {31, 33}, {33, 31},   {127, 256}, {256, 127},
                                     {1000, 33}, {4097, 31}, {3, 1000}, {0, 5},    {64, 4097}};
#define NBIAS (sizeof bias_shapes / sizeof bias_shapes[0])

static void bias_cases(hs_conf *t) {
    char what[160];
    hs_conf_op(t, "add_bias");
    for (size_t s = 0; s < NBIAS; s++) {
        const int rows = bias_shapes[s][0], cols = bias_shapes[s][1];
        const size_t n = (size_t)rows * cols;
        float *y = hs_conf_rand(t, n, -1, 1), *bias = hs_conf_rand(t, cols, -1, 1);
        hs_conf_pair dy = hs_conf_pair_of(t, y, n * 4), db = hs_conf_pair_of(t, bias, (size_t)cols * 4);
        t->cpu->add_bias(t->cpu, dy.cpu, db.cpu, rows, cols);
        t->cuda->add_bias(t->cuda, dy.cuda, db.cuda, rows, cols);
        snprintf(what, sizeof what, "y rows=%d cols=%d", rows, cols);
        hs_conf_check_ew(t, what, dy.cpu, dy.cuda, n, 0.0);
        hs_conf_pair_free(t, dy), hs_conf_pair_free(t, db);
        free(y), free(bias);
    }
    hs_conf_op(t, "bias_grad");
    for (size_t s = 0; s < NBIAS; s++) {
        const int rows = bias_shapes[s][0], cols = bias_shapes[s][1];
        const size_t n = (size_t)rows * cols;
        float *g = hs_conf_rand(t, n, -1, 1), *dbias = hs_conf_rand(t, cols, -1, 1);
        hs_conf_pair dg = hs_conf_pair_of(t, g, n * 4), dd = hs_conf_pair_of(t, dbias, (size_t)cols * 4);
        void *again = cuda_copy_of(t, dbias, (size_t)cols * 4);
        t->cpu->bias_grad(t->cpu, dd.cpu, dg.cpu, rows, cols);
        t->cuda->bias_grad(t->cuda, dd.cuda, dg.cuda, rows, cols);
        t->cuda->bias_grad(t->cuda, again, dg.cuda, rows, cols);
        snprintf(what, sizeof what, "dbias (accumulated) rows=%d cols=%d", rows, cols);
        /* a reduction over the rows of values in [-1, 1] onto a value in [-1, 1]: Σ|x| <= rows + 1 */
        hs_conf_check_sum_f32(t, what, dd.cpu, dd.cuda, (size_t)cols, rows + 1.0, rows + 1.0, 0.0);
        hs_conf_same_bits(t, what, dd.cuda, again, (size_t)cols * 4);
        hs_conf_pair_free(t, dg), hs_conf_pair_free(t, dd), t->cuda->free(t->cuda, again);
        free(g), free(dbias);
    }
    /* a column slice: the k third of a [rows, 3·cols + 1] q|k|v matrix (the whole matrix is compared, so a
     * write outside the slice fails too) */
    hs_conf_op(t, "add_bias_strided");
    for (size_t s = 0; s < NBIAS; s++) {
        const int rows = bias_shapes[s][0], cols = bias_shapes[s][1], ldy = 3 * cols + 1;
        const size_t n = (size_t)rows * ldy;
        if (n > MAX_ELEMS) continue;
        float *y = hs_conf_rand(t, n, -1, 1), *bias = hs_conf_rand(t, cols, -1, 1);
        hs_conf_pair dy = hs_conf_pair_of(t, y, n * 4), db = hs_conf_pair_of(t, bias, (size_t)cols * 4);
        t->cpu->add_bias_strided(t->cpu, (float *)dy.cpu + cols, ldy, db.cpu, rows, cols);
        t->cuda->add_bias_strided(t->cuda, (float *)dy.cuda + cols, ldy, db.cuda, rows, cols);
        snprintf(what, sizeof what, "y[rows=%d, ldy=%d] slice cols %d..%d", rows, ldy, cols, 2 * cols);
        hs_conf_check_ew(t, what, dy.cpu, dy.cuda, n, 0.0);
        hs_conf_pair_free(t, dy), hs_conf_pair_free(t, db);
        free(y), free(bias);
    }
    hs_conf_op(t, "bias_grad_strided");
    for (size_t s = 0; s < NBIAS; s++) {
        const int rows = bias_shapes[s][0], cols = bias_shapes[s][1], ldy = 3 * cols + 1;
        const size_t n = (size_t)rows * ldy;
        if (n > MAX_ELEMS) continue;
        float *g = hs_conf_rand(t, n, -1, 1), *dbias = hs_conf_rand(t, cols, -1, 1);
        hs_conf_pair dg = hs_conf_pair_of(t, g, n * 4), dd = hs_conf_pair_of(t, dbias, (size_t)cols * 4);
        void *again = cuda_copy_of(t, dbias, (size_t)cols * 4);
        t->cpu->bias_grad_strided(t->cpu, dd.cpu, (const float *)dg.cpu + 2 * cols, ldy, rows, cols);
        t->cuda->bias_grad_strided(t->cuda, dd.cuda, (const float *)dg.cuda + 2 * cols, ldy, rows, cols);
        t->cuda->bias_grad_strided(t->cuda, again, (const float *)dg.cuda + 2 * cols, ldy, rows, cols);
        snprintf(what, sizeof what, "dbias (accumulated) rows=%d ldy=%d slice cols %d..%d", rows, ldy, 2 * cols,
                 3 * cols);
        /* a reduction over the rows of values in [-1, 1] onto a value in [-1, 1]: Σ|x| <= rows + 1 */
        hs_conf_check_sum_f32(t, what, dd.cpu, dd.cuda, (size_t)cols, rows + 1.0, rows + 1.0, 0.0);
        hs_conf_same_bits(t, what, dd.cuda, again, (size_t)cols * 4);
        hs_conf_pair_free(t, dg), hs_conf_pair_free(t, dd), t->cuda->free(t->cuda, again);
        free(g), free(dbias);
    }
}

/* ---- element-wise ---------------------------------------------------------------------------------------- */

/* y = f(x) on both backends, out of place and (when in_place) in place, compared */
typedef void (*unary_op)(const hs_backend *be, float *y, const float *x, size_t n);
static unary_op pick_unary(const hs_backend *be, int which) {
    return which == 0 ? be->relu_forward : which == 1 ? be->gelu_forward : be->tanh_forward;
}
/* dx = f(dy, z) on both backends */
typedef void (*binary_op)(const hs_backend *be, float *dx, const float *dy, const float *z, size_t n);
static void gelu_backward_no16(const hs_backend *be, float *dx, const float *dy, const float *z, size_t n) {
    be->gelu_backward(be, dx, dy, z, NULL, n, NULL, NULL, NULL);
}
static binary_op pick_binary(const hs_backend *be, int which) {
    return which == 0 ? be->relu_backward : which == 1 ? gelu_backward_no16 : be->tanh_backward;
}

/* relu, gelu and tanh (gelu_only: gelu and bias_gelu_forward, which under bf16 and fp16 compute on CUDA
 * with the special-function unit, kernels/activations.cu). The bound is the element-wise one, 32 float
 * ulps of the value plus an absolute term, which for gelu_only is 32 ulps of the largest |x| (forward)
 * or |dy| (backward) rather than of the largest value in the call: the 16-bit GELU differs from the
 * CPU's by at most 1.1e-7 in Φ where the CPU takes erf's Maclaurin series (|x| < 1.06), elsewhere by
 * the CPU's own rounding of 1 + erf (3e-8 in Φ, where Φ is small: the 16-bit formula assembles ½·erfc
 * without that cancellation) and about 8 ulps of ½·erfc from the two instructions' 1- and 2.5-ulp errors
 * through the degree-5 polynomial: |Δgelu| <= |x|·6e-7 <= 3.6e-6 for |x| <= 6 against 32·2^-24·6 =
 * 1.1e-5, and |Δ(dy·gelu')| <= |dy|·(6e-7 + |x|φ(x)·4e-7) <= 7e-7 against 32·2^-24 = 1.9e-6. */
static void activation_cases(hs_conf *t, int gelu_only) {
    static const char *fwd_names[] = {"relu_forward", "gelu_forward", "tanh_forward"};
    static const char *bwd_names[] = {"relu_backward", "gelu_backward", "tanh_backward"};
    static const float range[] = {1.0f, 6.0f, 3.0f};
    char what[160];
    for (int which = gelu_only ? 1 : 0; which < (gelu_only ? 2 : 3); which++) {
        hs_conf_op(t, fwd_names[which]);
        for (int s = 0; s < hs_conf_nsizes; s++) {
            const size_t n = hs_conf_sizes[s];
            float *x = hs_conf_rand(t, n, -range[which], range[which]);
            hs_conf_pair dx = hs_conf_pair_of(t, x, n * 4), dy = hs_conf_pair_of(t, NULL, n * 4);
            pick_unary(t->cpu, which)(t->cpu, dy.cpu, dx.cpu, n);
            pick_unary(t->cuda, which)(t->cuda, dy.cuda, dx.cuda, n);
            snprintf(what, sizeof what, "y n=%zu", n);
            hs_conf_check_ew(t, what, dy.cpu, dy.cuda, n, gelu_only ? range[which] : 0.0);
            pick_unary(t->cpu, which)(t->cpu, dx.cpu, dx.cpu, n); /* y aliases x */
            pick_unary(t->cuda, which)(t->cuda, dx.cuda, dx.cuda, n);
            snprintf(what, sizeof what, "y in place n=%zu", n);
            hs_conf_check_ew(t, what, dx.cpu, dx.cuda, n, gelu_only ? range[which] : 0.0);
            hs_conf_pair_free(t, dx), hs_conf_pair_free(t, dy);
            free(x);
        }
        hs_conf_op(t, bwd_names[which]);
        for (int s = 0; s < hs_conf_nsizes; s++) {
            const size_t n = hs_conf_sizes[s];
            /* relu and tanh take the forward output, gelu the pre-activation */
            float *x = hs_conf_rand(t, n, -range[which], range[which]), *g = hs_conf_rand(t, n, -1, 1);
            if (which == 0)
                for (size_t i = 0; i < n; i++) x[i] = x[i] < 0 ? 0.0f : x[i];
            if (which == 2)
                for (size_t i = 0; i < n; i++) x[i] = tanhf(x[i]);
            hs_conf_pair dz = hs_conf_pair_of(t, x, n * 4), dg = hs_conf_pair_of(t, g, n * 4), dd = hs_conf_pair_of(t, NULL, n * 4);
            pick_binary(t->cpu, which)(t->cpu, dd.cpu, dg.cpu, dz.cpu, n);
            pick_binary(t->cuda, which)(t->cuda, dd.cuda, dg.cuda, dz.cuda, n);
            snprintf(what, sizeof what, "dx n=%zu", n);
            hs_conf_check_ew(t, what, dd.cpu, dd.cuda, n, gelu_only ? 1.0 : 0.0);
            pick_binary(t->cpu, which)(t->cpu, dg.cpu, dg.cpu, dz.cpu, n); /* dx aliases dy */
            pick_binary(t->cuda, which)(t->cuda, dg.cuda, dg.cuda, dz.cuda, n);
            snprintf(what, sizeof what, "dx in place n=%zu", n);
            hs_conf_check_ew(t, what, dg.cpu, dg.cuda, n, gelu_only ? 1.0 : 0.0);
            hs_conf_pair_free(t, dz), hs_conf_pair_free(t, dg), hs_conf_pair_free(t, dd);
            free(x), free(g);
        }
    }
    hs_conf_op(t, "bias_gelu_forward");
    for (size_t s = 0; s < NBIAS; s++) {
        const int rows = bias_shapes[s][0], cols = bias_shapes[s][1];
        const size_t n = (size_t)rows * cols;
        float *x = hs_conf_rand(t, n, -5, 5), *bias = hs_conf_rand(t, cols, -1, 1);
        hs_conf_pair dx = hs_conf_pair_of(t, x, n * 4), db = hs_conf_pair_of(t, bias, (size_t)cols * 4), dy = hs_conf_pair_of(t, NULL, n * 4);
        t->cpu->bias_gelu_forward(t->cpu, dy.cpu, dx.cpu, db.cpu, rows, cols, NULL, NULL);
        t->cuda->bias_gelu_forward(t->cuda, dy.cuda, dx.cuda, db.cuda, rows, cols, NULL, NULL);
        snprintf(what, sizeof what, "x + bias rows=%d cols=%d", rows, cols);
        hs_conf_check_ew(t, what, dx.cpu, dx.cuda, n, 0.0);
        snprintf(what, sizeof what, "y rows=%d cols=%d", rows, cols);
        hs_conf_check_ew(t, what, dy.cpu, dy.cuda, n, gelu_only ? 6.0 : 0.0); /* |x + bias| <= 6 */
        hs_conf_pair_free(t, dx), hs_conf_pair_free(t, db), hs_conf_pair_free(t, dy);
        free(x), free(bias);
    }
}

static void convert_cases(hs_conf *t) {
    char what[160];
    hs_conf_op(t, "u8_to_float");
    for (int s = 0; s < hs_conf_nsizes; s++) {
        const size_t n = hs_conf_sizes[s];
        uint8_t *x = hs_conf_rand_u8(t, n);
        hs_conf_pair dx = hs_conf_pair_of(t, x, n), dy = hs_conf_pair_of(t, NULL, n * 4);
        const float scale = 1.0f / (255.0f * 0.3081f), shift = -0.1307f / 0.3081f; /* MNIST normalisation */
        t->cpu->u8_to_float(t->cpu, dy.cpu, dx.cpu, n, scale, shift);
        t->cuda->u8_to_float(t->cuda, dy.cuda, dx.cuda, n, scale, shift);
        snprintf(what, sizeof what, "y n=%zu", n);
        hs_conf_check_ew(t, what, dy.cpu, dy.cuda, n, 0.0);
        hs_conf_pair_free(t, dx), hs_conf_pair_free(t, dy);
        free(x);
    }
    hs_conf_op(t, "attention_mask_bias");
    for (int s = 0; s < hs_conf_nsizes; s++) {
        const size_t n = hs_conf_sizes[s];
        int32_t *m = hs_conf_rand_int(t, n, 0, 2);
        hs_conf_pair dm = hs_conf_pair_of(t, m, n * 4), db = hs_conf_pair_of(t, NULL, n * 4);
        t->cpu->attention_mask_bias(t->cpu, db.cpu, dm.cpu, n);
        t->cuda->attention_mask_bias(t->cuda, db.cuda, dm.cuda, n);
        snprintf(what, sizeof what, "bias n=%zu", n);
        hs_conf_check_ew(t, what, db.cpu, db.cuda, n, 0.0);
        hs_conf_pair_free(t, dm), hs_conf_pair_free(t, db);
        free(m);
    }
}

/* dropout forward and backward: element-wise (group 1), channel-wise (group 4) and whole samples, p = 0
 * (identity, out of place and in place) and p = 0.1 */
static void dropout_cases(hs_conf *t) {
    char what[200];
    const uint64_t key = 0x243f6a8885a308d3ULL;
    const int64_t first_sample = 7;
    const int batch = 3;
    hs_conf_op(t, "dropout_forward/backward");
    for (int s = 0; s < hs_conf_nsizes; s++)
        for (int mode = 0; mode < 3; mode++)
            for (int pi = 0; pi < 2; pi++) {
                const float p = pi ? 0.1f : 0.0f;
                const size_t group = mode == 0 ? 1 : mode == 1 ? 4 : hs_conf_sizes[s];
                const size_t per_sample = mode == 1 ? 4 * hs_conf_sizes[s] : hs_conf_sizes[s];
                const size_t n = (size_t)batch * per_sample;
                float *x = hs_conf_rand(t, n, -1, 1), *g = hs_conf_rand(t, n, -1, 1);
                hs_conf_pair dx = hs_conf_pair_of(t, x, n * 4), dg = hs_conf_pair_of(t, g, n * 4), dy = hs_conf_pair_of(t, NULL, n * 4),
                     dd = hs_conf_pair_of(t, NULL, n * 4);
                t->cpu->dropout_forward(t->cpu, dy.cpu, dx.cpu, batch, per_sample, group, p, key, first_sample);
                t->cuda->dropout_forward(t->cuda, dy.cuda, dx.cuda, batch, per_sample, group, p, key, first_sample);
                t->cpu->dropout_backward(t->cpu, dd.cpu, dg.cpu, batch, per_sample, group, p, key, first_sample);
                t->cuda->dropout_backward(t->cuda, dd.cuda, dg.cuda, batch, per_sample, group, p, key, first_sample);
                snprintf(what, sizeof what, "batch=%d per_sample=%zu group=%zu p=%g", batch, per_sample, group, p);
                hs_conf_check_ew(t, what, dy.cpu, dy.cuda, n, 0.0);
                hs_conf_check_ew(t, what, dd.cpu, dd.cuda, n, 0.0);
                /* in place */
                t->cpu->dropout_forward(t->cpu, dx.cpu, dx.cpu, batch, per_sample, group, p, key, first_sample);
                t->cuda->dropout_forward(t->cuda, dx.cuda, dx.cuda, batch, per_sample, group, p, key, first_sample);
                snprintf(what, sizeof what, "in place batch=%d per_sample=%zu group=%zu p=%g", batch, per_sample,
                         group, p);
                hs_conf_check_ew(t, what, dx.cpu, dx.cuda, n, 0.0);
                hs_conf_pair_free(t, dx), hs_conf_pair_free(t, dg), hs_conf_pair_free(t, dy), hs_conf_pair_free(t, dd);
                free(x), free(g);
            }
}

static void relu_dropout_case(hs_conf *t, int batch, size_t per_sample, float p, float lo) {
    char what[200];
    const uint64_t key = 0x13198a2e03707344ULL;
    const int64_t first_sample = 5;
    const size_t n = (size_t)batch * per_sample;
    float *x = hs_conf_rand(t, n, lo, 1), *g = hs_conf_rand(t, n, -1, 1);
    hs_conf_pair dx = hs_conf_pair_of(t, x, n * 4), dg = hs_conf_pair_of(t, g, n * 4);
    hs_conf_pair fy = hs_conf_pair_of(t, NULL, n * 4), sy = hs_conf_pair_of(t, NULL, n * 4);
    hs_conf_pair fd = hs_conf_pair_of(t, NULL, n * 4), sd = hs_conf_pair_of(t, NULL, n * 4);
    const hs_backend *be[2] = {t->cpu, t->cuda};
    for (int k = 0; k < 2; k++) {
        float *X = k ? dx.cuda : dx.cpu, *G = k ? dg.cuda : dg.cpu, *FY = k ? fy.cuda : fy.cpu;
        float *SY = k ? sy.cuda : sy.cpu, *FD = k ? fd.cuda : fd.cpu, *SD = k ? sd.cuda : sd.cpu;
        be[k]->relu_dropout_forward(be[k], FY, X, batch, per_sample, p, key, first_sample, NULL);
        be[k]->relu_forward(be[k], SY, X, n);
        be[k]->dropout_forward(be[k], SY, SY, batch, per_sample, 1, p, key, first_sample);
        be[k]->relu_dropout_backward(be[k], FD, G, FY, batch, per_sample, p, key, first_sample, NULL);
        be[k]->dropout_backward(be[k], SD, G, batch, per_sample, 1, p, key, first_sample);
        be[k]->relu_backward(be[k], SD, SD, SY, n);
    }
    snprintf(what, sizeof what, "batch=%d per_sample=%zu p=%g: CUDA vs CPU", batch, per_sample, p);
    hs_conf_check_i32(t, what, fy.cpu, fy.cuda, n);
    hs_conf_check_i32(t, what, fd.cpu, fd.cuda, n);
    /* the CPU backend's buffers are host memory */
    if (memcmp(fy.cpu, sy.cpu, n * 4) || memcmp(fd.cpu, sd.cpu, n * 4)) {
        hs_conf_fail(t);
        printf("FAIL relu_dropout_forward/backward: batch=%d per_sample=%zu p=%g: the fused op's bits differ "
               "from relu then dropout's on the CPU\n", batch, per_sample, p);
    } else {
        t->checks++;
    }
    snprintf(what, sizeof what, "batch=%d per_sample=%zu p=%g: fused vs separate (CUDA)", batch, per_sample, p);
    hs_conf_same_bits(t, what, fy.cuda, sy.cuda, n * 4);
    hs_conf_same_bits(t, what, fd.cuda, sd.cuda, n * 4);
    hs_conf_pair_free(t, dx), hs_conf_pair_free(t, dg), hs_conf_pair_free(t, fy), hs_conf_pair_free(t, sy);
    hs_conf_pair_free(t, fd), hs_conf_pair_free(t, sd);
    free(x), free(g);
}

/* ReLU and element-wise dropout in one op (Transformer-XL's FFN activation), p = 0 and 0.1: the CPU's bits
 * on CUDA, and on each backend the bits of relu_forward then dropout_forward (backward: dropout_backward
 * then relu_backward), the separate ops it replaces. Last, many short samples of positive inputs at
 * p = 0.5: CUDA steps through four values at a time, and every step crosses a sample's end. */
static void relu_dropout_cases(hs_conf *t) {
    hs_conf_op(t, "relu_dropout_forward/backward");
    for (int s = 0; s < hs_conf_nsizes; s++)
        for (int pi = 0; pi < 2; pi++) relu_dropout_case(t, 3, hs_conf_sizes[s], pi ? 0.1f : 0.0f, -1.0f);
    relu_dropout_case(t, 97, 5, 0.5f, 0.1f);
    relu_dropout_case(t, 41, 3, 0.5f, 0.1f);
}

/* ---- max pooling ------------------------------------------------------------------------------------------ */

static void pool_cases(hs_conf *t) {
    static const int shapes[][5] = {/* n, c, h, w, k */
                                    {1, 1, 1, 1, 1}, {2, 3, 4, 4, 2},  {2, 3, 5, 7, 2},  {2, 4, 28, 28, 2},
                                    {1, 2, 9, 9, 3}, {3, 5, 11, 6, 3}, {2, 8, 13, 13, 2}, {1, 1, 3, 2, 4}};
    char what[160];
    hs_conf_op(t, "maxpool2d_forward/backward");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        const int n = shapes[i][0], c = shapes[i][1], h = shapes[i][2], w = shapes[i][3], k = shapes[i][4];
        const size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c * (h / k) * (w / k);
        /* a few distinct values (ties: the first maximum wins) and zeros as after a ReLU */
        float *x = hs_conf_rand(t, nx, -2, 4), *dy = hs_conf_rand(t, ny, -1, 1), *dx = hs_conf_rand(t, nx, -1, 1);
        for (size_t e = 0; e < nx; e++) x[e] = x[e] < 0 ? 0.0f : floorf(x[e]);
        hs_conf_pair d_x = hs_conf_pair_of(t, x, nx * 4), d_y = hs_conf_pair_of(t, NULL, ny * 4), d_a = hs_conf_pair_of(t, NULL, ny * 4);
        hs_conf_pair d_dy = hs_conf_pair_of(t, dy, ny * 4), d_dx = hs_conf_pair_of(t, dx, nx * 4); /* dx starts non-zero: overwritten */
        t->cpu->maxpool2d_forward(t->cpu, d_y.cpu, d_a.cpu, d_x.cpu, n, c, h, w, k);
        t->cuda->maxpool2d_forward(t->cuda, d_y.cuda, d_a.cuda, d_x.cuda, n, c, h, w, k);
        t->cpu->maxpool2d_backward(t->cpu, d_dx.cpu, d_dy.cpu, d_a.cpu, n, c, h, w, k);
        t->cuda->maxpool2d_backward(t->cuda, d_dx.cuda, d_dy.cuda, d_a.cuda, n, c, h, w, k);
        snprintf(what, sizeof what, "n=%d c=%d %dx%d k=%d", n, c, h, w, k);
        if (ny) {
            hs_conf_check_ew(t, what, d_y.cpu, d_y.cuda, ny, 0.0);
            hs_conf_check_i32(t, what, d_a.cpu, d_a.cuda, ny);
        }
        hs_conf_check_ew(t, what, d_dx.cpu, d_dx.cuda, nx, 0.0);
        hs_conf_pair_free(t, d_x), hs_conf_pair_free(t, d_y), hs_conf_pair_free(t, d_a), hs_conf_pair_free(t, d_dy), hs_conf_pair_free(t, d_dx);
        free(x), free(dy), free(dx);
    }
}

/* ---- rows ------------------------------------------------------------------------------------------------- */

/* dx[dx_rows, cols] += rows of dy[count, cols] at ids drawn in [0, dx_rows) (all equal to same_id when
 * >= 0): the CPU's bits, and the same bits on a second run. */
static void scatter_case(hs_conf *t, int count, int cols, int dx_rows, int same_id) {
    char what[160];
    const size_t ny = (size_t)count * cols, nx = (size_t)dx_rows * cols;
    float *dy = hs_conf_rand(t, ny ? ny : 1, -1, 1), *dx = hs_conf_rand(t, nx, -1, 1);
    int32_t *idx = hs_conf_rand_int(t, count ? (size_t)count : 1, 0, dx_rows);
    if (same_id >= 0)
        for (int i = 0; i < count; i++) idx[i] = same_id;
    hs_conf_pair d_dy = hs_conf_pair_of(t, dy, (ny ? ny : 1) * 4), d_dx = hs_conf_pair_of(t, dx, nx * 4),
                 di = hs_conf_pair_of(t, idx, (count ? (size_t)count : 1) * 4);
    void *again = cuda_copy_of(t, dx, nx * 4);
    t->cpu->scatter_add_rows(t->cpu, d_dx.cpu, d_dy.cpu, di.cpu, count, cols, dx_rows);
    t->cuda->scatter_add_rows(t->cuda, d_dx.cuda, d_dy.cuda, di.cuda, count, cols, dx_rows);
    t->cuda->scatter_add_rows(t->cuda, again, d_dy.cuda, di.cuda, count, cols, dx_rows);
    snprintf(what, sizeof what, "dx (accumulated) count=%d cols=%d dx_rows=%d%s", count, cols, dx_rows,
             same_id >= 0 ? " (all ids the same)" : "");
    hs_conf_check_ew(t, what, d_dx.cpu, d_dx.cuda, nx, 0.0);
    hs_conf_check_i32(t, what, d_dx.cpu, d_dx.cuda, nx); /* the same bits as the CPU, not just close */
    hs_conf_same_bits(t, what, d_dx.cuda, again, nx * 4);
    hs_conf_pair_free(t, d_dy), hs_conf_pair_free(t, d_dx), hs_conf_pair_free(t, di), t->cuda->free(t->cuda, again);
    free(dy), free(dx), free(idx);
}

static void rows_cases(hs_conf *t) {
    static const int col_set[] = {1, 33, 256};
    char what[160];
    hs_conf_op(t, "gather_rows");
    for (int s = 0; s < hs_conf_nsizes; s++)
        for (size_t ci = 0; ci < sizeof col_set / sizeof col_set[0]; ci++)
            for (int acc = 0; acc < 2; acc++) {
                const int count = (int)hs_conf_sizes[s], cols = col_set[ci], x_rows = 50;
                const size_t ny = (size_t)count * cols, nx = (size_t)x_rows * cols;
                if (ny > MAX_ELEMS) continue;
                float *x = hs_conf_rand(t, nx, -1, 1), *y = hs_conf_rand(t, ny, -1, 1);
                int32_t *idx = hs_conf_rand_int(t, (size_t)count, 0, x_rows);
                for (int i = 4; i < count; i += 5) idx[i] = -1; /* padding rows: zeros */
                hs_conf_pair dx = hs_conf_pair_of(t, x, nx * 4), dy = hs_conf_pair_of(t, y, ny * 4), di = hs_conf_pair_of(t, idx, (size_t)count * 4);
                t->cpu->gather_rows(t->cpu, dy.cpu, dx.cpu, di.cpu, count, cols, x_rows, acc);
                t->cuda->gather_rows(t->cuda, dy.cuda, dx.cuda, di.cuda, count, cols, x_rows, acc);
                snprintf(what, sizeof what, "y count=%d cols=%d accumulate=%d", count, cols, acc);
                hs_conf_check_ew(t, what, dy.cpu, dy.cuda, ny, 0.0);
                hs_conf_pair_free(t, dx), hs_conf_pair_free(t, dy), hs_conf_pair_free(t, di);
                free(x), free(y), free(idx);
            }
    /* few destination rows: every index repeats many times */
    static const int scatter_cols[] = {1, 31, 300};
    hs_conf_op(t, "scatter_add_rows");
    for (int s = 0; s < hs_conf_nsizes; s++)
        for (size_t ci = 0; ci < sizeof scatter_cols / sizeof scatter_cols[0]; ci++)
            if ((size_t)hs_conf_sizes[s] * scatter_cols[ci] <= MAX_ELEMS)
                scatter_case(t, (int)hs_conf_sizes[s], scatter_cols[ci], 7, -1);
    /* the shapes the CUDA kernel treats apart: all ids the same (one segment), none, the most ids whose
     * keys sort in shared memory (BERT's micro-batch of 64 x 128 tokens over a 30522-word table) and one
     * more, a table whose keys need 64 bits, and many ids (sorted in device memory) */
    scatter_case(t, 4097, 33, 7, 3);
    scatter_case(t, 0, 33, 7, -1);
    scatter_case(t, 8192, 40, 30522, -1);
    scatter_case(t, 8193, 3, 30522, -1);
    scatter_case(t, 4000, 1, (1 << 20) + 5, -1);
    scatter_case(t, 40000, 5, 50, -1);
    /* pitched row copies: the vector path (cols and both ld multiples of 4), the scalar one, one row, an
     * offset start; the destination's gaps between rows keep their values. The CPU's bits exactly. */
    static const int copy_shapes[][4] = {{8, 64, 64, 96}, {8, 33, 40, 35}, {1, 5, 5, 5}, {300, 12, 16, 20}, {3, 4, 7, 4}};
    for (int add = 0; add < 2; add++) { /* copy_rows, then add_rows (dst += src: one float add each) */
        hs_conf_op(t, add ? "add_rows" : "copy_rows");
        for (size_t c = 0; c < sizeof copy_shapes / sizeof copy_shapes[0]; c++) {
            const int rows = copy_shapes[c][0], cols = copy_shapes[c][1], dld = copy_shapes[c][2],
                      sld = copy_shapes[c][3];
            const size_t nd = (size_t)rows * dld + 4, ns = (size_t)rows * sld + 4;
            float *dst = hs_conf_rand(t, nd, -1, 1), *src = hs_conf_rand(t, ns, -1, 1);
            hs_conf_pair dd = hs_conf_pair_of(t, dst, nd * 4), ds = hs_conf_pair_of(t, src, ns * 4);
            const size_t off = c % 2 ? 1 : 0; /* an unaligned start takes the scalar path */
            float *dc = (float *)dd.cpu + off, *dg = (float *)dd.cuda + off;
            const float *sc = (const float *)ds.cpu + off, *sg = (const float *)ds.cuda + off;
            if (add) {
                t->cpu->add_rows(t->cpu, dc, (size_t)dld, sc, (size_t)sld, (size_t)cols, rows);
                t->cuda->add_rows(t->cuda, dg, (size_t)dld, sg, (size_t)sld, (size_t)cols, rows);
            } else {
                t->cpu->copy_rows(t->cpu, dc, (size_t)dld, sc, (size_t)sld, (size_t)cols, rows);
                t->cuda->copy_rows(t->cuda, dg, (size_t)dld, sg, (size_t)sld, (size_t)cols, rows);
            }
            snprintf(what, sizeof what, "dst rows=%d cols=%d dst_ld=%d src_ld=%d offset=%zu", rows, cols, dld, sld,
                     off);
            hs_conf_check_i32(t, what, dd.cpu, dd.cuda, nd); /* every element of dst, gaps included: the same bits */
            hs_conf_pair_free(t, dd), hs_conf_pair_free(t, ds);
            free(dst), free(src);
        }
    }
}

/* ---- attention --------------------------------------------------------------------------------------------- */

/* The input-gradient bounds of one (sample b, head h) unit (see attention_bounds): P the CPU's stored
 * probabilities [L,L], dp their bounds, writes the unit's columns of bdqkv [B,L,3H]. */
static void attention_backward_bounds(hs_conf *t, const float *qkv, const float *P, const double *dp,
                                      const float *dctx, const double *bctx, int b, int h, int L, int heads, int d,
                                      float p, double *bdqkv) {
    const int H = heads * d;
    const double u = HS_CONF_U32, c = HS_CONF_C, scale = 1.0 / sqrt((double)d), fd = hs_conf_dot_factor(t, d),
                 fl = hs_conf_dot_factor(t, L), ks = 1.0 / (1.0 - p), gl = hs_conf_gamma(L, u);
    const size_t LL = (size_t)L * L;
    double *G, *E, *dS, *ddS;
    HS_ALLOC(G, LL), HS_ALLOC(E, LL), HS_ALLOC(dS, LL), HS_ALLOC(ddS, LL);
#define Q(i, e) ((double)qkv[((size_t)b * L + (i)) * 3 * H + h * d + (e)])
#define K(j, e) ((double)qkv[((size_t)b * L + (j)) * 3 * H + H + h * d + (e)])
#define V(j, e) ((double)qkv[((size_t)b * L + (j)) * 3 * H + 2 * H + h * d + (e)])
#define DC(i, e) ((double)dctx[((size_t)b * L + (i)) * H + h * d + (e)])
#define KEEP(ij) (signbit(P[ij]) ? 0.0 : ks)
    for (int i = 0; i < L; i++) {
        double R = 0.0, dR = 0.0, RG = 0.0;
        for (int j = 0; j < L; j++) {
            const size_t ij = (size_t)i * L + j;
            double g = 0.0;
            for (int e = 0; e < d; e++) g += fabs(DC(i, e) * V(j, e));
            G[ij] = KEEP(ij) * g;
            E[ij] = KEEP(ij) * fd * g;
            const double pij = fabs((double)P[ij]);
            R += pij * G[ij];
            dR += dp[ij] * G[ij] + pij * E[ij];
            RG += pij * G[ij];
        }
        dR += c * gl * RG;
        if (bctx) { /* fused: R_i = dctx_i·ctx_i, ctx off by bctx, |ctx_ie| <= sum_j |p'_ij v_je| */
            const double gd = hs_conf_gamma(d, u);
            for (int e = 0; e < d; e++) {
                double cmag = 0.0;
                for (int j = 0; j < L; j++) cmag += KEEP((size_t)i * L + j) * fabs((double)P[(size_t)i * L + j] * V(j, e));
                dR += fabs(DC(i, e)) * (bctx[((size_t)b * L + i) * H + h * d + e] + c * gd * cmag);
            }
        }
        for (int j = 0; j < L; j++) {
            const size_t ij = (size_t)i * L + j;
            const double pij = fabs((double)P[ij]);
            dS[ij] = pij * (G[ij] + R);
            ddS[ij] = dp[ij] * (G[ij] + R) + pij * (E[ij] + dR) + 3.0 * c * u * pij * (G[ij] + R);
        }
    }
    for (int i = 0; i < L; i++) /* dQ_i and dV_i (row i of the token-major buffer) */
        for (int e = 0; e < d; e++) {
            double prop = 0.0, mag = 0.0, vprop = 0.0, vmag = 0.0, kprop = 0.0, kmag = 0.0;
            for (int j = 0; j < L; j++) {
                const size_t ij = (size_t)i * L + j, ji = (size_t)j * L + i;
                prop += ddS[ij] * fabs(K(j, e)), mag += dS[ij] * fabs(K(j, e));
                kprop += ddS[ji] * fabs(Q(j, e)), kmag += dS[ji] * fabs(Q(j, e));
                vprop += KEEP(ji) * dp[ji] * fabs(DC(j, e)), vmag += KEEP(ji) * fabs((double)P[ji]) * fabs(DC(j, e));
            }
            double *row = bdqkv + ((size_t)b * L + i) * 3 * H + h * d + e;
            row[0] = scale * (prop + fl * mag) + 1e-30;
            row[H] = scale * (kprop + fl * kmag) + 1e-30;
            row[2 * H] = vprop + fl * vmag + 1e-30;
        }
#undef Q
#undef K
#undef V
#undef DC
#undef KEEP
    free(G), free(E), free(dS), free(ddS);
}

/* The bounds of the attention probabilities and context (conformance.h), per (sample, head) from the
 * inputs and the CPU's probabilities P (the stored |P|; a set sign bit marks a dropped one):
 *   scores s_ij = scale q_i . k_j, a dot product of d terms: |ds_ij| <= f_d scale sum_e |q_ie k_je|
 *     (f_d = hs_conf_dot_factor(d)) + 2 HS_CONF_C u32 (|s_ij| + |mask_j|) for the mask add and the max;
 *   softmax: |dp_ij| <= p_ij (|ds_ij| + sum_k p_ik |ds_ik|) + HS_CONF_C 32 u32 p_ij (exp, the division);
 *   ctx_ie = sum_j p'_ij v_je (p' = keep p / (1 - drop)), a dot product of L terms whose operand p' is
 *     off by keep |dp_ij| / (1 - drop): |dctx_ie| <= sum_j keep |dp_ij| |v_je| / (1 - drop)
 *     + f_L sum_j |p'_ij v_je|.
 * The backward pass (dctx given; every product a dot product with its own f, the errors of P above
 * carried through):
 *   dV_j = sum_i p'_ij dctx_i:  sum_i |dp'_ij| |dctx_i| + f_L sum_i |p'_ij dctx_i|;
 *   dP_ij = keep/(1 - drop) dctx_i . v_j:  |d dP_ij| <= keep/(1 - drop) f_d sum_e |dctx_ie v_je| (E_ij),
 *     |dP_ij| <= keep/(1 - drop) sum_e |dctx_ie v_je| (G_ij);
 *   R_i = sum_k p_ik dP_ik:  |dR_i| <= sum_k (|dp_ik| G_ik + p_ik E_ik) + c gamma_L sum_k p_ik G_ik;
 *   dS_ij = p_ij (dP_ij - R_i):  |d dS_ij| <= |dp_ij| (G_ij + |R|_i) + p_ij (E_ij + |dR_i|)
 *     + 3 c u32 p_ij (G_ij + |R|_i), with |R|_i = sum_k p_ik G_ik and |dS_ij| <= p_ij (G_ij + |R|_i);
 *   dQ_i = scale sum_j dS_ij k_j, dK_j = scale sum_i dS_ij q_i:  scale (sum |d dS| |k| + f_L sum |dS| |k|).
 * bdqkv may be NULL (forward only). */
static void attention_bounds(hs_conf *t, const float *qkv, const float *mask_bias, const float *probs,
                             const float *dctx, int batch, int L, int heads, int d, float p, int fused_tiles,
                             double *bp, double *bctx, double *bdqkv, double *blse) {
    const int H = heads * d;
    const double u = HS_CONF_U32, c = HS_CONF_C, scale = 1.0 / sqrt((double)d), fd = hs_conf_dot_factor(t, d),
                 fl = hs_conf_dot_factor(t, L), keep_scale = 1.0 / (1.0 - p);
    double *ds, *dp;
    HS_ALLOC(ds, (size_t)L), HS_ALLOC(dp, (size_t)L * L);
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < heads; h++) {
            const float *P = probs + ((size_t)b * heads + h) * L * L;
            for (int i = 0; i < L; i++) {
                const float *q = qkv + ((size_t)b * L + i) * 3 * H + h * d;
                double wsum = 0.0, smax = 0.0; /* smax: max |s_ij + mask_j| over the keys with P_ij != 0 */
                for (int j = 0; j < L; j++) {
                    const float *k = qkv + ((size_t)b * L + j) * 3 * H + H + h * d;
                    double sabs = 0.0, sval = 0.0;
                    for (int e = 0; e < d; e++) sabs += fabs((double)q[e] * k[e]), sval += (double)q[e] * k[e];
                    ds[j] = fd * scale * sabs + 2.0 * c * u * (fabs(sval * scale) + fabs((double)mask_bias[b * L + j]));
                    wsum += fabs((double)P[(size_t)i * L + j]) * ds[j];
                    if (P[(size_t)i * L + j] != 0.0f) smax = fmax(smax, fabs(sval * scale + mask_bias[b * L + j]));
                }
                /* fused (online softmax over fused_tiles key tiles): each tile rescales l and the output
                 * by alpha = e^{m_old - m_new} (an exp and a subtraction: 3 roundings, relative), the
                 * final O/l one more; the backward recomputes P = e^{s - lse} with lse = m + log l
                 * (|lse| <= smax + log L: the log, the add and the subtraction cost u (|lse| + |s|)
                 * absolute each, relative in P after the exp). A relative error of P, carried by dp. */
                const double lmag = smax + log((double)L),
                             rel = fused_tiles ? c * u * (3.0 * fused_tiles + 8.0 + 4.0 * lmag + 2.0 * smax) : 0.0;
                if (blse) blse[((size_t)b * heads + h) * L + i] = wsum + rel + 1e-30;
                for (int j = 0; j < L; j++) {
                    const double pij = fabs((double)P[(size_t)i * L + j]);
                    dp[(size_t)i * L + j] = pij * (ds[j] + wsum + rel) + c * HS_CONF_EW_ULPS * u * pij + 1e-30;
                    if (bp) bp[(((size_t)b * heads + h) * L + i) * L + j] = dp[(size_t)i * L + j];
                }
            }
            for (int i = 0; i < L; i++)
                for (int e = 0; e < d; e++) {
                    double prop = 0.0, mag = 0.0;
                    for (int j = 0; j < L; j++) {
                        const float pv = P[(size_t)i * L + j];
                        const double keep = signbit(pv) ? 0.0 : keep_scale,
                                     v = fabs((double)qkv[((size_t)b * L + j) * 3 * H + 2 * H + h * d + e]);
                        prop += keep * dp[(size_t)i * L + j] * v;
                        mag += keep * fabs((double)pv) * v;
                    }
                    bctx[((size_t)b * L + i) * H + h * d + e] = prop + fl * mag + 1e-30;
                }
            if (bdqkv)
                attention_backward_bounds(t, qkv, P, dp, dctx, fused_tiles ? bctx : NULL, b, h, L, heads, d, p, bdqkv);
        }
    free(ds), free(dp);
}

static void attention_case(hs_conf *t, int batch, int L, int heads, int d, float p) {
    char what[200];
    const int H = heads * d;
    const size_t nqkv = (size_t)batch * L * 3 * H, nctx = (size_t)batch * L * H,
                 nprobs = (size_t)batch * heads * L * L;
    const uint64_t key = 0x13198a2e03707344ULL;
    const int64_t first_sample = 11;
    float *qkv = hs_conf_rand(t, nqkv, -2, 2), *dctx = hs_conf_rand(t, nctx, -1, 1);
    const size_t njunk = nqkv > nprobs ? nqkv : nprobs;
    float *junk = hs_conf_rand(t, njunk, -1, 1); /* outputs start non-zero: they are overwritten */
    int32_t *mask = hs_conf_rand_int(t, (size_t)batch * L, 0, 4);
    float *mask_bias;
    HS_ALLOC(mask_bias, (size_t)batch * L);
    for (size_t i = 0; i < (size_t)batch * L; i++) mask_bias[i] = mask[i] == 0 ? -10000.0f : 0.0f; /* 1/4 masked */
    hs_conf_pair d_qkv = hs_conf_pair_of(t, qkv, nqkv * 4), d_mb = hs_conf_pair_of(t, mask_bias, (size_t)batch * L * 4);
    hs_conf_pair d_ctx = hs_conf_pair_of(t, junk, nctx * 4), d_probs = hs_conf_pair_of(t, junk, nprobs * 4);
    hs_conf_pair d_dctx = hs_conf_pair_of(t, dctx, nctx * 4), d_dqkv = hs_conf_pair_of(t, junk, nqkv * 4);
    void *ctx2 = cuda_copy_of(t, junk, nctx * 4), *probs2 = cuda_copy_of(t, NULL, nprobs * 4),
         *dqkv2 = cuda_copy_of(t, junk, nqkv * 4);

    t->cpu->attention_forward(t->cpu, d_ctx.cpu, d_probs.cpu, d_qkv.cpu, d_mb.cpu, batch, L, heads, d, p, key,
                              first_sample);
    t->cuda->attention_forward(t->cuda, d_ctx.cuda, d_probs.cuda, d_qkv.cuda, d_mb.cuda, batch, L, heads, d, p, key,
                               first_sample);
    t->cuda->attention_forward(t->cuda, ctx2, probs2, d_qkv.cuda, d_mb.cuda, batch, L, heads, d, p, key, first_sample);
    t->cpu->attention_backward(t->cpu, d_dqkv.cpu, d_dctx.cpu, d_qkv.cpu, d_probs.cpu, batch, L, heads, d, p, key,
                               first_sample);
    t->cuda->attention_backward(t->cuda, d_dqkv.cuda, d_dctx.cuda, d_qkv.cuda, d_probs.cuda, batch, L, heads, d, p,
                                key, first_sample);
    t->cuda->attention_backward(t->cuda, dqkv2, d_dctx.cuda, d_qkv.cuda, probs2, batch, L, heads, d, p, key,
                                first_sample);

    snprintf(what, sizeof what, "probs B=%d L=%d heads=%d d=%d p=%g", batch, L, heads, d, p);
    float *probs_cpu = hs_conf_download_f32(t->cpu, d_probs.cpu, nprobs);
    double *bp, *bctx, *bdqkv;
    HS_ALLOC(bp, nprobs), HS_ALLOC(bctx, nctx), HS_ALLOC(bdqkv, nqkv);
    attention_bounds(t, qkv, mask_bias, probs_cpu, dctx, batch, L, heads, d, p, 0, bp, bctx, bdqkv, NULL);
    hs_conf_check_bound(t, what, d_probs.cpu, d_probs.cuda, nprobs, bp);
    hs_conf_same_signs(t, what, d_probs.cpu, d_probs.cuda, nprobs);
    hs_conf_same_bits(t, what, d_probs.cuda, probs2, nprobs * 4);
    snprintf(what, sizeof what, "ctx B=%d L=%d heads=%d d=%d p=%g", batch, L, heads, d, p);
    hs_conf_check_bound(t, what, d_ctx.cpu, d_ctx.cuda, nctx, bctx);
    hs_conf_same_bits(t, what, d_ctx.cuda, ctx2, nctx * 4);
    snprintf(what, sizeof what, "dqkv B=%d L=%d heads=%d d=%d p=%g", batch, L, heads, d, p);
    hs_conf_check_bound(t, what, d_dqkv.cpu, d_dqkv.cuda, nqkv, bdqkv);
    free(probs_cpu), free(bp), free(bctx), free(bdqkv);
    hs_conf_same_bits(t, what, d_dqkv.cuda, dqkv2, nqkv * 4);

    hs_conf_pair_free(t, d_qkv), hs_conf_pair_free(t, d_mb), hs_conf_pair_free(t, d_ctx), hs_conf_pair_free(t, d_probs), hs_conf_pair_free(t, d_dctx),
        hs_conf_pair_free(t, d_dqkv);
    t->cuda->free(t->cuda, ctx2), t->cuda->free(t->cuda, probs2), t->cuda->free(t->cuda, dqkv2);
    free(qkv), free(dctx), free(junk), free(mask), free(mask_bias);
}

static void attention_cases(hs_conf *t) {
    static const int lens[] = {1, 5, 33}, dims[] = {8, 16};
    hs_conf_op(t, "attention_forward/backward");
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
            for (int pi = 0; pi < 2; pi++) attention_case(t, 2, lens[li], 2, dims[di], pi ? 0.1f : 0.0f);
    /* more heads than samples (the GEMMs batch over heads, one call per sample), and one sample */
    attention_case(t, 2, 20, 4, 8, 0.1f);
    attention_case(t, 1, 33, 3, 16, 0.1f);
    attention_case(t, 3, 7, 2, 8, 0.5f);
}

/* The fused attention (flash_attention_forward/backward): CUDA's ctx and dqkv against the CPU's UNFUSED
 * attention_forward/backward (the reference; its probabilities give the bounds), the CPU's fused op
 * against the same reference and the same bounds, CUDA's lse against the CPU fused op's; two CUDA runs
 * bit-identical. The bounds are attention_bounds' with the online softmax's extra roundings
 * (fused_tiles: the number of key tiles a row's softmax is rescaled over, L/16 rounded up covers every
 * tile size of kernels/flash_attention.cu). */
static const char *flash_variant = ""; /* the forward kernel the checks' names say, when not the default */

static void flash_attention_case(hs_conf *t, int batch, int L, int heads, int d, float p) {
    char what[200];
    const int H = heads * d;
    const size_t nqkv = (size_t)batch * L * 3 * H, nctx = (size_t)batch * L * H,
                 nprobs = (size_t)batch * heads * L * L, nlse = (size_t)batch * heads * L;
    const uint64_t key = 0x243f6a8885a308d3ULL;
    const int64_t first_sample = 5;
    float *qkv = hs_conf_rand(t, nqkv, -2, 2), *dctx = hs_conf_rand(t, nctx, -1, 1);
    float *junk = hs_conf_rand(t, nqkv, -1, 1); /* outputs start non-zero: they are overwritten */
    int32_t *mask = hs_conf_rand_int(t, (size_t)batch * L, 0, 4);
    float *mask_bias;
    HS_ALLOC(mask_bias, (size_t)batch * L);
    for (size_t i = 0; i < (size_t)batch * L; i++) mask_bias[i] = mask[i] == 0 ? -10000.0f : 0.0f; /* 1/4 masked */
    hs_conf_pair d_qkv = hs_conf_pair_of(t, qkv, nqkv * 4), d_mb = hs_conf_pair_of(t, mask_bias, (size_t)batch * L * 4);
    hs_conf_pair d_ctx = hs_conf_pair_of(t, junk, nctx * 4), d_dctx = hs_conf_pair_of(t, dctx, nctx * 4);
    hs_conf_pair d_dqkv = hs_conf_pair_of(t, junk, nqkv * 4), d_lse = hs_conf_pair_of(t, junk, nlse * 4);
    void *probs = hs_conf_dev(t->cpu, NULL, nprobs * 4), *fctx = hs_conf_dev(t->cpu, junk, nctx * 4),
         *fdqkv = hs_conf_dev(t->cpu, junk, nqkv * 4);
    void *ctx2 = cuda_copy_of(t, junk, nctx * 4), *lse2 = cuda_copy_of(t, junk, nlse * 4),
         *dqkv2 = cuda_copy_of(t, junk, nqkv * 4);

    /* the reference: the CPU's unfused op (d_ctx.cpu, d_dqkv.cpu); the CPU's fused op (fctx, d_lse.cpu, fdqkv) */
    t->cpu->attention_forward(t->cpu, d_ctx.cpu, probs, d_qkv.cpu, d_mb.cpu, batch, L, heads, d, p, key, first_sample);
    t->cpu->attention_backward(t->cpu, d_dqkv.cpu, d_dctx.cpu, d_qkv.cpu, probs, batch, L, heads, d, p, key,
                               first_sample);
    t->cpu->flash_attention_forward(t->cpu, fctx, d_lse.cpu, d_qkv.cpu, NULL, d_mb.cpu, batch, L, heads, d, p, key,
                                    first_sample, NULL, NULL);
    t->cpu->flash_attention_backward(t->cpu, fdqkv, d_dctx.cpu, d_qkv.cpu, NULL, d_mb.cpu, fctx, d_lse.cpu, batch, L, heads,
                                     d, p, key, first_sample, NULL);
    for (int run = 0; run < 2; run++) {
        float *c = run ? ctx2 : d_ctx.cuda, *l = run ? lse2 : d_lse.cuda, *g = run ? dqkv2 : d_dqkv.cuda;
        t->cuda->flash_attention_forward(t->cuda, c, l, d_qkv.cuda, NULL, d_mb.cuda, batch, L, heads, d, p, key,
                                         first_sample, NULL, NULL);
        t->cuda->flash_attention_backward(t->cuda, g, d_dctx.cuda, d_qkv.cuda, NULL, d_mb.cuda, c, l, batch, L, heads, d, p,
                                          key, first_sample, NULL);
    }

    /* under bf16/fp16, from q|k|v's 16-bit copy (as a model's 16-bit q|k|v product leaves it): the tiles hold
     * the same values, so the same bits as from the fp32 q|k|v, forward and backward */
    if (t->precision == HS_PRECISION_BF16 || t->precision == HS_PRECISION_FP16) {
        uint16_t *qkv16 = cuda_copy_of(t, junk, nqkv * sizeof(uint16_t));
        float *c16 = cuda_copy_of(t, junk, nctx * 4), *l16 = cuda_copy_of(t, junk, nlse * 4),
              *g16 = cuda_copy_of(t, junk, nqkv * 4);
        t->cuda->to_half(t->cuda, qkv16, d_qkv.cuda, nqkv);
        t->cuda->flash_attention_forward(t->cuda, c16, l16, d_qkv.cuda, qkv16, d_mb.cuda, batch, L, heads, d, p, key,
                                         first_sample, NULL, NULL);
        t->cuda->flash_attention_backward(t->cuda, g16, d_dctx.cuda, d_qkv.cuda, qkv16, d_mb.cuda, c16, l16, batch, L,
                                          heads, d, p, key, first_sample, NULL);
        snprintf(what, sizeof what, "%sfrom q|k|v's 16-bit copy: ctx, lse, dqkv B=%d L=%d heads=%d d=%d p=%g",
                 flash_variant, batch, L, heads, d, p);
        hs_conf_same_bits(t, what, d_ctx.cuda, c16, nctx * 4);
        hs_conf_same_bits(t, what, d_lse.cuda, l16, nlse * 4);
        hs_conf_same_bits(t, what, d_dqkv.cuda, g16, nqkv * 4);
        t->cuda->free(t->cuda, qkv16), t->cuda->free(t->cuda, c16), t->cuda->free(t->cuda, l16),
            t->cuda->free(t->cuda, g16);
    }

    float *probs_cpu = hs_conf_download_f32(t->cpu, probs, nprobs);
    double *bctx, *bdqkv, *blse;
    HS_ALLOC(bctx, nctx), HS_ALLOC(bdqkv, nqkv), HS_ALLOC(blse, nlse);
    attention_bounds(t, qkv, mask_bias, probs_cpu, dctx, batch, L, heads, d, p, (L + 15) / 16, NULL, bctx, bdqkv,
                     blse);
    snprintf(what, sizeof what, "%sctx B=%d L=%d heads=%d d=%d p=%g", flash_variant, batch, L, heads, d, p);
    hs_conf_check_bound(t, what, d_ctx.cpu, d_ctx.cuda, nctx, bctx);
    hs_conf_same_bits(t, what, d_ctx.cuda, ctx2, nctx * 4);
    snprintf(what, sizeof what, "%slse B=%d L=%d heads=%d d=%d p=%g", flash_variant, batch, L, heads, d, p);
    hs_conf_check_bound(t, what, d_lse.cpu, d_lse.cuda, nlse, blse);
    hs_conf_same_bits(t, what, d_lse.cuda, lse2, nlse * 4);
    snprintf(what, sizeof what, "%sdqkv B=%d L=%d heads=%d d=%d p=%g", flash_variant, batch, L, heads, d, p);
    hs_conf_check_bound(t, what, d_dqkv.cpu, d_dqkv.cuda, nqkv, bdqkv);
    hs_conf_same_bits(t, what, d_dqkv.cuda, dqkv2, nqkv * 4);
    /* the CPU's fused op against the CPU's unfused one, the same bounds (compared as CPU buffers) */
    const hs_backend *cuda = t->cuda;
    t->cuda = t->cpu;
    snprintf(what, sizeof what, "cpu fused ctx B=%d L=%d heads=%d d=%d p=%g", batch, L, heads, d, p);
    hs_conf_check_bound(t, what, d_ctx.cpu, fctx, nctx, bctx);
    snprintf(what, sizeof what, "cpu fused dqkv B=%d L=%d heads=%d d=%d p=%g", batch, L, heads, d, p);
    hs_conf_check_bound(t, what, d_dqkv.cpu, fdqkv, nqkv, bdqkv);
    t->cuda = cuda;
    free(probs_cpu), free(bctx), free(bdqkv), free(blse);

    hs_conf_pair_free(t, d_qkv), hs_conf_pair_free(t, d_mb), hs_conf_pair_free(t, d_ctx), hs_conf_pair_free(t, d_dctx),
        hs_conf_pair_free(t, d_dqkv), hs_conf_pair_free(t, d_lse);
    t->cpu->free(t->cpu, probs), t->cpu->free(t->cpu, fctx), t->cpu->free(t->cpu, fdqkv);
    t->cuda->free(t->cuda, ctx2), t->cuda->free(t->cuda, lse2), t->cuda->free(t->cuda, dqkv2);
    free(qkv), free(dctx), free(junk), free(mask), free(mask_bias);
}

static void flash_attention_cases(hs_conf *t) {
    static const int lens[] = {1, 7, 33, 129}, dims[] = {8, 64};
    hs_conf_op(t, "flash_attention_forward/backward");
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++)
            for (int pi = 0; pi < 2; pi++) flash_attention_case(t, 2, lens[li], 2, dims[di], pi ? 0.1f : 0.0f);
    /* head_dim not a multiple of 16 (zero padding), the DMAX = 128 tiles, long rows with a small batch */
    flash_attention_case(t, 2, 33, 3, 40, 0.1f);
    flash_attention_case(t, 1, 20, 2, 72, 0.0f);
    flash_attention_case(t, 1, 9, 1, 128, 0.1f);
    flash_attention_case(t, 1, 512, 1, 16, 0.1f);
    flash_attention_case(t, 1, 512, 1, 64, 0.0f);
    /* CUDA's WMMA forward, which the register-fragment forward replaces under bf16/fp16 at head_dim <= 64 on
     * sm_80 and later and which HETSEQ_FLASH_KERNELS=wmma keeps (kernels/flash_attention.cu): some of the
     * same cases, so both forwards stay checked (other precisions and head_dim > 64 run it above) */
    if (t->precision == HS_PRECISION_BF16 || t->precision == HS_PRECISION_FP16) {
        const char *was = getenv("HETSEQ_FLASH_KERNELS");
        char *saved = was ? strdup(was) : NULL;
        setenv("HETSEQ_FLASH_KERNELS", "wmma", 1);
        flash_variant = "WMMA forward: ";
        flash_attention_case(t, 2, 33, 2, 64, 0.1f);
        flash_attention_case(t, 2, 129, 2, 8, 0.0f);
        flash_attention_case(t, 2, 33, 3, 40, 0.1f);
        flash_attention_case(t, 1, 512, 1, 64, 0.0f);
        flash_variant = "";
        if (saved)
            setenv("HETSEQ_FLASH_KERNELS", saved, 1), free(saved);
        else
            unsetenv("HETSEQ_FLASH_KERNELS");
    }
}

void hs_conf_group_flash_attention(hs_conf *t) { flash_attention_cases(t); }

void hs_conf_group_attention(hs_conf *t) { attention_cases(t); }

void hs_conf_group_gelu(hs_conf *t) { activation_cases(t, 1); }

void hs_conf_group_elementwise_attention(hs_conf *t) {
    bias_cases(t);
    convert_cases(t);
    activation_cases(t, 0);
    dropout_cases(t);
    relu_dropout_cases(t);
    pool_cases(t);
    rows_cases(t);
    attention_cases(t);
    flash_attention_cases(t);
}
