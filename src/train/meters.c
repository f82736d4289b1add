#include "train/meters.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/ledger.h"
#include "train/mfu.h"
#include "util/check.h"
#include "util/log.h"
#include "util/timer.h"

/* ---- JSON records (json-c) ------------------------------------------------------------------------ */

/* json_tokener_get_parse_end() is json-c >= 0.15; older releases (0.13, 0.14: still common on
 * clusters) expose the offset as a field. */
#if defined(JSON_C_VERSION_NUM) && JSON_C_VERSION_NUM >= ((0 << 16) | (15 << 8))
#define HS_JSON_PARSE_END(tok) json_tokener_get_parse_end(tok)
#else
#define HS_JSON_PARSE_END(tok) ((size_t)(tok)->char_offset)
#endif

/* "key": value, with ", " between fields: the layout the metrics file always had, which the shell
 * tools (tools/plot_metrics.sh, the resume tests) grep for. No "\/" escapes in strings. */
#define HS_JSON_FLAGS (JSON_C_TO_STRING_SPACED | JSON_C_TO_STRING_NOSLASHESCAPE)

static json_object *json_checked(json_object *o, const char *file, int line, const char *call) {
    if (!o) hs_fatal_at(file, line, call, "the node is out of memory", "json-c returned NULL");
    return o;
}
/* json-c constructors return NULL only when out of memory. */
#define HS_JSON(call) json_checked((call), __FILE__, __LINE__, #call)

/* rec[key] = v, appended in order; v == NULL is JSON null. Takes v's reference. */
static void put(json_object *rec, const char *key, json_object *v) {
    if (json_object_object_add(rec, key, v) != 0)
        hs_fatal_at(__FILE__, __LINE__, "json_object_object_add", "the node is out of memory",
                    "cannot add \"%s\" to a metrics record", key);
}

/* A number printed as printf would print it (the precision the metrics file always had); null if
 * it is NaN or infinite, which JSON cannot hold. */
static void put_number_text(json_object *rec, const char *key, double v, const char *text, int len, size_t n) {
    if (!isfinite(v)) {
        put(rec, key, NULL);
    } else if (len > 0 && (size_t)len < n) {
        put(rec, key, HS_JSON(json_object_new_double_s(v, text)));
    } else { /* cannot happen with the buffer below; json-c's own formatting is still valid JSON */
        put(rec, key, HS_JSON(json_object_new_double(v)));
    }
}
static void put_fixed(json_object *rec, const char *key, double v, int decimals) { /* %.<decimals>f */
    char text[400]; /* %.6f of DBL_MAX: 316 characters */
    int len = isfinite(v) ? snprintf(text, sizeof text, "%.*f", decimals, v) : 0;
    put_number_text(rec, key, v, text, len, sizeof text);
}
static void put_general(json_object *rec, const char *key, double v, int digits) { /* %.<digits>g */
    char text[64];
    int len = isfinite(v) ? snprintf(text, sizeof text, "%.*g", digits, v) : 0;
    put_number_text(rec, key, v, text, len, sizeof text);
}
static void put_int(json_object *rec, const char *key, int64_t v) {
    put(rec, key, HS_JSON(json_object_new_int64(v)));
}
static void put_string(json_object *rec, const char *key, const char *v) {
    put(rec, key, HS_JSON(json_object_new_string(v)));
}

/* Exactly s[0, n) as one JSON value (json-c's strict tokener); *ok = 0 if it is not one. NULL with
 * *ok = 1 is the literal null. */
