/* The training loop (HetSeq's train.py main/train + Controller.train_step, on MPI):
 *   for each epoch: shuffle batches (sampler), take this rank's shard, group update_freq micro-batches
 *   for each update: forward/backward every micro-batch (sum of per-sample losses) -> the gradient
 *     all-reduce (in buckets, overlapped with the last micro-batch's backward: comm/grad_buckets.h)
 *     -> one float64 stat all-reduce -> grad /= global sample count -> clip -> optimizer
 *     step -> lr schedule; log, validate and checkpoint at their intervals.
 * Deviation from HetSeq (docs/deviations.md): gradients are normalised by the real global number of
 * samples, not by W*uf*len(sample[0][0]). */
#include <errno.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/ledger.h"
#include "comm/grad_buckets.h"
#include "comm/stall.h"
#include "train/prefetch.h"
#include "train/balance.h"
#include "data/sampler.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "train/checkpoint.h"
#include "train/loss_scaler.h"
#include "train/meters.h"
#include "train/profile_range.h"
#include "train/setup.h"
#include "train/train_config.h"
#include "train/trainer.h"
#include "train/update_graphs.h"
#include "util/check.h"
#include "util/env_flag.h"
#include "util/fault.h"
#include "util/hash.h"
#include "util/log.h"
#include "util/stop_signal.h"
#include "util/timer.h"

typedef struct trainer {
    hs_train_config tc; /* the run's settings, read once from the experiment file */
    const hs_comm *comm;
    const hs_backend *be;
    hs_task *task;
    hs_optimizer *opt;
    hs_lr_scheduler sched;
    hs_sampler sampler;
    hs_balance balance;        /* weighted shares of each global batch (off: HetSeq's equal micro-batches) */
    int stream;                /* the task walks its data in order (task->stream_*): no HetSeq sampler */
    hs_range *update_ranges;   /* [balance.max_ranges or max_update_freq] this rank's micro-batches of one update */
    hs_prefetch *pf;
    hs_grad_buckets *buckets; /* the gradient all-reduce (distributed.bucket_cap_mb, allreduce_dtype) */
    hs_meters meters;
    hs_train_state st;
    hs_loss_scaler scaler; /* precision = "fp16" (loss_scaler.enabled); its state is copied into st */
    char *config_text;
    /* The device stats buffer (float64): the task's statistics in hs_stats' layout, then the gradient's
     * global sum of squares and each tensor's (layout below). Ops add into it; train_update downloads
     * its head once per update. */
    double *stats_dev;
    int stop_signal;          /* agreed over all ranks: the signal that stops the run, or 0 */
    int64_t last_saved_update; /* num_updates of the newest checkpoint written (-1 = none) */
    /* Input staging one update ahead (docs/gpu.md, "Input staging"): on when the task has a stage hook
     * and HETSEQ_INPUT_STAGING is not "sync". `ahead` is the next update's slot, held and staged while
     * this update computed; `may_stage_ahead`: its read was requested. */
    int stage_inputs;
    int may_stage_ahead;
    hs_prefetch_slot *ahead;
    int64_t staged_ahead; /* updates whose inputs were staged during the update before */
    hs_update_graphs graphs; /* cuda_graphs: the update's device work as CUDA graphs */
    hs_profile_range profile; /* HETSEQ_PROFILE_UPDATES: the profiler's range around chosen updates */
    /* this run's updates; of them, those whose forward..norm / optimizer step was launched as a graph */
    int64_t run_updates, graphed_updates, graphed_steps;
    int64_t replayed_updates, replayed_steps; /* of those, launched without a capture (update_graphs.h) */
    /* the run */
    double start_time;
    char metrics_path[4096]; /* "" = no metrics file */
    int64_t n_train;         /* training samples */
    int resumed;             /* resumed from checkpoint_last.h5 */
} trainer;


/* HETSEQ_CUDA_LEDGER_WARMUP: how many first updates the ledger's table leaves out (a non-negative
 * integer; unset: 0). Read once; a malformed value ends the run with a message. */
static int64_t ledger_warmup(void) {
    static int64_t n = -1;
    if (n < 0) {
        const char *v = getenv("HETSEQ_CUDA_LEDGER_WARMUP");
        char *end = NULL;
        long long x = v && *v ? strtoll(v, &end, 10) : 0;
        if (v && *v && (*end || x < 0))
            HS_FATAL("set it to a number of updates, e.g. HETSEQ_CUDA_LEDGER_WARMUP=1",
                     "HETSEQ_CUDA_LEDGER_WARMUP=%s is not a non-negative integer", v);
        n = x;
    }
    return n;
}

static void make_dir(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(path, 0775) != 0 && errno != EEXIST)
            hs_die("cannot create directory %s (%s): check checkpoint.save_dir", path, strerror(errno));
        *p = '/';
    }
    if (mkdir(path, 0775) != 0 && errno != EEXIST)
        hs_die("cannot create directory %s (%s): check checkpoint.save_dir", path, strerror(errno));
}

/* ---- checkpoints --------------------------------------------------------------------------------- */

/* epoch: the epoch the checkpoint belongs to (the one just finished, or the one in progress). The file
 * is written once; checkpoint_last.h5 becomes a hard link to it (no second write stalls the peers). */
/* The task's resume state (Transformer-XL's memories) gathered to rank 0: a collective call, so every
 * rank calls it at the same save. Empty for tasks without state. */
static void gather_task_state(trainer *t, hs_task_state *ts) {
    memset(ts, 0, sizeof *ts);
    if (t->task->gather_state) t->task->gather_state(t->task, t->comm, ts);
}

/* What both saves do: the task's state gathered (collective), then rank 0 writes `name` in save_dir
 * (*started: when the writing began). Returns 1 on rank 0 when it wrote; 0 on the other ranks and
 * with checkpoint.no_save. */
static int write_checkpoint(trainer *t, const char *name, double *started) {
    t->last_saved_update = t->st.num_updates;
    if (t->tc.no_save) return 0;
    hs_task_state ts;
    gather_task_state(t, &ts);
    if (t->comm->rank != 0) return 0;
    hs_stall_phase(HS_PHASE_CHECKPOINT, t->st.num_updates, 0);
    *started = hs_now();
    t->st.balance_shares = hs_balance_checkpoint_shares(&t->balance, t->st.num_updates);
    t->st.balance_ranks = t->comm->size;
    hs_checkpoint_save_with_task(t->tc.save_dir, name, &t->task->params, t->opt, &t->st, t->config_text, &ts);
    hs_task_state_free(&ts);
    return 1;
}

static void save(trainer *t, const char *name, int64_t epoch) {
    double started;
    if (!write_checkpoint(t, name, &started)) return;
    hs_checkpoint_link(t->tc.save_dir, name, "checkpoint_last.h5");
    hs_checkpoint_prune(t->tc.save_dir, t->tc.keep_last);
    hs_log("| saved checkpoint %s/%s (epoch %lld @ %lld updates) (writing took %.3f seconds)", t->tc.save_dir, name,
           (long long)epoch, (long long)t->st.num_updates, hs_now() - started);
}

