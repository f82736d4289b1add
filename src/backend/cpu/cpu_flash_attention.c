/* The fused attention ops (flash_attention_forward/backward, ops.def) on the CPU: the reference math
 * of cpu_attention.c computed one query row at a time, so no L×L tensor exists, only a row of L
 * scores (and its gradient) per thread. The same products at be->precision (the operands rounded as
 * the unfused path's hs_cpu_precision_gemm rounds them, written out as row products), the same exp
 * (hs_exp_fast) and the same dropout draws (hs_attention_dropout_factor of the row hs_attention_dropout_row names).
 *
 * Forward, row i of unit (b, h):  s_j = q_i·k_j/√d + mask_bias[b,j];  m = max s;  l = Σ e^{s_j - m};
 *   P_j = e^{s_j - m}/l;  ctx_i = Σ_j P_j·keep_j/(1-p)·v_j;  lse_i = m + log l.
 * Backward, row i:  P_j = e^{s_j - lse_i} (recomputed);  dP'_j = dctx_i·v_j;  dP_j = keep_j·dP'_j/(1-p);
 *   D_i = dctx_i·ctx_i (= Σ_j P_j dP_j, as ctx_i = Σ_j P'_j v_j);  dS_j = P_j (dP_j - D_i);
 *   dq_i = Σ_j dS_j k_j/√d;  dk_j += dS_j q_i/√d;  dv_j += P'_j dctx_i  (rows in increasing i).
 * The B·heads units run in parallel over OpenMP threads; each unit is one thread's, so its dK, dV
 * columns are summed in a fixed order. A 16-bit q|k|v (qkv16) is widened first (exact): the products
 * round their operands to the same values as from the fp32 q|k|v it was rounded from. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <math.h>
#include <stdlib.h>

#include "backend/cpu/cpu_attention_dropout.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_rounded_gemm.h"
#include "math/dropout.h"
#include "math/fast_exp_erf.h"
#include "math/softmax.h"
#include "util/check.h"

/* The products, one query row at a time, written out: every operand rounded to the precision's type as
 * hs_cpu_precision_gemm rounds it (util/lowp.h; fp32 unchanged), exact products summed in fp32 in index
 * order, alpha applied to the sum (cblas' alpha·op(A)·op(B)). */
#define R(x) hs_lowp_round(precision, (x))

/* y[n] = alpha·Σ_e round(x[e])·round(m[j·ld + e]) (e < k): x times the rows of m, transposed */
static void row_times_rows(int precision, float *y, const float *x, const float *m, int ld, int n, int k, float alpha) {
    for (int j = 0; j < n; j++) {
        const float *mj = m + (size_t)j * (size_t)ld;
        float s = 0.0f;
        for (int e = 0; e < k; e++) s += R(x[e]) * R(mj[e]);
        y[j] = alpha * s;
    }
}

/* y[k] = alpha·Σ_j round(x[j])·round(m[j·ld + e]) (j < n): x times m */
static void row_times_matrix(int precision, float *y, const float *x, const float *m, int ld, int n, int k,
                             float alpha) {
    for (int e = 0; e < k; e++) y[e] = 0.0f;
    for (int j = 0; j < n; j++) {
        const float xj = R(x[j]);
        const float *mj = m + (size_t)j * (size_t)ld;
        for (int e = 0; e < k; e++) y[e] += xj * R(mj[e]);
    }
    for (int e = 0; e < k; e++) y[e] *= alpha;
}

/* c[L,d] (row stride ld) = alpha·round(x)ᵀ·round(y) (+ c unless first): one query row's share of dK or dV */
static void rank1_update(int precision, float *c, int ld, const float *x, const float *y, float alpha, int L, int d,
                         int first) {
    for (int j = 0; j < L; j++) {
        const float xj = R(x[j]);
        float *cj = c + (size_t)j * (size_t)ld;
        for (int e = 0; e < d; e++) {
            const float t = alpha * (xj * R(y[e]));
            cj[e] = first ? t : cj[e] + t;
        }
    }
}

