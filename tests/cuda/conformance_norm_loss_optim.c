/* Op conformance, group norm_loss_optim: LayerNorm, the losses and the multi-tensor ops (norms, clipping, optimizers)
 * of the CUDA backend (kernels/layernorm.cu, loss.cu, multi_tensor.cu) against the CPU backend, on random
 * inputs with sizes on and off the block and warp sizes. Statistics and norms (float64 on the device)
 * are compared in float64 with the reduction rule (conformance.h): both backends sum in double, in
 * different orders, terms the devices computed in float. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "hs_launch.h"
#include "util/check.h"

/* float64 results (loss statistics, norms): double sums in another order differ ~1e-16 relative; the
 * float inputs to them may differ by an ulp where the compilers fuse a multiply-add differently. */

/* The element-wise rule (conformance.h): 32 u32 of the value, floored at 32 u32 of the output's scale
 * (the losses' probabilities and gradients, the optimizers' parameters and states, the scaled tensors
 * are of their inputs' magnitude). */
static void check_ew(hs_conf *t, const char *what, hs_conf_pair p, size_t n) { hs_conf_check_ew(t, what, p.cpu, p.cuda, n, 0.0); }


/* The losses' statistics (double slots the ops add to): a sum over rows, in double, of per-row values
 * computed in float — each within 32 u32 of the row's magnitude, |loss| <= 2 max|logit| + log(cols) —
 * so the bound is HS_CONF_C (32 u32 + gamma_rows(2^-53)) (|slot| + rows (2·5 + log cols)). */
static void check_stats(hs_conf *t, const char *what, hs_conf_pair p, int rows, int cols) {
    double *a = malloc(3 * sizeof *a), bound[3];
    if (!a) HS_FATAL("out of memory", "malloc(%zu)", 3 * sizeof *a);
    t->cpu->download(t->cpu, a, p.cpu, 3 * sizeof *a);
    for (int k = 0; k < 3; k++)
        bound[k] = HS_CONF_C * (HS_CONF_EW_ULPS * HS_CONF_U32 + hs_conf_gamma(rows + 1, 0x1p-53)) *
                   (fabs(a[k]) + rows * (10.0 + log((double)cols + 1.0)));
    hs_conf_check_bound_f64(t, what, p.cpu, p.cuda, 3, bound);
    free(a);
}


/* ---- LayerNorm ---------------------------------------------------------------------------------------- */

/* The LayerNorm bounds (conformance.h, docs/gpu.md), per row of n = cols values of the input v (x, or
 * x + residual), from the CPU's mean mu and rstd r (r^2 = 1/(var + eps)), M = max |v|, u = u32:
 *   the mean: |d mu| <= gamma_n M;  the variance (any of the usual algorithms, E[x^2] - mu^2 included):
 *   |d var| <= (3 gamma_n + 4u) M^2;  so |dr|/r <= |d var| r^2 / 2 + 2u;
 *   x^_i = (v_i - mu) r:  |d x^_i| <= r (gamma_n + 2u) M + |x^_i| |dr|/r  — r M is the 1/sigma condition
 *   number: a near-constant row (cols 1 or 2, eps 1e-12) gets a bound that large, not a relative one;
 *   y_i = g_i x^_i + b_i:  |g_i| |d x^_i| + 2u (|g_i x^_i| + |b_i|);
 *   dx_i = r (a_i - mean(a) - x^_i mean(a x^)), a = g dy, A = max |a|, X = max |x^|, D = max |d x^|:
 *   r [u |a_i| + (gamma_n + u) A + |d x^_i| A X + |x^_i| ((gamma_n + 2u) A X + A D) + 3u B_i] + |dr| B_i,
 *   B_i = |a_i| + A + |x^_i| A X (the bracket's terms);
 *   dgamma_j += sum_rows dy x^ and dbeta_j += sum_rows dy: reductions over the rows, with the d x^ above.
 * Every bound is HS_CONF_C times these (two implementations). */
typedef struct {
    double *y, *mean, *rstd, *dx, *dg, *db;
} ln_bounds;

static void ln_bounds_compute(ln_bounds *lb, const float *v, const float *mean, const float *rstd, const float *g,
                              const float *b, const float *dy, const float *dg0, const float *db0, int rows, int cols) {
    const double u = HS_CONF_U32, c = HS_CONF_C, gn = hs_conf_gamma(cols, u), gr = hs_conf_gamma(rows + 1, u);
    double *dxh, *sum_dyx, *sum_dy, *sum_dy_dxh;
    HS_ALLOC(dxh, (size_t)cols), HS_ALLOC(sum_dyx, (size_t)cols), HS_ALLOC(sum_dy, (size_t)cols),
        HS_ALLOC(sum_dy_dxh, (size_t)cols);
    for (int j = 0; j < cols; j++) sum_dyx[j] = sum_dy[j] = sum_dy_dxh[j] = 0.0;
    for (int r0 = 0; r0 < rows; r0++) {
        const float *vr = v + (size_t)r0 * cols, *dyr = dy + (size_t)r0 * cols;
        const double mu = mean[r0], r = rstd[r0];
        double M = 0.0, A = 0.0, X = 0.0, D = 0.0;
        for (int j = 0; j < cols; j++) {
            M = fmax(M, fabs((double)vr[j]));
            A = fmax(A, fabs((double)g[j] * dyr[j]));
            X = fmax(X, fabs((vr[j] - mu) * r));
        }
        const double dvar = (3.0 * gn + 4.0 * u) * M * M, drr = dvar * r * r / 2.0 + 2.0 * u;
        for (int j = 0; j < cols; j++) {
            const double xh = (vr[j] - mu) * r;
            dxh[j] = r * (gn + 2.0 * u) * M + fabs(xh) * drr;
            D = fmax(D, dxh[j]);
        }
        lb->mean[r0] = c * (gn * M + u * fabs(mu));
        lb->rstd[r0] = c * drr * r;
        for (int j = 0; j < cols; j++) {
            const size_t i = (size_t)r0 * cols + j;
            const double xh = (vr[j] - mu) * r, a = fabs((double)g[j] * dyr[j]);
            lb->y[i] = c * (fabs((double)g[j]) * dxh[j] + 2.0 * u * (fabs(g[j] * xh) + fabs((double)b[j])));
            const double B = a + A + fabs(xh) * A * X;
            lb->dx[i] = c * (r * (u * a + (gn + u) * A + dxh[j] * A * X + fabs(xh) * ((gn + 2.0 * u) * A * X + A * D) +
                                  3.0 * u * B) +
                             drr * r * B);
            sum_dyx[j] += fabs(dyr[j] * xh);
            sum_dy[j] += fabs((double)dyr[j]);
            sum_dy_dxh[j] += fabs((double)dyr[j]) * dxh[j];
        }
    }
    for (int j = 0; j < cols; j++) {
        lb->dg[j] = c * ((gr + 2.0 * u) * (fabs((double)dg0[j]) + sum_dyx[j]) + sum_dy_dxh[j]);
        lb->db[j] = c * (gr + u) * (fabs((double)db0[j]) + sum_dy[j]);
    }
    free(dxh), free(sum_dyx), free(sum_dy), free(sum_dy_dxh);
}

