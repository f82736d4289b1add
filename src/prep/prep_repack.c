/* `hetseq prep repack`: rewrites BERT shards with row-friendly chunks. NVIDIA's shards are gzip-
 * compressed in h5py's automatic chunks, tall and 2-8 columns thin (e.g. 4688x4 for input_ids), so a
 * micro-batch of rows touches and inflates dozens of chunks per dataset. Here every dataset with rows
 * gets chunks of [rows_per_chunk, all columns] (a row read touches one or two chunks), the same types
 * and values, and optionally gzip. Ranks split the files round-robin; each file is converted by one
 * rank with the serial HDF5 driver, written to a hidden temporary name, synced, then renamed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prep/prep.h"
#include "prep/prep_args.h"
#include "util/check.h"
#include "util/publish.h"
#include "util/dirlist.h"
#include "util/h5util.h"

static const char *const USAGE =
    "usage: hetseq prep repack --in FILE_OR_DIR --out DIR [--rows-per-chunk 64] [--gzip 0..9]";

/* the datasets a file must hold to be a BERT shard (the reader's list) */
static const char *const shard_datasets[6] = {"input_ids",           "input_mask",    "segment_ids",
                                              "masked_lm_positions", "masked_lm_ids", "next_sentence_labels"};

/* One block of rows copied per read/write: about this many bytes (and at least one source chunk row). */
#define BLOCK_BYTES (32u << 20)
/* Largest chunk cache given to a source dataset (a whole band of thin chunks across the columns). */
#define MAX_CACHE_BYTES (512u << 20)

typedef struct repack_args {
    const char *in, *out_dir;
    long long rows_per_chunk, gzip;
} repack_args;

static void take_option(void *args, const char *opt, const char *val, char *err, size_t errlen) {
    repack_args *a = args;
    if (!strcmp(opt, "--in")) a->in = val;
    else if (!strcmp(opt, "--out")) a->out_dir = val;
    else if (!strcmp(opt, "--rows-per-chunk"))
        hs_prep_parse_count(opt, val, 1, 1 << 20, &a->rows_per_chunk, err, errlen);
    else if (!strcmp(opt, "--gzip")) hs_prep_parse_count(opt, val, 0, 9, &a->gzip, err, errlen);
    else snprintf(err, errlen, "unknown option %s", opt);
}

static void check_required(void *args, char *err, size_t errlen) {
    const repack_args *a = args;
    if (!a->in) snprintf(err, errlen, "--in FILE_OR_DIR is required (a BERT shard or a directory of shards)");
    else if (!a->out_dir) snprintf(err, errlen, "--out DIR is required (the directory for the repacked shards)");
}

/* Identical on every rank: returns 0, -1 for --help, or 1 after rank 0 printed what is wrong. */
static int parse_args(int argc, char **argv, int rank, repack_args *a) {
    const hs_prep_cli cli = {"repack", USAGE, NULL, NULL, take_option, check_required};
    memset(a, 0, sizeof *a);
    a->rows_per_chunk = 64;
    return hs_prep_parse_args(&cli, argc, argv, rank, a);
}


static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Rank 0: the HDF5 files of --in (sorted, joined with '\0') and the output directory made. Returns the
 * number of files, or -1 with a message in err. */
