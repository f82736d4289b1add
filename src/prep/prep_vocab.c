/* `hetseq prep vocab`: learns a WordPiece vocabulary from UTF-8 text files. The files (directories
 * walked) are listed by rank 0 and shared among the ranks by size; each rank splits its files into
 * words with BERT's basic tokenizer and counts them in a hash table; rank 0 adds the tables up, learns
 * the vocabulary (prep/vocab_learn.h) and writes vocab.txt while the other ranks wait. The learnt
 * vocabulary depends only on the word counts, so it is the same for any number of ranks. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "prep/corpus.h"
#include "prep/text_files.h"
#include "prep/prep.h"
#include "prep/prep_args.h"
#include "prep/vocab_learn.h"
#include "prep/word_counts.h"
#include "prep/wordpiece.h"
#include "util/check.h"
#include "util/dirlist.h"
#include "util/timer.h"

static const char *const USAGE =
    "usage: hetseq prep vocab --corpus PATH... --size N --out vocab.txt [--cased] [--min-frequency 2]\n"
    "                         [--limit-alphabet 1000] [--strict]";

typedef struct vocab_args {
    const char **corpus; /* files or directories */
    int n_corpus;
    const char *out;
    long long size, min_frequency, limit_alphabet;
    int cased, strict;
} vocab_args;

static void take_option(void *args, const char *opt, const char *val, char *err, size_t errlen) {
    vocab_args *a = args;
    if (!strcmp(opt, "--cased")) a->cased = 1;
    else if (!strcmp(opt, "--strict")) a->strict = 1;
    else if (!strcmp(opt, "--corpus")) { /* one or more paths, up to the next option */
        if (val) a->corpus[a->n_corpus++] = val;
        else snprintf(err, errlen, "--corpus needs at least one file or directory");
    } else if (!strcmp(opt, "--out")) a->out = val;
    else if (!strcmp(opt, "--size"))
        hs_prep_parse_count(opt, val, HS_VOCAB_N_SPECIAL + 1, INT32_MAX / 2, &a->size, err, errlen);
    else if (!strcmp(opt, "--min-frequency"))
        hs_prep_parse_count(opt, val, 1, INT64_MAX / 2, &a->min_frequency, err, errlen);
    else if (!strcmp(opt, "--limit-alphabet"))
        hs_prep_parse_count(opt, val, 1, 0x110000, &a->limit_alphabet, err, errlen);
    else snprintf(err, errlen, "unknown option %s", opt);
}

static void check_required(void *args, char *err, size_t errlen) {
    const vocab_args *a = args;
    if (a->n_corpus == 0) snprintf(err, errlen, "--corpus PATH... is required (text files or directories of them)");
    else if (!a->size) snprintf(err, errlen, "--size N is required (tokens in the vocabulary, e.g. 30522 as BERT's)");
    else if (!a->out) snprintf(err, errlen, "--out FILE is required (where vocab.txt goes)");
}

/* Identical on every rank: returns 0, -1 for --help, or 1 after rank 0 printed what is wrong. */
static int parse_args(int argc, char **argv, int rank, vocab_args *a) {
    static const char *const flags[] = {"--cased", "--strict", NULL};
    const hs_prep_cli cli = {"vocab", USAGE, flags, "--corpus", take_option, check_required};
    memset(a, 0, sizeof *a);
    a->min_frequency = 2; /* the defaults of BertWordPieceTokenizer.train */
    a->limit_alphabet = 1000;
    HS_ALLOC(a->corpus, argc > 1 ? argc : 1);
    return hs_prep_parse_args(&cli, argc, argv, rank, a);
}

/* ---- the file list (rank 0) ------------------------------------------------------------------------ */

/* --out must be a file we can create in a directory we can write: checked before any counting. The file
 * is replaced through a temporary name and a rename, which would also replace a device or a directory
 * entry of another kind, so only a regular file (or nothing) may be there. */
