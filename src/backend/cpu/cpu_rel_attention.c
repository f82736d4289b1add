/* Relative-position multi-head attention with segment memory (Transformer-XL) on the CPU; the contract
 * is rel_attention_forward/backward in src/backend/backend.h, the index math kernels/math/rel_attention.h.
 *
 * Per (sequence s, head h) unit, with Q[qlen,d] the query rows mlen.. of qkv, K, V [klen,d] all its key
 * rows and R[klen,d] the head's columns of r (all read in place: leading dimensions 3·n·d and n·d):
 *   Qw = Q + r_w_bias_h,  Qr = Q + r_r_bias_h                       [qlen,d]
 *   AC = Qw·Kᵀ,  BDraw = Qr·Rᵀ                                      [qlen,klen]
 *   S[i][j] = scale·(AC[i][j] + BDraw[i][j+qlen-1-i]) for allowed j (the relative shift as an index map)
 *   P = softmax over the allowed j (max subtracted, float), masked P exactly 0
 *   ctx = P'·V, P' = keep·P/(1-p)
 * Backward, dS = P ⊙ (dP - rowsum(P ⊙ dP)) with dP = keep·(dC·Vᵀ)/(1-p):
 *   dV = P'ᵀ·dC;  dK = scale·dSᵀ·Qw;  dQw = scale·dS·K;
 *   dBDraw[i][t] = dS[i][t-(qlen-1-i)] (0 where no key maps to t);  dQr = scale·dBDraw·R;
 *   dR_s = scale·dBDrawᵀ·Qr;  dQ = dQw + dQr;  dr_w_bias += Σ_i dQw;  dr_r_bias += Σ_i dQr.
 * The units run in parallel (single-threaded OpenBLAS calls inside the OpenMP region, as
 * cpu_attention.c). The sums over sequences (dr and the bias gradients) would make units race, so
 * every unit writes its dR_s and bias partial sums to its own slot and a second loop adds the slots in
 * sequence order: the result does not depend on the thread count.
 *
 * Dropout is recorded as in cpu_attention.c (the row kernels of cpu_attention_rows.h): a dropped
 * probability is stored with its sign bit set, and the backward pass reads keep = !signbit(P) and |P|
 * from probs. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu_rounded_gemm.h"
#include "backend/cpu/cpu_attention_rows.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_simd.h"
#include "math/dropout.h"
#include "math/fast_exp_erf.h"
#include "math/rel_attention.h"
#include "util/check.h"

/* qb[rows,d] = q (rows of stride ld) + bias[d] */
static void add_head_bias(float *qb, const float *q, int ld, const float *bias, int rows, int d) {
    for (int i = 0; i < rows; i++)
        for (int c = 0; c < d; c++) qb[(size_t)i * (size_t)d + c] = q[(size_t)i * (size_t)ld + c] + bias[c];
}

/* Row i of a unit: s[klen] holds AC[i], bd[klen] BDraw[i]; on return s is the probability row
 * (allowed keys [lo, hi], 0 elsewhere). */
static HS_SIMD_CLONES void score_softmax_row(float *s, const float *bd, int lo, int hi, int klen, int shift,
                                             float scale) {
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int j = lo; j <= hi; j++) {
        const float v = scale * (s[j] + bd[j + shift]);
        s[j] = v;
        m = v > m ? v : m;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = lo; j <= hi; j++) {
        const float e = hs_exp_fast(s[j] - m);
        s[j] = e;
        sum += e;
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < lo; j++) s[j] = 0.0f;
#pragma omp simd
    for (int j = lo; j <= hi; j++) s[j] *= inv;
    for (int j = hi + 1; j < klen; j++) s[j] = 0.0f;
}

