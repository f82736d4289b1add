/* A user hands `hetseq prep mnist` IDX files, gzipped or plain: good files read back byte for byte;
 * missing, truncated, mislabelled or inconsistent files give one message naming the file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "prep/idx.h"

static char g_dir[256];

static int make_dir(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "%s/hetseq-test-idx.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int remove_dir(void **state) {
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd);
}

static const char *path_of(const char *name) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", g_dir, name);
    return p;
}

/* An IDX byte image: magic, big-endian dims, then data[i] = (seed + 7 i) mod modulus. */
static unsigned char *idx_bytes(uint32_t magic, int ndim, const uint32_t *dims, unsigned seed, unsigned modulus,
                                size_t *len) {
    size_t n = 1;
    for (int d = 0; d < ndim; d++) n *= dims[d];
    *len = 4 + 4 * (size_t)ndim + n;
    unsigned char *b = malloc(*len);
    assert_non_null(b);
    uint32_t words[4] = {magic, ndim > 0 ? dims[0] : 0, ndim > 1 ? dims[1] : 0, ndim > 2 ? dims[2] : 0};
    for (int w = 0; w <= ndim; w++)
        for (int k = 0; k < 4; k++) b[4 * w + k] = (unsigned char)(words[w] >> (24 - 8 * k));
    for (size_t i = 0; i < n; i++) b[4 + 4 * ndim + i] = (unsigned char)((seed + 7 * i) % modulus);
    return b;
}

static void write_plain(const char *path, const unsigned char *b, size_t len) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static void write_gz(const char *path, const unsigned char *b, size_t len) {
    gzFile g = gzopen(path, "wb");
    assert_non_null(g);
    assert_int_equal(gzwrite(g, b, (unsigned)len), (int)len);
    assert_int_equal(gzclose(g), Z_OK);
}

static void truncate_file(const char *path, long keep) { assert_int_equal(truncate(path, keep), 0); }

static long file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long s = ftell(f);
    fclose(f);
    return s;
}

/* hs_idx_read must fail with a message that names the file and contains pattern. */
static void expect_read_error(const char *path, uint32_t magic, const char *pattern) {
    hs_idx x;
    char err[HS_IDX_ERR_LEN] = "";
    assert_int_equal(hs_idx_read(path, magic, &x, err, sizeof err), -1);
    assert_null(x.data);
    if (!strstr(err, path)) fail_msg("message does not name %s: %s", path, err);
    if (!strstr(err, pattern)) fail_msg("expected \"%s\" in: %s", pattern, err);
}

static void gzipped_and_plain_images_read_back_exactly(void **state) {
    (void)state;
    const uint32_t dims[3] = {5, 28, 28};
    size_t len;
    unsigned char *b = idx_bytes(HS_IDX_MAGIC_IMAGES, 3, dims, 3, 256, &len);
    const char *names[2] = {"img", "img.gz"};
    write_plain(path_of(names[0]), b, len);
    write_gz(path_of(names[1]), b, len);
    for (int k = 0; k < 2; k++) {
        hs_idx x;
        char err[HS_IDX_ERR_LEN] = "";
        if (hs_idx_read(path_of(names[k]), HS_IDX_MAGIC_IMAGES, &x, err, sizeof err) != 0) fail_msg("%s", err);
        assert_int_equal(x.ndim, 3);
        assert_int_equal(x.dims[0], 5);
        assert_int_equal(x.dims[1], 28);
        assert_int_equal(x.dims[2], 28);
        assert_int_equal(x.bytes, 5 * 28 * 28);
        assert_memory_equal(x.data, b + 16, x.bytes);
        hs_idx_free(&x);
    }
    free(b);
}

static void labels_read_and_pair_with_images(void **state) {
    (void)state;
    const uint32_t idims[3] = {4, 28, 28}, ldims[1] = {4};
    size_t ilen, llen;
    unsigned char *ib = idx_bytes(HS_IDX_MAGIC_IMAGES, 3, idims, 0, 256, &ilen);
    unsigned char *lb = idx_bytes(HS_IDX_MAGIC_LABELS, 1, ldims, 2, 10, &llen);
    write_gz(path_of("i.gz"), ib, ilen);
    write_plain(path_of("l"), lb, llen);
    hs_idx im, lab;
    char err[HS_IDX_ERR_LEN] = "";
    assert_int_equal(hs_idx_read(path_of("i.gz"), HS_IDX_MAGIC_IMAGES, &im, err, sizeof err), 0);
    assert_int_equal(hs_idx_read(path_of("l"), HS_IDX_MAGIC_LABELS, &lab, err, sizeof err), 0);
    const unsigned char expect_labels[4] = {2, 9, 6, 3}; /* (2 + 7 i) mod 10 */
    assert_memory_equal(lab.data, expect_labels, 4);
    assert_int_equal(hs_idx_check_mnist_pair(&im, "i.gz", &lab, "l", err, sizeof err), 0);
    hs_idx_free(&im);
    hs_idx_free(&lab);
    free(ib);
    free(lb);
}

