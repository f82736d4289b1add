/* Gradient check of Transformer-XL's relative-position attention (rel_attention_forward/backward,
 * through the layer wrappers of src/nn/layers.h) on the CPU backend, the way a user would verify the
 * op before training with it: every input (qkv including the memory rows' k and v, r, r_w_bias,
 * r_r_bias) against central finite differences of the forward pass (tests/grad/fd_check.h), with and
 * without memory, with and without the same_length mask, and with attention dropout on (the dropout
 * mask depends only on the key and the counters, so the forward passes of the differences and the
 * backward pass must all use the same one).
 *
 * Inputs are U(-1, 1) scaled so no probability saturates; at ε = 1e-2 the O(ε²) error of the softmax
 * is ≲ 1e-4 relative, far inside fd_check.h's bound, while a wrong shift, mask or head offset fails by
 * orders of magnitude. Also checked: masked probabilities are exactly 0, rows sum to 1 (no dropout),
 * the memory rows' q gradient is exactly 0, dqkv/dr are overwritten, the bias gradients accumulate,
 * and results are bit-identical with 1 and 3 OpenMP threads. The same for the fused op
 * (rel_flash_attention_forward/backward: lse kept instead of the probabilities). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend/backend.h"
#include "math/hs_math.h"
#include "math/rel_attention.h"
#include "nn/layers.h"
#include "util/check.h"

#include "fd_check.h"

#define TEST_SEED 20261124ULL

typedef struct rel_case {
    int batch, qlen, mlen, heads, head_dim, lower_shift;
    float p;
} rel_case;

/* One case's tensors (CPU device memory is host memory). */
typedef struct rel_state {
    const hs_backend *be;
    rel_case c;
    int klen, H;
    float scale;
    uint64_t key;
    float *qkv, *r, *rwb, *rrb, *ctx, *probs, *proj; /* proj: the fixed projection of ctx */
    int fused; /* the fused op: probs holds lse [b, n, qlen] */
} rel_state;

static size_t n_qkv(const rel_state *s) { return (size_t)s->c.batch * s->klen * 3 * s->H; }
static size_t n_r(const rel_state *s) { return (size_t)s->klen * s->H; }
static size_t n_ctx(const rel_state *s) { return (size_t)s->c.batch * s->c.qlen * s->H; }
static size_t n_probs(const rel_state *s) { return (size_t)s->c.batch * s->c.heads * s->c.qlen * s->klen; }

static void forward(rel_state *s) {
    if (s->fused)
        hs_rel_flash_attention_forward(s->be, s->ctx, s->probs, s->qkv, s->r, s->rwb, s->rrb, s->c.batch, s->c.qlen,
                                       s->c.mlen, s->c.heads, s->c.head_dim, s->c.lower_shift, s->scale, s->c.p, s->key,
                                       5, NULL);
    else
        hs_rel_attention_forward(s->be, s->ctx, s->probs, s->qkv, s->r, s->rwb, s->rrb, s->c.batch, s->c.qlen,
                                 s->c.mlen, s->c.heads, s->c.head_dim, s->c.lower_shift, s->scale, s->c.p, s->key, 5);
}

static void backward(const rel_state *s, float *dqkv, float *dr, float *dwb, float *drb) {
    const rel_case c = s->c;
    if (s->fused)
        hs_rel_flash_attention_backward(s->be, dqkv, dr, dwb, drb, s->proj, s->qkv, s->r, s->rwb, s->rrb, s->ctx,
                                        s->probs, c.batch, c.qlen, c.mlen, c.heads, c.head_dim, c.lower_shift, s->scale,
                                        c.p, s->key, 5, NULL, NULL);
    else
        hs_rel_attention_backward(s->be, dqkv, dr, dwb, drb, s->proj, s->qkv, s->r, s->rwb, s->rrb, s->probs, c.batch,
                                  c.qlen, c.mlen, c.heads, c.head_dim, c.lower_shift, s->scale, c.p, s->key, 5);
}

static double rel_loss(void *state) {
    rel_state *s = state;
    forward(s);
    return fd_project(s->ctx, s->proj, n_ctx(s));
}

/* Probabilities: exactly 0 outside [lo, hi] of each row; rows sum to 1 without dropout. */
static int check_probs(const rel_state *s) {
    int bad = 0;
    if (s->fused) return 0; /* no probabilities */
    for (int u = 0; u < s->c.batch * s->c.heads; u++)
        for (int i = 0; i < s->c.qlen; i++) {
            const float *row = s->probs + ((size_t)u * s->c.qlen + i) * s->klen;
            const int lo = hs_rel_key_lo(i, s->c.lower_shift), hi = hs_rel_key_hi(i, s->c.mlen);
            double sum = 0.0;
            for (int j = 0; j < s->klen; j++) {
                if ((j < lo || j > hi) && row[j] != 0.0f) bad++;
                sum += fabsf(row[j]);
            }
            if (s->c.p <= 0.0f && fabs(sum - 1.0) > 1e-5) bad++;
        }
    if (bad) fprintf(stderr, "  probabilities: %d rows/entries violate the mask or do not sum to 1\n", bad);
    return bad;
}