void hs_cpu_rel_attention_forward(const hs_backend *be, float *ctx, float *probs, const float *qkv, const float *r,
                                  const float *r_w_bias, const float *r_r_bias, int batch, int qlen, int mlen,
                                  int heads, int head_dim, int lower_shift, float scale, float p, uint64_t key,
                                  int64_t first_sample) {
    if (batch <= 0 || qlen <= 0 || heads <= 0 || head_dim <= 0) return;
    const int klen = mlen + qlen, d = head_dim, H = heads * head_dim, ld = 3 * H;
    const int dropout = p > 0.0f;
    const hs_dropout_rate rate = hs_dropout_rate_of(p);
    const size_t QK = (size_t)qlen * (size_t)klen, QD = (size_t)qlen * (size_t)d;
#pragma omp parallel
    {
        float *qw, *qr, *bd, *dropped = NULL; /* [qlen,d] twice, [qlen,klen], [qlen,klen] */
        HS_ALLOC(qw, QD);
        HS_ALLOC(qr, QD);
        HS_ALLOC(bd, QK);
        if (dropout) HS_ALLOC(dropped, QK);
#pragma omp for schedule(static)
        for (int u = 0; u < batch * heads; u++) {
            const int s = u / heads, h = u % heads;
            const float *seq = qkv + (size_t)s * (size_t)klen * (size_t)ld + (size_t)h * (size_t)d;
            const float *q = seq + (size_t)mlen * (size_t)ld, *k = seq + H, *v = seq + 2 * H;
            const float *rh = r + (size_t)h * (size_t)d;
            float *pu = probs + (size_t)u * QK;
            add_head_bias(qw, q, ld, r_w_bias + (size_t)h * (size_t)d, qlen, d);
            add_head_bias(qr, q, ld, r_r_bias + (size_t)h * (size_t)d, qlen, d);
            /* AC[qlen,klen] = Qw·Kᵀ into probs; BDraw[qlen,klen] = Qr·Rᵀ */
            hs_cpu_precision_gemm(be, 0, 1, qlen, klen, d, 1.0f, qw, d, k, ld, 0.0f, pu, klen);
            hs_cpu_precision_gemm(be, 0, 1, qlen, klen, d, 1.0f, qr, d, rh, H, 0.0f, bd, klen);
            for (int i = 0; i < qlen; i++)
                score_softmax_row(pu + (size_t)i * (size_t)klen, bd + (size_t)i * (size_t)klen,
                                  hs_rel_key_lo(i, lower_shift), hs_rel_key_hi(i, mlen), klen,
                                  hs_rel_shift_col(i, 0, qlen), scale);
            const float *pv = pu;
            if (dropout) {
                const uint64_t sample_key = hs_attention_sample_key(key, (uint64_t)(first_sample + s));
                for (int i = 0; i < qlen; i++)
                    hs_attn_drop_probs(dropped + (size_t)i * (size_t)klen, pu + (size_t)i * (size_t)klen, klen,
                                       sample_key, hs_attention_row_key(sample_key, hs_attention_dropout_row(h, i, qlen)),
                                       rate);
                pv = dropped;
            }
            /* ctx[s, :, h·d:(h+1)·d] = P'·V */
            hs_cpu_precision_gemm(be, 0, 0, qlen, d, klen, 1.0f, pv, klen, v, ld, 0.0f,
                                  ctx + (size_t)s * (size_t)qlen * (size_t)H + (size_t)h * (size_t)d, H);
        }
        free(qw);
        free(qr);
        free(bd);
        free(dropped);
    }
}

