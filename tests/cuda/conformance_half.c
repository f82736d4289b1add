/* Conformance cases of the seam's 16-bit storage conversions (to_half, from_half: kernels/lowp.cu
 * against src/backend/cpu/cpu_lowp.c) under bf16 and fp16: the CUDA results must equal the CPU's
 * BIT FOR BIT (both use src/util/lowp.h), on random values of every magnitude and on the edge cases of
 * the roundings (±0, ties, fp16 subnormals and overflow, infinities, NaN), for the element-wise sizes;
 * from_half on every one of the 65 536 bit patterns.
 * And register_params: products whose weights lie in a registered parameter arena read its 16-bit
 * copy (src/backend/cuda/cuda_shadow.c) and must give the same bits as the products of an unregistered
 * copy of the weights (converted per product) after every way the arena changes, while converting
 * fewer operands. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_internal.h"
#include "conformance.h"
#include "util/check.h"
#include "util/lowp.h"

/* bytes of the CPU's and CUDA's results, equal or a failure naming the first differing element */
static void same_bits(hs_conf *t, const char *what, const void *cpu_dev, const void *cuda_dev, size_t n, size_t elem) {
    unsigned char *a = hs_conf_fetch(t->cpu, cpu_dev, n * elem), *b = hs_conf_fetch(t->cuda, cuda_dev, n * elem);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i * elem, b + i * elem, elem) && !bad++) first = i;
    t->checks++;
    if (bad) {
        t->failures++;
        uint32_t x = 0, y = 0;
        memcpy(&x, a + first * elem, elem);
        memcpy(&y, b + first * elem, elem);
        printf("FAIL %s: %s: %zu of %zu values differ; first at [%zu]: cpu 0x%x cuda 0x%x\n", t->op, what, bad, n,
               first, (unsigned)x, (unsigned)y);
    }
    free(a), free(b);
}

/* Values that exercise the roundings: both signs of zero, ties of bf16 and fp16, the fp16 overflow
 * threshold 65520 and the subnormal range, infinities and NaN; the rest random over many magnitudes. */
static float *edge_values(hs_conf *t, size_t n) {
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x3f808000u, 0x3f818000u, 0x3f800001u, 0x3f807fffu,
                                       0x477fe000u, 0x477ff000u, 0x477fefffu, 0xc77ff000u, 0x33000000u, 0x33000001u,
                                       0x33800000u, 0x387fc000u, 0x38800000u, 0x00000001u, 0x7f7fffffu, 0xff7fffffu,
                                       0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u};
    float *x = hs_conf_rand(t, n, -1, 1);
    float *e = hs_conf_rand(t, n, -40, 40);
    for (size_t i = 0; i < n; i++) x[i] = ldexpf(x[i], (int)e[i]); /* 2^-40 .. 2^40 */
    for (size_t i = 0; i < n && i < sizeof special / sizeof special[0]; i++) memcpy(&x[i], &special[i], 4);
    free(e);
    return x;
}

static void half_cases(hs_conf *t) {
    char what[96];
    hs_conf_op(t, t->precision == HS_PRECISION_BF16 ? "to_half/from_half (bf16)" : "to_half/from_half (fp16)");
    for (int s = 0; s < hs_conf_nsizes; s++) {
        const size_t n = hs_conf_sizes[s];
        float *x = edge_values(t, n);
        void *x0, *x1, *h0, *h1, *y0, *y1;
        hs_conf_both(t, x, n * sizeof(float), &x0, &x1);
        hs_conf_both(t, NULL, n * sizeof(uint16_t), &h0, &h1);
        hs_conf_both(t, NULL, n * sizeof(float), &y0, &y1);
        t->cpu->to_half(t->cpu, h0, x0, n);
        t->cuda->to_half(t->cuda, h1, x1, n);
        snprintf(what, sizeof what, "to_half n=%zu", n);
        same_bits(t, what, h0, h1, n, sizeof(uint16_t));
        /* widening the CPU's 16-bit values on both devices */
        uint16_t *hh = hs_conf_fetch(t->cpu, h0, n * sizeof(uint16_t));
        t->cuda->upload(t->cuda, h1, hh, n * sizeof(uint16_t));
        t->cpu->from_half(t->cpu, y0, h0, n);
        t->cuda->from_half(t->cuda, y1, h1, n);
        snprintf(what, sizeof what, "from_half(to_half(x)) n=%zu", n);
        same_bits(t, what, y0, y1, n, sizeof(float));
        if (n > 1) { /* one element in: pointers off the 16-byte steps of the vector path */
            t->cpu->to_half(t->cpu, (uint16_t *)h0 + 1, (const float *)x0 + 1, n - 1);
            t->cuda->to_half(t->cuda, (uint16_t *)h1 + 1, (const float *)x1 + 1, n - 1);
            t->cpu->from_half(t->cpu, (float *)y0 + 1, (const uint16_t *)h0 + 1, n - 1);
            t->cuda->from_half(t->cuda, (float *)y1 + 1, (const uint16_t *)h1 + 1, n - 1);
            snprintf(what, sizeof what, "to_half, from_half unaligned n=%zu", n - 1);
            same_bits(t, what, y0, y1, n, sizeof(float));
            same_bits(t, what, h0, h1, n, sizeof(uint16_t));
        }
        free(hh), free(x);
        hs_conf_free_both(t, x0, x1), hs_conf_free_both(t, h0, h1), hs_conf_free_both(t, y0, y1);
    }
    /* every 16-bit pattern, NaN payloads included */
    const size_t n = 65536;
    uint16_t *all;
    HS_ALLOC(all, n);
    for (size_t i = 0; i < n; i++) all[i] = (uint16_t)i;
    void *h0, *h1, *y0, *y1;
    hs_conf_both(t, all, n * sizeof(uint16_t), &h0, &h1);
    hs_conf_both(t, NULL, n * sizeof(float), &y0, &y1);
    t->cpu->from_half(t->cpu, y0, h0, n);
    t->cuda->from_half(t->cuda, y1, h1, n);
    same_bits(t, "from_half of every 16-bit pattern", y0, y1, n, sizeof(float));
    hs_conf_free_both(t, h0, h1), hs_conf_free_both(t, y0, y1);
    free(all);
}

/* convert_halves: a batch of conversions both ways (sizes from 0 to 4097, aligned for the vector steps
 * and not) in one op: the CPU's and CUDA's outputs bit for bit, and CUDA's the same bits as its to_half /
 * from_half one at a time. */
static void convert_halves_cases(hs_conf *t) {
    hs_conf_op(t, t->precision == HS_PRECISION_BF16 ? "convert_halves (bf16)" : "convert_halves (fp16)");
    enum { N = 7 };
    static const size_t count[N] = {4097, 1000, 127, 33, 0, 1, 256};
    static const int to16[N] = {1, 0, 1, 0, 1, 0, 1}, off[N] = {0, 0, 1, 1, 0, 0, 3};
    void *f[3][N], *h[3][N]; /* [cpu, cuda batch, cuda one at a time][conversion], off elements in */
    hs_half_conversion c[3][N];
    char what[96];
    for (int k = 0; k < N; k++) {
        const size_t n = count[k] + (size_t)off[k];
        float *x = edge_values(t, n ? n : 1);
        uint16_t *u;
        HS_ALLOC(u, n ? n : 1);
        for (size_t i = 0; i < n; i++) u[i] = (uint16_t)((i * 2654435761u + (size_t)k * 40503u) >> 7);
        for (int r = 0; r < 3; r++) {
            const hs_backend *be = r ? t->cuda : t->cpu;
            f[r][k] = hs_conf_dev(be, x, (n ? n : 1) * sizeof(float));
            h[r][k] = hs_conf_dev(be, u, (n ? n : 1) * sizeof(uint16_t));
            c[r][k] = (hs_half_conversion){(float *)f[r][k] + off[k], (uint16_t *)h[r][k] + off[k], count[k], to16[k]};
        }
        free(x), free(u);
    }
    t->cpu->convert_halves(t->cpu, c[0], N);
    t->cuda->convert_halves(t->cuda, c[1], N);
    for (int k = 0; k < N; k++) {
        if (to16[k]) t->cuda->to_half(t->cuda, c[2][k].h, c[2][k].f, c[2][k].n);
        else t->cuda->from_half(t->cuda, c[2][k].f, c[2][k].h, c[2][k].n);
    }
    for (int k = 0; k < N; k++) {
        const size_t n = count[k] + (size_t)off[k];
        snprintf(what, sizeof what, "conversion %d (%s, n=%zu, %d in): CPU against CUDA", k,
                 to16[k] ? "to_half" : "from_half", count[k], off[k]);
        same_bits(t, what, f[0][k], f[1][k], n, sizeof(float));
        same_bits(t, what, h[0][k], h[1][k], n, sizeof(uint16_t));
        snprintf(what, sizeof what, "conversion %d (%s, n=%zu, %d in): batch against one at a time", k,
                 to16[k] ? "to_half" : "from_half", count[k], off[k]);
        hs_conf_same_bits(t, what, f[1][k], f[2][k], n * sizeof(float));
        hs_conf_same_bits(t, what, h[1][k], h[2][k], n * sizeof(uint16_t));
        for (int r = 0; r < 3; r++) {
            const hs_backend *be = r ? t->cuda : t->cpu;
            be->free(be, f[r][k]), be->free(be, h[r][k]);
        }
    }
}

/* The weights of the register_params cases: a two-tensor table, w [N,K] at 0 and v [K,M] after it,
 * in a registered arena and in an unregistered mirror of the same layout; x [M,K] and dy [M,N] are
 * activations. */
enum { SH_M = 24, SH_K = 40, SH_N = 56, SH_W = SH_N * SH_K, SH_V = SH_K * SH_M, SH_TOTAL = SH_W + SH_V + 16 };

/* The three products on the arena and on the mirror, bit for bit; `converts` counts the operand
 * conversions each makes: x·wᵀ and dy·w read w from the copy (1 conversion, not 2), w·v none. */
