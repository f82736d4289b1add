/* Parallel reader of the language-model file <dir>/lm.h5 (layout in lm_data.h and docs/data-formats.md).
 * Rank 0 of the I/O communicator reads the small parts (attributes, the vocabulary) once with the serial
 * driver and broadcasts them, so a thousand ranks do not all walk the vocabulary's heap; then every rank
 * opens the file through MPI-IO, and a read of `count` runs of `len` tokens is ONE collective H5Dread of
 * a union of hyperslabs. The memory type equals the on-disk type (a converting read makes HDF5 1.10 fall
 * back to independent I/O); a big-endian file is byte-swapped here afterwards. */
#include "data/lm_data.h"

#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/check.h"
#include "util/fault.h"
#include "util/h5util.h"

#define LM_FORMAT "hetseq-lm-1"
#define PREP_HINT                                                                                                \
    "make it with `hetseq prep lm --in WIKITEXT_DIR --out DIR` (WikiText-format token files) or `hetseq prep lm " \
    "--raw TEXT... --out DIR` (ordinary text), and set data.path to DIR"

static const char *const split_names[3] = {"train", "valid", "test"};

struct hs_lm_data {
    char *path;
    MPI_Comm io;
    hid_t file, dxpl;
    hid_t ds[3];
    hid_t type[3]; /* the on-disk int32 type (predefined: no need to close) */
    int swap[3];   /* big-endian on disk: swap after reading */
    int64_t n[3];
    int32_t vocab_size, eos_id, unk_id, lower_case;
    char *words;      /* the vocabulary, NUL-terminated words back to back */
    int64_t *word_at; /* [vocab_size] offsets into words */
    uint32_t no_collective_cause;
    int32_t *scratch; /* overlapping or unordered runs: the union is read here first */
    size_t scratch_n;
    int64_t *order, *pos; /* [count] for the unordered case */
    int order_n;
};

/* What rank 0 learns from the file and sends to everyone. */
typedef struct lm_head {
    long long status; /* 0 ok, else err holds the message */
    long long n[3];
    long long vocab_size, eos_id, unk_id, lower_case;
    long long words_bytes;
    int big_endian[3];
} lm_head;

/* ---- rank 0: the attributes and the vocabulary ----------------------------------------------------------- */

/* Integer attribute `name` of the root group into *out: 0, or -1 with a message in err. */
static int get_attr_int(hid_t file, const char *path, const char *name, long long *out, char *err, size_t errlen) {
    if (HS_H5(H5Aexists(file, name), NULL) <= 0) {
        snprintf(err, errlen, "%s: attribute %s of / is missing; this is not a complete hetseq language-model file: "
                              PREP_HINT, path, name);
        return -1;
    }
    hid_t at = (hid_t)HS_H5(H5Aopen(file, name, H5P_DEFAULT), NULL);
    hid_t type = (hid_t)HS_H5(H5Aget_type(at), NULL);
    int is_int = HS_H5(H5Tget_class(type), NULL) == H5T_INTEGER;
    hid_t space = (hid_t)HS_H5(H5Aget_space(at), NULL);
    hssize_t points = HS_H5(H5Sget_simple_extent_npoints(space), NULL);
    HS_H5(H5Sclose(space), NULL);
    HS_H5(H5Tclose(type), NULL);
    int rc = 0;
    if (!is_int || points != 1) {
        snprintf(err, errlen, "%s: attribute %s of / is not one integer: " PREP_HINT, path, name);
        rc = -1;
    } else {
        int64_t v = 0;
        HS_H5(H5Aread(at, H5T_NATIVE_INT64, &v), NULL);
        *out = v;
    }
    HS_H5(H5Aclose(at), NULL);
    return rc;
}

