/* Conformance cases of relative-position attention (kernels/rel_attention.cu) against the CPU backend
 * (src/backend/cpu/cpu_rel_attention.c): one query, no memory, memory longer than the segment, the
 * same_length mask, odd head sizes, more heads than sequences and the reverse, dropout on.
 *
 * As for BERT's attention (conformance_elementwise_attention.c): the probabilities' sign bits (dropout marks) must agree
 * exactly with the CPU's, and the CUDA op run twice on the same inputs must give the same bits (on the
 * emulated device the second run has another thread order, so an order-dependent sum would show). The
 * outputs start as random junk (they are overwritten) and the bias gradients at random values (they
 * accumulate). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "backend/cuda/cuda_ops.h"
#include "util/check.h"


/* The bounds of relative attention (conformance.h; the BERT attention's derivation, conformance_elementwise_attention.c,
 * with Transformer-XL's two score terms). Per (sequence b, head h), query i (qkv row mlen + i), key j in
 * the allowed range [lo_i, mlen + i], t = j + qlen - 1 - i the relative-position row of r,
 * Qw = q + r_w_bias, Qr = q + r_r_bias (one rounding each), f_K = hs_conf_dot_factor(K):
 *   |ds_ij| <= (f_d + 5 c u32) scale (sum_e |Qw_ie K_je| + sum_e |Qr_ie R_te|)   (the two dot products,
 *     the bias adds, their sum, the scale and the row max);
 *   |dp_ij| <= p_ij (|ds_ij| + sum_k p_ik |ds_ik|) + c 32 u32 p_ij;
 *   ctx, dV: P' V and P'^T dC as in BERT's attention (K = klen, qlen);
 *   dS from dP = keep/(1 - drop) dC V^T (K = d) as in BERT's attention;
 *   dQw = scale dS K (K = klen), dQr = scale dS R_t (K = klen), dQ = dQw + dQr (+ c u32 of both);
 *   dK = scale dS^T Qw (K = qlen); dR_t = scale sum_i dS_i,j(t) Qr_i (K = qlen), then summed over the
 *   sequences (c gamma_batch of the magnitudes); the bias gradients add sum_b sum_i dQw (dQr) onto their
 *   initial values: each term's bound plus c gamma_(batch qlen + 1) of the magnitudes. */
typedef struct rel_bounds {
    double *probs, *ctx, *dqkv, *dr, *dgw, *dgr;
} rel_bounds;

