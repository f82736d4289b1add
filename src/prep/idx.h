/* IDX files (the MNIST distribution format, http://yann.lecun.com/exdb/mnist/): a big-endian magic
 * 0x0000TTDD (TT = element type, 0x08 = unsigned byte; DD = number of dimensions), DD big-endian
 * uint32 sizes, then the row-major data. Read through zlib, so gzipped and plain files both work.
 *
 * Errors are returned, not fatal: `hetseq prep` reads on one rank and must agree the outcome with the
 * others before anyone exits (docs/data-formats.md). */
#ifndef HS_PREP_IDX_H
#define HS_PREP_IDX_H

#include <stddef.h>
#include <stdint.h>

#define HS_IDX_MAGIC_LABELS 0x00000801u /* uint8 [N] */
#define HS_IDX_MAGIC_IMAGES 0x00000803u /* uint8 [N, rows, cols] */
#define HS_IDX_MAX_DIMS 3
#define HS_IDX_ERR_LEN 1024

typedef struct hs_idx {
    uint32_t magic;
    int ndim;
    int64_t dims[HS_IDX_MAX_DIMS];
    size_t bytes;  /* product of dims */
    uint8_t *data; /* data[bytes], row-major */
} hs_idx;

/* Read path (gzipped or not); it must carry expect_magic. Returns 0, or -1 with a one-line message
 * naming the file in err[errlen] (missing, unreadable, bad magic, truncated, trailing bytes, corrupt
 * gzip stream); on failure nothing stays allocated. */
int hs_idx_read(const char *path, uint32_t expect_magic, hs_idx *out, char *err, size_t errlen);
void hs_idx_free(hs_idx *x);

/* An MNIST pair: images [N, 28, 28], labels [N] with every label in 0..9. Returns 0 or -1 with a
 * message naming the offending file. */
int hs_idx_check_mnist_pair(const hs_idx *images, const char *images_path, const hs_idx *labels,
                            const char *labels_path, char *err, size_t errlen);

#endif
