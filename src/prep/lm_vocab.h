/* The word-level vocabulary of `hetseq prep lm` (docs/data-formats.md, "Language-model data"), built as
 * NVIDIA's Transformer-XL utils/vocabulary.py Vocab does for WikiText-103:
 *   - a line is stripped and split on whitespace exactly as Python's str.split() (the characters for
 *     which str.isspace() is true), optionally lower-cased as str.lower();
 *   - words are counted over the TRAIN split only;
 *   - the vocabulary is the specials (`<eos>`) followed by the counted words by descending count, ties
 *     in order of first occurrence (collections.Counter.most_common), taking at most max_size of them
 *     and stopping at the first one counted fewer than min_freq times (a word already present, e.g. a
 *     literal `<eos>` in the text, takes a place among the max_size but is not added twice). */
#ifndef HS_PREP_LM_VOCAB_H
#define HS_PREP_LM_VOCAB_H

#include <stddef.h>
#include <stdint.h>

/* ---- lines and words ------------------------------------------------------------------------------------ */

/* 1 if the code point is whitespace for Python's str.isspace() / str.split(). */
int hs_lm_is_space(uint32_t cp);

/* Calls emit for every word of line[0..len) (valid UTF-8, no line end inside), split as Python's
 * line.strip().split(). Returns the number of words. */
typedef void (*hs_lm_word_fn)(const char *word, size_t len, void *ctx);
size_t hs_lm_split_words(const char *line, size_t len, hs_lm_word_fn emit, void *ctx);

/* The next line of text[at..n) as Python's text-mode file iteration sees it (universal newlines: a line
 * ends at "\n", "\r\n" or a lone "\r"): *line_len bytes from `at`, without the line end. Returns where
 * the following line starts; `at == n` means there is no line left (an empty file has no lines, and a
 * final line end starts no empty line). */
size_t hs_lm_next_line(const char *text, size_t n, size_t at, size_t *line_len);

/* Python's str.lower() of a word into *buf (grown as needed; *cap its size): Unicode simple lower-case
 * mappings (utf8proc), U+0130 to "i" + U+0307 as Python does. One difference: Python writes a word-final
 * capital sigma as final sigma (U+03C2); here it is always U+03C3. Returns the length written. */
size_t hs_lm_lower(const char *word, size_t len, char **buf, size_t *cap);

/* ---- the word table ------------------------------------------------------------------------------------- */

/* Words numbered in order of first insertion, with a count each. */
typedef struct hs_lm_words hs_lm_words;

hs_lm_words *hs_lm_words_new(void);
void hs_lm_words_free(hs_lm_words *w);
/* The number of word[0..len); a new word gets the next number (count 0) when add != 0, else -1. */
int64_t hs_lm_words_find(hs_lm_words *w, const char *word, size_t len, int add);
void hs_lm_words_add_count(hs_lm_words *w, int64_t number, uint64_t count);
/* The word with number i (not NUL-terminated; *len bytes). */
const char *hs_lm_words_word(const hs_lm_words *w, int64_t i, size_t *len);

/* ---- the vocabulary ------------------------------------------------------------------------------------- */

#define HS_LM_EOS "<eos>"
#define HS_LM_UNK "<unk>"

typedef struct hs_lm_vocab {
    int32_t size;
    char **words;        /* [size] NUL-terminated; id = index */
    int32_t eos_id;      /* 0: the first special */
    int32_t unk_id;      /* the id of "<unk>" if it is in the vocabulary, else -1 */
    int64_t n_counted;   /* distinct words counted in the train split */
    int32_t *id_of;      /* [n_counted] the id of counted word number i, or -1 (cut by min_freq / max_size) */
    int64_t n_cut;       /* counted words left out of the vocabulary */
} hs_lm_vocab;

/* Builds the vocabulary from the train counts. min_freq >= 0; max_size < 0: unlimited. Returns 0, or -1
 * when it would exceed INT32_MAX ids. */
int hs_lm_vocab_build(const hs_lm_words *train, int64_t min_freq, int64_t max_size, hs_lm_vocab *v);

/* Adds "<unk>" as the second special (id 1, right after "<eos>"), moving every other word up by one:
 * used when some token has no id and the vocabulary holds no "<unk>" word. id_of is updated. */
void hs_lm_vocab_add_unk(hs_lm_vocab *v);

void hs_lm_vocab_free(hs_lm_vocab *v);

#endif
