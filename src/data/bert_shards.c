/* Parallel reader of NVIDIA BERT shards (layout in docs/data-formats.md). At startup each rank checks
 * a strided share of the files alone (metadata only) and the ranks gather the row counts and layouts.
 * A micro-batch is a contiguous range of global rows, read with one row hyperslab per dataset per file
 * it touches, as collective transfers through MPI-IO on the I/O communicator. Only the files some
 * rank's current read touches take part (the union of the ranks' file ranges, agreed with one small
 * allgather per read); a file is opened, collectively, the first time a read touches it and stays open
 * (up to a bound), so the cost of a read does not grow with the number of shard files. The memory type
 * equals the on-disk type (a converting read makes HDF5 1.10 fall back to independent I/O); values are
 * widened to int32 afterwards and checked, so a bad shard gives a message instead of a crash. */
#include "data/bert_shards.h"

#include <dirent.h>
#include <errno.h>
#include <hdf5.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/check.h"
#include "util/fault.h"
#include "util/dirlist.h"
#include "util/h5util.h"
#include "util/log.h"

/* Datasets in NVIDIA's order. Row widths: L for the first three, P for the masked-LM pair, 1 for NSP. */
enum { DS_INPUT_IDS, DS_INPUT_MASK, DS_SEGMENT_IDS, DS_MLM_POSITIONS, DS_MLM_IDS, DS_NSP, NUM_DS };
static const char *const ds_names[NUM_DS] = {"input_ids",           "input_mask",    "segment_ids",
                                             "masked_lm_positions", "masked_lm_ids", "next_sentence_labels"};

#define SHARD_HINT                                                                                          \
    "BERT shards are written by NVIDIA's create_pretraining_data.py: six integer datasets input_ids[N,L], "   \
    "input_mask[N,L], segment_ids[N,L], masked_lm_positions[N,P], masked_lm_ids[N,P], "                     \
    "next_sentence_labels[N]; re-create the file"

/* Files stay open once a read has touched them, so that reading a file again costs no open: an
 * H5Fopen through MPI-IO is collective and costs several ms on 3 ranks (the communicator is
 * duplicated, the I/O components are set up, the superblock is read and broadcast), more than a whole
 * micro-batch read (docs/performance.md, "Reading many shard files"). The number open at once is bounded: by MAX_OPEN_FILES, because HDF5 1.10 holds
 * about 0.7 MB per open file (its metadata cache's index alone is 64 Ki pointers), and by a quarter of
 * the soft RLIMIT_NOFILE, because every open file holds one descriptor on every rank (the training and
 * validation readers together then use at most half, leaving the rest to MPI, logs and checkpoints).
 * Beyond the bound the least recently used file is closed. The bound is the minimum over the ranks and
 * the files a read touches are agreed over the I/O communicator, so every rank makes the same opens
 * and closes in the same order. */
#define MAX_OPEN_FILES 1024
#define FD_SHARE 4

/* More chunks than this per input_ids row: warn that row reads are slow. */
#define MAX_CHUNKS_PER_ROW 4

typedef struct int_layout {
    hid_t type; /* the predefined HDF5 type equal to the on-disk type (no need to close) */
    int size, is_signed, big_endian;
} int_layout;

typedef struct shard_file {
    char *path;
    int64_t rows, offset; /* rows of this file; global index of its first row */
    hid_t file;           /* H5I_INVALID_HID while closed */
    hid_t ds[NUM_DS];
    int_layout layout[NUM_DS];
    uint64_t last_use;
} shard_file;

struct hs_bert_shards {
    MPI_Comm io;
    int io_size;
    int nfiles, nopen, max_open;
    int *open_list; /* [max_open + 1] indices of the open files (one more while opening) */
    int *spans;     /* per read: {first file, last file} of every rank */
    shard_file *files;
    int64_t total;
    int L, P;
    hid_t fapl, dxpl;
    uint32_t no_collective_cause;
    uint64_t use_clock, opens; /* opens: MPI-IO opens so far (each file once while the bound holds) */
    void *scratch;             /* on-disk values that need widening */
    size_t scratch_bytes;
};

/* ---- the file list ---------------------------------------------------------------------------------- */

/* Rank 0: the sorted file paths of `path`, joined with '\0' into *list (*len bytes); or an error
 * message in err. Returns the number of files (0 with err set on failure). */