/* checkpoint_last.h5 only (end of an epoch without a numbered save). */
static void save_last(trainer *t) {
    double started;
    write_checkpoint(t, "checkpoint_last.h5", &started);
}

/* ---- resume checks ------------------------------------------------------------------------------- */

/* Rank 0: compare the settings that decide the data order and the meaning of the saved position with
 * the checkpoint's own configuration (its /config text) and world size. A change that would silently
 * change which samples come next stops the run and names the setting and the checkpoint.reset_* key
 * that accepts it; a change of world size at the same global batch (ranks x update_freq) is exact and
 * is allowed. Returns 1 if the data position must restart at the start of the saved epoch. */
static int check_resume(trainer *t, const char *path, const hs_train_state *saved, const char *saved_text,
                        int64_t n_train) {
    const int reset_data = t->tc.reset_dataloader;
    if (!saved_text || !*saved_text) return 0; /* a checkpoint without its config: nothing to compare */
    hs_config *old_cfg = hs_config_load_string(saved_text, path, 0, NULL);
    hs_train_config old_tc;
    hs_train_config_read(old_cfg, &old_tc);
    const hs_train_config *old = &old_tc, *now = &t->tc;
    const hs_task_settings *old_task = &old->task, *now_task = &now->task;
    char why[1024] = "";
    if (strcmp(old_task->name, now_task->name) != 0)
        hs_die("%s was written by a \"%s\" run but this run's task is \"%s\": use another checkpoint.save_dir", path,
               old_task->name, now_task->name);
    if (old_task->seed != now_task->seed)
        snprintf(why, sizeof why, "seed changed from %lld to %lld (it decides the shuffle)", (long long)old_task->seed,
                 (long long)now_task->seed);
    else if (old_task->max_sentences != now_task->max_sentences)
        snprintf(why, sizeof why, "training.max_sentences changed from %lld to %lld (it decides the batches)",
                 (long long)old_task->max_sentences, (long long)now_task->max_sentences);
    else if (saved->train_samples > 0 && saved->train_samples != n_train)
        snprintf(why, sizeof why, "the training data changed from %lld to %lld samples (data.path = \"%s\", was \"%s\")",
                 (long long)saved->train_samples, (long long)n_train, now_task->data_path, old_task->data_path);
    else if (saved->world_size > 0 && !t->stream) {
        /* (A stream task's global batch is its own setting, e.g. txl.batch_size columns; its state checks
         * the layout when it is restored.) */
        for (int64_t e = saved->epoch; e < saved->epoch + 64 && !why[0]; e++) {
            int64_t before = saved->world_size * hs_train_config_update_freq(old, e), after = t->comm->size * hs_train_config_update_freq(now, e);
            if (before != after)
                snprintf(why, sizeof why,
                         "the global batch of epoch %lld changed: the checkpoint ran %lld rank(s) x update_freq %lld "
                         "= %lld micro-batches per update, this run %d rank(s) x update_freq %lld = %lld (keep ranks x "
                         "training.update_freq the same to resume exactly)",
                         (long long)e, (long long)saved->world_size, (long long)hs_train_config_update_freq(old, e), (long long)before,
                         t->comm->size, (long long)hs_train_config_update_freq(now, e), (long long)after);
        }
        if (!why[0] && saved->world_size != t->comm->size)
            hs_log("| resuming on %d rank(s) x update_freq %lld where the checkpoint ran %lld rank(s) x update_freq %lld: "
                   "the same global batch, so the data order continues exactly",
                   t->comm->size, (long long)hs_train_config_update_freq(now, saved->epoch), (long long)saved->world_size,
                   (long long)hs_train_config_update_freq(old, saved->epoch));
    }
    if (!why[0] && !now->reset_lr_scheduler) {
        const struct {
            const char *key;
            double before, now;
        } lr[] = {{"optimizer.lr", old->lr.lr, now->lr.lr},
                  {"lr_scheduler.warmup_proportion", old->lr.warmup_proportion, now->lr.warmup_proportion},
                  {"lr_scheduler.end_learning_rate", old->lr.end_learning_rate, now->lr.end_learning_rate},
                  {"lr_scheduler.power", old->lr.power, now->lr.power}};
        for (int i = 0; i < 4; i++)
            if (lr[i].before != lr[i].now)
                hs_log("| note: %s is %g in this run but %g in %s: the resumed run continues the saved learning rate; "
                       "set checkpoint.reset_lr_scheduler = true to apply this run's schedule", lr[i].key, lr[i].now,
                       lr[i].before, path);
    }
    hs_config_free(old_cfg);
    if (!why[0]) return 0;
    if (!reset_data)
        hs_die("cannot resume from %s: %s. Resuming would silently change which samples come next. Either use another "
               "checkpoint.save_dir, restore the setting, or set checkpoint.reset_dataloader = true to keep the weights, "
               "optimizer and update count and restart the data order at the start of epoch %lld",
               path, why, (long long)saved->epoch);
    hs_log("| checkpoint.reset_dataloader: %s; epoch %lld restarts from its first update", why, (long long)saved->epoch);
    return 1;
}

