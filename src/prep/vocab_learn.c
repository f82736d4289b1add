/* WordPiece vocabulary learning (BPE merges with "##" continuation pieces); the rules are in
 * vocab_learn.h. Data:
 *   words: each distinct word as a run of token ids in one symbol array (shrinks in place as merges
 *          join neighbours), with its corpus count;
 *   pairs: hash table (x, y) -> exact count over the corpus, and the words the pair was ever seen in
 *          (a superset of where it is now; merging re-checks each word);
 *   heap:  (count, x, y) entries, largest count first, then smaller x, then smaller y. An entry may be
 *          stale: when popped, its count is compared with the table and, if different, pushed again
 *          with the current count. Every merge pushes the pairs whose count grew, so each live pair
 *          always has an entry whose count is >= its true count, and the first popped entry that is
 *          current is the true maximum. */
#include "prep/vocab_learn.h"

#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/hash.h"
#include "util/timer.h"

const char *const hs_vocab_special_tokens[HS_VOCAB_N_SPECIAL] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

#define N_CODE_POINTS 0x110000
#define CONTINUATION "##"

/* ---- tokens: id -> string, string -> id ---------------------------------------------------------- */

typedef struct token_table {
    char **str; /* [count] */
    int count, cap;
    int32_t *slot_id; /* open addressing over ids, -1 empty; capacity is a power of two, <= half full */
    uint64_t *slot_hash;
    size_t slots;
} token_table;

static uint64_t hash_str(const char *s) { return hs_string_hash(s, strlen(s)); }

static void tokens_rehash(token_table *t, size_t slots) {
    free(t->slot_id);
    free(t->slot_hash);
    t->slots = slots;
    HS_ALLOC(t->slot_id, slots);
    HS_ALLOC(t->slot_hash, slots);
    for (size_t i = 0; i < slots; i++) t->slot_id[i] = -1;
    for (int id = 0; id < t->count; id++) {
        uint64_t h = hash_str(t->str[id]);
        size_t j = (size_t)h & (slots - 1);
        while (t->slot_id[j] >= 0) j = (j + 1) & (slots - 1);
        t->slot_id[j] = id;
        t->slot_hash[j] = h;
    }
}

/* id of s, or -1; *slot_out gets the slot where s would go */
static int tokens_find(const token_table *t, const char *s, uint64_t h, size_t *slot_out) {
    size_t j = (size_t)h & (t->slots - 1);
    for (; t->slot_id[j] >= 0; j = (j + 1) & (t->slots - 1))
        if (t->slot_hash[j] == h && !strcmp(t->str[t->slot_id[j]], s)) return t->slot_id[j];
    *slot_out = j;
    return -1;
}

/* id of s, added (taking ownership of s) if new; *added tells which */
static int tokens_intern(token_table *t, char *s, int *added) {
    uint64_t h = hash_str(s);
    size_t j;
    int id = tokens_find(t, s, h, &j);
    if (id >= 0) {
        free(s);
        *added = 0;
        return id;
    }
    if (t->count == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1024;
        HS_REALLOC(t->str, t->cap);
    }
    id = t->count++;
    t->str[id] = s;
    t->slot_id[j] = id;
    t->slot_hash[j] = h;
    if ((size_t)t->count * 2 > t->slots) tokens_rehash(t, t->slots * 2);
    *added = 1;
    return id;
}

/* ---- pairs -------------------------------------------------------------------------------------------- */

typedef struct pair_info {
    uint64_t key; /* (x << 32) | y */
    int64_t count;
    int32_t *words; /* words the pair has been seen in (indices), no two equal neighbours */
    uint32_t n_words, cap_words;
    uint32_t touched_at; /* merge number when last grown: each grown pair is pushed once per merge */
} pair_info;

typedef struct pair_table {
    pair_info *pairs;
    size_t count, cap;
    int32_t *slot; /* index into pairs, -1 empty */
    size_t slots;
} pair_table;

static uint64_t pair_key(int32_t x, int32_t y) { return ((uint64_t)(uint32_t)x << 32) | (uint32_t)y; }
static uint64_t mix64(uint64_t k) { /* splitmix64 finaliser */
    k ^= k >> 30;
    k *= 0xbf58476d1ce4e5b9ull;
    k ^= k >> 27;
    k *= 0x94d049bb133111ebull;
    return k ^ (k >> 31);
}

