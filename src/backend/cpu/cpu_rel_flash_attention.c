/* Fused relative-position attention (Transformer-XL) on the CPU: the reference math of
 * rel_flash_attention_forward/backward (src/backend/ops.def), one query row at a time, so that nothing of
 * size [qlen, klen] is kept: the forward keeps ctx and lse (the row's log-sum-exp), the backward
 * recomputes the probabilities as exp(s - lse) and redraws the dropout. The CUDA kernels
 * (kernels/rel_flash_attention.cu) compute the same sums tile by tile.
 *
 * Per (sequence s, head h) unit, query i, allowed key j (kernels/math/rel_attention.h), t = j + qlen-1-i:
 *   s_ij = scale·((q_i + r_w_bias)·k_j + (q_i + r_r_bias)·r_t),  lse_i = m_i + log Σ_j exp(s_ij - m_i)
 *   P'_ij = keep_ij/(1-p)·exp(s_ij - lse_i),  ctx_i = Σ_j P'_ij v_j
 * Backward, dP'_ij = dC_i·v_j, D_i = dC_i·ctx_i, dS_ij = P_ij (keep_ij/(1-p)·dP'_ij - D_i):
 *   dQw_i = scale Σ_j dS_ij k_j,  dQr_i = scale Σ_j dS_ij r_t,  dq_i = dQw_i + dQr_i
 *   dk_j = scale Σ_i dS_ij Qw_i,  dv_j = Σ_i P'_ij dC_i,  dr_t = scale Σ_s Σ_i dS_i,j(t) Qr_i
 * Product operands are rounded to the backend's precision (the roundings of the unfused path's GEMMs:
 * q + bias, k, v, r, P', dC, dS), sums are fp32 in index order. Units run in parallel; dr and the
 * bias gradients, sums over sequences, go through per-unit slots added in sequence order. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_attention_dropout.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_rounded_gemm.h"
#include "math/dropout.h"
#include "math/fast_exp_erf.h"
#include "math/rel_attention.h"
#include "util/check.h"

/* dst[rows, d] = round(src rows (stride ld) + bias) */
static void rounded_rows(int prec, float *dst, const float *src, int ld, const float *bias, int rows, int d) {
    for (int i = 0; i < rows; i++)
        for (int c = 0; c < d; c++)
            dst[(size_t)i * d + c] = hs_lowp_round(prec, src[(size_t)i * ld + c] + (bias ? bias[c] : 0.0f));
}

static float dot(const float *a, const float *b, int d) {
    float acc = 0.0f;
    for (int c = 0; c < d; c++) acc += a[c] * b[c];
    return acc;
}

/* The unit's operands, rounded: Qw, Qr [qlen, d], K, V, R [klen, d] */
typedef struct unit_ops {
    float *qw, *qr, *k, *v, *r;
} unit_ops;

static void unit_ops_alloc(unit_ops *u, int qlen, int klen, int d) {
    HS_ALLOC(u->qw, (size_t)qlen * d), HS_ALLOC(u->qr, (size_t)qlen * d);
    HS_ALLOC(u->k, (size_t)klen * d), HS_ALLOC(u->v, (size_t)klen * d), HS_ALLOC(u->r, (size_t)klen * d);
}
static void unit_ops_free(unit_ops *u) { free(u->qw), free(u->qr), free(u->k), free(u->v), free(u->r); }

static void unit_ops_load(int prec, unit_ops *u, const float *qkv, const float *r, const float *r_w_bias,
                          const float *r_r_bias, int s, int h, int qlen, int mlen, int heads, int d) {
    const int klen = mlen + qlen, H = heads * d, ld = 3 * H;
    const float *seq = qkv + (size_t)s * klen * ld + (size_t)h * d;
    rounded_rows(prec, u->qw, seq + (size_t)mlen * ld, ld, r_w_bias + (size_t)h * d, qlen, d);
    rounded_rows(prec, u->qr, seq + (size_t)mlen * ld, ld, r_r_bias + (size_t)h * d, qlen, d);
    rounded_rows(prec, u->k, seq + H, ld, NULL, klen, d);
    rounded_rows(prec, u->v, seq + 2 * H, ld, NULL, klen, d);
    rounded_rows(prec, u->r, r + (size_t)h * d, H, NULL, klen, d);
}

