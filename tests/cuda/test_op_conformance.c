/* Every op of the device seam on the CUDA backend (the emulated device in `make check`, a real GPU
 * under tests/gpu/) against the CPU backend, on random inputs with odd sizes: a user's guarantee that
 * device = "cuda" computes what device = "cpu" computes (bounds derived per op: tests/cuda/conformance.h), in
 * every precision: fp32 runs every op; tf32, bf16 and fp16 rerun the ops with products (GEMMs,
 * convolutions, attention, relative attention) and GELU (under bf16 and fp16 its own formulas on CUDA)
 * with both backends in that precision, and check that
 * the CUDA products really were rounded (they differ from fp32); bf16 and fp16 also check the 16-bit
 * storage conversions (to_half, from_half) bit for bit.
 * HS_CONF_DATA_SEED=N draws other random inputs (default 0: the inputs `make check` uses): a bound that
 * holds for the usual inputs and fails for others is a wrong bound, and a sweep over seeds finds it.
 * This file holds the harness's main and the GEMM and convolution cases; the other ops' cases are in
 * conformance_elementwise_attention.c and conformance_norm_loss_optim.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "util/check.h"

/* HS_CONF_DATA_SEED, mixed into the input generator's state (0: unset) */
static uint64_t data_seed(void) {
    const char *v = getenv("HS_CONF_DATA_SEED");
    if (!v || !*v) return 0;
    char *end;
    const unsigned long long s = strtoull(v, &end, 10);
    if (*end) HS_FATAL("set HS_CONF_DATA_SEED to a non-negative integer", "HS_CONF_DATA_SEED=%s", v);
    return (uint64_t)s * 0xbf58476d1ce4e5b9ULL;
}

/* absdot[i·ldc + j] = |alpha| Σ_q |op(A)[i,q] op(B)[q,j]| + |beta c[i·ldc + j]| (row-major storage as the
 * backends use it; the pad columns j >= n keep |c|: they must come back unchanged). */
static double *gemm_absdot(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                           const float *b, int ldb, float beta, const float *c, int ldc) {
    double *abs_c;
    HS_ALLOC(abs_c, (size_t)m * ldc);
    for (int i = 0; i < m; i++)
        for (int j = 0; j < ldc; j++) {
            double s = 0.0;
            if (j < n)
                for (int q = 0; q < k; q++)
                    s += fabs((double)(ta ? a[(size_t)q * lda + i] : a[(size_t)i * lda + q]) *
                              (double)(tb ? b[(size_t)j * ldb + q] : b[(size_t)q * ldb + j]));
            const double cij = c[(size_t)i * ldc + j];
            abs_c[(size_t)i * ldc + j] = j < n ? fabs((double)alpha) * s + fabs((double)beta * cij) : fabs(cij);
        }
    return abs_c;
}

/* C[m,n] = alpha·op(A)·op(B) + beta·C for every transpose pair, padded leading dimensions, beta 0/1 */
static void gemm_cases(hs_conf *t) {
    static const int dims[][3] = {{1, 1, 1}, {31, 33, 1}, {33, 31, 127}, {127, 1, 33}, {64, 96, 256}, {5, 300, 7}};
    char what[160];
    hs_conf_op(t, "gemm");
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++)
                for (int beta_one = 0; beta_one < 2; beta_one++) {
                    const int m = dims[d][0], n = dims[d][1], k = dims[d][2], pad = (int)(d % 3);
                    /* stored shapes: A is [m,k] (or [k,m] transposed), B [k,n] (or [n,k]) */
                    const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
                    const int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
                    float *a = hs_conf_rand(t, (size_t)a_rows * lda, -1, 1), *b = hs_conf_rand(t, (size_t)b_rows * ldb, -1, 1);
                    float *c = hs_conf_rand(t, (size_t)m * ldc, -1, 1);
                    void *a0, *a1, *b0, *b1, *c0, *c1;
                    hs_conf_both(t, a, (size_t)a_rows * lda * sizeof(float), &a0, &a1);
                    hs_conf_both(t, b, (size_t)b_rows * ldb * sizeof(float), &b0, &b1);
                    hs_conf_both(t, c, (size_t)m * ldc * sizeof(float), &c0, &c1);
                    const float alpha = 0.75f, beta = beta_one ? 1.0f : 0.0f;
                    t->cpu->gemm(t->cpu, ta, tb, m, n, k, alpha, a0, lda, b0, ldb, beta, c0, ldc);
                    t->cuda->gemm(t->cuda, ta, tb, m, n, k, alpha, a1, lda, b1, ldb, beta, c1, ldc);
                    snprintf(what, sizeof what, "C m=%d n=%d k=%d trans_a=%d trans_b=%d beta=%g ld pad %d", m, n, k, ta,
                             tb, beta, pad);
                    double *absdot = gemm_absdot(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
                    hs_conf_check_dot(t, what, c0, c1, (size_t)m * ldc, absdot, k + 2); /* + alpha, beta·c */
                    free(absdot);
                    if (t->precision != HS_PRECISION_FP32 && k >= 7) { /* rounded: not the fp32 product */
                        void *cf = hs_conf_dev(t->cpu_fp32, c, (size_t)m * ldc * sizeof(float));
                        t->cpu_fp32->gemm(t->cpu_fp32, ta, tb, m, n, k, alpha, a0, lda, b0, ldb, beta, cf, ldc);
                        hs_conf_check_rounded(t, what, cf, c1, (size_t)m * ldc);
                        t->cpu_fp32->free(t->cpu_fp32, cf);
                    }
                    hs_conf_free_both(t, a0, a1), hs_conf_free_both(t, b0, b1), hs_conf_free_both(t, c0, c1);
                    free(a), free(b), free(c);
                }
}