/* Rank 0 reads; everything is broadcast, so a node-local save_dir works too. Returns 1 if resumed. */
static int restore(trainer *t, int64_t n_train) {
    char last[4096];
    snprintf(last, sizeof last, "%s/checkpoint_last.h5", t->tc.save_dir);
    const char *init = t->tc.init_checkpoint;
    if (t->comm->rank == 0 && !t->tc.no_save) hs_checkpoint_remove_stale(t->tc.save_dir);
    int resume = t->comm->rank == 0 && hs_file_exists(last);
    hs_comm_bcast_bytes(t->comm, &resume, sizeof resume, 0);
    hs_params *p = &t->task->params;
    const int reset_opt = t->tc.reset_optimizer, reset_sched = t->tc.reset_lr_scheduler;
    hs_task_state task_state; /* rank 0: the checkpoint's /task_state (empty elsewhere or when not kept) */
    memset(&task_state, 0, sizeof task_state);
    if (resume) {
        if (t->comm->rank == 0) {
            /* Compare the settings first: a checkpoint of another task or data order is refused with the
             * reason, before its tensors are matched against this model. */
            char *saved_text = NULL;
            hs_train_state saved;
            memset(&saved, 0, sizeof saved);
            hs_checkpoint_read_state(last, &saved, &saved_text);
            int restart_epoch = check_resume(t, last, &saved, saved_text, n_train);
            free(saved_text);
            hs_checkpoint_load(last, p, reset_opt ? NULL : t->opt, &t->st, NULL);
            if (restart_epoch) t->st.updates_in_epoch = 0;
            /* The carried state belongs to the saved position: kept only when the run continues there. */
            else if (t->st.updates_in_epoch > 0) hs_checkpoint_read_task_state(last, &task_state);
            hs_log("| resuming from %s (epoch %lld, %lld updates into it, %lld updates in all)", last,
                   (long long)t->st.epoch, (long long)t->st.updates_in_epoch, (long long)t->st.num_updates);
        }
        hs_comm_bcast_bytes(t->comm, &t->st, sizeof t->st, 0);
        if (t->task->scatter_state && t->st.updates_in_epoch > 0)
            t->task->scatter_state(t->task, t->comm, &task_state); /* collective */
        hs_task_state_free(&task_state);
        hs_comm_bcast_bytes(t->comm, &t->opt->step, sizeof t->opt->step, 0);
        for (int s = 0; s < t->opt->n_states; s++)
            hs_comm_bcast_device(t->comm, t->be, t->opt->state[s], p->total * sizeof(float), 0);
        if (reset_sched) {
            /* The experiment file's schedule, evaluated at the resumed update count. */
            t->st.lr = hs_lr_step_update(&t->sched, t->st.num_updates);
            t->st.lr_base = t->sched.base_lr;
        } else {
            t->sched.base_lr = t->st.lr_base;
            t->sched.lr = t->st.lr;
        }
    } else if (*init) {
        /* Start a new run (e.g. phase 2) from another run's checkpoint, as NVIDIA does: weights always;
         * the optimizer's moments unless reset_optimizer; its step count and the update counter restart
         * with reset_step (bias correction starts again at t = 1). The data position and the schedule are
         * this run's own. */
        const int reset_step = t->tc.reset_step;
        hs_train_state from;
        memset(&from, 0, sizeof from);
        int with_opt = 0, with_state = 0;
        if (t->comm->rank == 0) {
            if (!hs_file_exists(init))
                hs_die("checkpoint.init_checkpoint = \"%s\": no such readable file", init);
            /* A weights-only checkpoint (e.g. converted from PyTorch) starts fresh moments and counters. */
            hs_checkpoint_contents(init, &with_opt, &with_state);
            with_opt = with_opt && !reset_opt;
            hs_checkpoint_load(init, p, with_opt ? t->opt : NULL, with_state ? &from : NULL, NULL);
            hs_log("| initialised %s from %s%s", with_opt ? "weights and optimizer moments" : "weights", init,
                   reset_step ? " (step counters reset)" : "");
        }
        hs_comm_bcast_bytes(t->comm, &with_opt, sizeof with_opt, 0);
        if (with_opt) {
            hs_comm_bcast_bytes(t->comm, &t->opt->step, sizeof t->opt->step, 0);
            for (int s = 0; s < t->opt->n_states; s++)
                hs_comm_bcast_device(t->comm, t->be, t->opt->state[s], p->total * sizeof(float), 0);
        }
        hs_comm_bcast_bytes(t->comm, &from.num_updates, sizeof from.num_updates, 0);
        if (reset_step) {
            t->opt->step = 0;
        } else {
            t->st.num_updates = from.num_updates;
            t->st.lr = hs_lr_step_update(&t->sched, t->st.num_updates);
            t->st.lr_base = t->sched.base_lr;
        }
    }
    /* Every rank starts from rank 0's weights (as DDP's constructor does). */
    hs_comm_bcast_device(t->comm, t->be, p->data, p->total * sizeof(float), 0);
    return resume;
}

/* ---- one update ------------------------------------------------------------------------------------ */

/* Slots of the device stats buffer after the task's statistics: ||g||², then Σ g² of each tensor. */
enum { DEV_GRAD_SUMSQ = HS_STATS_NDOUBLE, DEV_TENSOR_SUMSQ, DEV_HEAD = DEV_TENSOR_SUMSQ };

/* The first tensor whose gradient holds a NaN or an Inf (its Σ g² is then not finite: float squares
 * cannot overflow a double), or NULL. Only called when the gradient norm or the loss is not finite. */
static const char *first_nonfinite_tensor(const trainer *t) {
    const hs_params *p = &t->task->params;
    double *sumsq;
    HS_ALLOC(sumsq, p->count ? p->count : 1);
    t->be->download(t->be, sumsq, t->stats_dev + DEV_TENSOR_SUMSQ, (size_t)p->count * sizeof *sumsq);
    const char *name = NULL;
    for (int i = 0; i < p->count && !name; i++)
        if (!isfinite(sumsq[i])) name = p->tensors[i].name;
    free(sumsq);
    return name;
}

/* Checks and enqueues the uploads of every micro-batch of a slot into the task's input sets of the
 * slot's parity, then fences the slot: its buffers are refilled only after these copies ran. */
static void stage_slot(trainer *t, hs_prefetch_slot *slot) {
    for (int i = 0; i < slot->n; i++)
        if (slot->ranges[i].count > 0) t->task->stage(t->task, slot->bufs[i], slot->ranges[i].count, i, slot->index);
    t->be->event_record(t->be, slot->fence, HS_STREAM_COPY);
}

/* Called once this update's forward/backward work is enqueued and before the host blocks on its
 * results: if the next update's slot has been read already, stage it, so its checks run on the host
 * and its uploads on the copy stream while the device computes this update. It never waits for the
 * read: a rank blocked here, between its backward pass and the gradient all-reduce, would hold up every
 * other rank in their collectives while its input thread is still reading (the next update waits for
 * the slot at its start instead, as without staging ahead). */
static void stage_ahead(trainer *t) {
    if (!t->stage_inputs || !t->may_stage_ahead || t->ahead) return;
    t->ahead = hs_prefetch_try_wait(t->pf);
    if (!t->ahead) return;
    stage_slot(t, t->ahead);
    t->staged_ahead++;
}

/* Slots of the per-update float64 all-reduce after the task's statistics: the stop request, and
 * whether the rank's summed gradient holds a NaN/Inf (summed: the loss scaler's decision is global). */
enum { SYNC_STOP = HS_STATS_NDOUBLE, SYNC_OVERFLOW, SYNC_LEN };

/* The optimizer step's graph key (update_graphs.h), + 1 for a clipped step; the forward/backward keys
 * are hashes of the shape. */
#define STEP_GRAPH_KEY 0x5354455000000000ull

/* The scaler's state into st (what checkpoints save and the meters log); all zero when it is off. */
static void scaler_to_state(trainer *t) {
    const int on = t->scaler.cfg.enabled;
    t->st.loss_scale = on ? t->scaler.scale : 0.0;
    t->st.loss_scale_good_steps = on ? t->scaler.good_steps : 0;
    t->st.loss_scale_skipped = on ? t->scaler.skipped : 0;
}

/* An update whose gradient overflowed (on some rank) with the loss scaler on: every rank drops the
 * gradients without touching the parameters or the optimizer (moments, step count) and backs off the
 * scale. The update still counts (num_updates, data position, lr schedule: torch calls
 * scheduler.step() after a skipped scaler.step()). */
