/* Optimizer steps and gradient clipping on the CPU backend, against values worked out by hand from
 * the update rules (docs/optimization.md). A model with a 3-value "weight" (weight decay flag set) and
 * a 2-value "bias" (flag clear), as a user's linear layer would declare them. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "nn/params.h"
#include "optim/optimizer.h"

typedef struct {
    hs_params params;
    int weight, bias;
} model;

static void model_init(model *m, const float weight[3], const float bias[2]) {
    memset(m, 0, sizeof *m);
    m->weight = hs_params_declare(&m->params, "weight", 1, (const int64_t[]){3}, 1);
    m->bias = hs_params_declare(&m->params, "bias", 1, (const int64_t[]){2}, 0);
    hs_params_allocate(&m->params, hs_backend_cpu());
    m->params.be->upload(m->params.be, hs_param_data(&m->params, m->weight), weight, 3 * sizeof(float));
    m->params.be->upload(m->params.be, hs_param_data(&m->params, m->bias), bias, 2 * sizeof(float));
}

static void set_grads(model *m, const float weight[3], const float bias[2]) {
    m->params.be->upload(m->params.be, hs_param_grad(&m->params, m->weight), weight, 3 * sizeof(float));
    m->params.be->upload(m->params.be, hs_param_grad(&m->params, m->bias), bias, 2 * sizeof(float));
}

static void expect_values(const float *dev, const double *want, int n, double tol, const char *what) {
    float got[8];
    hs_backend_cpu()->download(hs_backend_cpu(), got, dev, (size_t)n * sizeof(float));
    for (int i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol)) fail_msg("%s[%d] = %.9g, expected %.9g", what, i, got[i], want[i]);
}

/* With a constant gradient Adam's bias correction is exact, so (eps aside) every step moves each
 * parameter by lr against the gradient's sign; HetSeq's decoupled decay first shrinks p by lr·wd·p,
 * on the bias too. lr 0.1, wd 0.1: p1 = 0.99·p0 - 0.1·sign(g), p2 = 0.99·p1 - 0.1·sign(g). */
static void adam_constant_gradient_steps_by_lr(void **state) {
    (void)state;
    model m;
    model_init(&m, (const float[]){1.0f, -2.0f, 0.5f}, (const float[]){1.0f, 1.0f});
    hs_optimizer *o = hs_optimizer_create_named("adam", &m.params, 0.9, 0.999, 1e-8, 0.1, 0.0, 0.0);
    assert_int_equal(o->n_states, 2);
    assert_string_equal(o->state_names[0], "exp_avg");
    assert_string_equal(o->state_names[1], "exp_avg_sq");
    set_grads(&m, (const float[]){0.5f, -0.25f, 0.0f}, (const float[]){1.0f, -1.0f});
    hs_optimizer_step(o, 0.1);
    /* eps shifts these by at most 1.3e-7 */
    expect_values(hs_param_data(&m.params, m.weight), (const double[]){0.89, -1.88, 0.495}, 3, 1e-6, "weight");
    expect_values(hs_param_data(&m.params, m.bias), (const double[]){0.89, 1.09}, 2, 1e-6, "bias");
    hs_optimizer_step(o, 0.1);
    assert_int_equal(o->step, 2);
    expect_values(hs_param_data(&m.params, m.weight), (const double[]){0.7811, -1.7612, 0.49005}, 3, 1e-6, "weight");
    expect_values(hs_param_data(&m.params, m.bias), (const double[]){0.7811, 1.1791}, 2, 1e-6, "bias");
    /* m = (0.1 + 0.9·0.1)·g = 0.19·g;  v = (0.001 + 0.999·0.001)·g² = 0.001999·g² */
    expect_values(o->state[0] + m.params.tensors[m.weight].offset, (const double[]){0.095, -0.0475, 0.0}, 3, 1e-8,
                  "exp_avg");
    expect_values(o->state[1] + m.params.tensors[m.bias].offset, (const double[]){0.001999, 0.001999}, 2, 1e-9,
                  "exp_avg_sq");
    hs_optimizer_free(o);
    hs_params_free(&m.params);
}

/* AdamW decays only tensors with the weight-decay flag: the bias moves by exactly lr per step. */
static void adamw_leaves_unflagged_tensors_undecayed(void **state) {
    (void)state;
    model m;
    model_init(&m, (const float[]){1.0f, -2.0f, 0.5f}, (const float[]){1.0f, 1.0f});
    hs_optimizer *o = hs_optimizer_create_named("adamw", &m.params, 0.9, 0.999, 1e-8, 0.1, 0.0, 0.0);
    set_grads(&m, (const float[]){0.5f, -0.25f, 0.0f}, (const float[]){1.0f, -1.0f});
    hs_optimizer_step(o, 0.1);
    hs_optimizer_step(o, 0.1);
    expect_values(hs_param_data(&m.params, m.weight), (const double[]){0.7811, -1.7612, 0.49005}, 3, 1e-6, "weight");
    expect_values(hs_param_data(&m.params, m.bias), (const double[]){0.8, 1.2}, 2, 1e-6, "bias");
    hs_optimizer_free(o);
    hs_params_free(&m.params);
}