/* The string attribute "format" (variable-length or fixed) into buf. */
static int get_format(hid_t file, char *buf, size_t len) {
    buf[0] = 0;
    if (HS_H5(H5Aexists(file, "format"), NULL) <= 0) return -1;
    hid_t at = (hid_t)HS_H5(H5Aopen(file, "format", H5P_DEFAULT), NULL);
    hid_t type = (hid_t)HS_H5(H5Aget_type(at), NULL);
    int rc = -1;
    if (HS_H5(H5Tget_class(type), NULL) == H5T_STRING) {
        hid_t mem = (hid_t)HS_H5(H5Tcopy(H5T_C_S1), NULL);
        HS_H5(H5Tset_cset(mem, H5Tget_cset(type)), NULL); /* HDF5 converts no character set into another */
        if (HS_H5(H5Tis_variable_str(type), NULL) > 0) {
            char *s = NULL;
            HS_H5(H5Tset_size(mem, H5T_VARIABLE), NULL);
            HS_H5(H5Aread(at, mem, &s), NULL);
            if (s) snprintf(buf, len, "%s", s);
            free(s); /* allocated by HDF5 with the system allocator */
        } else {
            size_t size = H5Tget_size(type);
            char *s;
            HS_ALLOC(s, size + 1);
            HS_H5(H5Tset_size(mem, size + 1), NULL); /* room for the terminator HDF5 adds */
            HS_H5(H5Tset_strpad(mem, H5T_STR_NULLTERM), NULL);
            HS_H5(H5Aread(at, mem, s), NULL);
            snprintf(buf, len, "%s", s);
            free(s);
        }
        HS_H5(H5Tclose(mem), NULL);
        rc = 0;
    }
    HS_H5(H5Tclose(type), NULL);
    HS_H5(H5Aclose(at), NULL);
    return rc;
}

/* Dataset `name` must be a 1-D 32-bit signed integer array; its length in *n and byte order in *big. */
static int check_split(hid_t file, const char *path, const char *name, long long *n, int *big, char *err,
                       size_t errlen) {
    if (HS_H5(H5Lexists(file, name, H5P_DEFAULT), NULL) <= 0) {
        snprintf(err, errlen, "%s: dataset /%s is missing (the %s split); this is not a complete hetseq "
                              "language-model file: " PREP_HINT, path, name, name);
        return -1;
    }
    hid_t ds = H5Dopen2(file, name, H5P_DEFAULT);
    if (ds < 0) {
        H5Eclear2(H5E_DEFAULT);
        snprintf(err, errlen, "%s: /%s is not a dataset: " PREP_HINT, path, name);
        return -1;
    }
    hid_t type = (hid_t)HS_H5(H5Dget_type(ds), NULL);
    int rc = 0;
    if (HS_H5(H5Tget_class(type), NULL) != H5T_INTEGER || H5Tget_size(type) != 4 ||
        HS_H5(H5Tget_sign(type), NULL) != H5T_SGN_2) {
        char desc[64];
        hs_h5_describe_type(type, desc, sizeof desc);
        snprintf(err, errlen, "%s: dataset /%s holds %s values; token ids are 32-bit signed integers (int32): "
                              PREP_HINT, path, name, desc);
        rc = -1;
    } else {
        *big = HS_H5(H5Tget_order(type), NULL) == H5T_ORDER_BE;
        hid_t space = (hid_t)HS_H5(H5Dget_space(ds), NULL);
        int ndim = (int)HS_H5(H5Sget_simple_extent_ndims(space), NULL);
        hsize_t dims[H5S_MAX_RANK];
        HS_H5(H5Sget_simple_extent_dims(space, dims, NULL), NULL);
        HS_H5(H5Sclose(space), NULL);
        if (ndim != 1) {
            snprintf(err, errlen, "%s: dataset /%s has %d dimensions; a split is one stream of token ids [N]: "
                                  PREP_HINT, path, name, ndim);
            rc = -1;
        } else {
            *n = (long long)dims[0];
        }
    }
    HS_H5(H5Tclose(type), NULL);
    HS_H5(H5Dclose(ds), NULL);
    return rc;
}

