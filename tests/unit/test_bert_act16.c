/* A user trains BERT with precision = "bf16" or "fp16": the encoder layers keep q|k|v, the attention
 * probabilities, the context and the FFN pre-activation and GELU output for the backward pass in 16
 * bits (src/models/bert.c), and the rest in fp32. Checked on the CPU backend:
 *   - the model allocates exactly the activation bytes counted here from the shapes, in every
 *     precision, and under bf16/fp16 clearly fewer than fp32 storage (HETSEQ_ACTIVATION_STORAGE=fp32);
 *   - the same micro-batch (dropout on) with 16-bit and with fp32 storage under the same precision:
 *     the losses are identical (the forward does not change), every kept tensor of every layer is the
 *     16-bit rounding (src/util/lowp.h) of the fp32 one bit for bit (dropped probabilities keep their
 *     sign, -0.0 included), and every parameter gradient agrees within the tolerance derived below;
 *   - fp32 and tf32 keep fp32 storage. */
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
#include "models/bert.h"
#include "nn/params.h"
#include "util/lowp.h"
#include "act16_check.h"

enum { N = 2, H = 64, HEADS = 4, I = 128, VOCAB = 1001, B = 3, L = 16, P = 3 };

typedef struct {
    hs_params params;
    hs_bert *model;
} model;

static hs_bert_config config(int layers) {
    hs_bert_config cfg;
    hs_bert_config_defaults(&cfg);
    cfg.vocab_size = VOCAB;
    cfg.padded_vocab_size = hs_bert_padded_vocab(cfg.vocab_size, 8);
    cfg.hidden_size = H;
    cfg.num_hidden_layers = layers;
    cfg.num_attention_heads = HEADS;
    cfg.intermediate_size = I;
    cfg.max_position_embeddings = 64;
    cfg.hidden_dropout_prob = 0.1;
    cfg.attention_probs_dropout_prob = 0.1;
    return cfg;
}

/* storage: "auto" (the default) or "fp32" (HETSEQ_ACTIVATION_STORAGE, read by hs_bert_setup) */
static void build(model *m, const hs_backend *be, const char *storage, int layers) {
    hs_bert_config cfg = config(layers);
    memset(m, 0, sizeof *m);
    m->model = hs_bert_create(&m->params, &cfg, B, L, P);
    hs_params_allocate(&m->params, be);
    setenv("HETSEQ_ACTIVATION_STORAGE", storage, 1);
    hs_bert_setup(m->model);
    unsetenv("HETSEQ_ACTIVATION_STORAGE");
    hs_bert_init_params(m->model, 1234);
}

static void destroy(model *m) {
    hs_bert_free(m->model);
    hs_params_free(&m->params);
}

/* The activation bytes of src/models/bert.c's buffers, counted from the shapes: per layer the fp32
 * LayerNorm inputs (attn_sum, ffn_sum [T,H]) and four LayerNorm statistics [T], and the seven kept
 * tensors (qkv [T,3H], probs [B,heads,L,L], ctx [T,H], ffn_pre and ffn_act [T,I], the layer's input
 * hidden[i] and the first LayerNorm's output attn_out [T,H]) in fp32 per layer (the N+1 hidden states),
 * or in 16 bits per layer (all but ffn_act, which the backward recomputes: one 16-bit [T,I] for every
 * layer) plus ONE fp32 working set (the hidden states: two buffers in turn); plus the
 * embeddings (sum [T,H], statistics [2T]), the last hidden state, the pooler [2·B,H], NSP logits [B,2]
 * and the MLM head on B·P rows (input, pre-activation, GELU, LayerNorm output [·,H], statistics [2·],
 * logits [·,V]). */
static size_t expected_bytes(int half, size_t layers) {
    const size_t T = (size_t)B * L, NP = (size_t)B * P, V = (size_t)hs_bert_padded_vocab(VOCAB, 8);
    const size_t kept = 3 * T * H + (size_t)B * HEADS * L * L + T * H + 2 * T * I + T * H; /* + attn_out */
    const size_t fp32_layer = 2 * T * H + 4 * T;
    const size_t other = T * H + 2 * T + 2 * (size_t)B * H + 2 * (size_t)B + NP * (4 * H + 2 + V);
    if (!half) return 4 * (other + (layers + 1) * T * H + layers * (fp32_layer + kept));
    /* 16 bits: the kept tensors and the layer's input in 16 bits per layer, two fp32 hidden-state
     * buffers, and the twins of the output gradients ([T,H] and [T,I], one set; the q|k|v gradient's
     * [T,3H] shares the [T,I] one when I >= 3H, else is one more) */
    const size_t dqkv16 = I >= 3 * H ? 0 : 3 * T * H;
    return 4 * (other + 2 * T * H + layers * fp32_layer + kept) + 2 * layers * (kept - T * I + T * H) +
           2 * (T * H + T * I + dqkv16 + T * I);
}

static const hs_backend *backend(int precision) { return act16_backend("cpu", precision); }