static void missing_file_is_named(void **state) {
    (void)state;
    expect_read_error(path_of("no-such-file.gz"), HS_IDX_MAGIC_IMAGES, "No such file");
}

static void truncated_plain_file_is_reported(void **state) {
    (void)state;
    const uint32_t dims[3] = {3, 28, 28};
    size_t len;
    unsigned char *b = idx_bytes(HS_IDX_MAGIC_IMAGES, 3, dims, 1, 256, &len);
    write_plain(path_of("cut"), b, len);
    truncate_file(path_of("cut"), (long)len - 100); /* inside the data */
    expect_read_error(path_of("cut"), HS_IDX_MAGIC_IMAGES, "truncated");
    truncate_file(path_of("cut"), 10); /* inside the header */
    expect_read_error(path_of("cut"), HS_IDX_MAGIC_IMAGES, "truncated");
    truncate_file(path_of("cut"), 2);
    expect_read_error(path_of("cut"), HS_IDX_MAGIC_IMAGES, "truncated");
    free(b);
}

static void truncated_gzip_file_is_reported(void **state) {
    (void)state;
    const uint32_t dims[3] = {50, 28, 28};
    size_t len;
    unsigned char *b = idx_bytes(HS_IDX_MAGIC_IMAGES, 3, dims, 5, 251, &len);
    write_gz(path_of("cut.gz"), b, len);
    long full = file_size(path_of("cut.gz"));
    truncate_file(path_of("cut.gz"), full / 2); /* compressed stream cut in the middle */
    expect_read_error(path_of("cut.gz"), HS_IDX_MAGIC_IMAGES, "truncated");
    write_gz(path_of("cut.gz"), b, len);
    truncate_file(path_of("cut.gz"), full - 20); /* the last compressed bytes of the data are gone */
    expect_read_error(path_of("cut.gz"), HS_IDX_MAGIC_IMAGES, "truncated");
    free(b);
}

static void gzip_file_of_a_short_idx_is_truncated(void **state) {
    (void)state;
    /* A complete gzip stream whose content is a cut IDX file (someone gzipped a broken download). */
    const uint32_t dims[1] = {1000};
    size_t len;
    unsigned char *b = idx_bytes(HS_IDX_MAGIC_LABELS, 1, dims, 0, 10, &len);
    write_gz(path_of("short.gz"), b, len - 1);
    expect_read_error(path_of("short.gz"), HS_IDX_MAGIC_LABELS, "header promises 1000 data bytes");
    free(b);
}

