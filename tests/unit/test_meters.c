/* The metrics file (JSON lines) and log.format = "json" as a user's script reads them: every line is
 * one valid JSON object (RFC 8259: no NaN, no Infinity) with the documented fields in the documented
 * order (docs/data-formats.md), also when training diverged and the loss, the gradient norm, the
 * learning rate or a task's own metric is NaN or infinite (those become null); a task's fields are
 * parsed, never pasted, so a task that prints them badly cannot break a line; every record is on disk
 * as soon as it is logged (a killed run keeps them), and resuming after a run that was killed in the
 * middle of a record leaves only complete lines. */
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json-c/json.h>
#include <setjmp.h>
#include <cmocka.h>

#include "train/meters.h"
#include "util/log.h"

/* json_tokener_get_parse_end() is json-c >= 0.15; older releases (0.13, 0.14: still common on
 * clusters) expose the offset as a field. */
#if defined(JSON_C_VERSION_NUM) && JSON_C_VERSION_NUM >= ((0 << 16) | (15 << 8))
#define HS_JSON_PARSE_END(tok) json_tokener_get_parse_end(tok)
#else
#define HS_JSON_PARSE_END(tok) ((size_t)(tok)->char_offset)
#endif

static char g_dir[256];
static char g_path[300];

/* ---- a task whose own fields the test controls ---------------------------------------------------- */

enum { FIELDS_BERT, FIELDS_STRINGS, FIELDS_BROKEN, FIELDS_COLLIDING };
static int g_fields = FIELDS_BERT;

/* As bert_task.c does it: per-token means printed with %.6f, so a NaN arrives as "nan" or "-nan". */
static void fake_format_stats(const hs_stats *s, int json, char *buf, size_t n) {
    double mlm_loss = s->extra[0] / s->extra[1], nsp_acc = s->extra[2] / s->sample_count;
    switch (g_fields) {
    case FIELDS_BERT:
        if (json) snprintf(buf, n, ", \"mlm_loss\": %.6f, \"nsp_acc\": %.6f", mlm_loss, nsp_acc);
        else snprintf(buf, n, ", mlm_loss=%.4f, nsp_acc=%.4f", mlm_loss, nsp_acc);
        break;
    case FIELDS_STRINGS: /* commas, quotes and brackets inside values */
        snprintf(buf, n, ", \"note\": \"a, \\\"b\\\" [c]\" , \"pair\": [1, {\"x\": 2}], \"flag\": true, \"none\": null");
        break;
    case FIELDS_BROKEN: /* the simple format where JSON was asked for */
        snprintf(buf, n, ", mlm_loss=%.4f", mlm_loss);
        break;
    case FIELDS_COLLIDING:
        snprintf(buf, n, ", \"loss\": 123.0, \"own\": 1.5");
        break;
    }
}

static hs_task g_task = {.name = "fake", .format_stats = fake_format_stats, .tokens_per_sample = 16};

static const char *const TRAIN_KEYS[] = {"type", "epoch", "num_updates", "loss", "loss_nats_interval",
                                         "accuracy_interval", "lr", "gnorm", "samples_per_sec", "tokens_per_sec",
                                         "mlm_loss", "nsp_acc", "world_size", "wall", NULL};
static const char *const VALID_KEYS[] = {"type", "epoch", "num_updates", "loss", "nll_loss", "accuracy",
                                         "mlm_loss", "nsp_acc", "samples", "wall", NULL};

/* ---- reading what was written --------------------------------------------------------------------- */

typedef struct {
    char *line[16];
    int n;
    int ends_with_newline;
} lines;

static void read_lines(const char *path, lines *out) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char buf[4096];
    int last = '\n';
    while (fgets(buf, sizeof buf, f)) {
        size_t len = strlen(buf);
        last = len ? buf[len - 1] : last;
        if (len && buf[len - 1] == '\n') buf[--len] = 0;
        assert_true(out->n < 16);
        out->line[out->n++] = strdup(buf);
    }
    out->ends_with_newline = last == '\n';
    assert_int_equal(fclose(f), 0);
}