/* The GEMMs with a bias epilogue: gemm_bias (y = x·wᵀ + bias, rows ldy apart) and gemm_wgrad_bgrad
 * (dw += dyᵀ·x and dbias += Σ dy accumulating onto random values, or both written over NaN when
 * overwrite: an update's first writer, which must never read them), dy a column slice of a wider matrix where ldy > out (the q|k|v thirds).
 * Bounds: y and dw are dot products of in + 1 (the bias) and rows + 1 (the accumulator) terms; dbias is a
 * sum of rows terms in [-1, 1] (+ the accumulator), whose terms a GPU may take as the 16-bit operands the
 * GEMM reads (term error u_op). */
static void gemm_epilogue_cases(hs_conf *t) {
    static const int dims[][4] = {/* rows, in, out, ldy pad */
                                  {1, 1, 1, 0}, {31, 33, 17, 0}, {33, 127, 31, 5}, {128, 64, 96, 0}, {7, 5, 300, 33}};
    char what[160];
    const double u_op = hs_conf_operand_roundoff(t);
    hs_conf_op(t, "gemm_bias");
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
        const int rows = dims[d][0], in = dims[d][1], out = dims[d][2], ldy = out + dims[d][3];
        float *x = hs_conf_rand(t, (size_t)rows * in, -1, 1), *w = hs_conf_rand(t, (size_t)out * in, -1, 1);
        float *b = hs_conf_rand(t, (size_t)out, -1, 1), *y = hs_conf_rand(t, (size_t)rows * ldy, -1, 1);
        hs_conf_pair px = hs_conf_pair_of(t, x, (size_t)rows * in * 4), pw = hs_conf_pair_of(t, w, (size_t)out * in * 4);
        hs_conf_pair pb = hs_conf_pair_of(t, b, (size_t)out * 4), py = hs_conf_pair_of(t, y, (size_t)rows * ldy * 4);
        t->cpu->gemm_bias(t->cpu, py.cpu, ldy, px.cpu, pw.cpu, pb.cpu, rows, in, out);
        t->cuda->gemm_bias(t->cuda, py.cuda, ldy, px.cuda, pw.cuda, pb.cuda, rows, in, out);
        snprintf(what, sizeof what, "y rows=%d in=%d out=%d ldy=%d", rows, in, out, ldy);
        /* Σ|x w| + |bias| per element; the pad columns come back unchanged (bound |y|: compared exactly by
         * the check's relative floor is not needed, they are copies) */
        double *absdot;
        HS_ALLOC(absdot, (size_t)rows * ldy);
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < ldy; j++) {
                double sum = 0.0;
                if (j < out)
                    for (int q = 0; q < in; q++) sum += fabs((double)x[(size_t)r * in + q] * w[(size_t)j * in + q]);
                absdot[(size_t)r * ldy + j] = j < out ? sum + fabs((double)b[j]) : 0.0;
            }
        hs_conf_check_dot(t, what, py.cpu, py.cuda, (size_t)rows * ldy, absdot, in + 1.0);
        free(absdot);
        if (t->precision != HS_PRECISION_FP32 && in >= 7) { /* rounded: not the fp32 product */
            void *yf = hs_conf_dev(t->cpu_fp32, y, (size_t)rows * ldy * 4);
            t->cpu_fp32->gemm_bias(t->cpu_fp32, yf, ldy, px.cpu, pw.cpu, pb.cpu, rows, in, out);
            hs_conf_check_rounded(t, what, yf, py.cuda, (size_t)rows * ldy);
            t->cpu_fp32->free(t->cpu_fp32, yf);
        }
        hs_conf_pair_free(t, px), hs_conf_pair_free(t, pw), hs_conf_pair_free(t, pb), hs_conf_pair_free(t, py);
        free(x), free(w), free(b), free(y);
    }
    hs_conf_op(t, "gemm_wgrad_bgrad");
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (int overwrite = 0; overwrite < 2; overwrite++) {
            const int rows = dims[d][0], in = dims[d][1], out = dims[d][2], ldy = out + dims[d][3];
            float *dy = hs_conf_rand(t, (size_t)rows * ldy, -1, 1), *x = hs_conf_rand(t, (size_t)rows * in, -1, 1);
            float *dw = hs_conf_rand(t, (size_t)out * in, -1, 1), *db = hs_conf_rand(t, (size_t)out, -1, 1);
            if (overwrite) {
                for (size_t e = 0; e < (size_t)out * in; e++) dw[e] = NAN;
                for (int e = 0; e < out; e++) db[e] = NAN;
            }
            hs_conf_pair pdy = hs_conf_pair_of(t, dy, (size_t)rows * ldy * 4), px = hs_conf_pair_of(t, x, (size_t)rows * in * 4);
            hs_conf_pair pdw = hs_conf_pair_of(t, dw, (size_t)out * in * 4), pdb = hs_conf_pair_of(t, db, (size_t)out * 4);
            void *again = hs_conf_dev(t->cuda, db, (size_t)out * 4), *dw_again = hs_conf_dev(t->cuda, dw, (size_t)out * in * 4);
            t->cpu->gemm_wgrad_bgrad(t->cpu, pdw.cpu, pdb.cpu, pdy.cpu, ldy, px.cpu, rows, in, out, overwrite);
            t->cuda->gemm_wgrad_bgrad(t->cuda, pdw.cuda, pdb.cuda, pdy.cuda, ldy, px.cuda, rows, in, out, overwrite);
            t->cuda->gemm_wgrad_bgrad(t->cuda, dw_again, again, pdy.cuda, ldy, px.cuda, rows, in, out, overwrite);
            snprintf(what, sizeof what, "dw, dbias (%s) rows=%d in=%d out=%d ldy=%d", overwrite ? "written" : "accumulated",
                     rows, in, out, ldy);
            double *absdot;
            HS_ALLOC(absdot, (size_t)out * in);
            for (int o = 0; o < out; o++)
                for (int i = 0; i < in; i++) {
                    double sum = overwrite ? 0.0 : fabs((double)dw[(size_t)o * in + i]);
                    for (int r = 0; r < rows; r++) sum += fabs((double)dy[(size_t)r * ldy + o] * x[(size_t)r * in + i]);
                    absdot[(size_t)o * in + i] = sum;
                }
            hs_conf_check_dot(t, what, pdw.cpu, pdw.cuda, (size_t)out * in, absdot, rows + 1.0);
            free(absdot);
            hs_conf_check_sum_f32(t, what, pdb.cpu, pdb.cuda, (size_t)out, rows + 1.0, rows + 1.0, u_op);
            hs_conf_same_bits(t, what, pdb.cuda, again, (size_t)out * 4);
            hs_conf_same_bits(t, what, pdw.cuda, dw_again, (size_t)out * in * 4);
            hs_conf_pair_free(t, pdy), hs_conf_pair_free(t, px), hs_conf_pair_free(t, pdw), hs_conf_pair_free(t, pdb);
            t->cuda->free(t->cuda, again), t->cuda->free(t->cuda, dw_again);
            free(dy), free(x), free(dw), free(db);
        }
}

