/* Weighted shares of every global batch (balance.h). */
#include "train/balance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    b->max_count = tc->max_sentences;
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
        b->caps[k] = tc->n_rank_max_sentences > 0 ? tc->rank_max_sentences[k] : tc->max_sentences;
        if (b->caps[k] > b->max_count) b->max_count = b->caps[k];
    }
    hs_sampler_weight_units(w, b->world, b->units);
    free(w);
    int most_uf = tc->max_update_freq;
    b->max_ranges = hs_sampler_weighted_max_ranges(s, most_uf, b->caps);
    HS_ALLOC(b->order, s->num_batches);
    b->order_epoch = -1;
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
    free(b->caps);
    free(b->order);
    memset(b, 0, sizeof *b);
}

int hs_balance_update_ranges(hs_balance *b, const hs_sampler *s, int64_t epoch, int64_t u, int uf, hs_range *out) {
    if (b->order_epoch != epoch) {
        hs_sampler_epoch_order(s, (int)epoch, b->order);
        b->order_epoch = epoch;
    }
    return hs_sampler_weighted_update(s, b->order, u, uf, b->units, b->caps, out, b->max_ranges);
}

void hs_balance_record(hs_balance *b, int64_t update, double seconds, int64_t samples) {
    if (!b->enabled || !b->auto_mode || update <= 1) return;
    b->seconds += seconds;
    b->samples += (double)samples;
    b->timed++;
    b->since++;
}

void hs_balance_maybe_rebalance(hs_balance *b, const hs_comm *comm, int64_t num_updates, int epoch_end) {
    if (!b->enabled || !b->auto_mode || b->since == 0) return;
    const int first = b->timed == b->since; /* no re-balance yet */
    const int due = (first && b->since >= b->warmup) || (!first && b->every > 0 && b->since >= b->every) ||
                    (epoch_end && b->since >= b->warmup);
    if (!due) return;
    /* every rank's speed (samples per second of its own compute), by an all-reduce of one slot each */
    double *speed;
    HS_ALLOC(speed, b->world);
    speed[b->rank] = b->seconds > 0.0 ? b->samples / b->seconds : 0.0;
    hs_comm_allreduce_sum_double(comm, speed, b->world);
    double fastest = 0.0;
    for (int k = 0; k < b->world; k++)
        if (speed[k] > fastest) fastest = speed[k];
    if (fastest > 0.0) {
        /* a rank that computed nothing in the window keeps a minimal share, so it is measured again */
        for (int k = 0; k < b->world; k++)
            if (speed[k] <= 0.0) speed[k] = fastest * 1e-3;
        hs_sampler_weight_units(speed, b->world, b->units);
        int64_t total = 0;
        for (int k = 0; k < b->world; k++) total += b->units[k];
        char line[2048];
        int len = snprintf(line, sizeof line, "| balance = auto after update %lld: shares of the global batch",
                           (long long)num_updates);
        for (int k = 0; k < b->world && len < (int)sizeof line - 64; k++)
            len += snprintf(line + len, sizeof line - (size_t)len, "%s rank %d %.1f%% (%.0f samples/s)", k ? "," : "", k,
                            100.0 * (double)b->units[k] / (double)total, speed[k]);
        hs_log("%s", line);
    }
    free(speed);
    b->seconds = 0.0;
    b->samples = 0.0;
    b->since = 0;
}
