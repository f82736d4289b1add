/* A user starts BERT pre-training from scratch: the model's parameters get NVIDIA's initialisation
 * (normal weights of std initializer_range, zero biases, LayerNorm 1/0, PyTorch's default
 * U(±1/sqrt(fan_in)) for the three LinearActivation layers, every encoder layer's intermediate layer a
 * copy of layer 0's), the same seed gives the same model, and the optimizer's no-decay set is the
 * biases and LayerNorm parameters. Statistics are checked against their sampling error. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "models/bert.h"
#include "nn/params.h"

typedef struct {
    hs_params params;
    hs_bert *model;
} fixture;

static void build(fixture *f, uint64_t seed) {
    hs_bert_config cfg;
    hs_bert_config_defaults(&cfg);
    cfg.vocab_size = 1001;
    cfg.padded_vocab_size = hs_bert_padded_vocab(cfg.vocab_size, 8);
    cfg.hidden_size = 64;
    cfg.num_hidden_layers = 2;
    cfg.num_attention_heads = 4;
    cfg.intermediate_size = 128;
    cfg.max_position_embeddings = 128;
    cfg.initializer_range = 0.05;
    memset(f, 0, sizeof *f);
    f->model = hs_bert_create(&f->params, &cfg, 2, 16, 3);
    hs_params_allocate(&f->params, hs_backend_cpu());
    hs_bert_setup(f->model);
    hs_bert_init_params(f->model, seed);
}

static void destroy(fixture *f) {
    hs_bert_free(f->model);
    hs_params_free(&f->params);
}

/* host copy of a tensor by name */
static float *tensor(const fixture *f, const char *name, size_t *n) {
    int i = hs_params_find(&f->params, name);
    if (i < 0) fail_msg("no parameter %s", name);
    *n = f->params.tensors[i].numel;
    float *host = malloc(*n * sizeof *host);
    f->params.be->download(f->params.be, host, hs_param_data(&f->params, i), *n * sizeof *host);
    return host;
}

static void moments(const float *x, size_t n, double *mean, double *std) {
    double s = 0, ss = 0;
    for (size_t i = 0; i < n; i++) s += x[i], ss += (double)x[i] * x[i];
    *mean = s / (double)n;
    *std = sqrt(ss / (double)n - *mean * *mean);
}

/* N(0, sigma): mean within 4 standard errors, std within 4 of its standard errors (σ/sqrt(2n)) */
static void expect_normal(const fixture *f, const char *name, double sigma) {
    size_t n;
    float *x = tensor(f, name, &n);
    double mean, std;
    moments(x, n, &mean, &std);
    if (fabs(mean) > 4 * sigma / sqrt((double)n) || fabs(std - sigma) > 4 * sigma / sqrt(2.0 * (double)n))
        fail_msg("%s: mean %g std %g over %zu values, expected N(0, %g)", name, mean, std, n, sigma);
    free(x);
}

/* U(-b, b): inside the bounds, std b/sqrt(3) within sampling error (var of x² is 4b⁴/45) */
static void expect_uniform(const fixture *f, const char *name, double bound) {
    size_t n;
    float *x = tensor(f, name, &n);
    double mean, std, lo = 0, hi = 0;
    moments(x, n, &mean, &std);
    for (size_t i = 0; i < n; i++) lo = x[i] < lo ? x[i] : lo, hi = x[i] > hi ? x[i] : hi;
    const double want = bound / sqrt(3.0), se = sqrt(4.0 / 45.0 / (double)n) * bound * bound / (2 * want);
    if (lo < -bound || hi > bound || fabs(std - want) > 5 * se)
        fail_msg("%s: range [%g, %g] std %g, expected U(-%g, %g) (std %g)", name, lo, hi, std, bound, bound, want);
    free(x);
}

static void expect_constant(const fixture *f, const char *name, float value) {
    size_t n;
    float *x = tensor(f, name, &n);
    for (size_t i = 0; i < n; i++)
        if (x[i] != value) fail_msg("%s[%zu] = %g, expected %g", name, i, x[i], value);
    free(x);
}

