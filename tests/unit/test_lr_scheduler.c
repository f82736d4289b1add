/* The learning rate a user sees at each update, for every schedule, checked against values worked out
 * by hand (and, for HetSeq and NVIDIA BERT, against numbers from their logs and scripts). The trainer's
 * protocol is simulated: init gives the lr of update 1, step_update(n) after update n gives the lr of
 * update n+1, step_epoch at each epoch end. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "optim/lr_scheduler.h"

static void assert_near(double got, double want, double rel) {
    double tol = rel * fabs(want) + 1e-300;
    if (!(fabs(got - want) <= tol)) fail_msg("lr %.17g, expected %.17g (rel tol %g)", got, want, rel);
}

/* lr of update k (1-based) = value after step_update(k-1). */
static double lr_of_update(hs_lr_scheduler *s, int64_t k) { return hs_lr_step_update(s, k - 1); }

/* HetSeq's log line "num_updates=2, lr=9.9996e-05" (lr 1e-4, total 50000, no warmup): the lr printed
 * after update 2 is f(2) = 1e-4·(1 - 2/50000). */
static void poly_decay_matches_hetseq_log(void **state) {
    (void)state;
    hs_lr_scheduler s;
    hs_lr_init_params(&s, "polynomial_decay", 1e-4, 0, 0.0, 50000, 0.0, 1.0, 0);
    assert_near(s.lr, 1e-4, 1e-15); /* update 1 runs at the full lr */
    hs_lr_step_update(&s, 1);
    assert_near(hs_lr_step_update(&s, 2), 9.9996e-05, 1e-12);
    assert_near(hs_lr_step_update(&s, 25000), 5e-5, 1e-12);
    assert_near(hs_lr_step_update(&s, 49999), 2e-9, 1e-9);
    assert_true(hs_lr_step_update(&s, 50000) == 0.0); /* n >= total: end_learning_rate */
    assert_true(hs_lr_step_update(&s, 70000) == 0.0);
}

/* BERT scripts: lr 1e-4, warmup 10000, total 1e6. The first update runs with lr 0 (f(0)). */
static void poly_decay_warmup_starts_at_zero(void **state) {
    (void)state;
    hs_lr_scheduler s;
    hs_lr_init_params(&s, "polynomial_decay", 1e-4, 10000, 0.0, 1000000, 0.0, 1.0, 0);
    assert_true(s.lr == 0.0);
    assert_near(lr_of_update(&s, 1), 0.0, 0.0);
    assert_near(lr_of_update(&s, 2), 1e-8, 1e-12);
    assert_near(lr_of_update(&s, 5001), 5e-5, 1e-12);
    assert_near(lr_of_update(&s, 10001), 1e-4, 1e-12);                /* f(10000): warmup still, = base */
    assert_near(lr_of_update(&s, 10002), 9.9999898989899e-05, 1e-12); /* 1e-4·(1 - 1/990000) */
}

/* power 2 and an end lr: f(n) = (base-end)·(1-n/T)² + end. */
static void poly_decay_power_and_end_lr(void **state) {
    (void)state;
    hs_lr_scheduler s;
    hs_lr_init_params(&s, "polynomial_decay", 1e-3, 0, 0.0, 100, 1e-5, 2.0, 0);
    assert_near(hs_lr_step_update(&s, 50), 2.575e-4, 1e-12); /* 0.99e-3·0.25 + 1e-5 */
    assert_near(hs_lr_step_update(&s, 90), 1.99e-5, 1e-12);  /* 0.99e-3·0.01 + 1e-5 */
    assert_near(hs_lr_step_update(&s, 100), 1e-5, 1e-15);
    assert_near(hs_lr_step_update(&s, 1000), 1e-5, 1e-15);
}

/* force_anneal = 2, two updates per epoch, base 1, total 10, linear. Epoch 1 ends with the configured
 * base; from epoch 2 on each epoch end re-bases on the current (decayed) lr, so the decay compounds. */
static void poly_decay_force_anneal_compounds(void **state) {
    (void)state;
    hs_lr_scheduler s;
    hs_lr_init_params(&s, "polynomial_decay", 1.0, 0, 0.0, 10, 0.0, 1.0, 2);
    hs_lr_step_update(&s, 1);
    assert_near(hs_lr_step_update(&s, 2), 0.8, 1e-12);
    assert_near(hs_lr_step_epoch(&s, 1, 2), 0.8, 1e-12); /* epoch 1 < 2: base stays 1 */
    hs_lr_step_update(&s, 3);
    assert_near(hs_lr_step_update(&s, 4), 0.6, 1e-12);
    assert_near(hs_lr_step_epoch(&s, 2, 4), 0.36, 1e-12); /* base = 0.6, lr = 0.6·(1-4/10) */
    hs_lr_step_update(&s, 5);
    assert_near(hs_lr_step_update(&s, 6), 0.24, 1e-12); /* 0.6·0.4 */
    assert_near(hs_lr_step_epoch(&s, 3, 6), 0.096, 1e-12); /* base = 0.24, lr = 0.24·0.4 */

    /* force_anneal = 0: epoch ends change nothing. */
    hs_lr_init_params(&s, "polynomial_decay", 1.0, 0, 0.0, 10, 0.0, 1.0, 0);
    for (int64_t n = 1; n <= 6; n++) hs_lr_step_update(&s, n);
    assert_near(hs_lr_step_epoch(&s, 3, 6), 0.4, 1e-12);
    assert_near(hs_lr_step_epoch(&s, 4, 6), 0.4, 1e-12);
}

