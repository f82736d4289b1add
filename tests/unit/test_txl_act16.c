/* A user trains Transformer-XL with precision = "bf16" or "fp16": each decoder layer keeps q|k|v, r,
 * the attention probabilities, the context and the FFN activation for the backward pass in 16 bits
 * (src/models/txl.c), the rest in fp32. Checked on the CPU backend, post-LN and pre-LN, adaptive
 * softmax, two segments so the second one attends to the memory:
 *   - the model allocates exactly the activation bytes counted here from the shapes, in every
 *     precision, and under bf16/fp16 fewer than with fp32 storage (HETSEQ_ACTIVATION_STORAGE=fp32);
 *   - the same segments (dropout on) with 16-bit and with fp32 storage under the same precision: the
 *     losses are identical (the forward does not change) and every parameter gradient agrees within
 *     the tolerance derived below, but not bit for bit (the rounded values do reach the backward).
 * Built twice: on the CPU, and on the emulated CUDA device (TXL_ACT16_DEVICE "cuda": the kernels of
 * kernels/lowp.cu convert, the CUDA backend computes). */
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
#include "models/txl.h"
#include "models/txl_config.h"
#include "nn/params.h"
#include "act16_check.h"

enum { LAYERS = 6, HEADS = 4, DH = 8, D = 32, DI = 64, TOKENS = 120, B = 2, Q = 6, MEM = 5, SEGMENTS = 2 };

typedef struct {
    hs_params params;
    hs_txl *model;
    hs_txl_memory *mem;
} model;

static hs_txl_config config(int pre_lnorm) {
    hs_txl_config c;
    memset(&c, 0, sizeof c);
    c.n_token = TOKENS;
    c.n_layer = LAYERS;
    c.n_head = HEADS;
    c.d_head = DH;
    c.d_model = D;
    c.d_inner = DI;
    c.d_embed = D;
    c.dropout = 0.1;
    c.dropatt = 0.1;
    c.tgt_len = c.eval_tgt_len = Q;
    c.mem_len = c.eval_mem_len = MEM;
    c.pre_lnorm = pre_lnorm;
    c.adaptive = 1;
    c.n_cutoffs = 2;
    c.cutoffs[0] = 40;
    c.cutoffs[1] = 80;
    c.div_val = 2;
    c.tie_weight = c.tie_projs = 1;
    c.batch_size = c.eval_batch_size = B;
    c.init_std = c.proj_init_std = 0.05;
    return c;
}

/* storage: "auto" (the default) or "fp32" (HETSEQ_ACTIVATION_STORAGE, read by hs_txl_setup) */
static void build(model *m, const hs_backend *be, const char *storage, int pre_lnorm) {
    const hs_txl_config c = config(pre_lnorm);
    memset(m, 0, sizeof *m);
    m->model = hs_txl_create(&m->params, &c, B, Q, MEM);
    hs_params_allocate(&m->params, be);
    setenv("HETSEQ_ACTIVATION_STORAGE", storage, 1);
    hs_txl_setup(m->model);
    unsetenv("HETSEQ_ACTIVATION_STORAGE");
    hs_txl_init_params(m->model, 1234);
    m->mem = hs_txl_memory_create(be, LAYERS, D, B, MEM);
}

static void destroy(model *m) {
    hs_txl_memory_free(m->params.be, m->mem);
    hs_txl_free(m->model);
    hs_params_free(&m->params);
}

/* The activation bytes of src/models/txl.c's buffers, counted from the shapes (T = B·Q rows, klen =
 * Q + MEM keys, K = B·klen rows of cat): the embedding, N+1 hidden states and the final dropout [T,D],
 * the positions and their dropout [klen,D]; per layer cat [K,D] (and LN(cat) pre-LN), the first
 * LayerNorm's statistics [2K], attn_sum [T,D], h1 and ff_sum (post-LN) or LN(h') (pre-LN) [T,D], the
 * second LayerNorm's statistics [2T]; and the five kept tensors (q|k|v [K,3nd], r [klen,nd], probs
 * [B,n,Q,klen], ctx [T,nd], u [T,I]) in fp32 per layer, or in 16 bits per layer plus ONE fp32 set. The
 * fused attention (attention = auto on the emulated CUDA device) keeps no probabilities but each
 * layer's row log-sum-exps [B,n,Q] in fp32. */