static void free_lines(lines *l) {
    for (int i = 0; i < l->n; i++) free(l->line[i]);
}

/* json-c accepts NaN and Infinity even in strict mode; JSON does not. */
static void assert_only_json_numbers(json_object *o) {
    if (json_object_is_type(o, json_type_double)) {
        assert_true(isfinite(json_object_get_double(o)));
    } else if (json_object_is_type(o, json_type_object)) {
        json_object_object_foreach(o, k, v) {
            (void)k;
            assert_only_json_numbers(v);
        }
    } else if (json_object_is_type(o, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(o); i++) assert_only_json_numbers(json_object_array_get_idx(o, i));
    }
}

/* The line as a JSON object, parsed strictly; fails the test if it is not one. */
static json_object *parse_line(const char *line) {
    json_tokener *tok = json_tokener_new();
    assert_non_null(tok);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *o = json_tokener_parse_ex(tok, line, (int)strlen(line));
    enum json_tokener_error err = json_tokener_get_error(tok);
    size_t end = HS_JSON_PARSE_END(tok);
    json_tokener_free(tok);
    if (err != json_tokener_success || end != strlen(line) || !json_object_is_type(o, json_type_object)) {
        print_error("not one JSON object (%s): %s\n", json_tokener_error_desc(err), line);
        fail();
    }
    if (strstr(line, "NaN") || strstr(line, "nan") || strstr(line, "Infinity") || strstr(line, "inf,")) {
        print_error("a non-finite number in: %s\n", line);
        fail();
    }
    assert_only_json_numbers(o);
    return o;
}

static void assert_keys(json_object *o, const char *const *want) {
    int i = 0;
    json_object_object_foreach(o, key, val) {
        (void)val;
        if (!want[i] || strcmp(key, want[i])) {
            print_error("field %d is \"%s\", want \"%s\"\n", i, key, want[i] ? want[i] : "(end)");
            fail();
        }
        i++;
    }
    if (want[i]) {
        print_error("field \"%s\" missing\n", want[i]);
        fail();
    }
}

static json_object *field(json_object *o, const char *key) {
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v)) {
        print_error("no field \"%s\"\n", key);
        fail();
    }
    return v;
}

static void assert_number(json_object *o, const char *key, double want, double tol) {
    json_object *v = field(o, key);
    assert_true(json_object_is_type(v, json_type_double) || json_object_is_type(v, json_type_int));
    double got = json_object_get_double(v);
    if (!(fabs(got - want) <= tol)) {
        print_error("%s = %.17g, want %.17g\n", key, got, want);
        fail();
    }
}

static void assert_json_null(json_object *o, const char *key) {
    json_object *v = field(o, key);
    if (v != NULL) {
        print_error("%s = %s, want null\n", key, json_object_to_json_string(v));
        fail();
    }
}

/* ---- fixtures --------------------------------------------------------------------------------- */

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "%s/hetseq-meters.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_dir)) return -1;
    snprintf(g_path, sizeof g_path, "%s/metrics.jsonl", g_dir);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(g_path);
    rmdir(g_dir);
    return 0;
}

static int before_each(void **state) {
    (void)state;
    unlink(g_path);
    g_fields = FIELDS_BERT;
    hs_log_set_rank(0);
    return 0;
}

/* 7 updates into epoch 2, cumulative loss 2 bits per sample, 4 samples in the interval */
static void finite_state(hs_train_state *st, hs_stats *iv) {
    memset(st, 0, sizeof *st);
    st->epoch = 2;
    st->num_updates = 7;
    st->meter_loss_sum = 2.0 * M_LN2 * 28;
    st->meter_sample_count = 28;
    st->meter_gnorm_sum = 3.5;
    st->meter_updates = 7;
    memset(iv, 0, sizeof *iv);
    iv->loss_sum = 6.0, iv->sample_count = 4, iv->correct = 3;
    iv->extra[0] = 5.0, iv->extra[1] = 10.0, iv->extra[2] = 2.0; /* mlm_loss 0.5, nsp_acc 0.5 */
}