/* residual: 0 none, 1 x_sum separate, 2 x_sum aliasing x, 3 x_sum aliasing residual */
static void layernorm_case(hs_conf *t, int rows, int cols, int residual, float eps, float offset) {
    char what[200];
    const size_t n = (size_t)rows * (size_t)cols;
    float *x = hs_conf_rand(t, n, -2.0f + offset, 2.0f + offset), *res = hs_conf_rand(t, n, -1, 1);
    float *gamma = hs_conf_rand(t, (size_t)cols, 0.5f, 1.5f), *beta = hs_conf_rand(t, (size_t)cols, -1, 1);
    float *dy = hs_conf_rand(t, n, -1, 1);
    float *dgamma = hs_conf_rand(t, (size_t)cols, -1, 1), *dbeta = hs_conf_rand(t, (size_t)cols, -1, 1);
    hs_conf_pair px = hs_conf_pair_of(t, x, n * 4), pr = hs_conf_pair_of(t, res, n * 4), pg = hs_conf_pair_of(t, gamma, (size_t)cols * 4),
         pb = hs_conf_pair_of(t, beta, (size_t)cols * 4), py = hs_conf_pair_of(t, NULL, n * 4), psum = hs_conf_pair_of(t, NULL, n * 4),
         pmean = hs_conf_pair_of(t, NULL, (size_t)rows * 4), prstd = hs_conf_pair_of(t, NULL, (size_t)rows * 4), pdy = hs_conf_pair_of(t, dy, n * 4),
         pdg = hs_conf_pair_of(t, dgamma, (size_t)cols * 4), pdb = hs_conf_pair_of(t, dbeta, (size_t)cols * 4);
    /* the LayerNorm's input as the backward pass sees it */
    hs_conf_pair in = px, xs = psum, rs = pr;
    if (residual == 2) xs = px;
    if (residual == 3) xs = pr;
    if (residual) in = xs;
    snprintf(what, sizeof what, "rows=%d cols=%d residual=%s eps=%g offset=%g", rows, cols,
             residual == 0 ? "none" : residual == 1 ? "separate" : residual == 2 ? "x_sum=x" : "x_sum=residual", eps,
             offset);
    t->cpu->layernorm_forward(t->cpu, py.cpu, residual ? xs.cpu : NULL, pmean.cpu, prstd.cpu, px.cpu,
                              residual ? rs.cpu : NULL, pg.cpu, pb.cpu, rows, cols, eps);
    t->cuda->layernorm_forward(t->cuda, py.cuda, residual ? xs.cuda : NULL, pmean.cuda, prstd.cuda, px.cuda,
                               residual ? rs.cuda : NULL, pg.cuda, pb.cuda, rows, cols, eps);
    /* the input as the CPU computed it, and its mean and rstd: the bounds' arguments */
    float *v = residual ? hs_conf_download_f32(t->cpu, xs.cpu, n) : NULL;
    if (!v) {
        HS_ALLOC(v, n ? n : 1);
        memcpy(v, x, n * sizeof *v);
    }
    float *mean = hs_conf_download_f32(t->cpu, pmean.cpu, (size_t)rows), *rstd = hs_conf_download_f32(t->cpu, prstd.cpu, (size_t)rows);
    ln_bounds lb;
    HS_ALLOC(lb.y, n ? n : 1), HS_ALLOC(lb.dx, n ? n : 1), HS_ALLOC(lb.mean, (size_t)rows),
        HS_ALLOC(lb.rstd, (size_t)rows), HS_ALLOC(lb.dg, (size_t)cols), HS_ALLOC(lb.db, (size_t)cols);
    ln_bounds_compute(&lb, v, mean, rstd, gamma, beta, dy, dgamma, dbeta, rows, cols);
    hs_conf_check_bound(t, what, py.cpu, py.cuda, n, lb.y);
    hs_conf_check_bound(t, what, pmean.cpu, pmean.cuda, (size_t)rows, lb.mean);
    hs_conf_check_bound(t, what, prstd.cpu, prstd.cuda, (size_t)rows, lb.rstd);
    if (residual) hs_conf_check_ew(t, what, xs.cpu, xs.cuda, n, 3.0f + fabsf(offset)); /* x + residual */
    double *carry_dg, *carry_db; /* the second pass accumulates onto the first's dgamma, dbeta */
    HS_ALLOC(carry_dg, (size_t)cols), HS_ALLOC(carry_db, (size_t)cols);
    memcpy(carry_dg, lb.dg, (size_t)cols * sizeof *carry_dg), memcpy(carry_db, lb.db, (size_t)cols * sizeof *carry_db);
    /* backward: dx separate, then in place over dy (dgamma/dbeta accumulate onto random values) */
    for (int in_place = 0; in_place < 2; in_place++) {
        hs_conf_pair pdx = in_place ? pdy : hs_conf_pair_of(t, NULL, n * 4);
        t->cpu->layernorm_backward(t->cpu, pdx.cpu, pdg.cpu, pdb.cpu, pdy.cpu, in.cpu, pmean.cpu, prstd.cpu, pg.cpu,
                                   rows, cols);
        t->cuda->layernorm_backward(t->cuda, pdx.cuda, pdg.cuda, pdb.cuda, pdy.cuda, in.cuda, pmean.cuda,
                                    prstd.cuda, pg.cuda, rows, cols);
        char what2[240];
        snprintf(what2, sizeof what2, "%s dx%s", what, in_place ? "=dy" : "");
        if (in_place) { /* the second pass: dgamma, dbeta start from the first's (and its error) */
            float *dg1 = hs_conf_download_f32(t->cpu, pdg.cpu, (size_t)cols), *db1 = hs_conf_download_f32(t->cpu, pdb.cpu, (size_t)cols);
            ln_bounds_compute(&lb, v, mean, rstd, gamma, beta, dy, dg1, db1, rows, cols);
            for (int j = 0; j < cols; j++) lb.dg[j] += carry_dg[j], lb.db[j] += carry_db[j];
            free(dg1), free(db1);
        }
        hs_conf_check_bound(t, what2, pdx.cpu, pdx.cuda, n, lb.dx);
        hs_conf_check_bound(t, what2, pdg.cpu, pdg.cuda, (size_t)cols, lb.dg);
        hs_conf_check_bound(t, what2, pdb.cpu, pdb.cuda, (size_t)cols, lb.db);
        if (!in_place) hs_conf_pair_free(t, pdx);
    }
    free(v), free(mean), free(rstd), free(carry_dg), free(carry_db);
    free(lb.y), free(lb.dx), free(lb.mean), free(lb.rstd), free(lb.dg), free(lb.db);
    hs_conf_pair_free(t, px), hs_conf_pair_free(t, pr), hs_conf_pair_free(t, pg), hs_conf_pair_free(t, pb), hs_conf_pair_free(t, py), hs_conf_pair_free(t, psum);
    hs_conf_pair_free(t, pmean), hs_conf_pair_free(t, prstd), hs_conf_pair_free(t, pdy), hs_conf_pair_free(t, pdg), hs_conf_pair_free(t, pdb);
    free(x), free(res), free(gamma), free(beta), free(dy), free(dgamma), free(dbeta);
}