/* /vocab (variable-length or fixed-length strings) as NUL-terminated words back to back in *blob. */
static int read_vocab(hid_t file, const char *path, long long want, char **blob, long long *bytes, char *err,
                      size_t errlen) {
    if (HS_H5(H5Lexists(file, "vocab", H5P_DEFAULT), NULL) <= 0) {
        snprintf(err, errlen, "%s: dataset /vocab (the words of the token ids) is missing: " PREP_HINT, path);
        return -1;
    }
    hid_t ds = (hid_t)HS_H5(H5Dopen2(file, "vocab", H5P_DEFAULT), NULL);
    hid_t type = (hid_t)HS_H5(H5Dget_type(ds), NULL);
    hid_t space = (hid_t)HS_H5(H5Dget_space(ds), NULL);
    int ndim = (int)HS_H5(H5Sget_simple_extent_ndims(space), NULL);
    hssize_t n = HS_H5(H5Sget_simple_extent_npoints(space), NULL);
    int rc = -1;
    if (HS_H5(H5Tget_class(type), NULL) != H5T_STRING || ndim != 1) {
        snprintf(err, errlen, "%s: /vocab is not a 1-D array of strings: " PREP_HINT, path);
    } else if ((long long)n != want) {
        snprintf(err, errlen, "%s: /vocab holds %lld words but the attribute vocab_size says %lld (a damaged "
                              "file?): " PREP_HINT, path, (long long)n, want);
    } else {
        hid_t mem = (hid_t)HS_H5(H5Tcopy(H5T_C_S1), NULL);
        HS_H5(H5Tset_cset(mem, H5Tget_cset(type)), NULL); /* HDF5 converts no character set into another */
        size_t total = 0;
        if (HS_H5(H5Tis_variable_str(type), NULL) > 0) {
            char **s;
            HS_ALLOC(s, n > 0 ? n : 1);
            HS_H5(H5Tset_size(mem, H5T_VARIABLE), NULL);
            HS_H5(H5Dread(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, s), NULL);
            for (hssize_t i = 0; i < n; i++) total += (s[i] ? strlen(s[i]) : 0) + 1;
            HS_ALLOC(*blob, total ? total : 1);
            char *p = *blob;
            for (hssize_t i = 0; i < n; i++) {
                size_t l = s[i] ? strlen(s[i]) : 0;
                if (l) memcpy(p, s[i], l);
                p += l + 1;
            }
#if H5_VERSION_GE(1, 12, 0)
            HS_H5(H5Treclaim(mem, space, H5P_DEFAULT, s), NULL);
#else
            HS_H5(H5Dvlen_reclaim(mem, space, H5P_DEFAULT, s), NULL);
#endif
            free(s);
        } else {
            size_t size = H5Tget_size(type);
            char *fixed;
            HS_ALLOC(fixed, (size_t)n * (size + 1) + 1);
            HS_H5(H5Tset_size(mem, size + 1), NULL);
            HS_H5(H5Tset_strpad(mem, H5T_STR_NULLTERM), NULL);
            HS_H5(H5Dread(ds, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, fixed), NULL);
            for (hssize_t i = 0; i < n; i++) total += strlen(fixed + (size_t)i * (size + 1)) + 1;
            HS_ALLOC(*blob, total ? total : 1);
            char *p = *blob;
            for (hssize_t i = 0; i < n; i++) {
                const char *w = fixed + (size_t)i * (size + 1);
                size_t l = strlen(w);
                memcpy(p, w, l);
                p += l + 1;
            }
            free(fixed);
        }
        HS_H5(H5Tclose(mem), NULL);
        *bytes = (long long)total;
        rc = 0;
    }
    HS_H5(H5Sclose(space), NULL);
    HS_H5(H5Tclose(type), NULL);
    HS_H5(H5Dclose(ds), NULL);
    return rc;
}

/* Rank 0: everything but the token streams. 0, or -1 with a message in err. */
static int inspect(const char *path, lm_head *h, char **blob, char *err, size_t errlen) {
    if (hs_fault_access(path, R_OK) != 0) {
        snprintf(err, errlen, "cannot read the language-model data file %s: %s; " PREP_HINT, path, strerror(errno));
        return -1;
    }
    hid_t fapl = (hid_t)HS_H5(H5Pcreate(H5P_FILE_ACCESS), NULL);
    HS_H5(H5Pset_fapl_sec2(fapl), NULL);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    HS_H5(H5Pclose(fapl), NULL);
    if (file < 0) {
        char reason[HS_H5_REASON_LEN];
        snprintf(err, errlen, "%s is not a readable HDF5 file (%s); it may be truncated or still being written: "
                              PREP_HINT, path, hs_h5_reason(reason));
        return -1;
    }
    int rc = -1;
    char format[64];
    if (get_format(file, format, sizeof format) != 0 || strcmp(format, LM_FORMAT) != 0) {
        snprintf(err, errlen, "%s: the attribute format of / is %s%s%s, expected \"" LM_FORMAT "\"; this is not a "
                              "hetseq language-model file: " PREP_HINT, path, format[0] ? "\"" : "",
                 format[0] ? format : "missing", format[0] ? "\"" : "");
        goto done;
    }
    if (get_attr_int(file, path, "vocab_size", &h->vocab_size, err, errlen) != 0 ||
        get_attr_int(file, path, "eos_id", &h->eos_id, err, errlen) != 0 ||
        get_attr_int(file, path, "unk_id", &h->unk_id, err, errlen) != 0 ||
        get_attr_int(file, path, "lower_case", &h->lower_case, err, errlen) != 0)
        goto done;
    if (h->vocab_size < 1 || h->vocab_size > INT32_MAX || h->eos_id < 0 || h->eos_id >= h->vocab_size ||
        h->unk_id < -1 || h->unk_id >= h->vocab_size) {
        snprintf(err, errlen, "%s: vocab_size %lld, eos_id %lld, unk_id %lld: expected 1 <= vocab_size < 2^31, "
                              "0 <= eos_id < vocab_size, -1 <= unk_id < vocab_size: " PREP_HINT,
                 path, h->vocab_size, h->eos_id, h->unk_id);
        goto done;
    }
    for (int s = 0; s < 3; s++)
        if (check_split(file, path, split_names[s], &h->n[s], &h->big_endian[s], err, errlen) != 0) goto done;
    if (read_vocab(file, path, h->vocab_size, blob, &h->words_bytes, err, errlen) != 0) goto done;
    rc = 0;
done:
    HS_H5(H5Fclose(file), NULL);
    return rc;
}

