#include "train/eval_report.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/check.h"
#include "util/log.h"

double hs_percentile_sorted(const double *x, int64_t n, double p) {
    if (n < 1) HS_FATAL(NULL, "percentile of an empty set");
    if (p <= 0) return x[0];
    if (p >= 100) return x[n - 1];
    const double h = (double)(n - 1) * p / 100.0;
    const int64_t lo = (int64_t)floor(h);
    if (lo >= n - 1) return x[n - 1];
    return x[lo] + (h - (double)lo) * (x[lo + 1] - x[lo]);
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void hs_latency_summarize(const double *step_times, int64_t n, int warmup, hs_latency_summary *out) {
    memset(out, 0, sizeof *out);
    if (n <= 0) return;
    if (warmup < 0) warmup = 0;
    if (warmup > n - 1) warmup = (int)(n - 1);
    const int64_t m = n - warmup;
    double *v;
    HS_ALLOC(v, m);
    memcpy(v, step_times + warmup, (size_t)m * sizeof *v);
    qsort(v, (size_t)m, sizeof *v, cmp_double);
    double sum = 0;
    for (int64_t i = 0; i < m; i++) sum += v[i];
    out->measured = m;
    out->warmup = warmup;
    out->mean = sum / (double)m;
    out->p50 = hs_percentile_sorted(v, m, 50);
    out->p90 = hs_percentile_sorted(v, m, 90);
    out->p95 = hs_percentile_sorted(v, m, 95);
    out->p99 = hs_percentile_sorted(v, m, 99);
    free(v);
}

/* ---- JSON (json-c; its constructors return NULL only when out of memory) ---------------------------- */

static json_object *checked(json_object *o, int line) {
    if (!o) hs_fatal_at(__FILE__, line, "json-c", "the node is out of memory", "json-c returned NULL");
    return o;
}
#define J(call) checked((call), __LINE__)

static void put(json_object *o, const char *key, json_object *v) {
    if (json_object_object_add(o, key, v) != 0)
        hs_fatal_at(__FILE__, __LINE__, "json_object_object_add", "the node is out of memory",
                    "cannot add \"%s\" to the evaluation report", key);
}
/* A number with 10 significant digits (null if not finite: JSON has no NaN or Infinity). */
static json_object *number(double v) {
    if (!isfinite(v)) return NULL;
    char text[64];
    snprintf(text, sizeof text, "%.10g", v);
    return J(json_object_new_double_s(v, text));
}

/* The standard keys, which a task's own fields may not replace. */
static const char *const standard_keys[] = {
    "task", "split", "checkpoint", "world_size", "device", "loss", "samples", "tokens", "steps", "seconds",
    "samples_per_s", "tokens_per_s", "latency_ms", "warmup_steps", "latency_percentiles", "step_latency_ms", NULL};

static int is_standard(const char *key) {
    for (int i = 0; standard_keys[i]; i++)
        if (!strcmp(standard_keys[i], key)) return 1;
    return 0;
}

/* "{" frag "}" with the words printf gives non-finite numbers (nan, -nan, inf, -inf, infinity) outside
 * strings replaced by null, which JSON has and json-c's strict parser accepts (malloc'd). */
static char *object_text(const char *frag) {
    const size_t n = strlen(frag);
    char *out;
    HS_ALLOC(out, 2 * n + 3); /* "null" replaces words of at least 3 characters */
    size_t o = 0;
    out[o++] = '{';
    int in_string = 0;
    for (size_t i = 0; i < n;) {
        const char c = frag[i];
        if (in_string) {
            out[o++] = c;
            if (c == '\\' && i + 1 < n) out[o++] = frag[++i];
            else if (c == '"') in_string = 0;
            i++;
        } else if (c == '"') {
            in_string = 1;
            out[o++] = frag[i++];
        } else if (c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            size_t j = i + (c == '-');
            while (j < n && ((frag[j] >= 'a' && frag[j] <= 'z') || (frag[j] >= 'A' && frag[j] <= 'Z'))) j++;
            const char *w = frag + i + (c == '-');
            const size_t len = j - (size_t)(w - frag);
            if ((len == 3 && (!strncasecmp(w, "nan", 3) || !strncasecmp(w, "inf", 3))) ||
                (len == 8 && !strncasecmp(w, "infinity", 8))) {
                memcpy(out + o, "null", 4);
                o += 4;
            } else {
                memcpy(out + o, frag + i, j - i);
                o += j - i;
            }
            i = j;
        } else {
            out[o++] = frag[i++];
        }
    }
    out[o++] = '}';
    out[o] = '\0';
    return out;
}

/* The task's pairs as a JSON object, or NULL (with a warning) if they are not JSON fields. */
static json_object *parse_fields(const char *frag) {
    while (*frag == ',' || *frag == ' ') frag++;
    if (!*frag) return NULL;
    char *text = object_text(frag);
    json_tokener *tok = json_tokener_new();
    if (!tok) hs_fatal_at(__FILE__, __LINE__, "json_tokener_new", "the node is out of memory", "json-c returned NULL");
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *fields = json_tokener_parse_ex(tok, text, (int)strlen(text));
    const int ok = fields && json_tokener_get_error(tok) == json_tokener_success &&
                   json_object_is_type(fields, json_type_object);
    json_tokener_free(tok);
    free(text);
    if (ok) return fields;
    hs_warn("the task's metrics \"%s\" are not JSON fields; the report leaves them out", frag);
    json_object_put(fields);
    return NULL;
}

int hs_task_field(const char *fields, const char *key, double *v) {
    json_object *o = parse_fields(fields), *val = NULL;
    int found = 0;
    if (o && json_object_object_get_ex(o, key, &val)) {
        if (!val) { /* null: a non-finite number */
            *v = NAN;
            found = 1;
        } else if (json_object_is_type(val, json_type_double) || json_object_is_type(val, json_type_int)) {
            *v = json_object_get_double(val);
            found = 1;
        }
    }
    json_object_put(o);
    return found;
}

/* The task's ", \"k\": v" pairs, parsed (never pasted, so a badly printed field cannot break the file). */
static void put_task_fields(json_object *rec, const char *frag) {
    json_object *fields = parse_fields(frag);
    if (!fields) return;
    json_object_object_foreach(fields, key, val) {
        if (is_standard(key)) continue;
        if (!val) put(rec, key, NULL);
        else if (json_object_is_type(val, json_type_double) || json_object_is_type(val, json_type_int))
            put(rec, key, number(json_object_get_double(val)));
        else if (json_object_is_type(val, json_type_string))
            put(rec, key, json_object_get(val));
    }
    json_object_put(fields);
}

char *hs_eval_report_json(const hs_eval_report *r) {
    json_object *rec = J(json_object_new_object());
    put(rec, "task", J(json_object_new_string(r->task)));
    put(rec, "split", J(json_object_new_string(r->split)));
    put(rec, "checkpoint", J(json_object_new_string(r->checkpoint)));
    put(rec, "world_size", J(json_object_new_int(r->world_size)));
    put(rec, "device", J(json_object_new_string(r->device)));
    put(rec, "loss", number(r->loss));
    put_task_fields(rec, r->task_fields ? r->task_fields : "");
    put(rec, "samples", J(json_object_new_int64(r->samples)));
    put(rec, "tokens", r->tokens >= 0 ? J(json_object_new_int64(r->tokens)) : NULL);
    put(rec, "steps", J(json_object_new_int64(r->steps)));
    put(rec, "seconds", number(r->seconds));
    put(rec, "samples_per_s", r->seconds > 0 ? number((double)r->samples / r->seconds) : NULL);
    put(rec, "tokens_per_s", r->tokens >= 0 && r->seconds > 0 ? number((double)r->tokens / r->seconds) : NULL);
    json_object *lat = J(json_object_new_object());
    put(lat, "mean", number(1e3 * r->latency.mean));
    put(lat, "p50", number(1e3 * r->latency.p50));
    put(lat, "p90", number(1e3 * r->latency.p90));
    put(lat, "p95", number(1e3 * r->latency.p95));
    put(lat, "p99", number(1e3 * r->latency.p99));
    put(rec, "latency_ms", lat);
    put(rec, "warmup_steps", J(json_object_new_int(r->latency.warmup)));
    put(rec, "latency_percentiles", J(json_object_new_string("numpy.percentile (linear), slowest rank per step")));
    json_object *steps = J(json_object_new_array());
    for (int64_t i = 0; i < r->steps; i++)
        if (json_object_array_add(steps, number(1e3 * r->step_seconds[i])) != 0)
            hs_fatal_at(__FILE__, __LINE__, "json_object_array_add", "the node is out of memory",
                        "cannot add a step to the evaluation report");
    put(rec, "step_latency_ms", steps);
    const char *text =
        json_object_to_json_string_ext(rec, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE);
    if (!text)
        hs_fatal_at(__FILE__, __LINE__, "json_object_to_json_string_ext", "the node is out of memory",
                    "cannot format the evaluation report");
    const size_t len = strlen(text);
    char *out;
    HS_ALLOC(out, len + 2);
    memcpy(out, text, len);
    out[len] = '\n';
    json_object_put(rec);
    return out;
}