static void test_activation_bytes(void **state) {
    (void)state;
    static const int precs[] = {HS_PRECISION_FP32, HS_PRECISION_TF32, HS_PRECISION_BF16, HS_PRECISION_FP16};
    enum { LAYERS = 6 }; /* with 2 layers one fp32 working set + two 16-bit copies weigh what 2 fp32 layers do */
    model fp32;
    build(&fp32, hs_backend_cpu(), "auto", LAYERS);
    assert_int_equal(hs_bert_activation_bytes(fp32.model), expected_bytes(0, LAYERS));
    for (size_t k = 0; k < sizeof precs / sizeof precs[0]; k++) {
        const hs_backend *be = backend(precs[k]);
        if (!be) continue; /* bf16 without oneDNN */
        const int half = precs[k] == HS_PRECISION_BF16 || precs[k] == HS_PRECISION_FP16;
        model m, f;
        build(&m, be, "auto", LAYERS);
        build(&f, be, "fp32", LAYERS);
        assert_int_equal(hs_bert_activations_16bit(m.model), half);
        assert_int_equal(hs_bert_activations_16bit(f.model), 0);
        assert_int_equal(hs_bert_activation_bytes(m.model), expected_bytes(half, LAYERS));
        assert_int_equal(hs_bert_activation_bytes(f.model), expected_bytes(0, LAYERS));
        if (half) { /* the kept tensors are most of a layer's fp32 bytes here: 16 bits save about a
                     * quarter of the whole at these tiny widths (0.715 by the count above; the MLM logits
                     * [B·P,V] stay fp32). At BERT-large's shapes (fused attention) a layer keeps 28 bytes
                     * per token and column against the fp32 storage's 64 (44 while the layer input and
                     * h1 were kept in fp32 as well as in 16 bits, and the GELU output in 16 bits). */
            const double ratio = (double)hs_bert_activation_bytes(m.model) / (double)expected_bytes(0, LAYERS);
            printf("precision %d: activations %zu bytes, fp32 storage %zu (ratio %.3f)\n", precs[k],
                   hs_bert_activation_bytes(m.model), expected_bytes(0, LAYERS), ratio);
            assert_true(ratio < 0.9);
        }
        destroy(&m);
        destroy(&f);
    }
    destroy(&fp32);
}

/* A random micro-batch: B rows of L tokens (the last rows padded), P labelled positions per row. */
static void *make_batch(void) {
    void *buf = malloc(hs_bert_batch_bytes(B, L, P));
    assert_non_null(buf);
    hs_bert_batch *b = hs_bert_batch_view(buf, B, L, P);
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int s = 0; s < B; s++) {
        const int len = L - 3 * s;
        for (int t = 0; t < L; t++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            const size_t e = (size_t)s * L + (size_t)t;
            b->input_ids[e] = t < len ? (int32_t)(x % VOCAB) : 0;
            b->segment_ids[e] = t >= len / 2 && t < len;
            b->input_mask[e] = t < len;
        }
        for (int k = 0; k < P; k++) {
            b->mlm_positions[s * P + k] = 1 + 3 * k + s;
            b->mlm_ids[s * P + k] = (int32_t)((x >> (8 * k)) % VOCAB);
        }
        b->num_mlm[s] = P;
        b->nsp_labels[s] = s & 1;
    }
    return buf;
}

/* One training micro-batch (dropout on); the stats come back in stats[HS_STATS_NDOUBLE]. */
static void run(model *m, const hs_bert_batch *batch, double *stats) {
    const hs_backend *be = m->params.be;
    const int labelled = hs_bert_stage_batch(m->model, batch);
    const hs_step_ctx ctx = {.seed = 7, .update = 3, .training = 1, .loss_scale = {1.0 / labelled, 1.0 / B}};
    double *dev = be->alloc(be, HS_STATS_NDOUBLE * sizeof(double));
    hs_params_zero_grad(&m->params);
    hs_bert_forward_backward(m->model, 0, &ctx, dev);
    be->download(be, stats, dev, HS_STATS_NDOUBLE * sizeof(double));
    be->free(be, dev);
}

/* ||x[n]|| of a device buffer */
static double norm(const hs_backend *be, const float *x, size_t n) {
    float *h = malloc(n * sizeof *h);
    assert_non_null(h);
    be->download(be, h, x, n * sizeof *h);
    double s = 0.0;
    for (size_t e = 0; e < n; e++) s += (double)h[e] * h[e];
    free(h);
    return sqrt(s);
}

static float round16(int precision, float x) {
    return precision == HS_PRECISION_BF16 ? hs_bf16_round(x) : hs_fp16_round(x);
}