static void rel_attention_bounds(hs_conf *t, rel_bounds *bd, const float *qkv, const float *r, const float *rwb,
                                 const float *rrb, const float *dctx, const float *probs, const float *gw0,
                                 const float *gr0, int batch, int qlen, int mlen, int heads, int d, int lower_shift,
                                 float scale, float p) {
    const int klen = qlen + mlen, H = heads * d;
    const double u = HS_CONF_U32, c = HS_CONF_C, sc = scale, ks = 1.0 / (1.0 - p);
    const double fd = hs_conf_dot_factor(t, d), fk = hs_conf_dot_factor(t, klen), fq = hs_conf_dot_factor(t, qlen);
    const size_t QK = (size_t)qlen * klen;
    double *ds, *dp, *G, *E, *dS, *ddS, *mag_dr, *mag_gw, *mag_gr;
    HS_ALLOC(ds, (size_t)klen), HS_ALLOC(dp, QK), HS_ALLOC(G, QK), HS_ALLOC(E, QK), HS_ALLOC(dS, QK),
        HS_ALLOC(ddS, QK), HS_ALLOC(mag_dr, (size_t)klen * H), HS_ALLOC(mag_gw, (size_t)H), HS_ALLOC(mag_gr, (size_t)H);
    for (size_t i = 0; i < (size_t)batch * klen * 3 * H; i++) bd->dqkv[i] = 1e-30;
    for (size_t i = 0; i < (size_t)klen * H; i++) bd->dr[i] = 1e-30, mag_dr[i] = 0.0;
    for (int i = 0; i < H; i++) {
        bd->dgw[i] = bd->dgr[i] = 1e-30;
        mag_gw[i] = fabs((double)gw0[i]), mag_gr[i] = fabs((double)gr0[i]);
    }
#define QW(i, e) fabs((double)qkv[((size_t)b * klen + mlen + (i)) * 3 * H + h * d + (e)] + rwb[h * d + (e)])
#define QR(i, e) fabs((double)qkv[((size_t)b * klen + mlen + (i)) * 3 * H + h * d + (e)] + rrb[h * d + (e)])
#define KK(j, e) fabs((double)qkv[((size_t)b * klen + (j)) * 3 * H + H + h * d + (e)])
#define VV(j, e) fabs((double)qkv[((size_t)b * klen + (j)) * 3 * H + 2 * H + h * d + (e)])
#define RR(tt, e) fabs((double)r[(size_t)(tt) * H + h * d + (e)])
#define DC(i, e) fabs((double)dctx[((size_t)b * qlen + (i)) * H + h * d + (e)])
#define LO(i) (lower_shift > 0 && (i) - lower_shift + 1 > 0 ? (i) - lower_shift + 1 : 0)
#define ALLOWED(i, j) ((j) >= LO(i) && (j) <= mlen + (i))
#define TT(i, j) ((j) + qlen - 1 - (i))
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < heads; h++) {
            const float *P = probs + ((size_t)b * heads + h) * QK;
            for (int i = 0; i < qlen; i++) {
                double wsum = 0.0, R = 0.0, dR = 0.0;
                for (int j = 0; j < klen; j++) {
                    ds[j] = 0.0;
                    if (!ALLOWED(i, j)) continue;
                    double sabs = 0.0;
                    for (int e = 0; e < d; e++) sabs += QW(i, e) * KK(j, e) + QR(i, e) * RR(TT(i, j), e);
                    ds[j] = (fd + 5.0 * c * u) * sc * sabs;
                    wsum += fabs((double)P[(size_t)i * klen + j]) * ds[j];
                }
                for (int j = 0; j < klen; j++) {
                    const size_t ij = (size_t)i * klen + j;
                    const double pij = fabs((double)P[ij]), keep = signbit(P[ij]) ? 0.0 : ks;
                    dp[ij] = pij * (ds[j] + wsum) + c * HS_CONF_EW_ULPS * u * pij;
                    bd->probs[((size_t)b * heads + h) * QK + ij] = dp[ij] + 1e-30;
                    double g = 0.0;
                    for (int e = 0; e < d; e++) g += DC(i, e) * VV(j, e);
                    G[ij] = keep * g, E[ij] = keep * fd * g;
                    R += pij * G[ij];
                    dR += dp[ij] * G[ij] + pij * E[ij];
                }
                dR += c * hs_conf_gamma(klen, u) * R;
                for (int j = 0; j < klen; j++) {
                    const size_t ij = (size_t)i * klen + j;
                    const double pij = fabs((double)P[ij]);
                    dS[ij] = pij * (G[ij] + R);
                    ddS[ij] = dp[ij] * (G[ij] + R) + pij * (E[ij] + dR) + 3.0 * c * u * pij * (G[ij] + R);
                }
                for (int e = 0; e < d; e++) { /* ctx, dQ = dQw + dQr */
                    double cprop = 0.0, cmag = 0.0, wp = 0.0, wm = 0.0, rp = 0.0, rm = 0.0;
                    for (int j = 0; j < klen; j++) {
                        const size_t ij = (size_t)i * klen + j;
                        const double keep = signbit(P[ij]) ? 0.0 : ks;
                        cprop += keep * dp[ij] * VV(j, e), cmag += keep * fabs((double)P[ij]) * VV(j, e);
                        if (!ALLOWED(i, j)) continue;
                        wp += ddS[ij] * KK(j, e), wm += dS[ij] * KK(j, e);
                        rp += ddS[ij] * RR(TT(i, j), e), rm += dS[ij] * RR(TT(i, j), e);
                    }
                    bd->ctx[((size_t)b * qlen + i) * H + h * d + e] = cprop + fk * cmag + 1e-30;
                    const double bw = sc * (wp + fk * wm), br = sc * (rp + fk * rm);
                    bd->dqkv[((size_t)b * klen + mlen + i) * 3 * H + h * d + e] += bw + br + c * u * sc * (wm + rm);
                    bd->dgw[h * d + e] += bw, mag_gw[h * d + e] += sc * wm;
                    bd->dgr[h * d + e] += br, mag_gr[h * d + e] += sc * rm;
                }
            }
            for (int j = 0; j < klen; j++) /* dK_j, dV_j; dR at t = j + qlen - 1 - i */
                for (int e = 0; e < d; e++) {
                    double kp = 0.0, km = 0.0, vp = 0.0, vm = 0.0;
                    for (int i = 0; i < qlen; i++) {
                        const size_t ij = (size_t)i * klen + j;
                        const double keep = signbit(P[ij]) ? 0.0 : ks;
                        vp += keep * dp[ij] * DC(i, e), vm += keep * fabs((double)P[ij]) * DC(i, e);
                        if (!ALLOWED(i, j)) continue;
                        kp += ddS[ij] * QW(i, e), km += dS[ij] * QW(i, e);
                    }
                    double *row = bd->dqkv + ((size_t)b * klen + j) * 3 * H + h * d + e;
                    row[H] += sc * (kp + fq * km);
                    row[2 * H] += vp + fq * vm;
                }
            for (int tt = 0; tt < klen; tt++)
                for (int e = 0; e < d; e++) {
                    double rp = 0.0, rm = 0.0;
                    for (int i = 0; i < qlen; i++) {
                        const int j = tt - (qlen - 1 - i);
                        if (j < 0 || j >= klen || !ALLOWED(i, j)) continue;
                        const size_t ij = (size_t)i * klen + j;
                        rp += ddS[ij] * QR(i, e), rm += dS[ij] * QR(i, e);
                    }
                    bd->dr[(size_t)tt * H + h * d + e] += sc * (rp + fq * rm);
                    mag_dr[(size_t)tt * H + h * d + e] += sc * rm;
                }
        }
#undef QW
#undef QR
#undef KK
#undef VV
#undef RR
#undef DC
#undef LO
#undef ALLOWED
#undef TT
    for (size_t i = 0; i < (size_t)klen * H; i++) bd->dr[i] += c * hs_conf_gamma(batch, u) * mag_dr[i];
    const double gsum = c * hs_conf_gamma((double)batch * qlen + 1, u);
    for (int i = 0; i < H; i++) bd->dgw[i] += gsum * mag_gw[i], bd->dgr[i] += gsum * mag_gr[i];
    free(ds), free(dp), free(G), free(E), free(dS), free(ddS), free(mag_dr), free(mag_gw), free(mag_gr);
}

typedef struct rel_case {
    int batch, qlen, mlen, heads, d, lower_shift;
    float p;
} rel_case;

/* A case's sizes: klen, H = heads·d, the element counts of q|k|v, r, a bias, ctx, the probabilities and
 * lse, and the scale 1/√d */
typedef struct rel_sizes {
    int klen, H;
    size_t nqkv, nr, nb, nctx, nprobs, nlse;
    float scale;
} rel_sizes;
static rel_sizes rel_sizes_of(rel_case c) {
    rel_sizes z;
    z.klen = c.mlen + c.qlen, z.H = c.heads * c.d;
    z.nqkv = (size_t)c.batch * z.klen * 3 * z.H, z.nr = (size_t)z.klen * z.H, z.nb = (size_t)z.H;
    z.nctx = (size_t)c.batch * c.qlen * z.H, z.nprobs = (size_t)c.batch * c.heads * c.qlen * z.klen;
    z.nlse = (size_t)c.batch * c.heads * c.qlen;
    z.scale = 1.0f / sqrtf((float)c.d);
    return z;
}
/* the fused op's cases: their dropout key and first sample */
#define REL_FLASH_KEY 0x5be1f0c2a7d3e419ULL
#define REL_FLASH_FIRST_SAMPLE 5