static void shadow_products(hs_conf *t, const char *stage, float *arena, float *mirror, const float *x,
                            const float *dy, float *out[2]) {
    const hs_backend *be = t->cuda;
    char what[128];
    static const struct {
        const char *name;
        int ta, tb, m, n, k, a_param, lda, ldb, arena_converts;
    } p[] = {{"y = x·wᵀ", 0, 1, SH_M, SH_N, SH_K, 0, SH_K, SH_K, 1},
             {"dx = dy·w", 0, 0, SH_M, SH_K, SH_N, 0, SH_N, SH_K, 1},
             {"z = w·v", 0, 0, SH_N, SH_M, SH_K, 1, SH_K, SH_M, 0}};
    for (int i = 0; i < 3; i++) {
        for (int side = 0; side < 2; side++) {
            float *base = side ? mirror : arena;
            const float *a = p[i].a_param ? base : i == 0 ? x : dy;
            const float *b = p[i].a_param ? base + SH_W : base;
            const size_t before = hs_cuda_gemm_conversions();
            be->gemm(be, p[i].ta, p[i].tb, p[i].m, p[i].n, p[i].k, 1.0f, a, p[i].lda, b, p[i].ldb, 0.0f, out[side],
                     p[i].n);
            const size_t made = hs_cuda_gemm_conversions() - before, want = side ? 2 : (size_t)p[i].arena_converts;
            t->checks++;
            if (made != want) {
                hs_conf_fail(t);
                printf("FAIL %s: %s after %s: %zu operand conversions on the %s, expected %zu\n", t->op, p[i].name,
                       stage, made, side ? "unregistered mirror" : "registered arena", want);
            }
        }
        snprintf(what, sizeof what, "%s after %s: registered arena against its mirror", p[i].name, stage);
        hs_conf_same_bits(t, what, out[0], out[1], (size_t)p[i].m * p[i].n * sizeof(float));
        float *o = hs_conf_download_f32(be, out[0], (size_t)p[i].m * p[i].n); /* NaNs would match as bits */
        size_t bad = 0;
        for (size_t e = 0; e < (size_t)p[i].m * p[i].n; e++) bad += !isfinite(o[e]);
        t->checks++;
        if (bad) {
            hs_conf_fail(t);
            printf("FAIL %s: %s after %s: %zu values not finite\n", t->op, p[i].name, stage, bad);
        }
        free(o);
    }
}

static void shadow_cases(hs_conf *t) {
    const hs_backend *be = t->cuda;
    hs_conf_op(t, t->precision == HS_PRECISION_BF16 ? "register_params (bf16)" : "register_params (fp16)");
    const hs_tensor_span spans[2] = {{.offset = 0, .numel = SH_W, .decay = 1}, {.offset = SH_W, .numel = SH_V}};
    hs_tensor_span *table = hs_conf_dev(be, spans, sizeof spans);
    float *w0 = hs_conf_rand(t, SH_TOTAL, -1, 1), *g = hs_conf_rand(t, SH_TOTAL, -0.1f, 0.1f);
    float *xh = hs_conf_rand(t, SH_M * SH_K, -1, 1), *dyh = hs_conf_rand(t, SH_M * SH_N, -1, 1);
    float *arena = be->alloc(be, SH_TOTAL * sizeof(float)), *mirror = be->alloc(be, SH_TOTAL * sizeof(float));
    be->register_params(be, arena, SH_TOTAL);
    float *x = hs_conf_dev(be, xh, sizeof(float) * SH_M * SH_K), *dy = hs_conf_dev(be, dyh, sizeof(float) * SH_M * SH_N);
    float *gd = hs_conf_dev(be, g, SH_TOTAL * sizeof(float)), *out[2], *state[2][2];
    for (int s = 0; s < 2; s++) {
        out[s] = be->alloc(be, (size_t)SH_N * SH_M * sizeof(float));
        for (int k = 0; k < 2; k++) state[s][k] = be->alloc(be, SH_TOTAL * sizeof(float));
    }
    double *norms = be->alloc(be, 4 * sizeof(double));
    float *bufs[2] = {arena, mirror};
    /* uploaded weights (initialisation, a checkpoint load): the first product converts the arena once */
    for (int s = 0; s < 2; s++) be->upload(be, bufs[s], w0, SH_TOTAL * sizeof(float));
    shadow_products(t, "upload", arena, mirror, x, dy, out);
    /* every optimizer writes the copy as it updates the master */
    for (int opt = 0; opt < 4; opt++) {
        static const char *const names[] = {"adam_update", "adadelta_update", "sgd_update", "lamb_update"};
        const hs_adam_hparams ah = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01,
                                    .step = 1, .decoupled = 1};
        const hs_lamb_hparams lh = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-6, .weight_decay = 0.01,
                                    .grad_divisor = 1.0, .step = 1};
        for (int s = 0; s < 2; s++) {
            float *p = bufs[s];
            for (int k = 0; k < 2; k++) be->zero(be, state[s][k], SH_TOTAL * sizeof(float)); /* a first step */
            if (opt == 0) be->adam_update(be, p, gd, state[s][0], state[s][1], table, 2, &ah);
            if (opt == 1) be->adadelta_update(be, p, gd, state[s][0], state[s][1], table, 2, 1.0, 0.9, 1e-6, 0.01);
            if (opt == 2) be->sgd_update(be, p, gd, state[s][0], table, 2, 0.1, 0.9, 0.01, 0);
            if (opt == 3) be->lamb_update(be, p, gd, state[s][0], state[s][1], table, 2, norms, &lh);
        }
        shadow_products(t, names[opt], arena, mirror, x, dy, out);
    }
    /* writes other than an optimizer's make the next product reconvert the arena */
    for (int s = 0; s < 2; s++) be->upload(be, bufs[s] + SH_W, g, SH_V * sizeof(float));
    shadow_products(t, "an upload into v", arena, mirror, x, dy, out);
    for (int s = 0; s < 2; s++) be->copy(be, bufs[s] + 8, dy, 100 * sizeof(float));
    shadow_products(t, "a copy into w", arena, mirror, x, dy, out);
    for (int s = 0; s < 2; s++) be->zero(be, bufs[s] + SH_W - 40, 80 * sizeof(float));
    shadow_products(t, "zeroing across w and v", arena, mirror, x, dy, out);
    for (int s = 0; s < 2; s++) be->scale_tensors(be, bufs[s], 3.0f, table, 2);
    shadow_products(t, "scale_tensors", arena, mirror, x, dy, out);
    hs_conf_same_bits(t, "the fp32 masters", arena, mirror, SH_TOTAL * sizeof(float));
    /* freed, the registration ends: a buffer allocated in its place is converted like any other */
    be->free(be, arena);
    arena = be->alloc(be, SH_TOTAL * sizeof(float));
    const size_t before = hs_cuda_gemm_conversions();
    be->gemm(be, 0, 1, SH_M, SH_N, SH_K, 1.0f, x, SH_K, arena, SH_K, 0.0f, out[0], SH_N);
    t->checks++;
    if (hs_cuda_gemm_conversions() - before != 2) {
        hs_conf_fail(t);
        printf("FAIL %s: a buffer allocated after the arena was freed is still read from its copy\n", t->op);
    }
    be->synchronize(be);
    for (int s = 0; s < 2; s++) {
        be->free(be, out[s]);
        for (int k = 0; k < 2; k++) be->free(be, state[s][k]);
    }
    be->free(be, arena), be->free(be, mirror), be->free(be, x), be->free(be, dy), be->free(be, gd);
    be->free(be, norms), be->free(be, table);
    free(w0), free(g), free(xh), free(dyh);
}

/* ---- the producers' optional 16-bit outputs and the GEMMs' 16-bit twins (bind_half) ---------------------
 * On each backend: an op run with its 16-bit outputs writes the same fp32 bits as without them, and each
 * 16-bit output is to_half of the fp32 output it goes with, bit for bit. On CUDA: a GEMM whose operands
 * are bound to such twins converts nothing and gives the bits of the GEMM that converts them; a write by a
 * memory op ends the binding (the next GEMM converts again). */


/* round(f[n]) by to_half equals h[n] */
static void is_rounding(hs_conf *t, const hs_backend *be, const char *what, const uint16_t *h, const float *f,
                        size_t n) {
    uint16_t *r = be->alloc(be, n * sizeof *r);
    be->to_half(be, r, f, n);
    hs_conf_same_on(t, be, what, h, r, n * sizeof *r);
    be->free(be, r);
}