static int list_files(const char *path, const char *split, int num_file, char **list, size_t *len, char *err,
                      size_t errlen) {
    struct stat st;
    *list = NULL;
    *len = 0;
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "cannot read the BERT data path %s: %s; set data.path to a shard file or a directory of shards",
                 path, strerror(errno));
        return 0;
    }
    if (!S_ISDIR(st.st_mode)) { /* one file, used whatever its name */
        *len = strlen(path) + 1;
        *list = HS_STRDUP(path);
        return 1;
    }
    char **entries;
    int n_entries = hs_dir_list(path, &entries, err, errlen);
    if (n_entries < 0) return 0;
    /* Keep the regular files whose NAME contains the split (entries come sorted, as HetSeq's sorted()). */
    char **names = NULL;
    int n = 0, others = 0;
    char other_names[3][256];
    HS_ALLOC(names, n_entries);
    for (int i = 0; i < n_entries; i++) {
        char *full = entries[i];
        const char *name = strrchr(full, '/') + 1;
        if (stat(full, &st) != 0 || !S_ISREG(st.st_mode)) {
            free(full);
            continue;
        }
        if (split && *split && !strstr(name, split)) {
            if (others < 3) snprintf(other_names[others], sizeof other_names[0], "%s", name);
            others++;
            free(full);
            continue;
        }
        names[n++] = full;
    }
    free(entries);
    if (n == 0) {
        int k = snprintf(err, errlen, "%s: no file whose name contains '%s'", path, split ? split : "");
        if (others > 0 && k > 0 && (size_t)k < errlen) {
            k += snprintf(err + k, errlen - (size_t)k, " (%d other file%s there, e.g. %s%s%s%s%s)", others,
                          others > 1 ? "s" : "", other_names[0], others > 1 ? ", " : "", others > 1 ? other_names[1] : "",
                          others > 2 ? ", " : "", others > 2 ? other_names[2] : "");
        }
        if (k > 0 && (size_t)k < errlen)
            snprintf(err + k, errlen - (size_t)k,
                     "; NVIDIA names shards <corpus>_training_<i>.hdf5 and <corpus>_test_<i>.hdf5: set "
                     "data.train_subset / data.valid_subset to a part of those names");
        free(names);
        return 0;
    }
    /* HetSeq: sorted(...) of the paths, plain lexicographic order; then the first num_file */
    if (num_file > 0 && num_file < n) {
        for (int i = num_file; i < n; i++) free(names[i]);
        n = num_file;
    }
    hs_dir_pack(names, n, list, len);
    return n;
}

/* ---- open: check the layout the way a user would want it explained ---------------------------------- */

/* The predefined integer types a shard may hold, indexed by the code match_integer returns (the
 * H5T_STD_* names are run-time values: the table is built on each call). */
static hid_t known_integer(int i) {
    const hid_t known[16] = {H5T_STD_I8LE, H5T_STD_I16LE, H5T_STD_I32LE, H5T_STD_I64LE, H5T_STD_U8LE, H5T_STD_U16LE,
                             H5T_STD_U32LE, H5T_STD_U64LE, H5T_STD_I8BE, H5T_STD_I16BE, H5T_STD_I32BE, H5T_STD_I64BE,
                             H5T_STD_U8BE, H5T_STD_U16BE, H5T_STD_U32BE, H5T_STD_U64BE};
    return known[i];
}

/* The code (0..15) of the predefined integer type equal to `type`; -1 if there is none (an odd
 * precision or padding, for instance). */
static int match_integer(hid_t type) {
    for (int i = 0; i < 16; i++)
        if (HS_H5(H5Tequal(type, known_integer(i)), NULL) > 0) return i;
    return -1;
}

static int_layout layout_of(int code) {
    int_layout t = {known_integer(code), 1 << (code % 4), (code / 4) % 2 == 0, code >= 8};
    return t;
}

/* Dataset k of an open file, its class and shape checked: dims[0..1], *code its integer type. On a
 * problem: the message in err, returns H5I_INVALID_HID. */
static hid_t check_dataset(hid_t file, const char *path, int k, hsize_t dims[2], int *code, char *err, size_t errlen) {
    const char *name = ds_names[k];
    if (HS_H5(H5Lexists(file, name, H5P_DEFAULT), NULL) <= 0) {
        snprintf(err, errlen, "%s: dataset %s is missing; this is not an NVIDIA BERT shard. " SHARD_HINT, path, name);
        return H5I_INVALID_HID;
    }
    hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
    if (ds < 0) {
        H5Eclear2(H5E_DEFAULT);
        snprintf(err, errlen, "%s: %s is not a dataset. " SHARD_HINT, path, name);
        return H5I_INVALID_HID;
    }
    hid_t type = (hid_t)HS_H5(H5Dget_type(ds), NULL);
    *code = HS_H5(H5Tget_class(type), NULL) == H5T_INTEGER ? match_integer(type) : -1;
    if (*code < 0) {
        char desc[64];
        hs_h5_describe_type(type, desc, sizeof desc);
        snprintf(err, errlen,
                 "%s: dataset %s holds %s values; BERT shards hold integers (input_ids, masked_lm_* int32; "
                 "input_mask, segment_ids, next_sentence_labels int8). " SHARD_HINT,
                 path, name, desc);
    }
    HS_H5(H5Tclose(type), NULL);
    if (*code < 0) goto bad;

    hid_t space = (hid_t)HS_H5(H5Dget_space(ds), NULL);
    int ndim = (int)HS_H5(H5Sget_simple_extent_ndims(space), NULL);
    hsize_t d[H5S_MAX_RANK];
    HS_H5(H5Sget_simple_extent_dims(space, d, NULL), NULL);
    HS_H5(H5Sclose(space), NULL);
    /* next_sentence_labels is [N]; [N,1] (a column written by another tool) has the same bytes */
    int want = k == DS_NSP ? 1 : 2;
    int ok = ndim == want || (k == DS_NSP && ndim == 2 && d[1] == 1);
    const char *shape = k == DS_NSP ? "[N]" : k >= DS_MLM_POSITIONS ? "[N,P]" : "[N,L]";
    if (!ok) {
        snprintf(err, errlen, "%s: dataset %s has %d dimension%s, expected %s. " SHARD_HINT, path, name, ndim,
                 ndim == 1 ? "" : "s", shape);
        goto bad;
    }
    /* L >= 2 ([CLS] and [SEP]), P >= 1; the upper bound keeps row sizes in int arithmetic */
    if (want == 2 && (d[1] < (k == DS_INPUT_IDS ? 2u : 1u) || d[1] > (1u << 20))) {
        snprintf(err, errlen, "%s: dataset %s is [%llu,%llu], expected %s with %s columns. " SHARD_HINT, path, name,
                 (unsigned long long)d[0], (unsigned long long)d[1], shape,
                 k == DS_INPUT_IDS ? "2 to 2^20" : "1 to 2^20");
        goto bad;
    }
    dims[0] = d[0];
    dims[1] = want == 2 ? d[1] : 1;
    return ds;
bad:
    HS_H5(H5Dclose(ds), NULL);
    return H5I_INVALID_HID;
}