static void pairs_rehash(pair_table *t, size_t slots) {
    free(t->slot);
    t->slots = slots;
    HS_ALLOC(t->slot, slots);
    for (size_t i = 0; i < slots; i++) t->slot[i] = -1;
    for (size_t p = 0; p < t->count; p++) {
        size_t j = (size_t)mix64(t->pairs[p].key) & (slots - 1);
        while (t->slot[j] >= 0) j = (j + 1) & (slots - 1);
        t->slot[j] = (int32_t)p;
    }
}

/* index of (x, y), created with count 0 if absent */
static int32_t pair_get(pair_table *t, int32_t x, int32_t y) {
    uint64_t key = pair_key(x, y);
    size_t j = (size_t)mix64(key) & (t->slots - 1);
    for (; t->slot[j] >= 0; j = (j + 1) & (t->slots - 1))
        if (t->pairs[t->slot[j]].key == key) return t->slot[j];
    if (t->count == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 4096;
        HS_REALLOC(t->pairs, t->cap);
    }
    if (t->count >= INT32_MAX) HS_FATAL(NULL, "more than 2^31 distinct token pairs");
    int32_t p = (int32_t)t->count++;
    memset(&t->pairs[p], 0, sizeof t->pairs[p]);
    t->pairs[p].key = key;
    t->slot[j] = p;
    if (t->count * 2 > t->slots) pairs_rehash(t, t->slots * 2);
    return p;
}

static void pair_note_word(pair_info *pi, int32_t w) {
    if (pi->n_words && pi->words[pi->n_words - 1] == w) return;
    if (pi->n_words == pi->cap_words) {
        pi->cap_words = pi->cap_words ? 2 * pi->cap_words : 4;
        HS_REALLOC(pi->words, pi->cap_words);
    }
    pi->words[pi->n_words++] = w;
}

/* ---- heap ---------------------------------------------------------------------------------------------- */

typedef struct heap_entry {
    int64_t count;
    int32_t x, y;
} heap_entry;

typedef struct heap {
    heap_entry *e;
    size_t n, cap;
} heap;

/* a comes out before b */
static int heap_before(const heap_entry *a, const heap_entry *b) {
    if (a->count != b->count) return a->count > b->count;
    if (a->x != b->x) return a->x < b->x;
    return a->y < b->y;
}

static void heap_push(heap *h, heap_entry v) {
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 4096;
        HS_REALLOC(h->e, h->cap);
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!heap_before(&v, &h->e[parent])) break;
        h->e[i] = h->e[parent];
        i = parent;
    }
    h->e[i] = v;
}

static heap_entry heap_pop(heap *h) {
    heap_entry top = h->e[0], last = h->e[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n) break;
        if (c + 1 < h->n && heap_before(&h->e[c + 1], &h->e[c])) c++;
        if (!heap_before(&h->e[c], &last)) break;
        h->e[i] = h->e[c];
        i = c;
    }
    if (h->n) h->e[i] = last;
    return top;
}

/* ---- UTF-8 --------------------------------------------------------------------------------------------- */

/* Decodes one code point of valid UTF-8 at s (the corpus reader checked it); returns its length. */
static int utf8_next(const unsigned char *s, size_t left, uint32_t *cp) {
    unsigned c = s[0];
    int n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if ((size_t)n > left) n = 1; /* cannot happen for valid input; stay in bounds anyway */
    uint32_t v = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; k++) v = (v << 6) | (s[k] & 0x3F);
    *cp = v < N_CODE_POINTS ? v : 0xFFFD;
    return n;
}

static char *utf8_token(uint32_t cp, int continuation) {
    char buf[8], *p = buf;
    if (continuation) {
        memcpy(p, CONTINUATION, 2);
        p += 2;
    }
    if (cp < 0x80) *p++ = (char)cp;
    else if (cp < 0x800) {
        *p++ = (char)(0xC0 | (cp >> 6));
        *p++ = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        *p++ = (char)(0xE0 | (cp >> 12));
        *p++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *p++ = (char)(0x80 | (cp & 0x3F));
    } else {
        *p++ = (char)(0xF0 | (cp >> 18));
        *p++ = (char)(0x80 | ((cp >> 12) & 0x3F));
        *p++ = (char)(0x80 | ((cp >> 6) & 0x3F));
        *p++ = (char)(0x80 | (cp & 0x3F));
    }
    *p = 0;
    return HS_STRDUP(buf);
}