static int check_out(const char *out, char *err, size_t errlen) {
    struct stat st;
    if (stat(out, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "--out %s exists and is not a regular file; give the path of a vocab.txt to write", out);
        return -1;
    }
    char *dir = HS_STRDUP(out);
    char *slash = strrchr(dir, '/');
    const char *d = slash ? (slash == dir ? "/" : (*slash = 0, dir)) : ".";
    int rc = access(d, W_OK | X_OK);
    if (rc != 0) snprintf(err, errlen, "cannot write --out %s: directory %s: %s", out, d, strerror(errno));
    free(dir);
    return rc == 0 ? 0 : -1;
}

/* The corpus files. Returns the count, or -1 with a message in err. */
static int plan_files(const vocab_args *a, hs_text_files *fl, char *err, size_t errlen) {
    memset(fl, 0, sizeof *fl);
    long long binary_skipped = 0;
    if (check_out(a->out, err, errlen) != 0) return -1;
    for (int i = 0; i < a->n_corpus; i++) {
        struct stat st;
        if (stat(a->corpus[i], &st) != 0) {
            snprintf(err, errlen, "cannot read --corpus %s: %s", a->corpus[i], strerror(errno));
            return -1;
        }
        if (S_ISDIR(st.st_mode)) {
            hs_binary_skips skips = {0};
            int rc = hs_text_files_walk(a->corpus[i], a->strict, fl, &skips, err, errlen);
            char note[2048];
            if (rc == 0 && hs_binary_skips_message(&skips, a->corpus[i], note, sizeof note))
                fprintf(stderr, "hetseq: warning: prep vocab: %s\n", note);
            binary_skipped += skips.count;
            hs_binary_skips_free(&skips);
            if (rc != 0) return -1;
        } else {
            hs_text_files_add(fl, HS_STRDUP(a->corpus[i]), &st);
        }
    }
    if (fl->n == 0 && binary_skipped > 0) {
        snprintf(err, errlen, "the corpus holds no text: its directories hold only binary files (%lld skipped)",
                 binary_skipped);
        return -1;
    }
    if (fl->n == 0) {
        snprintf(err, errlen, "the corpus is empty: --corpus names no file (only empty directories?)");
        return -1;
    }
    return fl->n;
}

/* ---- counting words ---------------------------------------------------------------------------------- */

typedef struct count_stats {
    long long bytes, files_read, files_skipped, strict_failures;
} count_stats;

static void count_word(const char *word, size_t len, void *ctx) { hs_word_counts_add(ctx, word, len, 1); }

/* Text is split at line ends into pieces of about this size: the basic tokenizer never joins across a
 * line end, and progress can be shown inside a large file. */
#define PIECE_BYTES (8u << 20)

typedef struct progress_state {
    int show;
    double started, last;
    long long done, share;
} progress_state;

static void show_counting(progress_state *ps, long long add) {
    ps->done += add;
    if (!ps->show) return;
    double now = hs_now();
    if (now - ps->last < 2.0) return;
    ps->last = now;
    printf("| prep vocab: counting words: %.1f of %.1f MB (%.0f%%) on rank 0, %.1f MB/s\n", ps->done / 1e6,
           ps->share / 1e6, ps->share ? 100.0 * (double)ps->done / (double)ps->share : 100.0,
           ps->done / 1e6 / (now - ps->started > 1e-9 ? now - ps->started : 1e-9));
    fflush(stdout);
}

/* Counts one file's words into wc. A file that cannot be read or is not UTF-8 is reported (an error
 * with --strict, else a warning) and contributes nothing. */