/* How many chunks one row of input_ids touches (1 when not chunked); *chunk_rows, *chunk_cols and
 * *filtered describe the layout for the warning. */
static int chunks_per_row(hid_t ds, int L, hsize_t *chunk_rows, hsize_t *chunk_cols, int *filtered) {
    hid_t dcpl = (hid_t)HS_H5(H5Dget_create_plist(ds), NULL);
    int per_row = 1;
    *filtered = 0;
    if (HS_H5(H5Pget_layout(dcpl), NULL) == H5D_CHUNKED) {
        hsize_t c[2] = {1, 1};
        HS_H5(H5Pget_chunk(dcpl, 2, c), NULL);
        *chunk_rows = c[0];
        *chunk_cols = c[1];
        per_row = (int)(((hsize_t)L + c[1] - 1) / c[1]);
        *filtered = HS_H5(H5Pget_nfilters(dcpl), NULL) > 0;
    }
    HS_H5(H5Pclose(dcpl), NULL);
    return per_row;
}

/* What the startup check of one file finds, gathered to every rank: rows, L, P, the chunk layout of
 * input_ids when a row spans more than MAX_CHUNKS_PER_ROW chunks (THIN = 1), and the integer type
 * code of each dataset. */
enum { REC_ROWS, REC_L, REC_P, REC_THIN, REC_CROWS, REC_CCOLS, REC_FILTERED, REC_TYPE, REC_LEN = REC_TYPE + NUM_DS };

/* Checks one shard through the file access list `fapl` (HDF5's POSIX driver: this rank alone; only
 * metadata is read: the superblock, six object headers and the chunk layout) and fills rec. On a
 * problem: the message in err, returns -1. */
static int check_file(const char *path, hid_t fapl, int64_t rec[REC_LEN], char *err, size_t errlen) {
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (file < 0) {
        char reason[HS_H5_REASON_LEN];
        snprintf(err, errlen,
                 "%s is not a readable HDF5 file (%s); it may be truncated or still being written. " SHARD_HINT, path,
                 hs_h5_reason(reason));
        return -1;
    }
    hsize_t dims[NUM_DS][2];
    hid_t ds[NUM_DS];
    int nds = 0, rc = 0;
    for (; nds < NUM_DS; nds++) {
        int code;
        ds[nds] = check_dataset(file, path, nds, dims[nds], &code, err, errlen);
        if (ds[nds] < 0) {
            rc = -1;
            break;
        }
        rec[REC_TYPE + nds] = code;
    }
    for (int k = 1; rc == 0 && k < NUM_DS; k++)
        if (dims[k][0] != dims[DS_INPUT_IDS][0]) {
            snprintf(err, errlen,
                     "%s: dataset %s has %llu rows but input_ids has %llu: every dataset of a shard has one row per "
                     "sequence (an interrupted write?). " SHARD_HINT,
                     path, ds_names[k], (unsigned long long)dims[k][0], (unsigned long long)dims[DS_INPUT_IDS][0]);
            rc = -1;
        }
    int L = rc == 0 ? (int)dims[DS_INPUT_IDS][1] : 0, P = rc == 0 ? (int)dims[DS_MLM_POSITIONS][1] : 0;
    for (int k = DS_INPUT_MASK; rc == 0 && k <= DS_MLM_IDS; k++) {
        int want = k <= DS_SEGMENT_IDS ? L : P;
        if ((int)dims[k][1] != want) {
            snprintf(err, errlen, "%s: dataset %s is [%llu,%llu] but %s is [%llu,%d]: %s. " SHARD_HINT, path,
                     ds_names[k], (unsigned long long)dims[k][0], (unsigned long long)dims[k][1],
                     k <= DS_SEGMENT_IDS ? "input_ids" : "masked_lm_positions", (unsigned long long)dims[k][0], want,
                     k <= DS_SEGMENT_IDS ? "every per-token dataset has L = max_seq_length columns"
                                         : "both masked-LM datasets have P = max_predictions_per_seq columns");
            rc = -1;
        }
    }
    if (rc == 0) {
        hsize_t crows = 0, ccols = 0;
        int filtered = 0;
        rec[REC_ROWS] = (int64_t)dims[DS_INPUT_IDS][0];
        rec[REC_L] = L;
        rec[REC_P] = P;
        rec[REC_THIN] = chunks_per_row(ds[DS_INPUT_IDS], L, &crows, &ccols, &filtered) > MAX_CHUNKS_PER_ROW;
        rec[REC_CROWS] = (int64_t)crows;
        rec[REC_CCOLS] = (int64_t)ccols;
        rec[REC_FILTERED] = filtered;
    }
    for (int k = 0; k < nds; k++) HS_H5(H5Dclose(ds[k]), NULL);
    HS_H5(H5Fclose(file), NULL);
    return rc;
}

