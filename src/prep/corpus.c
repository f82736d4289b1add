/* Reading text files, documents and sentences, and the tokenized corpus (see corpus.h). */
#include "prep/corpus.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"

/* ---- reading ------------------------------------------------------------------------------------- */

int hs_corpus_read_file(const char *path, char **text, size_t *len, char *err, size_t errlen) {
    *text = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot read it (%s)", path, strerror(errno));
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = hs_xcalloc(cap, 1, __FILE__, __LINE__);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = hs_xrealloc(buf, cap, __FILE__, __LINE__);
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int read_error = ferror(f);
    fclose(f);
    if (read_error) {
        snprintf(err, errlen, "%s: reading it failed after %zu bytes (%s)", path, n, strerror(errno));
        free(buf);
        return 1;
    }
    /* a NUL is valid UTF-8 but never part of text: the file is binary (an index, an image) */
    const char *nul = memchr(buf, 0, n);
    if (nul) {
        snprintf(err, errlen, "%s: not a text file (NUL byte at byte offset %zu)", path, (size_t)(nul - buf));
        free(buf);
        return 1;
    }
    long long bad = hs_utf8_check(buf, n);
    if (bad >= 0) {
        snprintf(err, errlen, "%s: not UTF-8 text (invalid byte 0x%02x at byte offset %lld)", path,
                 (unsigned)(unsigned char)buf[bad], bad);
        free(buf);
        return 1;
    }
    *text = buf;
    *len = n;
    return 0;
}

/* ---- directory corpora ------------------------------------------------------------------------------ */

int hs_corpus_looks_binary(const char *path, long long *nul_at) {
    *nul_at = -1;
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char head[HS_CORPUS_SNIFF_BYTES];
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f); /* read-only: nothing to lose if it fails */
    const char *nul = memchr(head, 0, n);
    if (!nul) return 0;
    *nul_at = (long long)(nul - head);
    return 1;
}

void hs_binary_skips_add(hs_binary_skips *s, const char *path, long long nul_at) {
    if (s->count++ == 0) {
        s->example = HS_STRDUP(path);
        s->example_nul_at = nul_at;
    }
}

int hs_binary_skips_message(const hs_binary_skips *s, const char *dir, char *buf, size_t len) {
    if (s->count == 0) return 0;
    /* name the example relative to the directory the user gave */
    const char *name = s->example;
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') dl--;
    if (strncmp(name, dir, dl) == 0 && name[dl] == '/') name += dl + 1;
    while (*name == '/' && name != s->example) name++;
    if (s->count == 1)
        snprintf(buf, len, "skipped 1 binary file in %.*s: %s (NUL byte at byte offset %lld; --strict stops at it "
                 "instead)", (int)dl, dir, name, s->example_nul_at);
    else
        snprintf(buf, len, "skipped %lld binary files in %.*s (e.g. %s, NUL byte at byte offset %lld; --strict stops "
                 "at them instead)", s->count, (int)dl, dir, name, s->example_nul_at);
    return 1;
}

void hs_binary_skips_free(hs_binary_skips *s) {
    free(s->example);
    memset(s, 0, sizeof *s);
}

/* ---- lines ----------------------------------------------------------------------------------------- */

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

/* [*s, *e) trimmed of ASCII white space */
static void trim(const char **s, const char **e) {
    while (*s < *e && is_space(**s)) (*s)++;
    while (*e > *s && is_space((*e)[-1])) (*e)--;
}

/* The next line of [*p, end), trimmed, into [*s, *e); *p moves past its newline. 0 when none is left. */
static int next_line(const char **p, const char *end, const char **s, const char **e) {
    if (*p >= end) return 0;
    const char *nl = memchr(*p, '\n', (size_t)(end - *p));
    *s = *p;
    *e = nl ? nl : end;
    *p = nl ? nl + 1 : end;
    trim(s, e);
    return 1;
}

/* A trimmed line that ends a document: empty, or the fortune-file separator "%". */
static int is_separator(const char *s, const char *e) { return s == e || (e - s == 1 && *s == '%'); }

/* Length of a closing quote or bracket ending at e (0 if none): " ' ) ] and ” ’ » in UTF-8. */
static size_t closer_before(const char *s, const char *e) {
    if (e > s && (e[-1] == '"' || e[-1] == '\'' || e[-1] == ')' || e[-1] == ']')) return 1;
    if (e - s >= 3 && (unsigned char)e[-3] == 0xE2 && (unsigned char)e[-2] == 0x80 &&
        ((unsigned char)e[-1] == 0x9D || (unsigned char)e[-1] == 0x99))
        return 3;
    if (e - s >= 2 && (unsigned char)e[-2] == 0xC2 && (unsigned char)e[-1] == 0xBB) return 2;
    return 0;
}

