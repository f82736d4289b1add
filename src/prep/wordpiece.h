/* BERT tokenization, identical to Google's / Hugging Face's BertTokenizer: a basic tokenizer (text
 * cleanup, CJK characters as words, whitespace split, optional lower-casing with NFD accent stripping,
 * punctuation split) followed by greedy longest-match-first WordPiece over a vocabulary. Unicode
 * properties come from utf8proc. */
#ifndef HS_PREP_WORDPIECE_H
#define HS_PREP_WORDPIECE_H

#include <stddef.h>
#include <stdint.h>

/* ---- vocabulary: one token per line, id = line number (0-based) ---------------------------------- */
typedef struct hs_vocab hs_vocab;
/* Loads a vocab.txt. A missing/unreadable file, an empty file or a vocabulary without [PAD] [UNK] [CLS]
 * [SEP] [MASK] is a user error naming the file (hs_die). */
hs_vocab *hs_vocab_load(const char *path);
/* Builds a vocabulary from tokens in id order (for the vocabulary learner and tests). */
hs_vocab *hs_vocab_from_tokens(const char *const *tokens, int count);
int hs_vocab_size(const hs_vocab *v);
/* id of a token (exact bytes), or -1. */
int hs_vocab_id(const hs_vocab *v, const char *token, size_t len);
const char *hs_vocab_token(const hs_vocab *v, int id);
/* ids of the special tokens */
typedef struct hs_special_ids {
    int pad, unk, cls, sep, mask;
} hs_special_ids;
hs_special_ids hs_vocab_special(const hs_vocab *v);
/* Writes the vocabulary one token per line (temp name + rename). */
void hs_vocab_save(const hs_vocab *v, const char *path);
void hs_vocab_free(hs_vocab *v);

/* ---- basic tokenizer --------------------------------------------------------------------------------- */
/* Splits UTF-8 text into words as BertTokenizer's BasicTokenizer (tokenize_chinese_chars = True):
 * drops NUL, U+FFFD and control characters, maps whitespace to spaces, surrounds CJK ideographs with
 * spaces, splits on whitespace, lower-cases and strips accents (NFD, drop Mn) when do_lower_case, and
 * splits off every punctuation character (ASCII symbol ranges and Unicode P*). Calls emit once per word
 * (bytes, not NUL-terminated). The text must be valid UTF-8 (see hs_utf8_check). */
typedef void (*hs_word_fn)(const char *word, size_t len, void *ctx);
void hs_basic_tokenize(const char *text, size_t len, int do_lower_case, hs_word_fn emit, void *ctx);

/* ---- WordPiece ---------------------------------------------------------------------------------------- */
/* Greedy longest-match-first over the vocabulary with "##" continuation pieces; a word longer than 100
 * characters, or one that cannot be covered, becomes [UNK]. Appends ids to *out (growing it). */
typedef struct hs_ids {
    int32_t *ids;
    size_t count, capacity;
} hs_ids;
void hs_wordpiece_word(const hs_vocab *v, const char *word, size_t len, hs_ids *out);
/* Whole text: basic tokenizer then WordPiece. */
void hs_bert_tokenize(const hs_vocab *v, const char *text, size_t len, int do_lower_case, hs_ids *out);
void hs_ids_free(hs_ids *ids);

/* ---- UTF-8 --------------------------------------------------------------------------------------------- */
/* Byte offset of the first invalid UTF-8 sequence in s[0..n), or -1 if valid. */
long long hs_utf8_check(const char *s, size_t n);

#endif
