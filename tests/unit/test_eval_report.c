/* The numbers `hetseq eval` reports: latency percentiles as numpy.percentile computes them (the values
 * below are numpy's for the same inputs: np.percentile(x, p), default linear method), the warm-up steps
 * left out, and the JSON report a user's script reads (valid JSON, the documented fields, no NaN). */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <setjmp.h>
#include <cmocka.h>

#include "train/eval_report.h"

#define NEAR(a, b) assert_true(fabs((a) - (b)) <= 1e-12 * (1.0 + fabs(b)))

static void test_percentile_numpy_linear(void **state) {
    (void)state;
    const double ten[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    /* np.percentile(np.arange(1, 11), [0, 50, 90, 95, 99, 100]) = [1, 5.5, 9.1, 9.55, 9.91, 10] */
    NEAR(hs_percentile_sorted(ten, 10, 0), 1.0);
    NEAR(hs_percentile_sorted(ten, 10, 50), 5.5);
    NEAR(hs_percentile_sorted(ten, 10, 90), 9.1);
    NEAR(hs_percentile_sorted(ten, 10, 95), 9.55);
    NEAR(hs_percentile_sorted(ten, 10, 99), 9.91);
    NEAR(hs_percentile_sorted(ten, 10, 100), 10.0);
    /* np.percentile([2, 3, 5, 100], [25, 50, 90]) = [2.75, 4, 71.5]: one outlier pulls p90 */
    const double four[] = {2, 3, 5, 100};
    NEAR(hs_percentile_sorted(four, 4, 25), 2.75);
    NEAR(hs_percentile_sorted(four, 4, 50), 4.0);
    NEAR(hs_percentile_sorted(four, 4, 90), 71.5);
    /* one value: every percentile is it */
    const double one[] = {7.25};
    NEAR(hs_percentile_sorted(one, 1, 0), 7.25);
    NEAR(hs_percentile_sorted(one, 1, 99), 7.25);
}

/* Non-decreasing in p on any sorted input, and within [min, max]. */
static void test_percentile_monotone(void **state) {
    (void)state;
    double x[37];
    unsigned r = 12345;
    for (int i = 0; i < 37; i++) {
        r = r * 1103515245u + 12345u;
        x[i] = (double)(r >> 8) / 1e3;
    }
    for (int i = 1; i < 37; i++) /* insertion sort */
        for (int j = i; j > 0 && x[j - 1] > x[j]; j--) {
            double t = x[j];
            x[j] = x[j - 1];
            x[j - 1] = t;
        }
    double prev = -INFINITY;
    for (double p = 0; p <= 100.0; p += 0.5) {
        double v = hs_percentile_sorted(x, 37, p);
        assert_true(v >= prev);
        assert_true(v >= x[0] && v <= x[36]);
        prev = v;
    }
}

static void test_summary_warmup(void **state) {
    (void)state;
    /* two slow warm-up steps, then 1..10 out of order */
    const double t[] = {50, 40, 10, 1, 9, 2, 8, 3, 7, 4, 6, 5};
    hs_latency_summary s;
    hs_latency_summarize(t, 12, 2, &s);
    assert_int_equal(s.warmup, 2);
    assert_int_equal(s.measured, 10);
    NEAR(s.mean, 5.5);
    NEAR(s.p50, 5.5);
    NEAR(s.p90, 9.1);
    NEAR(s.p99, 9.91);
    /* without warm-up the slow steps count: np.mean = 145/12, p99 of the 12 values */
    hs_latency_summarize(t, 12, 0, &s);
    assert_int_equal(s.measured, 12);
    NEAR(s.mean, 145.0 / 12.0);
    NEAR(s.p99, 40 + 0.89 * 10); /* h = 11·0.99 = 10.89 between 40 and 50 */
    /* a pass shorter than the warm-up: one step is still measured (the last) */
    hs_latency_summarize(t, 2, 5, &s);
    assert_int_equal(s.warmup, 1);
    assert_int_equal(s.measured, 1);
    NEAR(s.p50, 40.0);
    hs_latency_summarize(t, 0, 2, &s);
    assert_int_equal(s.measured, 0);
}

static json_object *parse(const char *text) {
    json_tokener *tok = json_tokener_new();
    assert_non_null(tok);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *o = json_tokener_parse_ex(tok, text, (int)strlen(text));
    assert_int_equal(json_tokener_get_error(tok), json_tokener_success);
    json_tokener_free(tok);
    assert_non_null(o);
    return o;
}

static double get_double(json_object *o, const char *key) {
    json_object *v;
    assert_true(json_object_object_get_ex(o, key, &v));
    assert_true(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int));
    return json_object_get_double(v);
}

