/* IDX reader (see idx.h). zlib's gzread passes plain files through unchanged, so one code path reads
 * both `train-images-idx3-ubyte` and `train-images-idx3-ubyte.gz`. */
#include "prep/idx.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data/mnist.h"
#include "util/check.h"

/* Largest file we accept (16 GiB): guards the dims product against overflow and absurd headers. */
#define IDX_MAX_BYTES ((int64_t)1 << 34)
/* The data buffer starts at this size and doubles as the data arrives. */
#define IDX_FIRST_ALLOC ((int64_t)1 << 20)
/* gzread takes an unsigned length: read in pieces of at most 1 GiB. */
#define IDX_READ_PIECE (1u << 30)

static int idx_error(char *err, size_t errlen, const char *fmt, ...) HS_PRINTF(3, 4);
static int idx_error(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static const char *magic_meaning(uint32_t magic) {
    switch (magic) {
    case HS_IDX_MAGIC_IMAGES: return "an IDX image file, uint8 [N, rows, cols]";
    case HS_IDX_MAGIC_LABELS: return "an IDX label file, uint8 [N]";
    default: return "an IDX file";
    }
}

/* Read exactly want bytes; returns the number read (< want at end of data), or -1 with the zlib
 * error in *zerr / *zmsg (a gzip stream cut short reports Z_BUF_ERROR). */
static int64_t read_fully(gzFile gz, void *buf, int64_t want, int *zerr, const char **zmsg) {
    int64_t got = 0;
    while (got < want) {
        unsigned piece = (unsigned)(want - got < IDX_READ_PIECE ? want - got : IDX_READ_PIECE);
        int r = gzread(gz, (unsigned char *)buf + got, piece);
        if (r < 0) {
            *zmsg = gzerror(gz, zerr);
            return -1;
        }
        if (r == 0) {
            /* end of input; a truncated gzip member shows up here as Z_BUF_ERROR */
            *zmsg = gzerror(gz, zerr);
            if (*zerr != Z_OK && *zerr != Z_STREAM_END) return -1;
            break;
        }
        got += r;
    }
    return got;
}

static int stream_error(char *err, size_t errlen, const char *path, int zerr, const char *zmsg, const char *what) {
    if (zerr == Z_BUF_ERROR)
        return idx_error(err, errlen,
                         "%s: truncated: the gzip stream ends early while reading the %s (%s); "
                         "download the file again",
                         path, what, zmsg);
    if (zerr == Z_ERRNO)
        return idx_error(err, errlen, "%s: read error while reading the %s: %s", path, what, strerror(errno));
    return idx_error(err, errlen, "%s: corrupt gzip data while reading the %s (%s); download the file again", path,
                     what, zmsg);
}

int hs_idx_read(const char *path, uint32_t expect_magic, hs_idx *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    errno = 0;
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return idx_error(err, errlen, "%s: cannot open: %s", path,
                         errno ? strerror(errno) : "out of memory in zlib");

    int zerr = Z_OK;
    const char *zmsg = "";
    int rc = -1;

    /* header: magic, then one big-endian uint32 per dimension */
    unsigned char head[4 + 4 * HS_IDX_MAX_DIMS];
    int64_t got = read_fully(gz, head, 4, &zerr, &zmsg);
    if (got < 0) {
        stream_error(err, errlen, path, zerr, zmsg, "header");
        goto done;
    }
    if (got < 4) {
        idx_error(err, errlen, "%s: truncated: %lld bytes, too short for an IDX header; download the file again",
                  path, (long long)got);
        goto done;
    }
    uint32_t magic = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
    if (magic != expect_magic) {
        idx_error(err, errlen, "%s: bad magic number 0x%08x, expected 0x%08x (%s); is this the right file?", path,
                  magic, expect_magic, magic_meaning(expect_magic));
        goto done;
    }
    int ndim = (int)(magic & 0xffu);
    if (ndim < 1 || ndim > HS_IDX_MAX_DIMS) HS_FATAL(NULL, "IDX magic 0x%08x with %d dimensions", magic, ndim);
    got = read_fully(gz, head + 4, 4 * ndim, &zerr, &zmsg);
    if (got < 0) {
        stream_error(err, errlen, path, zerr, zmsg, "header");
        goto done;
    }
    if (got < 4 * ndim) {
        idx_error(err, errlen, "%s: truncated: the header ends after %lld of its %d dimension bytes; download the "
                  "file again", path, (long long)got, 4 * ndim);
        goto done;
    }
    int64_t bytes = 1;
    for (int d = 0; d < ndim; d++) {
        const unsigned char *p = head + 4 + 4 * d;
        out->dims[d] = (int64_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
        int64_t dim = out->dims[d] ? out->dims[d] : 1;
        /* compare before multiplying: up to 2^34 times a 32-bit size would overflow int64 */
        if (bytes > IDX_MAX_BYTES / dim) {
            idx_error(err, errlen, "%s: the header claims more than %lld bytes of data: corrupt file?", path,
                      (long long)IDX_MAX_BYTES);
            goto done;
        }
        bytes *= dim;
    }
    for (int d = 0; d < ndim; d++)
        if (out->dims[d] == 0) bytes = 0;
    out->magic = magic;
    out->ndim = ndim;
    out->bytes = (size_t)bytes;

    /* The buffer grows with the data actually read (doubling from 1 MiB): a header that claims
     * gigabytes in a file of a few bytes must end in "truncated", not in a huge allocation. */
    int64_t cap = bytes < IDX_FIRST_ALLOC ? bytes : IDX_FIRST_ALLOC;
    HS_ALLOC(out->data, cap);
    got = 0;
    for (;;) {
        int64_t r = read_fully(gz, out->data + got, cap - got, &zerr, &zmsg);
        if (r < 0) {
            stream_error(err, errlen, path, zerr, zmsg, "data");
            goto done;
        }
        got += r;
        if (got < cap || cap == bytes) break; /* end of the file, or all the data */
        cap = cap > bytes / 2 ? bytes : 2 * cap;
        HS_REALLOC(out->data, cap);
    }
    if (got < bytes) {
        idx_error(err, errlen, "%s: truncated: the header promises %lld data bytes but the file holds only %lld; "
                  "download the file again", path, (long long)bytes, (long long)got);
        goto done;
    }
    /* The data must end the file: trailing bytes mean a wrong header (or a damaged gzip trailer). */
    unsigned char extra;
    got = read_fully(gz, &extra, 1, &zerr, &zmsg);
    if (got < 0) {
        stream_error(err, errlen, path, zerr, zmsg, "end of the file");
        goto done;
    }
    if (got > 0) {
        idx_error(err, errlen, "%s: the file is longer than its header says (%lld data bytes): corrupt header?",
                  path, (long long)bytes);
        goto done;
    }
    rc = 0;

done:
    gzclose(gz);
    if (rc != 0) hs_idx_free(out);
    return rc;
}

void hs_idx_free(hs_idx *x) {
    free(x->data);
    memset(x, 0, sizeof *x);
}

int hs_idx_check_mnist_pair(const hs_idx *images, const char *images_path, const hs_idx *labels,
                            const char *labels_path, char *err, size_t errlen) {
    if (images->ndim != 3 || images->dims[1] != HS_MNIST_ROWS || images->dims[2] != HS_MNIST_COLS)
        return idx_error(err, errlen, "%s: images are %lldx%lld; hetseq's MNIST format needs %dx%d", images_path,
                         (long long)images->dims[1], (long long)images->dims[2], HS_MNIST_ROWS, HS_MNIST_COLS);
    if (labels->ndim != 1 || labels->dims[0] != images->dims[0])
        return idx_error(err, errlen, "%s holds %lld labels but %s holds %lld images: the files do not belong "
                         "together", labels_path, (long long)labels->dims[0], images_path, (long long)images->dims[0]);
    for (int64_t i = 0; i < labels->dims[0]; i++)
        if (labels->data[i] > 9)
            return idx_error(err, errlen, "%s: label %lld is %u, outside the 10 classes 0..9: corrupt file?",
                             labels_path, (long long)i, labels->data[i]);
    return 0;
}