/* The GEMMs on pointers one float past an allocation's start (a column slice or a row offset into a larger
 * matrix, a parameter 64 bytes into its arena): a GPU's cuBLASLt refuses pointers less aligned than the
 * algorithm the heuristic picked for them (256 bytes unless it is told), and its epilogues load the bias
 * vector 16 bytes at a time; the emulated device refuses both as a GPU would. The same bounds as above. */
static float *past_start(const hs_conf_pair p, int cuda) { return (float *)(cuda ? p.cuda : p.cpu) + 1; }

static void gemm_unaligned_cases(hs_conf *t) {
    const int m = 33, n = 31, k = 65;
    char what[160];
    const double u_op = hs_conf_operand_roundoff(t);
    hs_conf_op(t, "gemm, gemm_bias, gemm_wgrad_bgrad (pointers 4 bytes past 256-byte alignment)");
    for (int ta = 0; ta < 2; ta++) { /* C = op(A)·op(B) + C, A [m,k] or [k,m], B [k,n] */
        const size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
        float *a = hs_conf_rand(t, na + 1, -1, 1), *b = hs_conf_rand(t, nb + 1, -1, 1), *c = hs_conf_rand(t, nc + 1, -1, 1);
        hs_conf_pair pa = hs_conf_pair_of(t, a, (na + 1) * 4), pb = hs_conf_pair_of(t, b, (nb + 1) * 4);
        hs_conf_pair pc = hs_conf_pair_of(t, c, (nc + 1) * 4);
        const int lda = ta ? m : k;
        for (int side = 0; side < 2; side++) {
            const hs_backend *be = side ? t->cuda : t->cpu;
            be->gemm(be, ta, 0, m, n, k, 1.0f, past_start(pa, side), lda, past_start(pb, side), n, 1.0f,
                     past_start(pc, side), n);
        }
        snprintf(what, sizeof what, "gemm C m=%d n=%d k=%d trans_a=%d, a, b, c at +4 bytes", m, n, k, ta);
        double *absdot = gemm_absdot(ta, 0, m, n, k, 1.0f, a + 1, lda, b + 1, n, 1.0f, c + 1, n);
        hs_conf_check_dot(t, what, past_start(pc, 0), past_start(pc, 1), nc, absdot, k + 2);
        free(absdot);
        hs_conf_pair_free(t, pa), hs_conf_pair_free(t, pb), hs_conf_pair_free(t, pc);
        free(a), free(b), free(c);
    }
    const int rows = m, in = k, out = n;
    float *x = hs_conf_rand(t, (size_t)rows * in + 1, -1, 1), *w = hs_conf_rand(t, (size_t)out * in + 1, -1, 1);
    float *bias = hs_conf_rand(t, (size_t)out + 1, -1, 1), *y = hs_conf_rand(t, (size_t)rows * out + 1, -1, 1);
    hs_conf_pair px = hs_conf_pair_of(t, x, ((size_t)rows * in + 1) * 4), pw = hs_conf_pair_of(t, w, ((size_t)out * in + 1) * 4);
    hs_conf_pair pbias = hs_conf_pair_of(t, bias, ((size_t)out + 1) * 4), py = hs_conf_pair_of(t, y, ((size_t)rows * out + 1) * 4);
    for (int side = 0; side < 2; side++) {
        const hs_backend *be = side ? t->cuda : t->cpu;
        be->gemm_bias(be, past_start(py, side), out, past_start(px, side), past_start(pw, side), past_start(pbias, side),
                      rows, in, out);
    }
    double *absdot;
    HS_ALLOC(absdot, (size_t)rows * out);
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < out; j++) {
            double sum = fabs((double)bias[1 + j]);
            for (int q = 0; q < in; q++) sum += fabs((double)x[1 + (size_t)r * in + q] * w[1 + (size_t)j * in + q]);
            absdot[(size_t)r * out + j] = sum;
        }
    snprintf(what, sizeof what, "gemm_bias y rows=%d in=%d out=%d, x, w, bias, y at +4 bytes", rows, in, out);
    hs_conf_check_dot(t, what, past_start(py, 0), past_start(py, 1), (size_t)rows * out, absdot, in + 1.0);
    free(absdot);
    /* dw += dyᵀ·x, dbias (+)= Σ dy with y as dy: every pointer one float in */
    for (int overwrite = 0; overwrite < 2; overwrite++) {
        float *dw = hs_conf_rand(t, (size_t)out * in + 1, -1, 1), *db = hs_conf_rand(t, (size_t)out + 1, -1, 1);
        hs_conf_pair pdw = hs_conf_pair_of(t, dw, ((size_t)out * in + 1) * 4), pdb = hs_conf_pair_of(t, db, ((size_t)out + 1) * 4);
        for (int side = 0; side < 2; side++) {
            const hs_backend *be = side ? t->cuda : t->cpu;
            be->gemm_wgrad_bgrad(be, past_start(pdw, side), past_start(pdb, side), past_start(py, side), out,
                                 past_start(px, side), rows, in, out, overwrite);
        }
        float *dy = hs_conf_fetch(t->cpu, py.cpu, ((size_t)rows * out + 1) * 4);
        HS_ALLOC(absdot, (size_t)out * in);
        for (int o = 0; o < out; o++)
            for (int i = 0; i < in; i++) {
                double sum = fabs((double)dw[1 + (size_t)o * in + i]);
                for (int r = 0; r < rows; r++) sum += fabs((double)dy[1 + (size_t)r * out + o] * x[1 + (size_t)r * in + i]);
                absdot[(size_t)o * in + i] = sum;
            }
        snprintf(what, sizeof what, "gemm_wgrad_bgrad dw, dbias (%s), every pointer at +4 bytes",
                 overwrite ? "written" : "accumulated");
        hs_conf_check_dot(t, what, past_start(pdw, 0), past_start(pdw, 1), (size_t)out * in, absdot, rows + 1.0);
        free(absdot);
        hs_conf_check_sum_f32(t, what, past_start(pdb, 0), past_start(pdb, 1), (size_t)out, rows + 1.0, rows + 1.0, u_op);
        hs_conf_pair_free(t, pdw), hs_conf_pair_free(t, pdb);
        free(dw), free(db), free(dy);
    }
    hs_conf_pair_free(t, px), hs_conf_pair_free(t, pw), hs_conf_pair_free(t, pbias), hs_conf_pair_free(t, py);
    free(x), free(w), free(bias), free(y);
}

