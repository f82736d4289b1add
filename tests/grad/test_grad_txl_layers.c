/* Gradient checks of Transformer-XL's layers: the adaptive input embedding, the projected adaptive
 * log-softmax (head and every tail cluster hit) and one whole decoder layer with segment memory
 * (relative attention, post-LN and pre-LN), each backward pass against central finite differences of
 * its forward pass, the way a user would verify a layer before training with it.
 *
 * The shared checker is fd_check.h: the embedding is reduced by a fixed random projection L = Σ r ⊙ y;
 * the softmax and the decoder layer by their own scalar, the NLL sum. Accepted:
 * |analytic - numeric| ≤ 2e-3·max(|a|,|n|) + 2e-4·max(1, largest |analytic| of the tensor). The float32
 * forward adds ~1e-7 relative noise per output (≲ 1e-5 on the quotients at ε = 1e-2); the O(ε²)
 * truncation error of softmax and LayerNorm is ≲ 1e-4 relative for the O(1) inputs used here. A wrong
 * backward (a missing cluster, the tail's head column taken from the wrong end, a projection transposed,
 * the memory rows given a gradient) fails by orders of magnitude more. */
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
#include "models/txl.h"
#include "nn/adaptive.h"
#include "nn/layers.h"
#include "nn/step_ctx_stats.h"
#include "util/check.h"

#include "fd_check.h"

#define TEST_SEED 20261124ULL

static const hs_backend *be;

static float *buf(size_t n) { return be->alloc(be, (n ? n : 1) * sizeof(float)); }

static void fill_uniform(float *v, size_t n, float lo, float hi, uint64_t stream) {
    fd_fill_uniform(v, n, lo, hi, hs_rng_key(TEST_SEED, 11, stream));
}

/* The vocabulary of the adaptive tests: 12 words, clusters [0,4) [4,8) [8,12); ids hit every cluster,
 * some twice. */
enum { AD_TOKENS = 12, AD_N = 10 };
static const int ad_cutoffs[2] = {4, 8};
static const int32_t ad_ids[AD_N] = {0, 5, 9, 3, 11, 5, 2, 8, 7, 0};

/* Parameters of one adaptive case: div_val = 1 uses table[0] (all rows) and proj[0]. */
typedef struct adaptive_case {
    hs_adaptive_dims d;
    hs_adaptive_plan plan;
    float *table[3], *proj[3], *dtable[3], *dproj[3];
    size_t table_n[3], proj_n[3];
    int tables;
} adaptive_case;

static void adaptive_setup(adaptive_case *c, int d_embed, int d_proj, int div_val) {
    memset(c, 0, sizeof *c);
    c->d = hs_adaptive_dims_make(AD_TOKENS, ad_cutoffs, 2, d_embed, d_proj, div_val);
    hs_adaptive_plan_init(be, &c->plan, AD_N);
    hs_adaptive_plan_stage(be, &c->d, &c->plan, ad_ids, AD_N, AD_N, "token id");
    c->tables = div_val == 1 ? 1 : 3;
    for (int i = 0; i < c->tables; i++) {
        const int rows = div_val == 1 ? AD_TOKENS : hs_adaptive_cluster_size(&c->d, i);
        const int dim = hs_adaptive_cluster_dim(&c->d, i);
        c->table_n[i] = (size_t)rows * (size_t)dim;
        c->table[i] = buf(c->table_n[i]), c->dtable[i] = buf(c->table_n[i]);
        fill_uniform(c->table[i], c->table_n[i], -1, 1, 100 + (uint64_t)i);
        if (hs_adaptive_has_proj(&c->d, i)) {
            c->proj_n[i] = (size_t)d_proj * (size_t)dim;
            c->proj[i] = buf(c->proj_n[i]), c->dproj[i] = buf(c->proj_n[i]);
            fill_uniform(c->proj[i], c->proj_n[i], -0.5f, 0.5f, 200 + (uint64_t)i);
        }
    }
}