static void rel_attention_case(hs_conf *t, rel_case c) {
    char what[200];
    const int klen = c.mlen + c.qlen, H = c.heads * c.d;
    const size_t nqkv = (size_t)c.batch * klen * 3 * H, nr = (size_t)klen * H, nb = (size_t)H,
                 nctx = (size_t)c.batch * c.qlen * H, nprobs = (size_t)c.batch * c.heads * c.qlen * klen;
    const uint64_t key = 0xa4093822299f31d0ULL;
    const int64_t first_sample = 3;
    const float scale = 1.0f / sqrtf((float)c.d);
    float *qkv = hs_conf_rand(t, nqkv, -2, 2), *r = hs_conf_rand(t, nr, -1, 1);
    float *rwb = hs_conf_rand(t, nb, -0.5f, 0.5f), *rrb = hs_conf_rand(t, nb, -0.5f, 0.5f);
    float *dctx = hs_conf_rand(t, nctx, -1, 1), *gw = hs_conf_rand(t, nb, -1, 1), *gr = hs_conf_rand(t, nb, -1, 1);
    size_t njunk = nqkv > nprobs ? nqkv : nprobs;
    float *junk = hs_conf_rand(t, njunk, -1, 1); /* overwritten outputs start non-zero */
    hs_conf_pair d_qkv = hs_conf_pair_of(t, qkv, nqkv * 4), d_r = hs_conf_pair_of(t, r, nr * 4), d_rwb = hs_conf_pair_of(t, rwb, nb * 4),
         d_rrb = hs_conf_pair_of(t, rrb, nb * 4), d_dctx = hs_conf_pair_of(t, dctx, nctx * 4);
    hs_conf_pair d_ctx = hs_conf_pair_of(t, junk, nctx * 4), d_probs = hs_conf_pair_of(t, junk, nprobs * 4), d_dqkv = hs_conf_pair_of(t, junk, nqkv * 4),
         d_dr = hs_conf_pair_of(t, junk, nr * 4), d_gw = hs_conf_pair_of(t, gw, nb * 4), d_gr = hs_conf_pair_of(t, gr, nb * 4);
    /* the second CUDA run */
    void *ctx2 = hs_conf_dev(t->cuda, junk, nctx * 4), *probs2 = hs_conf_dev(t->cuda, NULL, nprobs * 4),
         *dqkv2 = hs_conf_dev(t->cuda, junk, nqkv * 4), *dr2 = hs_conf_dev(t->cuda, NULL, nr * 4),
         *gw2 = hs_conf_dev(t->cuda, gw, nb * 4), *gr2 = hs_conf_dev(t->cuda, gr, nb * 4);

    const hs_backend *be[3] = {t->cpu, t->cuda, t->cuda};
    void *ctx[3] = {d_ctx.cpu, d_ctx.cuda, ctx2}, *probs[3] = {d_probs.cpu, d_probs.cuda, probs2};
    void *dqkv[3] = {d_dqkv.cpu, d_dqkv.cuda, dqkv2}, *dr[3] = {d_dr.cpu, d_dr.cuda, dr2};
    void *gwv[3] = {d_gw.cpu, d_gw.cuda, gw2}, *grv[3] = {d_gr.cpu, d_gr.cuda, gr2};
    for (int k = 0; k < 3; k++) {
        const int dev = k == 0 ? 0 : 1; /* which copy of the inputs */
        const float *q = dev ? d_qkv.cuda : d_qkv.cpu, *rr = dev ? d_r.cuda : d_r.cpu;
        const float *w = dev ? d_rwb.cuda : d_rwb.cpu, *b = dev ? d_rrb.cuda : d_rrb.cpu;
        const float *g = dev ? d_dctx.cuda : d_dctx.cpu;
        be[k]->rel_attention_forward(be[k], ctx[k], probs[k], q, rr, w, b, c.batch, c.qlen, c.mlen, c.heads, c.d,
                                     c.lower_shift, scale, c.p, key, first_sample);
        be[k]->rel_attention_backward(be[k], dqkv[k], dr[k], gwv[k], grv[k], g, q, rr, w, b, probs[k], c.batch,
                                      c.qlen, c.mlen, c.heads, c.d, c.lower_shift, scale, c.p, key, first_sample);
    }

    float *probs_cpu = hs_conf_fetch(t->cpu, d_probs.cpu, nprobs * 4);
    rel_bounds bd;
    HS_ALLOC(bd.probs, nprobs), HS_ALLOC(bd.ctx, nctx), HS_ALLOC(bd.dqkv, nqkv), HS_ALLOC(bd.dr, nr),
        HS_ALLOC(bd.dgw, nb), HS_ALLOC(bd.dgr, nb);
    rel_attention_bounds(t, &bd, qkv, r, rwb, rrb, dctx, probs_cpu, gw, gr, c.batch, c.qlen, c.mlen, c.heads, c.d,
                         c.lower_shift, scale, c.p);
    const double *bounds[6] = {bd.probs, bd.ctx, bd.dqkv, bd.dr, bd.dgw, bd.dgr};
    const char *names[6] = {"probs", "ctx", "dqkv", "dr", "dr_w_bias", "dr_r_bias"};
    const hs_conf_pair outs[6] = {d_probs, d_ctx, d_dqkv, d_dr, d_gw, d_gr};
    void *seconds[6] = {probs2, ctx2, dqkv2, dr2, gw2, gr2};
    const size_t counts[6] = {nprobs, nctx, nqkv, nr, nb, nb};
    for (int o = 0; o < 6; o++) {
        snprintf(what, sizeof what, "%s b=%d qlen=%d mlen=%d heads=%d d=%d lower_shift=%d p=%g", names[o], c.batch,
                 c.qlen, c.mlen, c.heads, c.d, c.lower_shift, (double)c.p);
        hs_conf_check_bound(t, what, outs[o].cpu, outs[o].cuda, counts[o], bounds[o]);
        hs_conf_same_bits(t, what, outs[o].cuda, seconds[o], counts[o] * 4);
        if (o == 0) hs_conf_same_signs(t, what, outs[o].cpu, outs[o].cuda, counts[o]);
    }

    hs_conf_pair_free(t, d_qkv), hs_conf_pair_free(t, d_r), hs_conf_pair_free(t, d_rwb), hs_conf_pair_free(t, d_rrb), hs_conf_pair_free(t, d_dctx);
    hs_conf_pair_free(t, d_ctx), hs_conf_pair_free(t, d_probs), hs_conf_pair_free(t, d_dqkv), hs_conf_pair_free(t, d_dr), hs_conf_pair_free(t, d_gw), hs_conf_pair_free(t, d_gr);
    for (int o = 0; o < 6; o++) t->cuda->free(t->cuda, seconds[o]);
    free(probs_cpu), free(bd.probs), free(bd.ctx), free(bd.dqkv), free(bd.dr), free(bd.dgw), free(bd.dgr);
    free(qkv), free(r), free(rwb), free(rrb), free(dctx), free(gw), free(gr), free(junk);
}