static void count_file(const char *path, const vocab_args *a, hs_word_counts *wc, count_stats *cs,
                       progress_state *ps) {
    const char *what = a->strict ? "hetseq: error: prep vocab" : "hetseq: warning: prep vocab";
    const char *then = a->strict ? "" : "; skipped (--strict makes this an error)";
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "%s: cannot read %s: %s%s\n", what, path, strerror(errno), then);
        if (fd >= 0) close(fd);
        goto bad;
    }
    size_t n = (size_t)st.st_size;
    if (n == 0) {
        close(fd);
        cs->files_read++;
        return;
    }
    const char *text = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd);
    if (text == MAP_FAILED) {
        fprintf(stderr, "%s: cannot read %s: %s%s\n", what, path, strerror(map_errno), then);
        goto bad;
    }
    madvise((void *)text, n, MADV_SEQUENTIAL);
    const char *nul = memchr(text, 0, n); /* valid UTF-8, but a binary file (an index, an image) */
    if (nul) {
        fprintf(stderr, "%s: %s is binary, not text: NUL byte at byte offset %lld%s\n", what, path,
                (long long)(nul - text), then);
        munmap((void *)text, n);
        goto bad;
    }
    long long bad_at = hs_utf8_check(text, n);
    if (bad_at >= 0) {
        fprintf(stderr, "%s: %s is not UTF-8 text: invalid byte 0x%02X at byte offset %lld%s\n", what, path,
                (unsigned)(unsigned char)text[bad_at], bad_at, then);
        munmap((void *)text, n);
        goto bad;
    }
    for (size_t at = 0; at < n;) {
        size_t end = n - at > PIECE_BYTES ? at + PIECE_BYTES : n;
        while (end < n && text[end - 1] != '\n') end++;
        hs_basic_tokenize(text + at, end - at, !a->cased, count_word, wc);
        show_counting(ps, (long long)(end - at));
        at = end;
    }
    munmap((void *)text, n);
    cs->bytes += (long long)n;
    cs->files_read++;
    return;
bad:
    fflush(stderr);
    cs->files_skipped++;
    if (a->strict) cs->strict_failures++;
}

/* ---- ranks ----------------------------------------------------------------------------------------------- */

/* Files for this rank: largest first to the least loaded rank (ties: lower rank), so ranks get about
 * equal bytes. Every rank computes the same assignment from the same list. */
static int *assign_files(const long long *bytes, int n, int ranks) {
    int *order, *owner;
    long long *load;
    HS_ALLOC(order, n);
    HS_ALLOC(owner, n);
    HS_ALLOC(load, ranks);
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = 1; i < n; i++) { /* insertion sort by size, descending; index breaks ties */
        int v = order[i], j = i;
        while (j > 0 && (bytes[order[j - 1]] < bytes[v] || (bytes[order[j - 1]] == bytes[v] && order[j - 1] > v))) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = v;
    }
    for (int k = 0; k < n; k++) {
        int best = 0;
        for (int r = 1; r < ranks; r++)
            if (load[r] < load[best]) best = r;
        owner[order[k]] = best;
        load[best] += bytes[order[k]] + 1;
    }
    free(order);
    free(load);
    return owner;
}

#define MSG_CHUNK (1 << 30) /* MPI counts are int: send large tables in pieces */

/* Rank 0 adds every other rank's packed table to wc. */
static void gather_counts(const hs_comm *comm, hs_word_counts *wc) {
    char *mine = NULL;
    size_t mine_bytes = 0;
    if (comm->rank != 0) hs_word_counts_pack(wc, &mine, &mine_bytes);
    uint64_t my_size = mine_bytes, *sizes = NULL;
    if (comm->rank == 0) HS_ALLOC(sizes, comm->size);
    HS_CHECK_MPI(MPI_Gather(&my_size, 1, MPI_UINT64_T, sizes, 1, MPI_UINT64_T, 0, comm->world), NULL);
    if (comm->rank == 0) {
        for (int r = 1; r < comm->size; r++) {
            char *buf;
            HS_ALLOC(buf, sizes[r] ? sizes[r] : 1);
            for (uint64_t at = 0; at < sizes[r]; at += MSG_CHUNK) {
                int piece = (int)(sizes[r] - at < MSG_CHUNK ? sizes[r] - at : MSG_CHUNK);
                HS_CHECK_MPI(MPI_Recv(buf + at, piece, MPI_BYTE, r, 71, comm->world, MPI_STATUS_IGNORE), NULL);
            }
            if (hs_word_counts_add_packed(wc, buf, sizes[r]) != 0)
                HS_FATAL(NULL, "word counts from rank %d are damaged (%llu bytes)", r, (unsigned long long)sizes[r]);
            free(buf);
        }
    } else {
        for (uint64_t at = 0; at < mine_bytes; at += MSG_CHUNK) {
            int piece = (int)(mine_bytes - at < MSG_CHUNK ? mine_bytes - at : MSG_CHUNK);
            HS_CHECK_MPI(MPI_Send(mine + at, piece, MPI_BYTE, 0, 71, comm->world), NULL);
        }
    }
    free(mine);
    free(sizes);
}