/* ---- the alphabet -------------------------------------------------------------------------------------- */

typedef struct char_freq {
    uint32_t cp;
    uint64_t count;
} char_freq;

static int more_frequent_first(const void *pa, const void *pb) {
    const char_freq *a = pa, *b = pb;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    return (a->cp > b->cp) - (a->cp < b->cp);
}

static int code_point_order(const void *pa, const void *pb) {
    const char_freq *a = pa, *b = pb;
    return (a->cp > b->cp) - (a->cp < b->cp);
}

/* ---- learning ------------------------------------------------------------------------------------------ */

typedef struct learner {
    token_table tokens;
    pair_table pairs;
    heap queue;
    int32_t *sym;     /* all words' symbols */
    size_t *start;    /* [n_words] */
    uint32_t *len;    /* [n_words] current number of symbols */
    int64_t *weight;  /* [n_words] corpus count */
    uint32_t *seen_at; /* [n_words] merge number that last visited the word */
    int32_t *grown;   /* pairs whose count grew in this merge */
    size_t n_grown, cap_grown;
    uint32_t merge_no;
} learner;

static void pair_add(learner *L, int32_t x, int32_t y, int64_t delta, int32_t w) {
    int32_t p = pair_get(&L->pairs, x, y);
    pair_info *pi = &L->pairs.pairs[p];
    pi->count += delta;
    pair_note_word(pi, w);
    if (pi->touched_at != L->merge_no) {
        pi->touched_at = L->merge_no;
        if (L->n_grown == L->cap_grown) {
            L->cap_grown = L->cap_grown ? 2 * L->cap_grown : 1024;
            HS_REALLOC(L->grown, L->cap_grown);
        }
        L->grown[L->n_grown++] = p;
    }
}

static void pair_sub(learner *L, int32_t x, int32_t y, int64_t delta) {
    L->pairs.pairs[pair_get(&L->pairs, x, y)].count -= delta;
}

/* Replaces every (x, y) in word w by z, left to right without overlap ("a a a" -> "aa a"), and moves the
 * pair counts of the neighbours: p x y n  ->  p z n  takes (p,x) (x,y) (y,n) away and adds (p,z) (z,n). */
static void merge_in_word(learner *L, int32_t w, int32_t x, int32_t y, int32_t z) {
    int32_t *s = L->sym + L->start[w];
    uint32_t n = L->len[w], i = 0, j = 0;
    int64_t c = L->weight[w];
    while (i < n) {
        if (i + 1 < n && s[i] == x && s[i + 1] == y) {
            if (j > 0) { /* s[j-1] is already the output: a z just made joins as (z, z) */
                pair_sub(L, s[j - 1], x, c);
                pair_add(L, s[j - 1], z, c, w);
            }
            if (i + 2 < n) {
                pair_sub(L, y, s[i + 2], c);
                pair_add(L, z, s[i + 2], c, w);
            }
            pair_sub(L, x, y, c);
            s[j++] = z;
            i += 2;
        } else {
            s[j++] = s[i++];
        }
    }
    L->len[w] = j;
}

static void learner_free(learner *L) {
    for (size_t p = 0; p < L->pairs.count; p++) free(L->pairs.pairs[p].words);
    free(L->pairs.pairs);
    free(L->pairs.slot);
    free(L->tokens.slot_id);
    free(L->tokens.slot_hash);
    free(L->queue.e);
    free(L->sym);
    free(L->start);
    free(L->len);
    free(L->weight);
    free(L->seen_at);
    free(L->grown);
}

static int add_token(learner *L, char *s) {
    int added;
    return tokens_intern(&L->tokens, s, &added);
}