static void layernorm_cases(hs_conf *t) {
    hs_conf_op(t, "layernorm_forward/backward");
    static const int shapes[][2] = {{1, 1}, {1, 31}, {31, 33}, {33, 127}, {127, 256}, {256, 33},
                                    {65, 1000}, {3, 4097}, {70, 768}, {40, 2}, {9, 500}, {5, 1024}, {3, 1025}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int residual = 0; residual < 4; residual++) {
            const float eps = s % 2 ? 1e-12f : 1e-5f, offset = s % 3 == 1 ? 3.0f : 0.0f;
            layernorm_case(t, shapes[s][0], shapes[s][1], residual, eps, offset);
        }
    /* more rows than the capped grid has warps (HS_MAX_GRID blocks of 8): rows are grid-strided */
    layernorm_case(t, 8197, 33, 1, 1e-12f, 0.0f);
}

/* A sublayer's end: x_sum = dropout(a) + residual, y = LayerNorm(x_sum) (x_sum over a), and its backward
 * dx = LayerNorm'(dy) in place over dy, da = dropout'(dx). The dropout is the same pure function of (key,
 * sample, element) on both backends, so x_sum gets the element-wise rule, y, mean, rstd and dx the
 * LayerNorm bounds from the CPU's x_sum, and da = f·dx (f = 0 or 1/(1-p)) the bound f·bound(dx) plus the
 * rounding of the product; a dropped element is exactly 0 on both. */
static void dropout_layernorm_case(hs_conf *t, int batch, int rows, int cols, size_t group, float p) {
    char what[200];
    const size_t n = (size_t)rows * (size_t)cols, per_sample = n / (size_t)batch;
    const float eps = 1e-12f;
    const uint64_t key = 0x5eedULL + (uint64_t)rows;
    const int64_t first = 11;
    float *a = hs_conf_rand(t, n, -2, 2), *res = hs_conf_rand(t, n, -1, 1);
    float *gamma = hs_conf_rand(t, (size_t)cols, 0.5f, 1.5f), *beta = hs_conf_rand(t, (size_t)cols, -1, 1);
    float *dy = hs_conf_rand(t, n, -1, 1);
    float *dgamma = hs_conf_rand(t, (size_t)cols, -1, 1), *dbeta = hs_conf_rand(t, (size_t)cols, -1, 1);
    hs_conf_pair pa = hs_conf_pair_of(t, a, n * 4), pr = hs_conf_pair_of(t, res, n * 4),
                 pg = hs_conf_pair_of(t, gamma, (size_t)cols * 4), pb = hs_conf_pair_of(t, beta, (size_t)cols * 4),
                 py = hs_conf_pair_of(t, NULL, n * 4), pmean = hs_conf_pair_of(t, NULL, (size_t)rows * 4),
                 prstd = hs_conf_pair_of(t, NULL, (size_t)rows * 4), pdy = hs_conf_pair_of(t, dy, n * 4),
                 pda = hs_conf_pair_of(t, NULL, n * 4), pdg = hs_conf_pair_of(t, dgamma, (size_t)cols * 4),
                 pdb = hs_conf_pair_of(t, dbeta, (size_t)cols * 4);
    snprintf(what, sizeof what, "batch=%d rows=%d cols=%d group=%zu p=%g", batch, rows, cols, group, p);
    t->cpu->dropout_add_layernorm_forward(t->cpu, py.cpu, pa.cpu, pmean.cpu, prstd.cpu, pa.cpu, pr.cpu, pg.cpu, pb.cpu,
                                          rows, cols, eps, batch, per_sample, group, p, key, first, NULL);
    t->cuda->dropout_add_layernorm_forward(t->cuda, py.cuda, pa.cuda, pmean.cuda, prstd.cuda, pa.cuda, pr.cuda, pg.cuda,
                                           pb.cuda, rows, cols, eps, batch, per_sample, group, p, key, first, NULL);
    float *v = hs_conf_download_f32(t->cpu, pa.cpu, n);
    float *mean = hs_conf_download_f32(t->cpu, pmean.cpu, (size_t)rows), *rstd = hs_conf_download_f32(t->cpu, prstd.cpu, (size_t)rows);
    ln_bounds lb;
    HS_ALLOC(lb.y, n), HS_ALLOC(lb.dx, n), HS_ALLOC(lb.mean, (size_t)rows), HS_ALLOC(lb.rstd, (size_t)rows),
        HS_ALLOC(lb.dg, (size_t)cols), HS_ALLOC(lb.db, (size_t)cols);
    ln_bounds_compute(&lb, v, mean, rstd, gamma, beta, dy, dgamma, dbeta, rows, cols);
    const float scale = p > 0.0f ? 1.0f / (1.0f - p) : 1.0f;
    hs_conf_check_ew(t, what, pa.cpu, pa.cuda, n, 2.0 * scale + 1.0); /* dropout(a) + residual */
    hs_conf_check_bound(t, what, py.cpu, py.cuda, n, lb.y);
    hs_conf_check_bound(t, what, pmean.cpu, pmean.cuda, (size_t)rows, lb.mean);
    hs_conf_check_bound(t, what, prstd.cpu, prstd.cuda, (size_t)rows, lb.rstd);
    t->cpu->layernorm_dropout_backward(t->cpu, pdy.cpu, pda.cpu, pdg.cpu, pdb.cpu, pdy.cpu, pa.cpu, pmean.cpu,
                                       prstd.cpu, pg.cpu, rows, cols, batch, per_sample, group, p, key, first, NULL);
    t->cuda->layernorm_dropout_backward(t->cuda, pdy.cuda, pda.cuda, pdg.cuda, pdb.cuda, pdy.cuda, pa.cuda, pmean.cuda,
                                        prstd.cuda, pg.cuda, rows, cols, batch, per_sample, group, p, key, first, NULL);
    hs_conf_check_bound(t, what, pdy.cpu, pdy.cuda, n, lb.dx);
    hs_conf_check_bound(t, what, pdg.cpu, pdg.cuda, (size_t)cols, lb.dg);
    hs_conf_check_bound(t, what, pdb.cpu, pdb.cuda, (size_t)cols, lb.db);
    float *dx = hs_conf_download_f32(t->cpu, pdy.cpu, n), *da = hs_conf_download_f32(t->cpu, pda.cpu, n);
    double *bda;
    HS_ALLOC(bda, n);
    for (size_t i = 0; i < n; i++) /* f = da/dx where dx != 0; a dropped element (da == 0) must be 0 */
        bda[i] = da[i] == 0.0f ? 0.0 : scale * lb.dx[i] + HS_CONF_C * HS_CONF_U32 * fabs((double)da[i]);
    hs_conf_check_bound(t, what, pda.cpu, pda.cuda, n, bda);
    free(bda), free(dx), free(da), free(v), free(mean), free(rstd);
    free(lb.y), free(lb.dx), free(lb.mean), free(lb.rstd), free(lb.dg), free(lb.db);
    hs_conf_pair_free(t, pa), hs_conf_pair_free(t, pr), hs_conf_pair_free(t, pg), hs_conf_pair_free(t, pb);
    hs_conf_pair_free(t, py), hs_conf_pair_free(t, pmean), hs_conf_pair_free(t, prstd), hs_conf_pair_free(t, pdy);
    hs_conf_pair_free(t, pda), hs_conf_pair_free(t, pdg), hs_conf_pair_free(t, pdb);
    free(a), free(res), free(gamma), free(beta), free(dy), free(dgamma), free(dbeta);
}

