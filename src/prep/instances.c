/* BERT pre-training instances as Google's create_pretraining_data.py makes them (see instances.h). */
#include "prep/instances.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"

/* ---- random numbers ----------------------------------------------------------------------------------- */

int64_t hs_prep_rng_int(hs_prep_rng *r, int64_t lo, int64_t hi) {
    uint64_t range = (uint64_t)(hi - lo) + 1;
    if (range == 0) return (int64_t)hs_prep_rng_next(r); /* the whole 64-bit range */
    /* reject the lowest (2^64 mod range) values so every residue is equally likely */
    uint64_t threshold = (0 - range) % range, x;
    do x = hs_prep_rng_next(r);
    while (x < threshold);
    return lo + (int64_t)(x % range);
}

void hs_prep_rng_shuffle(hs_prep_rng *r, int64_t *a, size_t n) {
    for (size_t i = n; i-- > 1;) {
        size_t j = (size_t)hs_prep_rng_int(r, 0, (int64_t)i);
        int64_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}

/* ---- rows ------------------------------------------------------------------------------------------------ */

void hs_instance_rows_init(hs_instance_rows *rows, int seq_len, int max_pred) {
    memset(rows, 0, sizeof *rows);
    rows->seq_len = seq_len;
    rows->max_pred = max_pred;
}

void hs_instance_rows_free(hs_instance_rows *rows) {
    free(rows->input_ids);
    free(rows->input_mask);
    free(rows->segment_ids);
    free(rows->mlm_positions);
    free(rows->mlm_ids);
    free(rows->nsp_labels);
    memset(rows, 0, sizeof *rows);
}

/* A new zeroed row (zero = NVIDIA's padding in every dataset); returns its index. */
static size_t add_row(hs_instance_rows *r) {
    size_t L = (size_t)r->seq_len, P = (size_t)r->max_pred;
    if (r->count == r->capacity) {
        size_t cap = r->capacity ? 2 * r->capacity : 256;
        HS_REALLOC(r->input_ids, cap * L);
        HS_REALLOC(r->input_mask, cap * L);
        HS_REALLOC(r->segment_ids, cap * L);
        HS_REALLOC(r->mlm_positions, cap * P);
        HS_REALLOC(r->mlm_ids, cap * P);
        HS_REALLOC(r->nsp_labels, cap);
        r->capacity = cap;
    }
    size_t i = r->count++;
    memset(r->input_ids + i * L, 0, L * sizeof *r->input_ids);
    memset(r->input_mask + i * L, 0, L);
    memset(r->segment_ids + i * L, 0, L);
    memset(r->mlm_positions + i * P, 0, P * sizeof *r->mlm_positions);
    memset(r->mlm_ids + i * P, 0, P * sizeof *r->mlm_ids);
    r->nsp_labels[i] = 0;
    return i;
}

/* ---- masking ------------------------------------------------------------------------------------------- */

int hs_mask_tokens(int32_t *tokens, int n, const hs_instance_params *p, hs_prep_rng *rng, int32_t *positions,
                   int32_t *labels) {
    int64_t cand[n > 0 ? n : 1];
    int n_cand = 0;
    for (int i = 0; i < n; i++)
        if (tokens[i] != p->special.cls && tokens[i] != p->special.sep) cand[n_cand++] = i;
    hs_prep_rng_shuffle(rng, cand, (size_t)n_cand);
    /* Python's int(round(x)): round half to even, as rint in the default rounding mode */
    int num = (int)rint((double)n * p->masked_lm_prob);
    if (num < 1) num = 1;
    if (num > p->max_pred) num = p->max_pred;
    if (num > n_cand) num = n_cand;
    for (int k = 0; k < num; k++) {
        int at = (int)cand[k];
        int32_t original = tokens[at];
        if (hs_prep_rng_uniform(rng) < 0.8) tokens[at] = p->special.mask; /* 80%: [MASK] */
        else if (hs_prep_rng_uniform(rng) < 0.5) tokens[at] = original;   /* 10%: kept */
        else tokens[at] = (int32_t)hs_prep_rng_int(rng, 0, p->vocab_size - 1); /* 10%: any vocabulary id */
        /* insert sorted by position */
        int j = k;
        while (j > 0 && positions[j - 1] > at) {
            positions[j] = positions[j - 1];
            labels[j] = labels[j - 1];
            j--;
        }
        positions[j] = at;
        labels[j] = original;
    }
    return num;
}

/* ---- instances from one document ---------------------------------------------------------------------- */

typedef struct span {
    int64_t begin, end; /* token offsets in the corpus */
} span;

/* truncate_seq_pair: pop from the longer side (B on a tie), at the front or the back at random. */
static void truncate_pair(span *a, span *b, int64_t max_tokens, hs_prep_rng *rng) {
    while ((a->end - a->begin) + (b->end - b->begin) > max_tokens) {
        span *t = (a->end - a->begin) > (b->end - b->begin) ? a : b;
        if (hs_prep_rng_uniform(rng) < 0.5) t->begin++;
        else t->end--;
    }
}

static void emit_instance(const hs_corpus *c, span a, span b, int is_random_next, const hs_instance_params *p,
                          hs_prep_rng *rng, hs_instance_rows *out) {
    size_t L = (size_t)p->seq_len, P = (size_t)p->max_pred;
    size_t row = add_row(out);
    int32_t *tokens = out->input_ids + row * L; /* [L] */
    int8_t *segments = out->segment_ids + row * L, *mask = out->input_mask + row * L;
    int la = (int)(a.end - a.begin), lb = (int)(b.end - b.begin), n = la + lb + 3;
    tokens[0] = p->special.cls;
    memcpy(tokens + 1, c->tokens + a.begin, (size_t)la * sizeof *tokens);
    tokens[la + 1] = p->special.sep;
    memcpy(tokens + la + 2, c->tokens + b.begin, (size_t)lb * sizeof *tokens);
    tokens[n - 1] = p->special.sep;
    for (int i = 0; i < n; i++) {
        mask[i] = 1;
        segments[i] = i >= la + 2;
    }
    hs_mask_tokens(tokens, n, p, rng, out->mlm_positions + row * P, out->mlm_ids + row * P);
    out->nsp_labels[row] = (int8_t)is_random_next;
}

void hs_create_instances(const hs_doc_pool *pool, size_t index, const hs_instance_params *p, hs_prep_rng *rng,
                         hs_instance_rows *out) {
    const hs_corpus *c = pool->corpus;
    size_t doc = (size_t)pool->docs[index];
    int64_t s0 = hs_corpus_doc_first_sent(c, doc), n_sent = c->doc_end[doc] - s0;
    /* [CLS], [SEP], [SEP] */
    int64_t max_tokens = p->seq_len - 3;
    /* usually fill the sequence; sometimes (short_seq_prob) a shorter target, as fine-tuning inputs are */
    int64_t target = max_tokens;
    if (hs_prep_rng_uniform(rng) < p->short_seq_prob) target = hs_prep_rng_int(rng, 2, max_tokens);

    /* the chunk is the run of sentences [chunk_start, i] of this document */
    int64_t chunk_start = 0, chunk_len = 0;
    for (int64_t i = 0; i < n_sent; i++) {
        int64_t s = s0 + i;
        chunk_len += c->sent_end[s] - hs_corpus_sent_first_token(c, s);
        if (i != n_sent - 1 && chunk_len < target) continue;
        int64_t n_chunk = i - chunk_start + 1;
        /* A = the first a_end sentences of the chunk */
        int64_t a_end = n_chunk >= 2 ? hs_prep_rng_int(rng, 1, n_chunk - 1) : 1;
        span a = {hs_corpus_sent_first_token(c, s0 + chunk_start), c->sent_end[s0 + chunk_start + a_end - 1]};
        span b;
        int is_random_next = n_chunk == 1 || hs_prep_rng_uniform(rng) < 0.5;
        if (is_random_next) {
            int64_t target_b = target - (a.end - a.begin);
            /* another document (ten tries: only a one-document pool fails) from a random sentence on */
            int64_t other = 0;
            for (int t = 0; t < 10; t++) {
                other = hs_prep_rng_int(rng, 0, (int64_t)pool->size - 1);
                if (other != (int64_t)index) break;
            }
            size_t rdoc = (size_t)pool->docs[other];
            int64_t r0 = hs_corpus_doc_first_sent(c, rdoc), r_n = c->doc_end[rdoc] - r0;
            int64_t rs = r0 + hs_prep_rng_int(rng, 0, r_n - 1);
            b.begin = hs_corpus_sent_first_token(c, rs);
            b.end = c->sent_end[rs];
            for (int64_t j = rs + 1; j < r0 + r_n && b.end - b.begin < target_b; j++) b.end = c->sent_end[j];
            /* the chunk's unused sentences go back: the next chunk starts after A */
            i -= n_chunk - a_end;
        } else {
            b.begin = a.end;
            b.end = c->sent_end[s];
        }
        truncate_pair(&a, &b, max_tokens, rng);
        emit_instance(c, a, b, is_random_next, p, rng, out);
        chunk_start = i + 1;
        chunk_len = 0;
    }
}