/* h[n] (a 16-bit output of be's op) against be's own to_half of f[n], bit for bit */
static void twin_bits(hs_conf *t, const hs_backend *be, const char *what, const void *f, const void *h, size_t n) {
    uint16_t *fresh = be->alloc(be, (n ? n : 1) * sizeof(uint16_t));
    be->to_half(be, fresh, f, n);
    uint16_t *a = hs_conf_fetch(be, fresh, n * sizeof(uint16_t)), *b = hs_conf_fetch(be, h, n * sizeof(uint16_t));
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i] && !bad++) first = i;
    if (!bad) t->checks++;
    else {
        hs_conf_fail(t);
        printf("FAIL %s: %s: %zu of %zu 16-bit values are not to_half's; first at [%zu]: 0x%04x, to_half 0x%04x\n",
               t->op, what, bad, n, first, (unsigned)b[first], (unsigned)a[first]);
    }
    free(a), free(b);
    be->free(be, fresh);
}

/* outs[o][0] and outs[o][1] (bytes[o] each) on be hold the same bits, for o < n: a check per output, named
 * "fused PASS NAME, HOW" and the case */
static void same_pairs(hs_conf *t, const hs_backend *be, rel_case c, const char *pass, const char *how, int n,
                       void *const *const outs[], const char *const names[], const size_t bytes[]) {
    char what[240];
    for (int o = 0; o < n; o++) {
        snprintf(what, sizeof what, "fused %s %s, %s b=%d qlen=%d mlen=%d heads=%d d=%d", pass, names[o], how, c.batch,
                 c.qlen, c.mlen, c.heads, c.d);
        hs_conf_same_on(t, be, what, outs[o][0], outs[o][1], bytes[o]);
    }
}

/* The 16-bit dataflow (docs/gpu.md): the fused forward without ctx gives the ctx16 and lse of the call
 * with it (ctx16_ref, lse_ref); where the products read twins (CUDA under bf16/fp16) the backward of a ctx
 * bound with bind_half_only (its fp32 values other ones: they must not be read) gives the bits of the
 * backward from ctx16 widened. in: qkv, r, r_w_bias, r_r_bias, dctx on be. */
static void rel_flash_only16(hs_conf *t, const hs_backend *be, rel_case c, const float *const in[5],
                             const uint16_t *ctx16_ref, const void *lse_ref, const float *junk, const float *gw,
                             const float *gr) {
    char what[200];
    const rel_sizes z = rel_sizes_of(c);
    const size_t nqkv = z.nqkv, nr = z.nr, nb = z.nb, nctx = z.nctx, nlse = z.nlse;
    const uint64_t key = REL_FLASH_KEY;
    const int64_t first_sample = REL_FLASH_FIRST_SAMPLE;
    const float scale = z.scale;
    uint16_t *c16 = be->alloc(be, nctx * sizeof(uint16_t));
    void *lse = hs_conf_dev(be, junk, nlse * 4);
    be->rel_flash_attention_forward(be, NULL, lse, in[0], in[1], in[2], in[3], c.batch, c.qlen, c.mlen, c.heads, c.d,
                                    c.lower_shift, scale, c.p, key, first_sample, c16);
    snprintf(what, sizeof what, "fused ctx16 without ctx = with ctx b=%d qlen=%d mlen=%d heads=%d d=%d", c.batch,
             c.qlen, c.mlen, c.heads, c.d);
    hs_conf_same_on(t, be, what, ctx16_ref, c16, nctx * sizeof(uint16_t));
    snprintf(what, sizeof what, "fused lse without ctx = with ctx b=%d qlen=%d mlen=%d heads=%d d=%d", c.batch,
             c.qlen, c.mlen, c.heads, c.d);
    hs_conf_same_on(t, be, what, lse_ref, lse, nlse * 4);
    if (be->products_read_twins) {
        float *wide = be->alloc(be, nctx * 4), *stale = hs_conf_dev(be, junk, nctx * 4);
        be->from_half(be, wide, c16, nctx);
        void *dq[2], *dr[2], *dgw[2], *dgr[2];
        for (int k = 0; k < 2; k++) { /* k = 1: ctx bound with bind_half_only */
            dq[k] = hs_conf_dev(be, junk, nqkv * 4), dr[k] = hs_conf_dev(be, junk, nr * 4);
            dgw[k] = hs_conf_dev(be, gw, nb * 4), dgr[k] = hs_conf_dev(be, gr, nb * 4);
            if (k) be->bind_half_only(be, stale, c16, nctx);
            be->rel_flash_attention_backward(be, dq[k], dr[k], dgw[k], dgr[k], in[4], in[0], in[1], in[2], in[3],
                                             k ? stale : wide, lse, c.batch, c.qlen, c.mlen, c.heads, c.d,
                                             c.lower_shift, scale, c.p, key, first_sample, NULL, NULL);
            if (k) be->unbind_half(be, stale);
        }
        void *const *outs[4] = {dq, dr, dgw, dgr};
        const char *names[4] = {"dqkv", "dr", "dr_w_bias", "dr_r_bias"};
        const size_t bytes[4] = {nqkv * 4, nr * 4, nb * 4, nb * 4};
        same_pairs(t, be, c, "backward", "ctx bound with bind_half_only = from ctx16 widened", 4, outs, names, bytes);
        for (int k = 0; k < 2; k++) be->free(be, dq[k]), be->free(be, dr[k]), be->free(be, dgw[k]), be->free(be, dgr[k]);
        be->free(be, wide), be->free(be, stale);
    }
    be->free(be, c16), be->free(be, lse);
}