void hs_cpu_rel_attention_backward(const hs_backend *be, float *dqkv, float *dr, float *dr_w_bias, float *dr_r_bias,
                                   const float *dctx, const float *qkv, const float *r, const float *r_w_bias,
                                   const float *r_r_bias, const float *probs, int batch, int qlen, int mlen, int heads,
                                   int head_dim, int lower_shift, float scale, float p, uint64_t key,
                                   int64_t first_sample) {
    (void)key;
    (void)first_sample; /* the dropout decisions are read back from the sign bits of probs */
    (void)lower_shift;  /* masked keys have P = 0, hence dS = 0: the mask is in probs */
    if (qlen <= 0 || heads <= 0 || head_dim <= 0) return;
    const int klen = mlen + qlen, d = head_dim, H = heads * head_dim, ld = 3 * H;
    const size_t rd = (size_t)klen * (size_t)H; /* dr[klen, n·d] */
    if (batch <= 0) {
        memset(dr, 0, rd * sizeof(float));
        return;
    }
    const int dropout = p > 0.0f;
    const float keep_scale = hs_dropout_keep_scale(p);
    const size_t QK = (size_t)qlen * (size_t)klen, QD = (size_t)qlen * (size_t)d, KD = (size_t)klen * (size_t)d;
    const size_t units = (size_t)batch * (size_t)heads;
    /* per-unit slots: dR_s [units, klen, d] and the bias partial sums [units, 2, d] */
    float *dr_units, *bias_units;
    HS_ALLOC(dr_units, units * KD);
    HS_ALLOC(bias_units, units * 2 * (size_t)d);
#pragma omp parallel
    {
        float *qw, *qr, *dqw, *dqr, *dp, *dbd, *pd = NULL; /* [qlen,d] ×4, [qlen,klen] ×3 */
        HS_ALLOC(qw, QD);
        HS_ALLOC(qr, QD);
        HS_ALLOC(dqw, QD);
        HS_ALLOC(dqr, QD);
        HS_ALLOC(dp, QK);
        HS_ALLOC(dbd, QK);
        if (dropout) HS_ALLOC(pd, QK);
#pragma omp for schedule(static)
        for (int u = 0; u < batch * heads; u++) {
            const int s = u / heads, h = u % heads;
            const size_t seq_off = (size_t)s * (size_t)klen * (size_t)ld + (size_t)h * (size_t)d;
            const float *seq = qkv + seq_off;
            const float *q = seq + (size_t)mlen * (size_t)ld, *k = seq + H, *v = seq + 2 * H;
            float *dseq = dqkv + seq_off;
            float *dq = dseq + (size_t)mlen * (size_t)ld, *dk = dseq + H, *dv = dseq + 2 * H;
            const float *rh = r + (size_t)h * (size_t)d;
            const float *dc = dctx + (size_t)s * (size_t)qlen * (size_t)H + (size_t)h * (size_t)d;
            const float *pu = probs + (size_t)u * QK;
            add_head_bias(qw, q, ld, r_w_bias + (size_t)h * (size_t)d, qlen, d);
            add_head_bias(qr, q, ld, r_r_bias + (size_t)h * (size_t)d, qlen, d);
            const float *pv = pu;
            if (dropout) {
                hs_attn_kept_probs(pd, pu, QK, keep_scale);
                pv = pd;
            }
            /* dP'[qlen,klen] = dC·Vᵀ ; dV[klen,d] = P'ᵀ·dC */
            hs_cpu_precision_gemm(be, 0, 1, qlen, klen, d, 1.0f, dc, H, v, ld, 0.0f, dp, klen);
            hs_cpu_precision_gemm(be, 1, 0, klen, d, qlen, 1.0f, pv, klen, dc, H, 0.0f, dv, ld);
            for (int i = 0; i < qlen; i++)
                hs_attn_softmax_backward_row(dp + (size_t)i * (size_t)klen, pu + (size_t)i * (size_t)klen, klen,
                                             dropout, keep_scale);
            /* dBDraw: the shift's index map backwards (row i moves right by qlen-1-i) */
            for (int i = 0; i < qlen; i++) {
                const int shift = hs_rel_shift_col(i, 0, qlen);
                float *row = dbd + (size_t)i * (size_t)klen;
                const float *ds = dp + (size_t)i * (size_t)klen;
                for (int t = 0; t < shift; t++) row[t] = 0.0f;
                for (int t = shift; t < klen; t++) row[t] = ds[t - shift];
            }
            /* dQw = scale·dS·K ; dK = scale·dSᵀ·Qw ; dQr = scale·dBDraw·R ; dR_s = scale·dBDrawᵀ·Qr */
            hs_cpu_precision_gemm(be, 0, 0, qlen, d, klen, scale, dp, klen, k, ld, 0.0f, dqw, d);
            hs_cpu_precision_gemm(be, 1, 0, klen, d, qlen, scale, dp, klen, qw, d, 0.0f, dk, ld);
            hs_cpu_precision_gemm(be, 0, 0, qlen, d, klen, scale, dbd, klen, rh, H, 0.0f, dqr, d);
            hs_cpu_precision_gemm(be, 1, 0, klen, d, qlen, scale, dbd, klen, qr, d, 0.0f, dr_units + (size_t)u * KD, d);
            /* dQ = dQw + dQr on the query rows; the memory rows' q columns get 0 */
            for (int t = 0; t < mlen; t++) memset(dseq + (size_t)t * (size_t)ld, 0, (size_t)d * sizeof(float));
            for (int i = 0; i < qlen; i++)
                for (int c = 0; c < d; c++)
                    dq[(size_t)i * (size_t)ld + c] = dqw[(size_t)i * (size_t)d + c] + dqr[(size_t)i * (size_t)d + c];
            /* bias partial sums over the queries, in query order */
            float *bw = bias_units + (size_t)u * 2 * (size_t)d, *br = bw + d;
            for (int c = 0; c < d; c++) bw[c] = br[c] = 0.0f;
            for (int i = 0; i < qlen; i++)
                for (int c = 0; c < d; c++) {
                    bw[c] += dqw[(size_t)i * (size_t)d + c];
                    br[c] += dqr[(size_t)i * (size_t)d + c];
                }
        }
        free(qw);
        free(qr);
        free(dqw);
        free(dqr);
        free(dp);
        free(dbd);
        free(pd);
    }
    /* dr[t, h·d + c] = Σ_s dR_s[t, c] in sequence order */
#pragma omp parallel for schedule(static)
    for (int t = 0; t < klen; t++)
        for (int h = 0; h < heads; h++)
            for (int c = 0; c < d; c++) {
                float acc = 0.0f;
                for (int s = 0; s < batch; s++)
                    acc += dr_units[((size_t)s * (size_t)heads + (size_t)h) * KD + (size_t)t * (size_t)d + c];
                dr[(size_t)t * (size_t)H + (size_t)h * (size_t)d + c] = acc;
            }
    /* bias gradients: Σ over sequences in order, then added to the accumulators */
    for (int h = 0; h < heads; h++)
        for (int c = 0; c < d; c++) {
            float sw = 0.0f, sr = 0.0f;
            for (int s = 0; s < batch; s++) {
                const float *b = bias_units + ((size_t)s * (size_t)heads + (size_t)h) * 2 * (size_t)d;
                sw += b[c];
                sr += b[d + c];
            }
            dr_w_bias[(size_t)h * (size_t)d + c] += sw;
            dr_r_bias[(size_t)h * (size_t)d + c] += sr;
        }
    free(dr_units);
    free(bias_units);
}
