/* The training loop (HetSeq's train.py main/train + Controller.train_step, on MPI):
 *   for each epoch: shuffle batches (sampler), take this rank's shard, group update_freq micro-batches
 *   for each update: forward/backward every micro-batch (sum of per-sample losses) -> one gradient
 *     all-reduce -> one float64 stat all-reduce -> grad /= global sample count -> clip -> optimizer
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

#include "comm/stall.h"
#include "data/prefetch.h"
#include "data/sampler.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "train/checkpoint.h"
#include "train/meters.h"
#include "train/trainer.h"
#include "util/check.h"
#include "util/fault.h"
#include "util/log.h"
#include "util/stop_signal.h"
#include "util/timer.h"

typedef struct trainer {
    const hs_config *cfg;
    const hs_comm *comm;
    const hs_backend *be;
    hs_task *task;
    hs_optimizer *opt;
    hs_lr_scheduler sched;
    hs_sampler sampler;
    hs_prefetch *pf;
    hs_meters meters;
    hs_train_state st;
    char *config_text;
    const char *save_dir;
    int no_save, keep_last, max_per_request, max_sentences, log_interval;
    int64_t max_epoch, max_update, save_interval, save_interval_updates, validate_interval,
        validate_interval_updates;
    double clip_norm;
    const char *valid_subset;
    int64_t check_replicas_every;
    int stop_signal;          /* agreed over all ranks: the signal that stops the run, or 0 */
    int64_t last_saved_update; /* num_updates of the newest checkpoint written (-1 = none) */
} trainer;

