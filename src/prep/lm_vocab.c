/* The word-level vocabulary of `hetseq prep lm` (see lm_vocab.h for the rules and their NVIDIA origin). */
#include "prep/lm_vocab.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "util/check.h"

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

/* ---- the vocabulary ------------------------------------------------------------------------------------- */

/* Counter.most_common: descending count; Python's sort is stable over the counter's insertion order, so
 * equal counts keep the order of first occurrence (the word number). */
static const hs_strtab *g_sort_words;
static int by_count_then_first(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    uint64_t cx = hs_strtab_count(g_sort_words, x), cy = hs_strtab_count(g_sort_words, y);
    if (cx != cy) return cx > cy ? -1 : 1;
    return x < y ? -1 : x > y;
}

static char *word_dup(const char *s, size_t len) {
    char *w;
    HS_ALLOC(w, len + 1);
    memcpy(w, s, len);
    return w;
}

int hs_lm_vocab_build(const hs_strtab *train, int64_t min_freq, int64_t max_size, hs_lm_vocab *v) {
    memset(v, 0, sizeof *v);
    const int64_t n = hs_strtab_size(train);
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
    int64_t eos_number = hs_strtab_find((hs_strtab *)train, HS_LM_EOS, strlen(HS_LM_EOS), 0);
    for (int64_t k = 0; k < take; k++) {
        int64_t i = order[k];
        if ((int64_t)hs_strtab_count(train, i) < min_freq) break;
        if (i == eos_number) { /* add_symbol: already there as the special */
            v->id_of[i] = v->eos_id;
            continue;
        }
        size_t len;
        const char *s = hs_strtab_str(train, i, &len);
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
