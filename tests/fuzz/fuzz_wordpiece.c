/* Fuzz target: the BERT tokenizer (src/prep/wordpiece.c): the basic tokenizer, WordPiece and the
 * vocabulary loader.
 *
 * Input: a flag byte, then text. Flag bit 0: lower-case (uncased BERT); bit 1: the text up to the
 * first NUL is a vocabulary file (loaded with hs_vocab_load, whose refusals are user errors) and the
 * rest is tokenized with it; otherwise the committed tests/fuzz/vocab.txt is used. Besides crashes,
 * UB, leaks and hangs, these properties are checked: every word the basic tokenizer emits is
 * non-empty valid UTF-8 without white space, every id is a token of the vocabulary, and the pieces of
 * a word spell it (or it is one [UNK]). */
#include <string.h>

#include "fuzz_common.h"
#include "fuzz_vocab.h"
#include "prep/wordpiece.h"

/* Every id is a token of v; the pieces of each word spell the word (continuations as "##piece") or
 * the word is one [UNK]. */
static void check_word_ids(const hs_vocab *v, const char *word, size_t len, const int32_t *ids, size_t n) {
    HS_FUZZ_ASSERT(n >= 1 || len == 0, "a word of %zu bytes gave no id", len);
    for (size_t i = 0; i < n; i++)
        HS_FUZZ_ASSERT(ids[i] >= 0 && ids[i] < hs_vocab_size(v), "id %d of %d", ids[i], hs_vocab_size(v));
    if (n == 1 && ids[0] == hs_vocab_special(v).unk) return;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const char *t = hs_vocab_token(v, ids[i]);
        size_t tl = strlen(t);
        if (i > 0) {
            HS_FUZZ_ASSERT(tl > 2 && t[0] == '#' && t[1] == '#', "piece %zu '%s' is no continuation", i, t);
            t += 2, tl -= 2;
        }
        HS_FUZZ_ASSERT(at + tl <= len && memcmp(word + at, t, tl) == 0, "piece %zu '%s' does not spell the word", i, t);
        at += tl;
    }
    HS_FUZZ_ASSERT(at == len, "the pieces spell %zu of the word's %zu bytes", at, len);
}

typedef struct {
    const hs_vocab *v;
    hs_ids ids;
    size_t words;
} word_ctx;

static void on_word(const char *word, size_t len, void *p) {
    word_ctx *w = p;
    HS_FUZZ_ASSERT(len > 0, "an empty word");
    HS_FUZZ_ASSERT(hs_utf8_check(word, len) < 0, "a word of invalid UTF-8");
    for (size_t i = 0; i < len; i++)
        HS_FUZZ_ASSERT(word[i] != ' ' && word[i] != '\t' && word[i] != '\n' && word[i] != '\r' && word[i] != 0,
                       "white space or NUL at byte %zu of a word", i);
    w->ids.count = 0;
    hs_wordpiece_word(w->v, word, len, &w->ids);
    check_word_ids(w->v, word, len, w->ids.ids, w->ids.count);
    w->words++;
}

static hs_vocab *g_custom;

static void load_custom(const char *path) { g_custom = hs_vocab_load(path); }

static void tokenize(const hs_vocab *v, const char *text, size_t len, int lower) {
    word_ctx w = {v, {0}, 0};
    hs_basic_tokenize(text, len, lower, on_word, &w);
    hs_ids_free(&w.ids);
    /* the whole-text entry point gives the same ids as word by word */
    hs_ids all = {0};
    hs_bert_tokenize(v, text, len, lower, &all);
    for (size_t i = 0; i < all.count; i++) HS_FUZZ_ASSERT(all.ids[i] >= 0 && all.ids[i] < hs_vocab_size(v), "id");
    HS_FUZZ_ASSERT(all.count >= w.words, "%zu ids for %zu words", all.count, w.words);
    hs_ids_free(&all);
    /* WordPiece on raw bytes (any bytes, not only the basic tokenizer's words) */
    hs_ids raw = {0};
    hs_wordpiece_word(v, text, len, &raw);
    check_word_ids(v, text, len, raw.ids, raw.count);
    hs_ids_free(&raw);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int flags = data[0];
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    hs_utf8_check(text, len);
    if (!(flags & 2)) {
        tokenize(fuzz_vocab(), text, len, flags & 1);
        return 0;
    }
    const char *nul = memchr(text, 0, len);
    size_t vlen = nul ? (size_t)(nul - text) : len;
    int ok;
    g_custom = NULL;
    HS_FUZZ_GUARDED(ok, load_custom(hs_fuzz_file((const uint8_t *)text, vlen)));
    if (!ok) return 0;
    size_t rest = nul ? len - vlen - 1 : 0;
    tokenize(g_custom, nul ? nul + 1 : text + len, rest, flags & 1);
    hs_vocab_free(g_custom);
    return 0;
}