static int update_freq_for_epoch(const hs_config *cfg, int64_t epoch) {
    int n = hs_cfg_list_len(cfg, "training.update_freq");
    int i = (int)(epoch - 1 < n - 1 ? epoch - 1 : n - 1);
    return (int)hs_cfg_int_elem(cfg, "training.update_freq", i);
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
static void save(trainer *t, const char *name, int64_t epoch) {
    t->last_saved_update = t->st.num_updates;
    if (t->no_save || t->comm->rank != 0) return;
    hs_stall_phase(HS_PHASE_CHECKPOINT, t->st.num_updates, 0);
    double t0 = hs_now();
    hs_checkpoint_save(t->save_dir, name, &t->task->params, t->opt, &t->st, t->config_text);
    hs_checkpoint_link(t->save_dir, name, "checkpoint_last.h5");
    hs_checkpoint_prune(t->save_dir, t->keep_last);
    hs_log("| saved checkpoint %s/%s (epoch %lld @ %lld updates) (writing took %.3f seconds)", t->save_dir, name,
           (long long)epoch, (long long)t->st.num_updates, hs_now() - t0);
}

/* checkpoint_last.h5 only (end of an epoch without a numbered save). */
static void save_last(trainer *t) {
    t->last_saved_update = t->st.num_updates;
    if (t->no_save || t->comm->rank != 0) return;
    hs_stall_phase(HS_PHASE_CHECKPOINT, t->st.num_updates, 0);
    hs_checkpoint_save(t->save_dir, "checkpoint_last.h5", &t->task->params, t->opt, &t->st, t->config_text);
}

/* ---- resume checks ------------------------------------------------------------------------------- */

/* update_freq of epoch e (1-based) in a config: the list's last value repeats. */
static int64_t uf_of(const hs_config *c, int64_t e) {
    int n = hs_cfg_list_len(c, "training.update_freq");
    return hs_cfg_int_elem(c, "training.update_freq", (int)(e - 1 < n - 1 ? e - 1 : n - 1));
}

/* Rank 0: compare the settings that decide the data order and the meaning of the saved position with
 * the checkpoint's own configuration (its /config text) and world size. A change that would silently
 * change which samples come next stops the run and names the setting and the checkpoint.reset_* key
 * that accepts it; a change of world size at the same global batch (ranks x update_freq) is exact and
 * is allowed. Returns 1 if the data position must restart at the start of the saved epoch. */
static int check_resume(trainer *t, const char *path, const hs_train_state *saved, const char *saved_text,
                        int64_t n_train) {
    int reset_data = hs_cfg_bool(t->cfg, "checkpoint.reset_dataloader");
    if (!saved_text || !*saved_text) return 0; /* a checkpoint without its config: nothing to compare */
    hs_config *old = hs_config_load_string(saved_text, path, 0, NULL);
    const hs_config *now = t->cfg;
    char why[1024] = "";
    const char *task_old = hs_cfg_string(old, "task"), *task_now = hs_cfg_string(now, "task");
    if (strcmp(task_old, task_now) != 0)
        hs_die("%s was written by a \"%s\" run but this run's task is \"%s\": use another checkpoint.save_dir", path,
               task_old, task_now);
    if (hs_cfg_int(old, "seed") != hs_cfg_int(now, "seed"))
        snprintf(why, sizeof why, "seed changed from %lld to %lld (it decides the shuffle)",
                 (long long)hs_cfg_int(old, "seed"), (long long)hs_cfg_int(now, "seed"));
    else if (hs_cfg_int(old, "training.max_sentences") != hs_cfg_int(now, "training.max_sentences"))
        snprintf(why, sizeof why, "training.max_sentences changed from %lld to %lld (it decides the batches)",
                 (long long)hs_cfg_int(old, "training.max_sentences"),
                 (long long)hs_cfg_int(now, "training.max_sentences"));
    else if (saved->train_samples > 0 && saved->train_samples != n_train)
        snprintf(why, sizeof why, "the training data changed from %lld to %lld samples (data.path = \"%s\", was \"%s\")",
                 (long long)saved->train_samples, (long long)n_train, hs_cfg_string(now, "data.path"),
                 hs_cfg_string(old, "data.path"));
    else if (saved->world_size > 0) {
        for (int64_t e = saved->epoch; e < saved->epoch + 64 && !why[0]; e++) {
            int64_t before = saved->world_size * uf_of(old, e), after = t->comm->size * uf_of(now, e);
            if (before != after)
                snprintf(why, sizeof why,
                         "the global batch of epoch %lld changed: the checkpoint ran %lld rank(s) x update_freq %lld "
                         "= %lld micro-batches per update, this run %d rank(s) x update_freq %lld = %lld (keep ranks x "
                         "training.update_freq the same to resume exactly)",
                         (long long)e, (long long)saved->world_size, (long long)uf_of(old, e), (long long)before,
                         t->comm->size, (long long)uf_of(now, e), (long long)after);
        }
        if (!why[0] && saved->world_size != t->comm->size)
            hs_log("| resuming on %d rank(s) x update_freq %lld where the checkpoint ran %lld rank(s) x update_freq %lld: "
                   "the same global batch, so the data order continues exactly",
                   t->comm->size, (long long)uf_of(now, saved->epoch), (long long)saved->world_size,
                   (long long)uf_of(old, saved->epoch));
    }
    if (!why[0] && !hs_cfg_bool(now, "checkpoint.reset_lr_scheduler")) {
        const char *keys[] = {"optimizer.lr", "lr_scheduler.warmup_proportion", "lr_scheduler.end_learning_rate",
                              "lr_scheduler.power"};
        for (int i = 0; i < 4; i++)
            if (hs_cfg_float(old, keys[i]) != hs_cfg_float(now, keys[i]))
                hs_log("| note: %s is %g in this run but %g in %s: the resumed run continues the saved learning rate; "
                       "set checkpoint.reset_lr_scheduler = true to apply this run's schedule", keys[i],
                       hs_cfg_float(now, keys[i]), hs_cfg_float(old, keys[i]), path);
    }
    hs_config_free(old);
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
    snprintf(last, sizeof last, "%s/checkpoint_last.h5", t->save_dir);
    const char *init = hs_cfg_string(t->cfg, "checkpoint.init_checkpoint");
    if (t->comm->rank == 0 && !t->no_save) hs_checkpoint_remove_stale(t->save_dir);
    int resume = t->comm->rank == 0 && hs_file_exists(last);
    hs_comm_bcast_bytes(t->comm, &resume, sizeof resume, 0);
    hs_params *p = &t->task->params;
    int reset_opt = hs_cfg_bool(t->cfg, "checkpoint.reset_optimizer");
    int reset_sched = hs_cfg_bool(t->cfg, "checkpoint.reset_lr_scheduler");
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
            hs_log("| resuming from %s (epoch %lld, %lld updates into it, %lld updates in all)", last,
                   (long long)t->st.epoch, (long long)t->st.updates_in_epoch, (long long)t->st.num_updates);
        }
        hs_comm_bcast_bytes(t->comm, &t->st, sizeof t->st, 0);
        hs_comm_bcast_bytes(t->comm, &t->opt->step, sizeof t->opt->step, 0);
        for (int s = 0; s < t->opt->n_states; s++)
            hs_comm_bcast_bytes(t->comm, t->opt->state[s], p->total * sizeof(float), 0);
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
        int reset_step = hs_cfg_bool(t->cfg, "checkpoint.reset_step");
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
                hs_comm_bcast_bytes(t->comm, t->opt->state[s], p->total * sizeof(float), 0);
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
    hs_comm_bcast_bytes(t->comm, p->data, p->total * sizeof(float), 0);
    return resume;
}

