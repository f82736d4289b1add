/* `hetseq prep mnist`: MNIST-format IDX files (MNIST, Fashion-MNIST, KMNIST; gzipped or not) to the
 * HDF5 file the MNIST task reads (docs/data-formats.md). Rank 0 converts with the serial HDF5 driver;
 * the other ranks wait, and every rank returns the same exit status. */
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prep/idx.h"
#include "data/mnist.h"
#include "prep/prep.h"
#include "prep/prep_args.h"
#include "util/check.h"
#include "util/publish.h"

/* Rows per chunk: a micro-batch of up to a few hundred rows touches one or two chunks; a 1024-image
 * chunk is 784 KiB, inside HDF5's default 1 MiB chunk cache. */
#define PREP_CHUNK_ROWS 1024

static const char *const USAGE = "usage: hetseq prep mnist --in DIR --out FILE.h5 [--limit-train N] [--limit-test N]";

typedef struct prep_args {
    const char *in_dir, *out_path;
    long long limit[2]; /* train, test; 0 = all */
} prep_args;

/* IDX base names of the four files, in split order train, test. */
static const char *const image_names[2] = {"train-images-idx3-ubyte", "t10k-images-idx3-ubyte"};
static const char *const label_names[2] = {"train-labels-idx1-ubyte", "t10k-labels-idx1-ubyte"};
static const char *const split_groups[2] = {"train", "test"};

static void take_option(void *args, const char *opt, const char *val, char *err, size_t errlen) {
    prep_args *a = args;
    if (!strcmp(opt, "--in")) a->in_dir = val;
    else if (!strcmp(opt, "--out")) a->out_path = val;
    else if (!strcmp(opt, "--limit-train") || !strcmp(opt, "--limit-test")) {
        char *end;
        errno = 0;
        long long v = strtoll(val, &end, 10);
        if (errno || *end || end == val || v < 1)
            snprintf(err, errlen, "%s %s: expected a whole number >= 1", opt, val);
        a->limit[!strcmp(opt, "--limit-test")] = v;
    } else snprintf(err, errlen, "unknown option %s", opt);
}

static void check_required(void *args, char *err, size_t errlen) {
    const prep_args *a = args;
    if (!a->in_dir) snprintf(err, errlen, "--in DIR is required (the directory with the IDX files)");
    else if (!a->out_path) snprintf(err, errlen, "--out FILE.h5 is required");
}

/* Identical on every rank: returns 0, -1 for --help, or 1 after rank 0 printed what is wrong. */
static int parse_args(int argc, char **argv, int rank, prep_args *a) {
    const hs_prep_cli cli = {"mnist", USAGE, NULL, NULL, take_option, check_required};
    memset(a, 0, sizeof *a);
    return hs_prep_parse_args(&cli, argc, argv, rank, a);
}

/* DIR/NAME, else DIR/NAME.gz; NULL (and a message in err) if neither is there. */
static char *find_idx(const char *dir, const char *name, char *err, size_t errlen) {
    size_t len = strlen(dir) + strlen(name) + 8;
    char *path;
    HS_ALLOC(path, len);
    snprintf(path, len, "%s/%s", dir, name);
    if (access(path, F_OK) == 0) return path;
    snprintf(path, len, "%s/%s.gz", dir, name);
    if (access(path, F_OK) == 0) return path;
    snprintf(err, errlen,
             "%s: neither %s nor %s.gz is there; --in must be the directory holding the four MNIST-format IDX "
             "files (train-images-idx3-ubyte, train-labels-idx1-ubyte, t10k-images-idx3-ubyte, "
             "t10k-labels-idx1-ubyte, each gzipped or not)",
             dir, name, name);
    free(path);
    return NULL;
}

static void write_u8_dataset(hid_t group, const char *name, int ndim, const hsize_t *dims, const uint8_t *data) {
    hsize_t chunk[3] = {dims[0] < PREP_CHUNK_ROWS ? dims[0] : PREP_CHUNK_ROWS, HS_MNIST_ROWS, HS_MNIST_COLS};
    hid_t space = (hid_t)HS_H5(H5Screate_simple(ndim, dims, NULL), NULL);
    hid_t dcpl = (hid_t)HS_H5(H5Pcreate(H5P_DATASET_CREATE), NULL);
    HS_H5(H5Pset_chunk(dcpl, ndim, chunk), NULL);
    hid_t ds = (hid_t)HS_H5(H5Dcreate2(group, name, H5T_STD_U8LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT), NULL);
    HS_H5(H5Dwrite(ds, H5T_NATIVE_UCHAR, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), "is the disk full?");
    HS_H5(H5Dclose(ds), NULL);
    HS_H5(H5Pclose(dcpl), NULL);
    HS_H5(H5Sclose(space), NULL);
}