static int ends_like_sentence(const char *s, const char *e) {
    size_t k;
    while ((k = closer_before(s, e)) != 0) e -= k;
    return e > s && (e[-1] == '.' || e[-1] == '!' || e[-1] == '?');
}

hs_split_mode hs_corpus_detect_mode(const char *text, size_t len) {
    size_t lines = 0, ending = 0, bytes = 0;
    const char *p = text, *end = text + len, *s, *e;
    while (next_line(&p, end, &s, &e)) {
        if (is_separator(s, e)) continue;
        lines++;
        bytes += (size_t)(e - s);
        ending += (size_t)ends_like_sentence(s, e);
    }
    /* wrapped prose: most lines stop mid-sentence, and lines are terminal-width (a one-sentence-per-line
     * corpus without final punctuation has long lines) */
    if (lines >= 2 && 2 * ending < lines && bytes <= 120 * lines) return HS_SPLIT_PROSE;
    return HS_SPLIT_LINES;
}

/* ---- prose sentences --------------------------------------------------------------------------------- */

/* Words whose full stop does not end a sentence (compared lower-cased, without the stop). */
static const char *const abbreviations[] = {
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "vs", "etc", "inc", "ltd", "co", "corp", "mt",
    "fig", "cf", "al", "gen", "col", "lt", "sgt", "capt", "rev", "hon", "gov", "sen", "rep", "jan", "feb",
    "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "approx", "dept", "est", "vol",
    "ch", "pp", "ed", "eds", "ave", "blvd", "rd", "univ", "assn", "bros", "messrs", "mme", "mlle"};

/* Does the full stop at text[dot] belong to an abbreviation? The word before it: letters and inner
 * dots. "e.g", "i.e", "U.S" (a dot inside) and single letters (initials) count, and the list above. */
static int is_abbreviation(const char *text, size_t dot) {
    size_t b = dot;
    while (b > 0 && (isalpha((unsigned char)text[b - 1]) || text[b - 1] == '.')) b--;
    size_t n = dot - b;
    if (n == 0) return 0;
    if (memchr(text + b, '.', n)) return 1;
    if (n == 1) return 1;
    char word[16];
    if (n >= sizeof word) return 0;
    for (size_t i = 0; i < n; i++) word[i] = (char)tolower((unsigned char)text[b + i]);
    word[n] = 0;
    for (size_t i = 0; i < sizeof abbreviations / sizeof *abbreviations; i++)
        if (!strcmp(word, abbreviations[i])) return 1;
    return 0;
}

/* Length of a quote or bracket at s (0 if none): one of the ASCII characters in `ascii`, the UTF-8
 * quote E2 80 q1 or E2 80 q2, or the guillemet C2 g. */
static size_t mark_at(const char *s, const char *e, const char *ascii, unsigned char q1, unsigned char q2,
                      unsigned char g) {
    if (s < e && *s && strchr(ascii, *s)) return 1;
    if (e - s >= 3 && (unsigned char)s[0] == 0xE2 && (unsigned char)s[1] == 0x80 &&
        ((unsigned char)s[2] == q1 || (unsigned char)s[2] == q2))
        return 3;
    if (e - s >= 2 && (unsigned char)s[0] == 0xC2 && (unsigned char)s[1] == g) return 2;
    return 0;
}

/* An opening quote or bracket: " ' ( [ and “ ‘ « in UTF-8 */
static size_t opener_at(const char *s, const char *e) { return mark_at(s, e, "\"'([", 0x9C, 0x98, 0xAB); }

/* A closing quote or bracket: " ' ) ] and ” ’ » in UTF-8 */
static size_t closer_at(const char *s, const char *e) { return mark_at(s, e, "\"')]", 0x9D, 0x99, 0xBB); }

static void emit_trimmed(const char *s, const char *e, void (*emit)(const char *, size_t, void *), void *ctx) {
    trim(&s, &e);
    if (e > s) emit(s, (size_t)(e - s), ctx);
}

void hs_split_prose(const char *text, size_t len, void (*emit)(const char *s, size_t len, void *ctx), void *ctx) {
    const char *end = text + len, *start = text;
    size_t i = 0;
    while (i < len) {
        char c = text[i];
        if (c != '.' && c != '!' && c != '?') {
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < len && (text[j] == '.' || text[j] == '!' || text[j] == '?')) j++;
        size_t run = j - i, k;
        while ((k = closer_at(text + j, end)) != 0) j += k;
        size_t next = j;
        while (next < len && is_space(text[next])) next++;
        int split = next > j && next < len;
        if (split) {
            size_t cap = next + opener_at(text + next, end);
            split = cap < len && isupper((unsigned char)text[cap]);
        }
        if (split && c == '.' && run == 1 && is_abbreviation(text, i)) split = 0;
        if (split) {
            emit_trimmed(start, text + j, emit, ctx);
            start = text + next;
        }
        i = j > i ? j : i + 1;
    }
    emit_trimmed(start, end, emit, ctx);
}

