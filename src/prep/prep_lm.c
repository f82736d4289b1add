/* `hetseq prep lm`: word-level language-model data for Transformer-XL (docs/data-formats.md,
 * "Language-model data"). Two ways in:
 *   WikiText  wiki.train.tokens, wiki.valid.tokens, wiki.test.tokens (space-separated words, one line per
 *             paragraph) -> the vocabulary of the train split (prep/lm_vocab.h: NVIDIA's Vocab) -> every
 *             split as one int32 stream of ids with <eos> at each line end -> <out>/lm.h5;
 *   raw text  ordinary UTF-8 files -> words, numbers and punctuation marks, one line per paragraph, a
 *             seeded split into train/valid/test -> the three WikiText files -> as above.
 * Rank 0 does all the work with the serial HDF5 driver while the other ranks sleep-wait (the counting is
 * one pass over text and the ids must follow the order of first occurrence, so it stays serial); every
 * rank returns rank 0's exit status, and the output is the same for any number of ranks. */
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utf8proc.h>

#include "prep/corpus.h"
#include "prep/text_files.h"
#include "prep/lm_vocab.h"
#include "prep/prep.h"
#include "prep/prep_args.h"
#include "prep/wordpiece.h"
#include "util/check.h"
#include "util/publish.h"
#include "util/dirlist.h"
#include "util/timer.h"

static const char *const USAGE =
    "usage: hetseq prep lm --in DIR --out DIR [--min-freq 0] [--max-size N] [--lower-case] [--skip-empty-lines]\n"
    "       hetseq prep lm --train FILE --valid FILE --test FILE --out DIR [same options]\n"
    "       hetseq prep lm --raw PATH... --out DIR [--valid-fraction 0.05] [--test-fraction 0.05] [--seed 12345]\n"
    "                      [--write-tokens DIR] [--min-freq 0] [--max-size N] [--lower-case]\n"
    "  --in DIR holds WikiText-format wiki.train.tokens, wiki.valid.tokens, wiki.test.tokens (--train/--valid/--test\n"
    "  name other files); --raw turns ordinary text files (directories are walked) into that format first.\n"
    "  Writes DIR/lm.h5: the vocabulary of the train split and every split as int32 token ids.";

static const char *const SPLIT_NAMES[3] = {"train", "valid", "test"};
static const char *const SPLIT_FILES[3] = {"wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens"};

#define LM_FORMAT "hetseq-lm-1"
#define ERR_LEN 4096

typedef struct lm_args {
    const char *in_dir, *split_path[3], *out_dir, *write_tokens;
    const char **raw; /* --raw paths */
    int n_raw;
    long long min_freq, max_size, seed;
    double fraction[3]; /* [1] valid, [2] test (raw mode) */
    int lower_case, skip_empty, raw_only_given;
} lm_args;

/* ---- the command line ---------------------------------------------------------------------------------------- */

static void parse_fraction(const char *opt, const char *val, double *out, char *err, size_t errlen) {
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || *end || end == val || !(v > 0.0 && v < 0.5))
        snprintf(err, errlen, "%s %s: expected a fraction of the paragraphs above 0 and below 0.5", opt, val);
    else *out = v;
}

static void take_option(void *args, const char *opt, const char *val, char *err, size_t errlen) {
    lm_args *a = args;
    if (!strcmp(opt, "--lower-case")) a->lower_case = 1;
    else if (!strcmp(opt, "--skip-empty-lines")) a->skip_empty = 1;
    else if (!strcmp(opt, "--raw")) {
        if (val) a->raw[a->n_raw++] = val;
        else snprintf(err, errlen, "--raw needs at least one text file or directory");
    } else if (!strcmp(opt, "--in")) a->in_dir = val;
    else if (!strcmp(opt, "--train")) a->split_path[0] = val;
    else if (!strcmp(opt, "--valid")) a->split_path[1] = val;
    else if (!strcmp(opt, "--test")) a->split_path[2] = val;
    else if (!strcmp(opt, "--out")) a->out_dir = val;
    else if (!strcmp(opt, "--min-freq")) hs_prep_parse_count(opt, val, 0, INT64_MAX / 2, &a->min_freq, err, errlen);
    else if (!strcmp(opt, "--max-size")) hs_prep_parse_count(opt, val, 0, INT32_MAX - 2, &a->max_size, err, errlen);
    else if (!strcmp(opt, "--seed")) {
        hs_prep_parse_count(opt, val, 0, INT64_MAX, &a->seed, err, errlen);
        a->raw_only_given = 1;
    } else if (!strcmp(opt, "--valid-fraction") || !strcmp(opt, "--test-fraction")) {
        parse_fraction(opt, val, &a->fraction[opt[2] == 'v' ? 1 : 2], err, errlen);
        a->raw_only_given = 1;
    } else if (!strcmp(opt, "--write-tokens")) {
        a->write_tokens = val;
        a->raw_only_given = 1;
    } else snprintf(err, errlen, "unknown option %s", opt);
}

