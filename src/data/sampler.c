/* HetSeq's batch sampler (fairseq EpochBatchIterator + ShardedIterator) with numpy's legacy RNG,
 * reproduced bit for bit so a run sees the same data order as HetSeq (see sampler.h). */
#include "data/sampler.h"

#include <stdlib.h>
#include <string.h>

#include "util/check.h"

/* ---- MT19937, as numpy's RandomState.seed(int) (init_genrand) and genrand_int32 ----------------- */

#define MT_N 624
#define MT_M 397
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu

void hs_mt19937_seed(hs_mt19937 *r, uint32_t seed) {
    /* mt[i] = 1812433253 * (mt[i-1] ^ (mt[i-1] >> 30)) + i   (mod 2^32) */
    r->mt[0] = seed;
    for (int i = 1; i < MT_N; i++) r->mt[i] = 1812433253u * (r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) + (uint32_t)i;
    r->mti = MT_N;
}

static void mt19937_regenerate(hs_mt19937 *r) {
    for (int k = 0; k < MT_N; k++) {
        uint32_t y = (r->mt[k] & MT_UPPER) | (r->mt[(k + 1) % MT_N] & MT_LOWER);
        r->mt[k] = r->mt[(k + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? MT_MATRIX_A : 0u);
    }
    r->mti = 0;
}

uint32_t hs_mt19937_next(hs_mt19937 *r) {
    if (r->mti >= MT_N) mt19937_regenerate(r);
    uint32_t y = r->mt[r->mti++];
    /* tempering */
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

uint32_t hs_mt19937_interval(hs_mt19937 *r, uint32_t max) {
    if (max == 0) return 0;
    /* mask = smallest 2^m - 1 >= max; draw until the masked value falls in [0, max] */
    uint32_t mask = max;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    uint32_t v;
    do v = hs_mt19937_next(r) & mask;
    while (v > max);
    return v;
}

void hs_legacy_shuffle(void *x, int64_t n, size_t size, uint32_t seed) {
    if (n > (int64_t)UINT32_MAX + 1)
        HS_FATAL(NULL, "shuffle of %lld elements: numpy's 32-bit interval path covers at most 2^32", (long long)n);
    hs_mt19937 rng;
    hs_mt19937_seed(&rng, seed);
    unsigned char *bytes = x, tmp[64];
    if (size > sizeof tmp) HS_FATAL(NULL, "shuffle element of %zu bytes is larger than %zu", size, sizeof tmp);
    /* Fisher-Yates from the end: for i = n-1 .. 1, swap x[i] with x[j], j uniform in [0, i] */
    for (int64_t i = n - 1; i >= 1; i--) {
        int64_t j = hs_mt19937_interval(&rng, (uint32_t)i);
        if (j == i) continue;
        memcpy(tmp, bytes + (size_t)i * size, size);
        memcpy(bytes + (size_t)i * size, bytes + (size_t)j * size, size);
        memcpy(bytes + (size_t)j * size, tmp, size);
    }
}

/* ---- batches and rank shards ---------------------------------------------------------------------- */

void hs_sampler_init(hs_sampler *s, int64_t num_samples, int64_t max_sentences, int world, int rank,
                     uint32_t seed, int shuffle) {
    if (max_sentences < 1)
        hs_die_all("training.max_sentences must be >= 1 (got %lld): it is the number of samples per rank "
                   "per micro-batch",
                   (long long)max_sentences);
    if (max_sentences > INT32_MAX)
        hs_die_all("training.max_sentences = %lld is too large (at most %d)", (long long)max_sentences, INT32_MAX);
    if (num_samples < 1)
        hs_die_all("the data set has no samples (N = %lld): check data.path, or re-run `hetseq prep` to "
                   "rebuild the data file",
                   (long long)num_samples);
    if (world < 1 || rank < 0 || rank >= world) HS_FATAL(NULL, "rank %d of %d", rank, world);
    memset(s, 0, sizeof *s);
    s->num_samples = num_samples;
    s->max_sentences = max_sentences;
    s->num_batches = (num_samples + max_sentences - 1) / max_sentences;
    s->world = world;
    s->rank = rank;
    s->seed = seed;
    s->shuffle = shuffle;
    /* HetSeq crashes here (a rank whose first micro-batch is EMPTY has no dummy batch); say why. */
    if (s->num_batches < world)
        hs_die_all("more ranks (%d) than batches (%lld): %lld samples in micro-batches of "
                   "training.max_sentences = %lld give only %lld; lower training.max_sentences or use "
                   "fewer ranks",
                   world, (long long)s->num_batches, (long long)num_samples, (long long)max_sentences,
                   (long long)s->num_batches);
}

int64_t hs_sampler_shard_len(const hs_sampler *s) { return (s->num_batches + s->world - 1) / s->world; }

void hs_sampler_epoch_order(const hs_sampler *s, int epoch, int64_t *order) {
    const int64_t nb = s->num_batches;
    for (int64_t b = 0; b < nb; b++) order[b] = b;
    /* numpy_seed(seed + epoch): the seed wraps modulo 2^32 (numpy would refuse seeds >= 2^32) */
    if (s->shuffle) hs_legacy_shuffle(order, nb, sizeof *order, s->seed + (uint32_t)epoch);
}

void hs_sampler_epoch_shard(const hs_sampler *s, int epoch, hs_range *out) {
    int64_t nb = s->num_batches;
    /* order[i] = index of the i-th batch this epoch; batch b = samples [b*B, min(N, (b+1)*B)) */
    int64_t *order;
    HS_ALLOC(order, nb);
    hs_sampler_epoch_order(s, epoch, order);
    int64_t len = hs_sampler_shard_len(s);
    for (int64_t j = 0; j < len; j++) {
        int64_t i = s->rank + j * s->world; /* round robin: rank k takes k, k+W, k+2W, ... */
        if (i < nb) {
            int64_t first = order[i] * s->max_sentences;
            int64_t end = first + s->max_sentences;
            if (end > s->num_samples) end = s->num_samples;
            out[j].first = first;
            out[j].count = (int32_t)(end - first);
        } else {
            out[j].first = 0; /* EMPTY: padding so every rank runs Lk micro-batches */
            out[j].count = 0;
        }
    }
    free(order);
}

int64_t hs_sampler_updates_per_epoch(const hs_sampler *s, int update_freq) {
    if (update_freq < 1) HS_FATAL(NULL, "update_freq %d < 1", update_freq);
    return (hs_sampler_shard_len(s) + update_freq - 1) / update_freq;
}

/* ---- weighted shares ------------------------------------------------------------------------------ */

__extension__ typedef unsigned __int128 hs_u128; /* S · C_k exceeds 64 bits for large jobs */

void hs_sampler_weight_units(const double *weights, int world, int64_t *units) {
    double most = 0.0;
    for (int k = 0; k < world; k++)
        if (weights[k] > most) most = weights[k];
    for (int k = 0; k < world; k++) {
        int64_t u = most > 0.0 ? (int64_t)(weights[k] / most * 65536.0 + 0.5) : 1;
        units[k] = u < 1 ? 1 : u;
    }
}

/* Batch at position i of the epoch: [first, first+size) (size 0 past the end: EMPTY). */
static int64_t batch_size_at(const hs_sampler *s, const int64_t *order, int64_t i, int64_t *first) {
    if (i >= s->num_batches) {
        *first = 0;
        return 0;
    }
    *first = order[i] * s->max_sentences;
    int64_t end = *first + s->max_sentences;
    if (end > s->num_samples) end = s->num_samples;
    return end - *first;
}

/* Positions [lo, hi) of update u's global batch. */
static void update_positions(const hs_sampler *s, int64_t update, int uf, int64_t *lo, int64_t *hi) {
    const int64_t len = hs_sampler_shard_len(s);
    int64_t n_u = len - update * uf;
    if (n_u > uf) n_u = uf;
    if (n_u < 0) n_u = 0;
    *lo = update * uf * s->world;
    *hi = (update * uf + n_u) * s->world;
}

/* Cuts the share [a, b) of the update's concatenated samples into micro-batches of at most cap samples
 * that do not cross a batch boundary, walking the batches from position *i (whose first sample is at
 * coordinate *offset); writes them to out when out != NULL and returns their number. Advances *i and
 * *offset past the batches that end at or before a, so consecutive shares walk the batches once. */
static int cut_share(const hs_sampler *s, const int64_t *order, int64_t *i, int64_t *offset, int64_t hi, int64_t a,
                     int64_t b, int32_t cap, hs_range *out, int max_out) {
    int64_t first;
    while (*i < hi && *offset + batch_size_at(s, order, *i, &first) <= a) *offset += batch_size_at(s, order, (*i)++, &first);
    int n = 0;
    for (int64_t j = *i, offset_j = *offset; j < hi && offset_j < b; j++) {
        const int64_t size = batch_size_at(s, order, j, &first);
        const int64_t to = b < offset_j + size ? b : offset_j + size;
        for (int64_t from = a > offset_j ? a : offset_j; from < to; from += cap) {
            if (out) {
                if (n >= max_out) HS_FATAL(NULL, "weighted share of more than %d micro-batches", max_out);
                out[n].first = first + (from - offset_j);
                out[n].count = (int32_t)(to - from < cap ? to - from : cap);
            }
            n++;
        }
        offset_j += size;
    }
    return n;
}

int hs_sampler_weighted_update(const hs_sampler *s, const int64_t *order, int64_t update, int update_freq,
                               const int64_t *units, const int32_t *caps, hs_range *out, int max_out) {
    int64_t lo, hi, first, S = 0;
    update_positions(s, update, update_freq, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) S += batch_size_at(s, order, i, &first);
    hs_u128 total = 0, before = 0; /* rank k's share is [S·before / total, S·(before + units[k]) / total) */
    for (int k = 0; k < s->world; k++) total += (hs_u128)units[k];
    int64_t i = lo, offset = 0;
    int most = 1, mine = 0; /* at least one (EMPTY) micro-batch per update, as HetSeq's padding */
    for (int k = 0; k < s->world; k++) {
        const int64_t a = (int64_t)((hs_u128)S * before / total);
        before += (hs_u128)units[k];
        const int64_t b = (int64_t)((hs_u128)S * before / total);
        int n = cut_share(s, order, &i, &offset, hi, a, b, caps[k], k == s->rank ? out : NULL, max_out);
        if (k == s->rank) mine = n;
        if (n > most) most = n;
    }
    if (most > max_out) HS_FATAL(NULL, "weighted share of %d micro-batches (at most %d)", most, max_out);
    for (int j = mine; j < most; j++) out[j].first = 0, out[j].count = 0; /* EMPTY padding */
    return most;
}

int hs_sampler_weighted_max_ranges(const hs_sampler *s, int update_freq, const int32_t *caps) {
    /* a share spans at most G = uf·W batches (G - 1 inner boundaries) and at most G·B samples */
    int32_t cap = INT32_MAX;
    for (int k = 0; k < s->world; k++)
        if (caps[k] < cap) cap = caps[k];
    const int64_t G = (int64_t)update_freq * s->world;
    const int64_t bound = G + (G * s->max_sentences + cap - 1) / cap + 1;
    if (bound > INT32_MAX) HS_FATAL("lower training.update_freq or raise the per-rank max_sentences", "%lld micro-batches", (long long)bound);
    return (int)bound;
}
