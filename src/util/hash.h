/* FNV-1a, the one byte hash of the project (the vocabulary and word-count tables of `hetseq prep`, the
 * replica check of the trainer): h = (h XOR byte) * prime, byte by byte. Words are short, so a byte loop
 * is as fast as anything wider. */
#ifndef HS_UTIL_HASH_H
#define HS_UTIL_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HS_FNV32_OFFSET 2166136261u
#define HS_FNV32_PRIME 16777619u
#define HS_FNV64_OFFSET 14695981039346656037ull
#define HS_FNV64_PRIME 1099511628211ull
/* The start value of the string tables of src/prep/ (FNV's 64-bit offset basis without its last digit,
 * as those tables have always used it: any odd-looking start hashes as well, and keeping it keeps their
 * slot order, so prep's outputs stay the same). */
#define HS_STRING_HASH_START 1469598103934665603ull

/* h continued over n bytes (start with HS_FNV32_OFFSET, or a state to extend a prefix). */
static inline uint32_t hs_fnv1a32(uint32_t h, const void *data, size_t n) {
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * HS_FNV32_PRIME;
    return h;
}

static inline uint64_t hs_fnv1a64(uint64_t h, const void *data, size_t n) {
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * HS_FNV64_PRIME;
    return h;
}

/* The hash of a string table's key: FNV-1a 64 with the high bits folded into the low bits a
 * power-of-two table's mask keeps. */
static inline uint64_t hs_string_hash(const char *s, size_t n) {
    const uint64_t h = hs_fnv1a64(HS_STRING_HASH_START, s, n);
    return h ^ (h >> 29);
}

#endif