static int run_case(const hs_backend *be, rel_case c, int fused) {
    rel_state s = {.be = be, .c = c, .klen = c.mlen + c.qlen, .H = c.heads * c.head_dim,
                   .scale = 1.0f / sqrtf((float)c.head_dim), .key = 0xfeedULL + (uint64_t)c.mlen, .fused = fused};
    fprintf(stderr, "%s: batch %d qlen %d mlen %d heads %d head_dim %d lower_shift %d p %g\n",
            fused ? "fused" : "unfused", c.batch, c.qlen, c.mlen, c.heads, c.head_dim, c.lower_shift, (double)c.p);
    const size_t nd = (size_t)c.heads * c.head_dim;
    HS_ALLOC(s.qkv, n_qkv(&s));
    HS_ALLOC(s.r, n_r(&s));
    HS_ALLOC(s.rwb, nd);
    HS_ALLOC(s.rrb, nd);
    HS_ALLOC(s.ctx, n_ctx(&s));
    HS_ALLOC(s.probs, n_probs(&s));
    HS_ALLOC(s.proj, n_ctx(&s));
    fd_fill_uniform(s.qkv, n_qkv(&s), -1.0f, 1.0f, TEST_SEED + 1);
    fd_fill_uniform(s.r, n_r(&s), -1.0f, 1.0f, TEST_SEED + 2);
    fd_fill_uniform(s.rwb, nd, -0.5f, 0.5f, TEST_SEED + 3);
    fd_fill_uniform(s.rrb, nd, -0.5f, 0.5f, TEST_SEED + 4);
    fd_fill_uniform(s.proj, n_ctx(&s), -1.0f, 1.0f, TEST_SEED + 5);

    float *dqkv, *dr, *dwb, *drb;
    HS_ALLOC(dqkv, n_qkv(&s));
    HS_ALLOC(dr, n_r(&s));
    HS_ALLOC(dwb, nd);
    HS_ALLOC(drb, nd);
    /* overwritten outputs start as garbage, accumulated ones at a known offset */
    for (size_t i = 0; i < n_qkv(&s); i++) dqkv[i] = 1e3f;
    for (size_t i = 0; i < n_r(&s); i++) dr[i] = -1e3f;
    const float acc0 = 0.25f;
    for (size_t i = 0; i < nd; i++) dwb[i] = drb[i] = acc0;

    forward(&s);
    int bad = check_probs(&s);
    backward(&s, dqkv, dr, dwb, drb);
    for (size_t i = 0; i < nd; i++) dwb[i] -= acc0, drb[i] -= acc0;
    /* the memory rows' q columns: exactly 0 */
    for (int b = 0; b < c.batch; b++)
        for (int t = 0; t < c.mlen; t++)
            for (int col = 0; col < s.H; col++)
                if (dqkv[((size_t)b * s.klen + t) * 3 * s.H + col] != 0.0f) bad++;
    if (bad) fprintf(stderr, "  memory rows' q gradient not 0 or probabilities wrong\n");

    fd_case fc = {rel_loss, &s, 1e-2f};
    bad += fd_check_gradient("dqkv", &fc, s.qkv, dqkv, n_qkv(&s));
    bad += fd_check_gradient("dr", &fc, s.r, dr, n_r(&s));
    bad += fd_check_gradient("dr_w_bias", &fc, s.rwb, dwb, nd);
    bad += fd_check_gradient("dr_r_bias", &fc, s.rrb, drb, nd);

#ifdef _OPENMP
    /* bit-identical for any thread count */
    {
        float *out[2][4];
        for (int v = 0; v < 2; v++) {
            omp_set_num_threads(v == 0 ? 1 : 3);
            HS_ALLOC(out[v][0], n_ctx(&s) + n_probs(&s));
            HS_ALLOC(out[v][1], n_qkv(&s));
            HS_ALLOC(out[v][2], n_r(&s));
            HS_ALLOC(out[v][3], 2 * nd);
            forward(&s);
            memcpy(out[v][0], s.ctx, n_ctx(&s) * sizeof(float));
            memcpy(out[v][0] + n_ctx(&s), s.probs, n_probs(&s) * sizeof(float));
            backward(&s, out[v][1], out[v][2], out[v][3], out[v][3] + nd);
        }
        const size_t sizes[4] = {n_ctx(&s) + n_probs(&s), n_qkv(&s), n_r(&s), 2 * nd};
        for (int k = 0; k < 4; k++) {
            if (memcmp(out[0][k], out[1][k], sizes[k] * sizeof(float))) {
                fprintf(stderr, "  output %d differs between 1 and 3 OpenMP threads\n", k);
                bad++;
            }
            free(out[0][k]), free(out[1][k]);
        }
        omp_set_num_threads(1);
    }
#endif
    free(s.qkv), free(s.r), free(s.rwb), free(s.rrb), free(s.ctx), free(s.probs), free(s.proj);
    free(dqkv), free(dr), free(dwb), free(drb);
    return bad;
}

int main(void) {
    const hs_backend *be = hs_backend_cpu();
    static const rel_case cases[] = {
        /* batch qlen mlen heads head_dim lower_shift p */
        {2, 4, 0, 2, 3, 0, 0.0f},  /* no memory */
        {2, 3, 2, 2, 3, 0, 0.0f},  /* memory shorter than the segment */
        {1, 2, 5, 3, 2, 0, 0.0f},  /* memory longer than the segment */
        {2, 4, 3, 2, 3, 2, 0.0f},  /* same_length: keys j > i - 2 */
        {1, 3, 0, 1, 4, 1, 0.0f},  /* same_length without memory: each query sees itself only */
        {1, 1, 3, 2, 5, 0, 0.0f},  /* one query */
        {2, 3, 2, 2, 3, 0, 0.3f},  /* attention dropout */
        {1, 4, 2, 2, 3, 3, 0.25f}, /* dropout and same_length */
    };
    int bad = 0;
    for (int fused = 0; fused <= 1; fused++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) bad += run_case(be, cases[i], fused);
    if (bad) {
        fprintf(stderr, "FAILED: %d mismatches\n", bad);
        return 1;
    }
    fprintf(stderr, "all relative-attention gradients match finite differences\n");
    return 0;
}