/* ---- one update ------------------------------------------------------------------------------------ */

/* The first tensor of the table whose values (a device buffer in the table's layout) hold a NaN or an
 * Inf, or NULL. Only called when the gradient norm or the loss is not finite. */
static const char *first_nonfinite_tensor(const hs_params *p, const float *flat) {
    float *host;
    HS_ALLOC(host, hs_params_max_numel(p));
    const char *name = NULL;
    for (int i = 0; i < p->count && !name; i++) {
        p->be->download(host, flat + p->tensors[i].offset, p->tensors[i].numel * sizeof(float));
        for (size_t k = 0; k < p->tensors[i].numel; k++)
            if (!isfinite(host[k])) {
                name = p->tensors[i].name;
                break;
            }
    }
    free(host);
    return name;
}

/* Slots of the per-update float64 all-reduce after the task's statistics. */
enum { SYNC_STOP = HS_STATS_NDOUBLE, SYNC_LEN };

/* One update. Returns the stop signal agreed by all ranks at its end (0 = go on). */
static int train_update(trainer *t, hs_prefetch_slot *slot) {
    double t0 = hs_now();
    int64_t update = t->st.num_updates + 1; /* 1-based, as logged */
    hs_stall_phase(HS_PHASE_COMPUTE, update, 0);
    hs_fault_update_start(update);
    hs_params *p = &t->task->params;
    hs_params_zero_grad(p);
    hs_stats stats;
    memset(&stats, 0, sizeof stats);
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
    /* EMPTY micro-batches contribute zero gradient and zero counts but the rank still joins the
     * collectives below, so every rank issues the same calls. */
    for (int i = 0; i < slot->n; i++)
        if (slot->ranges[i].count > 0)
            t->task->forward_backward(t->task, slot->bufs[i], slot->ranges[i].first, slot->ranges[i].count, &ctx,
                                      &stats);
    if (hs_fault_fires(HS_FAULT_NAN, update)) {
        float nan = NAN;
        p->be->upload(p->grad, &nan, sizeof nan);
    }
    hs_stall_phase(HS_PHASE_GRAD_ALLREDUCE, update, 1);
    hs_comm_allreduce_sum_float(t->comm, p->grad, p->total, t->be);
    /* Fast stat sync: the statistics and the stop request travel in one float64 all-reduce. */
    double sync[SYNC_LEN];
    memcpy(sync, &stats, sizeof stats);
    sync[SYNC_STOP] = hs_stop_signal();
    hs_stall_phase(HS_PHASE_STAT_ALLREDUCE, update, 1);
    hs_comm_allreduce_sum_double(t->comm, sync, SYNC_LEN);
    memcpy(&stats, sync, sizeof stats);
    hs_stall_phase(HS_PHASE_OPTIMIZER, update, 0);
    /* LAMB clips inside its step (before the moments, as apex FusedLAMB); the others clip here. */
    double gnorm = hs_optimizer_clips_internally(t->opt) ? hs_grad_norm(p) : hs_clip_grad_norm(p, t->clip_norm);
    if (!isfinite(gnorm) || !isfinite(stats.loss_sum)) {
        /* Every rank holds the same all-reduced values, so every rank stops here with the same message. */
        const char *bad = first_nonfinite_tensor(p, p->grad);
        hs_die("training diverged at update %lld: the loss sum is %g and the gradient norm %g; the first gradient "
               "with a NaN or Inf is %s. Lower optimizer.lr or set optimizer.clip_norm; the last checkpoint in %s "
               "is intact (nothing of this update was saved)",
               (long long)update, stats.loss_sum, gnorm, bad ? bad : "(none: the loss itself overflowed)",
               t->save_dir);
    }
    hs_optimizer_step_with_grad_norm(t->opt, t->st.lr, gnorm);
    if (hs_fault_fires(HS_FAULT_CORRUPT, update)) {
        float v;
        p->be->download(&v, p->data, sizeof v);
        uint32_t bits;
        memcpy(&bits, &v, sizeof bits);
        bits ^= 1u; /* the lowest mantissa bit: invisible in the loss, visible to the replica check */
        memcpy(&v, &bits, sizeof bits);
        p->be->upload(p->data, &v, sizeof v);
    }
    t->st.num_updates++;
    t->st.lr = hs_lr_step_update(&t->sched, t->st.num_updates);
    t->st.lr_base = t->sched.base_lr;
    hs_meters_update(&t->meters, &t->st, &stats, gnorm, t->clip_norm > 0 && gnorm > t->clip_norm, hs_now() - t0);
    /* Signals are process-local: the sum over ranks says whether any rank got one. -1: another rank's. */
    if (sync[SYNC_STOP] <= 0) return 0;
    return hs_stop_signal() ? hs_stop_signal() : -1;
}