static void skip_update(trainer *t, int64_t update) {
    const double before = t->scaler.scale;
    if (hs_loss_scaler_update(&t->scaler, 1) == HS_SCALER_UNDERFLOW)
        hs_die("update %lld: gradient overflow with the loss scale at %.10g, and backing off to %.10g would go below "
               "loss_scaler.min_scale = %.10g: the run has diverged in fp16. Try precision = \"bf16\" or a lower "
               "optimizer.lr; the last checkpoint in %s is intact (nothing of this update was saved)",
               (long long)update, before, t->scaler.scale, t->scaler.cfg.min_scale, t->tc.save_dir);
    hs_log("| update %lld: gradient overflow, skipped; loss scale %.10g -> %.10g", (long long)update, before,
           t->scaler.scale);
}

/* One update. Returns the stop signal agreed by all ranks at its end (0 = go on). */
static int train_update(trainer *t, hs_prefetch_slot *slot) {
    double t0 = hs_now();
    int64_t update = t->st.num_updates + 1; /* 1-based, as logged */
    hs_profile_range_update_begin(&t->profile, update);
    hs_ledger_update_begin(); /* the device ops from here to the end of the update count as its own */
    hs_stall_phase(HS_PHASE_COMPUTE, update, 0);
    hs_fault_update_start(update);
    hs_params *p = &t->task->params;
    /* The last non-empty micro-batch's backward starts the bucket all-reduces as its gradients become
     * final; earlier ones only accumulate. */
    int last = -1;
    for (int i = 0; i < slot->n; i++)
        if (slot->ranges[i].count > 0) last = i;
    /* the gradients the first micro-batch's writers add to; those it writes whole are left (none runs on
     * this rank: every gradient zeroed, this rank's share of the all-reduce) */
    if (last >= 0)
        hs_params_zero_grad_accumulated(p);
    else
        hs_params_zero_grad(p);
    t->be->zero(t->be, t->stats_dev, HS_STATS_NDOUBLE * sizeof(double));
    hs_step_ctx ctx = {.seed = t->st.seed, .update = (uint64_t)t->st.num_updates, .training = 1};
    /* Global counts of each loss term first, so every rank backpropagates the true global mean. */
    double counts[HS_NORM_TERMS] = {0};
    for (int i = 0; i < slot->n; i++)
        if (slot->ranges[i].count > 0) {
            double c[HS_NORM_TERMS] = {0};
            t->task->batch_norm_counts(t->task, slot->bufs[i], slot->ranges[i].count, c);
            for (int k = 0; k < HS_NORM_TERMS; k++) counts[k] += c[k];
        }
    hs_stall_phase(HS_PHASE_STAT_ALLREDUCE, update, 1);
    hs_comm_allreduce_sum_double(t->comm, counts, HS_NORM_TERMS);
    hs_stall_phase(HS_PHASE_COMPUTE, update, 0);
    for (int k = 0; k < HS_NORM_TERMS; k++) ctx.loss_scale[k] = counts[k] > 0 ? 1.0 / counts[k] : 0.0;
    /* Dynamic loss scaling: backpropagate S * loss (S a power of two: exact in fp32). */
    if (t->scaler.cfg.enabled)
        for (int k = 0; k < HS_NORM_TERMS; k++) ctx.loss_scale[k] *= t->scaler.scale;
    /* EMPTY micro-batches contribute zero gradient and zero counts but the rank still joins the
     * collectives below, so every rank issues the same calls. */
    const double compute_start = hs_now();
    int64_t samples = 0;
    /* The overlap (the last non-empty micro-batch's bucket all-reduces): not when this rank injects a NaN
     * or an Inf into its gradient after backward (the bucket holding it must not have left yet), nor when
     * balance = auto times a device whose synchronize would wait for peers. */
    const int inject_nan = hs_fault_fires(HS_FAULT_NAN, update);
    const int inject_overflow = hs_fault_fires(HS_FAULT_OVERFLOW, update);
    const int overlap = !inject_nan && !inject_overflow && (!t->balance.auto_mode || t->be->memory_is_host);
    /* CUDA graphs (cuda_graphs): from a shape's second update on, the device work from here to the
     * gradient norm (forward, backward, the bucketed all-reduce) is a graph region of the shape (the
     * staging slot and the micro-batch sizes): recorded, then a graph of the same op sequence launched
     * again without a capture, or the region captured (docs/gpu.md, "CUDA graphs"). Not while anything
     * in it waits for the device: balance = auto's timing, the injected faults, host-staged all-reduces,
     * and inputs uploaded synchronously (no staging, HETSEQ_INPUT_STAGING=sync). */
    uint64_t shape = hs_fnv1a64(HS_FNV64_OFFSET, &slot->index, sizeof slot->index);
    shape = hs_fnv1a64(shape, &slot->n, sizeof slot->n);
    for (int i = 0; i < slot->n; i++) shape = hs_fnv1a64(shape, &slot->ranges[i].count, sizeof slot->ranges[i].count);
    const int graphed = hs_update_graphs_begin(&t->graphs, shape,
                                               t->stage_inputs && !t->balance.auto_mode && !inject_nan &&
                                                   !inject_overflow && hs_grad_buckets_capturable(t->buckets));
    hs_grad_buckets_start(t->buckets);
    ctx.grads_zero = 1; /* hs_params_zero_grad_accumulated above; until the first non-empty micro-batch has run */
    for (int i = 0; i < slot->n; i++)
        if (slot->ranges[i].count > 0) {
            ctx.grads_ready = i == last && overlap ? hs_grad_buckets_ready : NULL;
            ctx.grads_ready_arg = t->buckets;
            t->task->forward_backward(t->task, slot->bufs[i], slot->ranges[i].first, slot->ranges[i].count, &ctx,
                                      t->stats_dev);
            ctx.grads_zero = 0;
            samples += slot->ranges[i].count;
        }
    double compute_seconds = 0.0, fixed_seconds = 0.0, mark = 0.0;
    if (t->balance.auto_mode) {
        /* this rank's own compute time, for balance = auto (a device that enqueues must finish first) */
        if (!t->be->memory_is_host) t->be->synchronize(t->be);
        compute_seconds = hs_now() - compute_start;
    }
    /* the next update's inputs, while this one computes (after the launch when captured: staging waits
     * for host events and may allocate input sets, which stay out of the capture) */
    if (!graphed) stage_ahead(t);
    if (inject_nan) {
        float nan = NAN;
        p->be->upload(p->be, p->grad, &nan, sizeof nan);
    }
    if (inject_overflow) {
        float inf = INFINITY;
        p->be->upload(p->be, p->grad, &inf, sizeof inf);
    }
    hs_stall_phase(HS_PHASE_GRAD_ALLREDUCE, update, 1);
    hs_grad_buckets_finish(t->buckets);
    if (t->balance.auto_mode) mark = hs_now();
    /* ||g||² of the summed gradients into the stats buffer, then its one download of this update. */
    hs_grad_sumsq(p, t->stats_dev + DEV_TENSOR_SUMSQ, t->stats_dev + DEV_GRAD_SUMSQ);
    t->run_updates++;
    if (graphed) { /* launched: the download below waits for it */
        t->replayed_updates += hs_update_graphs_end(&t->graphs) == 2;
        t->graphed_updates++;
        stage_ahead(t);
    }
    double head[DEV_HEAD];
    t->be->download(t->be, head, t->stats_dev, sizeof head);
    /* the norm of the unscaled gradient (with the scaler on, the gradient is S times it) */
    const double grad_scale = t->scaler.cfg.enabled ? t->scaler.scale : 1.0;
    const double gnorm = sqrt(head[DEV_GRAD_SUMSQ]) / grad_scale;
    /* Fast stat sync: the statistics and the stop request travel in one float64 all-reduce. */
    double sync[SYNC_LEN];
    memcpy(sync, head, HS_STATS_NDOUBLE * sizeof(double));
    sync[SYNC_STOP] = hs_stop_signal();
    sync[SYNC_OVERFLOW] = isfinite(head[DEV_GRAD_SUMSQ]) ? 0.0 : 1.0;
    if (t->balance.auto_mode) fixed_seconds = hs_now() - mark;
    hs_stall_phase(HS_PHASE_STAT_ALLREDUCE, update, 1);
    hs_comm_allreduce_sum_double(t->comm, sync, SYNC_LEN);
    if (t->balance.auto_mode) mark = hs_now();
    hs_stats stats;
    memcpy(&stats, sync, sizeof stats);
    hs_stall_phase(HS_PHASE_OPTIMIZER, update, 0);
    /* With the loss scaler on, an overflow on any rank skips the update on every rank. */
    const int skip = t->scaler.cfg.enabled && sync[SYNC_OVERFLOW] > 0;
    int finite = isfinite(gnorm);
    for (int k = 0; k < HS_STATS_NDOUBLE; k++) finite = finite && isfinite(sync[k]);
    if (skip) {
        skip_update(t, update);
    } else if (!finite) {
        /* Every rank holds the same all-reduced values, so every rank stops here with the same message. */
        const char *bad = first_nonfinite_tensor(t);
        hs_die("training diverged at update %lld: the loss is %g and the gradient norm %g; the first gradient "
               "with a NaN or Inf is %s. Lower optimizer.lr or set optimizer.clip_norm; the last checkpoint in %s "
               "is intact (nothing of this update was saved)",
               (long long)update, hs_meters_loss(&t->meters, &stats), gnorm,
               bad ? bad : "(none: the loss itself overflowed)", t->tc.save_dir);
    } else {
        /* The step as a second graph (cuda_graphs): its host scalars (1/S, the clip factor, lr, the step
         * count) are known only now, after the download; the key tells clipped steps apart (another node). */
        const int clipped = t->tc.optim.clip_norm > 0 && gnorm > t->tc.optim.clip_norm;
        const int step_graphed = hs_update_graphs_begin(&t->graphs, STEP_GRAPH_KEY + (uint64_t)clipped, !inject_nan && !inject_overflow);
        /* Unscale the summed gradients (g / S) before clipping and the step; then the scale may grow. */
        if (t->scaler.cfg.enabled) p->be->scale_tensors(p->be, p->grad, (float)(1.0 / grad_scale), p->table, p->count);
        /* LAMB clips inside its step (before the moments, as apex FusedLAMB); the others clip here. */
        if (!hs_optimizer_clips_internally(t->opt)) hs_clip_grad_scale(p, gnorm, t->tc.optim.clip_norm);
        hs_optimizer_step_with_grad_norm(t->opt, t->st.lr, gnorm);
        if (step_graphed) {
            t->replayed_steps += hs_update_graphs_end(&t->graphs) == 2;
            t->graphed_steps++;
        }
        if (t->scaler.cfg.enabled) hs_loss_scaler_update(&t->scaler, 0);
    }
    scaler_to_state(t);
    if (t->balance.auto_mode) {
        /* + the work every rank does whatever its share (gradient norm, optimizer step), for the shares */
        if (!t->be->memory_is_host) t->be->synchronize(t->be);
        hs_balance_record(&t->balance, update, compute_seconds, fixed_seconds + hs_now() - mark, samples);
    }
    if (hs_fault_fires(HS_FAULT_CORRUPT, update)) {
        float v;
        p->be->download(p->be, &v, p->data, sizeof v);
        uint32_t bits;
        memcpy(&bits, &v, sizeof bits);
        bits ^= 1u; /* the lowest mantissa bit: invisible in the loss, visible to the replica check */
        memcpy(&v, &bits, sizeof bits);
        p->be->upload(p->be, p->data, &v, sizeof v);
    }
    hs_ledger_update_end();
    if (ledger_warmup() > 0 && hs_ledger_state.updates == ledger_warmup()) hs_ledger_mark();
    hs_profile_range_update_end(&t->profile, update);
    t->st.num_updates++;
    t->st.lr = hs_lr_step_update(&t->sched, t->st.num_updates);
    t->st.lr_base = t->sched.base_lr;
    if (skip) t->st.train_wall += hs_now() - t0; /* a skipped update stays out of the loss and gnorm meters */
    else hs_meters_update(&t->meters, &t->st, &stats, gnorm, t->tc.optim.clip_norm > 0 && gnorm > t->tc.optim.clip_norm, hs_now() - t0);
    /* Signals are process-local: the sum over ranks says whether any rank got one. -1: another rank's. */
    if (sync[SYNC_STOP] <= 0) return 0;
    return hs_stop_signal() ? hs_stop_signal() : -1;
}