/* Rank 0's work. Returns 0, or 1 after printing one message. */
static int convert(const prep_args *a) {
    char err[HS_IDX_ERR_LEN];
    hs_idx images[2], labels[2];
    char *ipath[2] = {NULL, NULL}, *lpath[2] = {NULL, NULL};
    memset(images, 0, sizeof images);
    memset(labels, 0, sizeof labels);
    int status = 1;
    int64_t rows[2];

    /* Read and check everything before creating any file. */
    for (int s = 0; s < 2; s++) {
        if (!(ipath[s] = find_idx(a->in_dir, image_names[s], err, sizeof err))) goto fail;
        if (!(lpath[s] = find_idx(a->in_dir, label_names[s], err, sizeof err))) goto fail;
        if (hs_idx_read(ipath[s], HS_IDX_MAGIC_IMAGES, &images[s], err, sizeof err) != 0) goto fail;
        if (hs_idx_read(lpath[s], HS_IDX_MAGIC_LABELS, &labels[s], err, sizeof err) != 0) goto fail;
        if (hs_idx_check_mnist_pair(&images[s], ipath[s], &labels[s], lpath[s], err, sizeof err) != 0) goto fail;
        rows[s] = images[s].dims[0];
        if (a->limit[s] > 0 && a->limit[s] < rows[s]) rows[s] = a->limit[s];
        if (rows[s] < 1) {
            snprintf(err, sizeof err, "%s holds no images", ipath[s]);
            goto fail;
        }
    }

    size_t tmp_len = strlen(a->out_path) + 5;
    char *tmp;
    HS_ALLOC(tmp, tmp_len);
    snprintf(tmp, tmp_len, "%s.tmp", a->out_path);
    hid_t fapl = (hid_t)HS_H5(H5Pcreate(H5P_FILE_ACCESS), NULL);
    HS_H5(H5Pset_fapl_sec2(fapl), NULL); /* one writer: the serial POSIX driver */
    hid_t file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    HS_H5(H5Pclose(fapl), NULL);
    if (file < 0) {
        H5Eclear2(H5E_DEFAULT);
        snprintf(err, sizeof err, "cannot create %s: does the directory of --out exist and is it writable?", tmp);
        free(tmp);
        goto fail;
    }
    for (int s = 0; s < 2; s++) {
        hid_t group = (hid_t)HS_H5(H5Gcreate2(file, split_groups[s], H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), NULL);
        hsize_t idims[3] = {(hsize_t)rows[s], HS_MNIST_ROWS, HS_MNIST_COLS};
        write_u8_dataset(group, "images", 3, idims, images[s].data); /* images[N,28,28] */
        write_u8_dataset(group, "labels", 1, idims, labels[s].data); /* labels[N] */
        HS_H5(H5Gclose(group), NULL);
    }
    HS_H5(H5Fclose(file), "is the disk full?");
    if (hs_publish_file(tmp, a->out_path) != 0) {
        snprintf(err, sizeof err, "cannot move %s to %s: %s", tmp, a->out_path, strerror(errno));
        free(tmp);
        goto fail;
    }
    free(tmp);
    printf("| prep mnist: %lld train and %lld test images (28x28 uint8) from %s -> %s\n", (long long)rows[0],
           (long long)rows[1], a->in_dir, a->out_path);
    fflush(stdout);
    status = 0;
    goto done;

fail:
    fprintf(stderr, "hetseq: error: prep mnist: %s\n", err);
    fflush(stderr);
done:
    for (int s = 0; s < 2; s++) {
        hs_idx_free(&images[s]);
        hs_idx_free(&labels[s]);
        free(ipath[s]);
        free(lpath[s]);
    }
    return status;
}

int hs_prep_mnist_main(int argc, char **argv, const hs_comm *comm) {
    prep_args a;
    int parsed = parse_args(argc, argv, comm->rank, &a);
    if (parsed < 0) return 0; /* --help */
    if (parsed > 0) return 1;
    HS_H5(H5Eset_auto2(H5E_DEFAULT, NULL, NULL), NULL);
    int status = comm->rank == 0 ? convert(&a) : 0;
    /* The others wait here for rank 0; everyone leaves with rank 0's verdict. */
    return (int)hs_comm_max_ll(comm, status);
}
