/* `hetseq prep bert`: text files -> WordPiece -> NVIDIA-format BERT pre-training shards.
 *
 * Steps (docs/data-formats.md, "Making shards from text"):
 * 1. rank 0 lists the --corpus files (directories expanded, sorted by path, one name per real file);
 * 2. ranks read and tokenize contiguous runs of files of about equal bytes, then all-gather the token
 *    streams in file order, so every rank holds the whole tokenized corpus (it must fit in memory);
 * 3. documents are numbered in that canonical order; a fixed hash picks the validation documents;
 *    document j of a split goes to shard j mod K;
 * 4. output file f (training shards, then test shards) is made by rank f mod W: for every dupe and each
 *    of its documents, instances as Google's create_pretraining_data.py, drawing random numbers from a
 *    counter-based stream keyed by (seed, split, dupe, document), then shuffled by a stream keyed by
 *    (seed, split, shard). Nothing depends on the rank count, so 1 or N ranks write identical shards. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prep/corpus.h"
#include "prep/instances.h"
#include "prep/prep.h"
#include "prep/prep_args.h"
#include "prep/wordpiece.h"
#include "util/check.h"
#include "util/publish.h"
#include "util/dirlist.h"
#include "util/log.h"
#include "util/timer.h"

static const char *const USAGE =
    "usage: hetseq prep bert --corpus PATH... --vocab vocab.txt --out DIR\n"
    "       [--seq-len 128] [--max-pred 20] [--masked-lm-prob 0.15] [--short-seq-prob 0.1]\n"
    "       [--dupe-factor 5] [--shards 1] [--seed 12345] [--valid-fraction 0] [--test-shards M]\n"
    "       [--cased] [--strict] [--split-sentences auto|lines|prose] [--prefix corpus]\n"
    "  --corpus PATH...   text files or directories of them (UTF-8); documents end at a blank line or a\n"
    "                     line holding only \"%\"\n"
    "  --split-sentences  lines: one sentence per line; prose: wrapped text cut at sentence ends;\n"
    "                     auto (default): chosen per file\n"
    "  --valid-fraction F this fraction of the documents goes to <prefix>_test_<k>.hdf5 shards\n"
    "  --strict           stop at an unreadable or non-UTF-8 file instead of skipping it\n"
    "writes DIR/<prefix>_training_<k>.hdf5 (k < shards) in NVIDIA's format; run under mpirun to use\n"
    "several ranks (the output does not depend on the number of ranks)";

/* Skipped files each rank names before it only counts them (a directory of text with its binary
 * index files, as the fortune files come, would print one line per index). */
#define MAX_SKIP_WARNINGS 5
/* Rows per HDF5 chunk: the trainer reads micro-batches of whole rows. */
#define ROWS_PER_CHUNK 256
/* Stream tags, so no two purposes share a random stream. */
#define TAG_VALID 0x76616c6964ULL   /* which documents validate (fixed key: independent of --seed) */
#define TAG_SHUFFLE 0x73687566ULL   /* order of a shard's rows */
#define SPLIT_TRAIN 0
#define SPLIT_TEST 1
static const char *const split_names[2] = {"training", "test"};

typedef struct bert_args {
    const char **corpus;
    int n_corpus;
    const char *vocab, *out_dir, *prefix;
    long long seq_len, max_pred, dupe_factor, shards, test_shards, seed;
    double masked_lm_prob, short_seq_prob, valid_fraction;
    int cased, strict;
    hs_split_mode split;
} bert_args;

/* ---- arguments (identical on every rank) -------------------------------------------------------------- */

static int parse_prob(const char *opt, const char *val, double lo, int lo_open, double hi, int hi_open, double *out,
                      char *err, size_t errlen) {
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    int ok = !errno && end != val && !*end && isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
    if (!ok) {
        snprintf(err, errlen, "%s %s: expected a number in %c%g, %g%c", opt, val, lo_open ? '(' : '[', lo, hi,
                 hi_open ? ')' : ']');
        return 1;
    }
    *out = v;
    return 0;
}