/* Every rank hashes its parameters tensor by tensor; the minimum and maximum of each hash over the ranks
 * differ exactly where a replica differs (silent data corruption, a non-deterministic op). */
static void check_replicas(trainer *t) {
    const hs_params *p = &t->task->params;
    hs_stall_phase(HS_PHASE_CHECK, t->st.num_updates, 1);
    uint64_t *lo, *hi;
    HS_ALLOC(lo, p->count);
    HS_ALLOC(hi, p->count);
    float *host;
    HS_ALLOC(host, hs_params_max_numel(p));
    for (int i = 0; i < p->count; i++) {
        p->be->download(p->be, host, p->data + p->tensors[i].offset, p->tensors[i].numel * sizeof(float));
        lo[i] = hi[i] = hs_fnv1a64(HS_FNV64_OFFSET, host, p->tensors[i].numel * sizeof(float));
    }
    free(host);
    hs_comm_allreduce_minmax_u64(t->comm, lo, hi, p->count);
    for (int i = 0; i < p->count; i++)
        if (lo[i] != hi[i])
            hs_die_code(HS_EXIT_STALLED,
                        "replica check after update %lld: the ranks hold different values of %s (and possibly later "
                        "tensors), though data-parallel replicas must stay bit-identical. This is silent data "
                        "corruption (memory, a GPU, the network) or a non-deterministic operation; the run stops so "
                        "that no corrupted checkpoint is written. Resume from the last checkpoint (%s); if it "
                        "recurs on the same node, report the node",
                        (long long)t->st.num_updates, p->tensors[i].name, t->tc.save_dir);
    free(lo);
    free(hi);
}