int hs_vocab_learn(const hs_word_count *words, size_t n_words, const hs_vocab_learn_opts *opts,
                   hs_learned_vocab *out) {
    memset(out, 0, sizeof *out);
    if (n_words > INT32_MAX) HS_FATAL(NULL, "more than 2^31 distinct words");
    learner L;
    memset(&L, 0, sizeof L);
    tokens_rehash(&L.tokens, 4096);
    pairs_rehash(&L.pairs, 1 << 16);

    /* character counts, weighted by word counts */
    uint64_t *char_count;
    HS_ALLOC(char_count, N_CODE_POINTS);
    size_t total_chars = 0;
    for (size_t w = 0; w < n_words; w++) {
        const unsigned char *s = (const unsigned char *)words[w].word;
        for (size_t at = 0; at < words[w].len;) {
            uint32_t cp;
            at += (size_t)utf8_next(s + at, words[w].len - at, &cp);
            char_count[cp] += words[w].count;
            total_chars++;
        }
    }
    char_freq *chars = NULL;
    int n_chars = 0;
    for (uint32_t cp = 0; cp < N_CODE_POINTS; cp++)
        if (char_count[cp]) n_chars++;
    HS_ALLOC(chars, n_chars ? n_chars : 1);
    n_chars = 0;
    for (uint32_t cp = 0; cp < N_CODE_POINTS; cp++)
        if (char_count[cp]) chars[n_chars++] = (char_freq){cp, char_count[cp]};
    int kept = n_chars;
    if (opts->limit_alphabet > 0 && n_chars > opts->limit_alphabet) {
        qsort(chars, (size_t)n_chars, sizeof *chars, more_frequent_first);
        kept = opts->limit_alphabet;
    }
    qsort(chars, (size_t)kept, sizeof *chars, code_point_order);
    out->alphabet = kept;
    out->alphabet_seen = n_chars;

    /* which kept characters occur after a word's first position (they get a "##" form) */
    int32_t *first_id, *cont_id; /* by code point, -1: not in the vocabulary */
    HS_ALLOC(first_id, N_CODE_POINTS);
    HS_ALLOC(cont_id, N_CODE_POINTS);
    memset(first_id, 0xFF, N_CODE_POINTS * sizeof *first_id);
    memset(cont_id, 0xFF, N_CODE_POINTS * sizeof *cont_id);
    uint8_t *is_kept = (uint8_t *)char_count; /* reuse: counts are no longer needed */
    memset(is_kept, 0, N_CODE_POINTS);
    for (int k = 0; k < kept; k++) is_kept[chars[k].cp] = 1;
    uint8_t *continues;
    HS_ALLOC(continues, N_CODE_POINTS);
    int n_cont = 0;
    for (size_t w = 0; w < n_words; w++) {
        const unsigned char *s = (const unsigned char *)words[w].word;
        int first = 1;
        for (size_t at = 0; at < words[w].len; first = 0) {
            uint32_t cp;
            at += (size_t)utf8_next(s + at, words[w].len - at, &cp);
            if (!first && is_kept[cp] && !continues[cp]) {
                continues[cp] = 1;
                n_cont++;
            }
        }
    }
    out->base = HS_VOCAB_N_SPECIAL + kept + n_cont;
    if (out->base > opts->size) {
        free(char_count);
        free(chars);
        free(first_id);
        free(cont_id);
        free(continues);
        learner_free(&L);
        return -1;
    }

    /* ids: special tokens, alphabet, "##" characters (code point order for both) */
    for (int k = 0; k < HS_VOCAB_N_SPECIAL; k++) add_token(&L, HS_STRDUP(hs_vocab_special_tokens[k]));
    for (int k = 0; k < kept; k++) first_id[chars[k].cp] = add_token(&L, utf8_token(chars[k].cp, 0));
    for (int k = 0; k < kept; k++)
        if (continues[chars[k].cp]) cont_id[chars[k].cp] = add_token(&L, utf8_token(chars[k].cp, 1));

    /* the words as symbol runs, and the initial pair counts */
    HS_ALLOC(L.sym, total_chars ? total_chars : 1);
    HS_ALLOC(L.start, n_words ? n_words : 1);
    HS_ALLOC(L.len, n_words ? n_words : 1);
    HS_ALLOC(L.weight, n_words ? n_words : 1);
    HS_ALLOC(L.seen_at, n_words ? n_words : 1);
    size_t at_sym = 0;
    for (size_t w = 0; w < n_words; w++) {
        const unsigned char *s = (const unsigned char *)words[w].word;
        L.start[w] = at_sym;
        L.weight[w] = (int64_t)words[w].count;
        int first = 1;
        for (size_t at = 0; at < words[w].len; first = 0) {
            uint32_t cp;
            at += (size_t)utf8_next(s + at, words[w].len - at, &cp);
            if (!is_kept[cp]) continue; /* a character outside the alphabet drops out of the word */
            L.sym[at_sym++] = first ? first_id[cp] : cont_id[cp];
        }
        L.len[w] = (uint32_t)(at_sym - L.start[w]);
        const int32_t *sym = L.sym + L.start[w];
        for (uint32_t i = 0; i + 1 < L.len[w]; i++) pair_add(&L, sym[i], sym[i + 1], L.weight[w], (int32_t)w);
    }
    free(char_count);
    free(chars);
    free(first_id);
    free(cont_id);
    free(continues);
    for (size_t p = 0; p < L.pairs.count; p++) {
        const pair_info *pi = &L.pairs.pairs[p];
        if (pi->count > 0) heap_push(&L.queue, (heap_entry){pi->count, (int32_t)(pi->key >> 32), (int32_t)pi->key});
    }

    /* merges */
    uint64_t min_frequency = opts->min_frequency ? opts->min_frequency : 1;
    double last_report = hs_now();
    while (L.tokens.count < opts->size) {
        if (L.queue.n == 0) {
            out->pairs_ran_out = 1;
            break;
        }
        heap_entry top = heap_pop(&L.queue);
        int32_t p = pair_get(&L.pairs, top.x, top.y);
        int64_t now = L.pairs.pairs[p].count;
        if (now != top.count) { /* stale: the count fell since this entry was pushed */
            if (now > 0) heap_push(&L.queue, (heap_entry){now, top.x, top.y});
            continue;
        }
        if ((uint64_t)now < min_frequency) {
            out->pairs_ran_out = 1;
            break;
        }
        const char *left = L.tokens.str[top.x], *right = L.tokens.str[top.y];
        if (!strncmp(right, CONTINUATION, 2)) right += 2;
        size_t ll = strlen(left), rl = strlen(right);
        char *joined;
        HS_ALLOC(joined, ll + rl + 1);
        memcpy(joined, left, ll);
        memcpy(joined + ll, right, rl + 1);
        int32_t z = add_token(&L, joined);

        L.merge_no++;
        L.n_grown = 0;
        int32_t *in_words = L.pairs.pairs[p].words; /* (x, y) itself never grows during its merge */
        uint32_t n_in = L.pairs.pairs[p].n_words;
        for (uint32_t k = 0; k < n_in; k++) {
            int32_t w = in_words[k];
            if (L.seen_at[w] == L.merge_no) continue;
            L.seen_at[w] = L.merge_no;
            merge_in_word(&L, w, top.x, top.y, z);
        }
        pair_info *merged = &L.pairs.pairs[pair_get(&L.pairs, top.x, top.y)];
        if (merged->count != 0)
            HS_FATAL(NULL, "internal error: pair count %lld left after merging it", (long long)merged->count);
        merged->n_words = 0;
        for (size_t k = 0; k < L.n_grown; k++) {
            const pair_info *pi = &L.pairs.pairs[L.grown[k]];
            if (pi->count > 0) heap_push(&L.queue, (heap_entry){pi->count, (int32_t)(pi->key >> 32), (int32_t)pi->key});
        }
        out->merges++;
        out->last_count = (uint64_t)now;
        if (opts->progress && (out->merges & 63) == 0 && hs_now() - last_report > 1.0) {
            last_report = hs_now();
            opts->progress(L.tokens.count, opts->size, L.tokens.str[z], (uint64_t)now, opts->ctx);
        }
    }

    out->tokens = L.tokens.str;
    out->count = L.tokens.count;
    L.tokens.str = NULL;
    learner_free(&L);
    return 0;
}

void hs_learned_vocab_free(hs_learned_vocab *v) {
    if (!v) return;
    for (int i = 0; i < v->count; i++) free(v->tokens[i]);
    free(v->tokens);
    memset(v, 0, sizeof *v);
}
