/* Word counts for the vocabulary learner: a hash table from a word (bytes) to how often it occurs, that
 * can be packed into bytes and merged (ranks count disjoint files, rank 0 adds their tables up), and
 * listed in byte order (so what is learnt from it does not depend on insertion or hash order). */
#ifndef HS_PREP_WORD_COUNTS_H
#define HS_PREP_WORD_COUNTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct hs_word_counts hs_word_counts;

typedef struct hs_word_count {
    const char *word; /* not NUL-terminated; owned by the table */
    uint32_t len;
    uint64_t count;
} hs_word_count;

hs_word_counts *hs_word_counts_new(void);
void hs_word_counts_free(hs_word_counts *wc);
/* Adds `count` occurrences of word[0..len). */
void hs_word_counts_add(hs_word_counts *wc, const char *word, size_t len, uint64_t count);
/* Distinct words, and all occurrences. */
size_t hs_word_counts_distinct(const hs_word_counts *wc);
uint64_t hs_word_counts_total(const hs_word_counts *wc);

/* Packs the table as records [u32 len][len bytes][u64 count] (host byte order: ranks of one job).
 * *bytes is the buffer's length; free(*buf). */
void hs_word_counts_pack(const hs_word_counts *wc, char **buf, size_t *bytes);
/* Adds a packed table. Returns 0, or -1 (adding nothing) if buf is not a whole number of records. */
int hs_word_counts_add_packed(hs_word_counts *wc, const char *buf, size_t bytes);

/* The entries sorted by their bytes (memcmp, then shorter first); valid until the table changes.
 * free() the array, not the words. */
hs_word_count *hs_word_counts_sorted(const hs_word_counts *wc, size_t *n);

#endif
