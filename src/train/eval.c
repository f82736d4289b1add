/* Evaluation: validation during training and `hetseq eval`. */
#include <errno.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "train/checkpoint.h"
#include "train/eval_report.h"
#include "train/setup.h"
#include "train/train_config.h"
#include "train/trainer.h"
#include "util/check.h"
#include "util/log.h"
#include "util/timer.h"

/* The micro-batch of every step of a pass on this rank, in step order (*n steps; malloc'd). */
static hs_range *pass_ranges(hs_task *task, const hs_comm *comm, hs_split split, int max_sentences, int64_t *n) {
    hs_range *r;
    if (task->stream_steps) {
        /* an ordered stream: the task's own steps, one micro-batch each (uf = 1) */
        *n = task->stream_steps(task, split, 1, comm->size);
        HS_ALLOC(r, *n > 0 ? *n : 1);
        for (int64_t k = 0; k < *n; k++) {
            hs_range one[1] = {{0, 0}};
            const int m = task->stream_step_ranges(task, split, 0, k, 1, comm->rank, comm->size, one);
            if (m < 0 || m > 1)
                HS_FATAL(NULL, "task %s gave %d micro-batches for evaluation step %lld (at most 1 with uf = 1)",
                         task->name, m, (long long)k);
            r[k] = m == 1 ? one[0] : (hs_range){0, 0}; /* none: an EMPTY micro-batch still joins the reads */
        }
        return r;
    }
    hs_sampler s;
    hs_sampler_init(&s, task->num_samples(task, split), max_sentences, comm->size, comm->rank, 0, 0);
    *n = hs_sampler_shard_len(&s);
    HS_ALLOC(r, *n);
    hs_sampler_epoch_shard(&s, 1, r);
    return r;
}

int hs_evaluate_max_count(hs_task *task, const hs_comm *comm, hs_split split, int max_sentences) {
    if (!task->stream_steps) return max_sentences;
    int64_t n;
    hs_range *r = pass_ranges(task, comm, split, max_sentences, &n);
    int most = 1;
    for (int64_t k = 0; k < n; k++)
        if (r[k].count > most) most = r[k].count;
    free(r);
    return most;
}

/* The pass: on this rank, step_seconds[k] (if not NULL) and the samples and tokens it evaluated. */
static void run_pass(hs_task *task, hs_prefetch *pf, const hs_range *ranges, int64_t n, hs_split split,
                     int max_per_request, double *stats_dev, double *step_seconds, int64_t *samples,
                     int64_t *tokens) {
    const hs_backend *be = task->params.be;
    /* Keep two requests in flight so reading overlaps evaluation; evaluation stays in step order. */
    int64_t next = 0, step = 0;
    int outstanding = 0;
    while (next < n || outstanding > 0) {
        while (next < n && outstanding < 2) {
            int k = (int)(n - next < max_per_request ? n - next : max_per_request);
            hs_prefetch_request(pf, split, ranges + next, k);
            next += k;
            outstanding++;
        }
        hs_prefetch_slot *slot = hs_prefetch_wait(pf);
        for (int i = 0; i < slot->n; i++, step++) {
            const int count = slot->ranges[i].count;
            /* latency of a step: its micro-batch is in memory; until the device has finished it */
            const double t0 = step_seconds ? hs_now() : 0;
            if (count > 0) task->evaluate(task, slot->bufs[i], slot->ranges[i].first, count, stats_dev);
            if (!step_seconds) continue;
            be->synchronize(be);
            step_seconds[step] = hs_now() - t0;
            if (count > 0) {
                *samples += count;
                *tokens += task->batch_tokens ? task->batch_tokens(task, slot->bufs[i], count)
                                              : (int64_t)task->tokens_per_sample * count;
            }
        }
        hs_prefetch_release(pf, slot);
        outstanding--;
    }
}