static void nvidia_initialisation(void **state) {
    (void)state;
    fixture f;
    build(&f, 11);
    const double range = 0.05, fan_in_64 = 1.0 / 8.0;
    expect_normal(&f, "bert.embeddings.word_embeddings.weight", range);
    expect_normal(&f, "bert.embeddings.position_embeddings.weight", range);
    expect_constant(&f, "bert.embeddings.LayerNorm.weight", 1.0f);
    expect_constant(&f, "bert.embeddings.LayerNorm.bias", 0.0f);
    for (int l = 0; l < 2; l++) {
        char name[128];
        const char *normal[] = {"attention.self.query", "attention.self.key", "attention.self.value",
                                "attention.output.dense", "output.dense"};
        for (int k = 0; k < 5; k++) {
            snprintf(name, sizeof name, "bert.encoder.layer.%d.%s.weight", l, normal[k]);
            expect_normal(&f, name, range);
            snprintf(name, sizeof name, "bert.encoder.layer.%d.%s.bias", l, normal[k]);
            expect_constant(&f, name, 0.0f);
        }
        snprintf(name, sizeof name, "bert.encoder.layer.%d.output.LayerNorm.weight", l);
        expect_constant(&f, name, 1.0f);
        snprintf(name, sizeof name, "bert.encoder.layer.%d.intermediate.dense_act.weight", l);
        expect_uniform(&f, name, fan_in_64);
        snprintf(name, sizeof name, "bert.encoder.layer.%d.intermediate.dense_act.bias", l);
        expect_uniform(&f, name, fan_in_64);
    }
    expect_uniform(&f, "bert.pooler.dense_act.weight", fan_in_64);
    expect_uniform(&f, "cls.predictions.transform.dense_act.weight", fan_in_64);
    expect_constant(&f, "cls.predictions.bias", 0.0f);
    expect_normal(&f, "cls.seq_relationship.weight", range);
    expect_constant(&f, "cls.seq_relationship.bias", 0.0f);

    /* NVIDIA deep-copies one encoder layer: the intermediate layers start equal; the others do not */
    size_t n0, n1;
    float *a = tensor(&f, "bert.encoder.layer.0.intermediate.dense_act.weight", &n0);
    float *b = tensor(&f, "bert.encoder.layer.1.intermediate.dense_act.weight", &n1);
    assert_int_equal(n0, n1);
    assert_memory_equal(a, b, n0 * sizeof *a);
    free(a), free(b);
    a = tensor(&f, "bert.encoder.layer.0.attention.self.query.weight", &n0);
    b = tensor(&f, "bert.encoder.layer.1.attention.self.query.weight", &n1);
    assert_memory_not_equal(a, b, n0 * sizeof *a);
    free(a), free(b);
    destroy(&f);
}

static void same_seed_same_model(void **state) {
    (void)state;
    fixture f, g, h;
    build(&f, 3);
    build(&g, 3);
    build(&h, 4);
    assert_int_equal(f.params.total, g.params.total);
    float *x = malloc(f.params.total * sizeof *x), *y = malloc(f.params.total * sizeof *y),
          *z = malloc(f.params.total * sizeof *z);
    f.params.be->download(f.params.be, x, f.params.data, f.params.total * sizeof *x);
    g.params.be->download(g.params.be, y, g.params.data, g.params.total * sizeof *y);
    h.params.be->download(h.params.be, z, h.params.data, h.params.total * sizeof *z);
    assert_memory_equal(x, y, f.params.total * sizeof *x);
    assert_memory_not_equal(x, z, f.params.total * sizeof *x);
    free(x), free(y), free(z);
    destroy(&f), destroy(&g), destroy(&h);
}

/* Shapes (vocabulary padded to 1008), the tied decoder declared once, no-decay flags, and query/key/value
 * weights adjacent so the attention runs them as one GEMM. */
static void table_layout(void **state) {
    (void)state;
    fixture f;
    build(&f, 1);
    const hs_params *p = &f.params;
    int w = hs_params_find(p, "bert.embeddings.word_embeddings.weight");
    assert_true(w >= 0);
    assert_int_equal(p->tensors[w].shape[0], 1008);
    assert_int_equal(p->tensors[hs_params_find(p, "cls.predictions.bias")].shape[0], 1008);
    assert_int_equal(hs_params_find(p, "cls.predictions.decoder.weight"), -1);
    assert_int_equal(p->count, 5 + 2 * 16 + 9);
    for (int i = 0; i < p->count; i++) {
        const char *n = p->tensors[i].name;
        int no_decay = strstr(n, "bias") || strstr(n, "LayerNorm");
        if (p->tensors[i].weight_decay != !no_decay) fail_msg("%s: weight_decay flag %d", n, p->tensors[i].weight_decay);
    }
    int q = hs_params_find(p, "bert.encoder.layer.1.attention.self.query.weight");
    int k = hs_params_find(p, "bert.encoder.layer.1.attention.self.key.weight");
    int v = hs_params_find(p, "bert.encoder.layer.1.attention.self.value.weight");
    assert_int_equal(p->tensors[k].offset, p->tensors[q].offset + 64 * 64);
    assert_int_equal(p->tensors[v].offset, p->tensors[k].offset + 64 * 64);
    destroy(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nvidia_initialisation),
        cmocka_unit_test(same_seed_same_model),
        cmocka_unit_test(table_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
