/* LAMB as a user selects it in the experiment file, and one step worked out by hand
 * (docs/optimization.md, "LAMB"). The comparison with a PyTorch reference over several steps is
 * tests/ref/test_lamb_vs_torch.py. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "nn/params.h"
#include "optim/optimizer.h"

/* A linear layer's weight [2] (decays) and bias [2] (does not), as a BERT layer declares them. */
typedef struct {
    hs_params params;
    int weight, bias;
} model;

static void model_init(model *m, const float weight[2], const float bias[2]) {
    memset(m, 0, sizeof *m);
    m->weight = hs_params_declare(&m->params, "dense.weight", 1, (const int64_t[]){2}, 1);
    m->bias = hs_params_declare(&m->params, "dense.bias", 1, (const int64_t[]){2}, 0);
    hs_params_allocate(&m->params, hs_backend_cpu());
    m->params.be->upload(m->params.be, hs_param_data(&m->params, m->weight), weight, 2 * sizeof(float));
    m->params.be->upload(m->params.be, hs_param_data(&m->params, m->bias), bias, 2 * sizeof(float));
}

static void expect_values(const float *dev, const double *want, int n, double tol, const char *what) {
    float got[4];
    hs_backend_cpu()->download(hs_backend_cpu(), got, dev, (size_t)n * sizeof(float));
    for (int i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol)) fail_msg("%s[%d] = %.9g, expected %.9g", what, i, got[i], want[i]);
}

/* NVIDIA's BERT settings in the experiment file reach the optimizer; the trust-ratio switch defaults
 * to apex's current behaviour; lamb tells the trainer it clips by itself, adamw does not. */
static void config_selects_lamb_with_its_clipping(void **state) {
    (void)state;
    model m;
    model_init(&m, (const float[]){1.0f, 2.0f}, (const float[]){0.0f, 0.0f});
    hs_config *c = hs_config_load_string(
        "optimizer: { name = \"lamb\"; adam_eps = 1e-6; weight_decay = 0.01; clip_norm = 1.0; };", "bert.cfg", 0,
        NULL);
    hs_optim_settings os;
    hs_optim_settings_load(c, &os);
    hs_optimizer *o = hs_optimizer_create(&os, &m.params);
    assert_string_equal(o->name, "lamb");
    assert_int_equal(o->n_states, 2);
    assert_string_equal(o->state_names[0], "exp_avg");
    assert_string_equal(o->state_names[1], "exp_avg_sq");
    assert_true(o->eps == 1e-6 && o->weight_decay == 0.01 && o->max_grad_norm == 1.0);
    assert_int_equal(o->trust_ratio_on_no_decay, 0);
    assert_int_equal(hs_optimizer_clips_internally(o), 1);
    hs_optimizer_free(o);
    hs_config_free(c);

    char *overrides[] = {"optimizer.name=lamb", "optimizer.lamb_trust_ratio_on_no_decay=true"};
    c = hs_config_load_string("", "bert.cfg", 2, overrides);
    hs_optim_settings_load(c, &os);
    o = hs_optimizer_create(&os, &m.params);
    assert_int_equal(o->trust_ratio_on_no_decay, 1);
    assert_true(o->max_grad_norm == 25.0); /* the schema's clip_norm default */
    hs_optimizer_free(o);
    hs_config_free(c);

    o = hs_optimizer_create_named("adamw", &m.params, 0.9, 0.999, 1e-8, 0.0, 0.0, 0.0);
    assert_int_equal(hs_optimizer_clips_internally(o), 0);
    hs_optimizer_free(o);
    hs_params_free(&m.params);
}

/* One step by hand. Gradients weight (30, -40), bias (0, 50): global norm sqrt(30²+40²+50²) = 70.71 > 1,
 * so every gradient is divided by 70.71 (clip 1.0). At t = 1 the bias-corrected moments are
 * m̂ = g', v̂ = g'², so u = g'/(|g'| + eps) + wd·p: sign(g') up to eps, plus decay on the weight only.
 *   weight p = (3, 4), ||p|| = 5, wd 0.1: u = (1 + 0.3, -1 + 0.4) = (1.3, -0.6), ||u|| = 1.43178;
 *     trust ratio: p -= lr·5/1.43178 · u   (lr 0.01) -> (2.954603, 4.020952)
 *   bias p = (0, 0), no decay: u = (0, 1) (the zero gradient gives m = v = 0, u = 0);
 *     default: no trust ratio -> p -= lr·u = (0, -0.01);
 *     trust on no-decay tensors: ||p|| = 0 -> falls back to lr -> the same (0, -0.01).
 * exp_avg = 0.1·g' = (0.042426, -0.056569 | 0, 0.070711); the stored gradients stay as they were. */
static void one_step_by_hand(void **state) {
    (void)state;
    for (int trust_all = 0; trust_all <= 1; trust_all++) {
        model m;
        model_init(&m, (const float[]){3.0f, 4.0f}, (const float[]){0.0f, 0.0f});
        hs_optimizer *o = hs_optimizer_create_named("lamb", &m.params, 0.9, 0.999, 1e-6, 0.1, 0.0, 0.0);
        o->max_grad_norm = 1.0;
        o->trust_ratio_on_no_decay = trust_all;
        m.params.be->upload(m.params.be, hs_param_grad(&m.params, m.weight), (const float[]){30.0f, -40.0f}, 2 * sizeof(float));
        m.params.be->upload(m.params.be, hs_param_grad(&m.params, m.bias), (const float[]){0.0f, 50.0f}, 2 * sizeof(float));
        hs_optimizer_step(o, 0.01);
        assert_int_equal(o->step, 1);
        const double r = 0.01 * 5.0 / sqrt(1.3 * 1.3 + 0.6 * 0.6);
        /* eps changes |u| by 1e-6·70.71/30 at most: far below the tolerance */
        expect_values(hs_param_data(&m.params, m.weight), (const double[]){3.0 - r * 1.3, 4.0 + r * 0.6}, 2, 2e-6,
                      "weight");
        expect_values(hs_param_data(&m.params, m.bias), (const double[]){0.0, -0.01}, 2, 1e-7, "bias");
        const double k = 0.1 / sqrt(30.0 * 30.0 + 40.0 * 40.0 + 50.0 * 50.0);
        expect_values(o->state[0] + m.params.tensors[m.weight].offset, (const double[]){30.0 * k, -40.0 * k}, 2,
                      1e-7, "exp_avg");
        expect_values(o->state[0] + m.params.tensors[m.bias].offset, (const double[]){0.0, 50.0 * k}, 2, 1e-7,
                      "exp_avg");
        expect_values(hs_param_grad(&m.params, m.weight), (const double[]){30.0, -40.0}, 2, 0.0, "grad");
        hs_optimizer_free(o);
        hs_params_free(&m.params);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(config_selects_lamb_with_its_clipping),
        cmocka_unit_test(one_step_by_hand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