/* ---- documents ---------------------------------------------------------------------------------------- */

typedef struct prose_ctx {
    char *buf;
    size_t len, cap;
    const hs_text_sink *sink;
} prose_ctx;

static void prose_append(prose_ctx *p, const char *s, size_t n) {
    if (p->len + n + 1 > p->cap) {
        p->cap = 2 * (p->len + n + 1);
        p->buf = hs_xrealloc(p->buf, p->cap, __FILE__, __LINE__);
    }
    if (p->len) p->buf[p->len++] = ' ';
    memcpy(p->buf + p->len, s, n);
    p->len += n;
}

static void prose_forward(const char *s, size_t n, void *ctx) {
    const hs_text_sink *sink = ctx;
    sink->sentence(s, n, sink->ctx);
}

static void prose_flush(prose_ctx *p) {
    if (p->len) hs_split_prose(p->buf, p->len, prose_forward, (void *)p->sink);
    p->len = 0;
}

void hs_corpus_split(const char *text, size_t len, hs_split_mode mode, const hs_text_sink *sink) {
    prose_ctx prose = {.sink = sink};
    int open = 0; /* a document has content */
    const char *p = text, *end = text + len, *s, *e;
    while (next_line(&p, end, &s, &e)) {
        if (is_separator(s, e)) {
            if (open) {
                if (mode == HS_SPLIT_PROSE) prose_flush(&prose);
                sink->document_end(sink->ctx);
            }
            open = 0;
            continue;
        }
        open = 1;
        if (mode == HS_SPLIT_PROSE) prose_append(&prose, s, (size_t)(e - s));
        else sink->sentence(s, (size_t)(e - s), sink->ctx);
    }
    if (open) {
        if (mode == HS_SPLIT_PROSE) prose_flush(&prose);
        sink->document_end(sink->ctx);
    }
    free(prose.buf);
}

/* ---- the tokenized corpus -------------------------------------------------------------------------- */

void hs_corpus_add_sentence(hs_corpus *c, const int32_t *ids, size_t count) {
    if (count == 0) return;
    if (c->n_tokens + count > c->cap_tokens) {
        c->cap_tokens = 2 * (c->n_tokens + count) + 1024;
        HS_REALLOC(c->tokens, c->cap_tokens);
    }
    memcpy(c->tokens + c->n_tokens, ids, count * sizeof *ids);
    c->n_tokens += count;
    if (c->n_sents == c->cap_sents) {
        c->cap_sents = 2 * c->cap_sents + 256;
        HS_REALLOC(c->sent_end, c->cap_sents);
    }
    c->sent_end[c->n_sents++] = (int64_t)c->n_tokens;
}

void hs_corpus_end_document(hs_corpus *c) {
    int64_t first = c->n_docs ? c->doc_end[c->n_docs - 1] : 0;
    if ((int64_t)c->n_sents == first) return; /* no sentence: no document */
    if (c->n_docs == c->cap_docs) {
        c->cap_docs = 2 * c->cap_docs + 64;
        HS_REALLOC(c->doc_end, c->cap_docs);
    }
    c->doc_end[c->n_docs++] = (int64_t)c->n_sents;
}

typedef struct tokenize_ctx {
    hs_corpus *corpus;
    const hs_vocab *vocab;
    int do_lower_case;
    hs_ids ids;
} tokenize_ctx;

static void tokenize_sentence(const char *s, size_t n, void *ctx) {
    tokenize_ctx *t = ctx;
    t->ids.count = 0;
    hs_bert_tokenize(t->vocab, s, n, t->do_lower_case, &t->ids);
    hs_corpus_add_sentence(t->corpus, t->ids.ids, t->ids.count);
}

static void tokenize_document_end(void *ctx) { hs_corpus_end_document(((tokenize_ctx *)ctx)->corpus); }

void hs_corpus_add_text(hs_corpus *c, const hs_vocab *v, const char *text, size_t len, hs_split_mode mode,
                        int do_lower_case) {
    if (mode == HS_SPLIT_AUTO) mode = hs_corpus_detect_mode(text, len);
    tokenize_ctx t = {.corpus = c, .vocab = v, .do_lower_case = do_lower_case};
    hs_text_sink sink = {tokenize_sentence, tokenize_document_end, &t};
    hs_corpus_split(text, len, mode, &sink);
    hs_ids_free(&t.ids);
}

void hs_corpus_free(hs_corpus *c) {
    free(c->tokens);
    free(c->sent_end);
    free(c->doc_end);
    memset(c, 0, sizeof *c);
}