/* 64-bit FNV-1a of a tensor's bytes. */
static uint64_t fnv1a(const void *data, size_t bytes, uint64_t h) {
    const unsigned char *b = data;
    for (size_t i = 0; i < bytes; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
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
        p->be->download(host, p->data + p->tensors[i].offset, p->tensors[i].numel * sizeof(float));
        lo[i] = hi[i] = fnv1a(host, p->tensors[i].numel * sizeof(float), 14695981039346656037ull);
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
                        (long long)t->st.num_updates, p->tensors[i].name, t->save_dir);
    free(lo);
    free(hi);
}

static void validate(trainer *t) {
    double t0 = hs_now();
    hs_stats global;
    hs_stall_phase(HS_PHASE_VALIDATION, t->st.num_updates, 1);
    hs_evaluate_split(t->task, t->pf, t->comm, HS_SPLIT_VALID, t->max_sentences, t->max_per_request, &global);
    hs_meters_log_valid(&t->meters, &t->st, t->valid_subset, &global, hs_now() - t0);
}

static void save_mid_epoch(trainer *t) {
    char name[256];
    snprintf(name, sizeof name, "checkpoint_%lld_%lld.h5", (long long)t->st.epoch, (long long)t->st.num_updates);
    save(t, name, t->st.epoch);
}

/* Runs (the rest of) epoch st.epoch. Returns 1 if the epoch ended, 0 if max_update or a stop signal
 * stopped it (a checkpoint of the position is written then). */
