/* HetSeq's batch sampler, exactly (see docs/deviations.md for what hetseq changes on purpose):
 * - frozen batches: contiguous index ranges of max_sentences samples in order 0..N-1 (the last may be
 *   shorter), nb = ceil(N / B);
 * - each epoch e >= 1, if shuffling, the batch list is permuted with numpy's legacy shuffle under
 *   MT19937 seeded with (seed + e): Fisher-Yates from the end, j drawn by masked rejection;
 * - rank k of W takes batches k, k+W, k+2W, ... and pads to Lk = ceil(nb / W) with EMPTY batches;
 * - updates group uf consecutive micro-batches of the shard (the last group may be shorter). */
#ifndef HS_DATA_SAMPLER_H
#define HS_DATA_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

/* One micro-batch: samples [first, first+count). count == 0 is an EMPTY (dummy) micro-batch that still
 * takes part in every collective. */
typedef struct hs_range {
    int64_t first;
    int32_t count;
} hs_range;

/* MT19937 as numpy's RandomState (init_genrand). */
typedef struct hs_mt19937 {
    uint32_t mt[624];
    int mti;
} hs_mt19937;
void hs_mt19937_seed(hs_mt19937 *r, uint32_t seed);
uint32_t hs_mt19937_next(hs_mt19937 *r);
/* numpy legacy random_interval: uniform in [0, max] by masked rejection. */
uint32_t hs_mt19937_interval(hs_mt19937 *r, uint32_t max);
/* np.random.seed(seed); np.random.shuffle(x) for an array of n elements of `size` bytes. */
void hs_legacy_shuffle(void *x, int64_t n, size_t size, uint32_t seed);

typedef struct hs_sampler {
    int64_t num_samples;   /* N */
    int64_t max_sentences; /* B */
    int64_t num_batches;   /* nb = ceil(N/B) */
    int world, rank;
    uint32_t seed;
    int shuffle;           /* 1 for training; 0 for validation (batches in order) */
} hs_sampler;

/* Errors (B < 1, N < 1, nb < W: "more ranks than batches") are user errors naming the config keys. */
void hs_sampler_init(hs_sampler *s, int64_t num_samples, int64_t max_sentences, int world, int rank,
                     uint32_t seed, int shuffle);
/* Lk = ceil(nb / W): micro-batches per rank per epoch (the same on every rank). */
int64_t hs_sampler_shard_len(const hs_sampler *s);
/* Fill out[0..Lk) with this rank's micro-batches for epoch (1-based). */
void hs_sampler_epoch_shard(const hs_sampler *s, int epoch, hs_range *out);
/* Updates per epoch with update_freq uf: ceil(Lk / uf). */
int64_t hs_sampler_updates_per_epoch(const hs_sampler *s, int update_freq);

/* ---- weighted shares of every global batch (distributed.weights, distributed.balance) ------------------
 * HetSeq's global batch of update u is the batches at positions [u·uf·W, (u·uf + n_u)·W) of the epoch's
 * order (n_u = min(uf, Lk - u·uf); positions >= nb are EMPTY): exactly the batches the W ranks' shards
 * hand out in that update. With weights, those batches' samples are concatenated in position order and
 * rank k takes the contiguous share [S·C_k / C_W, S·C_{k+1} / C_W) of the S samples (C = cumulative
 * integer weights), cut into micro-batches at batch boundaries and at caps[k] samples. The set of
 * samples per update, and so the model (up to summation order; gradients are normalised by global
 * counts), does not depend on the weights. Every rank computes every rank's cut, so all issue the same
 * number of reads: the largest count, EMPTY-padded. */

/* The epoch's batch order: order[i] = batch at position i (nb entries; HetSeq's shuffle). */
void hs_sampler_epoch_order(const hs_sampler *s, int epoch, int64_t *order);
/* Integer weights (units[k] >= 1) from positive real weights: proportional, the largest = 65536. */
void hs_sampler_weight_units(const double *weights, int world, int64_t *units);
/* This rank's micro-batches of update u (0-based in the epoch) into out[0..n), n returned (<= max_out,
 * which hs_sampler_weighted_max_ranges bounds); caps[k] >= 1 for every rank. */
int hs_sampler_weighted_update(const hs_sampler *s, const int64_t *order, int64_t update, int update_freq,
                               const int64_t *units, const int32_t *caps, hs_range *out, int max_out);
/* An upper bound of the micro-batches any rank gets in one update (for buffer sizes). */
int hs_sampler_weighted_max_ranges(const hs_sampler *s, int update_freq, const int32_t *caps);

#endif