/* s[j] for the allowed keys [lo, hi] of query i */
static void score_row(float *s, const unit_ops *u, int i, int lo, int hi, int qlen, int d, float scale) {
    const float *qw = u->qw + (size_t)i * d, *qr = u->qr + (size_t)i * d;
    for (int j = lo; j <= hi; j++)
        s[j] = scale * (dot(qw, u->k + (size_t)j * d, d) +
                        dot(qr, u->r + (size_t)hs_rel_shift_col(i, j, qlen) * d, d));
}

void hs_cpu_rel_flash_attention_forward(const hs_backend *be, float *ctx, float *lse, const float *qkv,
                                        const float *r, const float *r_w_bias, const float *r_r_bias, int batch,
                                        int qlen, int mlen, int heads, int head_dim, int lower_shift, float scale,
                                        float p, uint64_t key, int64_t first_sample, uint16_t *ctx16) {
    hs_output_check("rel_flash_attention_forward: ctx or ctx16", ctx, ctx16);
    if (batch <= 0 || qlen <= 0 || heads <= 0 || head_dim <= 0) return;
    const int klen = mlen + qlen, d = head_dim, H = heads * d, prec = be->precision;
    float *own_ctx = NULL; /* ctx16 alone: the context in a buffer of its own first */
    if (!ctx) HS_ALLOC(own_ctx, (size_t)batch * (size_t)qlen * (size_t)H), ctx = own_ctx;
    const hs_dropout_rate rate = hs_dropout_rate_of(p);
#pragma omp parallel
    {
        unit_ops u;
        float *s_row, *acc, *fr; /* [klen], [d], [klen] (a row's dropout multipliers) */
        unit_ops_alloc(&u, qlen, klen, d);
        HS_ALLOC(s_row, (size_t)klen), HS_ALLOC(acc, (size_t)d), HS_ALLOC(fr, (size_t)klen);
#pragma omp for schedule(static)
        for (int un = 0; un < batch * heads; un++) {
            const int s = un / heads, h = un % heads;
            const uint64_t sample_key = hs_attention_sample_key(key, (uint64_t)(first_sample + s));
            unit_ops_load(prec, &u, qkv, r, r_w_bias, r_r_bias, s, h, qlen, mlen, heads, d);
            for (int i = 0; i < qlen; i++) {
                const int lo = hs_rel_key_lo(i, lower_shift), hi = hs_rel_key_hi(i, mlen);
                score_row(s_row, &u, i, lo, hi, qlen, d, scale);
                float m = -INFINITY, sum = 0.0f;
                for (int j = lo; j <= hi; j++) m = s_row[j] > m ? s_row[j] : m;
                for (int j = lo; j <= hi; j++) sum += hs_exp_fast(s_row[j] - m);
                const float l = m + logf(sum);
                lse[(size_t)un * qlen + i] = l;
                for (int c = 0; c < d; c++) acc[c] = 0.0f;
                const uint32_t row_key = hs_attention_row_key(sample_key, hs_attention_dropout_row(h, i, qlen));
                if (p > 0.0f) hs_attn_row_factors(sample_key, row_key, lo, hi, rate, fr);
                for (int j = lo; j <= hi; j++) {
                    float pj = hs_exp_fast(s_row[j] - l);
                    if (p > 0.0f) pj *= fr[j];
                    pj = hs_lowp_round(prec, pj);
                    for (int c = 0; c < d; c++) acc[c] += pj * u.v[(size_t)j * d + c];
                }
                memcpy(ctx + ((size_t)s * qlen + i) * H + (size_t)h * d, acc, (size_t)d * sizeof(float));
            }
        }
        unit_ops_free(&u);
        free(s_row), free(acc), free(fr);
    }
    if (ctx16) hs_cpu_to_half(be, ctx16, ctx, (size_t)batch * (size_t)qlen * (size_t)H);
    free(own_ctx);
}