static int train_epoch(trainer *t) {
    int uf = update_freq_for_epoch(t->cfg, t->st.epoch);
    int64_t shard_len = hs_sampler_shard_len(&t->sampler);
    int64_t n_updates = hs_sampler_updates_per_epoch(&t->sampler, uf);
    hs_range *shard;
    HS_ALLOC(shard, shard_len);
    hs_sampler_epoch_shard(&t->sampler, (int)t->st.epoch, shard);
    hs_meters_epoch_start(&t->meters);
    t->st.end_of_epoch = 0; /* a checkpoint written from here on is inside this epoch */

    int64_t u = t->st.updates_in_epoch;
#define REQUEST(k)                                                                                              \
    hs_prefetch_request(t->pf, HS_SPLIT_TRAIN, shard + (k) * uf,                                                \
                        (int)((k) * uf + uf <= shard_len ? uf : shard_len - (k) * uf))
    int requested = 0;
    if (u < n_updates) {
        REQUEST(u);
        requested = 1;
    }
    int stopped = 0;
    while (u < n_updates) {
        int64_t next_num = t->st.num_updates + 1;
        int stop_after = t->max_update > 0 && next_num >= t->max_update;
        int validate_after = t->validate_interval_updates > 0 && next_num % t->validate_interval_updates == 0 &&
                             u + 1 < n_updates;
        int save_after = t->save_interval_updates > 0 && next_num % t->save_interval_updates == 0 &&
                         u + 1 < n_updates;
        hs_stall_phase(HS_PHASE_INPUT, next_num, 1);
        hs_prefetch_slot *slot = hs_prefetch_wait(t->pf);
        requested = 0;
        /* Read the next update while this one computes, unless validation must read first. */
        if (u + 1 < n_updates && !stop_after && !validate_after) {
            REQUEST(u + 1);
            requested = 1;
        }
        t->stop_signal = train_update(t, slot);
        hs_prefetch_release(t->pf, slot);
        u++;
        t->st.updates_in_epoch = u;
        /* HetSeq prints a 0-based index and never the first update; hetseq counts updates done. */
        if (u % t->log_interval == 0 || u == n_updates)
            hs_meters_log_train(&t->meters, &t->st, u, n_updates, t->st.lr, t->comm->size);
        if (t->check_replicas_every > 0 && t->st.num_updates % t->check_replicas_every == 0) check_replicas(t);
        if (validate_after && !t->stop_signal) validate(t);
        if (save_after) save_mid_epoch(t);
        if (stop_after || (t->stop_signal && u < n_updates)) {
            stopped = u < n_updates;
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
    if (t->validate_interval > 0 && epoch % t->validate_interval == 0 && !t->stop_signal) validate(t);
    t->st.lr = hs_lr_step_epoch(&t->sched, (int)epoch, t->st.num_updates);
    t->st.lr_base = t->sched.base_lr;
    /* The saved position is where a resumed run starts: the next epoch, no updates into it. */
    t->st.epoch = epoch + 1;
    t->st.updates_in_epoch = 0;
    t->st.end_of_epoch = 1;
    if (t->save_interval > 0 && epoch % t->save_interval == 0) {
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

int hs_train_main(const hs_config *cfg, const hs_comm *comm) {
    trainer t;
    memset(&t, 0, sizeof t);
    t.cfg = cfg;
    t.comm = comm;
    t.last_saved_update = -1;
    double start = hs_now();
    hs_fault_init(comm->rank);
    hs_stall_start(comm, hs_cfg_float(cfg, "distributed.stall_timeout"));
    hs_setup_threads(comm);
    t.config_text = hs_config_to_string(cfg);
    hs_log("%s", t.config_text);

    t.save_dir = hs_cfg_string(cfg, "checkpoint.save_dir");
    t.no_save = hs_cfg_bool(cfg, "checkpoint.no_save");
    t.keep_last = (int)hs_cfg_int(cfg, "checkpoint.keep_last");
    t.save_interval = hs_cfg_int(cfg, "checkpoint.save_interval");
    t.save_interval_updates = hs_cfg_int(cfg, "checkpoint.save_interval_updates");
    t.max_epoch = hs_cfg_int(cfg, "training.max_epoch");
    t.max_update = hs_cfg_int(cfg, "training.max_update");
    t.max_sentences = (int)hs_cfg_int(cfg, "training.max_sentences");
    t.validate_interval = hs_cfg_bool(cfg, "training.disable_validation") ? 0 : hs_cfg_int(cfg, "training.validate_interval");
    t.validate_interval_updates =
        hs_cfg_bool(cfg, "training.disable_validation") ? 0 : hs_cfg_int(cfg, "training.validate_interval_updates");
    t.log_interval = (int)hs_cfg_int(cfg, "log.interval");
    t.check_replicas_every = hs_cfg_int(cfg, "distributed.check_replicas_every");
    const char *precision = hs_cfg_string(cfg, "precision");
    if (strcmp(precision, "fp32") != 0)
        hs_die_all("precision = \"%s\": this release trains in fp32 only (bf16/fp16 mixed precision arrives with the "
                   "CUDA backend); set precision = \"fp32\"",
                   precision);
    t.clip_norm = hs_cfg_float(cfg, "optimizer.clip_norm");
    t.valid_subset = hs_cfg_string(cfg, "data.valid_subset");
    if (t.max_epoch == 0 && t.max_update == 0)
        hs_die_all("training.max_epoch and training.max_update are both 0 (unlimited): set at least one");
    for (int i = 0; i < hs_cfg_list_len(cfg, "training.update_freq"); i++) {
        int uf = (int)hs_cfg_int_elem(cfg, "training.update_freq", i);
        if (uf > t.max_per_request) t.max_per_request = uf;
    }
    char metrics_path[4096] = "";
    const char *metrics = hs_cfg_string(cfg, "log.metrics_file");
    if (*metrics) {
        if (metrics[0] == '/') snprintf(metrics_path, sizeof metrics_path, "%s", metrics);
        else snprintf(metrics_path, sizeof metrics_path, "%s/%s", t.save_dir, metrics);
    }
    /* The save directory holds the metrics file too, so it exists even with checkpoint.no_save. */
    if (comm->rank == 0 && (!t.no_save || (*metrics && metrics[0] != '/'))) make_dir(t.save_dir);
    hs_comm_barrier(comm);

    t.be = hs_backend_select(hs_cfg_string(cfg, "device"), comm->local_rank);
    t.task = hs_task_create(cfg, comm, t.be);
    t.st.seed = (uint64_t)hs_cfg_int(cfg, "seed");
    t.task->init_params(t.task, t.st.seed);
    t.opt = hs_optimizer_create(cfg, &t.task->params);
    hs_lr_init(&t.sched, cfg);
    t.st.epoch = 1;
    t.st.lr = hs_lr_step_update(&t.sched, 0);
    t.st.lr_base = t.sched.base_lr;
    int64_t n_train = t.task->num_samples(t.task, HS_SPLIT_TRAIN);
    int resumed = restore(&t, n_train);
    /* What the next checkpoint records of this run, for the resume checks. */
    t.st.world_size = comm->size;
    t.st.train_samples = n_train;

    hs_sampler_init(&t.sampler, n_train, t.max_sentences, comm->size, comm->rank, (uint32_t)t.st.seed, 1);
    if (t.validate_interval > 0 || t.validate_interval_updates > 0) {
        /* Check the validation split's sharding now, not after the first epoch. */
        hs_sampler valid;
        hs_sampler_init(&valid, t.task->num_samples(t.task, HS_SPLIT_VALID), t.max_sentences, comm->size, comm->rank,
                        0, 0);
    }
    hs_log("| task %s, %lld training samples, %lld validation samples", t.task->name, (long long)n_train,
           (long long)t.task->num_samples(t.task, HS_SPLIT_VALID));
    hs_log("| num. model params: %zu (num. trained: %zu)", hs_params_numel(&t.task->params),
           hs_params_numel(&t.task->params));
    hs_log("| training on %d rank(s) (%s backend), max sentences per rank = %d, optimizer %s, %lld updates per epoch",
           comm->size, t.be->name, t.max_sentences, t.opt->name,
           (long long)hs_sampler_updates_per_epoch(&t.sampler, update_freq_for_epoch(cfg, t.st.epoch)));

    hs_meters_init(&t.meters, t.task, metrics_path, resumed);
    t.meters.format = hs_cfg_string(cfg, "log.format");
    t.pf = hs_prefetch_start(t.task, t.max_sentences, t.max_per_request);
    /* From here on a stop signal ends the run at the next update boundary with a checkpoint. */
    hs_stop_signals_install();

    while ((t.max_epoch == 0 || t.st.epoch <= t.max_epoch) && (t.max_update == 0 || t.st.num_updates < t.max_update) &&
           !t.stop_signal) {
        if (train_epoch(&t)) end_epoch(&t);
    }

    double stalls = hs_prefetch_stall_seconds(t.pf);
    hs_prefetch_stop(t.pf);
    hs_stall_phase(HS_PHASE_DONE, t.st.num_updates, 0);
    hs_stall_stop();
    int status = 0;
    int finished = (t.max_epoch > 0 && t.st.epoch > t.max_epoch) || (t.max_update > 0 && t.st.num_updates >= t.max_update);
    if (t.stop_signal && !finished) {
        hs_log("| stopped by %s after update %lld%s; run the same command again to resume exactly (exit status %d)",
               signal_name(t.stop_signal), (long long)t.st.num_updates,
               t.no_save ? " (checkpoint.no_save: nothing saved)" : ", checkpoint written", HS_EXIT_STOPPED);
        status = HS_EXIT_STOPPED;
    } else {
        hs_log("| done training in %.1f seconds (%lld updates; waited %.2f s for input)", hs_now() - start,
               (long long)t.st.num_updates, stalls);
    }
    if (!t.no_save) hs_log("| checkpoints in %s/, metrics in %s", t.save_dir, *metrics_path ? metrics_path : "(off)");
    hs_meters_close(&t.meters);
    hs_optimizer_free(t.opt);
    hs_task_destroy(t.task);
    free(t.config_text);
    return status;
}