/* qkv, or qkv16 widened into *wide (freed by the caller; NULL when qkv is read) */
static const float *qkv_input(const hs_backend *be, const float *qkv, const uint16_t *qkv16, float **wide, size_t n) {
    *wide = NULL;
    if (!qkv16 || n == 0) return qkv;
    HS_ALLOC(*wide, n);
    hs_cpu_from_half(be, *wide, qkv16, n);
    return *wide;
}

void hs_cpu_flash_attention_forward(const hs_backend *be, float *ctx, float *lse, const float *qkv_f,
                                    const uint16_t *qkv16, const float *mask_bias, int batch, int seq_len, int heads,
                                    int head_dim, float p, uint64_t key, int64_t first_sample, uint16_t *ctx16,
                                    uint16_t *qkv16_out) {
    const int L = seq_len, d = head_dim, H = heads * head_dim, ld = 3 * H;
    hs_output_check("flash_attention_forward: ctx or ctx16", ctx, ctx16);
    hs_flash_qkv16_out_check(qkv16, qkv16_out);
    float *wide, *own_ctx = NULL; /* ctx16 alone: the context in a buffer of its own first */
    const size_t n_ctx = batch > 0 && L > 0 ? (size_t)batch * (size_t)L * (size_t)H : 0;
    if (!ctx) HS_ALLOC(own_ctx, n_ctx ? n_ctx : 1), ctx = own_ctx;
    const float *qkv = qkv_input(be, qkv_f, qkv16, &wide, batch > 0 && L > 0 ? (size_t)batch * (size_t)L * ld : 0);
    const float scale = 1.0f / sqrtf((float)d);
    const hs_dropout_rate rate = hs_dropout_rate_of(p);
    const int pr = be->precision;
#pragma omp parallel
    {
        float *s, *fr; /* [L] one row's scores, then P'; its dropout multipliers */
        HS_ALLOC(s, (size_t)(L > 0 ? L : 1)), HS_ALLOC(fr, (size_t)(L > 0 ? L : 1));
#pragma omp for schedule(static)
        for (int u = 0; u < batch * heads; u++) {
            const int b = u / heads, h = u % heads;
            const uint64_t sample_key = hs_attention_sample_key(key, (uint64_t)(first_sample + b));
            const float *q = qkv + (size_t)b * (size_t)L * (size_t)ld + (size_t)h * (size_t)d;
            const float *k = q + H, *v = q + 2 * H, *mb = mask_bias + (size_t)b * (size_t)L;
            for (int i = 0; i < L; i++) {
                row_times_rows(pr, s, q + (size_t)i * (size_t)ld, k, ld, L, d, scale);
                for (int j = 0; j < L; j++) s[j] += mb[j];
                float m = -INFINITY;
                for (int j = 0; j < L; j++) m = s[j] > m ? s[j] : m;
                float sum = 0.0f;
                for (int j = 0; j < L; j++) {
                    s[j] = hs_exp_fast(s[j] - m);
                    sum += s[j];
                }
                const float inv = 1.0f / sum;
                const uint32_t row_key = hs_attention_row_key(sample_key, hs_attention_dropout_row(h, i, L));
                if (p > 0.0f) hs_attn_row_factors(sample_key, row_key, 0, L - 1, rate, fr);
                for (int j = 0; j < L; j++) {
                    const float f = p > 0.0f ? fr[j] : 1.0f;
                    s[j] = s[j] * inv * f;
                }
                lse[(size_t)u * (size_t)L + (size_t)i] = m + logf(sum);
                /* ctx row i = P'·V */
                row_times_matrix(pr, ctx + ((size_t)b * (size_t)L + (size_t)i) * (size_t)H + (size_t)h * (size_t)d, s, v,
                                 ld, L, d, 1.0f);
            }
        }
        free(s), free(fr);
    }
    free(wide);
    /* the 16-bit outputs: to_half's bits of the context just written, and of q|k|v */
    if (ctx16 && n_ctx) hs_cpu_to_half(be, ctx16, ctx, n_ctx);
    if (qkv16_out && n_ctx) hs_cpu_to_half(be, qkv16_out, qkv_f, 3 * n_ctx);
    free(own_ctx);
}