void hs_evaluate_split_timed(hs_task *task, hs_prefetch *pf, const hs_comm *comm, hs_split split,
                             int max_sentences, int max_per_request, hs_stats *global, hs_eval_timing *timing) {
    const double t_start = hs_now();
    /* A stream's evaluation starts with fresh memories (training's carried state is kept). */
    if (task->stream_steps) task->stream_reset(task, split);
    int64_t n;
    hs_range *ranges = pass_ranges(task, comm, split, max_sentences, &n);
    if (timing && n + 1 > INT32_MAX) HS_FATAL(NULL, "%lld evaluation steps: too many to time", (long long)n);
    /* The tasks add into a device stats buffer; it is read once, at the end. */
    const hs_backend *be = task->params.be;
    double *stats_dev = be->alloc(be, HS_STATS_NDOUBLE * sizeof(double)); /* zero-filled */
    /* step times, then the pass's time: the slowest rank's of each by one MPI_MAX all-reduce */
    double *times = NULL;
    if (timing) HS_ALLOC(times, n + 1);
    int64_t samples = 0, tokens = 0;
    run_pass(task, pf, ranges, n, split, max_per_request, stats_dev, times, &samples, &tokens);
    free(ranges);
    /* stats, then (timed) this rank's samples and tokens: one sum all-reduce (exact in double below 2^53) */
    double sums[HS_STATS_NDOUBLE + 2];
    be->download(be, sums, stats_dev, HS_STATS_NDOUBLE * sizeof(double));
    be->free(be, stats_dev);
    if (timing) times[n] = hs_now() - t_start;
    sums[HS_STATS_NDOUBLE] = (double)samples;
    sums[HS_STATS_NDOUBLE + 1] = (double)tokens;
    hs_comm_allreduce_sum_double(comm, sums, HS_STATS_NDOUBLE + (timing ? 2 : 0));
    memcpy(global, sums, sizeof *global);
    if (!timing) return;
    if (comm->size > 1)
        HS_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, times, (int)(n + 1), MPI_DOUBLE, MPI_MAX, comm->world),
                     "all-reduce of the evaluation step times failed");
    timing->steps = n;
    timing->step_seconds = times;
    timing->seconds = times[n];
    timing->samples = (int64_t)sums[HS_STATS_NDOUBLE];
    timing->tokens = (int64_t)sums[HS_STATS_NDOUBLE + 1];
}

void hs_evaluate_split(hs_task *task, hs_prefetch *pf, const hs_comm *comm, hs_split split, int max_sentences,
                       int max_per_request, hs_stats *global) {
    hs_evaluate_split_timed(task, pf, comm, split, max_sentences, max_per_request, global, NULL);
}

/* Rank 0 reads the checkpoint's weights and broadcasts them, so save_dir may be node-local. */
static void load_weights(const char *path, hs_task *task, const hs_comm *comm) {
    if (comm->rank == 0) {
        if (!hs_file_exists(path)) hs_die("checkpoint %s does not exist or is not readable", path);
        hs_checkpoint_load(path, &task->params, NULL, NULL, NULL);
    }
    hs_comm_bcast_device(comm, task->params.be, task->params.data, task->params.total * sizeof(float), 0);
}

/* --report FILE: rank 0 checks before the pass that the file can be written (an existing file writable,
 * else its directory), so a long evaluation does not end in an error; every rank agrees. */
static void check_report_path(const char *path, const hs_comm *comm) {
    if (!path) return;
    int ok = 1, err = 0;
    if (comm->rank == 0) {
        if (!*path) {
            ok = 0;
            err = ENOENT;
        } else if (access(path, F_OK) == 0) {
            struct stat st;
            ok = stat(path, &st) == 0 && !S_ISDIR(st.st_mode) && access(path, W_OK) == 0;
            err = ok || errno ? errno : EISDIR;
        } else {
            char *dir = HS_STRDUP(path);
            ok = access(dirname(dir), W_OK | X_OK) == 0;
            err = errno;
            free(dir);
        }
    }
    if (!hs_comm_all_true(comm, ok))
        hs_die_all("--report %s: cannot write the report there (%s): give a file in a writable directory", path,
                   comm->rank == 0 ? strerror(err) : "see rank 0");
}

/* Rank 0 writes the report; every rank learns whether it could. */
static void write_report(const char *path, const char *text, const hs_comm *comm) {
    int ok = 1, err = 0;
    if (comm->rank == 0) {
        FILE *f = fopen(path, "w");
        ok = f && fputs(text, f) >= 0;
        err = errno;
        if (f && fclose(f) != 0 && ok) {
            ok = 0;
            err = errno;
        }
    }
    if (!hs_comm_all_true(comm, ok))
        hs_die_all("--report %s: writing the report failed (%s): check the space and permissions there", path,
                   comm->rank == 0 ? strerror(err) : "see rank 0");
}

/* "cpu" or "cuda" when every rank has that device, else "mixed (N cuda, M cpu)". Collective. */
static void device_summary(const hs_backend *be, const hs_comm *comm, char *buf, size_t n) {
    double cuda = !strcmp(be->name, "cuda");
    hs_comm_allreduce_sum_double(comm, &cuda, 1);
    const int ncuda = (int)cuda;
    if (ncuda == 0 || ncuda == comm->size) snprintf(buf, n, "%s", ncuda ? "cuda" : "cpu");
    else snprintf(buf, n, "mixed (%d cuda, %d cpu)", ncuda, comm->size - ncuda);
}