/* ---- tests -------------------------------------------------------------------------------------- */

static void test_records_have_the_documented_fields(void **unused) {
    (void)unused;
    hs_meters m;
    hs_train_state st;
    hs_stats iv;
    finite_state(&st, &iv);
    hs_meters_init(&m, &g_task, g_path, 0);
    m.format = "none";
    m.interval = iv;
    hs_meters_log_train(&m, &st, 3, 10, 1.25e-4, 2);
    hs_meters_log_valid(&m, &st, "valid", &iv, 0.5);

    /* On disk before the file is closed: flushed per record. */
    lines l;
    read_lines(g_path, &l);
    assert_int_equal(l.n, 2);
    assert_true(l.ends_with_newline);
    json_object *t = parse_line(l.line[0]), *v = parse_line(l.line[1]);
    assert_keys(t, TRAIN_KEYS);
    assert_keys(v, VALID_KEYS);
    assert_string_equal(json_object_get_string(field(t, "type")), "train");
    assert_true(json_object_is_type(field(t, "epoch"), json_type_int));
    assert_int_equal(json_object_get_int64(field(t, "epoch")), 2);
    assert_int_equal(json_object_get_int64(field(t, "num_updates")), 7);
    assert_int_equal(json_object_get_int64(field(t, "world_size")), 2);
    assert_number(t, "loss", 2.0, 1e-6);
    assert_number(t, "loss_nats_interval", 1.5, 1e-6);
    assert_number(t, "accuracy_interval", 0.75, 1e-6);
    assert_number(t, "lr", 1.25e-4, 1e-12);
    assert_number(t, "gnorm", 0.5, 1e-6);
    assert_number(t, "mlm_loss", 0.5, 1e-6);
    assert_number(t, "nsp_acc", 0.5, 1e-6);
    assert_string_equal(json_object_get_string(field(v, "type")), "valid");
    assert_number(v, "loss", 1.5 / M_LN2, 1e-6);
    assert_number(v, "nll_loss", 1.5, 1e-6);
    assert_number(v, "accuracy", 0.75, 1e-6);
    assert_number(v, "samples", 4, 0);
    /* The layout the shell tools grep for ("key": value, ", " between fields, loss right after
     * num_updates, gnorm right after lr) and the precision the file always had. */
    assert_non_null(strstr(l.line[0], "\"type\": \"train\", \"epoch\": 2, \"num_updates\": 7, \"loss\": 2.000000, "));
    assert_non_null(strstr(l.line[0], "\"lr\": 0.000125, \"gnorm\": 0.500000, "));
    assert_non_null(strstr(l.line[1], "\"type\": \"valid\""));
    json_object_put(t);
    json_object_put(v);
    free_lines(&l);
    hs_meters_close(&m);
}