/* ---- the open files: collective MPI-IO opens, kept while the bound allows --------------------------- */

/* How many files of `nfiles` this reader may keep open (see MAX_OPEN_FILES), the same on every rank.
 * A soft descriptor limit below what the files need is raised towards the hard limit. */
static int open_bound(int nfiles, MPI_Comm io) {
    int bound = nfiles < MAX_OPEN_FILES ? nfiles : MAX_OPEN_FILES;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) HS_FATAL(NULL, "getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
    const rlim_t need = (rlim_t)FD_SHARE * (rlim_t)bound;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < need) {
        struct rlimit up = rl;
        up.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &up) == 0) rl = up; /* refused: keep the lower bound below */
    }
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / FD_SHARE < (rlim_t)bound) bound = (int)(rl.rlim_cur / FD_SHARE);
    if (bound < 1) bound = 1;
    HS_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &bound, 1, MPI_INT, MPI_MIN, io), NULL);
    return bound;
}

/* Dataset k of a file checked at startup, reopened for reading. */
static hid_t reopen_dataset(const shard_file *f, int k) {
    hid_t ds = H5Dopen2(f->file, ds_names[k], H5P_DEFAULT);
    if (ds < 0) {
        char reason[HS_H5_REASON_LEN];
        hs_die("%s: dataset %s cannot be opened (%s); the file changed after the job started. " SHARD_HINT, f->path,
               ds_names[k], hs_h5_reason(reason));
    }
    return ds;
}

static void close_file(hs_bert_shards *s, shard_file *f) {
    if (f->file == H5I_INVALID_HID) return;
    for (int k = 0; k < NUM_DS; k++) HS_H5(H5Dclose(f->ds[k]), NULL);
    HS_H5(H5Fclose(f->file), NULL);
    f->file = H5I_INVALID_HID;
    const int idx = (int)(f - s->files);
    for (int j = 0; j < s->nopen; j++)
        if (s->open_list[j] == idx) {
            s->open_list[j] = s->open_list[--s->nopen];
            return;
        }
    HS_FATAL(NULL, "BERT shard file %d closed but not in the list of open files", idx);
}

/* Opens a closed file (collective: every rank calls it for the same file, in the same order), closing
 * the least recently used one first when max_open are open. The search looks at the open files only,
 * so it costs the same however many shard files there are. */
static void ensure_open(hs_bert_shards *s, shard_file *f) {
    f->last_use = ++s->use_clock;
    if (f->file != H5I_INVALID_HID) return;
    if (s->nopen >= s->max_open) {
        shard_file *lru = NULL;
        for (int j = 0; j < s->nopen; j++) {
            shard_file *o = &s->files[s->open_list[j]];
            if (!lru || o->last_use < lru->last_use) lru = o;
        }
        close_file(s, lru);
    }
    f->file = H5Fopen(f->path, H5F_ACC_RDONLY, s->fapl);
    if (f->file < 0) {
        char reason[HS_H5_REASON_LEN];
        hs_die("%s is not a readable HDF5 file (%s); it may be truncated or still being written. " SHARD_HINT,
               f->path, hs_h5_reason(reason));
    }
    s->open_list[s->nopen++] = (int)(f - s->files);
    s->opens++;
    for (int k = 0; k < NUM_DS; k++) f->ds[k] = reopen_dataset(f, k);
}

static int io_rank(MPI_Comm io) {
    int r;
    HS_CHECK_MPI(MPI_Comm_rank(io, &r), NULL);
    return r;
}

