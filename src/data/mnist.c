/* Parallel reader of the MNIST HDF5 file (layout in docs/data-formats.md). Every rank opens the file
 * through MPI-IO on the I/O communicator and reads its micro-batch as one hyperslab of rows per dataset
 * with a collective transfer. The memory type equals the on-disk type (uint8), because a converting
 * read makes HDF5 1.10 silently fall back to independent I/O. */
#include "data/mnist.h"

#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/check.h"
#include "util/fault.h"
#include "util/h5util.h"

#define REBUILD_HINT "re-create it with `hetseq prep mnist --in DIR --out FILE.h5`"

static const char *const split_names[2] = {"train", "test"};

struct hs_mnist_file {
    char *path;
    hid_t file;
    hid_t dxpl; /* collective transfer; also where HDF5 reports how the last read went */
    hid_t images[2], labels[2];
    int64_t num[2];
    uint32_t no_collective_cause; /* OR of every read's local and global causes */
};

/* ---- open: check the layout the way a user would want it explained ---------------------------------- */

static hid_t open_dataset(hs_mnist_file *f, const char *group, const char *name) {
    char dpath[64];
    snprintf(dpath, sizeof dpath, "%s/%s", group, name);
    /* H5Lexists on "a/b" fails when "a" is missing: test the group first. */
    if (HS_H5(H5Lexists(f->file, group, H5P_DEFAULT), NULL) <= 0 ||
        HS_H5(H5Lexists(f->file, dpath, H5P_DEFAULT), NULL) <= 0)
        hs_die("%s: dataset %s is missing; this is not a hetseq MNIST file: " REBUILD_HINT, f->path, dpath);
    hid_t ds = (hid_t)HS_H5(H5Dopen2(f->file, dpath, H5P_DEFAULT), REBUILD_HINT);

    hid_t type = (hid_t)HS_H5(H5Dget_type(ds), NULL);
    int ok = HS_H5(H5Tget_class(type), NULL) == H5T_INTEGER && H5Tget_size(type) == 1 &&
             HS_H5(H5Tget_sign(type), NULL) == H5T_SGN_NONE;
    if (!ok) {
        char desc[64];
        hs_h5_describe_type(type, desc, sizeof desc);
        hs_die("%s: dataset %s holds %s values; hetseq reads 8-bit unsigned integers (uint8) here: " REBUILD_HINT,
               f->path, dpath, desc);
    }
    HS_H5(H5Tclose(type), NULL);
    return ds;
}

/* dims of a dataset, which must have `ndim` dimensions */
static void dataset_shape(const hs_mnist_file *f, hid_t ds, const char *dpath, int ndim, hsize_t *dims) {
    hid_t space = (hid_t)HS_H5(H5Dget_space(ds), NULL);
    int got = (int)HS_H5(H5Sget_simple_extent_ndims(space), NULL);
    if (got != ndim)
        hs_die("%s: dataset %s has %d dimensions, expected %d (%s): " REBUILD_HINT, f->path, dpath, got, ndim,
               ndim == 3 ? "[N,28,28]" : "[N]");
    HS_H5(H5Sget_simple_extent_dims(space, dims, NULL), NULL);
    HS_H5(H5Sclose(space), NULL);
}