static size_t expected_bytes(int half, int pre_lnorm, int fused) {
    const size_t T = (size_t)B * Q, klen = Q + MEM, K = (size_t)B * klen, nd = (size_t)HEADS * DH;
    const size_t kept = K * 3 * nd + klen * nd + (fused ? 0 : (size_t)B * HEADS * Q * klen) + T * nd + T * DI;
    const size_t fp32_layer = K * D + (pre_lnorm ? K * D : 0) + 2 * K + T * D + 2 * T * D - (pre_lnorm ? T * D : 0) +
                              2 * T + (fused ? (size_t)B * HEADS * Q : 0);
    const size_t other = T * D + (LAYERS + 1) * T * D + T * D + 2 * klen * D;
    if (!half) return 4 * (other + LAYERS * (fp32_layer + kept));
    /* post-LN also keeps each layer's FFN input h1 [T,D] in 16 bits: the twin its products read */
    return 4 * (other + LAYERS * fp32_layer + kept) + 2 * LAYERS * (kept + (pre_lnorm ? 0 : T * D));
}

#ifndef TXL_ACT16_DEVICE
#define TXL_ACT16_DEVICE "cpu"
#endif

static const hs_backend *backend(int precision) { return act16_backend(TXL_ACT16_DEVICE, precision); }

static void test_activation_bytes(void **state) {
    (void)state;
    static const int precs[] = {HS_PRECISION_FP32, HS_PRECISION_TF32, HS_PRECISION_BF16, HS_PRECISION_FP16};
    for (int pre = 0; pre <= 1; pre++)
        for (size_t k = 0; k < sizeof precs / sizeof precs[0]; k++) {
            const hs_backend *be = backend(precs[k]);
            if (!be) continue; /* bf16 without oneDNN */
            const int half = precs[k] == HS_PRECISION_BF16 || precs[k] == HS_PRECISION_FP16;
            model m, f;
            build(&m, be, "auto", pre);
            build(&f, be, "fp32", pre);
            assert_int_equal(hs_txl_activations_16bit(m.model), half);
            assert_int_equal(hs_txl_activations_16bit(f.model), 0);
            const int fused = hs_txl_attention_fused(m.model);
            assert_int_equal(hs_txl_attention_fused(f.model), fused);
            assert_int_equal(hs_txl_activation_bytes(m.model), expected_bytes(half, pre, fused));
            assert_int_equal(hs_txl_activation_bytes(f.model), expected_bytes(0, pre, fused));
            if (half) {
                const double ratio = (double)expected_bytes(1, pre, fused) / (double)expected_bytes(0, pre, fused);
                printf("precision %d, pre_lnorm %d, fused attention %d: activations %zu bytes, fp32 storage %zu "
                       "(ratio %.3f)\n",
                       precs[k], pre, fused, expected_bytes(1, pre, fused), expected_bytes(0, pre, fused), ratio);
                assert_true(ratio < 0.85);
            }
            destroy(&m);
            destroy(&f);
        }
}

/* SEGMENTS training segments in a row (the memory carries over); gradients of the last one. */
static void run(model *m, double *stats) {
    const hs_backend *be = m->params.be;
    const hs_txl_config *c = hs_txl_get_config(m->model);
    const hs_txl_segment seg = {.mem = m->mem, .col0 = 0, .clamp_len = c->clamp_len, .same_length = c->same_length};
    double *dev = be->alloc(be, HS_STATS_NDOUBLE * sizeof(double));
    int32_t tokens[B * (Q + 1)];
    for (int k = 0; k < SEGMENTS; k++) {
        uint64_t x = 0x9e3779b97f4a7c15ULL + (uint64_t)k;
        for (int i = 0; i < B * (Q + 1); i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            tokens[i] = (int32_t)(x % TOKENS); /* every cluster */
        }
        hs_txl_stage_batch(m->model, tokens, B, Q);
        const hs_step_ctx ctx = {.seed = 7, .update = 3 + (uint64_t)k, .training = 1,
                                 .loss_scale = {1.0 / (B * Q), 0.0}};
        hs_params_zero_grad(&m->params);
        be->zero(be, dev, HS_STATS_NDOUBLE * sizeof(double));
        hs_txl_forward_backward(m->model, &seg, 100 * k, &ctx, dev);
    }
    be->download(be, stats, dev, HS_STATS_NDOUBLE * sizeof(double));
    be->free(be, dev);
}