static json_object *parse_json_value(const char *s, size_t n, int *ok) {
    *ok = 0;
    if (n == 0 || n > (size_t)INT32_MAX - 1) return NULL;
    json_tokener *tok = json_tokener_new();
    if (!tok) hs_fatal_at(__FILE__, __LINE__, "json_tokener_new", "the node is out of memory", "json-c returned NULL");
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *v = json_tokener_parse_ex(tok, s, (int)n);
    enum json_tokener_error err = json_tokener_get_error(tok);
    if (!v && err == json_tokener_continue) { /* a number at the very end: the terminating NUL ends it */
        v = json_tokener_parse_ex(tok, "", 1);
        err = json_tokener_get_error(tok);
    } else if (err == json_tokener_success && HS_JSON_PARSE_END(tok) != n) {
        err = json_tokener_error_parse_unexpected; /* something after the value */
    }
    json_tokener_free(tok);
    if (err != json_tokener_success) {
        json_object_put(v);
        return NULL;
    }
    *ok = 1;
    return v;
}

static const char *skip_space(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

/* End of a JSON string starting at the quote *p (one past the closing quote), or NULL. */
static const char *string_end(const char *p, const char *end) {
    for (p++; p < end; p++) {
        if (*p == '\\') p++;
        else if (*p == '"') return p + 1;
    }
    return NULL;
}

/* The value of one `"name": value` field: text up to the next comma outside strings and brackets. */
static const char *value_end(const char *p, const char *end) {
    int depth = 0;
    while (p < end) {
        if (*p == '"') {
            p = string_end(p, end);
            if (!p) return NULL;
            continue;
        }
        if (*p == '[' || *p == '{') depth++;
        else if (*p == ']' || *p == '}') depth--;
        else if (*p == ',' && depth == 0) break;
        p++;
    }
    return depth == 0 ? p : NULL;
}

/* The task's own fields. task.h's format_stats hook (implemented by each task) appends text of the form
 * `, "name": value, "name2": value` to a log line, with values printed by printf, so a non-finite
 * value arrives as nan, -nan, inf or -inf. Pasting that text into a record would make it invalid, so
 * it is parsed instead, field by field: each name must be a JSON string and each value one JSON value;
 * a value that strtod reads as NaN or infinite (any of C's or JSON-ish spellings) becomes null, any
 * other number keeps the task's text (its precision). All fields go into *fields in order; on
 * anything else (a task bug) *fields is NULL and why says what was wrong: the record then leaves the
 * task's fields out rather than becoming unparseable. */
static json_object *parse_task_fields(const char *frag, char *why, size_t nwhy) {
    json_object *fields = HS_JSON(json_object_new_object());
    const char *p = frag, *end = frag + strlen(frag);
    for (;;) {
        p = skip_space(p, end);
        if (p == end) return fields;
        if (*p != ',') {
            snprintf(why, nwhy, "expected ', \"name\": value' at \"%.40s\"", p);
            break;
        }
        p = skip_space(p + 1, end);
        const char *name_end = *p == '"' ? string_end(p, end) : NULL;
        int ok;
        json_object *name = name_end ? parse_json_value(p, (size_t)(name_end - p), &ok) : NULL;
        if (!name || !json_object_is_type(name, json_type_string)) {
            json_object_put(name);
            snprintf(why, nwhy, "expected a quoted field name at \"%.40s\"", p);
            break;
        }
        char key[128];
        snprintf(key, sizeof key, "%s", json_object_get_string(name));
        json_object_put(name);
        p = skip_space(name_end, end);
        if (*p != ':') {
            snprintf(why, nwhy, "expected ':' after \"%s\"", key);
            break;
        }
        const char *v0 = skip_space(p + 1, end), *v1 = value_end(v0, end);
        if (!v1) {
            snprintf(why, nwhy, "unbalanced value of \"%s\"", key);
            break;
        }
        p = v1;
        while (v1 > v0 && (v1[-1] == ' ' || v1[-1] == '\t' || v1[-1] == '\n' || v1[-1] == '\r')) v1--;
        char text[128];
        if (v1 - v0 > 0 && v1 - v0 < (ptrdiff_t)sizeof text) {
            memcpy(text, v0, (size_t)(v1 - v0));
            text[v1 - v0] = 0;
            char *num_end;
            double d = strtod(text, &num_end);
            if (*num_end == 0 && !isfinite(d)) { /* nan, -nan, inf, -inf, NaN, Infinity, ... */
                put(fields, key, NULL);
                continue;
            }
        }
        json_object *v = parse_json_value(v0, (size_t)(v1 - v0), &ok);
        if (!ok) {
            snprintf(why, nwhy, "the value of \"%s\" is not JSON: \"%.*s\"", key, (int)(v1 - v0 < 40 ? v1 - v0 : 40),
                     v0);
            break;
        }
        if (json_object_is_type(v, json_type_double) && !isfinite(json_object_get_double(v))) {
            json_object_put(v); /* json-c reads NaN / Infinity even in strict mode */
            v = NULL;
        }
        put(fields, key, v);
    }
    json_object_put(fields);
    return NULL;
}

/* Appends the task's fields of stats s to rec (after the fields already there). */
static void put_task_fields(hs_meters *m, json_object *rec, const hs_stats *s) {
    if (!m->task || !m->task->format_stats) return;
    char frag[1024] = "", why[160] = "";
    m->task->format_stats(s, 1, frag, sizeof frag);
    json_object *fields = parse_task_fields(frag, why, sizeof why);
    if (fields) {
        json_object_object_foreach(fields, key, val) {
            if (json_object_object_get_ex(rec, key, NULL)) { /* would overwrite a standard field */
                snprintf(why, sizeof why, "its field \"%s\" has the name of a standard field", key);
                continue;
            }
            put(rec, key, json_object_get(val));
        }
        json_object_put(fields);
    }
    if (why[0] && !m->warned_task_fields) {
        m->warned_task_fields = 1;
        hs_warn("task '%s' logs fields the metrics records cannot hold (%s): they are left out of the JSON "
                "records (format_stats in the task's source should write `, \"name\": value` pairs)",
                m->task->name ? m->task->name : "?", why);
    }
}

/* One record: to the console when log.format = "json" (to_console), and as a line of the metrics file,
 * flushed at once. */
static void write_record(hs_meters *m, json_object *rec, int to_console) {
    const char *text = json_object_to_json_string_ext(rec, HS_JSON_FLAGS);
    if (!text)
        hs_fatal_at(__FILE__, __LINE__, "json_object_to_json_string_ext", "the node is out of memory",
                    "cannot serialise a metrics record");
    if (to_console && m->format && !strcmp(m->format, "json")) {
        fprintf(m->console, "%s\n", text);
        fflush(m->console);
    }
    if (m->metrics) {
        if (fprintf(m->metrics, "%s\n", text) < 0 || fflush(m->metrics) != 0)
            hs_fatal_at(__FILE__, __LINE__, "fprintf/fflush",
                        "is the disk full? log.metrics_file = \"\" runs without the metrics file",
                        "cannot write the metrics file %s: %s", m->metrics_path, strerror(errno));
    }
    json_object_put(rec);
}

/* A run killed in the middle of writing a record leaves a last line without its newline; appending
 * to it would make that line invalid JSON. Cut the file after its last complete line. */
static void drop_partial_record(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return; /* no file yet */
    long size = -1, keep = 0;
    if (fseek(f, 0, SEEK_END) == 0) size = ftell(f);
    if (size < 0)
        hs_fatal_at(__FILE__, __LINE__, "fseek/ftell", NULL, "cannot read the metrics file %s: %s", path,
                    strerror(errno));
    for (long pos = size; pos > 0 && keep == 0;) { /* backwards, a block at a time, to the last '\n' */
        char buf[4096];
        long start = pos > (long)sizeof buf ? pos - (long)sizeof buf : 0;
        size_t want = (size_t)(pos - start);
        if (fseek(f, start, SEEK_SET) != 0 || fread(buf, 1, want, f) != want)
            hs_fatal_at(__FILE__, __LINE__, "fseek/fread", NULL, "cannot read the metrics file %s: %s", path,
                        strerror(errno));
        for (size_t i = want; i > 0; i--)
            if (buf[i - 1] == '\n') {
                keep = start + (long)i;
                break;
            }
        pos = start;
    }
    if (fclose(f) != 0)
        hs_fatal_at(__FILE__, __LINE__, "fclose", NULL, "cannot read the metrics file %s: %s", path, strerror(errno));
    if (keep == size) return;
    if (truncate(path, keep) != 0)
        hs_fatal_at(__FILE__, __LINE__, "truncate", "move the file away to start a new one",
                    "cannot remove the partial last record of the metrics file %s: %s", path, strerror(errno));
    hs_warn("the metrics file %s ended in a partial record (%ld bytes, from a run stopped while writing it): "
            "removed",
            path, size - keep);
}

/* ---- meters --------------------------------------------------------------------------------------- */

/* The square SGEMM the CPU peak is measured on: large enough that OpenBLAS reaches the rate of
 * BERT's GEMMs (M = batch·tokens in the thousands, N, K the hidden and intermediate sizes), small enough
 * that a product takes milliseconds (a second even under valgrind). */
#define HS_PEAK_GEMM_N 512
/* The best product of half a second of them: one short measurement taken while another job used the
 * cores read 0.011 TFLOP/s and made every MFU figure after it wrong; a longer run is likelier to catch
 * the cores free at least once. The peak is still checked against the model's own rate (check_peak). */
#define HS_PEAK_SECONDS 0.5

/* m->peak_flops for m->precision. The CPU's is measured once (at init: every rank at the same time,
 * as in training); a GPU's comes from the table, for the precision the trainer set. */
static void find_peak(hs_meters *m) {
    const hs_backend *be = m->task ? m->task->params.be : NULL;
    if (m->peak_ready || !be || !m->task->flops_per_sample) return;
    m->peak_ready = 1;
    if (be->cc_major > 0) {
        m->peak_flops = hs_mfu_gpu_peak(be->cc_major, be->cc_minor, be->sm_count, m->precision, m->peak_source,
                                        sizeof m->peak_source);
        if (m->peak_flops <= 0)
            snprintf(m->peak_source, sizeof m->peak_source,
                     "no %s figure in the table for compute capability %d.%d: MFU is not logged", m->precision,
                     be->cc_major, be->cc_minor);
    } else if (be->memory_is_host) {
        const char *injected = getenv("HETSEQ_TEST_MFU_PEAK"); /* tests: a peak as measured on busy cores */
        if (injected && atof(injected) > 0) {
            m->peak_flops = atof(injected);
            snprintf(m->peak_source, sizeof m->peak_source, "HETSEQ_TEST_MFU_PEAK, as if measured on busy cores");
        } else {
            m->peak_flops = hs_mfu_measure_gemm(be, HS_PEAK_GEMM_N, HS_PEAK_SECONDS);
            snprintf(m->peak_source, sizeof m->peak_source, "SGEMM %d×%d×%d measured at start, best of %.1f s",
                     HS_PEAK_GEMM_N, HS_PEAK_GEMM_N, HS_PEAK_GEMM_N, HS_PEAK_SECONDS);
        }
    } else {
        snprintf(m->peak_source, sizeof m->peak_source,
                 "the %s backend does not say what device it is: MFU is not logged", be->name);
    }
    if (m->peak_flops > 0)
        hs_log("| MFU against %.4g TFLOP/s per rank (%s)", m->peak_flops / 1e12, m->peak_source);
    else
        hs_log("| %s", m->peak_source);
}

/* MFU above 1 means the peak is wrong, not that the model beat it: a CPU peak measured while other
 * work used the cores (stale), or a model FLOP count above the multiplications done (the CNN's Winograd
 * conv2). The CPU's peak is re-measured once per run (it costs 0.5 s of training, and a run whose cores
 * stay busy would otherwise re-measure again and again) and the larger kept; if the model's rate per
 * rank still passes it, then or later, that rate becomes the peak (it is a rate these cores reached). Each change is logged, so no MFU
 * above 1 is ever printed and every figure says what it was measured against. Rank 0 only (the
 * figures are rank 0's). */
static void check_peak(hs_meters *m, double model_flops_per_rank) {
    if (!(m->peak_flops > 0) || !(model_flops_per_rank > m->peak_flops)) return;
    const hs_backend *be = m->task ? m->task->params.be : NULL;
    const double old = m->peak_flops;
    if (be && be->cc_major == 0 && be->memory_is_host && !m->peak_remeasured) {
        m->peak_remeasured = 1;
        const double again = hs_mfu_measure_gemm(be, HS_PEAK_GEMM_N, HS_PEAK_SECONDS);
        if (again > m->peak_flops) m->peak_flops = again;
        hs_log("| MFU: the model ran at %.4g TFLOP/s per rank, above the peak of %.4g TFLOP/s (%s): that peak is "
               "stale (measured while the cores were busy); re-measured: %.4g TFLOP/s",
               model_flops_per_rank / 1e12, old / 1e12, m->peak_source, again / 1e12);
        snprintf(m->peak_source, sizeof m->peak_source, "SGEMM %d×%d×%d re-measured during training, best of %.1f s",
                 HS_PEAK_GEMM_N, HS_PEAK_GEMM_N, HS_PEAK_GEMM_N, HS_PEAK_SECONDS);
    }
    if (model_flops_per_rank > m->peak_flops) {
        hs_log("| MFU: the model's %.4g TFLOP/s per rank is above the peak of %.4g TFLOP/s (%s): MFU is measured "
               "against the model's rate from now on (a model FLOP count above the multiplications done, e.g. the "
               "CNN's Winograd convolution, or a peak measured on busy cores)",
               model_flops_per_rank / 1e12, m->peak_flops / 1e12, m->peak_source);
        m->peak_flops = model_flops_per_rank;
        snprintf(m->peak_source, sizeof m->peak_source, "the model's own rate, which passed the measured peak");
    }
}

void hs_meters_init(hs_meters *m, const hs_task *task, const char *metrics_path, int resume) {
    memset(m, 0, sizeof *m);
    m->task = task;
    m->console = stdout;
    m->precision = "fp32";
    if (task && task->params.be && task->params.be->cc_major == 0) find_peak(m); /* CPU: measure now */
    m->start_time = hs_now();
    if (metrics_path && *metrics_path && hs_log_rank() == 0) {
        if (resume) drop_partial_record(metrics_path);
        m->metrics = fopen(metrics_path, resume ? "a" : "w");
        if (!m->metrics)
            hs_die("cannot open the metrics file %s for writing (%s): check log.metrics_file and checkpoint.save_dir",
                   metrics_path, strerror(errno));
        m->metrics_path = HS_STRDUP(metrics_path);
    }
}

double hs_meters_loss(const hs_meters *m, const hs_stats *s) {
    if (m->task && m->task->loss_from_stats) return m->task->loss_from_stats(s);
    return s->sample_count > 0 ? s->loss_sum / s->sample_count : 0.0;
}

static void task_text_fields(const hs_meters *m, const hs_stats *s, char *buf, size_t n) {
    buf[0] = 0;
    if (m->task && m->task->format_stats) m->task->format_stats(s, 0, buf, n);
}

static void add_stats(hs_stats *into, const hs_stats *s) {
    double *a = (double *)into;
    const double *b = (const double *)s;
    for (int i = 0; i < HS_STATS_NDOUBLE; i++) a[i] += b[i];
}

void hs_meters_close(hs_meters *m) {
    if (m->metrics && fclose(m->metrics) != 0)
        hs_fatal_at(__FILE__, __LINE__, "fclose", "is the disk full?", "cannot write the metrics file %s: %s",
                    m->metrics_path, strerror(errno));
    m->metrics = NULL;
    free(m->metrics_path);
    m->metrics_path = NULL;
}

void hs_meters_epoch_start(hs_meters *m) {
    m->epoch_start_time = hs_now();
    m->epoch_updates = 0;
}

void hs_meters_update(hs_meters *m, hs_train_state *st, const hs_stats *global, double gnorm, int clipped,
                      double seconds) {
    /* Cumulative loss as HetSeq logs it: the sample-weighted average of the updates' losses. */
    st->meter_loss_sum += hs_meters_loss(m, global) * global->sample_count;
    st->meter_sample_count += global->sample_count;
    st->meter_gnorm_sum += gnorm;
    st->meter_clip_count += clipped ? 1 : 0;
    st->meter_updates += 1;
    st->train_wall += seconds;
    add_stats(&m->interval, global);
    m->interval_time += seconds;
    m->interval_updates++;
    m->epoch_updates++;
}

/* HetSeq logs losses in base 2 (fairseq): loss_bits = nats / ln 2, ppl = 2^loss. */
static double bits(double nats) { return nats / M_LN2; }

/* device_ops, device_bytes (per update: the mean over the updates since the previous train record,
 * rounded) and device_peak_bytes, from the device-op ledger; nothing on a backend that keeps none (the
 * CPU). */
static void put_device_ledger(hs_meters *m, json_object *rec) {
    const hs_ledger *l = &hs_ledger_state;
    if (!l->used || l->updates <= m->ledger_updates_mark) return;
    const double u = (double)(l->updates - m->ledger_updates_mark);
    put_int(rec, "device_ops", (int64_t)llround((double)(l->ops - m->ledger_ops_mark) / u));
    put_int(rec, "device_bytes", (int64_t)llround((double)(l->bytes - m->ledger_bytes_mark) / u));
    put_int(rec, "device_peak_bytes", (int64_t)l->peak_bytes);
    m->ledger_ops_mark = l->ops;
    m->ledger_bytes_mark = l->bytes;
    m->ledger_updates_mark = l->updates;
}

void hs_meters_log_train(hs_meters *m, const hs_train_state *st, int64_t index_in_epoch, int64_t updates_in_epoch,
                         double lr, int world_size) {
    if (hs_log_rank() == 0) {
        double loss = st->meter_sample_count > 0 ? bits(st->meter_loss_sum / st->meter_sample_count) : 0;
        const hs_stats *iv = &m->interval;
        double interval_loss = hs_meters_loss(m, iv);
        double sps = m->interval_time > 0 ? iv->sample_count / m->interval_time : 0;
        double tps = sps * (m->task ? m->task->tokens_per_sample : 0);
        double epoch_time = hs_now() - m->epoch_start_time;
        double ups = epoch_time > 0 ? (double)m->epoch_updates / epoch_time : 0;
        double bsz = m->interval_updates ? iv->sample_count / (double)m->interval_updates : 0;
        double gnorm = st->meter_updates > 0 ? st->meter_gnorm_sum / st->meter_updates : 0;
        double clip = st->meter_updates > 0 ? st->meter_clip_count / st->meter_updates : 0;
        double acc = iv->sample_count > 0 ? iv->correct / iv->sample_count : 0;
        double wall = hs_now() - m->start_time;
        /* model TFLOP/s of the whole job; MFU against every rank's peak (rank 0's, times the ranks) */
        const int counts_flops = m->task && m->task->flops_per_sample;
        find_peak(m);
        double tflops = counts_flops ? sps * m->task->flops_per_sample((hs_task *)m->task) / 1e12 : 0;
        if (world_size > 0) check_peak(m, tflops * 1e12 / world_size);
        double mfu = m->peak_flops > 0 && world_size > 0 ? tflops * 1e12 / (m->peak_flops * world_size) : NAN;
        if (mfu > 1) mfu = 1; /* rounding only: check_peak made the peak at least the model's rate */
        if (!m->format || !strcmp(m->format, "simple")) {
            char fields[1024], tokens[64] = "", flops[64] = "", scaler[96] = "";
            task_text_fields(m, iv, fields, sizeof fields);
            if (st->loss_scale > 0) /* dynamic loss scaling is on (fairseq logs loss_scale too) */
                snprintf(scaler, sizeof scaler, ", loss_scale=%.10g, skipped=%lld", st->loss_scale,
                         (long long)st->loss_scale_skipped);
            if (tps > 0) snprintf(tokens, sizeof tokens, ", tps=%.0f", tps);
            if (counts_flops && isfinite(mfu)) snprintf(flops, sizeof flops, ", tflops=%.4g, mfu=%.3f", tflops, mfu);
            else if (counts_flops) snprintf(flops, sizeof flops, ", tflops=%.4g", tflops);
            fprintf(m->console,
                    "| epoch %03lld:  %5lld / %lld loss=%.3f, ppl=%g%s, sps=%.0f%s%s, ups=%.0f, bsz=%.3f, "
                    "num_updates=%lld, lr=%g, gnorm=%.3f, clip=%.3f, acc=%.4f, wall=%.0f, train_wall=%.4f%s\n",
                    (long long)st->epoch, (long long)index_in_epoch, (long long)updates_in_epoch, loss,
                    round(pow(2.0, loss) * 100) / 100, fields, sps, tokens, flops, ups, bsz,
                    (long long)st->num_updates, lr, gnorm, clip, acc, wall, st->train_wall, scaler);
            fflush(m->console);
        }
        if (m->metrics || (m->format && !strcmp(m->format, "json"))) {
            json_object *rec = HS_JSON(json_object_new_object());
            put_string(rec, "type", "train");
            put_int(rec, "epoch", st->epoch);
            put_int(rec, "num_updates", st->num_updates);
            put_fixed(rec, "loss", loss, 6);
            put_fixed(rec, "loss_nats_interval", interval_loss, 6);
            put_fixed(rec, "accuracy_interval", acc, 6);
            put_general(rec, "lr", lr, 8);
            put_fixed(rec, "gnorm", gnorm, 6);
            if (st->loss_scale > 0) { /* dynamic loss scaling is on */
                put_general(rec, "loss_scale", st->loss_scale, 10);
                put_int(rec, "skipped_updates", st->loss_scale_skipped);
            }
            put_fixed(rec, "samples_per_sec", sps, 2);
            put_fixed(rec, "tokens_per_sec", tps, 2);
            if (counts_flops) {
                put_general(rec, "tflops", tflops, 6);
                put_fixed(rec, "mfu", mfu, 4); /* null when the peak is unknown */
            }
            put_task_fields(m, rec, iv);
            put_device_ledger(m, rec);
            put_int(rec, "world_size", world_size);
            put_fixed(rec, "wall", wall, 3);
            write_record(m, rec, 1);
        }
    }
    memset(&m->interval, 0, sizeof m->interval);
    m->interval_time = 0;
    m->interval_updates = 0;
}

void hs_meters_log_valid(hs_meters *m, const hs_train_state *st, const char *subset, const hs_stats *global,
                         double seconds) {
    if (hs_log_rank() != 0) return;
    double nats = hs_meters_loss(m, global);
    double acc = global->sample_count > 0 ? global->correct / global->sample_count : 0;
    char fields[1024];
    task_text_fields(m, global, fields, sizeof fields);
    fprintf(m->console,
            "| epoch %03lld | valid on '%s' subset | loss %.3f | ppl %.2f | nll_loss %.4f | accuracy %.4f%s | "
            "samples %.0f | num_updates %lld | valid_wall %.2f\n",
            (long long)st->epoch, subset, bits(nats), pow(2.0, bits(nats)), nats, acc, fields, global->sample_count,
            (long long)st->num_updates, seconds);
    fflush(m->console);
    if (m->metrics) {
        json_object *rec = HS_JSON(json_object_new_object());
        put_string(rec, "type", "valid");
        put_int(rec, "epoch", st->epoch);
        put_int(rec, "num_updates", st->num_updates);
        put_fixed(rec, "loss", bits(nats), 6);
        put_fixed(rec, "nll_loss", nats, 6);
        put_fixed(rec, "accuracy", acc, 6);
        put_task_fields(m, rec, global);
        put_fixed(rec, "samples", global->sample_count, 0);
        put_fixed(rec, "wall", hs_now() - m->start_time, 3);
        write_record(m, rec, 0);
    }
}