/* ---- learning (rank 0) ----------------------------------------------------------------------------------- */

static void show_merging(int tokens, int size, const char *newest, uint64_t count, void *ctx) {
    double started = *(const double *)ctx;
    printf("| prep vocab: %d of %d tokens, newest \"%s\" (pair seen %llu times), %.1f s\n", tokens, size, newest,
           (unsigned long long)count, hs_now() - started);
    fflush(stdout);
}

static int learn_and_save(const vocab_args *a, hs_word_counts *wc, double started) {
    size_t n_words;
    hs_word_count *words = hs_word_counts_sorted(wc, &n_words);
    double learn_started = hs_now();
    hs_vocab_learn_opts opts = {.size = (int)a->size,
                                .min_frequency = (uint64_t)a->min_frequency,
                                .limit_alphabet = (int)a->limit_alphabet,
                                .progress = show_merging,
                                .ctx = &learn_started};
    hs_learned_vocab v;
    int rc = hs_vocab_learn(words, n_words, &opts, &v);
    free(words);
    if (rc != 0) {
        fprintf(stderr,
                "hetseq: error: prep vocab: --size %lld is smaller than the smallest vocabulary of this corpus: %d "
                "tokens (5 special tokens, %d characters and their ## forms). Raise --size, or keep fewer "
                "characters with --limit-alphabet (now %lld, %d characters seen).\n",
                a->size, v.base, v.alphabet, a->limit_alphabet, v.alphabet_seen);
        return 1;
    }
    hs_vocab *vocab = hs_vocab_from_tokens((const char *const *)v.tokens, v.count);
    hs_vocab_save(vocab, a->out);
    hs_vocab_free(vocab);
    printf("| prep vocab: alphabet %d characters%s, %d tokens before merging\n", v.alphabet,
           v.alphabet < v.alphabet_seen ? " (the most frequent; --limit-alphabet)" : "", v.base);
    fflush(stdout);
    if (v.pairs_ran_out)
        fprintf(stderr,
                "hetseq: warning: prep vocab: the corpus gives only %d tokens: no pair of pieces occurs %lld times "
                "or more (--min-frequency) to make more (asked for --size %lld)\n",
                v.count, a->min_frequency, a->size);
    printf("| prep vocab: wrote %s: %d tokens (%d merges, the last pair seen %llu times) in %.1f s (learning "
           "%.1f s)\n",
           a->out, v.count, v.merges, (unsigned long long)v.last_count, hs_now() - started, hs_now() - learn_started);
    fflush(stdout);
    hs_learned_vocab_free(&v);
    return 0;
}

/* ---- the command ------------------------------------------------------------------------------------------- */

