/* A table of distinct byte strings (not NUL-terminated), numbered 0, 1, ... in the order they were
 * first added, each with a count: the word tables of `hetseq prep` (the Transformer-XL vocabulary,
 * src/prep/lm_vocab.c; the WordPiece learner's word counts, src/prep/word_counts.c).
 *
 * Open addressing with linear probing over a power-of-two slot array at most half full; a slot holds a
 * string's number, and the strings' bytes live in one arena addressed by offset (growing it moves no
 * slot). Keys hash with hs_string_hash (util/hash.h). */
#ifndef HS_UTIL_STRTAB_H
#define HS_UTIL_STRTAB_H

#include <stddef.h>
#include <stdint.h>

typedef struct hs_strtab hs_strtab;

hs_strtab *hs_strtab_new(void);
void hs_strtab_free(hs_strtab *t);
/* The number of s[0..len); a new string gets the next number (count 0) when add != 0, else -1. */
int64_t hs_strtab_find(hs_strtab *t, const char *s, size_t len, int add);
/* Strings in the table (their numbers are 0 .. size-1). */
int64_t hs_strtab_size(const hs_strtab *t);
/* String number i (not NUL-terminated; *len bytes), valid until the next string is added. */
const char *hs_strtab_str(const hs_strtab *t, int64_t i, size_t *len);
uint64_t hs_strtab_count(const hs_strtab *t, int64_t i);
void hs_strtab_add_count(hs_strtab *t, int64_t i, uint64_t count);

#endif
