/* Text corpus for BERT pre-training data: reading text files, cutting them into documents and
 * sentences, and the tokenized corpus held in memory (documents of sentences of WordPiece ids).
 *
 * Document boundaries: a blank line (only spaces/tabs/CR) or a line holding only "%" (the fortune
 * file format) ends a document. Sentences, by mode:
 *   lines  every non-blank line is one sentence (the format of Google's create_pretraining_data.py);
 *   prose  the lines of a document are joined and cut after . ! ? (optionally followed by closing
 *          quotes or brackets) when a space and a capital letter (optionally after an opening quote)
 *          follow and the word before the full stop is not an abbreviation (Mr. Dr. e.g. i.e. etc.,
 *          single-letter initials);
 *   auto   per file: prose when fewer than half of the non-blank lines end like a sentence (the lines
 *          are wrapped text), lines otherwise. */
#ifndef HS_PREP_CORPUS_H
#define HS_PREP_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include "prep/wordpiece.h"

typedef enum hs_split_mode { HS_SPLIT_AUTO, HS_SPLIT_LINES, HS_SPLIT_PROSE } hs_split_mode;

/* ---- reading ------------------------------------------------------------------------------------- */
/* Reads a whole text file. Returns 0 (text in *text, *len; free() it), or 1 with a message in err:
 * unreadable (the system's reason), binary (NUL byte at offset N) or not UTF-8 (first invalid byte at
 * offset N). */
int hs_corpus_read_file(const char *path, char **text, size_t *len, char *err, size_t errlen);

/* ---- directory corpora ------------------------------------------------------------------------------ */
/* A directory given as --corpus often holds binary files next to the text (the fortune files' *.dat
 * indexes, images): those are skipped with one summary line per directory, not a warning per file
 * (an explicitly named file, or --strict, still gets its own message from hs_corpus_read_file).
 * Binary means a NUL byte among the first HS_CORPUS_SNIFF_BYTES, the test of git and grep, so listing
 * reads only the start of each file. */
#define HS_CORPUS_SNIFF_BYTES 8192
/* 1 if the file has a NUL byte among its first HS_CORPUS_SNIFF_BYTES (its offset in *nul_at), else 0
 * (also when it cannot be read: the reader reports that with the reason). */
int hs_corpus_looks_binary(const char *path, long long *nul_at);

/* The binary files skipped in one directory: how many, and the first one as an example. */
typedef struct hs_binary_skips {
    long long count;
    char *example;
    long long example_nul_at;
} hs_binary_skips;
void hs_binary_skips_add(hs_binary_skips *s, const char *path, long long nul_at);
/* "skipped 12 binary files in DIR (e.g. art.dat, NUL byte at byte offset 0; --strict stops at them
 * instead)" (one file: "skipped 1 binary file in DIR: art.dat (NUL byte ...)") into buf, the file
 * named relative to DIR; returns 0 and writes nothing when none was skipped. */
int hs_binary_skips_message(const hs_binary_skips *s, const char *dir, char *buf, size_t len);
void hs_binary_skips_free(hs_binary_skips *s);


/* ---- documents and sentences ---------------------------------------------------------------------- */
/* The mode auto chooses for this text (HS_SPLIT_LINES or HS_SPLIT_PROSE). */
hs_split_mode hs_corpus_detect_mode(const char *text, size_t len);

/* Receives the sentences of a text in order; document_end is called after each document's last
 * sentence (blank-line runs give no empty documents). */
typedef struct hs_text_sink {
    void (*sentence)(const char *s, size_t len, void *ctx);
    void (*document_end)(void *ctx);
    void *ctx;
} hs_text_sink;
/* mode must be LINES or PROSE (resolve AUTO with hs_corpus_detect_mode first). */
void hs_corpus_split(const char *text, size_t len, hs_split_mode mode, const hs_text_sink *sink);

/* Prose sentence splitter on one paragraph (no newlines needed): calls emit once per sentence, trimmed,
 * never empty. */
void hs_split_prose(const char *text, size_t len, void (*emit)(const char *s, size_t len, void *ctx), void *ctx);

/* ---- the tokenized corpus --------------------------------------------------------------------------- */
typedef struct hs_corpus {
    int32_t *tokens;   /* [n_tokens] WordPiece ids, sentences back to back */
    int64_t *sent_end; /* [n_sents] end of sentence s in tokens (start = end of s-1, or 0) */
    int64_t *doc_end;  /* [n_docs] end of document d in sentences */
    size_t n_tokens, n_sents, n_docs;
    size_t cap_tokens, cap_sents, cap_docs;
} hs_corpus;

/* Splits text into documents and sentences and appends them tokenized (basic tokenizer + WordPiece).
 * As Google's script: a sentence with no tokens is dropped, a document with no sentences too. */
void hs_corpus_add_text(hs_corpus *c, const hs_vocab *v, const char *text, size_t len, hs_split_mode mode,
                        int do_lower_case);
/* Appends one sentence of ids / closes the current document (no-op when it has no sentence). */
void hs_corpus_add_sentence(hs_corpus *c, const int32_t *ids, size_t count);
void hs_corpus_end_document(hs_corpus *c);
void hs_corpus_free(hs_corpus *c);

static inline int64_t hs_corpus_doc_first_sent(const hs_corpus *c, size_t d) { return d ? c->doc_end[d - 1] : 0; }
static inline int64_t hs_corpus_sent_first_token(const hs_corpus *c, int64_t s) { return s ? c->sent_end[s - 1] : 0; }

#endif
