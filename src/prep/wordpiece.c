/* BERT tokenization (see wordpiece.h).
 *
 * The character rules are those of Hugging Face's BERT normalizer and pre-tokenizer (the `tokenizers`
 * library behind BertTokenizerFast / BertWordPieceTokenizer), which for real text equal
 * BertTokenizer's BasicTokenizer and Google's original tokenization.py:
 *   1. clean:   drop U+0000, U+FFFD and "control" characters (categories Cc, Cf, Co; \t \n \r are
 *               whitespace); whitespace (\t \n \r, categories Zs Zl Zp) becomes a space;
 *   2. CJK:     ideographs of the CJK blocks become words of their own;
 *   3. lower:   NFD, drop nonspacing marks (Mn), then full lower-casing, character by character;
 *   4. split:   on whitespace and around every punctuation character (ASCII 33-47, 58-64, 91-96,
 *               123-126 and categories P*).
 * Where Hugging Face's two implementations differ we follow `tokenizers` (docs/tokenization.md lists
 * the differences). Unicode properties come from utf8proc.
 *
 * Speed: words of pure ASCII (nearly all of an English corpus) take a byte-table path with no
 * decoding; other words are decoded into a per-call scratch buffer (on the stack until it is
 * outgrown), so nothing is allocated per character or per word. WordPiece looks pieces up by
 * FNV-1a hash, hashing "##" + piece incrementally without building the string. */
#include "prep/wordpiece.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <utf8proc.h>

#include "util/check.h"
#include "util/hash.h"

/* Words longer than this many characters (code points) become [UNK], as in BERT. */
#define HS_WP_MAX_INPUT_CHARS 100

/* ================================== vocabulary ============================================== */

struct hs_vocab {
    char *bytes;       /* every token NUL-terminated, in id order */
    size_t *offset;    /* [count] token id -> offset into bytes */
    size_t *length;    /* [count] token length in bytes */
    int count;
    /* open addressing, linear probing; capacity a power of two >= 2 * count */
    int32_t *slot_id;     /* -1 = empty */
    uint32_t *slot_hash;  /* hash of the slot's token, compared before the bytes */
    uint32_t mask;
    size_t max_len_initial; /* longest token: no word-initial piece can be longer */
    size_t max_len_cont;    /* longest "##" token without its "##" */
    uint32_t cont_seed;     /* FNV-1a state after "##" */
    hs_special_ids special;
};

static int token_equals(const hs_vocab *v, int id, int continuation, const char *s, size_t n) {
    const char *t = v->bytes + v->offset[id];
    size_t tl = v->length[id];
    if (continuation) return tl == n + 2 && t[0] == '#' && t[1] == '#' && memcmp(t + 2, s, n) == 0;
    return tl == n && memcmp(t, s, n) == 0;
}

/* id of (continuation ? "##" : "") + s[0..n) given its hash h, or -1. */
static int vocab_find(const hs_vocab *v, uint32_t h, int continuation, const char *s, size_t n) {
    for (uint32_t at = h & v->mask;; at = (at + 1) & v->mask) {
        int32_t id = v->slot_id[at];
        if (id < 0) return -1;
        if (v->slot_hash[at] == h && token_equals(v, id, continuation, s, n)) return id;
    }
}

/* Tokens in id order with their lengths. A token listed twice maps to its last id, as in both of
 * Hugging Face's vocabulary loaders (a dict filled in file order). */