/* Where the products read twins (CUDA under bf16/fp16): q|k|v and r bound with bind_half_only to their
 * 16-bit roundings (their fp32 values other ones: they must not be read), as Transformer-XL's 16-bit
 * dataflow keeps them, give the bits of the fused forward (ctx, ctx16, lse) and backward (dqkv, dr and the
 * bias gradients) from fp32 inputs holding those roundings widened. in: qkv, r, r_w_bias, r_r_bias, dctx
 * on be. */
static void rel_flash_inputs16(hs_conf *t, const hs_backend *be, rel_case c, const float *const in[5],
                               const float *junk, const float *gw, const float *gr) {
    if (!be->products_read_twins) return;
    const rel_sizes z = rel_sizes_of(c);
    const size_t nqkv = z.nqkv, nr = z.nr, nb = z.nb, nctx = z.nctx, nlse = z.nlse;
    uint16_t *qkv16 = be->alloc(be, nqkv * 2), *r16 = be->alloc(be, nr * 2);
    be->to_half(be, qkv16, in[0], nqkv);
    be->to_half(be, r16, in[1], nr);
    float *qkv_wide = be->alloc(be, nqkv * 4), *r_wide = be->alloc(be, nr * 4);
    be->from_half(be, qkv_wide, qkv16, nqkv);
    be->from_half(be, r_wide, r16, nr);
    float *qkv_stale = hs_conf_dev(be, junk, nqkv * 4), *r_stale = hs_conf_dev(be, junk, nr * 4);
    uint16_t *dctx16 = be->alloc(be, nctx * 2);
    be->to_half(be, dctx16, in[4], nctx);
    float *dctx_wide = be->alloc(be, nctx * 4), *dctx_stale = hs_conf_dev(be, junk, nctx * 4);
    be->from_half(be, dctx_wide, dctx16, nctx);
    void *ctx[2], *lse[2], *c16[2], *dq[2], *dr[2], *dgw[2], *dgr[2];
    for (int k = 0; k < 2; k++) { /* k = 1: q|k|v, r and (in the backward) dctx bound with bind_half_only */
        ctx[k] = hs_conf_dev(be, junk, nctx * 4), lse[k] = hs_conf_dev(be, junk, nlse * 4);
        c16[k] = be->alloc(be, nctx * 2);
        dq[k] = hs_conf_dev(be, junk, nqkv * 4), dr[k] = hs_conf_dev(be, junk, nr * 4);
        dgw[k] = hs_conf_dev(be, gw, nb * 4), dgr[k] = hs_conf_dev(be, gr, nb * 4);
        const float *qkv = k ? qkv_stale : qkv_wide, *r = k ? r_stale : r_wide;
        if (k) be->bind_half_only(be, qkv_stale, qkv16, nqkv), be->bind_half_only(be, r_stale, r16, nr);
        be->rel_flash_attention_forward(be, ctx[k], lse[k], qkv, r, in[2], in[3], c.batch, c.qlen, c.mlen, c.heads,
                                        c.d, c.lower_shift, z.scale, c.p, REL_FLASH_KEY, REL_FLASH_FIRST_SAMPLE, c16[k]);
        if (k) be->bind_half_only(be, dctx_stale, dctx16, nctx);
        be->rel_flash_attention_backward(be, dq[k], dr[k], dgw[k], dgr[k], k ? dctx_stale : dctx_wide, qkv, r, in[2],
                                         in[3], ctx[k], lse[k], c.batch, c.qlen, c.mlen, c.heads, c.d, c.lower_shift,
                                         z.scale, c.p, REL_FLASH_KEY, REL_FLASH_FIRST_SAMPLE, NULL, NULL);
        if (k) be->unbind_half(be, qkv_stale), be->unbind_half(be, r_stale), be->unbind_half(be, dctx_stale);
    }
    void *const *outs[7] = {ctx, c16, lse, dq, dr, dgw, dgr};
    const char *names[7] = {"ctx", "ctx16", "lse", "dqkv", "dr", "dr_w_bias", "dr_r_bias"};
    const size_t bytes[7] = {nctx * 4, nctx * 2, nlse * 4, nqkv * 4, nr * 4, nb * 4, nb * 4};
    same_pairs(t, be, c, "forward/backward",
               "q|k|v, r and dctx bound with bind_half_only = from their roundings widened", 7, outs, names, bytes);
    for (int o = 0; o < 7; o++) be->free(be, outs[o][0]), be->free(be, outs[o][1]);
    be->free(be, qkv16), be->free(be, r16), be->free(be, qkv_wide), be->free(be, r_wide);
    be->free(be, qkv_stale), be->free(be, r_stale);
    be->free(be, dctx16), be->free(be, dctx_wide), be->free(be, dctx_stale);
}