static void outputs16_on(hs_conf *t, const hs_backend *be, int rows, int cols) {
    const size_t n = (size_t)rows * (size_t)cols;
    float *hx = hs_conf_rand(t, n, -3, 3), *hr = hs_conf_rand(t, n, -3, 3), *hg = hs_conf_rand(t, (size_t)cols, 0.5f, 1.5f);
    float *hb = hs_conf_rand(t, (size_t)cols, -1, 1);
    float *x = hs_conf_dev(be, hx, n * 4), *res = hs_conf_dev(be, hr, n * 4), *gamma = hs_conf_dev(be, hg, (size_t)cols * 4);
    float *beta = hs_conf_dev(be, hb, (size_t)cols * 4);
    float *y[2], *sum[2], *mean[2], *rstd[2], *da[2], *dx[2], *dg[2], *db[2], *u[2], *g[2], *ru[2], *rd[2];
    uint16_t *y16 = be->alloc(be, n * 2), *da16 = be->alloc(be, n * 2), *u16 = be->alloc(be, n * 2),
             *g16 = be->alloc(be, n * 2), *d16 = be->alloc(be, n * 2), *ru16 = be->alloc(be, n * 2),
             *rd16 = be->alloc(be, n * 2);
    float *gy = be->alloc(be, n * 4); /* gelu_backward's recomputed GELU output, and its rounding */
    uint16_t *gy16 = be->alloc(be, n * 2);
    /* gelu_backward from the pre-activation widened into memory [0] and from its 16-bit copy (x16) [1] */
    float *uw = be->alloc(be, n * 4), *wdx[2], *wy[2];
    uint16_t *wdx16[2], *wy16[2];
    for (int k = 0; k < 2; k++)
        wdx[k] = be->alloc(be, n * 4), wy[k] = be->alloc(be, n * 4), wdx16[k] = be->alloc(be, n * 2),
        wy16[k] = be->alloc(be, n * 2);
    for (int k = 0; k < 2; k++) {
        y[k] = be->alloc(be, n * 4), sum[k] = hs_conf_dev(be, hx, n * 4), mean[k] = be->alloc(be, (size_t)rows * 4);
        rstd[k] = be->alloc(be, (size_t)rows * 4), da[k] = be->alloc(be, n * 4), dx[k] = hs_conf_dev(be, hr, n * 4);
        dg[k] = be->alloc(be, (size_t)cols * 4), db[k] = be->alloc(be, (size_t)cols * 4);
        u[k] = hs_conf_dev(be, hx, n * 4), g[k] = be->alloc(be, n * 4);
        ru[k] = be->alloc(be, n * 4), rd[k] = be->alloc(be, n * 4);
    }
    for (int drop = 0; drop < 2; drop++) {
        const float p = drop ? 0.1f : 0.0f;
        char what[160];
        for (int k = 0; k < 2; k++) { /* k = 1 with the 16-bit outputs */
            be->copy(be, sum[k], x, n * 4);
            be->copy(be, dx[k], res, n * 4);
            be->dropout_add_layernorm_forward(be, y[k], sum[k], mean[k], rstd[k], sum[k], res, gamma, beta, rows, cols,
                                              1e-12f, rows, (size_t)cols, 1, p, 99, 3, k ? y16 : NULL);
            be->layernorm_dropout_backward(be, dx[k], da[k], dg[k], db[k], dx[k], sum[k], mean[k], rstd[k], gamma,
                                           rows, cols, rows, (size_t)cols, 1, p, 99, 3, k ? da16 : NULL);
            be->copy(be, u[k], x, n * 4);
            be->bias_gelu_forward(be, g[k], u[k], beta, rows, cols, k ? u16 : NULL, k ? g16 : NULL);
            /* with u16 the pre-activation went into u16 only: u[1] is still x; both read u[0] */
            be->gelu_backward(be, dx[k], dx[k], u[0], NULL, n, k ? d16 : NULL, k ? gy : NULL, k ? gy16 : NULL);
            be->relu_dropout_forward(be, ru[k], x, rows, (size_t)cols, p, 99, 3, k ? ru16 : NULL);
            be->relu_dropout_backward(be, rd[k], res, ru[k], rows, (size_t)cols, p, 99, 3, k ? rd16 : NULL);
        }
        snprintf(what, sizeof what, "rows=%d cols=%d p=%g", rows, cols, p);
        const char *names[] = {"dropout_add_layernorm_forward y", "layernorm_dropout_backward da",
                               "bias_gelu_forward x", "bias_gelu_forward y", "gelu_backward dx",
                               "relu_dropout_forward y", "relu_dropout_backward dx"};
        float *f0[] = {y[0], da[0], u[0], g[0], dx[0], ru[0], rd[0]}, *f1[] = {y[1], da[1], u[1], g[1], dx[1], ru[1], rd[1]};
        uint16_t *h[] = {y16, da16, u16, g16, d16, ru16, rd16};
        for (int o = 0; o < 7; o++) {
            char w[256];
            if (o == 2) { /* bias_gelu_forward with x16: the pre-activation only in x16; x as it was */
                snprintf(w, sizeof w, "bias_gelu_forward x with x16: unchanged %s", what);
                hs_conf_same_on(t, be, w, x, u[1], n * 4);
                snprintf(w, sizeof w, "bias_gelu_forward x16 = to_half(x + bias) %s", what);
                is_rounding(t, be, w, u16, u[0], n);
                continue;
            }
            snprintf(w, sizeof w, "%s (fp32, with and without the 16-bit output) %s", names[o], what);
            hs_conf_same_on(t, be, w, f0[o], f1[o], n * 4);
            snprintf(w, sizeof w, "%s16 = to_half(%s) %s", names[o], names[o], what);
            is_rounding(t, be, w, h[o], f1[o], n);
        }
        /* the GELU output recomputed by the backward: bias_gelu_forward's y of the same x, and its rounding */
        char w[256];
        snprintf(w, sizeof w, "gelu_backward y = bias_gelu_forward y %s", what);
        hs_conf_same_on(t, be, w, gy, g[1], n * 4);
        snprintf(w, sizeof w, "gelu_backward y16 = to_half(y) %s", what);
        is_rounding(t, be, w, gy16, gy, n);
        /* from the 16-bit pre-activation u16 (x16): every output the bits of the same op on u16 widened */
        const hs_half_conversion widen = {uw, u16, n, 0};
        be->convert_halves(be, &widen, 1);
        be->gelu_backward(be, wdx[0], res, uw, NULL, n, wdx16[0], wy[0], wy16[0]);
        be->gelu_backward(be, wdx[1], res, NULL, u16, n, wdx16[1], wy[1], wy16[1]);
        const char *wnames[] = {"dx", "dx16", "y", "y16"};
        const void *w0[] = {wdx[0], wdx16[0], wy[0], wy16[0]}, *w1[] = {wdx[1], wdx16[1], wy[1], wy16[1]};
        for (int o = 0; o < 4; o++) {
            snprintf(w, sizeof w, "gelu_backward %s from x16 = from x16 widened %s", wnames[o], what);
            hs_conf_same_on(t, be, w, w0[o], w1[o], n * (o % 2 ? 2 : 4));
        }
        /* the 16-bit dataflow: the fp32 outputs left out (NULL), the 16-bit ones the same bits as above */
        for (int with_x16 = 0; with_x16 < 2; with_x16++) {
            be->copy(be, u[1], x, n * 4);
            be->bias_gelu_forward(be, NULL, u[1], beta, rows, cols, with_x16 ? ru16 : NULL, rd16);
            snprintf(w, sizeof w, "bias_gelu_forward y16 without y (x16 %s) = with y %s", with_x16 ? "on" : "off", what);
            hs_conf_same_on(t, be, w, g16, rd16, n * 2);
            snprintf(w, sizeof w, "bias_gelu_forward %s without y = with y %s", with_x16 ? "x16" : "x", what);
            if (with_x16)
                hs_conf_same_on(t, be, w, u16, ru16, n * 2);
            else
                hs_conf_same_on(t, be, w, u[0], u[1], n * 4);
        }
        /* relu_dropout_forward/backward without the fp32 output: the 16-bit one the same bits */
        uint16_t *r16[4] = {be->alloc(be, n * 2), be->alloc(be, n * 2), be->alloc(be, n * 2), be->alloc(be, n * 2)};
        be->relu_dropout_forward(be, wy[0], x, rows, (size_t)cols, p, 99, 3, r16[0]);
        be->relu_dropout_forward(be, NULL, x, rows, (size_t)cols, p, 99, 3, r16[1]);
        be->relu_dropout_backward(be, wy[1], res, wy[0], rows, (size_t)cols, p, 99, 3, r16[2]);
        be->copy(be, wdx[0], res, n * 4);
        be->relu_dropout_backward(be, NULL, wdx[0], wy[0], rows, (size_t)cols, p, 99, 3, r16[3]);
        snprintf(w, sizeof w, "relu_dropout_forward y16 without y = with y %s", what);
        hs_conf_same_on(t, be, w, r16[0], r16[1], n * 2);
        snprintf(w, sizeof w, "relu_dropout_backward dx16 without dx = with dx %s", what);
        hs_conf_same_on(t, be, w, r16[2], r16[3], n * 2);
        snprintf(w, sizeof w, "relu_dropout_backward without dx leaves dy as it was %s", what);
        hs_conf_same_on(t, be, w, res, wdx[0], n * 4);
        for (int k = 0; k < 4; k++) be->free(be, r16[k]);
        /* layernorm_dropout_backward without da: da16, dx and the parameter sums the bits of the call with da */
        float *ldx[2] = {hs_conf_dev(be, hr, n * 4), hs_conf_dev(be, hr, n * 4)}, *lda = be->alloc(be, n * 4);
        float *lg = be->alloc(be, (size_t)cols * 16);
        uint16_t *l16[2] = {ru16, rd16};
        be->zero(be, lg, (size_t)cols * 16);
        for (int k = 0; k < 2; k++)
            be->layernorm_dropout_backward(be, ldx[k], k ? NULL : lda, lg + 2 * k * cols, lg + (2 * k + 1) * cols,
                                           ldx[k], sum[1], mean[1], rstd[1], gamma, rows, cols, rows, (size_t)cols, 1,
                                           p, 99, 3, l16[k]);
        snprintf(w, sizeof w, "layernorm_dropout_backward da16 without da = with da %s", what);
        hs_conf_same_on(t, be, w, l16[0], l16[1], n * 2);
        snprintf(w, sizeof w, "layernorm_dropout_backward dx, dgamma, dbeta without da = with da %s", what);
        hs_conf_same_on(t, be, w, ldx[0], ldx[1], n * 4);
        hs_conf_same_on(t, be, w, lg, lg + 2 * cols, (size_t)cols * 8);
        be->free(be, ldx[0]), be->free(be, ldx[1]), be->free(be, lda), be->free(be, lg);
        be->copy(be, wdx[0], res, n * 4);
        be->gelu_backward(be, NULL, wdx[0], NULL, u16, n, ru16, NULL, rd16);
        snprintf(w, sizeof w, "gelu_backward dx16 without dx = with dx %s", what);
        hs_conf_same_on(t, be, w, wdx16[1], ru16, n * 2);
        snprintf(w, sizeof w, "gelu_backward y16 without y = with y %s", what);
        hs_conf_same_on(t, be, w, wy16[1], rd16, n * 2);
        snprintf(w, sizeof w, "gelu_backward without dx leaves dy as it was %s", what);
        hs_conf_same_on(t, be, w, res, wdx[0], n * 4);
    }
    for (int k = 0; k < 2; k++) be->free(be, wdx[k]), be->free(be, wy[k]), be->free(be, wdx16[k]), be->free(be, wy16[k]);
    be->free(be, uw);
    for (int k = 0; k < 2; k++) {
        be->free(be, y[k]), be->free(be, sum[k]), be->free(be, mean[k]), be->free(be, rstd[k]), be->free(be, da[k]);
        be->free(be, dx[k]), be->free(be, dg[k]), be->free(be, db[k]), be->free(be, u[k]), be->free(be, g[k]);
        be->free(be, ru[k]), be->free(be, rd[k]);
    }
    be->free(be, y16), be->free(be, da16), be->free(be, u16), be->free(be, g16), be->free(be, d16);
    be->free(be, ru16), be->free(be, rd16), be->free(be, gy), be->free(be, gy16);
    be->free(be, x), be->free(be, res), be->free(be, gamma), be->free(be, beta);
    free(hx), free(hr), free(hg), free(hb);
}