static void check_required(void *args, char *err, size_t errlen) {
    lm_args *a = args;
    int named = a->split_path[0] || a->split_path[1] || a->split_path[2];
    if (!a->out_dir) {
        snprintf(err, errlen, "--out DIR is required (the directory lm.h5 is written to)");
    } else if (a->n_raw > 0 && (a->in_dir || named)) {
        snprintf(err, errlen, "--raw makes the three splits from ordinary text: it cannot be combined with --in, "
                              "--train, --valid or --test");
    } else if (a->n_raw == 0 && a->raw_only_given) {
        snprintf(err, errlen, "--valid-fraction, --test-fraction, --seed and --write-tokens belong to --raw PATH... "
                              "(making WikiText-format files from ordinary text)");
    } else if (a->n_raw == 0 && !a->in_dir && !(a->split_path[0] && a->split_path[1] && a->split_path[2])) {
        snprintf(err, errlen, "give --in DIR (a directory holding wiki.train.tokens, wiki.valid.tokens and "
                              "wiki.test.tokens), all three of --train/--valid/--test FILE, or --raw PATH... for "
                              "ordinary text");
    }
}

/* Identical on every rank: returns 0, -1 for --help, or 1 after rank 0 printed what is wrong. */
static int parse_args(int argc, char **argv, int rank, lm_args *a) {
    static const char *const flags[] = {"--lower-case", "--skip-empty-lines", NULL};
    const hs_prep_cli cli = {"lm", USAGE, flags, "--raw", take_option, check_required};
    memset(a, 0, sizeof *a);
    a->max_size = -1; /* unlimited, NVIDIA's max_size=None */
    a->seed = 12345;
    a->fraction[1] = a->fraction[2] = 0.05;
    HS_ALLOC(a->raw, argc > 1 ? argc : 1);
    return hs_prep_parse_args(&cli, argc, argv, rank, a);
}

/* ---- small helpers --------------------------------------------------------------------------------------------- */

/* mkdir -p: 0, or -1 with a message naming the option and the reason. */
static int make_dirs(const char *opt, const char *dir, char *err, size_t errlen) {
    char *p = HS_STRDUP(dir);
    int rc = 0;
    for (char *s = p + 1;; s++) {
        int end = *s == 0;
        if (*s == '/' || end) {
            *s = 0;
            struct stat st;
            if (stat(p, &st) == 0) {
                if (!S_ISDIR(st.st_mode)) {
                    snprintf(err, errlen, "cannot create %s %s: %s exists and is not a directory", opt, dir, p);
                    rc = -1;
                }
            } else if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                snprintf(err, errlen, "cannot create %s %s: %s: %s", opt, dir, p, strerror(errno));
                rc = -1;
            }
            if (rc || end) break;
            *s = '/';
        }
    }
    free(p);
    if (rc == 0 && access(dir, W_OK | X_OK) != 0) {
        snprintf(err, errlen, "cannot write to %s %s: %s", opt, dir, strerror(errno));
        rc = -1;
    }
    return rc;
}

/* Progress on long inputs: every ~2 s, MB done of the total and the rate. */
typedef struct progress {
    double started, last;
    long long done, total;
} progress;

static void progress_add(progress *p, long long bytes, const char *what, const char *path) {
    p->done += bytes;
    double now = hs_now();
    if (now - p->last < 2.0) return;
    p->last = now;
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    printf("| prep lm: %s %s: %.1f of %.1f MB (%.0f%%), %.1f MB/s\n", what, name, p->done / 1e6, p->total / 1e6,
           p->total ? 100.0 * (double)p->done / (double)p->total : 100.0,
           p->done / 1e6 / (now - p->started > 1e-9 ? now - p->started : 1e-9));
    fflush(stdout);
}

/* Line number (1-based) of byte offset `at`, for messages. */
static long long line_of(const char *text, size_t at) {
    long long line = 1;
    for (size_t i = 0; i < at; i++) line += text[i] == '\n';
    return line;
}

/* A whole text file mapped read-only; checked to be UTF-8 without NUL bytes. Returns 0, or -1 with a
 * message in err. *text is NULL for an empty file. */