static void adaptive_teardown(adaptive_case *c) {
    for (int i = 0; i < 3; i++) {
        float *b[] = {c->table[i], c->dtable[i], c->proj[i], c->dproj[i]};
        for (int k = 0; k < 4; k++)
            if (b[k]) be->free(be, b[k]);
    }
    hs_adaptive_plan_free(be, &c->plan);
}

/* ---- adaptive input embedding ------------------------------------------------------------------------ */

typedef struct emb_state {
    adaptive_case *c;
    hs_adaptive_emb_state st;
    float *y, *r;
} emb_state;

static hs_adaptive_emb_weights emb_w(const adaptive_case *c) {
    hs_adaptive_emb_weights w;
    memset(&w, 0, sizeof w);
    for (int i = 0; i < 3; i++) w.table[i] = c->table[i], w.proj[i] = c->proj[i];
    return w;
}

static double emb_loss(void *p) {
    emb_state *s = p;
    const hs_adaptive_emb_weights w = emb_w(s->c);
    hs_adaptive_embedding_forward(be, &s->c->d, &w, &s->c->plan, &s->st, s->y);
    return fd_project(s->y, s->r, (size_t)AD_N * (size_t)s->c->d.d_proj);
}

static void check_embedding(int d_embed, int d_proj, int div_val) {
    adaptive_case c;
    adaptive_setup(&c, d_embed, d_proj, div_val);
    emb_state s = {.c = &c};
    s.y = buf((size_t)AD_N * d_proj), s.r = buf((size_t)AD_N * d_proj);
    fill_uniform(s.r, (size_t)AD_N * d_proj, -1, 1, 7);
    emb_loss(&s);
    const hs_adaptive_emb_weights w = emb_w(&c);
    hs_adaptive_emb_grads g;
    memset(&g, 0, sizeof g);
    for (int i = 0; i < 3; i++) g.table[i] = c.dtable[i], g.proj[i] = c.dproj[i];
    hs_adaptive_embedding_backward(be, &c.d, &w, &g, &c.plan, &s.st, s.r);
    fd_case fc = {emb_loss, &s, 1e-2f};
    int bad = 0;
    char what[64];
    for (int i = 0; i < c.tables; i++) {
        snprintf(what, sizeof what, "emb table %d (div_val %d)", i, div_val);
        bad += fd_check_gradient(what, &fc, c.table[i], c.dtable[i], c.table_n[i]);
        if (c.proj[i]) {
            snprintf(what, sizeof what, "emb proj %d (div_val %d)", i, div_val);
            bad += fd_check_gradient(what, &fc, c.proj[i], c.dproj[i], c.proj_n[i]);
        }
    }
    assert_int_equal(bad, 0);
    /* an id no token uses keeps a zero gradient (div_val 1: word 1 is never used) */
    if (div_val == 1)
        for (int k = 0; k < d_embed; k++) assert_true(c.dtable[0][1 * d_embed + k] == 0.0f);
    hs_adaptive_emb_state_free(be, &s.st);
    be->free(be, s.y), be->free(be, s.r);
    adaptive_teardown(&c);
}

static void test_embedding_div1(void **u) { (void)u; check_embedding(6, 6, 1); }
static void test_embedding_div1_proj(void **u) { (void)u; check_embedding(8, 6, 1); }
static void test_embedding_div2(void **u) { (void)u; check_embedding(8, 6, 2); }

/* ---- projected adaptive log-softmax ------------------------------------------------------------------ */

typedef struct sm_state {
    adaptive_case *c;
    hs_adaptive_softmax_state st;
    float *hidden, *bias[3], *dbias[3], *cw, *cb, *dcw, *dcb, *dhidden;
    size_t bias_n[3];
    double *stats; /* [6]: head (3), tail (3) */
} sm_state;