/* The fused attention's 16-bit outputs (flash_attention_forward's ctx16, _backward's dqkv16): ctx, lse and
 * dqkv the same bits with and without them, ctx16 = to_half(ctx) and dqkv16 = to_half(dqkv) */
static void flash_outputs16_on(hs_conf *t, const hs_backend *be, int batch, int L, int heads, int d, float p) {
    const int H = heads * d;
    const size_t nqkv = (size_t)batch * L * 3 * H, nctx = (size_t)batch * L * H, nlse = (size_t)batch * heads * L;
    float *hqkv = hs_conf_rand(t, nqkv, -2, 2), *hdctx = hs_conf_rand(t, nctx, -1, 1), *hmb;
    HS_ALLOC(hmb, (size_t)batch * L);
    for (int i = 0; i < batch * L; i++) hmb[i] = i % 5 == 4 ? -10000.0f : 0.0f;
    float *qkv = hs_conf_dev(be, hqkv, nqkv * 4), *dctx = hs_conf_dev(be, hdctx, nctx * 4);
    float *mb = hs_conf_dev(be, hmb, (size_t)batch * L * 4);
    float *ctx[2], *lse[2], *dqkv[2];
    uint16_t *ctx16 = be->alloc(be, nctx * 2), *dqkv16 = be->alloc(be, nqkv * 2), *qkv16 = be->alloc(be, nqkv * 2);
    for (int k = 0; k < 2; k++) { /* k = 1 with the 16-bit outputs */
        ctx[k] = be->alloc(be, nctx * 4), lse[k] = be->alloc(be, nlse * 4), dqkv[k] = be->alloc(be, nqkv * 4);
        be->flash_attention_forward(be, ctx[k], lse[k], qkv, NULL, mb, batch, L, heads, d, p, 77, 2,
                                    k ? ctx16 : NULL, k ? qkv16 : NULL);
        be->flash_attention_backward(be, dqkv[k], dctx, qkv, NULL, mb, ctx[k], lse[k], batch, L, heads, d, p, 77, 2,
                                     k ? dqkv16 : NULL);
    }
    char what[200];
    snprintf(what, sizeof what, "flash_attention ctx (fp32, with and without ctx16) B=%d L=%d heads=%d d=%d p=%g",
             batch, L, heads, d, p);
    hs_conf_same_on(t, be, what, ctx[0], ctx[1], nctx * 4);
    snprintf(what, sizeof what, "flash_attention lse (with and without ctx16) B=%d L=%d heads=%d d=%d p=%g", batch,
             L, heads, d, p);
    hs_conf_same_on(t, be, what, lse[0], lse[1], nlse * 4);
    snprintf(what, sizeof what, "flash_attention dqkv (fp32, with and without dqkv16) B=%d L=%d heads=%d d=%d p=%g",
             batch, L, heads, d, p);
    hs_conf_same_on(t, be, what, dqkv[0], dqkv[1], nqkv * 4);
    snprintf(what, sizeof what, "flash_attention ctx16 = to_half(ctx) B=%d L=%d heads=%d d=%d p=%g", batch, L,
             heads, d, p);
    is_rounding(t, be, what, ctx16, ctx[1], nctx);
    snprintf(what, sizeof what, "flash_attention dqkv16 = to_half(dqkv) B=%d L=%d heads=%d d=%d p=%g", batch, L,
             heads, d, p);
    is_rounding(t, be, what, dqkv16, dqkv[1], nqkv);
    snprintf(what, sizeof what, "flash_attention_forward qkv16_out = to_half(qkv) B=%d L=%d heads=%d d=%d p=%g", batch,
             L, heads, d, p);
    is_rounding(t, be, what, qkv16, qkv, nqkv);
    /* the 16-bit dataflow: the forward without ctx gives the same ctx16 and lse; where the products read
     * twins (CUDA), the backward of a ctx bound with bind_half_only (its fp32 values other ones: they must
     * not be read) reads the twin: the bits of the backward from ctx16 widened */
    uint16_t *c16 = be->alloc(be, nctx * 2);
    float *l2 = be->alloc(be, nlse * 4);
    be->flash_attention_forward(be, NULL, l2, qkv, NULL, mb, batch, L, heads, d, p, 77, 2, c16, NULL);
    snprintf(what, sizeof what, "flash_attention ctx16 without ctx = with ctx B=%d L=%d heads=%d d=%d p=%g", batch, L,
             heads, d, p);
    hs_conf_same_on(t, be, what, ctx16, c16, nctx * 2);
    snprintf(what, sizeof what, "flash_attention lse without ctx = with ctx B=%d L=%d heads=%d d=%d p=%g", batch, L,
             heads, d, p);
    hs_conf_same_on(t, be, what, lse[1], l2, nlse * 4);
    if (be->products_read_twins) {
        float *stale = hs_conf_dev(be, hdctx, nctx * 4), *wide = be->alloc(be, nctx * 4);
        float *dq[2] = {be->alloc(be, nqkv * 4), be->alloc(be, nqkv * 4)};
        be->from_half(be, wide, c16, nctx);
        be->flash_attention_backward(be, dq[0], dctx, qkv, NULL, mb, wide, l2, batch, L, heads, d, p, 77, 2, NULL);
        be->bind_half_only(be, stale, c16, nctx);
        be->flash_attention_backward(be, dq[1], dctx, qkv, NULL, mb, stale, l2, batch, L, heads, d, p, 77, 2, NULL);
        be->unbind_half(be, stale);
        snprintf(what, sizeof what,
                 "flash_attention_backward dqkv, ctx bound with bind_half_only = from ctx16 widened B=%d L=%d "
                 "heads=%d d=%d p=%g",
                 batch, L, heads, d, p);
        hs_conf_same_on(t, be, what, dq[0], dq[1], nqkv * 4);
        be->free(be, stale), be->free(be, wide), be->free(be, dq[0]), be->free(be, dq[1]);
    }
    be->free(be, c16), be->free(be, l2);
    for (int k = 0; k < 2; k++) be->free(be, ctx[k]), be->free(be, lse[k]), be->free(be, dqkv[k]);
    be->free(be, ctx16), be->free(be, dqkv16), be->free(be, qkv16), be->free(be, qkv), be->free(be, dctx);
    be->free(be, mb);
    free(hqkv), free(hdctx), free(hmb);
}

/* The fused attention's 16-bit input (qkv16 = to_half(qkv), read instead of qkv, which holds other values
 * here so that reading it would show): ctx, lse, dqkv and their 16-bit outputs the same bits as from the
 * fp32 qkv */
static void flash_input16_on(hs_conf *t, const hs_backend *be, int batch, int L, int heads, int d, float p) {
    const int H = heads * d;
    const size_t nqkv = (size_t)batch * L * 3 * H, nctx = (size_t)batch * L * H, nlse = (size_t)batch * heads * L;
    float *hqkv = hs_conf_rand(t, nqkv, -2, 2), *hstale = hs_conf_rand(t, nqkv, -2, 2);
    float *hdctx = hs_conf_rand(t, nctx, -1, 1), *hmb;
    HS_ALLOC(hmb, (size_t)batch * L);
    for (int i = 0; i < batch * L; i++) hmb[i] = i % 5 == 4 ? -10000.0f : 0.0f;
    float *qkv = hs_conf_dev(be, hqkv, nqkv * 4), *stale = hs_conf_dev(be, hstale, nqkv * 4);
    float *dctx = hs_conf_dev(be, hdctx, nctx * 4), *mb = hs_conf_dev(be, hmb, (size_t)batch * L * 4);
    uint16_t *qkv16 = be->alloc(be, nqkv * 2);
    be->to_half(be, qkv16, qkv, nqkv);
    float *ctx[2], *lse[2], *dqkv[2];
    uint16_t *ctx16[2], *dqkv16[2];
    for (int k = 0; k < 2; k++) { /* k = 1 from qkv16 */
        ctx[k] = be->alloc(be, nctx * 4), lse[k] = be->alloc(be, nlse * 4), dqkv[k] = be->alloc(be, nqkv * 4);
        ctx16[k] = be->alloc(be, nctx * 2), dqkv16[k] = be->alloc(be, nqkv * 2);
        be->flash_attention_forward(be, ctx[k], lse[k], k ? stale : qkv, k ? qkv16 : NULL, mb, batch, L, heads, d, p,
                                    77, 2, ctx16[k], NULL);
        be->flash_attention_backward(be, dqkv[k], dctx, k ? stale : qkv, k ? qkv16 : NULL, mb, ctx[k], lse[k], batch,
                                     L, heads, d, p, 77, 2, dqkv16[k]);
    }
    const char *names[] = {"ctx", "lse", "dqkv", "ctx16", "dqkv16"};
    const void *a[] = {ctx[0], lse[0], dqkv[0], ctx16[0], dqkv16[0]}, *b[] = {ctx[1], lse[1], dqkv[1], ctx16[1], dqkv16[1]};
    const size_t bytes[] = {nctx * 4, nlse * 4, nqkv * 4, nctx * 2, nqkv * 2};
    for (int o = 0; o < 5; o++) {
        char what[200];
        snprintf(what, sizeof what, "flash_attention %s (from qkv and from qkv16) B=%d L=%d heads=%d d=%d p=%g",
                 names[o], batch, L, heads, d, p);
        hs_conf_same_on(t, be, what, a[o], b[o], bytes[o]);
    }
    for (int k = 0; k < 2; k++) {
        be->free(be, ctx[k]), be->free(be, lse[k]), be->free(be, dqkv[k]);
        be->free(be, ctx16[k]), be->free(be, dqkv16[k]);
    }
    be->free(be, qkv16), be->free(be, qkv), be->free(be, stale), be->free(be, dctx), be->free(be, mb);
    free(hqkv), free(hstale), free(hdctx), free(hmb);
}

/* CUDA: dropout_add_layernorm_forward whose a exists only in 16 bits (bind_half_only, NaNs in its fp32
 * range, which x_sum overwrites, as a model's sublayer does) gives the bits of the call on a16 widened:
 * y, y16, x_sum, mean and rstd */