static int map_text(const char *path, const char *what, const char **text, size_t *n, char *err, size_t errlen) {
    *text = NULL;
    *n = 0;
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "cannot read %s %s: %s", what, path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        snprintf(err, errlen, "%s %s is not a regular file", what, path);
        return -1;
    }
    *n = (size_t)st.st_size;
    if (*n == 0) {
        close(fd);
        return 0;
    }
    void *m = mmap(NULL, *n, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd);
    if (m == MAP_FAILED) {
        snprintf(err, errlen, "cannot read %s %s: %s", what, path, strerror(map_errno));
        return -1;
    }
    madvise(m, *n, MADV_SEQUENTIAL);
    const char *t = m;
    const char *nul = memchr(t, 0, *n);
    long long bad = nul ? -1 : hs_utf8_check(t, *n);
    if (nul || bad >= 0) {
        size_t at = nul ? (size_t)(nul - t) : (size_t)bad;
        if (nul)
            snprintf(err, errlen, "%s %s is not text: NUL byte at byte offset %zu (line %lld)", what, path, at,
                     line_of(t, at));
        else
            snprintf(err, errlen,
                     "%s %s is not UTF-8 text: invalid byte 0x%02X at byte offset %zu (line %lld); convert it "
                     "first, e.g. iconv -f LATIN1 -t UTF-8",
                     what, path, (unsigned)(unsigned char)t[at], at, line_of(t, at));
        munmap(m, *n);
        return -1;
    }
    *text = t;
    return 0;
}

static void unmap_text(const char *text, size_t n) {
    if (text) munmap((void *)text, n);
}

/* ---- raw text -> WikiText format ------------------------------------------------------------------------------- */

/* The raw text's files: given files as they are, directories walked in name order (hidden entries and
 * symlinked directories skipped, binary files skipped with one note per directory); a file reached twice
 * (a symlink such as the fortunes' *.u8) counts once. */
static int list_raw(const lm_args *a, hs_text_files *fl, char *err, size_t errlen) {
    memset(fl, 0, sizeof *fl);
    for (int i = 0; i < a->n_raw; i++) {
        struct stat st;
        if (stat(a->raw[i], &st) != 0) {
            snprintf(err, errlen, "cannot read --raw %s: %s", a->raw[i], strerror(errno));
            return -1;
        }
        if (S_ISDIR(st.st_mode)) {
            hs_binary_skips skips = {0};
            int rc = hs_text_files_walk(a->raw[i], 0, fl, &skips, err, errlen);
            if (rc == 0 && skips.count > 0)
                fprintf(stderr, "hetseq: warning: prep lm: skipped %lld binary file%s in %s (e.g. %s: NUL byte at "
                                "byte offset %lld)\n",
                        skips.count, skips.count == 1 ? "" : "s", a->raw[i], skips.example, skips.example_nul_at);
            hs_binary_skips_free(&skips);
            if (rc != 0) return -1;
        } else {
            hs_text_files_add(fl, HS_STRDUP(a->raw[i]), &st);
        }
    }
    if (fl->n == 0) {
        snprintf(err, errlen, "--raw names no text file (only empty directories, or binary files?)");
        return -1;
    }
    return 0;
}

/* Raw tokenisation of one line into `out` (tokens separated by one space; returns the number of tokens):
 *   - a word is a maximal run of letters (L*), combining marks (M*) and digits/numbers (N*), case kept;
 *   - every other visible character (punctuation P*, symbols S*, private use) is a token by itself;
 *   - whitespace (Python's, and Z*), control (Cc) and format (Cf) characters separate tokens;
 *   - a backspace overstrikes: it removes the character before it (the fortune files' underlining and
 *     bold, "_\bA" and "A\bA", become "A").
 * *words counts the word tokens: a line without any (blank, or only punctuation and symbols such as the
 * fortune files' "%" separators and ASCII-art rules) is not a paragraph. */
typedef struct line_buf {
    uint32_t *cp;
    size_t n, cap;
    char *out;
    size_t out_len, out_cap;
} line_buf;