static void validate(trainer *t) {
    double t0 = hs_now();
    hs_stats global;
    hs_stall_phase(HS_PHASE_VALIDATION, t->st.num_updates, 1);
    hs_evaluate_split(t->task, t->pf, t->comm, HS_SPLIT_VALID, t->tc.task.max_sentences, t->tc.max_update_freq,
                      &global);
    hs_meters_log_valid(&t->meters, &t->st, t->tc.task.valid_subset, &global, hs_now() - t0);
}

static void save_mid_epoch(trainer *t) {
    char name[256];
    snprintf(name, sizeof name, "checkpoint_%lld_%lld.h5", (long long)t->st.epoch, (long long)t->st.num_updates);
    save(t, name, t->st.epoch);
}

/* Queue the reads of update k of the epoch: uf micro-batches of this rank's shard (HetSeq), or this
 * rank's weighted share of the update's global batch. */
static void request_update(trainer *t, const hs_range *shard, int64_t shard_len, int uf, int64_t k) {
    if (t->stream) {
        int n = t->task->stream_step_ranges(t->task, HS_SPLIT_TRAIN, t->st.epoch, k, uf, t->comm->rank, t->comm->size,
                                            t->update_ranges);
        hs_prefetch_request(t->pf, HS_SPLIT_TRAIN, t->update_ranges, n);
        return;
    }
    if (t->balance.enabled) {
        int64_t number = t->st.num_updates + 1 + (k - t->st.updates_in_epoch); /* of the run, 1-based */
        int n = hs_balance_update_ranges(&t->balance, &t->sampler, t->st.epoch, k, number, uf, t->update_ranges);
        hs_prefetch_request(t->pf, HS_SPLIT_TRAIN, t->update_ranges, n);
        return;
    }
    hs_prefetch_request(t->pf, HS_SPLIT_TRAIN, shard + k * uf, (int)(k * uf + uf <= shard_len ? uf : shard_len - k * uf));
}

/* Runs (the rest of) epoch st.epoch. Returns 1 if the epoch ended, 0 if max_update or a stop signal
 * stopped it (a checkpoint of the position is written then). */
static int train_epoch(trainer *t) {
    const int uf = (int)hs_train_config_update_freq(&t->tc, t->st.epoch);
    int64_t shard_len = t->stream ? 0 : hs_sampler_shard_len(&t->sampler);
    int64_t n_updates = t->stream ? t->task->stream_steps(t->task, HS_SPLIT_TRAIN, uf, t->comm->size)
                                  : hs_sampler_updates_per_epoch(&t->sampler, uf);
    hs_range *shard;
    HS_ALLOC(shard, shard_len > 0 ? shard_len : 1);
    if (!t->balance.enabled && !t->stream) hs_sampler_epoch_shard(&t->sampler, (int)t->st.epoch, shard);
    /* A stream task starts every epoch with fresh carried state, except when resuming inside it. */
    if (t->stream && t->st.updates_in_epoch == 0) t->task->stream_reset(t->task, HS_SPLIT_TRAIN);
    hs_meters_epoch_start(&t->meters);
    t->st.end_of_epoch = 0; /* a checkpoint written from here on is inside this epoch */

    int64_t u = t->st.updates_in_epoch;
#define REQUEST(k) request_update(t, shard, shard_len, uf, (k))
    int requested = 0;
    if (u < n_updates) {
        REQUEST(u);
        requested = 1;
    }
    int stopped = 0;
    while (u < n_updates) {
        int64_t next_num = t->st.num_updates + 1;
        int stop_after = t->tc.max_update > 0 && next_num >= t->tc.max_update;
        int validate_after = t->tc.validate_interval_updates > 0 && next_num % t->tc.validate_interval_updates == 0 &&
                             u + 1 < n_updates;
        int save_after = t->tc.save_interval_updates > 0 && next_num % t->tc.save_interval_updates == 0 &&
                         u + 1 < n_updates;
        hs_stall_phase(HS_PHASE_INPUT, next_num, 1);
        /* This update's slot: staged during the previous update, or waited for and staged now. */
        hs_prefetch_slot *slot = t->ahead;
        t->ahead = NULL;
        if (!slot) {
            slot = hs_prefetch_wait(t->pf);
            if (t->stage_inputs) stage_slot(t, slot);
        }
        requested = 0;
        /* Read the next update while this one computes, unless validation must read first. */
        if (u + 1 < n_updates && !stop_after && !validate_after) {
            REQUEST(u + 1);
            requested = 1;
        }
        t->may_stage_ahead = requested;
        t->stop_signal = train_update(t, slot);
        t->may_stage_ahead = 0;
        hs_prefetch_release(t->pf, slot);
        hs_balance_maybe_rebalance(&t->balance, t->comm, t->st.num_updates, 0);
        u++;
        t->st.updates_in_epoch = u;
        /* HetSeq prints a 0-based index and never the first update; hetseq counts updates done. */
        if (u % t->tc.log_interval == 0 || u == n_updates)
            hs_meters_log_train(&t->meters, &t->st, u, n_updates, t->st.lr, t->comm->size);
        if (t->tc.check_replicas_every > 0 && t->st.num_updates % t->tc.check_replicas_every == 0) check_replicas(t);
        if (validate_after && !t->stop_signal) validate(t);
        if (save_after) save_mid_epoch(t);
        if (stop_after || (t->stop_signal && u < n_updates)) {
            stopped = u < n_updates;
            if (t->ahead) { /* staged but never computed: the run ends here (the thread waits for its fence) */
                hs_prefetch_release(t->pf, t->ahead);
                t->ahead = NULL;
            }
            break;
        }
        if (!requested && u < n_updates) {
            REQUEST(u);
            requested = 1;
        }
    }
#undef REQUEST
    free(shard);
    if (stopped) {
        /* Stopped inside the epoch: save where we are so a rerun continues here. */
        if (t->last_saved_update != t->st.num_updates) save_mid_epoch(t);
        return 0;
    }
    return 1;
}

static void end_epoch(trainer *t) {
    int64_t epoch = t->st.epoch;
    hs_balance_maybe_rebalance(&t->balance, t->comm, t->st.num_updates, 1);
    if (t->tc.validate_interval > 0 && epoch % t->tc.validate_interval == 0 && !t->stop_signal) validate(t);
    t->st.lr = hs_lr_step_epoch(&t->sched, (int)epoch, t->st.num_updates);
    t->st.lr_base = t->sched.base_lr;
    /* The saved position is where a resumed run starts: the next epoch, no updates into it. */
    t->st.epoch = epoch + 1;
    t->st.updates_in_epoch = 0;
    t->st.end_of_epoch = 1;
    if (t->tc.save_interval > 0 && epoch % t->tc.save_interval == 0) {
        char name[256];
        snprintf(name, sizeof name, "checkpoint%lld.h5", (long long)epoch);
        save(t, name, epoch);
    } else {
        save_last(t);
    }
}