/* CUDA under bf16/fp16: the backward loading its dC tiles from dctx itself (hs_cuda_rel_flash_dctx16(0))
 * gives the bits of the default run from dctx's 16-bit copy (ref: dqkv, dr, dr_w_bias, dr_r_bias of that
 * run, from gw and gr). in: qkv, r, r_w_bias, r_r_bias, dctx on CUDA; ctx and lse of the forward. */
static void rel_flash_dctx16_same(hs_conf *t, rel_case c, const float *const in[5], const void *ctx, const void *lse,
                                  void *const ref[4], const float *junk, const float *gw, const float *gr) {
    const hs_backend *be = t->cuda;
    const rel_sizes z = rel_sizes_of(c);
    void *out[4] = {hs_conf_dev(be, junk, z.nqkv * 4), hs_conf_dev(be, junk, z.nr * 4), hs_conf_dev(be, gw, z.nb * 4),
                    hs_conf_dev(be, gr, z.nb * 4)};
    hs_cuda_rel_flash_dctx16(0);
    be->rel_flash_attention_backward(be, out[0], out[1], out[2], out[3], in[4], in[0], in[1], in[2], in[3], ctx, lse,
                                     c.batch, c.qlen, c.mlen, c.heads, c.d, c.lower_shift, z.scale, c.p, REL_FLASH_KEY,
                                     REL_FLASH_FIRST_SAMPLE, NULL, NULL);
    hs_cuda_rel_flash_dctx16(1);
    void *const pairs[4][2] = {{ref[0], out[0]}, {ref[1], out[1]}, {ref[2], out[2]}, {ref[3], out[3]}};
    void *const *outs[4] = {pairs[0], pairs[1], pairs[2], pairs[3]};
    const char *names[4] = {"dqkv", "dr", "dr_w_bias", "dr_r_bias"};
    const size_t bytes[4] = {z.nqkv * 4, z.nr * 4, z.nb * 4, z.nb * 4};
    same_pairs(t, be, c, "backward", "dC tiles from dctx = from its 16-bit copy", 4, outs, names, bytes);
    for (int o = 0; o < 4; o++) be->free(be, out[o]);
}

/* The fused op (rel_flash_attention_*, kernels/rel_flash_attention.cu) against the CPU's unfused
 * rel_attention, within the unfused op's bounds (derived from the CPU's probabilities): the fused op
 * computes the same sums in another order (tiles, an online softmax, P recomputed from lse, D from
 * dC·ctx). The CPU's own fused op (cpu_rel_flash_attention.c) must meet the same bounds, and the CUDA
 * op run twice give the same bits: the second run with one warp per block (the kernels' blocks hold 1
 * to 4 warps, each computing its tile as a block of its own would), and that run and the CPU's with the
 * 16-bit outputs (ctx16, dqkv16, dr16), which must be to_half of the fp32 outputs and leave those
 * unchanged. */