/* Σ|terms| of each conv2d output (stride 1, no padding; NCHW, weights [c_out, c_in, kh, kw]):
 * y: Σ|x w| + |b|; dx: Σ|dy w|; dw: Σ|dy x| + |dw0| (accumulates); db: Σ|dy| + |db0|. */
static void conv_absdot(const hs_conv2d_shape *s, const float *x, const float *w, const float *b, const float *dy,
                        const float *dw0, const float *db0, double *ay, double *adx, double *adw, double *adb) {
    const size_t nx = (size_t)s->n * s->c_in * s->h * s->w, nw = (size_t)s->c_out * s->c_in * s->kh * s->kw;
    for (size_t i = 0; i < nx; i++) adx[i] = 0.0;
    for (size_t i = 0; i < nw; i++) adw[i] = fabs((double)dw0[i]);
    for (int o = 0; o < s->c_out; o++) adb[o] = fabs((double)db0[o]);
    for (int n = 0; n < s->n; n++)
        for (int o = 0; o < s->c_out; o++)
            for (int oy = 0; oy < s->oh; oy++)
                for (int ox = 0; ox < s->ow; ox++) {
                    const size_t yi = (((size_t)n * s->c_out + o) * s->oh + oy) * s->ow + ox;
                    const double g = fabs((double)dy[yi]);
                    double acc = fabs((double)b[o]);
                    adb[o] += g;
                    for (int c = 0; c < s->c_in; c++)
                        for (int r = 0; r < s->kh; r++)
                            for (int q = 0; q < s->kw; q++) {
                                const size_t xi = (((size_t)n * s->c_in + c) * s->h + oy + r) * s->w + ox + q;
                                const size_t wi = (((size_t)o * s->c_in + c) * s->kh + r) * s->kw + q;
                                acc += fabs((double)x[xi] * w[wi]);
                                adx[xi] += g * fabs((double)w[wi]);
                                adw[wi] += g * fabs((double)x[xi]);
                            }
                    ay[yi] = acc;
                }
}

