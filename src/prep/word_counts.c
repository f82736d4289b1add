/* Open addressing with linear probing over a power-of-two slot array, at most half full. The words'
 * bytes live in one growing arena and slots hold offsets into it, so growing the arena moves no slot. */
#include "prep/word_counts.h"

#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/hash.h"

typedef struct slot {
    uint64_t hash; /* 0 = empty (a real hash of 0 is stored as 1) */
    uint64_t count;
    size_t offset; /* into the arena */
    uint32_t len;
} slot;

struct hs_word_counts {
    slot *slots;
    size_t capacity, used; /* slots; capacity is a power of two */
    char *arena;
    size_t arena_used, arena_cap;
    uint64_t total;
};

/* 0 marks an empty slot, so no key hashes to 0 */
static uint64_t hash_bytes(const char *s, size_t n) {
    const uint64_t h = hs_string_hash(s, n);
    return h ? h : 1;
}

hs_word_counts *hs_word_counts_new(void) {
    hs_word_counts *wc;
    HS_ALLOC(wc, 1);
    wc->capacity = 1024;
    HS_ALLOC(wc->slots, wc->capacity);
    wc->arena_cap = 1 << 16;
    HS_ALLOC(wc->arena, wc->arena_cap);
    return wc;
}

void hs_word_counts_free(hs_word_counts *wc) {
    if (!wc) return;
    free(wc->slots);
    free(wc->arena);
    free(wc);
}

static void grow_slots(hs_word_counts *wc) {
    size_t cap = wc->capacity * 2, mask = cap - 1;
    slot *fresh;
    HS_ALLOC(fresh, cap);
    for (size_t i = 0; i < wc->capacity; i++) {
        const slot *s = &wc->slots[i];
        if (!s->hash) continue;
        size_t j = (size_t)s->hash & mask;
        while (fresh[j].hash) j = (j + 1) & mask;
        fresh[j] = *s;
    }
    free(wc->slots);
    wc->slots = fresh;
    wc->capacity = cap;
}

void hs_word_counts_add(hs_word_counts *wc, const char *word, size_t len, uint64_t count) {
    if (len > UINT32_MAX) HS_FATAL(NULL, "a word of %zu bytes", len);
    uint64_t h = hash_bytes(word, len);
    size_t mask = wc->capacity - 1, i = (size_t)h & mask;
    wc->total += count;
    for (;; i = (i + 1) & mask) {
        slot *s = &wc->slots[i];
        if (!s->hash) break;
        if (s->hash == h && s->len == len && !memcmp(wc->arena + s->offset, word, len)) {
            s->count += count;
            return;
        }
    }
    if (wc->arena_used + len > wc->arena_cap) {
        while (wc->arena_used + len > wc->arena_cap) wc->arena_cap *= 2;
        HS_REALLOC(wc->arena, wc->arena_cap);
    }
    memcpy(wc->arena + wc->arena_used, word, len);
    wc->slots[i] = (slot){.hash = h, .count = count, .offset = wc->arena_used, .len = (uint32_t)len};
    wc->arena_used += len;
    if (++wc->used * 2 > wc->capacity) grow_slots(wc);
}

size_t hs_word_counts_distinct(const hs_word_counts *wc) { return wc->used; }
uint64_t hs_word_counts_total(const hs_word_counts *wc) { return wc->total; }

void hs_word_counts_pack(const hs_word_counts *wc, char **buf, size_t *bytes) {
    size_t n = wc->used * (sizeof(uint32_t) + sizeof(uint64_t)) + wc->arena_used;
    char *p;
    HS_ALLOC(p, n ? n : 1);
    *buf = p;
    *bytes = n;
    for (size_t i = 0; i < wc->capacity; i++) {
        const slot *s = &wc->slots[i];
        if (!s->hash) continue;
        memcpy(p, &s->len, sizeof s->len);
        p += sizeof s->len;
        memcpy(p, wc->arena + s->offset, s->len);
        p += s->len;
        memcpy(p, &s->count, sizeof s->count);
        p += sizeof s->count;
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
    hs_word_count *out;
    HS_ALLOC(out, wc->used ? wc->used : 1);
    size_t k = 0;
    for (size_t i = 0; i < wc->capacity; i++) {
        const slot *s = &wc->slots[i];
        if (s->hash) out[k++] = (hs_word_count){.word = wc->arena + s->offset, .len = s->len, .count = s->count};
    }
    qsort(out, k, sizeof *out, cmp_entries);
    *n = k;
    return out;
}