/* torch SGD, momentum 0.9, gradient 1 on every step: buf = 1, 1.9, 2.71; p = 1 - 0.1·(1 + 1.9 + 2.71). */
static void sgd_momentum_accumulates(void **state) {
    (void)state;
    model m;
    model_init(&m, (const float[]){1.0f, 1.0f, 1.0f}, (const float[]){1.0f, 1.0f});
    hs_optimizer *o = hs_optimizer_create_named("sgd", &m.params, 0.0, 0.0, 0.0, 0.0, 0.0, 0.9);
    assert_int_equal(o->n_states, 1);
    assert_string_equal(o->state_names[0], "momentum_buffer");
    for (int s = 0; s < 3; s++) {
        set_grads(&m, (const float[]){1.0f, 1.0f, 1.0f}, (const float[]){1.0f, -1.0f});
        hs_optimizer_step(o, 0.1);
    }
    expect_values(hs_param_data(&m.params, m.weight), (const double[]){0.439, 0.439, 0.439}, 3, 1e-6, "weight");
    expect_values(hs_param_data(&m.params, m.bias), (const double[]){0.439, 1.561}, 2, 1e-6, "bias");
    expect_values(o->state[0] + m.params.tensors[m.bias].offset, (const double[]){2.71, -2.71}, 2, 1e-6,
                  "momentum_buffer");
    hs_optimizer_free(o);
    hs_params_free(&m.params);

    /* no momentum: no buffer, plain p -= lr·(g + wd·p) with wd 0.5: p = 1 - 0.1·(±1 + 0.5) */
    model_init(&m, (const float[]){1.0f, 1.0f, 1.0f}, (const float[]){1.0f, 1.0f});
    o = hs_optimizer_create_named("sgd", &m.params, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0);
    assert_int_equal(o->n_states, 0);
    set_grads(&m, (const float[]){1.0f, 1.0f, 1.0f}, (const float[]){1.0f, -1.0f});
    hs_optimizer_step(o, 0.1);
    expect_values(hs_param_data(&m.params, m.bias), (const double[]){0.85, 1.05}, 2, 1e-7, "bias");
    hs_optimizer_free(o);
    hs_params_free(&m.params);
}

/* Adadelta's first step, rho 0.9, eps 1e-6, lr 1, g = 2: sq = 0.4, delta = sqrt(1e-6)/sqrt(0.400001)·2,
 * p = 1 - delta = 0.99683772629, acc = 0.1·delta² = 9.99997500e-7. */
static void adadelta_first_step(void **state) {
    (void)state;
    model m;
    model_init(&m, (const float[]){1.0f, 1.0f, 1.0f}, (const float[]){1.0f, 1.0f});
    hs_optimizer *o = hs_optimizer_create_named("adadelta", &m.params, 0.0, 0.0, 1e-6, 0.0, 0.9, 0.0);
    assert_string_equal(o->state_names[0], "square_avg");
    assert_string_equal(o->state_names[1], "acc_delta");
    set_grads(&m, (const float[]){2.0f, 2.0f, -2.0f}, (const float[]){0.0f, 2.0f});
    hs_optimizer_step(o, 1.0);
    expect_values(hs_param_data(&m.params, m.weight), (const double[]){0.9968377263, 0.9968377263, 1.0031622737}, 3,
                  1e-7, "weight");
    expect_values(hs_param_data(&m.params, m.bias), (const double[]){1.0, 0.9968377263}, 2, 1e-7, "bias");
    expect_values(o->state[0] + m.params.tensors[m.weight].offset, (const double[]){0.4, 0.4, 0.4}, 3, 1e-7,
                  "square_avg");
    expect_values(o->state[1] + m.params.tensors[m.weight].offset,
                  (const double[]){9.999975e-7, 9.999975e-7, 9.999975e-7}, 3, 1e-12, "acc_delta");
    hs_optimizer_free(o);
    hs_params_free(&m.params);
}

/* Gradients (3, 4, 0 | 12, 0) have norm 13. Clipping at 6.5 halves them (coef 6.5/(13 + 1e-6));
 * clipping at 100 or 0 (off) leaves them as they are; the pre-clip norm is returned each time. */
static void clip_scales_by_global_norm(void **state) {
    (void)state;
    model m;
    model_init(&m, (const float[]){0, 0, 0}, (const float[]){0, 0});
    set_grads(&m, (const float[]){3.0f, 4.0f, 0.0f}, (const float[]){12.0f, 0.0f});
    assert_true(fabs(hs_clip_grad_norm(&m.params, 0.0) - 13.0) < 1e-12);
    assert_true(fabs(hs_clip_grad_norm(&m.params, 100.0) - 13.0) < 1e-12);
    expect_values(hs_param_grad(&m.params, m.bias), (const double[]){12.0, 0.0}, 2, 0.0, "grad bias");
    assert_true(fabs(hs_clip_grad_norm(&m.params, 6.5) - 13.0) < 1e-12);
    const double coef = 6.5 / (13.0 + 1e-6);
    expect_values(hs_param_grad(&m.params, m.weight), (const double[]){3 * coef, 4 * coef, 0.0}, 3, 1e-6,
                  "grad weight");
    expect_values(hs_param_grad(&m.params, m.bias), (const double[]){12 * coef, 0.0}, 2, 1e-6, "grad bias");
    assert_true(fabs(hs_clip_grad_norm(&m.params, 0.0) - 6.5) < 1e-5);
    hs_params_free(&m.params);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(adam_constant_gradient_steps_by_lr),
        cmocka_unit_test(adamw_leaves_unflagged_tensors_undecayed),
        cmocka_unit_test(sgd_momentum_accumulates),
        cmocka_unit_test(adadelta_first_step),
        cmocka_unit_test(clip_scales_by_global_norm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
