/* Fuzz target: the corpus reader (src/prep/corpus.c): reading a text file, telling binary files
 * apart, choosing the sentence mode, documents and sentences (lines and prose), and the tokenized
 * corpus.
 *
 * Input: a flag byte, then the file. Flag bits 0-1: the split mode (0 auto, 1 lines, 2 prose, 3 both
 * lines and prose); bit 2: lower-case. The reader returns its errors; besides crashes, UB, leaks and
 * hangs, these properties are checked: every sentence is non-empty, trimmed and inside the text;
 * documents and sentences of the corpus are non-empty and in order; every id is a vocabulary token;
 * a file that reads has no NUL byte, so the binary sniff must agree. */
#include <string.h>

#include "fuzz_common.h"
#include "fuzz_vocab.h"
#include "prep/corpus.h"

typedef struct {
    const char *text;
    size_t len, sentences, documents;
} split_ctx;

static int is_trim_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

static void on_sentence(const char *s, size_t n, void *p) {
    split_ctx *c = p;
    HS_FUZZ_ASSERT(n > 0, "an empty sentence");
    HS_FUZZ_ASSERT(!is_trim_space(s[0]) && !is_trim_space(s[n - 1]), "an untrimmed sentence");
    c->sentences++;
}

/* lines mode: sentences point into the text and hold no line end */
static void on_line_sentence(const char *s, size_t n, void *p) {
    split_ctx *c = p;
    on_sentence(s, n, p);
    HS_FUZZ_ASSERT(s >= c->text && s + n <= c->text + c->len, "a sentence outside the text");
    HS_FUZZ_ASSERT(!memchr(s, '\n', n), "a line end inside a sentence");
}

static void on_document(void *p) { ((split_ctx *)p)->documents++; }

static void check_corpus(const hs_corpus *c, const hs_vocab *v) {
    for (size_t t = 0; t < c->n_tokens; t++)
        HS_FUZZ_ASSERT(c->tokens[t] >= 0 && c->tokens[t] < hs_vocab_size(v), "token id %d", c->tokens[t]);
    for (size_t s = 0; s < c->n_sents; s++)
        HS_FUZZ_ASSERT(c->sent_end[s] > hs_corpus_sent_first_token(c, (int64_t)s) &&
                           c->sent_end[s] <= (int64_t)c->n_tokens, "sentence %zu ends at %lld", s,
                       (long long)c->sent_end[s]);
    for (size_t d = 0; d < c->n_docs; d++)
        HS_FUZZ_ASSERT(c->doc_end[d] > hs_corpus_doc_first_sent(c, d) && c->doc_end[d] <= (int64_t)c->n_sents,
                       "document %zu ends at %lld", d, (long long)c->doc_end[d]);
    HS_FUZZ_ASSERT(c->n_docs == 0 || c->doc_end[c->n_docs - 1] == (int64_t)c->n_sents, "sentences after the last document");
}

static void split(const char *text, size_t len, hs_split_mode mode, int lower) {
    split_ctx ctx = {text, len, 0, 0};
    hs_text_sink sink = {mode == HS_SPLIT_LINES ? on_line_sentence : on_sentence, on_document, &ctx};
    hs_corpus_split(text, len, mode, &sink);
    HS_FUZZ_ASSERT(ctx.documents <= ctx.sentences, "%zu documents of %zu sentences", ctx.documents, ctx.sentences);
    split_ctx prose = {text, len, 0, 0};
    hs_split_prose(text, len, on_sentence, &prose);

    hs_corpus c = {0};
    const hs_vocab *v = fuzz_vocab();
    hs_corpus_add_text(&c, v, text, len, mode, lower);
    check_corpus(&c, v);
    HS_FUZZ_ASSERT(c.n_docs <= ctx.documents && c.n_sents <= ctx.sentences, "the corpus has more than the text");
    hs_corpus_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int flags = data[0];
    const char *path = hs_fuzz_file(data + 1, size - 1);
    char err[1024] = "", *text;
    size_t len;
    long long nul_at;
    int binary = hs_corpus_looks_binary(path, &nul_at);
    if (hs_corpus_read_file(path, &text, &len, err, sizeof err) != 0) {
        HS_FUZZ_ASSERT(err[0] != '\0' && text == NULL, "a failed read without a message, or with text");
        return 0;
    }
    HS_FUZZ_ASSERT(len == size - 1 && memcmp(text, data + 1, len) == 0, "the text read is not the file");
    HS_FUZZ_ASSERT(!binary, "a text file looks binary (NUL at %lld)", nul_at);
    int lower = (flags >> 2) & 1;
    switch (flags & 3) {
    case 0: split(text, len, hs_corpus_detect_mode(text, len), lower); break;
    case 1: split(text, len, HS_SPLIT_LINES, lower); break;
    case 2: split(text, len, HS_SPLIT_PROSE, lower); break;
    default:
        split(text, len, HS_SPLIT_LINES, lower);
        split(text, len, HS_SPLIT_PROSE, lower);
    }
    free(text);
    return 0;
}