int hs_eval_main(const hs_config *cfg, const hs_eval_options *opt, const hs_comm *comm) {
    const hs_split split = opt->split && !strcmp(opt->split, "test") ? HS_SPLIT_TEST : HS_SPLIT_VALID;
    const char *split_name = split == HS_SPLIT_TEST ? "test" : "valid";
    check_report_path(opt->report_path, comm);
    hs_train_config tc;
    hs_eval_config_load(cfg, &tc);
    hs_setup_threads(comm);
    const hs_backend *be = hs_setup_backend(&tc, comm);
    hs_task *task = hs_setup_task(&tc, comm, be);
    if (split == HS_SPLIT_TEST && !task->has_test_split)
        hs_die_all("hetseq eval --split test: the %s task has no test split (its only evaluation data is the "
                   "validation split, data.valid_subset = \"%s\"): use --split valid (the default), with "
                   "data.valid_subset pointing at the data to evaluate",
                   task->name, tc.task.valid_subset);
    load_weights(opt->checkpoint, task, comm);
    const int max_sentences = tc.task.max_sentences;
    const int max_count = hs_evaluate_max_count(task, comm, split, max_sentences);
    hs_prefetch *pf = hs_prefetch_start(task, be, max_count, 4);
    char device[64];
    device_summary(be, comm, device, sizeof device);
    hs_stats global;
    hs_eval_timing tm;
    hs_evaluate_split_timed(task, pf, comm, split, max_sentences, 4, &global, &tm);
    hs_prefetch_stop(pf);

    long long total = (long long)global.sample_count, correct = (long long)global.correct;
    double loss;
    char fields[512] = "";
    if (task->loss_from_stats) {
        /* Tasks with several loss terms (BERT: MLM + NSP) print their own metrics. */
        loss = task->loss_from_stats(&global);
        if (task->format_stats) task->format_stats(&global, 0, fields, sizeof fields);
        if (split == HS_SPLIT_TEST)
            hs_log("\nTest set: loss %.4f%s, samples %lld\n", loss, fields, total);
        else
            hs_log("\nValidation set (%s): loss %.4f%s, samples %lld\n", tc.task.valid_subset,
                   loss, fields, total);
        fields[0] = '\0';
        if (task->format_stats) task->format_stats(&global, 1, fields, sizeof fields);
        /* a language model (the task reports a perplexity): NVIDIA's Transformer-XL eval.py summary */
        double ppl;
        if (hs_task_field(fields, "ppl", &ppl))
            hs_log("| %s loss %5.2f | %s ppl %9.3f", split_name, loss, split_name, ppl);
    } else {
        /* HetSeq's eval_mnist.py line, with the true average loss (HetSeq divided batch means by N). */
        loss = total ? global.loss_sum / (double)total : 0.0;
        hs_log("\nTest set: Average loss: %.4f, Accuracy: %lld/%lld (%.0f%%)\n", loss, correct, total,
               total ? 100.0 * (double)correct / (double)total : 0.0);
        snprintf(fields, sizeof fields, ", \"accuracy\": %.10g, \"correct\": %lld",
                 total ? (double)correct / (double)total : 0.0, correct);
    }

    /* NVIDIA's summary: throughput over the whole pass; latency per step after warm-up. */
    hs_latency_summary lat;
    hs_latency_summarize(tm.step_seconds, tm.steps, opt->warmup_steps, &lat);
    const int has_tokens = task->batch_tokens || task->tokens_per_sample > 0;
    const double secs = tm.seconds > 0 ? tm.seconds : 1e-9;
    hs_log("| %s split: %lld samples in %lld steps (a micro-batch of up to %d per rank) on %d rank(s), %s, "
           "%.3f s",
           split_name, (long long)tm.samples, (long long)tm.steps, max_count,
           comm->size, device, tm.seconds);
    hs_log("Throughput Average (sequences/sec) = %.2f", (double)tm.samples / secs);
    if (has_tokens) hs_log("Throughput Average (tokens/sec) = %.2f", (double)tm.tokens / secs);
    hs_log("Latency Average (ms) = %.2f", 1e3 * lat.mean);
    hs_log("Latency 50%% (ms) = %.2f", 1e3 * lat.p50);
    hs_log("Latency 90%% (ms) = %.2f", 1e3 * lat.p90);
    hs_log("Latency 95%% (ms) = %.2f", 1e3 * lat.p95);
    hs_log("Latency 99%% (ms) = %.2f", 1e3 * lat.p99);
    hs_log("| latency: time of a step on its slowest rank, over %lld steps after %d warm-up step(s)%s; "
           "percentiles as numpy.percentile",
           (long long)lat.measured, lat.warmup, lat.warmup < opt->warmup_steps ? " (fewer: a short pass)" : "");

    if (opt->report_path) {
        const hs_eval_report r = {
            .task = task->name, .split = split_name, .checkpoint = opt->checkpoint,
            .device = device, .world_size = comm->size, .loss = loss, .task_fields = fields,
            .samples = tm.samples, .tokens = has_tokens ? tm.tokens : -1, .seconds = tm.seconds,
            .steps = tm.steps, .step_seconds = tm.step_seconds, .latency = lat,
        };
        char *text = comm->rank == 0 ? hs_eval_report_json(&r) : NULL;
        write_report(opt->report_path, text, comm);
        free(text);
        hs_log("| wrote %s", opt->report_path);
    }
    free(tm.step_seconds);
    hs_task_destroy(task);
    return 0;
}