static void take_option(void *args, const char *opt, const char *val, char *err, size_t errlen) {
    bert_args *a = args;
    if (!strcmp(opt, "--cased")) a->cased = 1;
    else if (!strcmp(opt, "--strict")) a->strict = 1;
    else if (!strcmp(opt, "--corpus")) {
        if (val) a->corpus[a->n_corpus++] = val;
        else if (a->n_corpus == 0) snprintf(err, errlen, "--corpus needs at least one file or directory");
    } else if (!strcmp(opt, "--vocab")) a->vocab = val;
    else if (!strcmp(opt, "--out")) a->out_dir = val;
    else if (!strcmp(opt, "--prefix")) {
        a->prefix = val;
        if (!val[0] || strchr(val, '/'))
            snprintf(err, errlen, "--prefix %s: expected a file name part without '/'", val);
    } else if (!strcmp(opt, "--seq-len")) {
        if (hs_prep_parse_count(opt, val, LLONG_MIN, LLONG_MAX, &a->seq_len, err, errlen) == 0 &&
            (a->seq_len < 8 || a->seq_len > 65536))
            snprintf(err, errlen,
                     "--seq-len %s: must be from 8 to 65536 ([CLS] A [SEP] B [SEP] needs room for both "
                     "segments; BERT uses 128 or 512)",
                     val);
    } else if (!strcmp(opt, "--max-pred")) hs_prep_parse_count(opt, val, 1, 65536, &a->max_pred, err, errlen);
    else if (!strcmp(opt, "--dupe-factor")) hs_prep_parse_count(opt, val, 1, 1000, &a->dupe_factor, err, errlen);
    else if (!strcmp(opt, "--shards")) hs_prep_parse_count(opt, val, 1, 1000000, &a->shards, err, errlen);
    else if (!strcmp(opt, "--test-shards"))
        hs_prep_parse_count(opt, val, 1, 1000000, &a->test_shards, err, errlen);
    else if (!strcmp(opt, "--seed")) hs_prep_parse_count(opt, val, 0, LLONG_MAX, &a->seed, err, errlen);
    else if (!strcmp(opt, "--masked-lm-prob")) parse_prob(opt, val, 0, 1, 1, 0, &a->masked_lm_prob, err, errlen);
    else if (!strcmp(opt, "--short-seq-prob")) parse_prob(opt, val, 0, 0, 1, 0, &a->short_seq_prob, err, errlen);
    else if (!strcmp(opt, "--valid-fraction")) parse_prob(opt, val, 0, 0, 1, 1, &a->valid_fraction, err, errlen);
    else if (!strcmp(opt, "--split-sentences")) {
        if (!strcmp(val, "auto")) a->split = HS_SPLIT_AUTO;
        else if (!strcmp(val, "lines")) a->split = HS_SPLIT_LINES;
        else if (!strcmp(val, "prose")) a->split = HS_SPLIT_PROSE;
        else snprintf(err, errlen, "--split-sentences %s: expected auto, lines or prose", val);
    } else snprintf(err, errlen, "unknown option %s", opt);
}

static void check_required(void *args, char *err, size_t errlen) {
    bert_args *a = args;
    if (a->n_corpus == 0) snprintf(err, errlen, "--corpus PATH... is required (text files or directories)");
    else if (!a->vocab) snprintf(err, errlen, "--vocab FILE is required (a WordPiece vocab.txt)");
    else if (!a->out_dir) snprintf(err, errlen, "--out DIR is required (the directory for the shards)");
    else if (a->test_shards && a->valid_fraction == 0)
        snprintf(err, errlen,
                 "--test-shards needs --valid-fraction F > 0 (which documents go to the test shards)");
    else if (a->valid_fraction > 0 && a->test_shards == 0) {
        /* as many test shards as the test documents' share of the training shards, at least one */
        a->test_shards = llround((double)a->shards * a->valid_fraction);
        if (a->test_shards < 1) a->test_shards = 1;
    }
}

/* Returns 0, -1 for --help (printed), or 1 after rank 0 printed what is wrong. */
static int parse_args(int argc, char **argv, int rank, bert_args *a) {
    static const char *const flags[] = {"--cased", "--strict", NULL};
    const hs_prep_cli cli = {"bert", USAGE, flags, "--corpus", take_option, check_required};
    memset(a, 0, sizeof *a);
    a->prefix = "corpus";
    a->seq_len = 128;
    a->max_pred = 20;
    a->masked_lm_prob = 0.15;
    a->short_seq_prob = 0.1;
    a->dupe_factor = 5;
    a->shards = 1;
    a->test_shards = 0; /* 0: derived from --shards and --valid-fraction */
    a->seed = 12345;
    a->split = HS_SPLIT_AUTO;
    HS_ALLOC(a->corpus, argc);
    return hs_prep_parse_args(&cli, argc, argv, rank, a);
}

/* ---- the file list (rank 0) ----------------------------------------------------------------------------- */