static void twin_only_layernorm(hs_conf *t, int rows, int cols, float p) {
    const hs_backend *be = t->cuda;
    const size_t n = (size_t)rows * (size_t)cols;
    float *ha = hs_conf_rand(t, n, -2, 2), *hr = hs_conf_rand(t, n, -2, 2), *hg = hs_conf_rand(t, (size_t)cols, 0.5f, 1.5f);
    float *hb = hs_conf_rand(t, (size_t)cols, -1, 1), *hnan;
    HS_ALLOC(hnan, n);
    for (size_t i = 0; i < n; i++) hnan[i] = NAN;
    float *a = hs_conf_dev(be, ha, n * 4), *res = hs_conf_dev(be, hr, n * 4);
    float *gamma = hs_conf_dev(be, hg, (size_t)cols * 4), *beta = hs_conf_dev(be, hb, (size_t)cols * 4);
    uint16_t *a16 = be->alloc(be, n * 2);
    be->to_half(be, a16, a, n);
    be->from_half(be, a, a16, n); /* a = widen(round(a)) */
    float *y[2], *sum[2], *mean[2], *rstd[2];
    uint16_t *y16[2];
    for (int k = 0; k < 2; k++) { /* k = 1: a bound with bind_half_only, x_sum over it */
        y[k] = be->alloc(be, n * 4), mean[k] = be->alloc(be, (size_t)rows * 4), rstd[k] = be->alloc(be, (size_t)rows * 4);
        y16[k] = be->alloc(be, n * 2);
        sum[k] = k ? hs_conf_dev(be, hnan, n * 4) : be->alloc(be, n * 4);
        if (k) be->bind_half_only(be, sum[k], a16, n);
        be->dropout_add_layernorm_forward(be, y[k], sum[k], mean[k], rstd[k], k ? sum[k] : a, res, gamma, beta, rows,
                                          cols, 1e-12f, rows, (size_t)cols, 1, p, 99, 3, y16[k]);
        if (k) be->unbind_half(be, sum[k]);
    }
    const char *names[] = {"y", "y16", "x_sum", "mean", "rstd"};
    const void *x0[] = {y[0], y16[0], sum[0], mean[0], rstd[0]}, *x1[] = {y[1], y16[1], sum[1], mean[1], rstd[1]};
    const size_t bytes[] = {n * 4, n * 2, n * 4, (size_t)rows * 4, (size_t)rows * 4};
    for (int o = 0; o < 5; o++) {
        char what[200];
        snprintf(what, sizeof what, "dropout_add_layernorm_forward %s, a bound with bind_half_only = from a16 widened "
                 "rows=%d cols=%d p=%g", names[o], rows, cols, p);
        hs_conf_same_on(t, be, what, x0[o], x1[o], bytes[o]);
    }
    for (int k = 0; k < 2; k++)
        be->free(be, y[k]), be->free(be, sum[k]), be->free(be, mean[k]), be->free(be, rstd[k]), be->free(be, y16[k]);
    be->free(be, a), be->free(be, res), be->free(be, gamma), be->free(be, beta), be->free(be, a16);
    free(ha), free(hr), free(hg), free(hb), free(hnan);
}

/* CUDA: flash_attention_backward whose dctx exists only in 16 bits (bind_half_only, other fp32 values in
 * its range) gives the bits of the call on dctx16 widened: dqkv and dqkv16 (its row dot products and dC
 * tiles read the twin, which is then the tiles' copy) */
static void flash_dctx_only16(hs_conf *t, int batch, int L, int heads, int d, float p) {
    const hs_backend *be = t->cuda;
    const int H = heads * d;
    const size_t nqkv = (size_t)batch * L * 3 * H, nctx = (size_t)batch * L * H, nlse = (size_t)batch * heads * L;
    float *hqkv = hs_conf_rand(t, nqkv, -2, 2), *hdctx = hs_conf_rand(t, nctx, -1, 1), *hstale = hs_conf_rand(t, nctx, -1, 1);
    float *hmb;
    HS_ALLOC(hmb, (size_t)batch * L);
    for (int i = 0; i < batch * L; i++) hmb[i] = i % 5 == 4 ? -10000.0f : 0.0f;
    float *qkv = hs_conf_dev(be, hqkv, nqkv * 4), *dctx = hs_conf_dev(be, hdctx, nctx * 4);
    float *stale = hs_conf_dev(be, hstale, nctx * 4), *mb = hs_conf_dev(be, hmb, (size_t)batch * L * 4);
    float *ctx = be->alloc(be, nctx * 4), *lse = be->alloc(be, nlse * 4);
    uint16_t *dctx16 = be->alloc(be, nctx * 2);
    be->to_half(be, dctx16, dctx, nctx);
    be->from_half(be, dctx, dctx16, nctx); /* dctx = widen(round(dctx)) */
    be->flash_attention_forward(be, ctx, lse, qkv, NULL, mb, batch, L, heads, d, p, 77, 2, NULL, NULL);
    float *dqkv[2];
    uint16_t *dqkv16[2];
    for (int k = 0; k < 2; k++) { /* k = 1: dctx bound with bind_half_only */
        dqkv[k] = be->alloc(be, nqkv * 4), dqkv16[k] = be->alloc(be, nqkv * 2);
        if (k) be->bind_half_only(be, stale, dctx16, nctx);
        be->flash_attention_backward(be, dqkv[k], k ? stale : dctx, qkv, NULL, mb, ctx, lse, batch, L, heads, d, p, 77,
                                     2, dqkv16[k]);
        if (k) be->unbind_half(be, stale);
    }
    char what[200];
    snprintf(what, sizeof what, "flash_attention_backward dqkv, dctx bound with bind_half_only = from dctx16 widened "
                                "B=%d L=%d heads=%d d=%d p=%g", batch, L, heads, d, p);
    hs_conf_same_on(t, be, what, dqkv[0], dqkv[1], nqkv * 4);
    snprintf(what, sizeof what, "flash_attention_backward dqkv16, dctx bound with bind_half_only = from dctx16 widened "
                                "B=%d L=%d heads=%d d=%d p=%g", batch, L, heads, d, p);
    hs_conf_same_on(t, be, what, dqkv16[0], dqkv16[1], nqkv * 2);
    for (int k = 0; k < 2; k++) be->free(be, dqkv[k]), be->free(be, dqkv16[k]);
    be->free(be, qkv), be->free(be, dctx), be->free(be, stale), be->free(be, mb), be->free(be, ctx);
    be->free(be, lse), be->free(be, dctx16);
    free(hqkv), free(hdctx), free(hstale), free(hmb);
}

/* CUDA: gemm_wgrad_bgrad of a dy bound with bind_half_only (its fp32 values other ones: they must not be
 * read) gives the bits of the same op on dy16 widened, with the bias-gradient epilogue and without
 * (no_epilogue: the emulated heuristic finds no algorithm with an epilogue, HS_CUDA_EMU_NO_EPILOGUE_ALGO,
 * so the fallback's bias_grad runs; a real GPU ignores the variable and checks the epilogue twice).
 * Shapes of their own per pass: the library plans are kept per shape. */
static void twin_only_wgrad(hs_conf *t, int no_epilogue) {
    const hs_backend *be = t->cuda;
    const int rows = 21 + 2 * no_epilogue, in = 19, out = 13;
    const size_t ny = (size_t)rows * out, nx = (size_t)rows * in;
    float *hy = hs_conf_rand(t, ny, -2, 2), *hstale = hs_conf_rand(t, ny, -2, 2), *hx = hs_conf_rand(t, nx, -2, 2);
    float *y = hs_conf_dev(be, hy, ny * 4), *stale = hs_conf_dev(be, hstale, ny * 4), *x = hs_conf_dev(be, hx, nx * 4);
    uint16_t *y16 = be->alloc(be, ny * 2);
    be->to_half(be, y16, y, ny);
    be->from_half(be, y, y16, ny); /* y = widen(round(y)) */
    float *dw[2], *db[2];
    if (no_epilogue) setenv("HS_CUDA_EMU_NO_EPILOGUE_ALGO", "1", 1);
    for (int k = 0; k < 2; k++) { /* k = 1: dy bound with bind_half_only */
        dw[k] = be->alloc(be, (size_t)out * in * 4), db[k] = be->alloc(be, (size_t)out * 4);
        be->zero(be, dw[k], (size_t)out * in * 4), be->zero(be, db[k], (size_t)out * 4);
        if (k) be->bind_half_only(be, stale, y16, ny);
        for (int overwrite = 1; overwrite >= 0; overwrite--) /* written, then added */
            be->gemm_wgrad_bgrad(be, dw[k], db[k], k ? stale : y, out, x, rows, in, out, overwrite);
        if (k) be->unbind_half(be, stale);
    }
    if (no_epilogue) unsetenv("HS_CUDA_EMU_NO_EPILOGUE_ALGO");
    char what[160];
    snprintf(what, sizeof what, "gemm_wgrad_bgrad dw, dy bound with bind_half_only = from dy16 widened (%s)",
             no_epilogue ? "no epilogue algorithm" : "BGRADB epilogue");
    hs_conf_same_on(t, be, what, dw[0], dw[1], (size_t)out * in * 4);
    snprintf(what, sizeof what, "gemm_wgrad_bgrad dbias, dy bound with bind_half_only = from dy16 widened (%s)",
             no_epilogue ? "no epilogue algorithm" : "BGRADB epilogue");
    hs_conf_same_on(t, be, what, db[0], db[1], (size_t)out * 4);
    for (int k = 0; k < 2; k++) be->free(be, dw[k]), be->free(be, db[k]);
    be->free(be, y), be->free(be, stale), be->free(be, x), be->free(be, y16);
    free(hy), free(hstale), free(hx);
}

/* CUDA: gelu_backward whose dy exists only in 16 bits (bind_half_only; the fp32 range holds NaNs) reads
 * the twin: dx16 (written over the twin itself) and the recomputed y16 are the bits of the call on dy16
 * widened */