hs_bert_shards *hs_bert_shards_open(const char *path, const char *split, int num_file, MPI_Comm io_comm) {
    /* hetseq explains HDF5 failures itself: keep the library from printing its stack. */
    HS_H5(H5Eset_auto2(H5E_DEFAULT, NULL, NULL), NULL);
    hs_bert_shards *s;
    HS_ALLOC(s, 1);
    s->io = io_comm;
    int rank = io_rank(io_comm);
    HS_CHECK_MPI(MPI_Comm_size(io_comm, &s->io_size), NULL);
    HS_ALLOC(s->spans, 2 * (size_t)s->io_size);

    /* rank 0 lists; everyone gets the same list (or the same error) */
    char err[2048] = "";
    char *list = NULL;
    size_t len = 0;
    long long head[2] = {0, 0}; /* number of files, bytes of the list */
    if (rank == 0) {
        head[0] = list_files(path, split, num_file, &list, &len, err, sizeof err);
        head[1] = (long long)len;
    }
    HS_CHECK_MPI(MPI_Bcast(head, 2, MPI_LONG_LONG, 0, io_comm), NULL);
    if (head[0] == 0) {
        HS_CHECK_MPI(MPI_Bcast(err, (int)sizeof err, MPI_CHAR, 0, io_comm), NULL);
        hs_die_agreed("%s", err);
    }
    if (rank != 0) HS_ALLOC(list, head[1]);
    HS_CHECK_MPI(MPI_Bcast(list, (int)head[1], MPI_CHAR, 0, io_comm), NULL);

    s->nfiles = (int)head[0];
    HS_ALLOC(s->files, s->nfiles);
    const char *p = list;
    for (int i = 0; i < s->nfiles; i++) {
        s->files[i].path = HS_STRDUP(p);
        s->files[i].file = H5I_INVALID_HID;
        p += strlen(p) + 1;
    }
    free(list);

    /* Every rank can read every file (a node that misses a mount is named now, not at its first read). */
    for (int i = 0; i < s->nfiles; i++)
        if (hs_fault_access(s->files[i].path, R_OK) != 0)
            hs_die("cannot read the BERT shard %s: %s", s->files[i].path, strerror(errno));

    /* Rank r checks files r, r + size, r + 2 size, ... alone and the ranks gather what they found: a
     * startup of nfiles / size small POSIX opens instead of nfiles collective MPI-IO opens (1 000
     * files: a fraction of a second instead of several seconds). A rank stops at its first bad file;
     * the lowest bad file is reported, by every rank, after the checks of all files before it, as if
     * the files were checked in order. */
    const int size = s->io_size, per_rank = (s->nfiles + size - 1) / size;
    int64_t *mine, *recs;
    HS_ALLOC(mine, (size_t)per_rank * REC_LEN);
    HS_ALLOC(recs, (size_t)per_rank * REC_LEN * (size_t)size);
    /* no file lock, like the MPI-IO driver the rows are read through (some parallel file systems
     * refuse flock) */
    hid_t posix = (hid_t)HS_H5(H5Pcreate(H5P_FILE_ACCESS), NULL);
    HS_H5(H5Pset_file_locking(posix, 0, 1), NULL);
    int bad = INT_MAX;
    for (int i = rank, j = 0; i < s->nfiles; i += size, j++)
        if (check_file(s->files[i].path, posix, mine + (size_t)j * REC_LEN, err, sizeof err) != 0) {
            bad = i;
            break;
        }
    HS_H5(H5Pclose(posix), NULL);
    HS_CHECK_MPI(MPI_Allgather(mine, per_rank * REC_LEN, MPI_INT64_T, recs, per_rank * REC_LEN, MPI_INT64_T, io_comm),
                 NULL);
    free(mine);
    HS_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MIN, io_comm), NULL);
    if (bad < INT_MAX) HS_CHECK_MPI(MPI_Bcast(err, (int)sizeof err, MPI_CHAR, bad % size, io_comm), NULL);

    int thin_files = 0, thin_example = -1;
    for (int i = 0; i < s->nfiles; i++) {
        if (i == bad) hs_die_agreed("%s", err);
        shard_file *f = &s->files[i];
        const int64_t *rec = recs + ((size_t)(i % size) * (size_t)per_rank + (size_t)(i / size)) * REC_LEN;
        int L = (int)rec[REC_L], P = (int)rec[REC_P];
        if (i == 0) {
            s->L = L;
            s->P = P;
        } else if (L != s->L || P != s->P) {
            hs_die_agreed("%s has max_seq_length %d and max_predictions_per_seq %d but %s has %d and %d: all shards "
                          "of a split must be made with the same settings (keep phase-1 and phase-2 shards in "
                          "separate directories)",
                          f->path, L, P, s->files[0].path, s->L, s->P);
        }
        for (int k = 0; k < NUM_DS; k++) f->layout[k] = layout_of((int)rec[REC_TYPE + k]);
        f->rows = rec[REC_ROWS];
        f->offset = s->total;
        s->total += f->rows;
        if (rec[REC_THIN] && thin_files++ == 0) thin_example = i;
    }
    if (s->total == 0)
        hs_die_agreed("%s: the %d shard file%s of split '%s' hold no rows", path, s->nfiles, s->nfiles > 1 ? "s" : "",
                      split ? split : "");

    static int warned; /* once per process, however many splits are opened */
    if (thin_files > 0 && !warned && rank == 0) {
        warned = 1;
        const int64_t *rec =
            recs + ((size_t)(thin_example % size) * (size_t)per_rank + (size_t)(thin_example / size)) * REC_LEN;
        unsigned long long ccols = (unsigned long long)rec[REC_CCOLS];
        hs_warn("%d of %d BERT shard%s (e.g. %s) store input_ids in %schunks of %llux%llu: each %d-token row "
                "touches %llu chunks, so reading rows is slow. Repack them once: `hetseq prep repack --in DIR "
                "--out DIR2` (or `h5repack -l input_ids,input_mask,segment_ids:CHUNK=64x%d IN OUT` per file)",
                thin_files, s->nfiles, s->nfiles > 1 ? "s" : "", s->files[thin_example].path,
                rec[REC_FILTERED] ? "compressed " : "", (unsigned long long)rec[REC_CROWS], ccols, s->L,
                ((unsigned long long)s->L + ccols - 1) / ccols, s->L);
    }
    free(recs);

    /* Rows are read through MPI-IO on the I/O communicator; files are opened there when a read first
     * touches them. */
    s->max_open = open_bound(s->nfiles, io_comm);
    HS_ALLOC(s->open_list, (size_t)s->max_open + 1);
    s->fapl = (hid_t)HS_H5(H5Pcreate(H5P_FILE_ACCESS), NULL);
    HS_H5(H5Pset_fapl_mpio(s->fapl, io_comm, MPI_INFO_NULL), NULL);
    /* metadata reads: one rank reads, the others receive it (no metadata storm at scale) */
    HS_H5(H5Pset_all_coll_metadata_ops(s->fapl, 1), NULL);
    s->dxpl = (hid_t)HS_H5(H5Pcreate(H5P_DATASET_XFER), NULL);
    HS_H5(H5Pset_dxpl_mpio(s->dxpl, H5FD_MPIO_COLLECTIVE), NULL);
    /* all chunks of a read in one collective MPI-IO call: the library's default choice costs an extra
     * agreement per read and picks per-chunk I/O for gzip shards, measured 2x slower on 2 ranks */
    HS_H5(H5Pset_dxpl_mpio_chunk_opt(s->dxpl, H5FD_MPIO_CHUNK_ONE_IO), NULL);
    return s;
}