typedef struct file_entry {
    char *path, *real;
    long long bytes;
} file_entry;

typedef struct file_list {
    file_entry *f;
    int n, cap;
} file_list;

static void list_add(file_list *l, const char *path, long long bytes) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        HS_REALLOC(l->f, l->cap);
    }
    char *real = realpath(path, NULL);
    l->f[l->n++] = (file_entry){HS_STRDUP(path), real ? real : HS_STRDUP(path), bytes};
}

static int cmp_path(const void *a, const void *b) {
    return strcmp(((const file_entry *)a)->path, ((const file_entry *)b)->path);
}

/* Expands --corpus into regular files, sorted by path; a file reached twice (a symbolic link, a file
 * named twice) is read once, under its first name; a directory's binary files are left out unless
 * --strict. Returns 0, or 1 with a message. */
static int list_corpus(const bert_args *a, file_list *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    long long binary_skipped = 0;
    for (int i = 0; i < a->n_corpus; i++) {
        const char *path = a->corpus[i];
        struct stat st;
        if (stat(path, &st) != 0) {
            snprintf(err, errlen, "--corpus %s: %s", path, strerror(errno));
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            list_add(out, path, (long long)st.st_size);
            continue;
        }
        char **entries;
        int n_entries = hs_dir_list(path, &entries, err, errlen);
        if (n_entries < 0) return 1;
        /* binary files of a directory (the fortune files' *.dat) are skipped with one line for the
         * directory; --strict keeps them, to stop at the first with its name */
        hs_binary_skips skips = {0};
        for (int k = 0; k < n_entries; k++) {
            long long nul_at;
            if (stat(entries[k], &st) != 0 || !S_ISREG(st.st_mode)) continue;
            if (!a->strict && hs_corpus_looks_binary(entries[k], &nul_at)) hs_binary_skips_add(&skips, entries[k], nul_at);
            else list_add(out, entries[k], (long long)st.st_size);
        }
        hs_dir_free(entries, n_entries);
        char note[2048];
        if (hs_binary_skips_message(&skips, path, note, sizeof note)) hs_warn("prep bert: %s", note);
        binary_skipped += skips.count;
        hs_binary_skips_free(&skips);
    }
    if (out->n > 1) qsort(out->f, (size_t)out->n, sizeof *out->f, cmp_path);
    int kept = 0;
    for (int i = 0; i < out->n; i++) {
        int seen = 0;
        for (int j = 0; j < kept && !seen; j++) seen = !strcmp(out->f[j].real, out->f[i].real);
        if (seen) {
            free(out->f[i].path);
            free(out->f[i].real);
        } else out->f[kept++] = out->f[i];
    }
    out->n = kept;
    if (out->n == 0 && binary_skipped > 0) {
        snprintf(err, errlen, "--corpus names no text file: only binary files (%lld skipped)", binary_skipped);
        return 1;
    }
    if (out->n == 0) {
        snprintf(err, errlen, "--corpus names no file (empty director%s)", a->n_corpus > 1 ? "ies" : "y");
        return 1;
    }
    return 0;
}

static void list_free(file_list *l) {
    for (int i = 0; i < l->n; i++) {
        free(l->f[i].path);
        free(l->f[i].real);
    }
    free(l->f);
    memset(l, 0, sizeof *l);
}

/* Rank 0: the output directory exists; warns about shards of this prefix beyond the ones this run writes
 * (an earlier run's leftovers: the reader would take them too). */