static hs_adaptive_softmax_weights sm_w(const sm_state *s) {
    const adaptive_case *c = s->c;
    hs_adaptive_softmax_weights w;
    memset(&w, 0, sizeof w);
    for (int i = 0; i < 3; i++) {
        if (c->d.div_val == 1) {
            w.weight[i] = c->table[0] + (size_t)c->d.ends[i] * (size_t)c->d.d_embed;
            w.bias[i] = s->bias[0] + c->d.ends[i];
            w.proj[i] = c->proj[0];
        } else {
            w.weight[i] = c->table[i], w.bias[i] = s->bias[i], w.proj[i] = c->proj[i];
        }
    }
    w.cluster_weight = s->cw, w.cluster_bias = s->cb;
    return w;
}

static double sm_loss(void *p) {
    sm_state *s = p;
    const hs_adaptive_softmax_weights w = sm_w(s);
    memset(s->stats, 0, 6 * sizeof(double));
    hs_adaptive_softmax_forward(be, &s->c->d, &w, &s->c->plan, &s->st, s->hidden, s->stats, s->stats + 3);
    return s->stats[0] + s->stats[3];
}

static void check_softmax(int d_embed, int d_proj, int div_val) {
    adaptive_case c;
    adaptive_setup(&c, d_embed, d_proj, div_val);
    sm_state s = {.c = &c};
    s.hidden = buf((size_t)AD_N * d_proj), s.dhidden = buf((size_t)AD_N * d_proj);
    fill_uniform(s.hidden, (size_t)AD_N * d_proj, -1, 1, 8);
    for (int i = 0; i < c.tables; i++) {
        s.bias_n[i] = div_val == 1 ? AD_TOKENS : (size_t)hs_adaptive_cluster_size(&c.d, i);
        s.bias[i] = buf(s.bias_n[i]), s.dbias[i] = buf(s.bias_n[i]);
        fill_uniform(s.bias[i], s.bias_n[i], -0.5f, 0.5f, 300 + (uint64_t)i);
    }
    s.cw = buf(2 * (size_t)d_embed), s.dcw = buf(2 * (size_t)d_embed), s.cb = buf(2), s.dcb = buf(2);
    fill_uniform(s.cw, 2 * (size_t)d_embed, -1, 1, 400);
    fill_uniform(s.cb, 2, -0.5f, 0.5f, 401);
    s.stats = be->alloc(be, 6 * sizeof(double));
    sm_loss(&s);
    assert_true(s.stats[1] == AD_N);
    assert_true(s.stats[4] == 6); /* the tokens of clusters 1 and 2: 5, 9, 11, 5, 8, 7 */
    hs_adaptive_softmax_grads g;
    memset(&g, 0, sizeof g);
    for (int i = 0; i < 3; i++) {
        if (div_val == 1) {
            g.weight[i] = c.dtable[0] + (size_t)c.d.ends[i] * (size_t)d_embed;
            g.bias[i] = s.dbias[0] + c.d.ends[i];
            g.proj[i] = c.dproj[0];
        } else {
            g.weight[i] = c.dtable[i], g.bias[i] = s.dbias[i], g.proj[i] = c.dproj[i];
        }
    }
    g.cluster_weight = s.dcw, g.cluster_bias = s.dcb;
    const hs_adaptive_softmax_weights w = sm_w(&s);
    hs_adaptive_softmax_backward(be, &c.d, &w, &g, &c.plan, &s.st, s.hidden, 1.0f, s.dhidden, 0);
    fd_case fc = {sm_loss, &s, 1e-2f};
    char what[64];
    int bad = fd_check_gradient("softmax dhidden", &fc, s.hidden, s.dhidden, (size_t)AD_N * d_proj);
    for (int i = 0; i < c.tables; i++) {
        snprintf(what, sizeof what, "softmax weight %d (div_val %d)", i, div_val);
        bad += fd_check_gradient(what, &fc, c.table[i], c.dtable[i], c.table_n[i]);
        snprintf(what, sizeof what, "softmax bias %d", i);
        bad += fd_check_gradient(what, &fc, s.bias[i], s.dbias[i], s.bias_n[i]);
        if (c.proj[i]) {
            snprintf(what, sizeof what, "softmax proj %d", i);
            bad += fd_check_gradient(what, &fc, c.proj[i], c.dproj[i], c.proj_n[i]);
        }
    }
    bad += fd_check_gradient("softmax cluster_weight", &fc, s.cw, s.dcw, 2 * (size_t)d_embed);
    bad += fd_check_gradient("softmax cluster_bias", &fc, s.cb, s.dcb, 2);
    assert_int_equal(bad, 0);
    hs_adaptive_softmax_state_free(be, &s.st);
    for (int i = 0; i < 3; i++)
        if (s.bias[i]) be->free(be, s.bias[i]), be->free(be, s.dbias[i]);
    float *b[] = {s.hidden, s.dhidden, s.cw, s.dcw, s.cb, s.dcb};
    for (size_t i = 0; i < sizeof b / sizeof *b; i++) be->free(be, b[i]);
    be->free(be, s.stats);
    adaptive_teardown(&c);
}