/* 16-bit against fp32 storage in one precision. The gradients differ only where the backward reads a
 * kept tensor outside a product: the softmax backward dS = P ⊙ (dP - Σ P·dP) with the rounded P
 * (products round their operands anyway; the FFN pre-activation, which the GELU backward reads, is the
 * 16-bit linear layer's rounded output under both storages, and so is the GELU output recomputed from it). Each
 * rounded value is within a relative 2^-p of the fp32 one (p = 8 significant bits for bf16, 11 for
 * fp16), and these perturbations enter the gradients linearly with O(1) factors (|gelu''| <= 0.8, the
 * softmax Jacobian has norm <= 1) — except that dP - Σ P·dP cancels, which amplifies the relative
 * error of the Q and K gradients a few times — then add up over the two layers and the paths to each
 * parameter. So every gradient tensor is held to a norm-wise relative difference of 16·2^-p (6.3 %
 * bf16, 0.78 % fp16); measured: at most 1.2·2^-p (bf16) and 5.7·2^-p (fp16, the Q and K weights).
 * The key biases are the exception: their gradient is exactly 0 in exact arithmetic (the softmax is
 * invariant to a shift of a row's scores, so Σ_j dS_ij = 0), so both runs give rounding noise; it
 * must stay noise, as it is with fp32 storage: below 2^-6 times the query bias's gradient (measured:
 * about 2^-9 in both storages and both precisions). */
static void compare_storage(int precision) {
    const hs_backend *be = backend(precision);
    if (!be) {
        printf("bf16 skipped: no oneDNN\n");
        return;
    }
    const double u = precision == HS_PRECISION_BF16 ? 0x1p-8 : 0x1p-11, tol = 16.0 * u;
    void *buf = make_batch();
    model half, full;
    build(&half, be, "auto", N);
    build(&full, be, "fp32", N);
    assert_true(hs_bert_activations_16bit(half.model));
    double s16[HS_STATS_NDOUBLE], s32[HS_STATS_NDOUBLE];
    run(&half, buf, s16);
    run(&full, buf, s32);
    /* the forward is the same: identical loss sums and counts */
    assert_memory_equal(s16, s32, sizeof s16);

    size_t dropped = 0;
    for (int layer = 0; layer < N; layer++)
        for (int which = HS_BERT_SAVED_QKV; which <= HS_BERT_SAVED_ATTN_OUT; which++) {
            float *a, *b;
            const size_t max = (size_t)B * HEADS * L * L + (size_t)B * L * (3 * H + I);
            a = malloc(max * sizeof *a), b = malloc(max * sizeof *b);
            assert_non_null(a), assert_non_null(b);
            const size_t n = hs_bert_saved_tensor(half.model, layer, which, a);
            if (which == HS_BERT_SAVED_FFN_ACT) { /* not kept in 16 bits: the backward recomputes it */
                assert_int_equal(n, 0);
                assert_true(hs_bert_saved_tensor(full.model, layer, which, b) > 0);
                free(a), free(b);
                continue;
            }
            assert_int_equal(hs_bert_saved_tensor(full.model, layer, which, b), n);
            for (size_t e = 0; e < n; e++) {
                const float r = round16(precision, b[e]);
                if (memcmp(&a[e], &r, sizeof r))
                    fail_msg("precision %d layer %d tensor %d [%zu]: 16-bit copy %.9g, rounding of fp32 %.9g (%.9g)",
                             precision, layer, which, e, a[e], r, b[e]);
                if (which == HS_BERT_SAVED_PROBS && signbit(a[e])) dropped++;
            }
            free(a), free(b);
        }
    assert_true(dropped > 0); /* the dropout marks went through the 16-bit copies */

    const hs_params *p = &half.params;
    double worst = 0.0, sum = 0.0;
    const char *worst_name = "";
    for (int t = 0; t < p->count; t++) {
        const size_t n = p->tensors[t].numel;
        double d2, r2;
        act16_grad_diff(&half.params, &full.params, t, &d2, &r2);
        const double rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
        sum += d2;
        if (strstr(p->tensors[t].name, "key.bias")) { /* noise (see above) */
            const int q = hs_params_find(p, "bert.encoder.layer.0.attention.self.query.bias");
            const double noise = 0x1p-6 * norm(be, hs_param_grad(&full.params, q), p->tensors[q].numel);
            if (sqrt(r2) > noise || norm(be, hs_param_grad(&half.params, t), n) > noise)
                fail_msg("precision %d: the gradient of %s is not rounding noise (norms %.3g, %.3g > %.3g)",
                         precision, p->tensors[t].name, sqrt(r2), norm(be, hs_param_grad(&half.params, t), n), noise);
            continue;
        }
        if (rel > worst) worst = rel, worst_name = p->tensors[t].name;
        if (rel > tol) fail_msg("precision %d: gradient of %s differs by %.3g relative (> %.3g)", precision,
                                p->tensors[t].name, rel, tol);
    }
    printf("precision %d: worst gradient difference %.3g relative (%s), tolerance %.3g\n", precision, worst,
           worst_name, tol);
    assert_true(sum > 0.0); /* the rounded probabilities and pre-activations do reach the gradients */
    destroy(&half);
    destroy(&full);
    free(buf);
}

static void test_bf16_storage(void **state) {
    (void)state;
    compare_storage(HS_PRECISION_BF16);
}

static void test_fp16_storage(void **state) {
    (void)state;
    compare_storage(HS_PRECISION_FP16);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_activation_bytes),
        cmocka_unit_test(test_bf16_storage),
        cmocka_unit_test(test_fp16_storage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