int hs_prep_vocab_main(int argc, char **argv, const hs_comm *comm) {
    double started = hs_now();
    vocab_args a;
    int rc = parse_args(argc, argv, comm->rank, &a);
    if (rc != 0) {
        free(a.corpus);
        return rc < 0 ? 0 : 1;
    }

    /* rank 0 lists the files; every rank gets the list (paths joined with '\0', then the sizes) */
    hs_text_files fl;
    memset(&fl, 0, sizeof fl);
    char err[4096] = "";
    long long n_files = 0, joined_len = 0;
    if (comm->rank == 0) {
        n_files = plan_files(&a, &fl, err, sizeof err);
        if (n_files < 0) fprintf(stderr, "hetseq: error: prep vocab: %s\n", err);
        for (int i = 0; i < fl.n; i++) joined_len += (long long)strlen(fl.path[i]) + 1;
    }
    long long header[2] = {n_files, joined_len};
    hs_comm_bcast_bytes(comm, header, sizeof header, 0);
    if (header[0] < 0) {
        hs_text_files_free(&fl);
        free(a.corpus);
        return 1;
    }
    n_files = header[0];
    char *joined;
    long long *bytes;
    HS_ALLOC(joined, header[1] + 1);
    HS_ALLOC(bytes, n_files);
    if (comm->rank == 0) {
        char *p = joined;
        for (int i = 0; i < fl.n; i++) {
            size_t l = strlen(fl.path[i]) + 1;
            memcpy(p, fl.path[i], l);
            p += l;
            bytes[i] = fl.bytes[i];
        }
    }
    hs_comm_bcast_bytes(comm, joined, (size_t)header[1], 0);
    hs_comm_bcast_bytes(comm, bytes, (size_t)n_files * sizeof *bytes, 0);
    hs_text_files_free(&fl);

    /* each rank counts the words of its files */
    int *owner = assign_files(bytes, (int)n_files, comm->size);
    progress_state ps = {.show = comm->rank == 0, .started = hs_now(), .last = hs_now()};
    long long total_bytes = 0;
    for (long long i = 0; i < n_files; i++) {
        total_bytes += bytes[i];
        if (owner[i] == comm->rank) ps.share += bytes[i];
    }
    if (comm->rank == 0)
        printf("| prep vocab: %lld files, %.1f MB, counting words on %d rank%s (%s)\n", n_files, total_bytes / 1e6,
               comm->size, comm->size > 1 ? "s" : "", a.cased ? "cased" : "lower-cased, accents stripped");
    fflush(stdout);
    hs_word_counts *wc = hs_word_counts_new();
    count_stats cs = {0};
    const char *path = joined;
    for (long long i = 0; i < n_files; i++, path += strlen(path) + 1)
        if (owner[i] == comm->rank) count_file(path, &a, wc, &cs, &ps);
    free(owner);
    free(bytes);
    free(joined);

    long long local[5] = {cs.bytes, cs.files_read, cs.files_skipped, cs.strict_failures,
                          (long long)hs_word_counts_total(wc)};
    long long sum[5];
    HS_CHECK_MPI(MPI_Allreduce(local, sum, 5, MPI_LONG_LONG, MPI_SUM, comm->world), NULL);
    int status = 0;
    if (sum[3] > 0) {
        if (comm->rank == 0)
            fprintf(stderr, "hetseq: error: prep vocab: %lld file%s could not be used (see above); without --strict "
                            "such files are skipped\n", sum[3], sum[3] > 1 ? "s" : "");
        status = 1;
    } else if (sum[4] == 0) {
        if (comm->rank == 0)
            fprintf(stderr, "hetseq: error: prep vocab: the corpus holds no words (%lld file%s read, %lld skipped); "
                            "give --corpus text files with words in them\n", sum[1], sum[1] == 1 ? "" : "s", sum[2]);
        status = 1;
    }
    if (status != 0) {
        hs_word_counts_free(wc);
        free(a.corpus);
        return status;
    }
    gather_counts(comm, wc);
    if (comm->rank == 0) {
        printf("| prep vocab: %lld files read (%.1f MB)%s, %lld words, %zu distinct, counted in %.1f s\n", sum[1],
               sum[0] / 1e6, sum[2] ? ", some skipped (see above)" : "", sum[4], hs_word_counts_distinct(wc),
               hs_now() - started);
        fflush(stdout);
        status = learn_and_save(&a, wc, started);
    }
    hs_word_counts_free(wc);
    free(a.corpus);
    return hs_comm_share_status(comm, status);
}