static const char *signal_name(int sig) {
    return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : sig == SIGUSR1 ? "SIGUSR1"
                                                                  : "a stop signal on another rank";
}

/* ---- setup and teardown: the steps of hs_train_main ------------------------------------------------ */

/* The settings, fault injection, the stall inspector and the threads; the effective configuration is
 * logged (and kept for every checkpoint). */
static void start_run(trainer *t, const hs_config *cfg, const hs_comm *comm) {
    memset(t, 0, sizeof *t);
    t->comm = comm;
    t->last_saved_update = -1;
    t->start_time = hs_now();
    hs_fault_init(comm->rank);
    (void)ledger_warmup(); /* a malformed HETSEQ_CUDA_LEDGER_WARMUP ends the run before any work */
    hs_train_config_load(cfg, &t->tc);
    hs_stall_start(comm, t->tc.stall_timeout);
    hs_setup_threads(comm);
    t->config_text = hs_config_to_string(cfg);
    hs_log("%s", t->config_text);
}

/* The metrics file's path and the save directory, which holds the metrics file too, so it exists even
 * with checkpoint.no_save. */
static void open_outputs(trainer *t) {
    const char *metrics = t->tc.metrics_file;
    if (*metrics) {
        if (metrics[0] == '/') snprintf(t->metrics_path, sizeof t->metrics_path, "%s", metrics);
        else snprintf(t->metrics_path, sizeof t->metrics_path, "%s/%s", t->tc.save_dir, metrics);
    }
    if (t->comm->rank == 0 && (!t->tc.no_save || (*metrics && metrics[0] != '/'))) make_dir(t->tc.save_dir);
    hs_comm_barrier(t->comm);
}

/* Backend, task and its initial parameters, optimizer, loss scaler, gradient buckets, the device stats
 * buffer and the schedule's first lr. */
static void build_model(trainer *t) {
    t->be = hs_setup_backend(&t->tc, t->comm);
    t->task = hs_setup_task(&t->tc, t->comm, t->be);
    t->st.seed = t->tc.task.seed;
    t->task->init_params(t->task, t->st.seed);
    t->opt = hs_optimizer_create(&t->tc.optim, &t->task->params);
    hs_loss_scaler_init(&t->scaler, &t->tc.scaler);
    t->buckets =
        hs_grad_buckets_create(t->comm, t->be, &t->task->params, (double)t->tc.bucket_cap_mb, t->tc.allreduce_dtype);
    t->stats_dev = t->be->alloc(t->be, ((size_t)DEV_TENSOR_SUMSQ + (size_t)t->task->params.count) * sizeof(double));
    hs_update_graphs_init(&t->graphs, t->be, t->tc.cuda_graphs);
    hs_profile_range_init(&t->profile, t->be);
    if (t->be->memory_is_host && t->tc.cuda_graphs && t->tc.cuda_graphs_set)
        hs_log("| note: cuda_graphs = true is ignored on the %s backend (CUDA graphs are a device = \"cuda\" feature)",
               t->be->name);
    hs_lr_init(&t->sched, &t->tc.lr);
    t->st.epoch = 1;
    t->st.lr = hs_lr_step_update(&t->sched, 0);
    t->st.lr_base = t->sched.base_lr;
}

/* Resume from checkpoint_last.h5 or start from checkpoint.init_checkpoint (restore), the loss scaler's
 * state with it; then what the next checkpoint records of this run, for the resume checks. */
static void resume(trainer *t) {
    t->n_train = t->task->num_samples(t->task, HS_SPLIT_TRAIN);
    t->resumed = restore(t, t->n_train);
    if (t->resumed) hs_loss_scaler_restore(&t->scaler, t->st.loss_scale, t->st.loss_scale_good_steps, t->st.loss_scale_skipped);
    scaler_to_state(t);
    if (t->scaler.cfg.enabled)
        hs_log("| dynamic loss scaling: scale %.10g, x%g after %lld updates without overflow (at most %.10g), x%g "
               "and the update skipped on overflow (at least %.10g)", t->scaler.scale, t->scaler.cfg.growth_factor,
               (long long)t->scaler.cfg.growth_interval, t->scaler.cfg.max_scale, t->scaler.cfg.backoff_factor,
               t->scaler.cfg.min_scale);
    t->st.world_size = t->comm->size;
    t->st.train_samples = t->n_train;
}

/* HetSeq's sampler (or the task's ordered stream), the validation split's sharding checked now rather
 * than after the first epoch, and the run's summary lines. */
static void plan_batches(trainer *t) {
    const hs_comm *comm = t->comm;
    const int max_sentences = t->tc.task.max_sentences;
    t->stream = t->task->stream_steps != NULL;
    if (!t->stream) hs_sampler_init(&t->sampler, t->n_train, max_sentences, comm->size, comm->rank, (uint32_t)t->st.seed, 1);
    if (!t->stream && (t->tc.validate_interval > 0 || t->tc.validate_interval_updates > 0)) {
        hs_sampler valid;
        hs_sampler_init(&valid, t->task->num_samples(t->task, HS_SPLIT_VALID), max_sentences, comm->size, comm->rank,
                        0, 0);
    }
    hs_log("| task %s, %lld training samples, %lld validation samples", t->task->name, (long long)t->n_train,
           (long long)t->task->num_samples(t->task, HS_SPLIT_VALID));
    hs_log("| num. model params: %zu (num. trained: %zu)", hs_params_numel(&t->task->params),
           hs_params_numel(&t->task->params));
    const int uf_now = (int)hs_train_config_update_freq(&t->tc, t->st.epoch);
    if (t->stream)
        hs_log("| training on %d rank(s) (%s backend), optimizer %s, %lld updates per epoch (the task's ordered "
               "segments)", comm->size, t->be->name, t->opt->name,
               (long long)t->task->stream_steps(t->task, HS_SPLIT_TRAIN, uf_now, comm->size));
    else
        hs_log("| training on %d rank(s) (%s backend), max sentences per rank = %d, optimizer %s, %lld updates per epoch",
               comm->size, t->be->name, max_sentences, t->opt->name,
               (long long)hs_sampler_updates_per_epoch(&t->sampler, uf_now));
}

/* The meters, then the reads: the prefetch thread's buffers sized for the largest request (an ordered
 * stream's columns, or HetSeq's micro-batches and the weighted shares), and input staging. */
