/* The word-level vocabulary of `hetseq prep lm` (see lm_vocab.h for the rules and their NVIDIA origin). */
#include "prep/lm_vocab.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "util/check.h"
#include "util/hash.h"

/* ---- lines and words ------------------------------------------------------------------------------------ */

int hs_lm_is_space(uint32_t cp) {
    /* Python 3's str.isspace(): bidirectional class WS, B or S, or category Zs */
    if (cp <= 0x20) return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
    if (cp < 0x85) return 0;
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* The code point at s[i] (valid UTF-8) and its length in *n. */
static uint32_t decode(const unsigned char *s, size_t i, size_t *n) {
    unsigned char c = s[i];
    if (c < 0x80) return *n = 1, c;
    if (c < 0xE0) return *n = 2, ((uint32_t)(c & 0x1F) << 6) | (s[i + 1] & 0x3F);
    if (c < 0xF0) return *n = 3, ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
    return *n = 4, ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) |
                   ((uint32_t)(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
}

size_t hs_lm_split_words(const char *line, size_t len, hs_lm_word_fn emit, void *ctx) {
    const unsigned char *s = (const unsigned char *)line;
    size_t words = 0, start = 0, i = 0;
    int in_word = 0;
    while (i < len) {
        size_t n = 1;
        /* ASCII first: every non-ASCII whitespace is 2 or 3 bytes and needs decoding */
        int space = s[i] < 0x80 ? hs_lm_is_space(s[i]) : hs_lm_is_space(decode(s, i, &n));
        if (space && in_word) {
            emit(line + start, i - start, ctx);
            words++;
            in_word = 0;
        } else if (!space && !in_word) {
            start = i;
            in_word = 1;
        }
        i += n;
    }
    if (in_word) {
        emit(line + start, len - start, ctx);
        words++;
    }
    return words;
}

size_t hs_lm_next_line(const char *text, size_t n, size_t at, size_t *line_len) {
    size_t i = at;
    while (i < n && text[i] != '\n' && text[i] != '\r') i++;
    *line_len = i - at;
    if (i == n) return n;
    if (text[i] == '\r' && i + 1 < n && text[i + 1] == '\n') return i + 2;
    return i + 1;
}

size_t hs_lm_lower(const char *word, size_t len, char **buf, size_t *cap) {
    /* at most 4 bytes per code point out, and U+0130 (2 bytes) becomes 3 bytes */
    size_t need = 2 * len + 4;
    if (need > *cap) {
        *cap = need;
        *buf = hs_xrealloc(*buf, *cap, __FILE__, __LINE__);
    }
    const unsigned char *s = (const unsigned char *)word;
    unsigned char *out = (unsigned char *)*buf;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t n;
        uint32_t cp = decode(s, i, &n);
        i += n;
        if (cp == 0x130) { /* Python: LATIN CAPITAL LETTER I WITH DOT ABOVE -> "i" + COMBINING DOT ABOVE */
            out[o++] = 'i';
            o += (size_t)utf8proc_encode_char(0x307, out + o);
            continue;
        }
        uint32_t lo = cp < 0x80 ? (cp >= 'A' && cp <= 'Z' ? cp + 32 : cp) : (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp);
        o += (size_t)utf8proc_encode_char((utf8proc_int32_t)lo, out + o);
    }
    return o;
}

/* ---- the word table ------------------------------------------------------------------------------------- */

/* Open addressing with linear probing over a power-of-two slot array at most half full; slots hold the
 * word's number, and the words' bytes live in one arena addressed by offset (growing it moves no slot). */
typedef struct entry {
    uint64_t hash, count;
    size_t offset;
    uint32_t len;
} entry;

struct hs_lm_words {
    int64_t *slots; /* word number + 1; 0 = empty */
    size_t capacity;
    entry *entries; /* by number */
    int64_t n, cap_entries;
    char *arena;
    size_t arena_used, arena_cap;
};

hs_lm_words *hs_lm_words_new(void) {
    hs_lm_words *w;
    HS_ALLOC(w, 1);
    w->capacity = 1024;
    HS_ALLOC(w->slots, w->capacity);
    w->cap_entries = 512;
    HS_ALLOC(w->entries, w->cap_entries);
    w->arena_cap = 1 << 16;
    HS_ALLOC(w->arena, w->arena_cap);
    return w;
}

void hs_lm_words_free(hs_lm_words *w) {
    if (!w) return;
    free(w->slots);
    free(w->entries);
    free(w->arena);
    free(w);
}

static void grow_slots(hs_lm_words *w) {
    size_t cap = w->capacity * 2, mask = cap - 1;
    int64_t *fresh;
    HS_ALLOC(fresh, cap);
    for (int64_t k = 0; k < w->n; k++) {
        size_t j = (size_t)w->entries[k].hash & mask;
        while (fresh[j]) j = (j + 1) & mask;
        fresh[j] = k + 1;
    }
    free(w->slots);
    w->slots = fresh;
    w->capacity = cap;
}

int64_t hs_lm_words_find(hs_lm_words *w, const char *word, size_t len, int add) {
    if (len > UINT32_MAX) HS_FATAL(NULL, "a word of %zu bytes", len);
    uint64_t h = hs_string_hash(word, len);
    size_t mask = w->capacity - 1, i = (size_t)h & mask;
    for (;; i = (i + 1) & mask) {
        int64_t k = w->slots[i] - 1;
        if (k < 0) break;
        const entry *e = &w->entries[k];
        if (e->hash == h && e->len == len && !memcmp(w->arena + e->offset, word, len)) return k;
    }
    if (!add) return -1;
    if (w->n == w->cap_entries) {
        w->cap_entries *= 2;
        HS_REALLOC(w->entries, w->cap_entries);
    }
    if (w->arena_used + len > w->arena_cap) {
        while (w->arena_used + len > w->arena_cap) w->arena_cap *= 2;
        HS_REALLOC(w->arena, w->arena_cap);
    }
    memcpy(w->arena + w->arena_used, word, len);
    w->entries[w->n] = (entry){h, 0, w->arena_used, (uint32_t)len};
    w->arena_used += len;
    w->slots[i] = w->n + 1;
    int64_t k = w->n++;
    if ((size_t)w->n * 2 > w->capacity) grow_slots(w);
    return k;
}

void hs_lm_words_add_count(hs_lm_words *w, int64_t number, uint64_t count) { w->entries[number].count += count; }

const char *hs_lm_words_word(const hs_lm_words *w, int64_t i, size_t *len) {
    *len = w->entries[i].len;
    return w->arena + w->entries[i].offset;
}

/* ---- the vocabulary ------------------------------------------------------------------------------------- */

/* Counter.most_common: descending count; Python's sort is stable over the counter's insertion order, so
 * equal counts keep the order of first occurrence (the word number). */
static const hs_lm_words *g_sort_words;
static int by_count_then_first(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    uint64_t cx = g_sort_words->entries[x].count, cy = g_sort_words->entries[y].count;
    if (cx != cy) return cx > cy ? -1 : 1;
    return x < y ? -1 : x > y;
}

static char *word_dup(const char *s, size_t len) {
    char *w;
    HS_ALLOC(w, len + 1);
    memcpy(w, s, len);
    return w;
}

int hs_lm_vocab_build(const hs_lm_words *train, int64_t min_freq, int64_t max_size, hs_lm_vocab *v) {
    memset(v, 0, sizeof *v);
    const int64_t n = train->n;
    int64_t *order;
    HS_ALLOC(order, n > 0 ? n : 1);
    for (int64_t i = 0; i < n; i++) order[i] = i;
    g_sort_words = train;
    qsort(order, (size_t)n, sizeof *order, by_count_then_first);
    g_sort_words = NULL;

    v->n_counted = n;
    HS_ALLOC(v->id_of, n > 0 ? n : 1);
    for (int64_t i = 0; i < n; i++) v->id_of[i] = -1;
    int64_t take = max_size >= 0 && max_size < n ? max_size : n;
    if (take + 1 > INT32_MAX) {
        free(order);
        return -1;
    }
    HS_ALLOC(v->words, take + 2); /* + <eos>, and room for a <unk> special */
    v->words[0] = HS_STRDUP(HS_LM_EOS);
    v->size = 1;
    v->eos_id = 0;
    v->unk_id = -1;
    int64_t eos_number = hs_lm_words_find((hs_lm_words *)train, HS_LM_EOS, strlen(HS_LM_EOS), 0);
    for (int64_t k = 0; k < take; k++) {
        int64_t i = order[k];
        if ((int64_t)train->entries[i].count < min_freq) break;
        if (i == eos_number) { /* add_symbol: already there as the special */
            v->id_of[i] = v->eos_id;
            continue;
        }
        size_t len;
        const char *s = hs_lm_words_word(train, i, &len);
        v->id_of[i] = v->size;
        if (len == strlen(HS_LM_UNK) && !memcmp(s, HS_LM_UNK, len)) v->unk_id = v->size;
        v->words[v->size++] = word_dup(s, len);
    }
    /* a literal <eos> cut by min_freq / max_size is still the special */
    if (eos_number >= 0) v->id_of[eos_number] = v->eos_id;
    free(order);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) kept += v->id_of[i] >= 0;
    v->n_cut = n - kept;
    return 0;
}

void hs_lm_vocab_add_unk(hs_lm_vocab *v) {
    if (v->unk_id >= 0) HS_FATAL(NULL, "the vocabulary already holds %s", HS_LM_UNK);
    /* words has room for one more (allocated take + 2) */
    memmove(v->words + 2, v->words + 1, (size_t)(v->size - 1) * sizeof *v->words);
    v->words[1] = HS_STRDUP(HS_LM_UNK);
    v->size++;
    v->unk_id = 1;
    for (int64_t i = 0; i < v->n_counted; i++)
        if (v->id_of[i] >= 1) v->id_of[i]++;
}

void hs_lm_vocab_free(hs_lm_vocab *v) {
    if (!v->words) return;
    for (int32_t i = 0; i < v->size; i++) free(v->words[i]);
    free(v->words);
    free(v->id_of);
    memset(v, 0, sizeof *v);
}
