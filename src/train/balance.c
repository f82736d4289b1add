/* Weighted shares of every global batch (balance.h). */
#include "train/balance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/checkpoint.h"
#include "util/check.h"
#include "util/log.h"

void hs_balance_init(hs_balance *b, const hs_train_config *tc, const hs_comm *comm, const hs_sampler *s) {
    memset(b, 0, sizeof *b);
    b->world = comm->size;
    b->rank = comm->rank;
    b->enabled = tc->weighted;
    b->auto_mode = tc->balance_auto;
    b->warmup = tc->balance_warmup;
    b->every = tc->rebalance_every;
    b->max_count = tc->task.max_sentences;
    if (!b->enabled) return;
    if (tc->n_weights > 0 && tc->n_weights != comm->size)
        hs_die("distributed.weights lists %d weight(s) but the job has %d rank(s): give one positive weight per rank, "
               "in rank order (or [] for equal shares)",
               tc->n_weights, comm->size);
    if (tc->n_rank_max_sentences > 0 && tc->n_rank_max_sentences != comm->size)
        hs_die("distributed.rank_max_sentences lists %d value(s) but the job has %d rank(s): give one cap per rank, "
               "in rank order (or [] for training.max_sentences everywhere)",
               tc->n_rank_max_sentences, comm->size);
    double *w;
    HS_ALLOC(w, b->world);
    HS_ALLOC(b->units, b->world);
    HS_ALLOC(b->caps, b->world);
    for (int k = 0; k < b->world; k++) {
        w[k] = tc->n_weights > 0 ? tc->weights[k] : 1.0;
        b->caps[k] = tc->n_rank_max_sentences > 0 ? tc->rank_max_sentences[k] : tc->task.max_sentences;
        if (b->caps[k] > b->max_count) b->max_count = b->caps[k];
    }
    hs_sampler_weight_units(w, b->world, b->units);
    free(w);
    int most_uf = tc->max_update_freq;
    b->max_ranges = hs_sampler_weighted_max_ranges(s, most_uf, b->caps);
    HS_ALLOC(b->order, s->num_batches);
    b->order_epoch = -1;
    b->untimed_through = 1;
    if (b->auto_mode) {
        HS_ALLOC(b->next_units, b->world);
        HS_ALLOC(b->ckpt_rows, 2 * (size_t)b->world);
    }
    if (tc->n_weights > 0) {
        char line[1024];
        int len = snprintf(line, sizeof line, "| weighted shares of every global batch (distributed.weights):");
        for (int k = 0; k < b->world && len < (int)sizeof line - 32; k++)
            len += snprintf(line + len, sizeof line - (size_t)len, " rank %d %g", k, tc->weights[k]);
        hs_log("%s", line);
    }
}

void hs_balance_free(hs_balance *b) {
    free(b->units);
    free(b->next_units);
    free(b->caps);
    free(b->order);
    free(b->ckpt_rows);
    memset(b, 0, sizeof *b);
}

/* The shares of update number `update`: a pending re-balance takes over from its first update on. */
static const int64_t *units_of(const hs_balance *b, int64_t update) {
    return b->next_from > 0 && update >= b->next_from ? b->next_units : b->units;
}

int hs_balance_update_ranges(hs_balance *b, const hs_sampler *s, int64_t epoch, int64_t u, int64_t update, int uf,
                             hs_range *out) {
    if (b->order_epoch != epoch) {
        hs_sampler_epoch_order(s, (int)epoch, b->order);
        b->order_epoch = epoch;
    }
    return hs_sampler_weighted_update(s, b->order, u, uf, units_of(b, update), b->caps, out, b->max_ranges);
}

void hs_balance_record(hs_balance *b, int64_t update, double compute_seconds, double fixed_seconds, int64_t samples) {
    if (!b->enabled || !b->auto_mode || update <= b->untimed_through) return;
    b->compute_seconds += compute_seconds;
    b->fixed_seconds += fixed_seconds;
    b->samples += (double)samples;
    b->since++;
}

/* Shares for the measured speeds s_k (samples per second of compute) and fixed costs a_k (seconds per
 * update) of a global batch of N samples: rank k finishes after a_k + n_k / s_k, and the update after
 * the slowest rank, so the best split gives every rank the same time T:
 *     n_k = s_k (T - a_k),  Σ n_k = N  =>  T = (N + Σ s_k a_k) / Σ s_k.
 * Ranks that share a core pay their fixed work twice (a_k large), so they get less than their speed
 * alone would give. A rank whose fixed cost alone exceeds T gets a minimal share (it is measured again
 * at the next re-balance). With all a_k equal this is n_k ∝ s_k. */
static void shares_from_measurements(const double *speed, const double *fixed, double batch, int world,
                                     double *share) {
    double sum_s = 0.0, sum_sa = 0.0;
    for (int k = 0; k < world; k++) {
        sum_s += speed[k];
        sum_sa += speed[k] * fixed[k];
    }
    const double T = (batch + sum_sa) / sum_s;
    for (int k = 0; k < world; k++) {
        share[k] = speed[k] * (T - fixed[k]);
        if (share[k] < 1e-3 * batch) share[k] = 1e-3 * batch;
    }
}

static double percent(const int64_t *units, int world, int k) {
    int64_t total = 0;
    for (int j = 0; j < world; j++) total += units[j];
    return 100.0 * (double)units[k] / (double)total;
}