static int prepare_out_dir(const bert_args *a, char *err, size_t errlen) {
    struct stat st;
    if (mkdir(a->out_dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create --out %s: %s", a->out_dir, strerror(errno));
        return 1;
    }
    if (stat(a->out_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "--out %s is not a directory", a->out_dir);
        return 1;
    }
    DIR *dir = opendir(a->out_dir);
    if (!dir) return 0;
    struct dirent *e;
    size_t pl = strlen(a->prefix);
    while ((e = readdir(dir))) {
        if (strncmp(e->d_name, a->prefix, pl) != 0 || e->d_name[pl] != '_') continue;
        for (int s = 0; s < 2; s++) {
            size_t sl = strlen(split_names[s]);
            const char *rest = e->d_name + pl + 1;
            if (strncmp(rest, split_names[s], sl) != 0 || rest[sl] != '_') continue;
            char *end;
            long long k = strtoll(rest + sl + 1, &end, 10);
            long long count = s == SPLIT_TRAIN ? a->shards : a->test_shards;
            if (end != rest + sl + 1 && !strcmp(end, ".hdf5") && k >= count)
                hs_warn("prep bert: %s/%s is left from an earlier run (this run writes %lld %s shard%s); the "
                        "trainer would read it too: remove it",
                        a->out_dir, e->d_name, count, split_names[s], count == 1 ? "" : "s");
        }
    }
    closedir(dir);
    return 0;
}

/* ---- reading and tokenizing this rank's files ------------------------------------------------------------ */

/* First file of each rank: contiguous runs of about equal bytes, in file order (so gathering by rank
 * keeps the canonical order). first[W] = n. */
static void assign_files(const long long *bytes, int n, int world, int *first) {
    double total = 0;
    for (int i = 0; i < n; i++) total += (double)bytes[i] + 1;
    double before = 0;
    int r = 0;
    first[0] = 0;
    for (int i = 0; i < n; i++) {
        double mid = before + 0.5 * ((double)bytes[i] + 1);
        int owner = (int)(mid / total * world);
        if (owner >= world) owner = world - 1;
        while (r < owner) first[++r] = i;
        before += (double)bytes[i] + 1;
    }
    while (r < world) first[++r] = n;
}

typedef struct read_stats {
    double bytes, files_read, files_skipped, files_prose;
} read_stats;

static int tokenize_files(const bert_args *a, const hs_vocab *vocab, char **paths, int lo, int hi, int rank,
                          hs_corpus *local, read_stats *st) {
    int failed = 0;
    double t_last = hs_now();
    for (int i = lo; i < hi; i++) {
        char err[1024];
        char *text;
        size_t len;
        if (hs_corpus_read_file(paths[i], &text, &len, err, sizeof err) != 0) {
            st->files_skipped++;
            if (a->strict) {
                fprintf(stderr, "hetseq: error: prep bert: %s (stopping: --strict)\n", err);
                fflush(stderr);
                failed = 1;
            } else if (st->files_skipped <= MAX_SKIP_WARNINGS) {
                hs_warn("prep bert: %s; skipped (--strict stops instead)", err);
            } else if (st->files_skipped == MAX_SKIP_WARNINGS + 1) {
                hs_warn("prep bert: more files skipped on rank %d; the summary counts them", rank);
            }
            continue;
        }
        hs_split_mode mode = a->split == HS_SPLIT_AUTO ? hs_corpus_detect_mode(text, len) : a->split;
        if (mode == HS_SPLIT_PROSE) st->files_prose++;
        hs_corpus_add_text(local, vocab, text, len, mode, !a->cased);
        free(text);
        st->bytes += (double)len;
        st->files_read++;
        if (rank == 0 && hs_now() - t_last > 5.0) {
            t_last = hs_now();
            hs_log("| prep bert: rank 0 tokenized %d of its %d files (%.1f MB)", i - lo + 1, hi - lo, st->bytes / 1e6);
        }
    }
    return failed;
}

/* ---- sharing the corpus ------------------------------------------------------------------------------------- */

/* All-gathers each rank's int32 array in rank order into one array (allocated). */
static int32_t *allgather_i32(const hs_comm *comm, const int32_t *mine, long long count, long long *total) {
    long long *counts;
    HS_ALLOC(counts, comm->size);
    HS_CHECK_MPI(MPI_Allgather(&count, 1, MPI_LONG_LONG, counts, 1, MPI_LONG_LONG, comm->world), NULL);
    *total = 0;
    for (int r = 0; r < comm->size; r++) *total += counts[r];
    if (*total > INT_MAX)
        hs_die_all("prep bert: the corpus has %lld entries of one kind (tokens or sentences); one run handles "
                   "up to %d (about 8 GB of text): split the corpus and run prep bert on each part with its own "
                   "--prefix",
                   *total, INT_MAX);
    int *rc, *displ;
    HS_ALLOC(rc, comm->size);
    HS_ALLOC(displ, comm->size);
    for (int r = 0, at = 0; r < comm->size; r++) {
        rc[r] = (int)counts[r];
        displ[r] = at;
        at += rc[r];
    }
    int32_t *all;
    HS_ALLOC(all, *total > 0 ? *total : 1);
    HS_CHECK_MPI(MPI_Allgatherv(mine, (int)count, MPI_INT32_T, all, rc, displ, MPI_INT32_T, comm->world),
                 "the tokenized corpus must fit in every rank's memory");
    free(counts);
    free(rc);
    free(displ);
    return all;
}

/* Every rank's documents, in rank (= file) order. */
static void gather_corpus(const hs_comm *comm, hs_corpus *local, hs_corpus *all) {
    /* lengths: sentences per document, tokens per sentence */
    int32_t *doc_sents, *sent_tokens;
    HS_ALLOC(doc_sents, local->n_docs + 1);
    HS_ALLOC(sent_tokens, local->n_sents + 1);
    for (size_t d = 0; d < local->n_docs; d++)
        doc_sents[d] = (int32_t)(local->doc_end[d] - hs_corpus_doc_first_sent(local, d));
    for (size_t s = 0; s < local->n_sents; s++)
        sent_tokens[s] = (int32_t)(local->sent_end[s] - hs_corpus_sent_first_token(local, (int64_t)s));
    long long n_docs, n_sents, n_tokens;
    int32_t *all_doc_sents = allgather_i32(comm, doc_sents, (long long)local->n_docs, &n_docs);
    int32_t *all_sent_tokens = allgather_i32(comm, sent_tokens, (long long)local->n_sents, &n_sents);
    free(doc_sents);
    free(sent_tokens);
    memset(all, 0, sizeof *all);
    all->tokens = allgather_i32(comm, local->tokens, (long long)local->n_tokens, &n_tokens);
    hs_corpus_free(local);
    all->n_tokens = all->cap_tokens = (size_t)n_tokens;
    HS_ALLOC(all->doc_end, n_docs + 1);
    HS_ALLOC(all->sent_end, n_sents + 1);
    int64_t at = 0;
    for (long long d = 0; d < n_docs; d++) all->doc_end[d] = at += all_doc_sents[d];
    at = 0;
    for (long long s = 0; s < n_sents; s++) all->sent_end[s] = at += all_sent_tokens[s];
    all->n_docs = all->cap_docs = (size_t)n_docs;
    all->n_sents = all->cap_sents = (size_t)n_sents;
    free(all_doc_sents);
    free(all_sent_tokens);
}

/* ---- splits ---------------------------------------------------------------------------------------------------- */

typedef struct keyed {
    uint64_t key;
    int64_t doc;
} keyed;

static int cmp_keyed(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return x->doc < y->doc ? -1 : x->doc > y->doc;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The test documents: the n_test with the smallest hash of their index (a fixed key, so the same corpus
 * keeps the same validation documents for any seed, sequence length or vocabulary). Both pools ascending. */
static void choose_splits(size_t n_docs, long long n_test, int64_t **train, size_t *n_train, int64_t **test) {
    keyed *k;
    HS_ALLOC(k, n_docs);
    uint64_t key = hs_rng_key(TAG_VALID, 0, 0);
    for (size_t d = 0; d < n_docs; d++) k[d] = (keyed){hs_mix64(key ^ (uint64_t)d), (int64_t)d};
    qsort(k, n_docs, sizeof *k, cmp_keyed);
    HS_ALLOC(*test, n_test > 0 ? n_test : 1);
    *n_train = n_docs - (size_t)n_test;
    HS_ALLOC(*train, *n_train > 0 ? *n_train : 1);
    for (long long i = 0; i < n_test; i++) (*test)[i] = k[i].doc;
    for (size_t i = (size_t)n_test; i < n_docs; i++) (*train)[i - (size_t)n_test] = k[i].doc;
    free(k);
    qsort(*test, (size_t)n_test, sizeof **test, cmp_i64);
    qsort(*train, *n_train, sizeof **train, cmp_i64);
}

/* ---- writing a shard ----------------------------------------------------------------------------------------- */

/* One dataset: rows in the order of perm, row_elems elements of elem_size bytes per row. */
static void write_dataset(hid_t file, const char *name, hid_t file_type, hid_t mem_type, const void *data,
                          size_t elem_size, size_t n_rows, size_t row_elems, const int64_t *perm, void *scratch,
                          const char *path) {
    int ndim = row_elems == 0 ? 1 : 2;
    hsize_t dims[2] = {n_rows, row_elems}, chunk[2] = {n_rows < ROWS_PER_CHUNK ? n_rows : ROWS_PER_CHUNK, row_elems};
    size_t row_bytes = elem_size * (row_elems ? row_elems : 1);
    for (size_t i = 0; i < n_rows; i++)
        memcpy((char *)scratch + i * row_bytes, (const char *)data + (size_t)perm[i] * row_bytes, row_bytes);
    hid_t space = (hid_t)HS_H5(H5Screate_simple(ndim, dims, NULL), NULL);
    hid_t dcpl = (hid_t)HS_H5(H5Pcreate(H5P_DATASET_CREATE), NULL);
    HS_H5(H5Pset_chunk(dcpl, ndim, chunk), NULL);
    HS_H5(H5Pset_shuffle(dcpl), NULL); /* byte planes: the high bytes of ids are mostly zero */
    HS_H5(H5Pset_deflate(dcpl, 1), NULL);
    HS_H5(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), NULL);
    HS_H5(H5Pset_obj_track_times(dcpl, 0), NULL); /* no time stamps: same data, same bytes */
    hid_t ds = H5Dcreate2(file, name, file_type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (ds < 0) HS_FATAL("is the disk full?", "%s: cannot create dataset %s", path, name);
    HS_H5(H5Dwrite(ds, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, scratch), "is the disk full?");
    HS_H5(H5Dclose(ds), "is the disk full?");
    HS_H5(H5Pclose(dcpl), NULL);
    HS_H5(H5Sclose(space), NULL);
}

static void write_shard(const char *out_dir, const char *name, const hs_instance_rows *r, const int64_t *perm) {
    size_t plen = strlen(out_dir) + strlen(name) + 8;
    char *path, *tmp;
    HS_ALLOC(path, plen);
    HS_ALLOC(tmp, plen);
    snprintf(path, plen, "%s/%s", out_dir, name);
    snprintf(tmp, plen, "%s/.%s.tmp", out_dir, name); /* hidden: the reader skips it */
    size_t N = r->count, L = (size_t)r->seq_len, P = (size_t)r->max_pred;
    void *scratch = hs_xcalloc((N ? N : 1) * (L > P ? L : P), sizeof(int32_t), __FILE__, __LINE__);

    hid_t fapl = (hid_t)HS_H5(H5Pcreate(H5P_FILE_ACCESS), NULL);
    HS_H5(H5Pset_fapl_sec2(fapl), NULL); /* one writer per file: the serial POSIX driver */
    hid_t file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    HS_H5(H5Pclose(fapl), NULL);
    if (file < 0) hs_die("prep bert: cannot create %s: is --out %s writable?", tmp, out_dir);
    hid_t i32 = H5T_STD_I32LE, i8 = H5T_STD_I8LE;
    write_dataset(file, "input_ids", i32, H5T_NATIVE_INT32, r->input_ids, 4, N, L, perm, scratch, tmp);
    write_dataset(file, "input_mask", i8, H5T_NATIVE_INT8, r->input_mask, 1, N, L, perm, scratch, tmp);
    write_dataset(file, "segment_ids", i8, H5T_NATIVE_INT8, r->segment_ids, 1, N, L, perm, scratch, tmp);
    write_dataset(file, "masked_lm_positions", i32, H5T_NATIVE_INT32, r->mlm_positions, 4, N, P, perm, scratch, tmp);
    write_dataset(file, "masked_lm_ids", i32, H5T_NATIVE_INT32, r->mlm_ids, 4, N, P, perm, scratch, tmp);
    write_dataset(file, "next_sentence_labels", i8, H5T_NATIVE_INT8, r->nsp_labels, 1, N, 0, perm, scratch, tmp);
    HS_H5(H5Fclose(file), "is the disk full?");
    if (hs_publish_file(tmp, path) != 0)
        hs_die("prep bert: cannot move %s to %s: %s", tmp, path, strerror(errno));
    free(scratch);
    free(path);
    free(tmp);
}

/* Every instance of shard `shard` of a split: documents pool[j] with j mod n_shards == shard, for every
 * dupe, each from its own random stream; then the rows in a random order of the shard's own stream. */
static size_t make_shard(const bert_args *a, const hs_instance_params *p, const hs_doc_pool *pool, int split,
                         long long shard, long long n_shards) {
    hs_instance_rows rows;
    hs_instance_rows_init(&rows, (int)a->seq_len, (int)a->max_pred);
    for (long long dupe = 0; dupe < a->dupe_factor; dupe++) {
        for (size_t j = (size_t)shard; j < pool->size; j += (size_t)n_shards) {
            uint64_t doc = (uint64_t)pool->docs[j];
            hs_prep_rng rng = hs_prep_rng_make(hs_rng_key((uint64_t)a->seed, (uint64_t)dupe, ((uint64_t)split << 48) ^ doc));
            hs_create_instances(pool, j, p, &rng, &rows);
        }
    }
    int64_t *perm;
    HS_ALLOC(perm, rows.count);
    for (size_t i = 0; i < rows.count; i++) perm[i] = (int64_t)i;
    hs_prep_rng shuffle = hs_prep_rng_make(hs_rng_key((uint64_t)a->seed, TAG_SHUFFLE, ((uint64_t)split << 48) ^ (uint64_t)shard));
    hs_prep_rng_shuffle(&shuffle, perm, rows.count);
    char name[4096];
    snprintf(name, sizeof name, "%s_%s_%lld.hdf5", a->prefix, split_names[split], shard);
    write_shard(a->out_dir, name, &rows, perm);
    size_t n = rows.count;
    free(perm);
    hs_instance_rows_free(&rows);
    return n;
}

/* ---- the command ------------------------------------------------------------------------------------------------ */

/* Every rank's tokenized files gathered into one corpus, the splits chosen and this rank's shards
 * written (the agreed checks end every rank with one message); reports the totals. Frees `local`.
 * Returns 0. */
static int write_shards(const hs_comm *comm, const bert_args *a, const hs_vocab *vocab, hs_special_ids special,
                        hs_corpus *local, const read_stats *st, double t0) {
    double totals[4] = {st->bytes, st->files_read, st->files_skipped, st->files_prose};
    hs_comm_allreduce_sum_double(comm, totals, 4);
    hs_corpus corpus;
    gather_corpus(comm, local, &corpus);
    double t_read = hs_now() - t0;
    hs_log("| prep bert: %.0f file%s read (%.2f MB; sentences: %.0f as lines, %.0f as prose), %.0f skipped: %zu "
           "documents, %zu sentences, %zu tokens in %.1f s (%.2f MB/s)",
           totals[1], totals[1] == 1 ? "" : "s", totals[0] / 1e6, totals[1] - totals[3], totals[3], totals[2],
           corpus.n_docs, corpus.n_sents, corpus.n_tokens, t_read, totals[0] / 1e6 / (t_read > 0 ? t_read : 1e-9));

    /* agreed checks: every rank holds the same corpus */
    if (corpus.n_docs == 0)
        hs_die_all("prep bert: the corpus holds no text (%.0f file%s read, %.0f skipped): nothing to make shards "
                   "from",
                   totals[1], totals[1] == 1 ? "" : "s", totals[2]);
    long long n_test = 0;
    if (a->valid_fraction > 0) {
        if (corpus.n_docs < 2)
            hs_die_all("prep bert: --valid-fraction needs at least 2 documents; the corpus has 1");
        n_test = llround(a->valid_fraction * (double)corpus.n_docs);
        if (n_test < 1) n_test = 1;
        if (n_test > (long long)corpus.n_docs - 1) n_test = (long long)corpus.n_docs - 1;
    }
    int64_t *train_docs, *test_docs;
    size_t n_train;
    choose_splits(corpus.n_docs, n_test, &train_docs, &n_train, &test_docs);
    if ((long long)n_train < a->shards)
        hs_die_all("prep bert: %zu training documents cannot fill %lld shards (each shard needs a document): "
                   "use --shards %zu or fewer",
                   n_train, a->shards, n_train);
    if (n_test > 0 && n_test < a->test_shards)
        hs_die_all("prep bert: %lld test documents cannot fill %lld test shards: use --test-shards %lld or a "
                   "larger --valid-fraction",
                   n_test, a->test_shards, n_test);

    hs_instance_params p = {(int)a->seq_len, (int)a->max_pred, a->masked_lm_prob, a->short_seq_prob,
                            hs_vocab_size(vocab), special};
    hs_doc_pool pools[2] = {{&corpus, train_docs, n_train}, {&corpus, test_docs, (size_t)n_test}};
    /* output file f: training shards 0..K-1, then test shards; rank f mod W makes it */
    long long n_out = a->shards + (n_test > 0 ? a->test_shards : 0), mine = 0, done = 0;
    double instances[2] = {0, 0};
    for (long long f = comm->rank; f < n_out; f += comm->size) mine++;
    for (long long f = comm->rank; f < n_out; f += comm->size) {
        int split = f < a->shards ? SPLIT_TRAIN : SPLIT_TEST;
        long long shard = split == SPLIT_TRAIN ? f : f - a->shards;
        size_t n = make_shard(a, &p, &pools[split], split, shard, split == SPLIT_TRAIN ? a->shards : a->test_shards);
        instances[split] += (double)n;
        done++;
        hs_log("| prep bert: %s/%s_%s_%lld.hdf5: %zu instances (rank 0: %lld of %lld shards, %.1f s)", a->out_dir,
               a->prefix, split_names[split], shard, n, done, mine, hs_now() - t0);
    }
    hs_comm_allreduce_sum_double(comm, instances, 2);
    double t_all = hs_now() - t0;
    char test_part[128] = "";
    if (n_test > 0)
        snprintf(test_part, sizeof test_part, " and %lld test shard%s (%.0f instances from %lld documents)",
                 a->test_shards, a->test_shards == 1 ? "" : "s", instances[1], n_test);
    hs_log("| prep bert: wrote %lld training shard%s (%.0f instances from %zu documents)%s to %s in %.1f s: "
           "%.2f MB of text per second",
           a->shards, a->shards == 1 ? "" : "s", instances[0], n_train, test_part, a->out_dir, t_all,
           totals[0] / 1e6 / (t_all > 0 ? t_all : 1e-9));

    free(train_docs);
    free(test_docs);
    hs_corpus_free(&corpus);
    return 0;
}

int hs_prep_bert_main(int argc, char **argv, const hs_comm *comm) {
    bert_args a;
    int parsed = parse_args(argc, argv, comm->rank, &a);
    if (parsed != 0) {
        free(a.corpus);
        return parsed < 0 ? 0 : 1;
    }
    HS_H5(H5Eset_auto2(H5E_DEFAULT, NULL, NULL), NULL);
    double t0 = hs_now();

    /* rank 0 lists the files and makes the output directory; everyone gets the list */
    char err[1024] = "";
    file_list files = {0};
    long long head[2] = {0, 0}; /* files (or -1), bytes of the name list */
    char *names = NULL;
    if (comm->rank == 0) {
        if (list_corpus(&a, &files, err, sizeof err) != 0 || prepare_out_dir(&a, err, sizeof err) != 0) {
            fprintf(stderr, "hetseq: error: prep bert: %s\n", err);
            fflush(stderr);
            head[0] = -1;
        } else {
            head[0] = files.n;
            for (int i = 0; i < files.n; i++) head[1] += (long long)strlen(files.f[i].path) + 1;
        }
    }
    hs_comm_bcast_bytes(comm, head, sizeof head, 0);
    if (head[0] < 0) {
        list_free(&files);
        free(a.corpus);
        return 1;
    }
    int n_files = (int)head[0];
    long long *bytes;
    HS_ALLOC(bytes, n_files);
    HS_ALLOC(names, head[1]);
    if (comm->rank == 0) {
        char *q = names;
        for (int i = 0; i < n_files; i++) {
            size_t l = strlen(files.f[i].path) + 1;
            memcpy(q, files.f[i].path, l);
            q += l;
            bytes[i] = files.f[i].bytes;
        }
        list_free(&files);
    }
    hs_comm_bcast_bytes(comm, names, (size_t)head[1], 0);
    hs_comm_bcast_bytes(comm, bytes, (size_t)n_files * sizeof *bytes, 0);
    char **paths;
    HS_ALLOC(paths, n_files);
    for (int i = 0, at = 0; i < n_files; i++) {
        paths[i] = names + at;
        at += (int)strlen(paths[i]) + 1;
    }

    /* the vocabulary: rank 0 first, so a bad file gives one message */
    hs_vocab *vocab = NULL;
    if (comm->rank == 0) vocab = hs_vocab_load(a.vocab);
    hs_comm_barrier(comm);
    if (comm->rank != 0) vocab = hs_vocab_load(a.vocab);
    hs_special_ids special = hs_vocab_special(vocab);

    /* read and tokenize this rank's files */
    int *first;
    HS_ALLOC(first, comm->size + 1);
    assign_files(bytes, n_files, comm->size, first);
    hs_corpus local = {0};
    read_stats st = {0};
    int failed = tokenize_files(&a, vocab, paths, first[comm->rank], first[comm->rank + 1], comm->rank, &local, &st);
    int rc = 1;
    if (hs_comm_max_ll(comm, failed)) {
        if (comm->rank == 0)
            fprintf(stderr, "hetseq: error: prep bert: stopped: a --corpus file is unreadable or not UTF-8 text (see "
                            "above)\n");
        hs_corpus_free(&local);
    } else {
        rc = write_shards(comm, &a, vocab, special, &local, &st, t0);
    }
    hs_vocab_free(vocab);
    free(first);
    free(paths);
    free(names);
    free(bytes);
    free(a.corpus);
    return rc;
}
