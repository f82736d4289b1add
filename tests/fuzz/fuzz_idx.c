/* Fuzz target: the IDX reader (src/prep/idx.c), plain and gzipped.
 *
 * Input: a mode byte, then the file(s). Mode % 3: 0 an image file, 1 a label file, 2 a pair (a
 * 2-byte big-endian length of the image file, the image file, then the label file) checked as an
 * MNIST pair. The reader returns its errors, so every outcome but a crash, UB, a leak or a hang is
 * correct; a file that reads must describe itself consistently. */
#include <string.h>

#include "prep/idx.h"
#include "fuzz_common.h"

static int read_one(const uint8_t *data, size_t size, uint32_t magic, hs_idx *x) {
    char err[HS_IDX_ERR_LEN];
    err[0] = '\0';
    int rc = hs_idx_read(hs_fuzz_file(data, size), magic, x, err, sizeof err);
    if (rc != 0) {
        HS_FUZZ_ASSERT(err[0] != '\0', "hs_idx_read failed without a message");
        HS_FUZZ_ASSERT(x->data == NULL, "hs_idx_read failed but left data allocated");
        return rc;
    }
    size_t bytes = 1;
    for (int d = 0; d < x->ndim; d++) bytes *= (size_t)x->dims[d];
    HS_FUZZ_ASSERT(x->magic == magic && x->ndim == (int)(magic & 0xff), "magic 0x%08x, ndim %d", x->magic, x->ndim);
    HS_FUZZ_ASSERT(x->bytes == bytes, "bytes %zu, dims give %zu", x->bytes, bytes);
    if (bytes) x->data[bytes - 1] ^= 1; /* touch the last byte: ASan checks the buffer is that long */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int mode = data[0] % 3;
    data++, size--;
    hs_idx a = {0}, b = {0};
    if (mode < 2) {
        if (read_one(data, size, mode == 0 ? HS_IDX_MAGIC_IMAGES : HS_IDX_MAGIC_LABELS, &a) == 0) hs_idx_free(&a);
        return 0;
    }
    if (size < 2) return 0;
    size_t first = (size_t)data[0] << 8 | data[1];
    data += 2, size -= 2;
    if (first > size) first = size;
    /* the files are read one after the other through the same memfd: keep copies */
    if (read_one(data, first, HS_IDX_MAGIC_IMAGES, &a) == 0 &&
        read_one(data + first, size - first, HS_IDX_MAGIC_LABELS, &b) == 0) {
        char err[HS_IDX_ERR_LEN];
        err[0] = '\0';
        if (hs_idx_check_mnist_pair(&a, "images", &b, "labels", err, sizeof err) != 0)
            HS_FUZZ_ASSERT(err[0] != '\0', "hs_idx_check_mnist_pair failed without a message");
    }
    hs_idx_free(&a);
    hs_idx_free(&b);
    return 0;
}