/* conv2d forward and backward (dx, dw and db accumulating onto non-zero values) */
static void conv_cases(hs_conf *t) {
    static const int shapes[][6] = {/* n, c_in, h, w, c_out, k */
                                    {1, 1, 1, 1, 1, 1}, {2, 1, 28, 28, 8, 3}, {3, 4, 12, 12, 16, 3},
                                    {2, 32, 13, 13, 64, 3}, {2, 3, 9, 7, 5, 5}};
    char what[160];
    hs_conf_op(t, "conv2d_forward/backward");
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        hs_conv2d_shape s = {.n = shapes[i][0], .c_in = shapes[i][1], .h = shapes[i][2], .w = shapes[i][3],
                             .c_out = shapes[i][4], .kh = shapes[i][5], .kw = shapes[i][5]};
        s.oh = s.h - s.kh + 1, s.ow = s.w - s.kw + 1;
        const size_t nx = (size_t)s.n * s.c_in * s.h * s.w, nw = (size_t)s.c_out * s.c_in * s.kh * s.kw,
                     ny = (size_t)s.n * s.c_out * s.oh * s.ow;
        float *x = hs_conf_rand(t, nx, -1, 1), *w = hs_conf_rand(t, nw, -0.5f, 0.5f), *b = hs_conf_rand(t, s.c_out, -1, 1);
        float *dy = hs_conf_rand(t, ny, -1, 1), *dw = hs_conf_rand(t, nw, -1, 1), *db = hs_conf_rand(t, s.c_out, -1, 1);
        void *x0, *x1, *w0, *w1, *b0, *b1, *y0, *y1, *dy0, *dy1, *dx0, *dx1, *dw0, *dw1, *db0, *db1;
        hs_conf_both(t, x, nx * 4, &x0, &x1), hs_conf_both(t, w, nw * 4, &w0, &w1);
        hs_conf_both(t, b, (size_t)s.c_out * 4, &b0, &b1), hs_conf_both(t, NULL, ny * 4, &y0, &y1);
        hs_conf_both(t, dy, ny * 4, &dy0, &dy1), hs_conf_both(t, NULL, nx * 4, &dx0, &dx1);
        hs_conf_both(t, dw, nw * 4, &dw0, &dw1), hs_conf_both(t, db, (size_t)s.c_out * 4, &db0, &db1);
        void *ws0 = t->cpu->alloc(t->cpu, t->cpu->conv2d_workspace_bytes(t->cpu, &s) + 1);
        void *ws1 = t->cuda->alloc(t->cuda, t->cuda->conv2d_workspace_bytes(t->cuda, &s) + 1);
        t->cpu->conv2d_forward(t->cpu, &s, y0, x0, w0, b0, ws0);
        t->cuda->conv2d_forward(t->cuda, &s, y1, x1, w1, b1, ws1);
        t->cpu->conv2d_backward(t->cpu, &s, dx0, dw0, db0, dy0, x0, w0, ws0);
        t->cuda->conv2d_backward(t->cuda, &s, dx1, dw1, db1, dy1, x1, w1, ws1);
        snprintf(what, sizeof what, "n=%d c_in=%d %dx%d c_out=%d k=%d", s.n, s.c_in, s.h, s.w, s.c_out, s.kh);
        /* dot products of K = c_in kh kw (y), c_out kh kw (dx), n oh ow (dw, db) terms, + bias / accumulator */
        double *ay, *adx, *adw, *adb;
        HS_ALLOC(ay, ny), HS_ALLOC(adx, nx), HS_ALLOC(adw, nw), HS_ALLOC(adb, (size_t)s.c_out);
        conv_absdot(&s, x, w, b, dy, dw, db, ay, adx, adw, adb);
        const double kdw = (double)s.n * s.oh * s.ow + 1;
        hs_conf_check_dot(t, what, y0, y1, ny, ay, (double)s.c_in * s.kh * s.kw + 1);
        hs_conf_check_dot(t, what, dx0, dx1, nx, adx, (double)s.c_out * s.kh * s.kw);
        hs_conf_check_dot(t, what, dw0, dw1, nw, adw, kdw);
        hs_conf_check_dot(t, what, db0, db1, (size_t)s.c_out, adb, kdw);
        free(ay), free(adx), free(adw), free(adb);
        if (t->precision != HS_PRECISION_FP32 && s.c_in * s.kh * s.kw >= 7) { /* rounded: not the fp32 forward */
            void *yf = t->cpu_fp32->alloc(t->cpu_fp32, ny * 4);
            t->cpu_fp32->conv2d_forward(t->cpu_fp32, &s, yf, x0, w0, b0, ws0);
            hs_conf_check_rounded(t, what, yf, y1, ny);
            t->cpu_fp32->free(t->cpu_fp32, yf);
        }
        /* first layer: dx = NULL leaves it alone */
        t->cuda->conv2d_backward(t->cuda, &s, NULL, dw1, db1, dy1, x1, w1, ws1);
        t->cuda->synchronize(t->cuda);
        hs_conf_free_both(t, x0, x1), hs_conf_free_both(t, w0, w1), hs_conf_free_both(t, b0, b1);
        hs_conf_free_both(t, y0, y1), hs_conf_free_both(t, dy0, dy1), hs_conf_free_both(t, dx0, dx1);
        hs_conf_free_both(t, dw0, dw1), hs_conf_free_both(t, db0, db1);
        t->cpu->free(t->cpu, ws0), t->cuda->free(t->cuda, ws1);
        free(x), free(w), free(b), free(dy), free(dw), free(db);
    }
}