/* NVIDIA phase-1 BERT: lr 6e-3, warmup_proportion 0.2843, 7038 updates, degree 0.5. Their numbers:
 * lr(1) = 3.0e-6, lr(2000) ≈ 6.00e-3, lr(2001) ≈ 5.08e-3 (the jump after warmup), 0 at the end. */
static void poly_warmup_matches_nvidia_phase1(void **state) {
    (void)state;
    hs_lr_scheduler s;
    hs_lr_init_params(&s, "poly_warmup", 6e-3, 0, 0.2843, 7038, 0.0, 0.5, 0);
    assert_near(s.lr, 2.9986455118223097e-06, 1e-12);
    assert_near(lr_of_update(&s, 2000), 0.00599729102364462, 1e-12);
    assert_near(lr_of_update(&s, 2001), 0.005075894589365794, 1e-12);
    assert_true(lr_of_update(&s, 7038) == 0.0);
    assert_true(lr_of_update(&s, 8000) == 0.0);
    /* an end lr lifts the decay floor: lr(k) = end + (base-end)·sqrt(1-k/T) */
    hs_lr_init_params(&s, "poly_warmup", 1.0, 0, 0.0, 100, 0.1, 0.5, 0);
    assert_near(lr_of_update(&s, 75), 0.55, 1e-12); /* 0.1 + 0.9·0.5 */
    assert_near(lr_of_update(&s, 100), 0.1, 1e-15);
}

/* Warmup 10 to base 1, then half a cosine down to 0.1 at update count 110. */
static void cosine_warmup_then_half_cosine(void **state) {
    (void)state;
    hs_lr_scheduler s;
    hs_lr_init_params(&s, "cosine", 1.0, 10, 0.0, 110, 0.1, 1.0, 0);
    assert_true(s.lr == 0.0);
    assert_near(hs_lr_step_update(&s, 5), 0.5, 1e-15);
    assert_near(hs_lr_step_update(&s, 10), 1.0, 1e-15);
    assert_near(hs_lr_step_update(&s, 35), 0.8681980515339464, 1e-12); /* 0.1 + 0.45·(1 + cos(pi/4)) */
    assert_near(hs_lr_step_update(&s, 60), 0.55, 1e-12);               /* 0.1 + 0.45·(1 + cos(pi/2)) */
    assert_near(hs_lr_step_update(&s, 110), 0.1, 1e-15);
    assert_near(hs_lr_step_update(&s, 500), 0.1, 1e-15);
}

/* fairseq inverse_sqrt, warmup 4: linear to 1e-3 at n = 4, then 1e-3·sqrt(4/n). */
static void inverse_sqrt_after_warmup(void **state) {
    (void)state;
    hs_lr_scheduler s;
    hs_lr_init_params(&s, "inverse_sqrt", 1e-3, 4, 0.0, 0, 0.0, 1.0, 0);
    assert_true(s.lr == 0.0);
    assert_near(hs_lr_step_update(&s, 2), 5e-4, 1e-15);
    assert_near(hs_lr_step_update(&s, 4), 1e-3, 1e-15);
    assert_near(hs_lr_step_update(&s, 16), 5e-4, 1e-15);
    assert_near(hs_lr_step_update(&s, 100), 2e-4, 1e-15);
}

static void constant_with_and_without_warmup(void **state) {
    (void)state;
    hs_lr_scheduler s;
    hs_lr_init_params(&s, "constant", 0.5, 0, 0.0, 10, 0.0, 1.0, 0);
    assert_near(s.lr, 0.5, 0.0);
    assert_near(hs_lr_step_update(&s, 1000), 0.5, 0.0); /* total does not end it */
    assert_near(hs_lr_step_epoch(&s, 3, 1000), 0.5, 0.0);
    hs_lr_init_params(&s, "constant", 0.5, 4, 0.0, 10, 0.0, 1.0, 0);
    assert_true(s.lr == 0.0);
    assert_near(hs_lr_step_update(&s, 1), 0.125, 1e-15);
    assert_near(hs_lr_step_update(&s, 4), 0.5, 0.0);
    assert_near(hs_lr_step_update(&s, 40), 0.5, 0.0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(poly_decay_matches_hetseq_log),
        cmocka_unit_test(poly_decay_warmup_starts_at_zero),
        cmocka_unit_test(poly_decay_power_and_end_lr),
        cmocka_unit_test(poly_decay_force_anneal_compounds),
        cmocka_unit_test(poly_warmup_matches_nvidia_phase1),
        cmocka_unit_test(cosine_warmup_then_half_cosine),
        cmocka_unit_test(inverse_sqrt_after_warmup),
        cmocka_unit_test(constant_with_and_without_warmup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