static void test_non_finite_numbers_are_null(void **unused) {
    (void)unused;
    hs_meters m;
    hs_train_state st;
    hs_stats iv;
    FILE *console = tmpfile();
    assert_non_null(console);
    finite_state(&st, &iv);
    st.meter_loss_sum = NAN;         /* the loss diverged */
    st.meter_gnorm_sum = INFINITY;   /* an overflowing gradient */
    iv.loss_sum = -INFINITY;
    iv.extra[0] = NAN;               /* mlm_loss: nan */
    iv.extra[2] = -INFINITY;         /* nsp_acc: -inf */
    hs_meters_init(&m, &g_task, g_path, 0);
    m.format = "json";
    m.console = console;
    m.interval = iv;
    m.interval_time = 0.5;
    hs_meters_log_train(&m, &st, 1, 10, NAN, 1);
    iv.extra[0] = -NAN;              /* printf writes -nan */
    iv.extra[1] = 0.0, iv.extra[2] = INFINITY;
    hs_meters_log_valid(&m, &st, "valid", &iv, 0.1);
    hs_meters_close(&m);

    lines l;
    read_lines(g_path, &l);
    assert_int_equal(l.n, 2);
    json_object *t = parse_line(l.line[0]), *v = parse_line(l.line[1]);
    assert_keys(t, TRAIN_KEYS);
    assert_keys(v, VALID_KEYS);
    assert_json_null(t, "loss");
    assert_json_null(t, "loss_nats_interval");
    assert_json_null(t, "lr");
    assert_json_null(t, "gnorm");
    assert_json_null(t, "mlm_loss");
    assert_json_null(t, "nsp_acc");
    assert_number(t, "samples_per_sec", 8.0, 1e-9); /* finite fields stay numbers */
    assert_number(t, "tokens_per_sec", 128.0, 1e-9);
    assert_json_null(v, "loss");
    assert_json_null(v, "nll_loss");
    assert_json_null(v, "mlm_loss");
    assert_json_null(v, "nsp_acc");
    assert_number(v, "accuracy", 0.75, 1e-6);

    /* log.format = "json": the console gets the same record as the file (and no validation record:
     * validation lines keep HetSeq's text format on the console). */
    rewind(console);
    char buf[4096];
    assert_non_null(fgets(buf, sizeof buf, console));
    buf[strcspn(buf, "\n")] = 0;
    assert_string_equal(buf, l.line[0]);
    json_object_put(parse_line(buf));
    assert_non_null(fgets(buf, sizeof buf, console));
    assert_true(strncmp(buf, "| epoch 002 | valid on 'valid' subset", 37) == 0);
    assert_int_equal(fclose(console), 0);
    json_object_put(t);
    json_object_put(v);
    free_lines(&l);
}

static void test_task_fields_are_parsed_not_pasted(void **unused) {
    (void)unused;
    hs_meters m;
    hs_train_state st;
    hs_stats iv;
    finite_state(&st, &iv);
    hs_meters_init(&m, &g_task, g_path, 0);
    m.format = "none";
    g_fields = FIELDS_STRINGS;
    m.interval = iv;
    hs_meters_log_train(&m, &st, 1, 10, 0.1, 1);
    g_fields = FIELDS_BROKEN;
    hs_meters_log_valid(&m, &st, "valid", &iv, 0.1);
    m.interval = iv;
    hs_meters_log_train(&m, &st, 2, 10, 0.1, 1);
    g_fields = FIELDS_COLLIDING;
    hs_meters_log_valid(&m, &st, "valid", &iv, 0.1);
    hs_meters_close(&m);

    lines l;
    read_lines(g_path, &l);
    assert_int_equal(l.n, 4);
    json_object *o[4];
    for (int i = 0; i < 4; i++) o[i] = parse_line(l.line[i]);
    /* strings with commas, quotes and brackets, arrays, objects, true, null: kept as the task wrote them */
    static const char *const strings_keys[] = {"type", "epoch", "num_updates", "loss", "loss_nats_interval",
                                               "accuracy_interval", "lr", "gnorm", "samples_per_sec",
                                               "tokens_per_sec", "note", "pair", "flag", "none", "world_size", "wall",
                                               NULL};
    assert_keys(o[0], strings_keys);
    assert_string_equal(json_object_get_string(field(o[0], "note")), "a, \"b\" [c]");
    assert_int_equal(json_object_array_length(field(o[0], "pair")), 2);
    assert_true(json_object_get_boolean(field(o[0], "flag")));
    assert_json_null(o[0], "none");
    /* a fragment that is not `, "name": value`: the record is still valid, without the task's fields */
    static const char *const valid_plain[] = {"type", "epoch", "num_updates", "loss", "nll_loss", "accuracy",
                                              "samples", "wall", NULL};
    static const char *const train_plain[] = {"type", "epoch", "num_updates", "loss", "loss_nats_interval",
                                              "accuracy_interval", "lr", "gnorm", "samples_per_sec",
                                              "tokens_per_sec", "world_size", "wall", NULL};
    assert_keys(o[1], valid_plain);
    assert_keys(o[2], train_plain);
    /* a task field named like a standard one does not overwrite it */
    static const char *const valid_own[] = {"type", "epoch", "num_updates", "loss", "nll_loss", "accuracy", "own",
                                            "samples", "wall", NULL};
    assert_keys(o[3], valid_own);
    assert_number(o[3], "loss", 1.5 / M_LN2, 1e-6);
    assert_number(o[3], "own", 1.5, 0);
    for (int i = 0; i < 4; i++) json_object_put(o[i]);
    free_lines(&l);
}