static void test_softmax_div1(void **u) { (void)u; check_softmax(6, 6, 1); }
static void test_softmax_div1_proj(void **u) { (void)u; check_softmax(8, 6, 1); }
static void test_softmax_div2(void **u) { (void)u; check_softmax(8, 6, 2); }

/* ---- one decoder layer with memory (the whole one-layer model, second segment) ----------------------- */

enum { DL_B = 2, DL_Q = 3, DL_MEM = 2, DL_V = 10 };

typedef struct layer_state {
    hs_txl *m;
    hs_params params;
    hs_txl_memory *mem;
    float *saved_mem;
    int saved_mlen[DL_B];
    hs_txl_segment seg;
    double *stats;
    int32_t tokens[DL_B * (DL_Q + 1)];
} layer_state;

static void restore_memory(layer_state *s) {
    memcpy(s->mem->mem[0], s->saved_mem, (size_t)DL_B * DL_MEM * (size_t)s->mem->d_model * sizeof(float));
    memcpy(s->mem->mlen, s->saved_mlen, sizeof s->saved_mlen);
}

static double layer_loss(void *p) {
    layer_state *s = p;
    restore_memory(s);
    memset(s->stats, 0, HS_STATS_NDOUBLE * sizeof(double));
    hs_txl_evaluate(s->m, &s->seg, s->stats);
    return s->stats[HS_STAT_LOSS_SUM] + s->stats[HS_TXL_STAT_TAIL_NLL];
}