enum { CH_SEP, CH_WORD, CH_MARK };
static int char_class(uint32_t cp) {
    if (cp < 0x80) {
        if (cp <= 0x20 || cp == 0x7F) return CH_SEP;
        if ((cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z')) return CH_WORD;
        return CH_MARK;
    }
    if (hs_lm_is_space(cp)) return CH_SEP;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return CH_WORD;
    case UTF8PROC_CATEGORY_ZS: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP: case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS: case UTF8PROC_CATEGORY_CN:
        return CH_SEP;
    default:
        return CH_MARK;
    }
}

static void out_put(line_buf *b, uint32_t cp) {
    if (b->out_len + 5 > b->out_cap) {
        b->out_cap = b->out_cap ? 2 * b->out_cap : 4096;
        b->out = hs_xrealloc(b->out, b->out_cap, __FILE__, __LINE__);
    }
    b->out_len += (size_t)utf8proc_encode_char((utf8proc_int32_t)cp, (utf8proc_uint8_t *)b->out + b->out_len);
}

static size_t raw_tokenize_line(const char *line, size_t len, line_buf *b, size_t *words) {
    /* decode, applying backspaces */
    b->n = 0;
    if (len + 1 > b->cap) {
        b->cap = 2 * len + 16;
        HS_REALLOC(b->cp, b->cap);
    }
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)line + i, (utf8proc_ssize_t)(len - i), &cp);
        if (k <= 0) HS_FATAL("report this as a bug", "invalid UTF-8 after the check, at byte %zu of a line", i);
        i += (size_t)k;
        if (cp == 0x08) {
            if (b->n > 0) b->n--;
        } else {
            b->cp[b->n++] = (uint32_t)cp;
        }
    }
    b->out_len = 0;
    *words = 0;
    size_t tokens = 0;
    int prev = CH_SEP;
    for (size_t i = 0; i < b->n; i++) {
        int c = char_class(b->cp[i]);
        if (c == CH_SEP) {
            prev = c;
            continue;
        }
        /* a new token starts unless this continues a word */
        if (!(c == CH_WORD && prev == CH_WORD)) {
            if (tokens++ > 0) out_put(b, ' ');
            *words += c == CH_WORD;
        }
        out_put(b, b->cp[i]);
        prev = c;
    }
    return tokens;
}

/* splitmix64: the seeded choice of valid/test paragraphs (a fixed, documented generator, so a seed gives
 * the same split on every machine). */
static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Raw text -> wiki.{train,valid,test}.tokens in tokens_dir. A paragraph is one input line holding at least
 * one word or number (other lines are dropped); --valid-fraction and --test-fraction of the paragraphs
 * (rounded, at least one each) are chosen by a seeded shuffle and keep their order inside their split.
 * Two passes over the files: count the paragraphs, then write each to its split. Returns 0, or -1 with a
 * message in err. */