static int plan(const repack_args *a, char **list, size_t *len, char *err, size_t errlen) {
    struct stat st;
    *list = NULL;
    *len = 0;
    if (stat(a->in, &st) != 0) {
        snprintf(err, errlen, "cannot read --in %s: %s", a->in, strerror(errno));
        return -1;
    }
    char **names = NULL;
    int n = 0;
    if (!S_ISDIR(st.st_mode)) {
        HS_ALLOC(names, 1);
        names[n++] = HS_STRDUP(a->in);
    } else {
        char **entries;
        int n_entries = hs_dir_list(a->in, &entries, err, errlen);
        if (n_entries < 0) return -1;
        HS_ALLOC(names, n_entries);
        for (int i = 0; i < n_entries; i++) {
            char *full = entries[i];
            /* only HDF5 files: a directory of shards often holds a vocabulary or a log too */
            if (stat(full, &st) != 0 || !S_ISREG(st.st_mode) || H5Fis_hdf5(full) <= 0) {
                H5Eclear2(H5E_DEFAULT);
                printf("| prep repack: skipping %s (not an HDF5 file)\n", full);
                free(full);
                continue;
            }
            names[n++] = full;
        }
        free(entries);
        if (n == 0) {
            free(names);
            snprintf(err, errlen, "--in %s holds no HDF5 file", a->in);
            return -1;
        }
    }
    if (mkdir(a->out_dir, 0777) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create --out %s: %s", a->out_dir, strerror(errno));
        for (int i = 0; i < n; i++) free(names[i]);
        free(names);
        return -1;
    }
    if (stat(a->out_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "--out %s is not a directory", a->out_dir);
        for (int i = 0; i < n; i++) free(names[i]);
        free(names);
        return -1;
    }
    hs_dir_pack(names, n, list, len);
    return n;
}

/* ---- one file ---------------------------------------------------------------------------------------- */

/* Copy dataset `name` of src into dst with chunks [min(rpc, N), all other dims]. Returns 0, or 1 with
 * a message in err. */