static void twin_only_gelu_backward(hs_conf *t) {
    const hs_backend *be = t->cuda;
    const size_t n = 1000;
    float *hdy = hs_conf_rand(t, n, -2, 2), *hu = hs_conf_rand(t, n, -4, 4), *hnan;
    HS_ALLOC(hnan, n);
    for (size_t i = 0; i < n; i++) hnan[i] = NAN;
    float *dy = hs_conf_dev(be, hdy, n * 4), *u = hs_conf_dev(be, hu, n * 4), *stale = hs_conf_dev(be, hnan, n * 4);
    uint16_t *dy16 = be->alloc(be, n * 2), *u16 = be->alloc(be, n * 2), *dx16 = be->alloc(be, n * 2);
    uint16_t *y16[2] = {be->alloc(be, n * 2), be->alloc(be, n * 2)};
    be->to_half(be, dy16, dy, n);
    be->from_half(be, dy, dy16, n); /* dy = widen(round(dy)) */
    be->to_half(be, u16, u, n);
    be->gelu_backward(be, NULL, dy, NULL, u16, n, dx16, NULL, y16[0]);
    be->bind_half_only(be, stale, dy16, n);
    be->gelu_backward(be, NULL, stale, NULL, u16, n, dy16, NULL, y16[1]); /* dx16 over dy's twin */
    be->unbind_half(be, stale);
    hs_conf_same_on(t, be, "gelu_backward dx16, dy bound with bind_half_only (dx16 its twin) = from dy16 widened",
                    dy16, dx16, n * 2);
    hs_conf_same_on(t, be, "gelu_backward y16, dy bound with bind_half_only = from dy16 widened", y16[1], y16[0], n * 2);
    be->free(be, dy), be->free(be, u), be->free(be, stale), be->free(be, dy16), be->free(be, u16);
    be->free(be, dx16), be->free(be, y16[0]), be->free(be, y16[1]);
    free(hdy), free(hu), free(hnan);
}

/* CUDA: products of operands bound to twins convert nothing and give the converting products' bits */
static void twin_products(hs_conf *t) {
    const hs_backend *be = t->cuda;
    enum { M = 37, N = 29, K = 45 };
    float *ha = hs_conf_rand(t, (size_t)M * K, -2, 2), *hb = hs_conf_rand(t, (size_t)N * K, -2, 2);
    float *a = hs_conf_dev(be, ha, (size_t)M * K * 4), *b = hs_conf_dev(be, hb, (size_t)N * K * 4);
    float *bias = hs_conf_dev(be, hb, (size_t)N * 4);
    uint16_t *a16 = be->alloc(be, (size_t)M * K * 2), *b16 = be->alloc(be, (size_t)N * K * 2);
    float *c[2], *dw[2], *dbias[2];
    for (int k = 0; k < 2; k++)
        c[k] = be->alloc(be, (size_t)M * N * 4), dw[k] = be->alloc(be, (size_t)N * K * 4),
        dbias[k] = be->alloc(be, (size_t)N * 4);
    be->to_half(be, a16, a, (size_t)M * K);
    be->to_half(be, b16, b, (size_t)N * K);
    for (int k = 0; k < 2; k++) { /* k = 1: both operands bound */
        if (k) be->bind_half(be, a, a16, (size_t)M * K), be->bind_half(be, b, b16, (size_t)N * K);
        const size_t before = hs_cuda_gemm_conversions();
        be->gemm(be, 0, 1, M, N, K, 1.0f, a, K, b, K, 0.0f, c[k], N);        /* x·wᵀ: a and b */
        be->gemm_bias(be, c[k], N, a, b, bias, M, K, N);                      /* a, b, bias epilogue */
        be->gemm_wgrad_bgrad(be, dw[k], dbias[k], c[k], N, a, M, K, N, 1); /* c is not bound: converted */
        const size_t made = hs_cuda_gemm_conversions() - before, want = k ? 1 : 6;
        t->checks++;
        if (made != want) {
            hs_conf_fail(t);
            printf("FAIL %s: %zu operand conversions %s twins, expected %zu\n", t->op, made, k ? "with" : "without",
                   want);
        }
    }
    hs_conf_same_on(t, be, "gemm_bias with twins", c[0], c[1], (size_t)M * N * 4);
    hs_conf_same_on(t, be, "gemm_wgrad_bgrad with twins", dw[0], dw[1], (size_t)N * K * 4);
    hs_conf_same_on(t, be, "gemm_wgrad_bgrad's bias gradient with twins", dbias[0], dbias[1], (size_t)N * 4);
    /* a memory op writing the fp32 range ends its binding: converted again */
    be->zero(be, a + 5, 4);
    size_t before = hs_cuda_gemm_conversions();
    be->gemm(be, 0, 1, M, N, K, 1.0f, a, K, b, K, 0.0f, c[1], N);
    t->checks++;
    if (hs_cuda_gemm_conversions() - before != 1) {
        hs_conf_fail(t);
        printf("FAIL %s: a twin is still read after zero() wrote its fp32 range\n", t->op);
    }
    be->unbind_half(be, b);
    before = hs_cuda_gemm_conversions();
    be->gemm(be, 0, 1, M, N, K, 1.0f, a, K, b, K, 0.0f, c[1], N);
    t->checks++;
    if (hs_cuda_gemm_conversions() - before != 2) {
        hs_conf_fail(t);
        printf("FAIL %s: a twin is still read after unbind_half\n", t->op);
    }
    be->synchronize(be);
    for (int k = 0; k < 2; k++) be->free(be, c[k]), be->free(be, dw[k]), be->free(be, dbias[k]);
    be->free(be, a), be->free(be, b), be->free(be, bias), be->free(be, a16), be->free(be, b16);
    free(ha), free(hb);
}

/* ---- products and activations whose output exists in 16 bits only (the 16-bit dataflow) ----------------
 * gemm_bias_half (with a bias, and without: the references' bias zeros): on the CPU, y16 is to_half of gemm_bias
 * with the bias rounded first, bit for bit (the same sums); on CUDA, whose cuBLASLt algorithm for a 16-bit D is another one than for fp32 (another
 * summation order), within the sums' bound plus one 16-bit rounding of that, and the same bits twice;
 * CUDA against the CPU within the same bound; without y16, y holds those sums widened (the CPU's y16
 * widened, bit for bit; CUDA's within the bound, and values of the 16-bit type). gelu_forward_half: on each backend the bits of
 * bias_gelu_forward on the widened pre-activation with a zero bias (y, and y16 with and without y). */
/* two fp32 buffers of one backend, |a_i - b_i| <= bound[i], or a failure naming the worst element */
static void within_on(hs_conf *t, const hs_backend *be, const char *what, const float *a_dev, const float *b_dev,
                      size_t n, const double *bound) {
    float *a = hs_conf_download_f32(be, a_dev, n), *b = hs_conf_download_f32(be, b_dev, n);
    size_t worst = 0;
    double worst_ratio = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double r = fabs((double)a[i] - b[i]) / (bound[i] > 0 ? bound[i] : 1e-300);
        if (!(r <= worst_ratio)) worst_ratio = r, worst = i; /* NaN counts as worst */
    }
    t->checks++;
    if (!(worst_ratio <= 1.0)) {
        hs_conf_fail(t);
        printf("FAIL %s: %s on %s: [%zu] %.9g vs %.9g, err/bound %.3g\n", t->op, what, be->name, worst, a[worst],
               b[worst], worst_ratio);
    }
    free(a), free(b);
}

static void gemm_bias_half_cases(hs_conf *t) {
    static const int dims[][3] = {{1, 1, 1}, {31, 33, 17}, {33, 127, 31}, {128, 64, 96}, {7, 5, 300}};
    const int bf16 = t->precision == HS_PRECISION_BF16;
    const double u16 = bf16 ? 0x1p-8 : 0x1p-11; /* the 16-bit type's unit roundoff */
    char what[160];
    /* with a bias, then without (bias NULL: the references' bias is zeros) */
    for (size_t dc = 0; dc < 2 * sizeof dims / sizeof dims[0]; dc++) {
        const size_t d = dc % (sizeof dims / sizeof dims[0]);
        const int no_bias = dc >= sizeof dims / sizeof dims[0];
        const int rows = dims[d][0], in = dims[d][1], out = dims[d][2];
        const size_t ny = (size_t)rows * (size_t)out;
        float *x = hs_conf_rand(t, (size_t)rows * in, -1, 1), *w = hs_conf_rand(t, (size_t)out * in, -1, 1);
        float *b = hs_conf_rand(t, (size_t)out, -1, 1), *br;
        HS_ALLOC(br, (size_t)out);
        for (int j = 0; j < out; j++) {
            if (no_bias) b[j] = 0.0f;
            br[j] = bf16 ? hs_bf16_to_float(hs_bf16_bits(b[j])) : hs_fp16_to_float(hs_fp16_bits(b[j]));
        }
        hs_conf_pair px = hs_conf_pair_of(t, x, (size_t)rows * in * 4), pw = hs_conf_pair_of(t, w, (size_t)out * in * 4);
        hs_conf_pair pb = hs_conf_pair_of(t, b, (size_t)out * 4), pbr = hs_conf_pair_of(t, br, (size_t)out * 4);
        const float *bias_cpu = no_bias ? NULL : pb.cpu, *bias_cuda = no_bias ? NULL : pb.cuda;
        hs_conf_pair y16 = hs_conf_pair_of(t, NULL, ny * 2), scratch = hs_conf_pair_of(t, NULL, ny * 4);
        hs_conf_pair ref = hs_conf_pair_of(t, NULL, ny * 4), wide = hs_conf_pair_of(t, NULL, ny * 4);
        uint16_t *again = t->cuda->alloc(t->cuda, ny * 2);
        float *ref_wide = t->cuda->alloc(t->cuda, ny * 4);
        uint16_t *ref16 = t->cuda->alloc(t->cuda, ny * 2);
        snprintf(what, sizeof what, "y16 = round(x·wᵀ%s) rows=%d in=%d out=%d", no_bias ? " (no bias)" : " + round(bias)",
                 rows, in, out);
        t->cpu->gemm_bias_half(t->cpu, y16.cpu, scratch.cpu, px.cpu, pw.cpu, bias_cpu, rows, in, out);
        t->cpu->gemm_bias(t->cpu, ref.cpu, out, px.cpu, pw.cpu, pbr.cpu, rows, in, out);
        is_rounding(t, t->cpu, what, y16.cpu, ref.cpu, ny);
        t->cuda->gemm_bias_half(t->cuda, y16.cuda, scratch.cuda, px.cuda, pw.cuda, bias_cuda, rows, in, out);
        t->cuda->gemm_bias_half(t->cuda, again, scratch.cuda, px.cuda, pw.cuda, bias_cuda, rows, in, out);
        hs_conf_same_bits(t, what, y16.cuda, again, ny * 2);
        t->cuda->gemm_bias(t->cuda, ref.cuda, out, px.cuda, pw.cuda, pbr.cuda, rows, in, out);
        /* bound: the sums' (in + 1 terms, the bias too) and one 16-bit rounding on each side */
        float *yc = hs_conf_download_f32(t->cpu, ref.cpu, ny);
        double *bound;
        HS_ALLOC(bound, ny);
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < out; j++) {
                double absdot = fabs((double)br[j]);
                for (int q = 0; q < in; q++) absdot += fabs((double)x[(size_t)r * in + q] * w[(size_t)j * in + q]);
                const double sums = hs_conf_dot_factor(t, in + 1.0) * absdot;
                bound[(size_t)r * out + j] = (1.0 + 4 * u16) * (sums + 2 * u16 * (fabs((double)yc[(size_t)r * out + j]) + sums));
            }
        t->cpu->from_half(t->cpu, wide.cpu, y16.cpu, ny);
        t->cuda->from_half(t->cuda, wide.cuda, y16.cuda, ny);
        hs_conf_check_bound(t, what, wide.cpu, wide.cuda, ny, bound);
        /* without y16: the same sums rounded, widened into y (the CPU's bits; CUDA's fp32 GEMM is another call) */
        snprintf(what, sizeof what, "y (no y16) = widen(y16)%s rows=%d in=%d out=%d", no_bias ? " (no bias)" : "", rows,
                 in, out);
        t->cpu->gemm_bias_half(t->cpu, NULL, scratch.cpu, px.cpu, pw.cpu, bias_cpu, rows, in, out);
        hs_conf_same_on(t, t->cpu, what, scratch.cpu, wide.cpu, ny * 4);
        t->cuda->gemm_bias_half(t->cuda, NULL, scratch.cuda, px.cuda, pw.cuda, bias_cuda, rows, in, out);
        within_on(t, t->cuda, what, scratch.cuda, wide.cuda, ny, bound);
        t->cuda->to_half(t->cuda, ref16, scratch.cuda, ny); /* already rounded: to_half is exact */
        t->cuda->from_half(t->cuda, ref_wide, ref16, ny);
        hs_conf_same_on(t, t->cuda, what, scratch.cuda, ref_wide, ny * 4);
        t->cuda->to_half(t->cuda, ref16, ref.cuda, ny); /* CUDA's own fp32 product with the rounded bias, rounded */
        t->cuda->from_half(t->cuda, ref_wide, ref16, ny);
        snprintf(what, sizeof what, "y16 = round(gemm_bias(x, w, round(bias))) on cuda rows=%d in=%d out=%d", rows, in, out);
        within_on(t, t->cuda, what, ref_wide, wide.cuda, ny, bound);
        free(bound), free(yc);
        hs_conf_pair_free(t, px), hs_conf_pair_free(t, pw), hs_conf_pair_free(t, pb), hs_conf_pair_free(t, pbr);
        hs_conf_pair_free(t, y16), hs_conf_pair_free(t, scratch), hs_conf_pair_free(t, ref), hs_conf_pair_free(t, wide);
        t->cuda->free(t->cuda, again), t->cuda->free(t->cuda, ref_wide), t->cuda->free(t->cuda, ref16);
        free(x), free(w), free(b), free(br);
    }
}