/* ---- open ------------------------------------------------------------------------------------------------- */

#define MSG_CHUNK (1 << 30) /* MPI counts are int: large buffers go in pieces */

static void bcast_big(void *buf, long long bytes, MPI_Comm comm) {
    for (long long at = 0; at < bytes; at += MSG_CHUNK) {
        int piece = (int)(bytes - at < MSG_CHUNK ? bytes - at : MSG_CHUNK);
        HS_CHECK_MPI(MPI_Bcast((char *)buf + at, piece, MPI_BYTE, 0, comm), NULL);
    }
}

hs_lm_data *hs_lm_open(const char *dir, MPI_Comm io_comm) {
    /* hetseq explains HDF5 failures itself: keep the library from printing its stack. */
    HS_H5(H5Eset_auto2(H5E_DEFAULT, NULL, NULL), NULL);
    hs_lm_data *d;
    HS_ALLOC(d, 1);
    size_t plen = strlen(dir) + 8;
    HS_ALLOC(d->path, plen);
    snprintf(d->path, plen, "%s/lm.h5", dir);
    d->io = io_comm;
    int rank;
    HS_CHECK_MPI(MPI_Comm_rank(io_comm, &rank), NULL);

    /* rank 0 inspects; everyone gets the same facts (or the same error) */
    lm_head h;
    memset(&h, 0, sizeof h);
    char err[2048] = "";
    char *blob = NULL;
    if (rank == 0) h.status = inspect(d->path, &h, &blob, err, sizeof err) != 0;
    HS_CHECK_MPI(MPI_Bcast(&h, (int)sizeof h, MPI_BYTE, 0, io_comm), NULL);
    if (h.status) {
        HS_CHECK_MPI(MPI_Bcast(err, (int)sizeof err, MPI_CHAR, 0, io_comm), NULL);
        hs_die_agreed("%s", err);
    }
    if (rank != 0) HS_ALLOC(blob, h.words_bytes ? h.words_bytes : 1);
    bcast_big(blob, h.words_bytes, io_comm);
    d->words = blob;
    d->vocab_size = (int32_t)h.vocab_size;
    d->eos_id = (int32_t)h.eos_id;
    d->unk_id = (int32_t)h.unk_id;
    d->lower_case = (int32_t)h.lower_case;
    HS_ALLOC(d->word_at, d->vocab_size);
    int64_t at = 0;
    for (int32_t i = 0; i < d->vocab_size; i++) {
        if (at >= h.words_bytes) HS_FATAL(NULL, "%s: the vocabulary's words ended early (%d of %d)", d->path, i, d->vocab_size);
        d->word_at[i] = at;
        at += (int64_t)strlen(d->words + at) + 1;
    }

    /* the token streams: every rank through MPI-IO */
    hid_t fapl = (hid_t)HS_H5(H5Pcreate(H5P_FILE_ACCESS), NULL);
    HS_H5(H5Pset_fapl_mpio(fapl, io_comm, MPI_INFO_NULL), NULL);
    /* metadata reads: one rank reads, the others receive it (no metadata storm at scale) */
    HS_H5(H5Pset_all_coll_metadata_ops(fapl, 1), NULL);
    d->file = H5Fopen(d->path, H5F_ACC_RDONLY, fapl);
    HS_H5(H5Pclose(fapl), NULL);
    if (d->file < 0) {
        char reason[HS_H5_REASON_LEN];
        hs_die("%s could not be opened through MPI-IO (%s); was it replaced while the run started? " PREP_HINT,
               d->path, hs_h5_reason(reason));
    }
    for (int s = 0; s < 3; s++) {
        d->ds[s] = (hid_t)HS_H5(H5Dopen2(d->file, split_names[s], H5P_DEFAULT), PREP_HINT);
        d->n[s] = h.n[s];
        d->swap[s] = h.big_endian[s];
        d->type[s] = h.big_endian[s] ? H5T_STD_I32BE : H5T_STD_I32LE;
    }
    d->dxpl = (hid_t)HS_H5(H5Pcreate(H5P_DATASET_XFER), NULL);
    HS_H5(H5Pset_dxpl_mpio(d->dxpl, H5FD_MPIO_COLLECTIVE), NULL);
    return d;
}

