/* Weighted shares of every global batch (docs/cluster.md, "Balancing a mixed cluster"): which samples
 * of each update this rank computes when ranks differ in speed or memory. Off (HetSeq's equal
 * micro-batches, the sampler's round robin) unless distributed.weights, distributed.rank_max_sentences
 * or distributed.balance = "auto" is set. The global batch of every update is the same set of samples
 * either way; only its split over ranks changes, so the model is the same up to summation order. */
#ifndef HS_TRAIN_BALANCE_H
#define HS_TRAIN_BALANCE_H

#include <stdint.h>

#include "comm/comm.h"
#include "data/sampler.h"
#include "train/train_config.h"

typedef struct hs_balance {
    int enabled, auto_mode;
    int world, rank;
    int64_t *units;         /* [world] integer weights (hs_sampler_weight_units) */
    int32_t *caps;          /* [world] largest micro-batch of each rank */
    int max_ranges;         /* most micro-batches of one update on any rank */
    int max_count;          /* the largest cap: the size of a read buffer */
    int64_t warmup, every;  /* distributed.balance_warmup, distributed.rebalance_every */
    int64_t timed, since;   /* updates timed in all; since the last re-balance */
    double seconds, samples; /* this rank's compute time and samples since the last re-balance */
    int64_t *order;         /* the epoch's batch order (cached) */
    int64_t order_epoch;
} hs_balance;

/* Reads the settings and checks them against the world size (a list of the wrong length is a user error
 * naming the key). Collective. */
void hs_balance_init(hs_balance *b, const hs_train_config *tc, const hs_comm *comm, const hs_sampler *s);
void hs_balance_free(hs_balance *b);
/* This rank's micro-batches of update u (0-based) of the epoch into out[0..max_ranges); returns n (the
 * same on every rank, EMPTY-padded). */
int hs_balance_update_ranges(hs_balance *b, const hs_sampler *s, int64_t epoch, int64_t u, int uf, hs_range *out);
/* balance = auto: this rank computed `samples` samples in `seconds` during update number `update`
 * (1-based; the first update is not timed: it pays for first touches and caches). */
void hs_balance_record(hs_balance *b, int64_t update, double seconds, int64_t samples);
/* balance = auto: re-balance when due — after the warm-up, every rebalance_every updates, and at
 * epoch_end — from every rank's measured speed (samples per second), and log the new shares.
 * Collective; every rank decides alike (the decision depends on update counts only). */
void hs_balance_maybe_rebalance(hs_balance *b, const hs_comm *comm, int64_t num_updates, int epoch_end);

#endif