void hs_balance_maybe_rebalance(hs_balance *b, const hs_comm *comm, int64_t num_updates, int epoch_end) {
    if (!b->enabled || !b->auto_mode || b->since == 0) return;
    const int due = (!b->learned && b->since >= b->warmup) || (b->learned && b->every > 0 && b->since >= b->every) ||
                    (epoch_end && b->since >= b->warmup);
    if (!due) return;
    /* every rank's speed, fixed cost and samples per update, by one all-reduce of three slots each */
    const int W = b->world;
    double *m, *share;
    HS_ALLOC(m, 3 * (size_t)W);
    HS_ALLOC(share, W);
    double *speed = m, *fixed = m + W, *per_update = m + 2 * W;
    speed[b->rank] = b->compute_seconds > 0.0 ? b->samples / b->compute_seconds : 0.0;
    fixed[b->rank] = b->fixed_seconds / (double)b->since;
    per_update[b->rank] = b->samples / (double)b->since;
    hs_comm_allreduce_sum_double(comm, m, 3 * W);
    double fastest = 0.0, batch = 0.0;
    for (int k = 0; k < W; k++) {
        if (speed[k] > fastest) fastest = speed[k];
        batch += per_update[k]; /* every rank timed the same updates: their mean global batch */
    }
    if (fastest > 0.0) {
        /* a rank that computed nothing in the window keeps a minimal share, so it is measured again */
        for (int k = 0; k < W; k++)
            if (speed[k] <= 0.0) speed[k] = fastest * 1e-3;
        shares_from_measurements(speed, fixed, batch, W, share);
        /* The shares of update num_updates + 1 stay what they are (its data may be read already); the new
         * ones take over from num_updates + 2. */
        const int64_t *now = units_of(b, num_updates + 1);
        if (now != b->units) memcpy(b->units, now, (size_t)W * sizeof *b->units);
        b->next_from = 0;
        hs_sampler_weight_units(share, W, b->next_units);
        double moved = 0.0;
        for (int k = 0; k < W; k++) {
            double d = percent(b->next_units, W, k) - percent(b->units, W, k);
            if (d < 0) d = -d;
            if (d > moved) moved = d;
        }
        const int keep = b->learned && moved <= HS_BALANCE_HYSTERESIS;
        if (!keep) b->next_from = num_updates + 2;
        char line[4096];
        int len = snprintf(line, sizeof line, "| balance = auto after update %lld: shares of the global batch",
                           (long long)num_updates);
        const int64_t *shown = keep ? b->units : b->next_units;
        for (int k = 0; k < W && len < (int)sizeof line - 96; k++)
            len += snprintf(line + len, sizeof line - (size_t)len, "%s rank %d %.1f%% (%.0f samples/s + %.1f ms)",
                            k ? "," : "", k, percent(shown, W, k), speed[k], 1e3 * fixed[k]);
        if (keep && len < (int)sizeof line - 64)
            snprintf(line + len, sizeof line - (size_t)len, " (kept: no share moves by more than %.0f points)",
                     HS_BALANCE_HYSTERESIS);
        hs_log("%s", line);
        b->learned = 1;
    }
    free(m);
    free(share);
    b->compute_seconds = 0.0;
    b->fixed_seconds = 0.0;
    b->samples = 0.0;
    b->since = 0;
}

const int64_t *hs_balance_checkpoint_shares(hs_balance *b, int64_t num_updates) {
    if (!b->enabled || !b->auto_mode || !b->learned) return NULL;
    memcpy(b->ckpt_rows, units_of(b, num_updates + 1), (size_t)b->world * sizeof *b->ckpt_rows);
    memcpy(b->ckpt_rows + b->world, units_of(b, num_updates + 2), (size_t)b->world * sizeof *b->ckpt_rows);
    return b->ckpt_rows;
}

void hs_balance_resume(hs_balance *b, const hs_comm *comm, const char *path, int64_t num_updates) {
    if (!b->enabled || !b->auto_mode) return;
    b->untimed_through = num_updates + 1; /* the first update after a restart pays for first touches again */
    int found = 0;
    if (b->rank == 0) found = hs_checkpoint_read_balance_shares(path, b->world, b->ckpt_rows);
    hs_comm_bcast_bytes(comm, &found, sizeof found, 0);
    if (!found) {
        hs_log("| balance = auto: %s holds no shares for %d rank(s); learning them again", path, b->world);
        return;
    }
    hs_comm_bcast_bytes(comm, b->ckpt_rows, 2 * (size_t)b->world * sizeof *b->ckpt_rows, 0);
    memcpy(b->units, b->ckpt_rows, (size_t)b->world * sizeof *b->units);
    memcpy(b->next_units, b->ckpt_rows + b->world, (size_t)b->world * sizeof *b->next_units);
    b->next_from = memcmp(b->units, b->next_units, (size_t)b->world * sizeof *b->units) ? num_updates + 2 : 0;
    b->learned = 1;
    char line[4096];
    int len = snprintf(line, sizeof line, "| balance = auto: shares of the global batch restored from %s:", path);
    for (int k = 0; k < b->world && len < (int)sizeof line - 64; k++)
        len += snprintf(line + len, sizeof line - (size_t)len, "%s rank %d %.1f%%", k ? "," : "", k,
                        percent(b->units, b->world, k));
    if (b->next_from > 0 && len < (int)sizeof line - 64)
        len += snprintf(line + len, sizeof line - (size_t)len, "; from update %lld:", (long long)b->next_from);
    for (int k = 0; b->next_from > 0 && k < b->world && len < (int)sizeof line - 64; k++)
        len += snprintf(line + len, sizeof line - (size_t)len, "%s rank %d %.1f%%", k ? "," : "", k,
                        percent(b->next_units, b->world, k));
    hs_log("%s", line);
}
