/* Learning a WordPiece vocabulary from word counts, as the WordPiece trainer of Hugging Face's tokenizers
 * (BertWordPieceTokenizer.train) does: a BPE trainer with "##" continuation pieces.
 *   ids 0..4: [PAD] [UNK] [CLS] [SEP] [MASK];
 *   then the alphabet: every character of the words (at most limit_alphabet, the most frequent), one
 *   token each, in code point order;
 *   then "##c" for every kept character c that occurs after the first position of a word, in code
 *   point order;
 *   then merges: every word is a sequence of tokens (first character, then "##" characters); the
 *   adjacent pair (x, y) with the largest count (summed over the words it occurs in, times each word's
 *   count) becomes the token x + y-without-"##" in every word, and so on, until the vocabulary has
 *   `size` tokens or no pair occurs at least min_frequency times. Ties go to the pair of smaller ids
 *   (x first, then y), which makes the result a function of the word counts alone.
 * Pair counts are kept exactly as merges change them (each pair knows the words it occurs in), and a
 * max-heap with lazily refreshed entries picks the next pair. */
#ifndef HS_PREP_VOCAB_LEARN_H
#define HS_PREP_VOCAB_LEARN_H

#include <stdint.h>

#include "prep/word_counts.h"

#define HS_VOCAB_N_SPECIAL 5
extern const char *const hs_vocab_special_tokens[HS_VOCAB_N_SPECIAL];

typedef struct hs_vocab_learn_opts {
    int size;               /* tokens wanted, the special tokens included */
    uint64_t min_frequency; /* a pair occurring fewer times is never merged (>= 1) */
    int limit_alphabet;     /* keep at most this many characters (the most frequent; ties: the lower
                               code point); <= 0 keeps all. Dropped characters vanish from the words. */
    /* Called about once a second while merging (may be NULL): tokens so far, the newest token and how
     * often its pair occurred. */
    void (*progress)(int tokens, int size, const char *newest, uint64_t count, void *ctx);
    void *ctx;
} hs_vocab_learn_opts;

typedef struct hs_learned_vocab {
    char **tokens; /* [count], id order, NUL-terminated */
    int count;
    int alphabet;             /* characters kept */
    int alphabet_seen;        /* distinct characters in the words */
    int base;                 /* special tokens + alphabet + "##" characters: the smallest vocabulary */
    int merges;               /* merges done (a merge can re-make a token that exists) */
    uint64_t last_count;      /* count of the last merged pair (0 if none) */
    int pairs_ran_out;        /* 1 if merging stopped before `size` (no pair left >= min_frequency) */
} hs_learned_vocab;

/* Learns from words[0..n) (any order gives the same result for the same multiset of words, since ids
 * come from code points and counts only). Returns 0, or -1 when size < base (nothing learnt; alphabet,
 * alphabet_seen and base are set so the caller can say why). */
int hs_vocab_learn(const hs_word_count *words, size_t n, const hs_vocab_learn_opts *opts, hs_learned_vocab *out);
void hs_learned_vocab_free(hs_learned_vocab *v);

#endif