/* Shapes whose rows lie inside one sample and draw per value (BERT's and Transformer-XL's: a row finds its
 * sample once), then rows that cross samples (8 values per sample in rows of 6) and decisions per group
 * of values (2; a row of 33): the kernels' per-element path. */
static void dropout_layernorm_cases(hs_conf *t) {
    hs_conf_op(t, "dropout_add_layernorm_forward/layernorm_dropout_backward");
    static const int shapes[][4] = {/* batch, rows, cols, group */ {1, 1, 31, 1},  {3, 12, 33, 1},
                                    {3, 9, 1000, 1},                 {8, 256, 127, 1}, {2, 64, 768, 1},
                                    {3, 4, 6, 1},                    {3, 4, 6, 2},     {2, 8, 33, 33}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int drop = 0; drop < 2; drop++)
            dropout_layernorm_case(t, shapes[s][0], shapes[s][1], shapes[s][2], (size_t)shapes[s][3],
                                   drop ? 0.1f : 0.0f);
}

/* ---- losses ------------------------------------------------------------------------------------------- */

/* Logits: uniform in [-5, 5), or small integers (ties: the argmax must be the first maximum). */
static float *loss_logits(hs_conf *t, size_t n, int ties) {
    if (!ties) return hs_conf_rand(t, n, -5, 5);
    int32_t *k = hs_conf_rand_int(t, n, 0, 3);
    float *x;
    HS_ALLOC(x, n ? n : 1);
    for (size_t i = 0; i < n; i++) x[i] = (float)k[i];
    free(k);
    return x;
}

/* Labels of log_softmax_nll: every one in [0, cols) (its case then ignores every ninth row: label -1).
 * Labels of softmax_xent: about a third of the rows ignored (label -1 or another negative value). */
static int32_t *loss_labels(hs_conf *t, int rows, int cols, int ignored) {
    int32_t *labels = hs_conf_rand_int(t, (size_t)rows, ignored ? -cols / 3 - 1 : 0, cols);
    if (ignored)
        for (int r = 0; r < rows; r++)
            if (r % 4 == 3) labels[r] = -1 - r % 7;
    return labels;
}

/* With ties, every labelled row's label at its first maximum (even rows) or its last (odd rows, where a
 * later column ties): the correct count then says whether an argmax takes the first maximum, the CPU's
 * rule (torch.argmax's), across every split of a row between threads. */
static void labels_at_ties(int32_t *labels, const float *x, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        if (labels[r] < 0) continue;
        const float *row = x + (size_t)r * (size_t)cols;
        int first = 0, last = 0;
        for (int c = 1; c < cols; c++) {
            if (row[c] > row[first]) first = last = c;
            else if (row[c] == row[first]) last = c;
        }
        labels[r] = r % 2 ? last : first;
    }
}

static const double loss_stats0[3] = {1.5, 2.0, 3.0}; /* the ops add to the slots */

static void log_softmax_nll_case(hs_conf *t, int rows, int cols, int ties) {
    char what[200];
    const size_t n = (size_t)rows * (size_t)cols;
    float *x = loss_logits(t, n, ties);
    int32_t *labels = loss_labels(t, rows, cols, 0);
    for (int r = 8; r < rows; r += 9) labels[r] = -1; /* ignored rows (Transformer-XL's padded clusters) */
    if (ties) labels_at_ties(labels, x, rows, cols);
    hs_conf_pair pl = hs_conf_pair_of(t, labels, (size_t)rows * 4), px = hs_conf_pair_of(t, x, n * 4), plp = hs_conf_pair_of(t, NULL, n * 4),
         pd = hs_conf_pair_of(t, NULL, n * 4), pst = hs_conf_pair_of(t, loss_stats0, sizeof loss_stats0);
    snprintf(what, sizeof what, "rows=%d cols=%d%s", rows, cols, ties ? " (integer logits, ties)" : "");
    t->cpu->log_softmax_nll_forward(t->cpu, plp.cpu, px.cpu, pl.cpu, rows, cols, pst.cpu, NULL);
    t->cuda->log_softmax_nll_forward(t->cuda, plp.cuda, px.cuda, pl.cuda, rows, cols, pst.cuda, NULL);
    check_ew(t, what, plp, n);
    check_stats(t, what, pst, rows, cols);
    const float scale = 1.0f / (float)rows;
    t->cpu->log_softmax_nll_backward(t->cpu, pd.cpu, plp.cpu, NULL, NULL, pl.cpu, rows, cols, scale, NULL);
    t->cuda->log_softmax_nll_backward(t->cuda, pd.cuda, plp.cuda, NULL, NULL, pl.cuda, rows, cols, scale, NULL);
    check_ew(t, what, pd, n);
    /* the forward keeping each row's log_norm instead of the log-probabilities, the backward recomputing them
     * from the logits in place (dlogits over a copy of the logits): on each backend the same statistics and
     * dlogits as the log-probabilities' path, bit for bit */
    hs_conf_pair pn = hs_conf_pair_of(t, NULL, (size_t)rows * sizeof(double));
    hs_conf_pair pst2 = hs_conf_pair_of(t, loss_stats0, sizeof loss_stats0), pdl = hs_conf_pair_of(t, x, n * 4);
    const hs_backend *bes[2] = {t->cpu, t->cuda};
    for (int k = 0; k < 2; k++) {
        void *norm = k ? pn.cuda : pn.cpu, *st2 = k ? pst2.cuda : pst2.cpu, *dl = k ? pdl.cuda : pdl.cpu;
        bes[k]->log_softmax_nll_forward(bes[k], NULL, k ? px.cuda : px.cpu, k ? pl.cuda : pl.cpu, rows, cols, st2, norm);
        bes[k]->log_softmax_nll_backward(bes[k], dl, NULL, dl, norm, k ? pl.cuda : pl.cpu, rows, cols, scale, NULL);
        char w2[320];
        snprintf(w2, sizeof w2, "%s: statistics with log_norm = with logprobs", what);
        hs_conf_same_on(t, bes[k], w2, st2, k ? pst.cuda : pst.cpu, sizeof loss_stats0);
        snprintf(w2, sizeof w2, "%s: dlogits from the logits and log_norm, in place = from logprobs", what);
        hs_conf_same_on(t, bes[k], w2, dl, k ? pd.cuda : pd.cpu, n * 4);
    }
    hs_conf_pair_free(t, pn), hs_conf_pair_free(t, pst2), hs_conf_pair_free(t, pdl);
    hs_conf_pair_free(t, pl), hs_conf_pair_free(t, px), hs_conf_pair_free(t, plp), hs_conf_pair_free(t, pd), hs_conf_pair_free(t, pst);
    free(x), free(labels);
}