int64_t hs_bert_shards_num_samples(const hs_bert_shards *s) { return s->total; }
int hs_bert_shards_seq_len(const hs_bert_shards *s) { return s->L; }
int hs_bert_shards_max_pred(const hs_bert_shards *s) { return s->P; }
int hs_bert_shards_num_files(const hs_bert_shards *s) { return s->nfiles; }

const char *hs_bert_shards_file_path(const hs_bert_shards *s, int i) {
    if (i < 0 || i >= s->nfiles) HS_FATAL(NULL, "shard file %d of %d", i, s->nfiles);
    return s->files[i].path;
}

/* ---- the batch buffer ------------------------------------------------------------------------------- */

#define BATCH_ALIGN 64
static size_t align_up(size_t n) { return (n + BATCH_ALIGN - 1) / BATCH_ALIGN * BATCH_ALIGN; }

size_t hs_bert_batch_bytes(int max_count, int seq_len, int max_pred) {
    size_t n = (size_t)(max_count > 0 ? max_count : 0), tok = n * (size_t)seq_len * sizeof(int32_t),
           pred = n * (size_t)max_pred * sizeof(int32_t), row = n * sizeof(int32_t);
    return align_up(sizeof(hs_bert_batch)) + 3 * align_up(tok) + 2 * align_up(pred) + 2 * align_up(row);
}

hs_bert_batch *hs_bert_batch_view(void *buf, int count, int seq_len, int max_pred) {
    hs_bert_batch *b = buf;
    size_t n = (size_t)count, tok = align_up(n * (size_t)seq_len * sizeof(int32_t)),
           pred = align_up(n * (size_t)max_pred * sizeof(int32_t)), row = align_up(n * sizeof(int32_t));
    char *p = (char *)buf + align_up(sizeof(hs_bert_batch));
    b->count = count;
    b->seq_len = seq_len;
    b->max_pred = max_pred;
    b->input_ids = (int32_t *)p, p += tok;
    b->segment_ids = (int32_t *)p, p += tok;
    b->input_mask = (int32_t *)p, p += tok;
    b->mlm_positions = (int32_t *)p, p += pred;
    b->mlm_ids = (int32_t *)p, p += pred;
    b->nsp_labels = (int32_t *)p, p += row;
    b->num_mlm = (int32_t *)p;
    return b;
}

/* ---- collective row reads --------------------------------------------------------------------------- */

/* Index of the file holding global row g (0 <= g < total): the last file starting at or before g (an
 * empty file starts where the next begins, so it is never the last one). */
