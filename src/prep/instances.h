/* BERT pre-training instances from a tokenized corpus, as Google's create_pretraining_data.py makes
 * them (create_instances_from_document, truncate_seq_pair, create_masked_lm_predictions; whole-word
 * masking off), written as rows of NVIDIA's HDF5 shard datasets.
 *
 * Randomness is a counter-based stream per (seed, split, dupe, document), not one global generator,
 * so a document's instances do not depend on which rank makes them or in which order. */
#ifndef HS_PREP_INSTANCES_H
#define HS_PREP_INSTANCES_H

#include <stddef.h>
#include <stdint.h>

#include "math/hs_math.h"
#include "prep/corpus.h"
#include "prep/wordpiece.h"

/* ---- random numbers: splitmix64 from a key -------------------------------------------------------- */
typedef struct hs_prep_rng {
    uint64_t key, counter;
} hs_prep_rng;

static inline hs_prep_rng hs_prep_rng_make(uint64_t key) { return (hs_prep_rng){key, 0}; }
static inline uint64_t hs_prep_rng_next(hs_prep_rng *r) {
    return hs_mix64(r->key + 0x9e3779b97f4a7c15ULL * r->counter++);
}
/* uniform in [0, 1) with 53 bits, like Python's random() */
static inline double hs_prep_rng_uniform(hs_prep_rng *r) {
    return (double)(hs_prep_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}
/* uniform integer in [lo, hi], both included (Python's randint), without modulo bias */
int64_t hs_prep_rng_int(hs_prep_rng *r, int64_t lo, int64_t hi);
/* Fisher-Yates from the end, as Python's shuffle */
void hs_prep_rng_shuffle(hs_prep_rng *r, int64_t *a, size_t n);

/* ---- instances ------------------------------------------------------------------------------------ */
typedef struct hs_instance_params {
    int seq_len;           /* L: [CLS] A [SEP] B [SEP] plus zero padding */
    int max_pred;          /* P: at most this many masked positions per row */
    double masked_lm_prob; /* fraction of the tokens to predict (rounded half to even, at least 1) */
    double short_seq_prob; /* probability of a random shorter target length in [2, L-3] */
    int vocab_size;        /* random replacements are ids in [0, vocab_size) */
    hs_special_ids special;
} hs_instance_params;

/* Rows of the six shard datasets, grown as instances are added. */
typedef struct hs_instance_rows {
    int seq_len, max_pred;
    size_t count, capacity;
    int32_t *input_ids;     /* [count, L] ids after masking, 0-padded */
    int8_t *input_mask;     /* [count, L] 1 = real token */
    int8_t *segment_ids;    /* [count, L] 0 = [CLS] A [SEP], 1 = B [SEP], 0 padding */
    int32_t *mlm_positions; /* [count, P] ascending, 0-padded */
    int32_t *mlm_ids;       /* [count, P] original ids there, 0-padded */
    int8_t *nsp_labels;     /* [count] 1 = B is a random segment */
} hs_instance_rows;

void hs_instance_rows_init(hs_instance_rows *rows, int seq_len, int max_pred);
void hs_instance_rows_free(hs_instance_rows *rows);

/* The documents instances draw from: pool[0..pool_size) are corpus document indices (one split). */
typedef struct hs_doc_pool {
    const hs_corpus *corpus;
    const int64_t *docs;
    size_t size;
} hs_doc_pool;

/* Appends the instances of document pool->docs[index], drawing every random number from rng. */
void hs_create_instances(const hs_doc_pool *pool, size_t index, const hs_instance_params *p, hs_prep_rng *rng,
                         hs_instance_rows *out);

/* Masks one sequence in place as Google's create_masked_lm_predictions: tokens[n] holds [CLS] A [SEP]
 * B [SEP]; writes the sorted positions and original ids to positions/labels and returns their count. */
int hs_mask_tokens(int32_t *tokens, int n, const hs_instance_params *p, hs_prep_rng *rng, int32_t *positions,
                   int32_t *labels);

#endif