/* separate output, or in place (probs = logits, dlogits = probs) as BERT's heads run it */
static void softmax_xent_case(hs_conf *t, int rows, int cols, int ties, int in_place) {
    char what[200];
    const size_t n = (size_t)rows * (size_t)cols;
    float *x = loss_logits(t, n, ties);
    int32_t *labels = loss_labels(t, rows, cols, 1);
    if (ties) labels_at_ties(labels, x, rows, cols);
    hs_conf_pair pl = hs_conf_pair_of(t, labels, (size_t)rows * 4), px = hs_conf_pair_of(t, x, n * 4);
    hs_conf_pair pp = in_place ? px : hs_conf_pair_of(t, NULL, n * 4), pd = in_place ? px : hs_conf_pair_of(t, NULL, n * 4);
    hs_conf_pair pst = hs_conf_pair_of(t, loss_stats0, sizeof loss_stats0);
    snprintf(what, sizeof what, "rows=%d cols=%d%s%s", rows, cols, ties ? " (integer logits, ties)" : "",
             in_place ? " in place" : "");
    t->cpu->softmax_xent_forward(t->cpu, pp.cpu, px.cpu, pl.cpu, rows, cols, pst.cpu);
    t->cuda->softmax_xent_forward(t->cuda, pp.cuda, px.cuda, pl.cuda, rows, cols, pst.cuda);
    check_ew(t, what, pp, n);
    check_stats(t, what, pst, rows, cols);
    const float scale = 0.37f;
    t->cpu->softmax_xent_backward(t->cpu, pd.cpu, pp.cpu, pl.cpu, rows, cols, scale);
    t->cuda->softmax_xent_backward(t->cuda, pd.cuda, pp.cuda, pl.cuda, rows, cols, scale);
    check_ew(t, what, pd, n);
    hs_conf_pair_free(t, pl), hs_conf_pair_free(t, px), hs_conf_pair_free(t, pst);
    if (!in_place) hs_conf_pair_free(t, pp), hs_conf_pair_free(t, pd);
    free(x), free(labels);
}

static void loss_cases(hs_conf *t) {
    static const int shapes[][2] = {{1, 1}, {1, 2}, {31, 10}, {33, 33}, {127, 31}, {256, 127},
                                    {300, 2}, {5, 1000}, {3, 4097}, {40, 257}, {1030, 4100}};
    const size_t nshapes = sizeof shapes / sizeof shapes[0];
    hs_conf_op(t, "log_softmax_nll_forward/backward");
    for (size_t s = 0; s < nshapes; s++)
        for (int ties = 0; ties < 2; ties++) log_softmax_nll_case(t, shapes[s][0], shapes[s][1], ties);
    /* more rows than the capped grid has warps (HS_MAX_GRID blocks of 8 rows), and more elements than
     * its threads: rows and elements are grid-strided */
    log_softmax_nll_case(t, 8197, 33, 0);
    hs_conf_op(t, "softmax_xent_forward/backward");
    for (size_t s = 0; s < nshapes; s++)
        for (int ties = 0; ties < 2; ties++)
            for (int in_place = 0; in_place < 2; in_place++)
                softmax_xent_case(t, shapes[s][0], shapes[s][1], ties, in_place);
    softmax_xent_case(t, 8197, 33, 1, 1);
}

/* ---- multi-tensor ops --------------------------------------------------------------------------------- */

/* A table of tensors with odd sizes, gaps between them (never touched: the whole flat buffer is
 * compared), decay flags mixed, an empty tensor, and one large enough for every slice of a tensor. */
typedef struct {
    hs_tensor_span *spans;
    int count;
    size_t flat; /* floats of the flat buffers, gaps included */
    hs_conf_pair table;
} table_t;

static table_t make_table(hs_conf *t) {
    static const int64_t numels[] = {1, 31, 33, 127, 256, 1000, 0, 4097, 6149, 300001, 2048, 7};
    static const int gaps[] = {0, 3, 1, 17, 0, 5, 2, 0, 9, 4, 1, 13};
    table_t tb;
    tb.count = (int)(sizeof numels / sizeof numels[0]);
    HS_ALLOC(tb.spans, (size_t)tb.count);
    int64_t off = 0;
    for (int i = 0; i < tb.count; i++) {
        off += gaps[i];
        tb.spans[i].offset = off;
        tb.spans[i].numel = numels[i];
        tb.spans[i].decay = (i % 3) != 1;
        tb.spans[i].unused = 0;
        off += numels[i];
    }
    tb.flat = (size_t)off + 6; /* a gap after the last tensor too */
    tb.table = hs_conf_pair_of(t, tb.spans, (size_t)tb.count * sizeof *tb.spans);
    return tb;
}

static void free_table(hs_conf *t, table_t *tb) {
    hs_conf_pair_free(t, tb->table);
    free(tb->spans);
}