static int file_of(const hs_bert_shards *s, int64_t g) {
    int lo = 0, hi = s->nfiles - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (s->files[mid].offset <= g) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

static int is_host_int32(const int_layout *t) {
    static const union { uint16_t u; uint8_t b[2]; } probe = {1};
    return t->size == 4 && t->is_signed && t->big_endian == (probe.b[0] == 0);
}

/* One on-disk integer (of any layout) as int64; uint64 beyond INT64_MAX saturates (still out of range). */
static int64_t load_int(const unsigned char *p, const int_layout *t) {
    static const union { uint16_t u; uint8_t b[2]; } probe = {1};
    int host_big = probe.b[0] == 0;
    unsigned char v[8];
    for (int i = 0; i < t->size; i++) v[i] = t->big_endian == host_big ? p[i] : p[t->size - 1 - i];
    switch (t->size * (t->is_signed ? 1 : -1)) {
    case 1: return (int8_t)v[0];
    case -1: return v[0];
    case 2: { int16_t x; memcpy(&x, v, 2); return x; }
    case -2: { uint16_t x; memcpy(&x, v, 2); return x; }
    case 4: { int32_t x; memcpy(&x, v, 4); return x; }
    case -4: { uint32_t x; memcpy(&x, v, 4); return x; }
    case 8: { int64_t x; memcpy(&x, v, 8); return x; }
    default: { uint64_t x; memcpy(&x, v, 8); return x > INT64_MAX ? INT64_MAX : (int64_t)x; }
    }
}

/* Rows [lo, lo+n) of dataset k of f (width columns) into dst[n, width] as int32. n == 0 joins the
 * collective read with empty selections. Returns the index of the first value outside int32 (its
 * value in *bad), or -1. */
static int64_t read_rows(hs_bert_shards *s, shard_file *f, int k, int64_t lo, int n, int width, int32_t *dst,
                         int64_t *bad) {
    const int_layout *t = &f->layout[k];
    hid_t ds = f->ds[k];
    int ndim = width == 1 && k == DS_NSP ? -1 : 2; /* NSP may be [N] or [N,1]: ask the file */
    hid_t fspace = (hid_t)HS_H5(H5Dget_space(ds), NULL);
    if (ndim < 0) ndim = (int)HS_H5(H5Sget_simple_extent_ndims(fspace), NULL);
    size_t elems = (size_t)n * (size_t)width;
    void *raw = dst;
    int widen = !is_host_int32(t);
    if (widen && elems * (size_t)t->size > s->scratch_bytes) {
        s->scratch_bytes = elems * (size_t)t->size;
        s->scratch = hs_xrealloc(s->scratch, s->scratch_bytes, __FILE__, __LINE__);
    }
    if (widen) raw = s->scratch;

    hid_t mspace;
    unsigned char unused[8];
    if (n > 0) {
        hsize_t start[2] = {(hsize_t)lo, 0}, block[2] = {(hsize_t)n, (hsize_t)width};
        HS_H5(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, block, NULL), NULL);
        mspace = (hid_t)HS_H5(H5Screate_simple(ndim, block, NULL), NULL);
    } else {
        hsize_t one[2] = {1, 1};
        HS_H5(H5Sselect_none(fspace), NULL);
        mspace = (hid_t)HS_H5(H5Screate_simple(ndim, one, NULL), NULL);
        HS_H5(H5Sselect_none(mspace), NULL);
        raw = unused; /* nothing is written; some HDF5 versions reject a NULL buffer */
    }
    if (H5Dread(ds, t->type, mspace, fspace, s->dxpl, raw) < 0) {
        char reason[HS_H5_REASON_LEN];
        hs_die("%s: reading rows [%lld, %lld) of dataset %s failed (%s); the file may be damaged or truncated. "
               SHARD_HINT,
               f->path, (long long)lo, (long long)lo + n, ds_names[k], hs_h5_reason(reason));
    }
    uint32_t local = 0, global = 0;
    HS_H5(H5Pget_mpio_no_collective_cause(s->dxpl, &local, &global), NULL);
    s->no_collective_cause |= local | global;
    HS_H5(H5Sclose(mspace), NULL);
    HS_H5(H5Sclose(fspace), NULL);

    if (!widen || n == 0) return -1;
    const unsigned char *src = raw;
    for (size_t i = 0; i < elems; i++) {
        int64_t v = t->size == 1 && t->is_signed ? (int8_t)src[i] : load_int(src + i * (size_t)t->size, t);
        if (v < INT32_MIN || v > INT32_MAX) {
            *bad = v;
            return (int64_t)i;
        }
        dst[i] = (int32_t)v;
    }
    return -1;
}

_Noreturn static void bad_value(const shard_file *f, int k, int64_t row, int col, int64_t value, const char *why) {
    char where[64] = "";
    if (k != DS_NSP) snprintf(where, sizeof where, ", column %d", col);
    hs_die("%s: dataset %s, row %lld%s (global sample %lld): value %lld %s", f->path, ds_names[k], (long long)row, where,
           (long long)(f->offset + row), (long long)value, why);
}

/* Check the rows just read from f (file rows lo.., batch rows b0..) and turn the masked-LM lists into
 * -1 padded lists of the labelled positions. */
static void check_and_label(const hs_bert_shards *s, const shard_file *f, int64_t lo, hs_bert_batch *b, int b0, int n,
                            int vocab_size) {
    const int L = s->L, P = s->P;
    char vocab_why[256];
    snprintf(vocab_why, sizeof vocab_why,
             "is not a token id of the vocabulary [0, %d): set model.vocab_size to the size of the vocabulary the "
             "shards were made with",
             vocab_size);
    for (int r = b0; r < b0 + n; r++) {
        int64_t row = lo + (r - b0);
        const int32_t *ids = b->input_ids + (size_t)r * L, *mask = b->input_mask + (size_t)r * L,
                      *seg = b->segment_ids + (size_t)r * L;
        for (int j = 0; j < L; j++) {
            if (ids[j] < 0 || (vocab_size > 0 && ids[j] >= vocab_size)) bad_value(f, DS_INPUT_IDS, row, j, ids[j], vocab_why);
            if ((uint32_t)mask[j] > 1) bad_value(f, DS_INPUT_MASK, row, j, mask[j], "is not 0 or 1");
            if ((uint32_t)seg[j] > 1) bad_value(f, DS_SEGMENT_IDS, row, j, seg[j], "is not 0 or 1 (two segments)");
        }
        if ((uint32_t)b->nsp_labels[r] > 1)
            bad_value(f, DS_NSP, row, 0, b->nsp_labels[r], "is not 0 (IsNext) or 1 (random next)");

        /* NVIDIA/HetSeq: the labelled positions are those before the first 0 (position 0 is [CLS]) */
        int32_t *pos = b->mlm_positions + (size_t)r * P, *lab = b->mlm_ids + (size_t)r * P;
        int m = 0;
        while (m < P && pos[m] != 0) m++;
        for (int j = 0; j < m; j++) {
            if (pos[j] < 1 || pos[j] >= L) {
                char why[128];
                snprintf(why, sizeof why, "is not a token position in [1, %d)", L);
                bad_value(f, DS_MLM_POSITIONS, row, j, pos[j], why);
            }
            if (j > 0 && pos[j] <= pos[j - 1])
                bad_value(f, DS_MLM_POSITIONS, row, j, pos[j], "does not follow the previous position in ascending order");
            if (lab[j] < 0 || (vocab_size > 0 && lab[j] >= vocab_size)) bad_value(f, DS_MLM_IDS, row, j, lab[j], vocab_why);
        }
        for (int j = m; j < P; j++) pos[j] = lab[j] = -1;
        b->num_mlm[r] = m;
    }
}

