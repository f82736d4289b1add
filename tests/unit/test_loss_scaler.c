/* The dynamic loss scaler's rule, step by step against torch.cuda.amp.GradScaler's documented semantics
 * (init_scale, growth_factor, backoff_factor, growth_interval) with apex's caps (min/max scale), and
 * the experiment-file keys: "auto" follows the precision, the defaults are apex's. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "train/loss_scaler.h"
#include "train/train_config.h"

static hs_loss_scaler_config cfg_of(double init, double growth, double backoff, int64_t interval, double lo,
                                    double hi) {
    hs_loss_scaler_config c = {.enabled = 1, .init_scale = init, .growth_factor = growth,
                               .backoff_factor = backoff, .growth_interval = interval, .min_scale = lo,
                               .max_scale = hi};
    return c;
}

/* Good updates grow S by growth_factor every growth_interval of them; an overflow halves S, resets the
 * count and is counted as skipped. */
static void growth_and_backoff(void **state) {
    (void)state;
    hs_loss_scaler_config c = cfg_of(1024.0, 2.0, 0.5, 3, 1.0, 1e9);
    hs_loss_scaler s;
    hs_loss_scaler_init(&s, &c);
    assert_true(s.scale == 1024.0);
    /* overflow at update 5 of 12; growth after updates 3, 8 (5 resets), 11 */
    const int overflow_at = 5;
    const double want[13] = {0, 1024, 1024, 2048, 2048, 1024, 1024, 1024, 2048, 2048, 2048, 4096, 4096};
    for (int u = 1; u <= 12; u++) {
        hs_scaler_result r = hs_loss_scaler_update(&s, u == overflow_at);
        assert_int_equal(r, u == overflow_at ? HS_SCALER_SKIP : HS_SCALER_STEP);
        if (s.scale != want[u]) fail_msg("after update %d: scale %g, expected %g", u, s.scale, want[u]);
    }
    assert_int_equal(s.skipped, 1);
    assert_int_equal(s.good_steps, 1); /* update 12, after the growth at 11 */
}

/* Growth stops at max_scale; a backoff below min_scale is reported, not clamped. */
static void caps(void **state) {
    (void)state;
    hs_loss_scaler_config c = cfg_of(4.0, 2.0, 0.5, 1, 2.0, 8.0);
    hs_loss_scaler s;
    hs_loss_scaler_init(&s, &c);
    assert_int_equal(hs_loss_scaler_update(&s, 0), HS_SCALER_STEP);
    assert_true(s.scale == 8.0);
    assert_int_equal(hs_loss_scaler_update(&s, 0), HS_SCALER_STEP);
    assert_true(s.scale == 8.0); /* capped */
    assert_int_equal(hs_loss_scaler_update(&s, 1), HS_SCALER_SKIP);
    assert_int_equal(hs_loss_scaler_update(&s, 1), HS_SCALER_SKIP);
    assert_true(s.scale == 2.0); /* == min_scale: still allowed */
    assert_int_equal(hs_loss_scaler_update(&s, 1), HS_SCALER_UNDERFLOW);
    assert_int_equal(s.skipped, 3);
}

/* A non-power-of-two growth factor that would pass max_scale lands on max_scale exactly. */
static void growth_clamps_to_max(void **state) {
    (void)state;
    hs_loss_scaler_config c = cfg_of(10.0, 3.0, 0.25, 2, 1.0, 50.0);
    hs_loss_scaler s;
    hs_loss_scaler_init(&s, &c);
    hs_loss_scaler_update(&s, 0);
    assert_true(s.scale == 10.0);
    hs_loss_scaler_update(&s, 0);
    assert_true(s.scale == 30.0);
    hs_loss_scaler_update(&s, 0);
    hs_loss_scaler_update(&s, 0);
    assert_true(s.scale == 50.0);
    hs_loss_scaler_update(&s, 1);
    assert_true(s.scale == 12.5);
}

/* A checkpoint's state replaces the fresh one; a checkpoint without it (scale 0) keeps init_scale. */
static void restore(void **state) {
    (void)state;
    hs_loss_scaler_config c = cfg_of(1024.0, 2.0, 0.5, 3, 1.0, 1e9);
    hs_loss_scaler s;
    hs_loss_scaler_init(&s, &c);
    hs_loss_scaler_restore(&s, 0.0, 7, 9);
    assert_true(s.scale == 1024.0);
    assert_int_equal(s.good_steps, 0);
    assert_int_equal(s.skipped, 0);
    hs_loss_scaler_restore(&s, 512.0, 2, 1);
    assert_true(s.scale == 512.0);
    hs_loss_scaler_update(&s, 0); /* the third good update since the last change: grows */
    assert_true(s.scale == 1024.0);
    assert_int_equal(s.skipped, 1);
}

static hs_config *load(const char *text) { return hs_config_load_string(text, "exp.cfg", 0, NULL); }

/* The schema's defaults are apex's; "auto" is on for fp16 only, "on"/"off" override the precision. */
static void config_keys(void **state) {
    (void)state;
    hs_loss_scaler_config c;
    hs_config *cfg = load("");
    hs_loss_scaler_config_load(cfg, "fp16", &c);
    assert_int_equal(c.enabled, 1);
    assert_true(c.init_scale == 1048576.0 && c.growth_factor == 2.0 && c.backoff_factor == 0.5);
    assert_int_equal(c.growth_interval, 2000);
    assert_true(c.min_scale == 1.0 && c.max_scale == 16777216.0);
    hs_loss_scaler_config_load(cfg, "fp32", &c);
    assert_int_equal(c.enabled, 0);
    hs_loss_scaler_config_load(cfg, "bf16", &c);
    assert_int_equal(c.enabled, 0);
    hs_config_free(cfg);
    cfg = load("loss_scaler: { enabled = \"on\"; growth_interval = 5; };");
    hs_loss_scaler_config_load(cfg, "fp32", &c);
    assert_int_equal(c.enabled, 1);
    assert_int_equal(c.growth_interval, 5);
    hs_config_free(cfg);
    cfg = load("loss_scaler: { enabled = \"off\"; };");
    hs_loss_scaler_config_load(cfg, "fp16", &c);
    assert_int_equal(c.enabled, 0);
    hs_config_free(cfg);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(growth_and_backoff),  cmocka_unit_test(caps),   cmocka_unit_test(growth_clamps_to_max),
        cmocka_unit_test(restore),             cmocka_unit_test(config_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
