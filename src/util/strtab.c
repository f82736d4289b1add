/* The string table (see strtab.h). */
#include "util/strtab.h"

#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/hash.h"

typedef struct entry {
    uint64_t hash, count;
    size_t offset; /* into the arena */
    uint32_t len;
} entry;

struct hs_strtab {
    int64_t *slots; /* string number + 1; 0 = empty */
    size_t capacity;
    entry *entries; /* by number */
    int64_t n, cap_entries;
    char *arena;
    size_t arena_used, arena_cap;
};

hs_strtab *hs_strtab_new(void) {
    hs_strtab *t;
    HS_ALLOC(t, 1);
    t->capacity = 1024;
    HS_ALLOC(t->slots, t->capacity);
    t->cap_entries = 512;
    HS_ALLOC(t->entries, t->cap_entries);
    t->arena_cap = 1 << 16;
    HS_ALLOC(t->arena, t->arena_cap);
    return t;
}

void hs_strtab_free(hs_strtab *t) {
    if (!t) return;
    free(t->slots);
    free(t->entries);
    free(t->arena);
    free(t);
}

static void grow_slots(hs_strtab *t) {
    size_t cap = t->capacity * 2, mask = cap - 1;
    int64_t *fresh;
    HS_ALLOC(fresh, cap);
    for (int64_t k = 0; k < t->n; k++) {
        size_t j = (size_t)t->entries[k].hash & mask;
        while (fresh[j]) j = (j + 1) & mask;
        fresh[j] = k + 1;
    }
    free(t->slots);
    t->slots = fresh;
    t->capacity = cap;
}

int64_t hs_strtab_find(hs_strtab *t, const char *s, size_t len, int add) {
    if (len > UINT32_MAX) HS_FATAL(NULL, "a string of %zu bytes", len);
    const uint64_t h = hs_string_hash(s, len);
    size_t mask = t->capacity - 1, i = (size_t)h & mask;
    for (;; i = (i + 1) & mask) {
        int64_t k = t->slots[i] - 1;
        if (k < 0) break;
        const entry *e = &t->entries[k];
        if (e->hash == h && e->len == len && !memcmp(t->arena + e->offset, s, len)) return k;
    }
    if (!add) return -1;
    if (t->n == t->cap_entries) {
        t->cap_entries *= 2;
        HS_REALLOC(t->entries, t->cap_entries);
    }
    if (t->arena_used + len > t->arena_cap) {
        while (t->arena_used + len > t->arena_cap) t->arena_cap *= 2;
        HS_REALLOC(t->arena, t->arena_cap);
    }
    memcpy(t->arena + t->arena_used, s, len);
    t->entries[t->n] = (entry){h, 0, t->arena_used, (uint32_t)len};
    t->arena_used += len;
    t->slots[i] = t->n + 1;
    int64_t k = t->n++;
    if ((size_t)t->n * 2 > t->capacity) grow_slots(t);
    return k;
}

int64_t hs_strtab_size(const hs_strtab *t) { return t->n; }

const char *hs_strtab_str(const hs_strtab *t, int64_t i, size_t *len) {
    *len = t->entries[i].len;
    return t->arena + t->entries[i].offset;
}

uint64_t hs_strtab_count(const hs_strtab *t, int64_t i) { return t->entries[i].count; }

void hs_strtab_add_count(hs_strtab *t, int64_t i, uint64_t count) { t->entries[i].count += count; }