void hs_bert_shards_read(hs_bert_shards *s, int64_t first, int count, int vocab_size, void *buf) {
    if (count < 0 || first < 0 || first + count > s->total)
        HS_FATAL(NULL, "BERT read of rows [%lld, %lld) outside [0, %lld)", (long long)first, (long long)first + count,
                 (long long)s->total);
    /* count 0 may come without a buffer: then nothing is laid out or written */
    hs_bert_batch empty = {0, s->L, s->P, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    hs_bert_batch *b = buf ? hs_bert_batch_view(buf, count, s->L, s->P) : &empty;
    if (!buf && count > 0) HS_FATAL(NULL, "BERT read of %d rows into a NULL buffer", count);

    /* The files the ranks' reads touch: each rank's [first file, last file] (every file between holds
     * some of its rows, or none), gathered over the I/O communicator. Every rank visits the union of
     * those ranges, file by file in increasing order, and reads each file with an empty selection where
     * it has no rows. Files nobody reads are not touched: the work of a read depends on the files that
     * hold the ranks' rows, not on how many shard files there are. */
    int mine[2] = {-1, -1}; /* EMPTY: no file */
    if (count > 0) {
        mine[0] = file_of(s, first);
        mine[1] = file_of(s, first + count - 1);
    }
    HS_CHECK_MPI(MPI_Allgather(mine, 2, MPI_INT, s->spans, 2, MPI_INT, s->io), NULL);
    int *sp = s->spans, nspan = 0;
    for (int r = 0; r < s->io_size; r++) { /* keep the non-empty ranges, sorted by first file */
        int a = s->spans[2 * r], e = s->spans[2 * r + 1];
        if (a < 0) continue;
        int j = nspan++;
        for (; j > 0 && sp[2 * (j - 1)] > a; j--) sp[2 * j] = sp[2 * (j - 1)], sp[2 * j + 1] = sp[2 * (j - 1) + 1];
        sp[2 * j] = a;
        sp[2 * j + 1] = e;
    }

    int32_t *dst[NUM_DS] = {b->input_ids, b->input_mask, b->segment_ids, b->mlm_positions, b->mlm_ids, b->nsp_labels};
    const int width[NUM_DS] = {s->L, s->L, s->L, s->P, s->P, 1};
    int next = 0; /* first file not visited yet: merged ranges visit each file once */
    for (int j = 0; j < nspan; j++) {
        for (int fi = sp[2 * j] > next ? sp[2 * j] : next; fi <= sp[2 * j + 1]; fi++) {
            shard_file *f = &s->files[fi];
            if (f->rows == 0) continue; /* nobody's rows: the same on every rank */
            ensure_open(s, f);
            /* this rank's rows of the file: global [a, e) */
            int64_t a = first > f->offset ? first : f->offset;
            int64_t e = first + count < f->offset + f->rows ? first + count : f->offset + f->rows;
            int n = e > a ? (int)(e - a) : 0;
            int64_t lo = n > 0 ? a - f->offset : 0;
            int b0 = n > 0 ? (int)(a - first) : 0;
            for (int k = 0; k < NUM_DS; k++) {
                int64_t bad = 0;
                int32_t *rows_dst = n > 0 ? dst[k] + (size_t)b0 * (size_t)width[k] : NULL;
                int64_t at = read_rows(s, f, k, lo, n, width[k], rows_dst, &bad);
                if (at >= 0) bad_value(f, k, lo + at / width[k], (int)(at % width[k]), bad, "does not fit in 32 bits");
            }
            if (n > 0) check_and_label(s, f, lo, b, b0, n, vocab_size);
        }
        if (sp[2 * j + 1] + 1 > next) next = sp[2 * j + 1] + 1;
    }
}

uint32_t hs_bert_shards_no_collective_cause(const hs_bert_shards *s) { return s->no_collective_cause; }
int64_t hs_bert_shards_file_opens(const hs_bert_shards *s) { return (int64_t)s->opens; }
int hs_bert_shards_max_open(const hs_bert_shards *s) { return s->max_open; }

void hs_bert_shards_close(hs_bert_shards *s) {
    if (!s) return;
    for (int i = 0; i < s->nfiles; i++) {
        close_file(s, &s->files[i]);
        free(s->files[i].path);
    }
    HS_H5(H5Pclose(s->dxpl), NULL);
    HS_H5(H5Pclose(s->fapl), NULL);
    free(s->files);
    free(s->spans);
    free(s->open_list);
    free(s->scratch);
    free(s);
}