void hs_cpu_flash_attention_backward(const hs_backend *be, float *dqkv, const float *dctx, const float *qkv_f,
                                     const uint16_t *qkv16, const float *mask_bias, const float *ctx, const float *lse,
                                     int batch, int seq_len, int heads, int head_dim, float p, uint64_t key,
                                     int64_t first_sample, uint16_t *dqkv16) {
    const int L = seq_len, d = head_dim, H = heads * head_dim, ld = 3 * H;
    float *wide;
    const float *qkv = qkv_input(be, qkv_f, qkv16, &wide, batch > 0 && L > 0 ? (size_t)batch * (size_t)L * ld : 0);
    const float scale = 1.0f / sqrtf((float)d);
    const hs_dropout_rate rate = hs_dropout_rate_of(p);
    const int pr = be->precision;
#pragma omp parallel
    {
        float *P, *ds, *pd, *fr; /* [L] each: P, dP' then dS, P' of one query row, its dropout multipliers */
        HS_ALLOC(P, (size_t)(L > 0 ? L : 1)), HS_ALLOC(ds, (size_t)(L > 0 ? L : 1)),
            HS_ALLOC(pd, (size_t)(L > 0 ? L : 1)), HS_ALLOC(fr, (size_t)(L > 0 ? L : 1));
#pragma omp for schedule(static)
        for (int u = 0; u < batch * heads; u++) {
            const int b = u / heads, h = u % heads;
            const uint64_t sample_key = hs_attention_sample_key(key, (uint64_t)(first_sample + b));
            const size_t tok0 = (size_t)b * (size_t)L;
            const float *q = qkv + tok0 * (size_t)ld + (size_t)h * (size_t)d;
            const float *k = q + H, *v = q + 2 * H, *mb = mask_bias + tok0;
            float *dq = dqkv + tok0 * (size_t)ld + (size_t)h * (size_t)d;
            float *dk = dq + H, *dv = dq + 2 * H;
            for (int i = 0; i < L; i++) {
                const float *dc = dctx + (tok0 + (size_t)i) * (size_t)H + (size_t)h * (size_t)d;
                const float *c = ctx + (tok0 + (size_t)i) * (size_t)H + (size_t)h * (size_t)d;
                const float *qi = q + (size_t)i * (size_t)ld;
                const float li = lse[(size_t)u * (size_t)L + (size_t)i];
                float D = 0.0f;
                for (int e = 0; e < d; e++) D += dc[e] * c[e];
                row_times_rows(pr, P, qi, k, ld, L, d, scale);
                for (int j = 0; j < L; j++) P[j] += mb[j];
                row_times_rows(pr, ds, dc, v, ld, L, d, 1.0f); /* dP'[L] = dctx_i·Vᵀ */
                const uint32_t row_key = hs_attention_row_key(sample_key, hs_attention_dropout_row(h, i, L));
                if (p > 0.0f) hs_attn_row_factors(sample_key, row_key, 0, L - 1, rate, fr);
                for (int j = 0; j < L; j++) {
                    const float pj = hs_exp_fast(P[j] - li);
                    const float f = p > 0.0f ? fr[j] : 1.0f;
                    pd[j] = pj * f;
                    ds[j] = pj * (ds[j] * f - D);
                }
                /* dq_i = dS·K/√d;  dK += dSᵀ·q_i/√d;  dV += P'ᵀ·dctx_i (rank-1 updates, rows in order) */
                row_times_matrix(pr, dq + (size_t)i * (size_t)ld, ds, k, ld, L, d, scale);
                rank1_update(pr, dk, ld, ds, qi, scale, L, d, i == 0);
                rank1_update(pr, dv, ld, pd, dc, 1.0f, L, d, i == 0);
            }
        }
        free(P), free(ds), free(pd), free(fr);
    }
    free(wide);
    /* the 16-bit output: to_half's bits of the gradient just written */
    if (dqkv16 && batch > 0 && L > 0) hs_cpu_to_half(be, dqkv16, dqkv, (size_t)batch * (size_t)L * (size_t)ld);
}