static int raw_to_wikitext(const lm_args *a, const char *tokens_dir, char *err, size_t errlen) {
    hs_text_files fl;
    if (list_raw(a, &fl, err, errlen) != 0) {
        hs_text_files_free(&fl);
        return -1;
    }
    long long total_bytes = 0;
    for (int i = 0; i < fl.n; i++) total_bytes += fl.bytes[i];
    printf("| prep lm: raw text: %d file%s, %.1f MB; paragraphs are lines, tokens are words, numbers and "
           "punctuation marks\n",
           fl.n, fl.n == 1 ? "" : "s", total_bytes / 1e6);
    fflush(stdout);

    line_buf lb = {0};
    int rc = -1;
    uint8_t *which = NULL;
    FILE *out[3] = {NULL, NULL, NULL};
    char *out_path[3] = {NULL, NULL, NULL};
    long long paragraphs = 0, per_split[3] = {0, 0, 0}, tokens_per_split[3] = {0, 0, 0};
    for (int pass = 0; pass < 2; pass++) {
        progress pr = {hs_now(), hs_now(), 0, total_bytes};
        long long p = 0;
        for (int f = 0; f < fl.n; f++) {
            const char *text;
            size_t n;
            if (map_text(fl.path[f], "--raw file", &text, &n, err, errlen) != 0) goto done;
            size_t at = 0, shown = 0;
            while (at < n) {
                size_t len, next = hs_lm_next_line(text, n, at, &len);
                size_t words, t = raw_tokenize_line(text + at, len, &lb, &words);
                if (words > 0) {
                    if (pass == 1) {
                        int s = which[p];
                        lb.out[lb.out_len] = 0;
                        if (fputs(lb.out, out[s]) == EOF || fputc('\n', out[s]) == EOF) {
                            snprintf(err, errlen, "cannot write %s: %s", out_path[s], strerror(errno));
                            unmap_text(text, n);
                            goto done;
                        }
                        per_split[s]++;
                        tokens_per_split[s] += (long long)t;
                    }
                    p++;
                }
                at = next;
                if (at - shown > (1u << 20)) {
                    progress_add(&pr, (long long)(at - shown), pass ? "raw text, writing" : "raw text, counting",
                                 fl.path[f]);
                    shown = at;
                }
            }
            pr.done += (long long)(n - shown);
            unmap_text(text, n);
        }
        if (pass == 1) break;

        paragraphs = p;
        long long want[3] = {0, 0, 0};
        for (int s = 1; s < 3; s++) {
            want[s] = llround(a->fraction[s] * (double)paragraphs);
            if (want[s] < 1) want[s] = 1;
        }
        if (want[1] + want[2] >= paragraphs) {
            snprintf(err, errlen,
                     "the raw text has %lld paragraph%s (lines with words or numbers): too few to give valid (%lld) and test "
                     "(%lld) paragraphs and still train on some; give more text%s",
                     paragraphs, paragraphs == 1 ? "" : "s", want[1], want[2],
                     paragraphs > 2 ? " or smaller --valid-fraction / --test-fraction" : "");
            goto done;
        }
        /* Fisher-Yates over the paragraph numbers; the first want[1] go to valid, the next want[2] to test */
        int64_t *perm;
        HS_ALLOC(perm, paragraphs);
        HS_ALLOC(which, paragraphs);
        for (int64_t i = 0; i < paragraphs; i++) perm[i] = i;
        uint64_t state = (uint64_t)a->seed;
        for (int64_t i = paragraphs - 1; i > 0; i--) {
            int64_t j = (int64_t)(splitmix64(&state) % (uint64_t)(i + 1));
            int64_t t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        for (int64_t k = 0; k < want[1] + want[2]; k++) which[perm[k]] = k < want[1] ? 1 : 2;
        free(perm);
        for (int s = 0; s < 3; s++) {
            out_path[s] = hs_path_join(tokens_dir, SPLIT_FILES[s]);
            out[s] = fopen(out_path[s], "w");
            if (!out[s]) {
                snprintf(err, errlen, "cannot write %s: %s", out_path[s], strerror(errno));
                goto done;
            }
            setvbuf(out[s], NULL, _IOFBF, 1 << 20);
        }
    }
    for (int s = 0; s < 3; s++) {
        int bad = fclose(out[s]) != 0;
        out[s] = NULL;
        if (bad) {
            snprintf(err, errlen, "cannot write %s: %s (is the disk full?)", out_path[s], strerror(errno));
            goto done;
        }
    }
    printf("| prep lm: %lld paragraphs -> train %lld (%lld tokens), valid %lld (%lld), test %lld (%lld), seed %lld; "
           "WikiText-format files in %s\n",
           paragraphs, per_split[0], tokens_per_split[0], per_split[1], tokens_per_split[1], per_split[2],
           tokens_per_split[2], a->seed, tokens_dir);
    fflush(stdout);
    rc = 0;
done:
    for (int s = 0; s < 3; s++) {
        if (out[s]) fclose(out[s]);
        free(out_path[s]);
    }
    free(which);
    free(lb.cp);
    free(lb.out);
    hs_text_files_free(&fl);
    return rc;
}

/* ---- WikiText format -> token ids ------------------------------------------------------------------------------ */

/* Until the vocabulary is known a split is a stream of codes: the train table's word number, or one of: */
#define CODE_EOS (-1) /* <eos>: a line end, or the word "<eos>" */
#define CODE_OOV (-2) /* a valid/test word the train split does not have */

typedef struct split_codes {
    int32_t *v;
    size_t n, cap;
    long long lines, words, empty_lines;
} split_codes;

static void codes_push(split_codes *c, int32_t code) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 1 << 16;
        HS_REALLOC(c->v, c->cap);
    }
    c->v[c->n++] = code;
}

typedef struct encoder {
    hs_strtab *table;
    int count; /* train: add the words and count them; else look them up */
    int lower;
    char *low;
    size_t low_cap;
    split_codes *out;
    int too_many; /* more distinct words than int32 ids */
} encoder;

static void encode_word(const char *w, size_t len, void *ctx) {
    encoder *e = ctx;
    if (e->lower) {
        len = hs_lm_lower(w, len, &e->low, &e->low_cap);
        w = e->low;
    }
    int64_t k = hs_strtab_find(e->table, w, len, e->count);
    int32_t code;
    if (k >= 0) {
        if (e->count) hs_strtab_add_count(e->table, k, 1);
        if (k >= INT32_MAX - 2) e->too_many = 1;
        code = (int32_t)k;
    } else {
        code = len == strlen(HS_LM_EOS) && !memcmp(w, HS_LM_EOS, len) ? CODE_EOS : CODE_OOV;
    }
    codes_push(e->out, code);
    e->out->words++;
}

/* One WikiText-format file into codes: every line split as NVIDIA's tokenize(add_eos=True), i.e. its
 * words then <eos>; an empty line gives a lone <eos> unless --skip-empty-lines. */