/* The address space this process has mapped (VmSize), in bytes; 0 if unknown. */
static unsigned long long mapped_bytes(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %llu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

/* A damaged header that claims 4 GiB in a file of a few bytes is "truncated": the reader must not
 * allocate what the header claims before the data is there. Checked in a child whose address space
 * may grow by only 256 MiB (on top of what it has mapped, which under AddressSanitizer is huge). */
static void huge_header_in_a_tiny_file_allocates_nothing_big(void **state) {
    (void)state;
    const uint32_t dims[3] = {65536, 256, 256};
    unsigned char head[16];
    for (int w = 0; w < 4; w++) {
        uint32_t v = w == 0 ? HS_IDX_MAGIC_IMAGES : dims[w - 1];
        for (int k = 0; k < 4; k++) head[4 * w + k] = (unsigned char)(v >> (24 - 8 * k));
    }
    unsigned char file[26] = {0};
    memcpy(file, head, sizeof head);
    write_plain(path_of("huge"), file, sizeof file);
    write_gz(path_of("huge.gz"), file, sizeof file);
    for (int k = 0; k < 2; k++) {
        const char *p = path_of(k ? "huge.gz" : "huge");
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            unsigned long long mapped = mapped_bytes();
            struct rlimit lim = {mapped + (256ull << 20), mapped + (256ull << 20)};
            if (mapped == 0 || setrlimit(RLIMIT_AS, &lim) != 0) _exit(77);
            hs_idx x;
            char err[HS_IDX_ERR_LEN] = "";
            int rc = hs_idx_read(p, HS_IDX_MAGIC_IMAGES, &x, err, sizeof err);
            _exit(rc == -1 && strstr(err, "truncated: the header promises 4294967296 data bytes but the file holds "
                                          "only 10") ? 0 : 3);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        if (WIFEXITED(status) && WEXITSTATUS(status) == 77) skip();
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("%s: the reader allocated what the header claims, or did not say \"truncated\" (status 0x%x)", p,
                     status);
    }
}

/* Sizes whose product overflows 64 bits are refused by the size check, not multiplied first. */
static void sizes_beyond_64_bits_are_refused(void **state) {
    (void)state;
    const uint32_t dims[3] = {4, 0xFFFF0000u, 0xFFFF0000u};
    unsigned char head[16];
    for (int w = 0; w < 4; w++) {
        uint32_t v = w == 0 ? HS_IDX_MAGIC_IMAGES : dims[w - 1];
        for (int k = 0; k < 4; k++) head[4 * w + k] = (unsigned char)(v >> (24 - 8 * k));
    }
    write_plain(path_of("overflow"), head, sizeof head);
    expect_read_error(path_of("overflow"), HS_IDX_MAGIC_IMAGES, "the header claims more than 17179869184 bytes of data");
}

static void wrong_magic_says_what_was_expected(void **state) {
    (void)state;
    const uint32_t dims[1] = {10};
    size_t len;
    unsigned char *b = idx_bytes(HS_IDX_MAGIC_LABELS, 1, dims, 0, 10, &len);
    write_gz(path_of("labels.gz"), b, len);
    /* a label file given where images belong */
    expect_read_error(path_of("labels.gz"), HS_IDX_MAGIC_IMAGES, "bad magic number 0x00000801, expected 0x00000803");
    /* not an IDX file at all */
    write_plain(path_of("text"), (const unsigned char *)"hello world\n", 12);
    expect_read_error(path_of("text"), HS_IDX_MAGIC_LABELS, "bad magic number 0x68656c6c");
    free(b);
}

static void trailing_bytes_are_reported(void **state) {
    (void)state;
    const uint32_t dims[1] = {10};
    size_t len;
    unsigned char *b = idx_bytes(HS_IDX_MAGIC_LABELS, 1, dims, 0, 10, &len);
    unsigned char *longer = calloc(len + 3, 1);
    memcpy(longer, b, len);
    write_plain(path_of("long"), longer, len + 3);
    expect_read_error(path_of("long"), HS_IDX_MAGIC_LABELS, "longer than its header says");
    free(longer);
    free(b);
}

static void inconsistent_pairs_are_rejected(void **state) {
    (void)state;
    const uint32_t idims[3] = {6, 28, 28}, ldims[1] = {5}, small[3] = {6, 27, 28};
    size_t ilen, llen, slen;
    unsigned char *ib = idx_bytes(HS_IDX_MAGIC_IMAGES, 3, idims, 0, 256, &ilen);
    unsigned char *lb = idx_bytes(HS_IDX_MAGIC_LABELS, 1, ldims, 0, 10, &llen);
    unsigned char *sb = idx_bytes(HS_IDX_MAGIC_IMAGES, 3, small, 0, 256, &slen);
    write_plain(path_of("pi"), ib, ilen);
    write_plain(path_of("pl"), lb, llen);
    write_plain(path_of("ps"), sb, slen);
    hs_idx im, lab, sm;
    char err[HS_IDX_ERR_LEN] = "";
    assert_int_equal(hs_idx_read(path_of("pi"), HS_IDX_MAGIC_IMAGES, &im, err, sizeof err), 0);
    assert_int_equal(hs_idx_read(path_of("pl"), HS_IDX_MAGIC_LABELS, &lab, err, sizeof err), 0);
    assert_int_equal(hs_idx_read(path_of("ps"), HS_IDX_MAGIC_IMAGES, &sm, err, sizeof err), 0);

    assert_int_equal(hs_idx_check_mnist_pair(&im, "pi", &lab, "pl", err, sizeof err), -1);
    assert_non_null(strstr(err, "pl holds 5 labels but pi holds 6 images"));

    assert_int_equal(hs_idx_check_mnist_pair(&sm, "ps", &lab, "pl", err, sizeof err), -1);
    assert_non_null(strstr(err, "ps: images are 27x28"));

    /* a label of 10 in an otherwise consistent pair */
    hs_idx five = im;
    five.dims[0] = 5;
    lab.data[3] = 10;
    assert_int_equal(hs_idx_check_mnist_pair(&five, "pi", &lab, "pl", err, sizeof err), -1);
    assert_non_null(strstr(err, "pl: label 3 is 10"));
    hs_idx_free(&im);
    hs_idx_free(&lab);
    hs_idx_free(&sm);
    free(ib);
    free(lb);
    free(sb);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gzipped_and_plain_images_read_back_exactly),
        cmocka_unit_test(labels_read_and_pair_with_images),
        cmocka_unit_test(missing_file_is_named),
        cmocka_unit_test(truncated_plain_file_is_reported),
        cmocka_unit_test(truncated_gzip_file_is_reported),
        cmocka_unit_test(gzip_file_of_a_short_idx_is_truncated),
        cmocka_unit_test(huge_header_in_a_tiny_file_allocates_nothing_big),
        cmocka_unit_test(sizes_beyond_64_bits_are_refused),
        cmocka_unit_test(wrong_magic_says_what_was_expected),
        cmocka_unit_test(trailing_bytes_are_reported),
        cmocka_unit_test(inconsistent_pairs_are_rejected),
    };
    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