static void test_report_json(void **state) {
    (void)state;
    const double steps[] = {0.5, 0.010, 0.012, 0.011};
    hs_eval_report r = {.task = "bert", .split = "valid", .checkpoint = "ck/checkpoint_last.h5", .device = "cpu",
                        .world_size = 2, .loss = 6.5,
                        .task_fields = ", \"mlm_acc\": 0.250000, \"nsp_acc\": nan, \"loss\": 1, \"name\": \"x\"",
                        .samples = 40, .tokens = 1280, .seconds = 0.8, .steps = 4, .step_seconds = steps};
    hs_latency_summarize(steps, 4, 1, &r.latency);
    char *text = hs_eval_report_json(&r);
    assert_null(strstr(text, "nan"));
    json_object *o = parse(text);
    assert_string_equal(json_object_get_string(json_object_object_get(o, "task")), "bert");
    assert_string_equal(json_object_get_string(json_object_object_get(o, "checkpoint")), "ck/checkpoint_last.h5");
    NEAR(get_double(o, "loss"), 6.5); /* a task field cannot replace a standard one */
    NEAR(get_double(o, "mlm_acc"), 0.25);
    json_object *v;
    assert_true(json_object_object_get_ex(o, "nsp_acc", &v));
    assert_null(v); /* NaN -> null */
    assert_string_equal(json_object_get_string(json_object_object_get(o, "name")), "x");
    assert_int_equal(json_object_get_int64(json_object_object_get(o, "samples")), 40);
    assert_true(fabs(get_double(o, "samples_per_s") - 50.0) < 1e-8);
    assert_true(fabs(get_double(o, "tokens_per_s") - 1600.0) < 1e-8);
    json_object *lat = json_object_object_get(o, "latency_ms");
    assert_non_null(lat);
    assert_true(fabs(get_double(lat, "p50") - 11.0) < 1e-8);
    assert_true(fabs(get_double(lat, "mean") - 11.0) < 1e-8);
    assert_int_equal(json_object_get_int(json_object_object_get(o, "warmup_steps")), 1);
    json_object *arr = json_object_object_get(o, "step_latency_ms");
    assert_int_equal((int)json_object_array_length(arr), 4);
    assert_true(fabs(json_object_get_double(json_object_array_get_idx(arr, 0)) - 500.0) < 1e-8);
    json_object_put(o);
    free(text);

    /* no tokens (not a sequence task): null, as is a figure over zero seconds */
    r.tokens = -1;
    r.seconds = 0;
    r.task_fields = "";
    text = hs_eval_report_json(&r);
    o = parse(text);
    assert_true(json_object_object_get_ex(o, "tokens", &v));
    assert_null(v);
    assert_true(json_object_object_get_ex(o, "samples_per_s", &v));
    assert_null(v);
    json_object_put(o);
    free(text);
}

/* A task's metric by name (the perplexity `hetseq eval` prints for a language model). */
static void test_task_field(void **state) {
    (void)state;
    double v = 0;
    assert_true(hs_task_field(", \"ppl\": 23.3041, \"tokens\": 245569", "ppl", &v));
    NEAR(v, 23.3041);
    assert_true(hs_task_field(", \"ppl\": inf", "ppl", &v));
    assert_true(isnan(v));
    assert_false(hs_task_field(", \"mlm_acc\": 0.5", "ppl", &v));
    assert_false(hs_task_field(", \"ppl\": \"high\"", "ppl", &v)); /* not a number */
    assert_false(hs_task_field("", "ppl", &v));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_percentile_numpy_linear),
        cmocka_unit_test(test_percentile_monotone),
        cmocka_unit_test(test_summary_warmup),
        cmocka_unit_test(test_report_json),
        cmocka_unit_test(test_task_field),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