static int encode_file(const lm_args *a, int split, const char *path, hs_strtab *table, split_codes *out,
                       progress *pr, char *err, size_t errlen) {
    char what[32];
    snprintf(what, sizeof what, "the %s split", SPLIT_NAMES[split]);
    const char *text;
    size_t n;
    if (map_text(path, what, &text, &n, err, errlen) != 0) return -1;
    encoder e = {table, split == 0, a->lower_case, NULL, 0, out, 0};
    size_t at = 0, shown = 0;
    while (at < n) {
        size_t len, next = hs_lm_next_line(text, n, at, &len);
        size_t words = hs_lm_split_words(text + at, len, encode_word, &e);
        out->lines++;
        if (words == 0) out->empty_lines++;
        if (words > 0 || !a->skip_empty) codes_push(out, CODE_EOS);
        at = next;
        if (at - shown > (1u << 20)) {
            progress_add(pr, (long long)(at - shown), split == 0 ? "counting" : "reading", path);
            shown = at;
        }
        if (e.too_many) break;
    }
    pr->done += (long long)(n - shown);
    unmap_text(text, n);
    free(e.low);
    if (e.too_many) {
        snprintf(err, errlen, "%s has more than %d distinct words: token ids are int32", path, INT32_MAX - 2);
        return -1;
    }
    if (out->words == 0) {
        if (n == 0)
            snprintf(err, errlen, "the %s split is empty: %s is an empty file; every split needs words (fill it, or "
                                  "give another file with --%s FILE)",
                     SPLIT_NAMES[split], path, SPLIT_NAMES[split]);
        else
            snprintf(err, errlen, "the %s split is empty: %s holds no words (%lld line%s, all blank); every split "
                                  "needs words (fill it, or give another file with --%s FILE)",
                     SPLIT_NAMES[split], path, out->lines, out->lines == 1 ? "" : "s", SPLIT_NAMES[split]);
        return -1;
    }
    return 0;
}

/* ---- lm.h5 ---------------------------------------------------------------------------------------------------- */

static const char *g_tmp_path; /* removed if a library failure ends the run mid-write */
static void remove_tmp(void *arg) {
    (void)arg;
    if (g_tmp_path) unlink(g_tmp_path);
}

static void put_attr_i64(hid_t obj, const char *name, long long value) {
    hid_t space = (hid_t)HS_H5(H5Screate(H5S_SCALAR), NULL);
    hid_t at = (hid_t)HS_H5(H5Acreate2(obj, name, H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT), NULL);
    int64_t v = value;
    HS_H5(H5Awrite(at, H5T_NATIVE_INT64, &v), NULL);
    HS_H5(H5Aclose(at), NULL);
    HS_H5(H5Sclose(space), NULL);
}

/* A variable-length UTF-8 string type (h5py reads it as str with .asstr()). */
static hid_t vlen_utf8(void) {
    hid_t t = (hid_t)HS_H5(H5Tcopy(H5T_C_S1), NULL);
    HS_H5(H5Tset_size(t, H5T_VARIABLE), NULL);
    HS_H5(H5Tset_cset(t, H5T_CSET_UTF8), NULL);
    return t;
}

/* Objects carry no modification times, so the same input always gives the same bytes. */
static hid_t untimed(hid_t cls) {
    hid_t p = (hid_t)HS_H5(H5Pcreate(cls), NULL);
    HS_H5(H5Pset_obj_track_times(p, 0), NULL);
    return p;
}