void hs_cpu_rel_flash_attention_backward(const hs_backend *be, float *dqkv, float *dr, float *dr_w_bias,
                                         float *dr_r_bias, const float *dctx, const float *qkv, const float *r,
                                         const float *r_w_bias, const float *r_r_bias, const float *ctx,
                                         const float *lse, int batch, int qlen, int mlen, int heads, int head_dim,
                                         int lower_shift, float scale, float p, uint64_t key, int64_t first_sample,
                                         uint16_t *dqkv16, uint16_t *dr16) {
    if (qlen <= 0 || heads <= 0 || head_dim <= 0) return;
    const int klen = mlen + qlen, d = head_dim, H = heads * d, ld = 3 * H, prec = be->precision;
    const size_t rd = (size_t)klen * H, KD = (size_t)klen * d;
    if (batch <= 0) {
        memset(dr, 0, rd * sizeof(float));
        if (dr16) hs_cpu_to_half(be, dr16, dr, rd);
        return;
    }
    const hs_dropout_rate rate = hs_dropout_rate_of(p);
    const size_t units = (size_t)batch * heads;
    float *dr_units, *bias_units; /* dR_s [units, klen, d]; bias partial sums [units, 2, d] */
    HS_ALLOC(dr_units, units * KD);
    HS_ALLOC(bias_units, units * 2 * (size_t)d);
#pragma omp parallel
    {
        unit_ops u;
        float *s_row, *ds, *pk, *fr, *dc, *dk, *dv, *dqw, *dqr; /* [klen] x4, [d], [klen, d] x2, [d] x2 */
        unit_ops_alloc(&u, qlen, klen, d);
        HS_ALLOC(s_row, (size_t)klen), HS_ALLOC(ds, (size_t)klen), HS_ALLOC(pk, (size_t)klen), HS_ALLOC(fr, (size_t)klen);
        HS_ALLOC(dc, (size_t)d), HS_ALLOC(dk, KD), HS_ALLOC(dv, KD), HS_ALLOC(dqw, (size_t)d), HS_ALLOC(dqr, (size_t)d);
#pragma omp for schedule(static)
        for (int un = 0; un < batch * heads; un++) {
            const int s = un / heads, h = un % heads;
            const uint64_t sample_key = hs_attention_sample_key(key, (uint64_t)(first_sample + s));
            unit_ops_load(prec, &u, qkv, r, r_w_bias, r_r_bias, s, h, qlen, mlen, heads, d);
            float *dru = dr_units + (size_t)un * KD, *bw = bias_units + (size_t)un * 2 * d, *br = bw + d;
            memset(dru, 0, KD * sizeof(float)), memset(dk, 0, KD * sizeof(float)), memset(dv, 0, KD * sizeof(float));
            for (int c = 0; c < d; c++) bw[c] = br[c] = 0.0f;
            float *dseq = dqkv + (size_t)s * klen * ld + (size_t)h * d;
            for (int t = 0; t < mlen; t++) memset(dseq + (size_t)t * ld, 0, (size_t)d * sizeof(float));
            for (int i = 0; i < qlen; i++) {
                const int lo = hs_rel_key_lo(i, lower_shift), hi = hs_rel_key_hi(i, mlen);
                const size_t row = ((size_t)s * qlen + i) * H + (size_t)h * d;
                const float l = lse[(size_t)un * qlen + i], D = dot(dctx + row, ctx + row, d);
                for (int c = 0; c < d; c++) dc[c] = hs_lowp_round(prec, dctx[row + c]);
                score_row(s_row, &u, i, lo, hi, qlen, d, scale);
                const uint32_t row_key = hs_attention_row_key(sample_key, hs_attention_dropout_row(h, i, qlen));
                if (p > 0.0f) hs_attn_row_factors(sample_key, row_key, lo, hi, rate, fr);
                for (int j = lo; j <= hi; j++) {
                    const float pr = hs_exp_fast(s_row[j] - l);
                    const float f = p > 0.0f ? fr[j] : 1.0f;
                    pk[j] = hs_lowp_round(prec, pr * f);
                    ds[j] = hs_lowp_round(prec, pr * (f * dot(dc, u.v + (size_t)j * d, d) - D));
                }
                for (int c = 0; c < d; c++) dqw[c] = dqr[c] = 0.0f;
                for (int j = lo; j <= hi; j++) {
                    const float *kj = u.k + (size_t)j * d, *rt = u.r + (size_t)hs_rel_shift_col(i, j, qlen) * d;
                    for (int c = 0; c < d; c++) dqw[c] += ds[j] * kj[c], dqr[c] += ds[j] * rt[c];
                }
                const float *qw = u.qw + (size_t)i * d, *qr = u.qr + (size_t)i * d;
                for (int j = lo; j <= hi; j++) {
                    float *dkj = dk + (size_t)j * d, *dvj = dv + (size_t)j * d;
                    float *drt = dru + (size_t)hs_rel_shift_col(i, j, qlen) * d;
                    for (int c = 0; c < d; c++) {
                        dkj[c] += ds[j] * qw[c];
                        dvj[c] += pk[j] * dc[c];
                        drt[c] += ds[j] * qr[c];
                    }
                }
                float *dq = dseq + (size_t)(mlen + i) * ld;
                for (int c = 0; c < d; c++) {
                    const float w = scale * dqw[c], rr = scale * dqr[c];
                    dq[c] = w + rr;
                    bw[c] += w;
                    br[c] += rr;
                }
            }
            for (int j = 0; j < klen; j++)
                for (int c = 0; c < d; c++) {
                    dseq[(size_t)j * ld + H + c] = scale * dk[(size_t)j * d + c];
                    dseq[(size_t)j * ld + 2 * H + c] = dv[(size_t)j * d + c];
                }
            for (size_t e = 0; e < KD; e++) dru[e] *= scale;
        }
        unit_ops_free(&u);
        free(s_row), free(ds), free(pk), free(fr), free(dc), free(dk), free(dv), free(dqw), free(dqr);
    }
    /* dr[t, h·d + c] = Σ_s dR_s[t, c] in sequence order */
#pragma omp parallel for schedule(static)
    for (int t = 0; t < klen; t++)
        for (int h = 0; h < heads; h++)
            for (int c = 0; c < d; c++) {
                float acc = 0.0f;
                for (int s = 0; s < batch; s++)
                    acc += dr_units[((size_t)s * heads + (size_t)h) * KD + (size_t)t * d + c];
                dr[(size_t)t * H + (size_t)h * d + c] = acc;
            }
    for (int h = 0; h < heads; h++)
        for (int c = 0; c < d; c++) {
            float sw = 0.0f, sr = 0.0f;
            for (int s = 0; s < batch; s++) {
                const float *b = bias_units + ((size_t)s * heads + (size_t)h) * 2 * d;
                sw += b[c];
                sr += b[d + c];
            }
            dr_w_bias[(size_t)h * d + c] += sw;
            dr_r_bias[(size_t)h * d + c] += sr;
        }
    free(dr_units);
    free(bias_units);
    if (dqkv16) hs_cpu_to_half(be, dqkv16, dqkv, (size_t)batch * (size_t)klen * (size_t)ld);
    if (dr16) hs_cpu_to_half(be, dr16, dr, rd);
}