void hs_conf_group_blas_conv(hs_conf *t) {
    gemm_cases(t);
    gemm_epilogue_cases(t);
    gemm_unaligned_cases(t);
    conv_cases(t);
}


/* Usage: test_op_conformance [group [precision]]: group blas_conv, elementwise_attention, norm_loss_optim,
 * rel_attention or all (default);
 * precision fp32, tf32, bf16, fp16 or all (default). */
int main(int argc, char **argv) {
    const char *only = argc > 1 && strcmp(argv[1], "all") ? argv[1] : NULL;
    const char *only_prec = argc > 2 && strcmp(argv[2], "all") ? argv[2] : NULL;
    static const char *const names[] = {"fp32", "tf32", "bf16", "fp16"};
    static const int precs[] = {HS_PRECISION_FP32, HS_PRECISION_TF32, HS_PRECISION_BF16, HS_PRECISION_FP16};
    char why[256];
    const hs_backend *cuda = hs_backend_cuda(0, why, sizeof why);
    if (!cuda) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    int checks = 0, failures = 0;
    for (int i = 0; i < 4; i++) {
        if (only_prec && strcmp(only_prec, names[i])) continue;
        if (precs[i] == HS_PRECISION_BF16 && !hs_backend_cpu_bf16(why, sizeof why)) {
            printf("precision bf16 skipped: the CPU reference needs it: %s\n", why);
            continue;
        }
        hs_conf t = {.cpu = hs_backend_with_precision(hs_backend_cpu(), names[i]),
                     .cuda = hs_backend_with_precision(cuda, names[i]),
                     .cpu_fp32 = hs_backend_cpu(),
                     .precision = precs[i],
                     .rng = 0x9e3779b97f4a7c15ULL ^ data_seed()};
        printf("CUDA backend against the CPU backend, precision %s (operand rounding %.3g, dot-product factor "
               "2 (2 u_op + u_op^2 + gamma_K); worst err/bound per op, <= 1 passes)\n",
               names[i], hs_conf_operand_roundoff(&t));
        if (!only || !strcmp(only, "blas_conv")) hs_conf_group_blas_conv(&t);
        if (precs[i] == HS_PRECISION_FP32) { /* every op; the others have no products */
            if (!only || !strcmp(only, "elementwise_attention")) hs_conf_group_elementwise_attention(&t);
            if (!only || !strcmp(only, "norm_loss_optim")) hs_conf_group_norm_loss_optim(&t);
        } else if (!only || !strcmp(only, "elementwise_attention")) {
            hs_conf_group_attention(&t);
            hs_conf_group_flash_attention(&t);
            hs_conf_group_gelu(&t); /* its own formulas under bf16 and fp16 */
            hs_conf_group_half(&t);
        }
        if (!only || !strcmp(only, "rel_attention")) hs_conf_group_rel_attention(&t);
        if (only && !strcmp(only, "flash_attention")) hs_conf_group_flash_attention(&t); /* alone */
        hs_conf_finish(&t);
        printf("precision %s: %d checks, %d failed\n", names[i], t.checks, t.failures);
        checks += t.checks, failures += t.failures;
    }
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