static int write_h5(const lm_args *a, const char *out_path, const hs_lm_vocab *v, split_codes *sc, char *err,
                    size_t errlen) {
    size_t tmp_len = strlen(out_path) + 5;
    char *tmp;
    HS_ALLOC(tmp, tmp_len);
    snprintf(tmp, tmp_len, "%s.tmp", out_path);
    hid_t fcpl = untimed(H5P_FILE_CREATE);
    hid_t fapl = (hid_t)HS_H5(H5Pcreate(H5P_FILE_ACCESS), NULL);
    HS_H5(H5Pset_fapl_sec2(fapl), NULL); /* one writer: the serial POSIX driver */
    hid_t file = H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, fapl);
    HS_H5(H5Pclose(fapl), NULL);
    HS_H5(H5Pclose(fcpl), NULL);
    if (file < 0) {
        H5Eclear2(H5E_DEFAULT);
        snprintf(err, errlen, "cannot create %s: is --out writable?", tmp);
        free(tmp);
        return -1;
    }
    g_tmp_path = tmp;
    hs_check_on_fatal(remove_tmp, NULL);
    hid_t dcpl = untimed(H5P_DATASET_CREATE);
    for (int s = 0; s < 3; s++) { /* /train, /valid, /test: int32 [N], contiguous (one run = one byte range) */
        hsize_t dims[1] = {(hsize_t)sc[s].n};
        hid_t space = (hid_t)HS_H5(H5Screate_simple(1, dims, NULL), NULL);
        hid_t ds = (hid_t)HS_H5(H5Dcreate2(file, SPLIT_NAMES[s], H5T_STD_I32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
                                NULL);
        HS_H5(H5Dwrite(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, sc[s].v), "is the disk full?");
        HS_H5(H5Dclose(ds), NULL);
        HS_H5(H5Sclose(space), NULL);
    }
    { /* /vocab: string [V], id = index */
        hsize_t dims[1] = {(hsize_t)v->size};
        hid_t space = (hid_t)HS_H5(H5Screate_simple(1, dims, NULL), NULL);
        hid_t type = vlen_utf8();
        hid_t ds = (hid_t)HS_H5(H5Dcreate2(file, "vocab", type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), NULL);
        HS_H5(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, v->words), "is the disk full?");
        HS_H5(H5Dclose(ds), NULL);
        HS_H5(H5Tclose(type), NULL);
        HS_H5(H5Sclose(space), NULL);
    }
    HS_H5(H5Pclose(dcpl), NULL);
    {
        hid_t space = (hid_t)HS_H5(H5Screate(H5S_SCALAR), NULL);
        hid_t type = vlen_utf8();
        hid_t at = (hid_t)HS_H5(H5Acreate2(file, "format", type, space, H5P_DEFAULT, H5P_DEFAULT), NULL);
        const char *fmt = LM_FORMAT;
        HS_H5(H5Awrite(at, type, &fmt), NULL);
        HS_H5(H5Aclose(at), NULL);
        HS_H5(H5Tclose(type), NULL);
        HS_H5(H5Sclose(space), NULL);
    }
    put_attr_i64(file, "vocab_size", v->size);
    put_attr_i64(file, "eos_id", v->eos_id);
    put_attr_i64(file, "unk_id", v->unk_id);
    put_attr_i64(file, "lower_case", a->lower_case);
    put_attr_i64(file, "min_freq", a->min_freq);
    put_attr_i64(file, "max_size", a->max_size);
    put_attr_i64(file, "skip_empty_lines", a->skip_empty);
    HS_H5(H5Fclose(file), "is the disk full?");

    int rc = 0;
    if (hs_publish_file(tmp, out_path) != 0) {
        snprintf(err, errlen, "cannot move %s to %s: %s", tmp, out_path, strerror(errno));
        unlink(tmp);
        rc = -1;
    }
    hs_check_on_fatal(NULL, NULL);
    g_tmp_path = NULL;
    free(tmp);
    return rc;
}

/* ---- rank 0's work ----------------------------------------------------------------------------------------------- */

static void remove_tokens_dir(const char *dir) {
    for (int s = 0; s < 3; s++) {
        char *p = hs_path_join(dir, SPLIT_FILES[s]);
        unlink(p);
        free(p);
    }
    rmdir(dir);
}