static void rel_flash_case(hs_conf *t, rel_case c) {
    char what[200];
    const rel_sizes z = rel_sizes_of(c);
    const size_t nqkv = z.nqkv, nr = z.nr, nb = z.nb, nctx = z.nctx, nprobs = z.nprobs, nlse = z.nlse;
    const uint64_t key = REL_FLASH_KEY;
    const int64_t first_sample = REL_FLASH_FIRST_SAMPLE;
    const float scale = z.scale;
    float *qkv = hs_conf_rand(t, nqkv, -2, 2), *r = hs_conf_rand(t, nr, -1, 1);
    float *rwb = hs_conf_rand(t, nb, -0.5f, 0.5f), *rrb = hs_conf_rand(t, nb, -0.5f, 0.5f);
    float *dctx = hs_conf_rand(t, nctx, -1, 1), *gw = hs_conf_rand(t, nb, -1, 1), *gr = hs_conf_rand(t, nb, -1, 1);
    float *junk = hs_conf_rand(t, nqkv > nprobs ? nqkv : nprobs, -1, 1);
    hs_conf_pair d_qkv = hs_conf_pair_of(t, qkv, nqkv * 4), d_r = hs_conf_pair_of(t, r, nr * 4),
                 d_rwb = hs_conf_pair_of(t, rwb, nb * 4), d_rrb = hs_conf_pair_of(t, rrb, nb * 4),
                 d_dctx = hs_conf_pair_of(t, dctx, nctx * 4);
    /* .cpu: the CPU's unfused op; .cuda: the fused CUDA op */
    hs_conf_pair d_ctx = hs_conf_pair_of(t, junk, nctx * 4), d_dqkv = hs_conf_pair_of(t, junk, nqkv * 4),
                 d_dr = hs_conf_pair_of(t, junk, nr * 4), d_gw = hs_conf_pair_of(t, gw, nb * 4),
                 d_gr = hs_conf_pair_of(t, gr, nb * 4);
    float *probs = hs_conf_dev(t->cpu, junk, nprobs * 4);
    /* the CPU's fused op, and the second CUDA run */
    void *f_ctx = hs_conf_dev(t->cpu, junk, nctx * 4), *f_lse = hs_conf_dev(t->cpu, junk, nlse * 4),
         *f_dqkv = hs_conf_dev(t->cpu, junk, nqkv * 4), *f_dr = hs_conf_dev(t->cpu, junk, nr * 4),
         *f_gw = hs_conf_dev(t->cpu, gw, nb * 4), *f_gr = hs_conf_dev(t->cpu, gr, nb * 4);
    void *lse1 = hs_conf_dev(t->cuda, junk, nlse * 4), *ctx2 = hs_conf_dev(t->cuda, junk, nctx * 4),
         *lse2 = hs_conf_dev(t->cuda, NULL, nlse * 4), *dqkv2 = hs_conf_dev(t->cuda, junk, nqkv * 4),
         *dr2 = hs_conf_dev(t->cuda, NULL, nr * 4), *gw2 = hs_conf_dev(t->cuda, gw, nb * 4),
         *gr2 = hs_conf_dev(t->cuda, gr, nb * 4);

    t->cpu->rel_attention_forward(t->cpu, d_ctx.cpu, probs, d_qkv.cpu, d_r.cpu, d_rwb.cpu, d_rrb.cpu, c.batch,
                                  c.qlen, c.mlen, c.heads, c.d, c.lower_shift, scale, c.p, key, first_sample);
    t->cpu->rel_attention_backward(t->cpu, d_dqkv.cpu, d_dr.cpu, d_gw.cpu, d_gr.cpu, d_dctx.cpu, d_qkv.cpu, d_r.cpu,
                                   d_rwb.cpu, d_rrb.cpu, probs, c.batch, c.qlen, c.mlen, c.heads, c.d, c.lower_shift,
                                   scale, c.p, key, first_sample);
    const hs_backend *be[3] = {t->cpu, t->cuda, t->cuda};
    const size_t n16[3] = {nctx, nqkv, nr};
    uint16_t *h16[3][3] = {{NULL}}; /* [run][ctx16, dqkv16, dr16]: the CPU's fused run and the second CUDA run */
    for (int j = 0; j < 3; j++) {
        h16[0][j] = t->cpu->alloc(t->cpu, n16[j] * sizeof(uint16_t));
        h16[2][j] = t->cuda->alloc(t->cuda, n16[j] * sizeof(uint16_t));
    }
    const hs_conf_pair *ins[5] = {&d_qkv, &d_r, &d_rwb, &d_rrb, &d_dctx};
    void *ctx[3] = {f_ctx, d_ctx.cuda, ctx2}, *lse[3] = {f_lse, lse1, lse2}, *dqkv[3] = {f_dqkv, d_dqkv.cuda, dqkv2};
    void *dr[3] = {f_dr, d_dr.cuda, dr2}, *gwv[3] = {f_gw, d_gw.cuda, gw2}, *grv[3] = {f_gr, d_gr.cuda, gr2};
    for (int k = 0; k < 3; k++) {
        const float *in[5];
        for (int i = 0; i < 5; i++) in[i] = k == 0 ? ins[i]->cpu : ins[i]->cuda;
        hs_cuda_rel_flash_max_warps(k == 2 ? 1 : 0);
        be[k]->rel_flash_attention_forward(be[k], ctx[k], lse[k], in[0], in[1], in[2], in[3], c.batch, c.qlen,
                                           c.mlen, c.heads, c.d, c.lower_shift, scale, c.p, key, first_sample,
                                           h16[k][0]);
        be[k]->rel_flash_attention_backward(be[k], dqkv[k], dr[k], gwv[k], grv[k], in[4], in[0], in[1], in[2], in[3],
                                            ctx[k], lse[k], c.batch, c.qlen, c.mlen, c.heads, c.d, c.lower_shift,
                                            scale, c.p, key, first_sample, h16[k][1], h16[k][2]);
    }
    {
        const float *in[5];
        for (int i = 0; i < 5; i++) in[i] = ins[i]->cuda;
        void *const ref[4] = {dqkv[1], dr[1], gwv[1], grv[1]};
        rel_flash_dctx16_same(t, c, in, ctx[1], lse[1], ref, junk, gw, gr);
    }
    for (int k = 0; k < 3; k += 2) { /* the CPU's fused op, and CUDA with one warp per block as above */
        const float *in[5];
        for (int i = 0; i < 5; i++) in[i] = k == 0 ? ins[i]->cpu : ins[i]->cuda;
        hs_cuda_rel_flash_max_warps(k == 2 ? 1 : 0);
        rel_flash_only16(t, be[k], c, in, h16[k][0], lse[k], junk, gw, gr);
    }
    hs_cuda_rel_flash_max_warps(0);
    { /* the launch's own warps per block */
        const float *in[5];
        for (int i = 0; i < 5; i++) in[i] = ins[i]->cuda;
        rel_flash_inputs16(t, t->cuda, c, in, junk, gw, gr);
    }
    for (int k = 0; k < 3; k += 2) {
        void *outs16[3] = {ctx[k], dqkv[k], dr[k]};
        static const char *n16s[3] = {"ctx16", "dqkv16", "dr16"};
        for (int j = 0; j < 3; j++) {
            snprintf(what, sizeof what, "%s fused %s b=%d qlen=%d mlen=%d heads=%d d=%d", k ? "CUDA" : "CPU", n16s[j],
                     c.batch, c.qlen, c.mlen, c.heads, c.d);
            twin_bits(t, be[k], what, outs16[j], h16[k][j], n16[j]);
            be[k]->free(be[k], h16[k][j]);
        }
    }
    hs_cuda_rel_flash_max_warps(0);

    float *probs_cpu = hs_conf_fetch(t->cpu, probs, nprobs * 4);
    rel_bounds bd;
    HS_ALLOC(bd.probs, nprobs), HS_ALLOC(bd.ctx, nctx), HS_ALLOC(bd.dqkv, nqkv), HS_ALLOC(bd.dr, nr),
        HS_ALLOC(bd.dgw, nb), HS_ALLOC(bd.dgr, nb);
    rel_attention_bounds(t, &bd, qkv, r, rwb, rrb, dctx, probs_cpu, gw, gr, c.batch, c.qlen, c.mlen, c.heads, c.d,
                         c.lower_shift, scale, c.p);
    const double *bounds[5] = {bd.ctx, bd.dqkv, bd.dr, bd.dgw, bd.dgr};
    const char *names[5] = {"ctx", "dqkv", "dr", "dr_w_bias", "dr_r_bias"};
    const hs_conf_pair outs[5] = {d_ctx, d_dqkv, d_dr, d_gw, d_gr};
    void *cpu_fused[5] = {f_ctx, f_dqkv, f_dr, f_gw, f_gr}, *seconds[5] = {ctx2, dqkv2, dr2, gw2, gr2};
    const size_t counts[5] = {nctx, nqkv, nr, nb, nb};
    for (int o = 0; o < 5; o++) {
        snprintf(what, sizeof what, "fused %s b=%d qlen=%d mlen=%d heads=%d d=%d lower_shift=%d p=%g", names[o],
                 c.batch, c.qlen, c.mlen, c.heads, c.d, c.lower_shift, (double)c.p);
        hs_conf_check_bound(t, what, outs[o].cpu, outs[o].cuda, counts[o], bounds[o]);
        hs_conf_same_bits(t, what, outs[o].cuda, seconds[o], counts[o] * 4);
        snprintf(what, sizeof what, "CPU fused %s b=%d qlen=%d mlen=%d heads=%d d=%d lower_shift=%d p=%g", names[o],
                 c.batch, c.qlen, c.mlen, c.heads, c.d, c.lower_shift, (double)c.p);
        void *up = hs_conf_dev(t->cuda, cpu_fused[o], counts[o] * 4); /* CPU memory is host memory */
        hs_conf_check_bound(t, what, outs[o].cpu, up, counts[o], bounds[o]);
        t->cuda->free(t->cuda, up);
    }
    snprintf(what, sizeof what, "fused lse b=%d qlen=%d mlen=%d", c.batch, c.qlen, c.mlen);
    hs_conf_same_bits(t, what, lse1, lse2, nlse * 4);

    hs_conf_pair_free(t, d_qkv), hs_conf_pair_free(t, d_r), hs_conf_pair_free(t, d_rwb), hs_conf_pair_free(t, d_rrb),
        hs_conf_pair_free(t, d_dctx);
    hs_conf_pair_free(t, d_ctx), hs_conf_pair_free(t, d_dqkv), hs_conf_pair_free(t, d_dr), hs_conf_pair_free(t, d_gw),
        hs_conf_pair_free(t, d_gr);
    t->cpu->free(t->cpu, probs), t->cpu->free(t->cpu, f_lse);
    for (int o = 0; o < 5; o++) t->cpu->free(t->cpu, cpu_fused[o]), t->cuda->free(t->cuda, seconds[o]);
    t->cuda->free(t->cuda, lse1), t->cuda->free(t->cuda, lse2);
    free(probs_cpu), free(bd.probs), free(bd.ctx), free(bd.dqkv), free(bd.dr), free(bd.dgw), free(bd.dgr);
    free(qkv), free(r), free(rwb), free(rrb), free(dctx), free(gw), free(gr), free(junk);
}