static hs_vocab *vocab_build(const char *const *tokens, const size_t *lengths, int count) {
    hs_vocab *v;
    HS_ALLOC(v, 1);
    v->count = count;
    size_t total = 0;
    for (int i = 0; i < count; i++) total += lengths[i] + 1;
    HS_ALLOC(v->bytes, total + 1);
    HS_ALLOC(v->offset, count > 0 ? count : 1);
    HS_ALLOC(v->length, count > 0 ? count : 1);
    size_t capacity = 16;
    while (capacity < 2 * (size_t)count) capacity *= 2;
    v->mask = (uint32_t)(capacity - 1);
    HS_ALLOC(v->slot_id, capacity);
    HS_ALLOC(v->slot_hash, capacity);
    memset(v->slot_id, 0xff, capacity * sizeof *v->slot_id);
    v->cont_seed = hs_fnv1a32(HS_FNV32_OFFSET, "##", 2);

    size_t at = 0;
    for (int id = 0; id < count; id++) {
        size_t n = lengths[id];
        memcpy(v->bytes + at, tokens[id], n);
        v->bytes[at + n] = '\0';
        v->offset[id] = at;
        v->length[id] = n;
        at += n + 1;
        const char *t = v->bytes + v->offset[id];
        if (n > v->max_len_initial) v->max_len_initial = n;
        if (n >= 2 && t[0] == '#' && t[1] == '#' && n - 2 > v->max_len_cont) v->max_len_cont = n - 2;
        uint32_t h = hs_fnv1a32(HS_FNV32_OFFSET, (const unsigned char *)t, n);
        uint32_t slot = h & v->mask;
        while (v->slot_id[slot] >= 0 && !(v->slot_hash[slot] == h && token_equals(v, v->slot_id[slot], 0, t, n)))
            slot = (slot + 1) & v->mask;
        v->slot_id[slot] = id; /* new token, or a repeat: the later id wins */
        v->slot_hash[slot] = h;
    }
    v->special.pad = hs_vocab_id(v, "[PAD]", 5);
    v->special.unk = hs_vocab_id(v, "[UNK]", 5);
    v->special.cls = hs_vocab_id(v, "[CLS]", 5);
    v->special.sep = hs_vocab_id(v, "[SEP]", 5);
    v->special.mask = hs_vocab_id(v, "[MASK]", 6);
    return v;
}

hs_vocab *hs_vocab_from_tokens(const char *const *tokens, int count) {
    size_t *lengths;
    HS_ALLOC(lengths, count > 0 ? count : 1);
    for (int i = 0; i < count; i++) lengths[i] = strlen(tokens[i]);
    hs_vocab *v = vocab_build(tokens, lengths, count);
    free(lengths);
    return v;
}

/* Every refusal of hs_vocab_load frees what it holds first: a caller whose hs_die returns (the fuzz
 * harness) must lose nothing. */
hs_vocab *hs_vocab_load(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) hs_die("cannot open vocabulary %s: %s", path, strerror(errno));
    char *text = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (cap - n < 65536) {
            cap = cap ? 2 * cap : 1 << 20;
            HS_REALLOC(text, cap);
        }
        size_t got = fread(text + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        int e = errno;
        fclose(f);
        free(text);
        hs_die("cannot read vocabulary %s: %s", path, strerror(e));
    }
    fclose(f); /* read-only: a failing close loses nothing */
    if (n == 0) {
        free(text);
        hs_die("vocabulary %s is empty: expected one token per line (a BERT vocab.txt)", path);
    }
    long long bad = hs_utf8_check(text, n);
    if (bad >= 0) {
        long long line = 1;
        for (long long i = 0; i < bad; i++) line += text[i] == '\n';
        free(text);
        hs_die("vocabulary %s: invalid UTF-8 at byte offset %lld (line %lld); a vocab.txt must be UTF-8", path,
               bad, line);
    }

    /* one token per line; "\n" or "\r\n" ends a line; a last line without "\n" counts */
    size_t lines = 0;
    for (size_t i = 0; i < n; i++) lines += text[i] == '\n';
    if (text[n - 1] != '\n') lines++;
    if (lines > INT32_MAX / 2) { /* ids are int32; the hash table (2 slots a token) has a 32-bit mask */
        free(text);
        hs_die("vocabulary %s has %zu lines; a vocabulary holds at most %d tokens", path, lines, INT32_MAX / 2);
    }
    int count = (int)lines;
    const char **tokens;
    size_t *lengths;
    HS_ALLOC(tokens, count);
    HS_ALLOC(lengths, count);
    size_t start = 0;
    for (int id = 0; id < count; id++) {
        const char *nl = memchr(text + start, '\n', n - start);
        size_t end = nl ? (size_t)(nl - text) : n;
        size_t len = end - start;
        if (len > 0 && text[start + len - 1] == '\r') len--;
        tokens[id] = text + start;
        lengths[id] = len;
        start = end + 1;
    }
    hs_vocab *v = vocab_build(tokens, lengths, count);
    free(tokens);
    free(lengths);
    free(text);

    const hs_special_ids s = v->special;
    char missing[64] = "";
    if (s.pad < 0) strcat(missing, " [PAD]");
    if (s.unk < 0) strcat(missing, " [UNK]");
    if (s.cls < 0) strcat(missing, " [CLS]");
    if (s.sep < 0) strcat(missing, " [SEP]");
    if (s.mask < 0) strcat(missing, " [MASK]");
    if (missing[0]) {
        hs_vocab_free(v);
        hs_die("vocabulary %s lacks the special token(s)%s: a BERT vocabulary needs [PAD] [UNK] [CLS] [SEP] [MASK], "
               "one per line (learn one with `hetseq prep vocab`)",
               path, missing);
    }
    return v;
}