static int run(const lm_args *a) {
    double started = hs_now();
    char err[ERR_LEN] = "";
    int status = 1;
    char *paths[3] = {NULL, NULL, NULL}, *tokens_tmp = NULL, *out_path = NULL;
    split_codes sc[3];
    memset(sc, 0, sizeof sc);
    hs_strtab *table = NULL;
    hs_lm_vocab v = {0};

    size_t out_len = strlen(a->out_dir);
    struct stat out_st;
    if (out_len > 3 && !strcmp(a->out_dir + out_len - 3, ".h5") &&
        !(stat(a->out_dir, &out_st) == 0 && S_ISDIR(out_st.st_mode))) {
        snprintf(err, sizeof err, "--out %s: --out is the directory lm.h5 is written to (the task's data.path), "
                                  "not the file; give its directory", a->out_dir);
        goto fail;
    }
    if (make_dirs("--out", a->out_dir, err, sizeof err) != 0) goto fail;
    out_path = hs_path_join(a->out_dir, "lm.h5");

    if (a->n_raw > 0) {
        const char *dir = a->write_tokens;
        if (dir) {
            if (make_dirs("--write-tokens", dir, err, sizeof err) != 0) goto fail;
        } else {
            dir = tokens_tmp = hs_path_join(a->out_dir, ".lm-tokens.tmp");
            if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
                snprintf(err, sizeof err, "cannot create %s: %s", dir, strerror(errno));
                goto fail;
            }
        }
        if (raw_to_wikitext(a, dir, err, sizeof err) != 0) goto fail;
        for (int s = 0; s < 3; s++) paths[s] = hs_path_join(dir, SPLIT_FILES[s]);
    } else {
        for (int s = 0; s < 3; s++)
            paths[s] = a->split_path[s] ? HS_STRDUP(a->split_path[s]) : hs_path_join(a->in_dir, SPLIT_FILES[s]);
    }
    /* every input is there before any work */
    long long total = 0;
    for (int s = 0; s < 3; s++) {
        struct stat st;
        int missing = stat(paths[s], &st) != 0;
        if (missing || !S_ISREG(st.st_mode)) {
            const char *why = missing ? strerror(errno) : "not a regular file";
            if (a->split_path[s])
                snprintf(err, sizeof err, "cannot read --%s %s: %s", SPLIT_NAMES[s], paths[s], why);
            else
                snprintf(err, sizeof err,
                         "cannot read the %s split %s: %s; --in DIR must hold wiki.train.tokens, wiki.valid.tokens "
                         "and wiki.test.tokens (WikiText-103's names), or name the files with --train/--valid/--test "
                         "FILE (or make them from ordinary text with --raw PATH...)",
                         SPLIT_NAMES[s], paths[s], why);
            goto fail;
        }
        total += (long long)st.st_size;
    }

    char max_size[32] = "unlimited";
    if (a->max_size >= 0) snprintf(max_size, sizeof max_size, "%lld", a->max_size);
    printf("| prep lm: vocabulary from %s (%s%s, min_freq %lld, max_size %s)\n", paths[0],
           a->lower_case ? "lower-cased" : "cased", a->skip_empty ? ", empty lines skipped" : "", a->min_freq,
           max_size);
    fflush(stdout);
    progress pr = {hs_now(), hs_now(), 0, total};
    table = hs_strtab_new();
    for (int s = 0; s < 3; s++)
        if (encode_file(a, s, paths[s], table, &sc[s], &pr, err, sizeof err) != 0) goto fail;

    if (hs_lm_vocab_build(table, a->min_freq, a->max_size, &v) != 0) {
        snprintf(err, sizeof err, "the vocabulary would exceed %d words; set --max-size", INT32_MAX - 2);
        goto fail;
    }
    /* Which tokens have no id: valid/test words the train split lacks, and words cut by --min-freq /
     * --max-size. They become <unk>: the word "<unk>" when the vocabulary has it (WikiText), else a
     * special "<unk>" added right after <eos>. */
    long long unknown[3] = {0, 0, 0};
    for (int s = 0; s < 3; s++)
        for (size_t i = 0; i < sc[s].n; i++) {
            int32_t c = sc[s].v[i];
            unknown[s] += c == CODE_OOV || (c >= 0 && v.id_of[c] < 0);
        }
    int added_unk = 0;
    if ((unknown[0] || unknown[1] || unknown[2]) && v.unk_id < 0) {
        hs_lm_vocab_add_unk(&v);
        added_unk = 1;
    }
    for (int s = 0; s < 3; s++)
        for (size_t i = 0; i < sc[s].n; i++) {
            int32_t c = sc[s].v[i];
            sc[s].v[i] = c == CODE_EOS ? v.eos_id : c == CODE_OOV || v.id_of[c] < 0 ? v.unk_id : v.id_of[c];
        }
    printf("| prep lm: vocabulary %d words (%lld distinct in train, %lld cut by --min-freq/--max-size)%s; "
           "eos_id %d, unk_id %d\n",
           v.size, (long long)v.n_counted, (long long)v.n_cut,
           added_unk ? ", <unk> added as id 1 (the text has no <unk> word)" : "", v.eos_id, v.unk_id);
    for (int s = 0; s < 3; s++)
        printf("| prep lm: %-5s %12lld tokens (%lld lines, %lld of them empty%s), %lld mapped to <unk> (%.2f%%)\n",
               SPLIT_NAMES[s], (long long)sc[s].n, sc[s].lines, sc[s].empty_lines,
               a->skip_empty ? " and skipped" : ": one <eos> each", unknown[s],
               sc[s].n ? 100.0 * (double)unknown[s] / (double)sc[s].n : 0.0);
    fflush(stdout);

    if (write_h5(a, out_path, &v, sc, err, sizeof err) != 0) goto fail;
    printf("| prep lm: wrote %s in %.1f s\n", out_path, hs_now() - started);
    fflush(stdout);
    status = 0;
    goto done;
fail:
    fprintf(stderr, "hetseq: error: prep lm: %s\n", err);
    fflush(stderr);
done:
    if (tokens_tmp) remove_tokens_dir(tokens_tmp);
    for (int s = 0; s < 3; s++) {
        free(paths[s]);
        free(sc[s].v);
    }
    hs_lm_vocab_free(&v);
    hs_strtab_free(table);
    free(tokens_tmp);
    free(out_path);
    return status;
}

int hs_prep_lm_main(int argc, char **argv, const hs_comm *comm) {
    lm_args a;
    int parsed = parse_args(argc, argv, comm->rank, &a);
    if (parsed != 0) {
        free(a.raw);
        return parsed < 0 ? 0 : 1;
    }
    HS_H5(H5Eset_auto2(H5E_DEFAULT, NULL, NULL), NULL);
    int status = comm->rank == 0 ? run(&a) : 0;
    free(a.raw);
    return hs_comm_share_status(comm, status);
}