static void check_layer(int pre_lnorm, int same_length) {
    hs_txl_config cfg = {.n_token = DL_V, .n_layer = 1, .n_head = 2, .d_head = 4, .d_model = 8, .d_inner = 12,
                         .d_embed = 8, .tgt_len = DL_Q, .mem_len = DL_MEM, .clamp_len = -1, .eval_tgt_len = DL_Q,
                         .eval_mem_len = DL_MEM, .eval_clamp_len = -1, .pre_lnorm = pre_lnorm, .div_val = 1,
                         .tie_weight = 1, .tie_projs = 1, .batch_size = DL_B, .eval_batch_size = DL_B,
                         .init_std = 0.3, .proj_init_std = 0.3};
    layer_state s;
    memset(&s, 0, sizeof s);
    s.m = hs_txl_create(&s.params, &cfg, DL_B, DL_Q, DL_MEM);
    hs_params_allocate(&s.params, be);
    hs_txl_setup(s.m);
    hs_txl_init_params(s.m, 5);
    /* LayerNorm weights and biases off 1/0 so they matter */
    for (int t = 0; t < s.params.count; t++)
        if (strstr(s.params.tensors[t].name, "bias") || strstr(s.params.tensors[t].name, "layer_norm"))
            fill_uniform(hs_param_data(&s.params, t), s.params.tensors[t].numel,
                         strstr(s.params.tensors[t].name, "layer_norm.weight") ? 0.6f : -0.4f,
                         strstr(s.params.tensors[t].name, "layer_norm.weight") ? 1.4f : 0.4f, 500 + (uint64_t)t);
    /* The ReLU inputs u = x·W1ᵀ + b1 are kept >= ~0.1 away from 0 (small W1, |b1| in [0.5, 1]), so no
     * ε-step crosses the kink (a crossing bends the difference quotient, not the gradient). */
    {
        const int w1 = hs_params_find(&s.params, "layers.0.pos_ff.CoreNet.0.weight");
        const int b1 = hs_params_find(&s.params, "layers.0.pos_ff.CoreNet.0.bias");
        fill_uniform(hs_param_data(&s.params, w1), s.params.tensors[w1].numel, -0.08f, 0.08f, 600);
        float *bias = hs_param_data(&s.params, b1);
        fill_uniform(bias, s.params.tensors[b1].numel, 0.5f, 1.0f, 601);
        for (size_t k = 0; k < s.params.tensors[b1].numel; k += 2) bias[k] = -bias[k];
    }
    s.mem = hs_txl_memory_create(be, 1, cfg.d_model, DL_B, DL_MEM);
    s.seg = (hs_txl_segment){.mem = s.mem, .col0 = 0, .clamp_len = -1, .same_length = same_length};
    s.stats = be->alloc(be, HS_STATS_NDOUBLE * sizeof(double));
    /* first segment fills the memory, the checked pass is the second */
    for (int i = 0; i < DL_B * (DL_Q + 1); i++) s.tokens[i] = (int32_t)((i * 7 + 3) % DL_V);
    hs_txl_stage_batch(s.m, s.tokens, DL_B, DL_Q);
    hs_txl_evaluate(s.m, &s.seg, s.stats);
    assert_int_equal(s.mem->mlen[0], DL_MEM);
    HS_ALLOC(s.saved_mem, (size_t)DL_B * DL_MEM * (size_t)cfg.d_model);
    memcpy(s.saved_mem, s.mem->mem[0], (size_t)DL_B * DL_MEM * (size_t)cfg.d_model * sizeof(float));
    memcpy(s.saved_mlen, s.mem->mlen, sizeof s.saved_mlen);
    for (int i = 0; i < DL_B * (DL_Q + 1); i++) s.tokens[i] = (int32_t)((i * 5 + 1) % DL_V);
    hs_txl_stage_batch(s.m, s.tokens, DL_B, DL_Q);

    const hs_step_ctx ctx = {.seed = 1, .update = 0, .training = 0, .loss_scale = {1.0, 0.0}};
    hs_params_zero_grad(&s.params);
    memset(s.stats, 0, HS_STATS_NDOUBLE * sizeof(double));
    hs_txl_forward_backward(s.m, &s.seg, 0, &ctx, s.stats);
    restore_memory(&s);
    fd_case fc = {layer_loss, &s, 1e-2f};
    int bad = 0;
    for (int t = 0; t < s.params.count; t++) {
        char what[160];
        snprintf(what, sizeof what, "%s%s", s.params.tensors[t].name, pre_lnorm ? " (pre-LN)" : "");
        bad += fd_check_gradient(what, &fc, hs_param_data(&s.params, t), hs_param_grad(&s.params, t),
                                 s.params.tensors[t].numel);
    }
    assert_int_equal(bad, 0);
    free(s.saved_mem);
    be->free(be, s.stats);
    hs_txl_memory_free(be, s.mem);
    hs_txl_free(s.m);
    hs_params_free(&s.params);
}

static void test_layer_post_ln(void **u) { (void)u; check_layer(0, 0); }
static void test_layer_pre_ln(void **u) { (void)u; check_layer(1, 0); }
static void test_layer_same_length(void **u) { (void)u; check_layer(0, 1); }

int main(void) {
    be = hs_backend_cpu();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedding_div1),  cmocka_unit_test(test_embedding_div1_proj),
        cmocka_unit_test(test_embedding_div2),  cmocka_unit_test(test_softmax_div1),
        cmocka_unit_test(test_softmax_div1_proj), cmocka_unit_test(test_softmax_div2),
        cmocka_unit_test(test_layer_post_ln),   cmocka_unit_test(test_layer_pre_ln),
        cmocka_unit_test(test_layer_same_length),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
