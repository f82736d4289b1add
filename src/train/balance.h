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
    int64_t *units;         /* [world] integer weights in force (hs_sampler_weight_units) */
    int64_t *next_units;    /* [world] shares of the last re-balance, in force from update next_from on */
    int64_t next_from;      /* 1-based update number; 0: nothing pending */
    int32_t *caps;          /* [world] largest micro-batch of each rank */
    int max_ranges;         /* most micro-batches of one update on any rank */
    int max_count;          /* the largest cap: the size of a read buffer */
    int64_t warmup, every;  /* distributed.balance_warmup, distributed.rebalance_every */
    int learned;            /* shares measured (or restored from a checkpoint): the warm-up is over */
    int64_t untimed_through; /* updates up to this number are not timed (first touches, caches) */
    int64_t since;          /* updates timed since the last re-balance */
    /* this rank since the last re-balance: seconds of its forward and backward passes, seconds of its
     * fixed per-update work (optimizer step, gradient norm: the same on every rank whatever its share),
     * samples computed */
    double compute_seconds, fixed_seconds, samples;
    int64_t *order;         /* the epoch's batch order (cached) */
    int64_t order_epoch;
    int64_t *ckpt_rows;     /* [2][world] what a checkpoint stores (hs_balance_checkpoint_shares) */
} hs_balance;

/* Re-balancing keeps the shares in force when no rank's share would move by more than this many
 * percentage points of the global batch: measurement noise does not reshuffle the split. */
#define HS_BALANCE_HYSTERESIS 2.0

/* Reads the settings and checks them against the world size (a list of the wrong length is a user error
 * naming the key). Collective. */
void hs_balance_init(hs_balance *b, const hs_train_config *tc, const hs_comm *comm, const hs_sampler *s);
void hs_balance_free(hs_balance *b);
/* This rank's micro-batches of update u (0-based) of the epoch, run update number `update` (1-based),
 * into out[0..max_ranges); returns n (the same on every rank, EMPTY-padded). */
int hs_balance_update_ranges(hs_balance *b, const hs_sampler *s, int64_t epoch, int64_t u, int64_t update, int uf,
                             hs_range *out);
/* balance = auto: during update number `update` this rank computed `samples` samples in
 * `compute_seconds` and spent `fixed_seconds` on its share-independent work (the optimizer step). */
void hs_balance_record(hs_balance *b, int64_t update, double compute_seconds, double fixed_seconds, int64_t samples);
/* balance = auto: re-balance when due — after the warm-up, every rebalance_every updates, and at
 * epoch_end — from every rank's measured speed and fixed cost, and log the new shares. They apply from
 * update num_updates + 2 on: update num_updates + 1 may already be read with the shares before.
 * Collective; every rank decides alike (the decision depends on update counts only). */
void hs_balance_maybe_rebalance(hs_balance *b, const hs_comm *comm, int64_t num_updates, int epoch_end);
/* balance = auto: what a checkpoint written after update num_updates stores (/train_state/balance_shares,
 * [2][world]: the shares of update num_updates + 1, then of the updates after it), or NULL when there
 * is nothing learned to store (equal or fixed shares, or still in the warm-up). */
const int64_t *hs_balance_checkpoint_shares(hs_balance *b, int64_t num_updates);
/* balance = auto on resume from `path` after update num_updates: continue with the shares stored there
 * (logged) instead of learning them again; a checkpoint without them (older, other settings, another
 * number of ranks) starts the warm-up. Collective (rank 0 reads). */
void hs_balance_resume(hs_balance *b, const hs_comm *comm, const char *path, int64_t num_updates);

#endif