/* 16-bit against fp32 storage in one precision. The gradients differ where the backward reads a kept
 * tensor outside a product: the softmax backward dS = P ⊙ (dP - Σ P·dP) with the rounded P, and the
 * query plus r_w_bias / r_r_bias, formed from the rounded q and rounded again as a product operand.
 * Each rounded value is within a relative 2^-p of the fp32 one (p = 8 bits bf16, 11 fp16) and enters
 * the gradients linearly with O(1) factors, amplified a few times by the cancellation in dP - Σ P·dP
 * (as in the BERT test) and summed over six layers: every gradient tensor is held to a norm-wise
 * relative difference of 16·2^-p (6.3 % bf16, 0.78 % fp16). The r_net weights get twice that: their
 * gradient sums dS·(q + r_r_bias) over the queries, and each row of dS sums to zero (the softmax is
 * invariant to a shift of a row's scores), so the rounding errors cancel less than the gradient does
 * (measured: 2.9·2^-8 bf16, 11.5·2^-11 fp16, the largest of all tensors; the others at most
 * 1.3·2^-8 and 1.9·2^-11). */
static void compare_storage(int precision, int pre_lnorm) {
    const hs_backend *be = backend(precision);
    if (!be) {
        printf("bf16 skipped: no oneDNN\n");
        return;
    }
    const double u = precision == HS_PRECISION_BF16 ? 0x1p-8 : 0x1p-11, tol = 16.0 * u;
    model half, full;
    build(&half, be, "auto", pre_lnorm);
    build(&full, be, "fp32", pre_lnorm);
    assert_true(hs_txl_activations_16bit(half.model));
    assert_string_equal(be->name, TXL_ACT16_DEVICE);
    double s16[HS_STATS_NDOUBLE], s32[HS_STATS_NDOUBLE];
    run(&half, s16);
    run(&full, s32);
    /* the forward is the same: identical loss sums and counts */
    assert_memory_equal(s16, s32, sizeof s16);

    const hs_params *p = &half.params;
    double worst = 0.0, worst_other = 0.0, sum = 0.0; /* over all tensors; over all but r_net */
    const char *worst_name = "";
    for (int t = 0; t < p->count; t++) {
        double d2, r2;
        act16_grad_diff(&half.params, &full.params, t, &d2, &r2);
        sum += d2;
        if (r2 == 0.0) { /* a tensor this segment does not reach (an unused tail row): both zero */
            assert_true(d2 == 0.0);
            continue;
        }
        const double rel = sqrt(d2 / r2), bound = strstr(p->tensors[t].name, "r_net") ? 2.0 * tol : tol;
        if (rel > worst) worst = rel, worst_name = p->tensors[t].name;
        if (bound == tol && rel > worst_other) worst_other = rel;
        if (rel > bound) fail_msg("precision %d, pre_lnorm %d: gradient of %s differs by %.3g relative (> %.3g)",
                                precision, pre_lnorm, p->tensors[t].name, rel, bound);
    }
    printf("%s, precision %d, pre_lnorm %d: worst gradient difference %.3g relative (%s), %.3g without r_net, "
           "tolerance %.3g (r_net %.3g)\n",
           be->name, precision, pre_lnorm, worst, worst_name, worst_other, tol, 2.0 * tol);
    assert_true(sum > 0.0); /* the rounded probabilities and queries do reach the gradients */
    destroy(&half);
    destroy(&full);
}

static void test_bf16_storage(void **state) {
    (void)state;
    compare_storage(HS_PRECISION_BF16, 0);
    compare_storage(HS_PRECISION_BF16, 1);
}

static void test_fp16_storage(void **state) {
    (void)state;
    compare_storage(HS_PRECISION_FP16, 0);
    compare_storage(HS_PRECISION_FP16, 1);
}

int main(void) {
    /* on the emulated device: every 16-bit twin a product reads is compared with a fresh conversion
     * (bind_half; a stale one stops the run naming the op) */
    setenv("HETSEQ_CHECK_HALF_TWINS", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_activation_bytes),
        cmocka_unit_test(test_bf16_storage),
        cmocka_unit_test(test_fp16_storage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