static void start_input(trainer *t) {
    const hs_comm *comm = t->comm;
    hs_meters_init(&t->meters, t->task, t->metrics_path, t->resumed);
    t->meters.precision = t->tc.precision; /* the peak MFU is measured against */
    t->meters.format = t->tc.log_format;
    const int uf_now = (int)hs_train_config_update_freq(&t->tc, t->st.epoch);
    if (t->stream) {
        if (t->tc.balance_auto || t->tc.n_weights > 0)
            hs_die_all("distributed.balance = \"auto\" and distributed.weights are not available for task = \"%s\": "
                       "its batches are whole columns of an ordered stream. Remove those keys (every rank takes an "
                       "equal slice of the columns)", t->task->name);
        /* Every rank's micro-batches have the same size (columns of the stream): the read buffers hold the
         * largest of training's (update_freq chunks) and validation's (one chunk). */
        HS_ALLOC(t->update_ranges, t->tc.max_update_freq);
        int max_count = 1;
        int n = t->task->stream_step_ranges(t->task, HS_SPLIT_TRAIN, t->st.epoch, 0, uf_now, comm->rank, comm->size,
                                            t->update_ranges);
        for (int i = 0; i < n; i++)
            if (t->update_ranges[i].count > max_count) max_count = t->update_ranges[i].count;
        if (t->tc.validate_interval > 0 || t->tc.validate_interval_updates > 0) {
            int valid_max = hs_evaluate_max_count(t->task, comm, HS_SPLIT_VALID, t->tc.task.max_sentences);
            if (valid_max > max_count) max_count = valid_max;
        }
        t->pf = hs_prefetch_start(t->task, t->be, max_count, t->tc.max_update_freq);
    } else {
        hs_balance_init(&t->balance, &t->tc, comm, &t->sampler);
        if (t->balance.enabled) HS_ALLOC(t->update_ranges, t->balance.max_ranges);
        if (t->resumed) {
            char last[4096];
            snprintf(last, sizeof last, "%s/checkpoint_last.h5", t->tc.save_dir);
            hs_balance_resume(&t->balance, comm, last, t->st.num_updates); /* the learned shares, if saved */
        }
        t->pf = hs_prefetch_start(t->task, t->be, t->balance.max_count,
                                  t->balance.enabled ? t->balance.max_ranges : t->tc.max_update_freq);
    }
    /* Asynchronous input staging; HETSEQ_INPUT_STAGING=sync keeps the synchronous uploads inside
     * forward_backward (the same numbers: tests/e2e/test_input_staging.sh compares them). */
    const char *staging = getenv("HETSEQ_INPUT_STAGING");
    t->stage_inputs = t->task->stage != NULL && !(staging && strcmp(staging, "sync") == 0);
    if (staging && strcmp(staging, "sync") != 0 && strcmp(staging, "async") != 0)
        hs_die_all("HETSEQ_INPUT_STAGING = \"%s\": use \"async\" (the default) or \"sync\"", staging);
    hs_log("| input batches are %s", t->stage_inputs ? "staged one update ahead (asynchronous uploads, docs/gpu.md)"
                                                     : "uploaded synchronously in each micro-batch's forward/backward");
}

/* Epochs until max_epoch, max_update or a stop signal. */
static void train_loop(trainer *t) {
    while ((t->tc.max_epoch == 0 || t->st.epoch <= t->tc.max_epoch) &&
           (t->tc.max_update == 0 || t->st.num_updates < t->tc.max_update) && !t->stop_signal) {
        if (train_epoch(t)) end_epoch(t);
    }
}

/* HETSEQ_CUDA_LEDGER=1: the device-op ledger's per-op table on rank 0 (docs/gpu.md), over the updates
 * after the first HETSEQ_CUDA_LEDGER_WARMUP (default 0). */
static void print_device_ledger(void) {
    static int on = -1;
    if (!hs_env_flag("HETSEQ_CUDA_LEDGER", &on) || hs_log_rank() != 0) return;
    if (!hs_ledger_state.used) {
        hs_log("| HETSEQ_CUDA_LEDGER: this backend keeps no device-op ledger (only device = \"cuda\" does)");
        return;
    }
    if (ledger_warmup() > 0 && hs_ledger_state.updates <= ledger_warmup()) { /* none after the warm-up */
        hs_log("| HETSEQ_CUDA_LEDGER_WARMUP=%lld: the run made only %lld update(s), the table counts them all",
               (long long)ledger_warmup(), (long long)hs_ledger_state.updates);
        hs_ledger_print(stdout, hs_ledger_state.updates);
        return;
    }
    hs_ledger_print_since_mark(stdout);
}

/* The reads stopped, the closing lines, everything freed; returns the exit status. */
static int finish(trainer *t) {
    double stalls = hs_prefetch_stall_seconds(t->pf);
    hs_prefetch_stop(t->pf);
    hs_stall_phase(HS_PHASE_DONE, t->st.num_updates, 0);
    hs_stall_stop();
    hs_profile_range_finish(&t->profile);
    int status = 0;
    int finished = (t->tc.max_epoch > 0 && t->st.epoch > t->tc.max_epoch) ||
                   (t->tc.max_update > 0 && t->st.num_updates >= t->tc.max_update);
    if (t->stop_signal && !finished) {
        hs_log("| stopped by %s after update %lld%s; run the same command again to resume exactly (exit status %d)",
               signal_name(t->stop_signal), (long long)t->st.num_updates,
               t->tc.no_save ? " (checkpoint.no_save: nothing saved)" : ", checkpoint written", HS_EXIT_STOPPED);
        status = HS_EXIT_STOPPED;
    } else {
        hs_log("| done training in %.1f seconds (%lld updates; waited %.2f s for input)", hs_now() - t->start_time,
               (long long)t->st.num_updates, stalls);
        if (t->stage_inputs)
            hs_log("| inputs of %lld update(s) were staged while the update before computed", (long long)t->staged_ahead);
        if (t->graphs.enabled)
            hs_log("| CUDA graphs: %lld of %lld update(s) launched as a graph (%lld replayed without a capture), %lld "
                   "optimizer step(s) as a graph (%lld replayed without a capture) (%lld graph(s) instantiated, %lld "
                   "launch(es) of an updated graph)",
                   (long long)t->graphed_updates, (long long)t->run_updates, (long long)t->replayed_updates,
                   (long long)t->graphed_steps, (long long)t->replayed_steps, (long long)t->graphs.graphs_made,
                   (long long)t->graphs.graphs_reused);
    }
    print_device_ledger();
    if (!t->tc.no_save)
        hs_log("| checkpoints in %s/, metrics in %s", t->tc.save_dir, *t->metrics_path ? t->metrics_path : "(off)");
    hs_meters_close(&t->meters);
    hs_balance_free(&t->balance);
    free(t->update_ranges);
    hs_optimizer_free(t->opt);
    hs_grad_buckets_free(t->buckets);
    hs_update_graphs_free(&t->graphs);
    t->be->free(t->be, t->stats_dev);
    hs_task_destroy(t->task);
    free(t->config_text);
    return status;
}

int hs_train_main(const hs_config *cfg, const hs_comm *comm) {
    trainer t;
    start_run(&t, cfg, comm);
    open_outputs(&t);
    build_model(&t);
    resume(&t);
    plan_batches(&t);
    start_input(&t);
    /* From here on a stop signal ends the run at the next update boundary with a checkpoint. */
    hs_stop_signals_install();
    train_loop(&t);
    return finish(&t);
}