void hs_lm_close(hs_lm_data *d) {
    if (!d) return;
    for (int s = 0; s < 3; s++) HS_H5(H5Dclose(d->ds[s]), NULL);
    HS_H5(H5Pclose(d->dxpl), NULL);
    HS_H5(H5Fclose(d->file), NULL);
    free(d->path);
    free(d->words);
    free(d->word_at);
    free(d->scratch);
    free(d->order);
    free(d->pos);
    free(d);
}

int64_t hs_lm_split_tokens(const hs_lm_data *d, hs_lm_split split) {
    if ((int)split < 0 || (int)split > 2) HS_FATAL(NULL, "language-model split %d", (int)split);
    return d->n[split];
}
int32_t hs_lm_vocab_size(const hs_lm_data *d) { return d->vocab_size; }
int32_t hs_lm_eos_id(const hs_lm_data *d) { return d->eos_id; }
int32_t hs_lm_unk_id(const hs_lm_data *d) { return d->unk_id; }
const char *hs_lm_path(const hs_lm_data *d) { return d->path; }
uint32_t hs_lm_no_collective_cause(const hs_lm_data *d) { return d->no_collective_cause; }

const char *hs_lm_word(const hs_lm_data *d, int32_t id) {
    if (id < 0 || id >= d->vocab_size) return "?";
    return d->words + d->word_at[id];
}

/* ---- collective reads ------------------------------------------------------------------------------------- */

/* the unordered case: run indices sorted by start (ties by index); glibc's qsort_r, no global state, as
 * reads run on the prefetch thread */
static int by_start(const void *a, const void *b, void *ctx) {
    const int64_t *starts = ctx;
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    if (starts[x] != starts[y]) return starts[x] < starts[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static void swap32(int32_t *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)v[i];
        v[i] = (int32_t)((u >> 24) | ((u >> 8) & 0xFF00u) | ((u << 8) & 0xFF0000u) | (u << 24));
    }
}