static void sumsq_scale_cases(hs_conf *t, const table_t *tb) {
    char what[160];
    hs_conf_op(t, "sumsq_tensors/scale_tensors");
    for (int sub = 1; sub >= 0; sub--) {
        /* the whole table, then its first 5 tensors (a different count on the same scratch) */
        const int count = sub ? tb->count : 5;
        float *x = hs_conf_rand(t, tb->flat, -2, 2);
        double junk[64];
        for (int i = 0; i < 64; i++) junk[i] = 1e30; /* overwritten, not added */
        hs_conf_pair px = hs_conf_pair_of(t, x, tb->flat * 4), psq = hs_conf_pair_of(t, junk, (size_t)count * 8), ptot = hs_conf_pair_of(t, junk, 8);
        snprintf(what, sizeof what, "%d tensors with gaps", count);
        t->cpu->sumsq_tensors(t->cpu, psq.cpu, ptot.cpu, px.cpu, tb->table.cpu, count);
        t->cuda->sumsq_tensors(t->cuda, psq.cuda, ptot.cuda, px.cuda, tb->table.cuda, count);
        /* sums of squares of stored floats in double (squares exact): gamma_n(2^-53) Σ x² */
        hs_conf_check_sum_f64(t, what, psq.cpu, psq.cuda, (size_t)count, NULL, (double)tb->flat, 0.0, 0x1p-53);
        hs_conf_check_sum_f64(t, what, ptot.cpu, ptot.cuda, 1, NULL, (double)tb->flat, 0.0, 0x1p-53);
        t->cpu->scale_tensors(t->cpu, px.cpu, 0.37f, tb->table.cpu, count);
        t->cuda->scale_tensors(t->cuda, px.cuda, 0.37f, tb->table.cuda, count);
        check_ew(t, what, px, tb->flat);
        hs_conf_pair_free(t, px), hs_conf_pair_free(t, psq), hs_conf_pair_free(t, ptot);
        free(x);
    }
    hs_conf_op(t, "zero_tensors");
    for (int sub = 1; sub >= 0; sub--) {
        /* over NaN (gradients an update's first writers overwrite hold anything): the tensors' elements
         * +0 on both, the gaps and the tensors past count untouched, bit for bit */
        const int count = sub ? tb->count : 5;
        float *x = hs_conf_rand(t, tb->flat, -2, 2);
        for (size_t e = 0; e < tb->flat; e += 3) x[e] = NAN;
        hs_conf_pair px = hs_conf_pair_of(t, x, tb->flat * 4);
        t->cpu->zero_tensors(t->cpu, px.cpu, tb->table.cpu, count);
        t->cuda->zero_tensors(t->cuda, px.cuda, tb->table.cuda, count);
        snprintf(what, sizeof what, "%d tensors with gaps, over NaN", count);
        hs_conf_check_i32(t, what, px.cpu, px.cuda, tb->flat);
        float *back = hs_conf_download_f32(t->cpu, px.cpu, tb->flat);
        size_t zeros = 0, kept = 0;
        for (int i = 0; i < tb->count; i++)
            for (int64_t e = 0; e < tb->spans[i].numel; e++) {
                const size_t at = (size_t)(tb->spans[i].offset + e);
                if (i < count) zeros += back[at] == 0.0f && !signbit(back[at]);
                else kept += memcmp(&back[at], &x[at], 4) == 0;
            }
        size_t want_zeros = 0, want_kept = 0;
        for (int i = 0; i < tb->count; i++) *(i < count ? &want_zeros : &want_kept) += (size_t)tb->spans[i].numel;
        if (zeros != want_zeros || kept != want_kept) {
            fprintf(stderr, "FAIL zero_tensors %s: %zu of %zu elements +0, %zu of %zu past count kept\n", what, zeros,
                    want_zeros, kept, want_kept);
            hs_conf_fail(t);
        }
        free(back);
        hs_conf_pair_free(t, px);
        free(x);
    }
    /* no tensors: *total = 0 */
    {
        const double junk = 1e30;
        hs_conf_pair psq = hs_conf_pair_of(t, &junk, 8), ptot = hs_conf_pair_of(t, &junk, 8);
        float zero = 0.0f;
        hs_conf_pair px = hs_conf_pair_of(t, &zero, 4);
        t->cpu->sumsq_tensors(t->cpu, psq.cpu, ptot.cpu, px.cpu, tb->table.cpu, 0);
        t->cuda->sumsq_tensors(t->cuda, psq.cuda, ptot.cuda, px.cuda, tb->table.cuda, 0);
        const double exact = 0.0; /* a sum of no terms: 0 on both */
        hs_conf_check_bound_f64(t, "count 0: total", ptot.cpu, ptot.cuda, 1, &exact);
        hs_conf_pair_free(t, psq), hs_conf_pair_free(t, ptot), hs_conf_pair_free(t, px);
    }
}

/* Parameters, gradients and two state buffers (the second non-negative: v, square_avg, ...). */
typedef struct {
    hs_conf_pair p, g, s1, s2;
} optim_bufs;

static optim_bufs optim_inputs(hs_conf *t, const table_t *tb, int zero_tensor) {
    float *p = hs_conf_rand(t, tb->flat, -1, 1), *g = hs_conf_rand(t, tb->flat, -0.5f, 0.5f);
    float *s1 = hs_conf_rand(t, tb->flat, -0.1f, 0.1f), *s2 = hs_conf_rand(t, tb->flat, 0.0f, 0.01f);
    if (zero_tensor) /* tensor 3 all zero: LAMB's ||p|| = 0 takes the plain lr */
        memset(p + tb->spans[3].offset, 0, (size_t)tb->spans[3].numel * sizeof *p);
    optim_bufs b = {hs_conf_pair_of(t, p, tb->flat * 4), hs_conf_pair_of(t, g, tb->flat * 4), hs_conf_pair_of(t, s1, tb->flat * 4),
                    hs_conf_pair_of(t, s2, tb->flat * 4)};
    free(p), free(g), free(s1), free(s2);
    return b;
}

static void optim_check(hs_conf *t, const char *what, const table_t *tb, const optim_bufs *b, int states) {
    char w[220];
    snprintf(w, sizeof w, "%s: p", what);
    check_ew(t, w, b->p, tb->flat);
    if (states > 0) {
        snprintf(w, sizeof w, "%s: state 1", what);
        check_ew(t, w, b->s1, tb->flat);
    }
    if (states > 1) {
        snprintf(w, sizeof w, "%s: state 2", what);
        check_ew(t, w, b->s2, tb->flat);
    }
}

