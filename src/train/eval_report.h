/* The numbers of `hetseq eval`: latency percentiles of the evaluation steps and the JSON report
 * (docs/evaluation.md). No MPI here: the caller gathers the per-step times first. */
#ifndef HS_TRAIN_EVAL_REPORT_H
#define HS_TRAIN_EVAL_REPORT_H

#include <stdint.h>

/* The p-th percentile (0 <= p <= 100) of x[0..n) sorted ascending, n >= 1, as numpy.percentile computes
 * it by default (linear interpolation between closest ranks, Hyndman & Fan's type 7), which NVIDIA's
 * Transformer-XL eval.py uses: h = (n-1)·p/100, x[⌊h⌋] + (h - ⌊h⌋)·(x[⌊h⌋+1] - x[⌊h⌋]). Non-decreasing
 * in p, so p50 <= p90 <= p95 <= p99. */
double hs_percentile_sorted(const double *x, int64_t n, double p);

/* Latency of the steps after warm-up, in the unit of the input. */
typedef struct hs_latency_summary {
    int64_t measured; /* steps the figures are over */
    int warmup;       /* leading steps left out: the requested number, or fewer (n - 1) if the pass is short */
    double mean, p50, p90, p95, p99;
} hs_latency_summary;

/* Summary of step_times[warmup..n), sorted on a copy; with n <= warmup the warm-up shrinks to n - 1 so
 * that at least one step is measured (n == 0: all figures 0). */
void hs_latency_summarize(const double *step_times, int64_t n, int warmup, hs_latency_summary *out);

/* The number field `key` of a task's ", \"name\": value" metrics (hs_task.format_stats with json = 1):
 * 1 and *v if it is there and a number (NaN for nan/inf), else 0. */
int hs_task_field(const char *fields, const char *key, double *v);

/* What the report holds. Counts and times are over all ranks: samples and tokens summed, a step's time
 * and the pass's time those of the slowest rank. */
typedef struct hs_eval_report {
    const char *task, *split, *checkpoint, *device;
    int world_size;
    double loss;
    /* The task's metrics as ", \"name\": value" pairs (hs_task.format_stats with json = 1), or "". */
    const char *task_fields;
    int64_t samples;
    int64_t tokens; /* < 0: the task has no tokens (not a sequence task) */
    double seconds;
    int64_t steps;
    const double *step_seconds; /* [steps], warm-up included */
    hs_latency_summary latency; /* seconds */
} hs_eval_report;

/* The report as one JSON object (malloc'd text, ends with a newline): the fields above with latencies in
 * ms (latency_ms {mean, p50, p90, p95, p99}, step_latency_ms [...]), samples_per_s and tokens_per_s; a
 * task field that is not a finite number or a string is dropped. NaN and infinities become null. */
char *hs_eval_report_json(const hs_eval_report *r);

#endif