hs_mnist_file *hs_mnist_open(const char *path, MPI_Comm io_comm) {
    /* hetseq explains HDF5 failures itself: keep the library from printing its stack. */
    HS_H5(H5Eset_auto2(H5E_DEFAULT, NULL, NULL), NULL);
    hs_mnist_file *f;
    HS_ALLOC(f, 1);
    f->path = HS_STRDUP(path);
    if (hs_fault_access(path, R_OK) != 0)
        hs_die("cannot read the MNIST data file %s: %s; set data.path to a file made by `hetseq prep mnist "
               "--in DIR --out FILE.h5`",
               path, strerror(errno));

    hid_t fapl = (hid_t)HS_H5(H5Pcreate(H5P_FILE_ACCESS), NULL);
    HS_H5(H5Pset_fapl_mpio(fapl, io_comm, MPI_INFO_NULL), NULL);
    /* metadata reads: one rank reads, the others receive it (no metadata storm at scale) */
    HS_H5(H5Pset_all_coll_metadata_ops(fapl, 1), NULL);
    f->file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (f->file < 0) {
        char reason[HS_H5_REASON_LEN];
        hs_die("%s is not a readable HDF5 file (%s); it may be truncated or still being written: " REBUILD_HINT,
               path, hs_h5_reason(reason));
    }
    HS_H5(H5Pclose(fapl), NULL);

    for (int s = 0; s < 2; s++) {
        f->images[s] = open_dataset(f, split_names[s], "images");
        f->labels[s] = open_dataset(f, split_names[s], "labels");
        char ipath[32], lpath[32];
        snprintf(ipath, sizeof ipath, "%s/images", split_names[s]);
        snprintf(lpath, sizeof lpath, "%s/labels", split_names[s]);
        hsize_t idims[3], ldims[1];
        dataset_shape(f, f->images[s], ipath, 3, idims);
        dataset_shape(f, f->labels[s], lpath, 1, ldims);
        if (idims[1] != HS_MNIST_ROWS || idims[2] != HS_MNIST_COLS)
            hs_die("%s: dataset %s is [%llu,%llu,%llu], expected [N,%d,%d]: " REBUILD_HINT, path, ipath,
                   (unsigned long long)idims[0], (unsigned long long)idims[1], (unsigned long long)idims[2],
                   HS_MNIST_ROWS, HS_MNIST_COLS);
        if (idims[0] != ldims[0])
            hs_die("%s: %s has %llu images but %s has %llu labels: " REBUILD_HINT, path, ipath,
                   (unsigned long long)idims[0], lpath, (unsigned long long)ldims[0]);
        f->num[s] = (int64_t)idims[0];
    }

    f->dxpl = (hid_t)HS_H5(H5Pcreate(H5P_DATASET_XFER), NULL);
    HS_H5(H5Pset_dxpl_mpio(f->dxpl, H5FD_MPIO_COLLECTIVE), NULL);
    return f;
}

int64_t hs_mnist_num_samples(const hs_mnist_file *f, int split) {
    if (split < 0 || split > 1) HS_FATAL(NULL, "MNIST split %d", split);
    return f->num[split];
}

/* ---- collective row reads --------------------------------------------------------------------------- */

/* Rows [first, first+count) of ds into buf: images buf[count,28,28] (ndim 3) or labels buf[count]
 * (ndim 1). count 0 joins the collective with empty selections. */
static void read_rows(hs_mnist_file *f, hid_t ds, int ndim, int64_t first, int count, void *buf) {
    hsize_t start[3] = {(hsize_t)first, 0, 0};
    hsize_t block[3] = {(hsize_t)count, HS_MNIST_ROWS, HS_MNIST_COLS};
    hid_t fspace = (hid_t)HS_H5(H5Dget_space(ds), NULL);
    hid_t mspace;
    unsigned char unused;
    if (count > 0) {
        HS_H5(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, block, NULL), NULL);
        mspace = (hid_t)HS_H5(H5Screate_simple(ndim, block, NULL), NULL);
    } else {
        hsize_t one[3] = {1, HS_MNIST_ROWS, HS_MNIST_COLS};
        HS_H5(H5Sselect_none(fspace), NULL);
        mspace = (hid_t)HS_H5(H5Screate_simple(ndim, one, NULL), NULL);
        HS_H5(H5Sselect_none(mspace), NULL);
        buf = &unused; /* nothing is written; some HDF5 versions reject a NULL buffer */
    }
    HS_H5(H5Dread(ds, H5T_NATIVE_UCHAR, mspace, fspace, f->dxpl, buf),
          "collective read failed: every rank must read the same sequence of micro-batches");
    uint32_t local = 0, global = 0;
    HS_H5(H5Pget_mpio_no_collective_cause(f->dxpl, &local, &global), NULL);
    f->no_collective_cause |= local | global;
    HS_H5(H5Sclose(mspace), NULL);
    HS_H5(H5Sclose(fspace), NULL);
}

void hs_mnist_read(hs_mnist_file *f, int split, int64_t first, int count, uint8_t *images, uint8_t *labels) {
    if (split < 0 || split > 1 || count < 0 || first < 0 || first + count > f->num[split])
        HS_FATAL(NULL, "%s: read of rows [%lld, %lld) of split %d outside [0, %lld)", f->path, (long long)first,
                 (long long)first + count, split, (long long)f->num[split < 0 || split > 1 ? 0 : split]);
    read_rows(f, f->images[split], 3, first, count, images);
    read_rows(f, f->labels[split], 1, first, count, labels);
}

uint32_t hs_mnist_no_collective_cause(const hs_mnist_file *f) { return f->no_collective_cause; }

void hs_mnist_close(hs_mnist_file *f) {
    if (!f) return;
    for (int s = 0; s < 2; s++) {
        HS_H5(H5Dclose(f->images[s]), NULL);
        HS_H5(H5Dclose(f->labels[s]), NULL);
    }
    HS_H5(H5Pclose(f->dxpl), NULL);
    HS_H5(H5Fclose(f->file), NULL);
    free(f->path);
    free(f);
}