static int copy_dataset(hid_t src, hid_t dst, const char *name, const repack_args *a, const char *in_path,
                        char *err, size_t errlen) {
    hid_t in = (hid_t)HS_H5(H5Dopen2(src, name, H5P_DEFAULT), NULL);
    hid_t type = (hid_t)HS_H5(H5Dget_type(in), NULL);
    hid_t space = (hid_t)HS_H5(H5Dget_space(in), NULL);
    int ndim = (int)HS_H5(H5Sget_simple_extent_ndims(space), NULL);
    hsize_t dims[H5S_MAX_RANK], chunk[H5S_MAX_RANK];
    HS_H5(H5Sget_simple_extent_dims(space, dims, NULL), NULL);
    size_t row_bytes = H5Tget_size(type);
    for (int d = 1; d < ndim; d++) row_bytes *= dims[d];

    /* a source chunk cache holding a whole band of its chunks across the columns: the block reads below
     * need not line up with the source chunks, and then a straddling band is inflated only once */
    hid_t in_dcpl = (hid_t)HS_H5(H5Dget_create_plist(in), NULL);
    hsize_t src_chunk_rows = 1;
    if (ndim >= 1 && HS_H5(H5Pget_layout(in_dcpl), NULL) == H5D_CHUNKED) {
        HS_H5(H5Pget_chunk(in_dcpl, ndim, chunk), NULL);
        src_chunk_rows = chunk[0];
        size_t band = (size_t)chunk[0] * row_bytes * 2;
        if (band > MAX_CACHE_BYTES) band = MAX_CACHE_BYTES;
        HS_H5(H5Dclose(in), NULL);
        hid_t dapl = (hid_t)HS_H5(H5Pcreate(H5P_DATASET_ACCESS), NULL);
        HS_H5(H5Pset_chunk_cache(dapl, 100003, band > (1u << 20) ? band : (1u << 20), 1.0), NULL);
        in = (hid_t)HS_H5(H5Dopen2(src, name, dapl), NULL);
        HS_H5(H5Pclose(dapl), NULL);
    }
    HS_H5(H5Pclose(in_dcpl), NULL);

    hid_t dcpl = (hid_t)HS_H5(H5Pcreate(H5P_DATASET_CREATE), NULL);
    hsize_t rows = ndim >= 1 ? dims[0] : 1;
    if (ndim >= 1 && rows > 0) {
        chunk[0] = rows < (hsize_t)a->rows_per_chunk ? rows : (hsize_t)a->rows_per_chunk;
        for (int d = 1; d < ndim; d++) chunk[d] = dims[d] > 0 ? dims[d] : 1;
        HS_H5(H5Pset_chunk(dcpl, ndim, chunk), NULL);
        if (a->gzip > 0) {
            HS_H5(H5Pset_shuffle(dcpl), NULL); /* byte planes of int32 ids compress far better */
            HS_H5(H5Pset_deflate(dcpl, (unsigned)a->gzip), NULL);
        }
    }
    HS_H5(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), NULL); /* every element is written */
    hid_t out = H5Dcreate2(dst, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    HS_H5(H5Pclose(dcpl), NULL);
    if (out < 0) {
        char reason[HS_H5_REASON_LEN];
        snprintf(err, errlen, "%s: cannot create dataset %s in the output (%s)", in_path, name, hs_h5_reason(reason));
        H5Sclose(space);
        H5Tclose(type);
        H5Dclose(in);
        return 1;
    }

    /* blocks of whole output chunks, at least one source chunk row tall */
    hsize_t block = row_bytes ? BLOCK_BYTES / row_bytes : rows;
    if (block < src_chunk_rows) block = src_chunk_rows;
    block = (block + (hsize_t)a->rows_per_chunk - 1) / (hsize_t)a->rows_per_chunk * (hsize_t)a->rows_per_chunk;
    if (block > rows) block = rows;
    void *buf = NULL;
    if (ndim == 0) { /* a scalar: one element */
        HS_ALLOC(buf, row_bytes);
        if (H5Dread(in, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) goto read_failed;
        HS_H5(H5Dwrite(out, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf), "is the disk full?");
    } else if (rows > 0) {
        buf = hs_xcalloc((size_t)block, row_bytes ? row_bytes : 1, __FILE__, __LINE__);
        for (hsize_t r0 = 0; r0 < rows; r0 += block) {
            hsize_t start[H5S_MAX_RANK] = {0}, count[H5S_MAX_RANK];
            start[0] = r0;
            count[0] = rows - r0 < block ? rows - r0 : block;
            for (int d = 1; d < ndim; d++) count[d] = dims[d];
            hid_t fs_in = (hid_t)HS_H5(H5Scopy(space), NULL), fs_out = (hid_t)HS_H5(H5Scopy(space), NULL);
            hid_t ms = (hid_t)HS_H5(H5Screate_simple(ndim, count, NULL), NULL);
            HS_H5(H5Sselect_hyperslab(fs_in, H5S_SELECT_SET, start, NULL, count, NULL), NULL);
            HS_H5(H5Sselect_hyperslab(fs_out, H5S_SELECT_SET, start, NULL, count, NULL), NULL);
            herr_t rc = H5Dread(in, type, ms, fs_in, H5P_DEFAULT, buf);
            if (rc >= 0) HS_H5(H5Dwrite(out, type, ms, fs_out, H5P_DEFAULT, buf), "is the disk full?");
            HS_H5(H5Sclose(ms), NULL);
            HS_H5(H5Sclose(fs_in), NULL);
            HS_H5(H5Sclose(fs_out), NULL);
            if (rc < 0) goto read_failed;
        }
    }
    free(buf);
    HS_H5(H5Dclose(out), "is the disk full?");
    HS_H5(H5Sclose(space), NULL);
    HS_H5(H5Tclose(type), NULL);
    HS_H5(H5Dclose(in), NULL);
    return 0;

read_failed: {
    char reason[HS_H5_REASON_LEN];
    snprintf(err, errlen, "%s: reading dataset %s failed (%s); the file may be damaged or truncated", in_path, name,
             hs_h5_reason(reason));
    free(buf);
    H5Dclose(out);
    H5Sclose(space);
    H5Tclose(type);
    H5Dclose(in);
    return 1;
}
}

/* Repack one shard. Returns 0 (rows in *rows), or 1 after printing one message. */
static int repack_file(const char *in_path, const repack_args *a, long long *rows) {
    char err[4096] = "";
    const char *name = base_name(in_path);
    size_t plen = strlen(a->out_dir) + strlen(name) + 8;
    char *out_path, *tmp_path;
    HS_ALLOC(out_path, plen);
    HS_ALLOC(tmp_path, plen);
    snprintf(out_path, plen, "%s/%s", a->out_dir, name);
    snprintf(tmp_path, plen, "%s/.%s.tmp", a->out_dir, name); /* hidden: readers of the directory skip it */
    hid_t src = H5I_INVALID_HID, dst = H5I_INVALID_HID;
    int status = 1;

    src = H5Fopen(in_path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (src < 0) {
        char reason[HS_H5_REASON_LEN];
        snprintf(err, sizeof err, "%s is not a readable HDF5 file (%s); it may be truncated", in_path,
                 hs_h5_reason(reason));
        goto done;
    }
    /* a BERT shard: the six datasets, one row count */
    hsize_t n_rows = 0;
    for (int k = 0; k < 6; k++) {
        if (HS_H5(H5Lexists(src, shard_datasets[k], H5P_DEFAULT), NULL) <= 0) {
            snprintf(err, sizeof err, "%s: dataset %s is missing; this is not an NVIDIA BERT shard", in_path,
                     shard_datasets[k]);
            goto done;
        }
        hid_t ds = H5Dopen2(src, shard_datasets[k], H5P_DEFAULT);
        if (ds < 0) {
            H5Eclear2(H5E_DEFAULT);
            snprintf(err, sizeof err, "%s: %s is not a dataset; this is not an NVIDIA BERT shard", in_path,
                     shard_datasets[k]);
            goto done;
        }
        hid_t space = (hid_t)HS_H5(H5Dget_space(ds), NULL);
        hsize_t dims[H5S_MAX_RANK] = {0};
        int ndim = (int)HS_H5(H5Sget_simple_extent_dims(space, dims, NULL), NULL);
        HS_H5(H5Sclose(space), NULL);
        HS_H5(H5Dclose(ds), NULL);
        if (ndim < 1) {
            snprintf(err, sizeof err, "%s: dataset %s is a scalar, expected one row per sequence", in_path,
                     shard_datasets[k]);
            goto done;
        }
        if (k == 0) n_rows = dims[0];
        else if (dims[0] != n_rows) {
            snprintf(err, sizeof err, "%s: dataset %s has %llu rows but input_ids has %llu (an interrupted write?)",
                     in_path, shard_datasets[k], (unsigned long long)dims[0], (unsigned long long)n_rows);
            goto done;
        }
    }

    hid_t fapl = (hid_t)HS_H5(H5Pcreate(H5P_FILE_ACCESS), NULL);
    HS_H5(H5Pset_fapl_sec2(fapl), NULL); /* one writer per file: the serial POSIX driver */
    dst = H5Fcreate(tmp_path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    HS_H5(H5Pclose(fapl), NULL);
    if (dst < 0) {
        H5Eclear2(H5E_DEFAULT);
        snprintf(err, sizeof err, "cannot create %s: is the directory of --out writable?", tmp_path);
        goto done;
    }
    /* every root object: datasets with rows are rechunked, anything else is copied as it is */
    H5G_info_t info;
    HS_H5(H5Gget_info(src, &info), NULL);
    for (hsize_t i = 0; i < info.nlinks; i++) {
        char link[1024];
        ssize_t l = H5Lget_name_by_idx(src, ".", H5_INDEX_NAME, H5_ITER_INC, i, link, sizeof link, H5P_DEFAULT);
        HS_H5(l, NULL);
        if ((size_t)l >= sizeof link) {
            snprintf(err, sizeof err, "%s: object name longer than %zu bytes", in_path, sizeof link - 1);
            goto done;
        }
        hid_t obj = H5Oopen(src, link, H5P_DEFAULT);
        if (obj < 0) {
            char reason[HS_H5_REASON_LEN];
            snprintf(err, sizeof err, "%s: cannot open %s (%s)", in_path, link, hs_h5_reason(reason));
            goto done;
        }
        H5I_type_t kind = H5Iget_type(obj);
        HS_H5(H5Oclose(obj), NULL);
        if (kind == H5I_DATASET) {
            if (copy_dataset(src, dst, link, a, in_path, err, sizeof err) != 0) goto done;
        } else if (H5Ocopy(src, link, dst, link, H5P_DEFAULT, H5P_DEFAULT) < 0) {
            char reason[HS_H5_REASON_LEN];
            snprintf(err, sizeof err, "%s: cannot copy %s (%s)", in_path, link, hs_h5_reason(reason));
            goto done;
        }
    }
    HS_H5(H5Fclose(src), NULL);
    src = H5I_INVALID_HID;
    HS_H5(H5Fclose(dst), "is the disk full?");
    dst = H5I_INVALID_HID;
    if (hs_publish_file(tmp_path, out_path) != 0) {
        snprintf(err, sizeof err, "cannot move %s to %s: %s", tmp_path, out_path, strerror(errno));
        goto done;
    }
    *rows = (long long)n_rows;
    printf("| prep repack: %s -> %s (%llu rows, chunks of %llu rows%s)\n", in_path, out_path,
           (unsigned long long)n_rows, (unsigned long long)(n_rows < (hsize_t)a->rows_per_chunk ? n_rows : (hsize_t)a->rows_per_chunk),
           a->gzip > 0 ? ", shuffle + gzip" : ", uncompressed");
    fflush(stdout);
    status = 0;

done:
    if (src >= 0) H5Fclose(src);
    if (dst >= 0) H5Fclose(dst);
    if (status != 0) {
        unlink(tmp_path);
        H5Eclear2(H5E_DEFAULT);
        fprintf(stderr, "hetseq: error: prep repack: %s\n", err);
        fflush(stderr);
    }
    free(out_path);
    free(tmp_path);
    return status;
}

int hs_prep_repack_main(int argc, char **argv, const hs_comm *comm) {
    repack_args a;
    int parsed = parse_args(argc, argv, comm->rank, &a);
    if (parsed < 0) return 0; /* --help */
    if (parsed > 0) return 1;
    HS_H5(H5Eset_auto2(H5E_DEFAULT, NULL, NULL), NULL);

    /* rank 0 plans; everyone gets the same list */
    char err[1024] = "";
    char *list = NULL;
    size_t len = 0;
    long long head[2] = {0, 0};
    if (comm->rank == 0) {
        head[0] = plan(&a, &list, &len, err, sizeof err);
        head[1] = (long long)len;
        if (head[0] < 0) fprintf(stderr, "hetseq: error: prep repack: %s\n", err);
        fflush(stdout);
    }
    hs_comm_bcast_bytes(comm, head, sizeof head, 0);
    if (head[0] < 0) return 1;
    if (comm->rank != 0) HS_ALLOC(list, head[1]);
    hs_comm_bcast_bytes(comm, list, (size_t)head[1], 0);

    /* file i goes to rank i mod size */
    int status = 0;
    long long rows = 0, files = 0;
    const char *p = list;
    for (long long i = 0; i < head[0]; i++, p += strlen(p) + 1) {
        if (i % comm->size != comm->rank) continue;
        long long r = 0;
        if (repack_file(p, &a, &r) != 0) {
            status = 1;
            continue;
        }
        rows += r;
        files++;
    }
    free(list);
    double totals[2] = {(double)rows, (double)files};
    hs_comm_allreduce_sum_double(comm, totals, 2);
    status = (int)hs_comm_max_ll(comm, status);
    if (comm->rank == 0 && status == 0) {
        printf("| prep repack: %.0f file%s, %.0f rows, chunks of %lld rows, %s -> %s\n", totals[1],
               totals[1] == 1 ? "" : "s", totals[0], a.rows_per_chunk,
               a.gzip > 0 ? "shuffle + gzip" : "uncompressed", a.out_dir);
        fflush(stdout);
    }
    return status;
}