/* gemm_half_out, every transpose: on the CPU the rounding of its own gemm (bit for bit); on CUDA the same
 * bits twice, within the bound of the sums and one 16-bit rounding on each side of the CPU's, and without
 * c16 the rounded values widened into c (to_half of them exact) within the same bound */
static void gemm_half_out_cases(hs_conf *t) {
    static const int dims[][3] = {{1, 1, 1}, {31, 33, 17}, {64, 40, 96}, {7, 300, 5}}; /* m, n, k */
    const int bf16 = t->precision == HS_PRECISION_BF16;
    const double u16 = bf16 ? 0x1p-8 : 0x1p-11;
    char what[160];
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int tr = 0; tr < 4; tr++) {
            const int m = dims[d][0], n = dims[d][1], k = dims[d][2], ta = tr & 1, tb = tr >> 1;
            const int lda = ta ? m : k, ldb = tb ? k : n;
            const size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
            float *a = hs_conf_rand(t, na, -1, 1), *b = hs_conf_rand(t, nb, -1, 1);
            hs_conf_pair pa = hs_conf_pair_of(t, a, na * 4), pb = hs_conf_pair_of(t, b, nb * 4);
            hs_conf_pair c16 = hs_conf_pair_of(t, NULL, nc * 2), c = hs_conf_pair_of(t, NULL, nc * 4);
            hs_conf_pair ref = hs_conf_pair_of(t, NULL, nc * 4), wide = hs_conf_pair_of(t, NULL, nc * 4);
            uint16_t *again = t->cuda->alloc(t->cuda, nc * 2), *r16 = t->cuda->alloc(t->cuda, nc * 2);
            float *rw = t->cuda->alloc(t->cuda, nc * 4);
            snprintf(what, sizeof what, "c16 = round(op(a)·op(b)) trans %d%d m=%d n=%d k=%d", ta, tb, m, n, k);
            t->cpu->gemm_half_out(t->cpu, c16.cpu, c.cpu, ta, tb, m, n, k, pa.cpu, lda, pb.cpu, ldb);
            t->cpu->gemm(t->cpu, ta, tb, m, n, k, 1.0f, pa.cpu, lda, pb.cpu, ldb, 0.0f, ref.cpu, n);
            is_rounding(t, t->cpu, what, c16.cpu, ref.cpu, nc);
            t->cuda->gemm_half_out(t->cuda, c16.cuda, c.cuda, ta, tb, m, n, k, pa.cuda, lda, pb.cuda, ldb);
            t->cuda->gemm_half_out(t->cuda, again, c.cuda, ta, tb, m, n, k, pa.cuda, lda, pb.cuda, ldb);
            hs_conf_same_bits(t, what, c16.cuda, again, nc * 2);
            float *yc = hs_conf_download_f32(t->cpu, ref.cpu, nc);
            double *bound;
            HS_ALLOC(bound, nc);
            for (int r = 0; r < m; r++)
                for (int j = 0; j < n; j++) {
                    double absdot = 0.0;
                    for (int q = 0; q < k; q++)
                        absdot += fabs((double)a[ta ? (size_t)q * m + r : (size_t)r * k + q] *
                                       b[tb ? (size_t)j * k + q : (size_t)q * n + j]);
                    const double sums = hs_conf_dot_factor(t, k) * absdot;
                    bound[(size_t)r * n + j] = (1.0 + 4 * u16) * (sums + 2 * u16 * (fabs((double)yc[(size_t)r * n + j]) + sums));
                }
            t->cpu->from_half(t->cpu, wide.cpu, c16.cpu, nc);
            t->cuda->from_half(t->cuda, wide.cuda, c16.cuda, nc);
            hs_conf_check_bound(t, what, wide.cpu, wide.cuda, nc, bound);
            snprintf(what, sizeof what, "c (no c16) = widen(c16) trans %d%d m=%d n=%d k=%d", ta, tb, m, n, k);
            t->cpu->gemm_half_out(t->cpu, NULL, c.cpu, ta, tb, m, n, k, pa.cpu, lda, pb.cpu, ldb);
            hs_conf_same_on(t, t->cpu, what, c.cpu, wide.cpu, nc * 4);
            t->cuda->gemm_half_out(t->cuda, NULL, c.cuda, ta, tb, m, n, k, pa.cuda, lda, pb.cuda, ldb);
            within_on(t, t->cuda, what, c.cuda, wide.cuda, nc, bound);
            t->cuda->to_half(t->cuda, r16, c.cuda, nc); /* already rounded: to_half is exact */
            t->cuda->from_half(t->cuda, rw, r16, nc);
            hs_conf_same_on(t, t->cuda, what, c.cuda, rw, nc * 4);
            free(bound), free(yc);
            hs_conf_pair_free(t, pa), hs_conf_pair_free(t, pb), hs_conf_pair_free(t, c16), hs_conf_pair_free(t, c);
            hs_conf_pair_free(t, ref), hs_conf_pair_free(t, wide);
            t->cuda->free(t->cuda, again), t->cuda->free(t->cuda, r16), t->cuda->free(t->cuda, rw);
            free(a), free(b);
        }
}

/* log_softmax_nll_backward's dlogits16: to_half of its dlogits, which are the bits of the call without it,
 * and the same bits without dlogits (the gradient only in 16 bits) (an ignored row, label -1, among the rows) */
static void nll_backward16_on(hs_conf *t, const hs_backend *be, int rows, int cols) {
    char what[160];
    const size_t n = (size_t)rows * (size_t)cols;
    float *hx = hs_conf_rand(t, n, -4, 4);
    int32_t *hl = hs_conf_rand_int(t, (size_t)rows, 0, cols);
    hl[rows / 2] = -1;
    float *logits = hs_conf_dev(be, hx, n * 4), *logprobs = be->alloc(be, n * 4);
    float *d = be->alloc(be, n * 4), *d_plain = be->alloc(be, n * 4);
    int32_t *labels = hs_conf_dev(be, hl, (size_t)rows * 4);
    double *stats = be->alloc(be, 3 * sizeof(double));
    uint16_t *d16 = be->alloc(be, n * 2), *d16_only = be->alloc(be, n * 2);
    be->zero(be, stats, 3 * sizeof(double));
    be->log_softmax_nll_forward(be, logprobs, logits, labels, rows, cols, stats, NULL);
    be->log_softmax_nll_backward(be, d, logprobs, NULL, NULL, labels, rows, cols, 0.25f, d16);
    be->log_softmax_nll_backward(be, d_plain, logprobs, NULL, NULL, labels, rows, cols, 0.25f, NULL);
    be->log_softmax_nll_backward(be, NULL, logprobs, NULL, NULL, labels, rows, cols, 0.25f, d16_only);
    snprintf(what, sizeof what, "log_softmax_nll_backward dlogits with dlogits16 = without rows=%d cols=%d", rows, cols);
    hs_conf_same_on(t, be, what, d, d_plain, n * 4);
    snprintf(what, sizeof what, "log_softmax_nll_backward dlogits16 = to_half(dlogits) rows=%d cols=%d", rows, cols);
    is_rounding(t, be, what, d16, d, n);
    snprintf(what, sizeof what, "log_softmax_nll_backward dlogits16 without dlogits = with rows=%d cols=%d", rows, cols);
    hs_conf_same_on(t, be, what, d16_only, d16, n * 2);
    be->free(be, logits), be->free(be, logprobs), be->free(be, d), be->free(be, d_plain), be->free(be, labels);
    be->free(be, stats), be->free(be, d16), be->free(be, d16_only);
    free(hx), free(hl);
}