/* The CUDA buffers given the CPU's parameters and states: the next step starts from the same inputs on both,
 * which a check of a sum over them (LAMB's norms) assumes. A state carried over differs by the step's
 * element-wise error, and where an update nearly cancels a value (p - lr·u near 0, β1·m + (1-β1)·g near
 * 0) that error is large relative to the result and to its square's sum. */
static void optim_sync(hs_conf *t, const table_t *tb, const optim_bufs *b) {
    const hs_conf_pair *bufs[] = {&b->p, &b->s1, &b->s2};
    for (size_t k = 0; k < 3; k++) {
        float *v = hs_conf_download_f32(t->cpu, bufs[k]->cpu, tb->flat);
        t->cuda->upload(t->cuda, bufs[k]->cuda, v, tb->flat * 4);
        free(v);
    }
}

static void optim_release(hs_conf *t, optim_bufs *b) {
    hs_conf_pair_free(t, b->p), hs_conf_pair_free(t, b->g), hs_conf_pair_free(t, b->s1), hs_conf_pair_free(t, b->s2);
}

static void adam_cases(hs_conf *t, const table_t *tb) {
    char what[200];
    hs_conf_op(t, "adam_update");
    for (int decoupled = 0; decoupled < 2; decoupled++)
        for (int flagged_only = 0; flagged_only < 2; flagged_only++) {
            optim_bufs b = optim_inputs(t, tb, 0);
            for (int64_t step = 1; step <= 3; step++) { /* three updates in a row, the state carried over */
                const hs_adam_hparams h = {.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                           .weight_decay = 0.01, .step = step, .decoupled = decoupled,
                                           .decay_flagged_only = flagged_only};
                t->cpu->adam_update(t->cpu, b.p.cpu, b.g.cpu, b.s1.cpu, b.s2.cpu, tb->table.cpu, tb->count, &h);
                t->cuda->adam_update(t->cuda, b.p.cuda, b.g.cuda, b.s1.cuda, b.s2.cuda, tb->table.cuda, tb->count, &h);
                snprintf(what, sizeof what, "decoupled=%d decay_flagged_only=%d step=%lld", decoupled, flagged_only,
                         (long long)step);
                optim_check(t, what, tb, &b, 2);
            }
            optim_release(t, &b);
        }
}

static void adadelta_cases(hs_conf *t, const table_t *tb) {
    char what[200];
    hs_conf_op(t, "adadelta_update");
    for (int wd = 0; wd < 2; wd++) {
        optim_bufs b = optim_inputs(t, tb, 0);
        /* square_avg and acc_delta are non-negative */
        float *s = hs_conf_rand(t, tb->flat, 0.0f, 0.01f);
        t->cpu->upload(t->cpu, b.s1.cpu, s, tb->flat * 4);
        t->cuda->upload(t->cuda, b.s1.cuda, s, tb->flat * 4);
        free(s);
        for (int k = 0; k < 2; k++) {
            t->cpu->adadelta_update(t->cpu, b.p.cpu, b.g.cpu, b.s1.cpu, b.s2.cpu, tb->table.cpu, tb->count, 1.0, 0.9,
                                    1e-6, wd ? 0.01 : 0.0);
            t->cuda->adadelta_update(t->cuda, b.p.cuda, b.g.cuda, b.s1.cuda, b.s2.cuda, tb->table.cuda, tb->count,
                                     1.0, 0.9, 1e-6, wd ? 0.01 : 0.0);
            snprintf(what, sizeof what, "weight_decay=%g update %d", wd ? 0.01 : 0.0, k + 1);
            optim_check(t, what, tb, &b, 2);
        }
        optim_release(t, &b);
    }
}

static void sgd_cases(hs_conf *t, const table_t *tb) {
    char what[200];
    hs_conf_op(t, "sgd_update");
    for (int momentum = 0; momentum < 2; momentum++)
        for (int wd = 0; wd < 2; wd++) {
            optim_bufs b = optim_inputs(t, tb, 0);
            for (int k = 0; k < 3; k++) { /* first_step on the first update only */
                const int first = k == 0;
                const double mom = momentum ? 0.9 : 0.0, decay = wd ? 1e-4 : 0.0;
                t->cpu->sgd_update(t->cpu, b.p.cpu, b.g.cpu, momentum ? b.s1.cpu : NULL, tb->table.cpu, tb->count, 0.05,
                                   mom, decay, first);
                t->cuda->sgd_update(t->cuda, b.p.cuda, b.g.cuda, momentum ? b.s1.cuda : NULL, tb->table.cuda,
                                    tb->count, 0.05, mom, decay, first);
                snprintf(what, sizeof what, "momentum=%g weight_decay=%g first_step=%d", mom, decay, first);
                optim_check(t, what, tb, &b, momentum);
            }
            optim_release(t, &b);
        }
    /* momentum buffer with first_step = 0 from the start (a resumed run) */
    optim_bufs b = optim_inputs(t, tb, 0);
    t->cpu->sgd_update(t->cpu, b.p.cpu, b.g.cpu, b.s1.cpu, tb->table.cpu, tb->count, 0.05, 0.9, 1e-4, 0);
    t->cuda->sgd_update(t->cuda, b.p.cuda, b.g.cuda, b.s1.cuda, tb->table.cuda, tb->count, 0.05, 0.9, 1e-4, 0);
    optim_check(t, "momentum=0.9 resumed (first_step=0)", tb, &b, 1);
    optim_release(t, &b);
}

static void lamb_cases(hs_conf *t, const table_t *tb) {
    char what[220];
    hs_conf_op(t, "lamb_update");
    static const double divisors[] = {1.0, 2.5};
    static const double decays[] = {0.01, 0.0};
    for (int trust = 0; trust < 2; trust++)
        for (int d = 0; d < 2; d++)
            for (int w = 0; w < 2; w++) {
                optim_bufs b = optim_inputs(t, tb, 1);
                hs_conf_pair pn = hs_conf_pair_of(t, NULL, 2 * (size_t)tb->count * 8);
                for (int64_t step = 1; step <= 2; step++) {
                    if (step > 1) optim_sync(t, tb, &b); /* the norms' bound needs the same p, m, v */
                    const hs_lamb_hparams h = {.lr = 2e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-6,
                                               .weight_decay = decays[w], .grad_divisor = divisors[d], .step = step,
                                               .trust_ratio_on_no_decay = trust};
                    t->cpu->lamb_update(t->cpu, b.p.cpu, b.g.cpu, b.s1.cpu, b.s2.cpu, tb->table.cpu, tb->count,
                                        pn.cpu, &h);
                    t->cuda->lamb_update(t->cuda, b.p.cuda, b.g.cuda, b.s1.cuda, b.s2.cuda, tb->table.cuda, tb->count,
                                         pn.cuda, &h);
                    snprintf(what, sizeof what, "trust_ratio_on_no_decay=%d grad_divisor=%g weight_decay=%g step=%lld",
                             trust, divisors[d], decays[w], (long long)step);
                    optim_check(t, what, tb, &b, 2);
                    char w2[320];
                    snprintf(w2, sizeof w2, "%s: norms", what);
                    /* Σ p² and Σ u² per tensor, summed in double: p is stored (its squares exact in double),
                     * u = the float update direction, computed element-wise on each device (HS_CONF_EW_ULPS
                     * ulps each, so 2·32 u32 relative per square); gamma_n over the largest tensor. */
                    hs_conf_check_sum_f64(t, w2, pn.cpu, pn.cuda, 2 * (size_t)tb->count, NULL, (double)tb->flat,
                                          2.0 * HS_CONF_EW_ULPS * HS_CONF_U32, 0x1p-53);
                }
                hs_conf_pair_free(t, pn);
                optim_release(t, &b);
            }
}