void hs_conf_group_rel_attention(hs_conf *t) {
    static const rel_case cases[] = {
        /* batch qlen mlen heads d lower_shift p */
        {2, 1, 0, 2, 8, 0, 0.0f},    /* one query, no memory */
        {2, 1, 5, 3, 7, 0, 0.1f},    /* one query after memory, odd head size, dropout */
        {3, 9, 0, 2, 16, 0, 0.0f},   /* no memory */
        {2, 8, 8, 2, 8, 0, 0.0f},    /* memory as long as the segment */
        {2, 5, 17, 4, 5, 0, 0.0f},   /* memory longer than the segment, more heads than sequences */
        {1, 33, 20, 2, 16, 0, 0.1f}, /* rows longer than a warp, dropout */
        {2, 12, 6, 2, 9, 5, 0.0f},   /* same_length */
        {4, 7, 7, 1, 8, 3, 0.2f},    /* same_length with dropout, more sequences than heads */
        {2, 6, 0, 3, 3, 2, 0.5f},    /* same_length without memory, heavy dropout */
    };
    hs_conf_op(t, "rel_attention_forward/backward");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) rel_attention_case(t, cases[i]);
    /* the fused op: qlen 1, 7, 33, 129, 512 (one query, under a tile, a tile and a row over, many
     * tiles, a long segment), memory from none to qlen, same_length on and off, head sizes 8..128
     * (padded to 16 and not; above 64 the blocks' shared memory passes 48 KiB), 1 to 9 sequences (dr
     * sums them in groups, 2 a group at 9) */
    static const rel_case fused[] = {
        /* batch qlen mlen heads d lower_shift p */
        {2, 1, 0, 2, 8, 0, 0.0f},     {2, 1, 1, 3, 12, 0, 0.1f},   {2, 7, 0, 2, 16, 0, 0.0f},
        {2, 7, 4, 2, 8, 3, 0.1f},     {3, 7, 7, 1, 24, 0, 0.1f},   {1, 33, 0, 2, 32, 0, 0.1f},
        {2, 33, 17, 2, 16, 9, 0.0f},  {1, 33, 33, 1, 64, 0, 0.0f}, {1, 33, 20, 2, 40, 12, 0.1f},
        {1, 129, 0, 1, 64, 0, 0.1f},  {1, 129, 64, 2, 16, 20, 0.0f}, {2, 129, 129, 1, 8, 0, 0.0f},
        {2, 40, 24, 2, 128, 0, 0.1f}, {1, 70, 30, 1, 100, 21, 0.0f}, {1, 512, 0, 1, 16, 0, 0.1f},
        {1, 512, 512, 1, 16, 0, 0.0f}, {9, 20, 12, 1, 8, 4, 0.1f},
    };
    hs_conf_op(t, "rel_flash_attention_forward/backward");
    for (size_t i = 0; i < sizeof fused / sizeof fused[0]; i++) rel_flash_case(t, fused[i]);
}