static void gelu_forward_half_on(hs_conf *t, const hs_backend *be, size_t n) {
    char what[160];
    float *hx = hs_conf_rand(t, n, -4, 4), *hz;
    HS_ALLOC(hz, n);
    float *x = hs_conf_dev(be, hx, n * 4), *zero = hs_conf_dev(be, hz, n * 4), *y = be->alloc(be, n * 4);
    float *yb = be->alloc(be, n * 4);
    uint16_t *x16 = be->alloc(be, n * 2), *y16 = be->alloc(be, n * 2), *y16_only = be->alloc(be, n * 2);
    uint16_t *y16b = be->alloc(be, n * 2);
    be->to_half(be, x16, x, n);
    be->from_half(be, x, x16, n); /* the pre-activation widened */
    be->gelu_forward_half(be, y, x16, n, y16);
    be->gelu_forward_half(be, NULL, x16, n, y16_only);
    be->bias_gelu_forward(be, yb, x, zero, 1, (int)n, NULL, y16b); /* x += 0: unchanged */
    snprintf(what, sizeof what, "gelu_forward_half y = bias_gelu_forward's y n=%zu", n);
    hs_conf_same_on(t, be, what, y, yb, n * 4);
    snprintf(what, sizeof what, "gelu_forward_half y16 = bias_gelu_forward's y16 n=%zu", n);
    hs_conf_same_on(t, be, what, y16, y16b, n * 2);
    snprintf(what, sizeof what, "gelu_forward_half y16 without y = with y n=%zu", n);
    hs_conf_same_on(t, be, what, y16_only, y16, n * 2);
    be->free(be, x), be->free(be, zero), be->free(be, y), be->free(be, yb), be->free(be, x16), be->free(be, y16);
    be->free(be, y16_only), be->free(be, y16b);
    free(hx), free(hz);
}

/* CUDA: the GELU and ReLU + dropout kernels move quads of four elements with vector loads where every pointer is aligned
 * (kernels/quads.cuh), element by element where not: the same call on buffers one element off their
 * alignment gives the same bits, n odd (a short last quad) */
static void gelu_unaligned(hs_conf *t) {
    const hs_backend *be = t->cuda;
    const size_t n = 1001;
    const int rows = 7, cols = 143; /* rows·cols = n */
    float *hx = hs_conf_rand(t, n, -4, 4), *hdy = hs_conf_rand(t, n, -2, 2), *hb = hs_conf_rand(t, (size_t)cols, -1, 1);
    float *x[2], *dy[2], *y[2], *dx[2], *bias = hs_conf_dev(be, hb, (size_t)cols * 4);
    uint16_t *x16[2], *y16[2], *dx16[2], *pre16[2];
    float *xb[2] = {be->alloc(be, (n + 4) * 4), be->alloc(be, (n + 4) * 4)}; /* k = 1: one element off */
    float *dyb[2] = {be->alloc(be, (n + 4) * 4), be->alloc(be, (n + 4) * 4)};
    float *yb[2] = {be->alloc(be, (n + 4) * 4), be->alloc(be, (n + 4) * 4)};
    float *dxb[2] = {be->alloc(be, (n + 4) * 4), be->alloc(be, (n + 4) * 4)};
    uint16_t *hbuf[4][2];
    for (int a = 0; a < 4; a++)
        for (int k = 0; k < 2; k++) hbuf[a][k] = be->alloc(be, (n + 4) * 2);
    for (int k = 0; k < 2; k++) {
        x[k] = xb[k] + k, dy[k] = dyb[k] + k, y[k] = yb[k] + k, dx[k] = dxb[k] + k;
        x16[k] = hbuf[0][k] + k, y16[k] = hbuf[1][k] + k, dx16[k] = hbuf[2][k] + k, pre16[k] = hbuf[3][k] + k;
        be->upload(be, x[k], hx, n * 4);
        be->upload(be, dy[k], hdy, n * 4);
        be->to_half(be, x16[k], x[k], n);
        be->gelu_forward(be, y[k], x[k], n);
    }
    hs_conf_same_on(t, be, "gelu_forward, one element off alignment", y[0], y[1], n * 4);
    for (int k = 0; k < 2; k++) be->gelu_forward_half(be, y[k], x16[k], n, y16[k]);
    hs_conf_same_on(t, be, "gelu_forward_half y, one element off alignment", y[0], y[1], n * 4);
    hs_conf_same_on(t, be, "gelu_forward_half y16, one element off alignment", y16[0], y16[1], n * 2);
    for (int k = 0; k < 2; k++) be->gelu_backward(be, dx[k], dy[k], NULL, x16[k], n, dx16[k], y[k], y16[k]);
    hs_conf_same_on(t, be, "gelu_backward dx, one element off alignment", dx[0], dx[1], n * 4);
    hs_conf_same_on(t, be, "gelu_backward dx16, one element off alignment", dx16[0], dx16[1], n * 2);
    hs_conf_same_on(t, be, "gelu_backward y16, one element off alignment", y16[0], y16[1], n * 2);
    for (int k = 0; k < 2; k++) be->bias_gelu_forward(be, y[k], x[k], bias, rows, cols, pre16[k], y16[k]);
    hs_conf_same_on(t, be, "bias_gelu_forward y, one element off alignment", y[0], y[1], n * 4);
    hs_conf_same_on(t, be, "bias_gelu_forward x16, one element off alignment", pre16[0], pre16[1], n * 2);
    /* relu_dropout_forward/backward: 7 samples of 143 values (a quad crosses samples), dropout 0.1 */
    for (int k = 0; k < 2; k++) be->relu_dropout_forward(be, y[k], x[k], rows, (size_t)cols, 0.1f, 77, 5, y16[k]);
    hs_conf_same_on(t, be, "relu_dropout_forward y, one element off alignment", y[0], y[1], n * 4);
    hs_conf_same_on(t, be, "relu_dropout_forward y16, one element off alignment", y16[0], y16[1], n * 2);
    for (int k = 0; k < 2; k++)
        be->relu_dropout_backward(be, dx[k], dy[k], y[k], rows, (size_t)cols, 0.1f, 77, 5, dx16[k]);
    hs_conf_same_on(t, be, "relu_dropout_backward dx, one element off alignment", dx[0], dx[1], n * 4);
    hs_conf_same_on(t, be, "relu_dropout_backward dx16, one element off alignment", dx16[0], dx16[1], n * 2);
    for (int k = 0; k < 2; k++) {
        be->free(be, xb[k]), be->free(be, dyb[k]), be->free(be, yb[k]), be->free(be, dxb[k]);
        for (int a = 0; a < 4; a++) be->free(be, hbuf[a][k]);
    }
    be->free(be, bias);
    free(hx), free(hdy), free(hb);
}

void hs_conf_group_half(hs_conf *t) {
    if (t->precision == HS_PRECISION_BF16 || t->precision == HS_PRECISION_FP16) {
        half_cases(t);
        convert_halves_cases(t);
        shadow_cases(t);
        hs_conf_op(t, "16-bit outputs (y16, da16, x16, dx16, dlogits16)"); /* relu_dropout_forward/backward's too */
        static const int shapes[][2] = {{1, 31}, {12, 33}, {64, 768}};
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            outputs16_on(t, t->cpu, shapes[k][0], shapes[k][1]);
            outputs16_on(t, t->cuda, shapes[k][0], shapes[k][1]);
            nll_backward16_on(t, t->cpu, shapes[k][0] + 2, shapes[k][1]);
            nll_backward16_on(t, t->cuda, shapes[k][0] + 2, shapes[k][1]);
        }
        hs_conf_op(t, "16-bit outputs of the fused attention (ctx16, dqkv16, qkv16_out)");
        static const int flash[][4] = {{2, 7, 2, 8}, {2, 33, 3, 40}, {1, 20, 2, 72}}; /* B, L, heads, head_dim */
        for (size_t k = 0; k < sizeof flash / sizeof flash[0]; k++)
            for (int drop = 0; drop < 2; drop++) {
                const float p = drop ? 0.1f : 0.0f;
                flash_outputs16_on(t, t->cpu, flash[k][0], flash[k][1], flash[k][2], flash[k][3], p);
                flash_outputs16_on(t, t->cuda, flash[k][0], flash[k][1], flash[k][2], flash[k][3], p);
            }
        hs_conf_op(t, "16-bit input of the fused attention (qkv16)");
        for (size_t k = 0; k < sizeof flash / sizeof flash[0]; k++)
            for (int drop = 0; drop < 2; drop++) {
                const float p = drop ? 0.1f : 0.0f;
                flash_input16_on(t, t->cpu, flash[k][0], flash[k][1], flash[k][2], flash[k][3], p);
                flash_input16_on(t, t->cuda, flash[k][0], flash[k][1], flash[k][2], flash[k][3], p);
            }
        hs_conf_op(t, "gemm_bias_half (the 16-bit linear layer)");
        gemm_bias_half_cases(t);
        hs_conf_op(t, "gemm_half_out (a product with a 16-bit output)");
        gemm_half_out_cases(t);
        hs_conf_op(t, "gelu_forward_half (GELU of a 16-bit pre-activation)");
        for (int s = 0; s < hs_conf_nsizes; s++) {
            gelu_forward_half_on(t, t->cpu, hs_conf_sizes[s]);
            gelu_forward_half_on(t, t->cuda, hs_conf_sizes[s]);
        }
        gelu_unaligned(t);
        hs_conf_op(t, "bind_half (GEMM operands read from 16-bit twins)");
        twin_products(t);
        hs_conf_op(t, "bind_half_only (tensors only in 16 bits)");
        for (int no_epilogue = 0; no_epilogue < 2; no_epilogue++) twin_only_wgrad(t, no_epilogue);
        twin_only_gelu_backward(t);
        for (int drop = 0; drop < 2; drop++) {
            twin_only_layernorm(t, 12, 33, drop ? 0.1f : 0.0f);
            twin_only_layernorm(t, 64, 768, drop ? 0.1f : 0.0f);
        }
        for (size_t k = 0; k < sizeof flash / sizeof flash[0]; k++)
            for (int drop = 0; drop < 2; drop++)
                flash_dctx_only16(t, flash[k][0], flash[k][1], flash[k][2], flash[k][3], drop ? 0.1f : 0.0f);
    }
}
