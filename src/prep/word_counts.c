/* Word counts (see word_counts.h) on the project's string table (util/strtab.h). */
#include "prep/word_counts.h"

#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/strtab.h"

struct hs_word_counts {
    hs_strtab *words; /* each word's count is its entry's */
    uint64_t total;
};

hs_word_counts *hs_word_counts_new(void) {
    hs_word_counts *wc;
    HS_ALLOC(wc, 1);
    wc->words = hs_strtab_new();
    return wc;
}

void hs_word_counts_free(hs_word_counts *wc) {
    if (!wc) return;
    hs_strtab_free(wc->words);
    free(wc);
}

void hs_word_counts_add(hs_word_counts *wc, const char *word, size_t len, uint64_t count) {
    wc->total += count;
    hs_strtab_add_count(wc->words, hs_strtab_find(wc->words, word, len, 1), count);
}

size_t hs_word_counts_distinct(const hs_word_counts *wc) { return (size_t)hs_strtab_size(wc->words); }
uint64_t hs_word_counts_total(const hs_word_counts *wc) { return wc->total; }

void hs_word_counts_pack(const hs_word_counts *wc, char **buf, size_t *bytes) {
    const int64_t n_words = hs_strtab_size(wc->words);
    size_t n = (size_t)n_words * (sizeof(uint32_t) + sizeof(uint64_t));
    for (int64_t i = 0; i < n_words; i++) {
        size_t len;
        hs_strtab_str(wc->words, i, &len);
        n += len;
    }
    char *p;
    HS_ALLOC(p, n ? n : 1);
    *buf = p;
    *bytes = n;
    for (int64_t i = 0; i < n_words; i++) {
        size_t len;
        const char *w = hs_strtab_str(wc->words, i, &len);
        const uint32_t len32 = (uint32_t)len;
        const uint64_t count = hs_strtab_count(wc->words, i);
        memcpy(p, &len32, sizeof len32);
        p += sizeof len32;
        memcpy(p, w, len);
        p += len;
        memcpy(p, &count, sizeof count);
        p += sizeof count;
    }
}

/* Walks the records; adds them only when `add` (a first pass checks the whole buffer). */
static int walk_packed(hs_word_counts *wc, const char *buf, size_t bytes, int add) {
    size_t at = 0;
    while (at < bytes) {
        uint32_t len;
        uint64_t count;
        if (bytes - at < sizeof len) return -1;
        memcpy(&len, buf + at, sizeof len);
        at += sizeof len;
        if (bytes - at < (size_t)len + sizeof count) return -1;
        memcpy(&count, buf + at + len, sizeof count);
        if (add) hs_word_counts_add(wc, buf + at, len, count);
        at += (size_t)len + sizeof count;
    }
    return 0;
}

int hs_word_counts_add_packed(hs_word_counts *wc, const char *buf, size_t bytes) {
    if (walk_packed(wc, buf, bytes, 0) != 0) return -1;
    return walk_packed(wc, buf, bytes, 1);
}

static int cmp_entries(const void *pa, const void *pb) {
    const hs_word_count *a = pa, *b = pb;
    uint32_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->word, b->word, n);
    if (c) return c;
    return (a->len > b->len) - (a->len < b->len);
}

hs_word_count *hs_word_counts_sorted(const hs_word_counts *wc, size_t *n) {
    const int64_t n_words = hs_strtab_size(wc->words);
    hs_word_count *out;
    HS_ALLOC(out, n_words ? n_words : 1);
    for (int64_t i = 0; i < n_words; i++) {
        size_t len;
        const char *w = hs_strtab_str(wc->words, i, &len);
        out[i] = (hs_word_count){.word = w, .len = (uint32_t)len, .count = hs_strtab_count(wc->words, i)};
    }
    qsort(out, (size_t)n_words, sizeof *out, cmp_entries);
    *n = (size_t)n_words;
    return out;
}