/* A run killed with SIGKILL (no exit handlers, no fclose) keeps every record it logged. */
static void test_a_killed_run_keeps_its_records(void **unused) {
    (void)unused;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        hs_meters m;
        hs_train_state st;
        hs_stats iv;
        finite_state(&st, &iv);
        hs_meters_init(&m, &g_task, g_path, 0);
        m.format = "none";
        for (int i = 0; i < 3; i++) {
            m.interval = iv;
            st.num_updates = i + 1;
            hs_meters_log_train(&m, &st, i + 1, 10, 0.1, 1);
        }
        raise(SIGKILL);
        _exit(3);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    lines l;
    read_lines(g_path, &l);
    assert_int_equal(l.n, 3);
    for (int i = 0; i < 3; i++) {
        json_object *o = parse_line(l.line[i]);
        assert_int_equal(json_object_get_int64(field(o, "num_updates")), i + 1);
        json_object_put(o);
    }
    free_lines(&l);
}

/* Resuming after a run that was killed while writing a record: the partial line goes, the complete
 * ones stay, and the new records follow on lines of their own. */
static void test_resume_drops_a_partial_record(void **unused) {
    (void)unused;
    const char *complete = "{ \"type\": \"train\", \"epoch\": 1, \"num_updates\": 1, \"loss\": 3.000000 }";
    FILE *f = fopen(g_path, "w");
    assert_non_null(f);
    assert_true(fprintf(f, "%s\n{ \"type\": \"train\", \"epoch\": 1, \"num_upd", complete) > 0);
    assert_int_equal(fclose(f), 0);

    hs_meters m;
    hs_train_state st;
    hs_stats iv;
    finite_state(&st, &iv);
    hs_meters_init(&m, &g_task, g_path, 1);
    m.format = "none";
    m.interval = iv;
    hs_meters_log_train(&m, &st, 1, 10, 0.1, 1);
    hs_meters_close(&m);

    lines l;
    read_lines(g_path, &l);
    assert_int_equal(l.n, 2);
    assert_true(l.ends_with_newline);
    assert_string_equal(l.line[0], complete);
    for (int i = 0; i < 2; i++) json_object_put(parse_line(l.line[i]));
    free_lines(&l);

    /* A clean file is appended to as it is. */
    hs_meters_init(&m, &g_task, g_path, 1);
    m.format = "none";
    m.interval = iv;
    hs_meters_log_train(&m, &st, 2, 10, 0.1, 1);
    hs_meters_close(&m);
    read_lines(g_path, &l);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.line[0], complete);
    free_lines(&l);
}

/* Only rank 0 writes the file. */
static void test_other_ranks_write_nothing(void **unused) {
    (void)unused;
    hs_log_set_rank(1);
    hs_meters m;
    hs_train_state st;
    hs_stats iv;
    finite_state(&st, &iv);
    hs_meters_init(&m, &g_task, g_path, 0);
    m.format = "json";
    m.interval = iv;
    hs_meters_log_train(&m, &st, 1, 10, 0.1, 1);
    hs_meters_log_valid(&m, &st, "valid", &iv, 0.1);
    hs_meters_close(&m);
    hs_log_set_rank(0);
    assert_int_equal(access(g_path, F_OK), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_records_have_the_documented_fields, before_each),
        cmocka_unit_test_setup(test_non_finite_numbers_are_null, before_each),
        cmocka_unit_test_setup(test_task_fields_are_parsed_not_pasted, before_each),
        cmocka_unit_test_setup(test_a_killed_run_keeps_its_records, before_each),
        cmocka_unit_test_setup(test_resume_drops_a_partial_record, before_each),
        cmocka_unit_test_setup(test_other_ranks_write_nothing, before_each),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