int hs_vocab_size(const hs_vocab *v) { return v->count; }

int hs_vocab_id(const hs_vocab *v, const char *token, size_t len) {
    return vocab_find(v, hs_fnv1a32(HS_FNV32_OFFSET, (const unsigned char *)token, len), 0, token, len);
}

const char *hs_vocab_token(const hs_vocab *v, int id) {
    return id >= 0 && id < v->count ? v->bytes + v->offset[id] : NULL;
}

hs_special_ids hs_vocab_special(const hs_vocab *v) { return v->special; }

void hs_vocab_save(const hs_vocab *v, const char *path) {
    size_t plen = strlen(path);
    char *tmp;
    HS_ALLOC(tmp, plen + 32);
    snprintf(tmp, plen + 32, "%s.tmp%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) hs_die("cannot write vocabulary %s: %s", tmp, strerror(errno));
    int ok = 1;
    for (int id = 0; id < v->count && ok; id++) {
        const char *t = v->bytes + v->offset[id];
        if (memchr(t, '\n', v->length[id]))
            HS_FATAL("a vocabulary token holds a line break", "vocabulary token %d cannot be saved one per line", id);
        ok = fwrite(t, 1, v->length[id], f) == v->length[id] && fputc('\n', f) != EOF;
    }
    if (fclose(f) != 0) ok = 0;
    if (!ok) {
        int e = errno;
        remove(tmp);
        hs_die("cannot write vocabulary %s: %s (disk full?)", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        hs_die("cannot rename %s to %s: %s", tmp, path, strerror(e));
    }
    free(tmp);
}

void hs_vocab_free(hs_vocab *v) {
    if (!v) return;
    free(v->bytes);
    free(v->offset);
    free(v->length);
    free(v->slot_id);
    free(v->slot_hash);
    free(v);
}

/* ================================== UTF-8 ==================================================== */

/* Length of the valid UTF-8 sequence at s[0..n) and its code point, or 0 if it is invalid: as
 * Python's strict decoder, no overlong forms (C0 C1, E0 80-9F, F0 80-8F), no surrogates (ED A0-BF),
 * nothing above U+10FFFF (F4 90-BF, F5-FF), no stray continuation bytes, no truncated sequences. */
static inline int utf8_sequence(const unsigned char *s, size_t n, uint32_t *cp) {
    unsigned b0 = s[0];
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    if (b0 < 0xC2) return 0;
    if (b0 < 0xE0) {
        if (n < 2 || (s[1] & 0xC0) != 0x80) return 0;
        *cp = (b0 & 0x1Fu) << 6 | (s[1] & 0x3Fu);
        return 2;
    }
    if (b0 < 0xF0) {
        unsigned lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
        if (n < 2 || s[1] < lo || s[1] > hi) return 0;
        if (n < 3 || (s[2] & 0xC0) != 0x80) return 0;
        *cp = (b0 & 0x0Fu) << 12 | (s[1] & 0x3Fu) << 6 | (s[2] & 0x3Fu);
        return 3;
    }
    if (b0 < 0xF5) {
        unsigned lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
        if (n < 2 || s[1] < lo || s[1] > hi) return 0;
        if (n < 3 || (s[2] & 0xC0) != 0x80) return 0;
        if (n < 4 || (s[3] & 0xC0) != 0x80) return 0;
        *cp = (b0 & 0x07u) << 18 | (s[1] & 0x3Fu) << 12 | (s[2] & 0x3Fu) << 6 | (s[3] & 0x3Fu);
        return 4;
    }
    return 0;
}

long long hs_utf8_check(const char *text, size_t n) {
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < n) {
        /* eight ASCII bytes at a time */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        uint32_t cp;
        int len = utf8_sequence(s + i, n - i, &cp);
        if (len == 0) return (long long)i;
        i += (size_t)len;
    }
    return -1;
}

static inline size_t utf8_encode(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ================================== character classes ======================================== */

/* ASCII: W word character, P punctuation (33-47, 58-64, 91-96, 123-126), S whitespace (space, \t,
 * \n, \r), D dropped (the other controls: NUL, \v, \f, backspace, ..., DEL). */
static const char ascii_class[129] =
    "DDDDDDDDDSSDDSDDDDDDDDDDDDDDDDDD" /*   0- 31 */
    "SPPPPPPPPPPPPPPPWWWWWWWWWWPPPPPP" /*  32- 63 */
    "PWWWWWWWWWWWWWWWWWWWWWWWWWWPPPPP" /*  64- 95 */
    "PWWWWWWWWWWWWWWWWWWWWWWWWWWPPPPD" /*  96-127 */;

/* Removed by the cleanup: U+FFFD and categories Cc, Cf, Co (Cs cannot occur in valid UTF-8). An
 * unassigned code point (Cn) is kept, as `tokenizers` and Google's tokenizer keep it. */
static inline int is_dropped(uint32_t cp, utf8proc_category_t cat) {
    return cp == 0xFFFD || cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF ||
           cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CS;
}

/* Non-ASCII whitespace: Zs, and the line/paragraph separators U+2028 (Zl), U+2029 (Zp) that both
 * `tokenizers` (char::is_whitespace) and BertTokenizer (str.split) split on. */
static inline int is_space_category(utf8proc_category_t cat) {
    return cat == UTF8PROC_CATEGORY_ZS || cat == UTF8PROC_CATEGORY_ZL || cat == UTF8PROC_CATEGORY_ZP;
}

static inline int is_punct_category(utf8proc_category_t cat) {
    return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}

/* The CJK Unified Ideographs blocks of BERT's _is_chinese_char (not Hangul, kana or CJK symbols). */
static inline int is_cjk(uint32_t cp) {
    return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
           (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) ||
           (cp >= 0x2B820 && cp <= 0x2CEAF) || (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

static inline int is_punct_cp(uint32_t cp) {
    if (cp < 128) return ascii_class[cp] == 'P';
    return is_punct_category(utf8proc_category((utf8proc_int32_t)cp));
}

/* ================================== basic tokenizer ========================================== */

/* Per-call scratch space: on the stack until a segment outgrows it. */
#define SCRATCH_CPS 512
#define SCRATCH_WORD 1024
typedef struct scratch {
    uint32_t *cps;     /* the current segment's code points after cleanup */
    size_t n_cps, cap_cps;
    uint32_t *nfd;     /* its canonical decomposition */
    size_t cap_nfd;
    char *word;        /* UTF-8 bytes of the word being built */
    size_t n_word, cap_word;
    hs_word_fn emit;
    void *ctx;
    int lower;
    uint32_t cps_stack[SCRATCH_CPS], nfd_stack[4 * SCRATCH_CPS];
    char word_stack[SCRATCH_WORD];
} scratch;

static void scratch_init(scratch *sc, int lower, hs_word_fn emit, void *ctx) {
    sc->cps = sc->cps_stack;
    sc->cap_cps = SCRATCH_CPS;
    sc->nfd = sc->nfd_stack;
    sc->cap_nfd = 4 * SCRATCH_CPS;
    sc->word = sc->word_stack;
    sc->cap_word = SCRATCH_WORD;
    sc->n_cps = sc->n_word = 0;
    sc->lower = lower;
    sc->emit = emit;
    sc->ctx = ctx;
}

static void scratch_free(scratch *sc) {
    if (sc->cps != sc->cps_stack) free(sc->cps);
    if (sc->nfd != sc->nfd_stack) free(sc->nfd);
    if (sc->word != sc->word_stack) free(sc->word);
}

/* Grows *buf (which may still be the stack array) to hold at least need elements. */
static void *grow(void *buf, const void *stack, size_t *cap, size_t need, size_t elem) {
    size_t cap2 = *cap;
    while (cap2 < need) cap2 *= 2;
    void *p;
    if (buf == stack) {
        p = hs_xcalloc(cap2, elem, __FILE__, __LINE__);
        memcpy(p, buf, *cap * elem);
    } else {
        p = hs_xrealloc(buf, cap2 * elem, __FILE__, __LINE__);
    }
    *cap = cap2;
    return p;
}

static inline void word_reserve(scratch *sc, size_t extra) {
    if (sc->n_word + extra > sc->cap_word)
        sc->word = grow(sc->word, sc->word_stack, &sc->cap_word, sc->n_word + extra, 1);
}

static inline void word_flush(scratch *sc) {
    if (sc->n_word) sc->emit(sc->word, sc->n_word, sc->ctx);
    sc->n_word = 0;
}

static inline void push_cp(scratch *sc, uint32_t cp) {
    if (sc->n_cps == sc->cap_cps) sc->cps = grow(sc->cps, sc->cps_stack, &sc->cap_cps, sc->n_cps + 1, sizeof *sc->cps);
    sc->cps[sc->n_cps++] = cp;
}

/* A segment of ASCII bytes without whitespace: drop controls (joining their neighbours, as the
 * cleanup removes them before splitting), lower-case, split around punctuation. */
static void ascii_segment(scratch *sc, const unsigned char *s, size_t n) {
    word_reserve(sc, n);
    for (size_t i = 0; i < n; i++) {
        unsigned char b = s[i];
        char cls = ascii_class[b];
        if (cls == 'W') {
            sc->word[sc->n_word++] = (char)(sc->lower && b >= 'A' && b <= 'Z' ? b + 32 : b);
        } else if (cls == 'P') {
            word_flush(sc);
            sc->emit((const char *)s + i, 1, sc->ctx);
        }
    }
    word_flush(sc);
}

static inline int ccc(uint32_t cp) { return cp < 0x300 ? 0 : utf8proc_get_property((utf8proc_int32_t)cp)->combining_class; }

/* cps[0..n) -> NFD in sc->nfd (canonical decomposition, then canonical ordering of combining marks);
 * returns the length. */
static size_t nfd(scratch *sc, const uint32_t *cps, size_t n) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = cps[i];
        if (cp < 0xC0) { /* nothing below U+00C0 decomposes canonically */
            if (len == sc->cap_nfd) sc->nfd = grow(sc->nfd, sc->nfd_stack, &sc->cap_nfd, len + 1, sizeof *sc->nfd);
            sc->nfd[len++] = cp;
            continue;
        }
        for (;;) {
            int boundclass = 0;
            utf8proc_ssize_t got = utf8proc_decompose_char((utf8proc_int32_t)cp, (utf8proc_int32_t *)sc->nfd + len,
                                                           (utf8proc_ssize_t)(sc->cap_nfd - len), UTF8PROC_DECOMPOSE,
                                                           &boundclass);
            if (got < 0) HS_FATAL("report this as a bug", "utf8proc_decompose_char(U+%04X): %s", (unsigned)cp, utf8proc_errmsg(got));
            if ((size_t)got <= sc->cap_nfd - len) {
                len += (size_t)got;
                break;
            }
            sc->nfd = grow(sc->nfd, sc->nfd_stack, &sc->cap_nfd, len + (size_t)got, sizeof *sc->nfd);
        }
    }
    /* canonical ordering: a stable sort by combining class within each run of non-starters */
    for (size_t i = 1; i < len; i++) {
        int c = ccc(sc->nfd[i]);
        if (c == 0) continue;
        uint32_t cp = sc->nfd[i];
        size_t j = i;
        while (j > 0 && ccc(sc->nfd[j - 1]) > c) {
            sc->nfd[j] = sc->nfd[j - 1];
            j--;
        }
        sc->nfd[j] = cp;
    }
    return len;
}

/* Appends one character of the normalized segment: punctuation is a word of its own. */
static inline void emit_cp(scratch *sc, uint32_t cp) {
    if (is_punct_cp(cp)) {
        char buf[4];
        size_t n = utf8_encode(cp, buf);
        word_flush(sc);
        sc->emit(buf, n, sc->ctx);
    } else {
        word_reserve(sc, 4);
        sc->n_word += utf8_encode(cp, sc->word + sc->n_word);
    }
}

/* A segment of code points without whitespace (cleaned): normalize, split around punctuation. */
static void unicode_segment(scratch *sc) {
    if (sc->n_cps == 0) return;
    if (!sc->lower) {
        for (size_t i = 0; i < sc->n_cps; i++) emit_cp(sc, sc->cps[i]);
    } else {
        /* NFD, drop Mn, then lower-case: the order of the `tokenizers` normalizer (BertTokenizer
         * lower-cases first; for every code point both orders give the same result) */
        size_t n = nfd(sc, sc->cps, sc->n_cps);
        for (size_t i = 0; i < n; i++) {
            uint32_t cp = sc->nfd[i];
            if (cp < 128) {
                emit_cp(sc, cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
                continue;
            }
            if (utf8proc_category((utf8proc_int32_t)cp) == UTF8PROC_CATEGORY_MN) continue;
            if (cp == 0x130) { /* the one code point whose full lower case is two: i + COMBINING DOT ABOVE
                                * (unreachable after NFD, kept for the rule's sake) */
                emit_cp(sc, 'i');
                emit_cp(sc, 0x307);
                continue;
            }
            /* utf8proc's simple mapping equals the full one (Python's str.lower, Rust's
             * char::to_lowercase) everywhere else */
            emit_cp(sc, (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp));
        }
    }
    word_flush(sc);
    sc->n_cps = 0;
}

void hs_basic_tokenize(const char *text, size_t len, int do_lower_case, hs_word_fn emit, void *ctx) {
    scratch sc;
    scratch_init(&sc, do_lower_case, emit, ctx);
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        if (s[i] < 128) {
            if (ascii_class[s[i]] == 'S') {
                i++;
                continue;
            }
            size_t j = i;
            while (j < len && s[j] < 128 && ascii_class[s[j]] != 'S') j++;
            if (j == len || s[j] < 128) { /* a pure ASCII segment */
                ascii_segment(&sc, s + i, j - i);
                i = j;
                continue;
            }
            /* the segment goes on with non-ASCII characters: decode it from its start */
        }
        size_t k = i;
        while (k < len) {
            if (s[k] < 128) {
                char cls = ascii_class[s[k]];
                if (cls == 'S') {
                    k++;
                    break;
                }
                if (cls != 'D') push_cp(&sc, s[k]);
                k++;
                continue;
            }
            uint32_t cp;
            int got = utf8_sequence(s + k, len - k, &cp);
            if (got == 0) { /* invalid UTF-8 (the caller should have checked): U+FFFD, dropped */
                k++;
                continue;
            }
            k += (size_t)got;
            utf8proc_category_t cat = utf8proc_category((utf8proc_int32_t)cp);
            if (is_dropped(cp, cat)) continue;
            if (is_space_category(cat)) break;
            if (is_cjk(cp)) { /* the ideograph is a segment of its own */
                unicode_segment(&sc);
                push_cp(&sc, cp);
                unicode_segment(&sc);
                continue;
            }
            push_cp(&sc, cp);
        }
        unicode_segment(&sc);
        i = k;
    }
    scratch_free(&sc);
}

/* ================================== WordPiece ================================================ */

static inline void ids_push(hs_ids *out, int32_t id) {
    if (out->count == out->capacity) {
        out->capacity = out->capacity ? 2 * out->capacity : 64;
        HS_REALLOC(out->ids, out->capacity);
    }
    out->ids[out->count++] = id;
}

/* Prefix hashes kept for candidate pieces up to this many bytes; longer candidates (a vocabulary
 * with very long tokens) are hashed one by one. */
#define WP_PREFIX_HASHES 256

void hs_wordpiece_word(const hs_vocab *v, const char *word, size_t len, hs_ids *out) {
    if (len == 0) return;
    if (v->special.unk < 0)
        HS_FATAL("use a vocabulary with [UNK]", "WordPiece needs an [UNK] token in the vocabulary");
    const unsigned char *w = (const unsigned char *)word;
    size_t chars = 0;
    for (size_t i = 0; i < len; i++) chars += (w[i] & 0xC0) != 0x80;
    if (chars > HS_WP_MAX_INPUT_CHARS) {
        ids_push(out, v->special.unk);
        return;
    }
    const size_t first = out->count;
    uint32_t prefix_hash[WP_PREFIX_HASHES + 1];
    size_t start = 0;
    while (start < len) {
        const int cont = start > 0;
        const uint32_t seed = cont ? v->cont_seed : HS_FNV32_OFFSET;
        /* no piece is longer than the longest token: start the search there, on a character boundary */
        size_t max_piece = cont ? v->max_len_cont : v->max_len_initial;
        size_t end = len - start > max_piece ? start + max_piece : len;
        while (end > start && end < len && (w[end] & 0xC0) == 0x80) end--;
        /* prefix_hash[k] = hash of the piece w[start .. start+k) */
        size_t kept = end - start < WP_PREFIX_HASHES ? end - start : WP_PREFIX_HASHES;
        uint32_t h = seed;
        prefix_hash[0] = h;
        for (size_t k = 0; k < kept; k++) prefix_hash[k + 1] = h = (h ^ w[start + k]) * HS_FNV32_PRIME;
        int found = -1;
        for (; end > start; end--) {
            if (end < len && (w[end] & 0xC0) == 0x80) continue; /* inside a character */
            size_t n = end - start;
            uint32_t hn = n <= kept ? prefix_hash[n] : hs_fnv1a32(seed, w + start, n);
            found = vocab_find(v, hn, cont, word + start, n);
            if (found >= 0) break;
        }
        if (found < 0) { /* the word cannot be covered: one [UNK] for all of it */
            out->count = first;
            ids_push(out, v->special.unk);
            return;
        }
        ids_push(out, found);
        start = end;
    }
}

typedef struct bert_ctx {
    const hs_vocab *v;
    hs_ids *out;
} bert_ctx;

static void wordpiece_emit(const char *word, size_t len, void *ctx) {
    bert_ctx *b = ctx;
    hs_wordpiece_word(b->v, word, len, b->out);
}

void hs_bert_tokenize(const hs_vocab *v, const char *text, size_t len, int do_lower_case, hs_ids *out) {
    bert_ctx b = {v, out};
    hs_basic_tokenize(text, len, do_lower_case, wordpiece_emit, &b);
}

void hs_ids_free(hs_ids *ids) {
    free(ids->ids);
    ids->ids = NULL;
    ids->count = ids->capacity = 0;
}