/* A tensor larger than the CUDA kernels' grid of chunks (HS_TENSOR_GRID x HS_TENSOR_CHUNK floats), so a
 * block holds several of its chunks, between two small tensors that share their chunks with it: the
 * gradient norm and LAMB (its per-tensor norms) against the CPU, and the CUDA sums twice on the same
 * input to the bit (their order is fixed by the layout alone). */
static void big_table_cases(hs_conf *t) {
    const int64_t big = (int64_t)HS_TENSOR_GRID * HS_TENSOR_CHUNK + 3 * HS_TENSOR_CHUNK / 2 + 7;
    table_t tb;
    tb.count = 3;
    HS_ALLOC(tb.spans, 3);
    tb.spans[0] = (hs_tensor_span){.offset = 3, .numel = 5, .decay = 0};
    tb.spans[1] = (hs_tensor_span){.offset = 16, .numel = big, .decay = 1};
    tb.spans[2] = (hs_tensor_span){.offset = 16 + (big + 15) / 16 * 16, .numel = 1000, .decay = 1};
    tb.flat = (size_t)(tb.spans[2].offset + tb.spans[2].numel + 5);
    tb.table = hs_conf_pair_of(t, tb.spans, 3 * sizeof *tb.spans);
    char what[200];
    snprintf(what, sizeof what, "tensors of 5, %lld and 1000 elements", (long long)big);

    hs_conf_op(t, "sumsq_tensors/scale_tensors");
    float *x = hs_conf_rand(t, tb.flat, -2, 2);
    hs_conf_pair px = hs_conf_pair_of(t, x, tb.flat * 4), psq = hs_conf_pair_of(t, NULL, 3 * 8),
                 ptot = hs_conf_pair_of(t, NULL, 8);
    double *again = t->cuda->alloc(t->cuda, 6 * 8); /* a second call's sums: sumsq 3 + total, LAMB's 6 norms */
    t->cpu->sumsq_tensors(t->cpu, psq.cpu, ptot.cpu, px.cpu, tb.table.cpu, 3);
    t->cuda->sumsq_tensors(t->cuda, psq.cuda, ptot.cuda, px.cuda, tb.table.cuda, 3);
    t->cuda->sumsq_tensors(t->cuda, again, again + 3, px.cuda, tb.table.cuda, 3);
    hs_conf_check_sum_f64(t, what, psq.cpu, psq.cuda, 3, NULL, (double)tb.flat, 0.0, 0x1p-53);
    hs_conf_check_sum_f64(t, what, ptot.cpu, ptot.cuda, 1, NULL, (double)tb.flat, 0.0, 0x1p-53);
    hs_conf_same_bits(t, "the norms of a second call", psq.cuda, again, 3 * 8);
    hs_conf_pair_free(t, px), hs_conf_pair_free(t, psq), hs_conf_pair_free(t, ptot);
    free(x);

    hs_conf_op(t, "lamb_update");
    optim_bufs b = optim_inputs(t, &tb, 0);
    hs_conf_pair pn = hs_conf_pair_of(t, NULL, 2 * 3 * 8);
    const hs_lamb_hparams h = {.lr = 2e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-6, .weight_decay = 0.01,
                               .grad_divisor = 2.5, .step = 1, .trust_ratio_on_no_decay = 0};
    /* the CUDA update once more on copies of its inputs: the same norms to the bit */
    float *p2 = t->cuda->alloc(t->cuda, tb.flat * 4), *m2 = t->cuda->alloc(t->cuda, tb.flat * 4),
          *v2 = t->cuda->alloc(t->cuda, tb.flat * 4);
    t->cuda->copy(t->cuda, p2, b.p.cuda, tb.flat * 4);
    t->cuda->copy(t->cuda, m2, b.s1.cuda, tb.flat * 4);
    t->cuda->copy(t->cuda, v2, b.s2.cuda, tb.flat * 4);
    t->cpu->lamb_update(t->cpu, b.p.cpu, b.g.cpu, b.s1.cpu, b.s2.cpu, tb.table.cpu, 3, pn.cpu, &h);
    t->cuda->lamb_update(t->cuda, b.p.cuda, b.g.cuda, b.s1.cuda, b.s2.cuda, tb.table.cuda, 3, pn.cuda, &h);
    t->cuda->lamb_update(t->cuda, p2, b.g.cuda, m2, v2, tb.table.cuda, 3, again, &h);
    optim_check(t, what, &tb, &b, 2);
    char w2[260];
    snprintf(w2, sizeof w2, "%s: norms", what);
    hs_conf_check_sum_f64(t, w2, pn.cpu, pn.cuda, 6, NULL, (double)tb.flat, 2.0 * HS_CONF_EW_ULPS * HS_CONF_U32,
                          0x1p-53);
    hs_conf_same_bits(t, "the per-tensor norms of a second call", pn.cuda, again, 6 * 8);
    hs_conf_same_bits(t, "the parameters of a second call", b.p.cuda, p2, tb.flat * 4);
    t->cuda->free(t->cuda, p2), t->cuda->free(t->cuda, m2), t->cuda->free(t->cuda, v2);
    t->cuda->free(t->cuda, again);
    hs_conf_pair_free(t, pn);
    optim_release(t, &b);
    free_table(t, &tb);
}

void hs_conf_group_norm_loss_optim(hs_conf *t) {
    layernorm_cases(t);
    dropout_layernorm_cases(t);
    loss_cases(t);
    table_t tb = make_table(t);
    sumsq_scale_cases(t, &tb);
    adam_cases(t, &tb);
    adadelta_cases(t, &tb);
    sgd_cases(t, &tb);
    lamb_cases(t, &tb);
    free_table(t, &tb);
    big_table_cases(t);
}