void hs_lm_read_runs(hs_lm_data *d, hs_lm_split split, const int64_t *starts, int count, int64_t len, int32_t *dst) {
    if ((int)split < 0 || (int)split > 2) HS_FATAL(NULL, "language-model split %d", (int)split);
    const int64_t n = d->n[split];
    if (count < 0 || len < 0)
        hs_die("%s: a read of %d runs of %lld tokens from the %s split: counts cannot be negative", d->path, count,
               (long long)len, split_names[split]);
    for (int i = 0; i < count; i++)
        if (starts[i] < 0 || starts[i] > n - len)
            hs_die("%s: run %d of %d reads tokens [%lld, %lld) of the %s split, which holds %lld tokens: every run "
                   "must lie inside the split (a segment walk past the end of its column?)",
                   d->path, i, count, (long long)starts[i], (long long)(starts[i] + len), split_names[split],
                   (long long)n);

    hid_t fspace = (hid_t)HS_H5(H5Dget_space(d->ds[split]), NULL);
    hid_t mspace;
    void *buf = dst;
    int32_t unused[1];
    int unordered = 0;
    size_t elems = (size_t)count * (size_t)len;
    if (elems == 0) { /* an empty selection still joins the collective */
        hsize_t one[1] = {1};
        HS_H5(H5Sselect_none(fspace), NULL);
        mspace = (hid_t)HS_H5(H5Screate_simple(1, one, NULL), NULL);
        HS_H5(H5Sselect_none(mspace), NULL);
        buf = unused; /* nothing is written; some HDF5 versions reject a NULL buffer */
    } else {
        /* HDF5 moves a selection in file order, so the runs land in dst in run order only when they are
         * ascending and disjoint; otherwise the union of the runs is read into scratch and copied out. */
        for (int i = 1; i < count && !unordered; i++) unordered = starts[i] < starts[i - 1] + len;
        if (!unordered) {
            int regular = 1; /* equally spaced: one strided hyperslab (the columns of a batch) */
            int64_t stride = count > 1 ? starts[1] - starts[0] : len;
            for (int i = 2; i < count && regular; i++) regular = starts[i] - starts[i - 1] == stride;
            if (regular) {
                hsize_t start[1] = {(hsize_t)starts[0]}, str[1] = {(hsize_t)(stride > 0 ? stride : 1)},
                        cnt[1] = {(hsize_t)count}, blk[1] = {(hsize_t)len};
                HS_H5(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, str, cnt, blk), NULL);
            } else {
                for (int i = 0; i < count; i++) {
                    hsize_t start[1] = {(hsize_t)starts[i]}, blk[1] = {(hsize_t)len};
                    HS_H5(H5Sselect_hyperslab(fspace, i ? H5S_SELECT_OR : H5S_SELECT_SET, start, NULL, blk, NULL),
                          NULL);
                }
            }
            hsize_t m[1] = {(hsize_t)elems};
            mspace = (hid_t)HS_H5(H5Screate_simple(1, m, NULL), NULL);
        } else {
            if (count > d->order_n) {
                d->order_n = count;
                HS_REALLOC(d->order, count);
                HS_REALLOC(d->pos, count);
            }
            for (int i = 0; i < count; i++) d->order[i] = i;
            qsort_r(d->order, (size_t)count, sizeof *d->order, by_start, (void *)starts);
            /* merge into disjoint intervals; pos[i] = where run i begins in the union */
            size_t total = 0;
            int64_t lo = -1, hi = -1; /* the interval being built */
            int first = 1, selected = 0;
            for (int k = 0; k < count; k++) {
                int64_t i = d->order[k], s = starts[i];
                if (first || s > hi) {
                    if (!first) {
                        hsize_t start[1] = {(hsize_t)lo}, blk[1] = {(hsize_t)(hi - lo)};
                        HS_H5(H5Sselect_hyperslab(fspace, selected++ ? H5S_SELECT_OR : H5S_SELECT_SET, start, NULL,
                                                  blk, NULL), NULL);
                    }
                    lo = s;
                    hi = s + len;
                    first = 0;
                    d->pos[i] = (int64_t)total;
                    total += (size_t)len;
                } else {
                    d->pos[i] = (int64_t)total - (hi - s);
                    if (s + len > hi) {
                        total += (size_t)(s + len - hi);
                        hi = s + len;
                    }
                }
            }
            hsize_t start[1] = {(hsize_t)lo}, blk[1] = {(hsize_t)(hi - lo)};
            HS_H5(H5Sselect_hyperslab(fspace, selected ? H5S_SELECT_OR : H5S_SELECT_SET, start, NULL, blk, NULL),
                  NULL);
            if (total > d->scratch_n) {
                d->scratch_n = total;
                HS_REALLOC(d->scratch, total);
            }
            buf = d->scratch;
            hsize_t m[1] = {(hsize_t)total};
            mspace = (hid_t)HS_H5(H5Screate_simple(1, m, NULL), NULL);
            elems = total;
        }
    }
    if (H5Dread(d->ds[split], d->type[split], mspace, fspace, d->dxpl, buf) < 0) {
        char reason[HS_H5_REASON_LEN];
        hs_die("%s: reading %d run%s of %lld tokens of the %s split failed (%s); the file may be damaged or "
               "truncated: " PREP_HINT,
               d->path, count, count == 1 ? "" : "s", (long long)len, split_names[split], hs_h5_reason(reason));
    }
    uint32_t local = 0, global = 0;
    HS_H5(H5Pget_mpio_no_collective_cause(d->dxpl, &local, &global), NULL);
    d->no_collective_cause |= local | global;
    HS_H5(H5Sclose(mspace), NULL);
    HS_H5(H5Sclose(fspace), NULL);
    if (count == 0 || len == 0) return;
    if (d->swap[split]) swap32(buf, elems);
    if (unordered)
        for (int i = 0; i < count; i++)
            memcpy(dst + (size_t)i * (size_t)len, d->scratch + d->pos[i], (size_t)len * sizeof *dst);
}
