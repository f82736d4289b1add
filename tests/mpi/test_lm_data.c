/* A user prepares language-model data with `hetseq prep lm` and reads it on 1 or 3 ranks the way
 * Transformer-XL batching does: every split cut into columns, ranks taking contiguous slices of the
 * columns (some ranks none: count 0) and walking them in segments, plus irregular, unordered and
 * overlapping runs and runs ending at the last token. Every token must equal the file read serially
 * here with the plain HDF5 library, and every read must stay collective (HDF5's no-collective cause 0).
 *
 * usage: test_lm_data DIR          the checks above on DIR/lm.h5
 *        test_lm_data DIR past-end the last rank reads a run crossing the end of the valid split (the
 *                                  reader must stop every rank with a message)
 *        test_lm_data DIR open     only open DIR/lm.h5 (a damaged file must stop every rank) */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "data/lm_data.h"

#include "mpi_check.h"

static const char *const names[3] = {"train", "valid", "test"};

/* split s of DIR/lm.h5 read serially, and the vocabulary size */
static int32_t *serial_split(const char *path, int s, int64_t *n, int64_t *vocab) {
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    CHECK(f >= 0, "cannot open %s serially", path);
    hid_t ds = H5Dopen2(f, names[s], H5P_DEFAULT);
    CHECK(ds >= 0, "%s: no /%s", path, names[s]);
    hid_t space = H5Dget_space(ds);
    hsize_t dims[1];
    CHECK(H5Sget_simple_extent_ndims(space) == 1, "/%s is not 1-D", names[s]);
    H5Sget_simple_extent_dims(space, dims, NULL);
    *n = (int64_t)dims[0];
    int32_t *v = malloc((size_t)(*n > 0 ? *n : 1) * sizeof *v);
    CHECK(v, "out of memory");
    CHECK(H5Dread(ds, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0, "serial read of /%s", names[s]);
    H5Sclose(space);
    H5Dclose(ds);
    hid_t vd = H5Dopen2(f, "vocab", H5P_DEFAULT);
    hid_t vs = H5Dget_space(vd);
    *vocab = (int64_t)H5Sget_simple_extent_npoints(vs);
    H5Sclose(vs);
    H5Dclose(vd);
    H5Fclose(f);
    return v;
}

/* xorshift64*: the runs' positions, seeded per rank and round */
static uint64_t next_rand(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static long long g_runs, g_tokens, g_empty_calls;

/* one collective read, checked against the serial copy */
static void read_and_check(hs_lm_data *d, int s, const int32_t *ref, const int64_t *starts, int count, int64_t len,
                           const char *what) {
    size_t elems = (size_t)count * (size_t)len;
    int32_t *dst = malloc((elems ? elems : 1) * sizeof *dst);
    CHECK(dst, "out of memory");
    for (size_t i = 0; i < elems; i++) dst[i] = -12345;
    hs_lm_read_runs(d, (hs_lm_split)s, starts, count, len, dst);
    for (int i = 0; i < count; i++)
        for (int64_t j = 0; j < len; j++)
            CHECK(dst[(size_t)i * (size_t)len + (size_t)j] == ref[starts[i] + j],
                  "%s, split %s: run %d of %d (start %lld, len %lld) token %lld is %d, the file has %d", what,
                  names[s], i, count, (long long)starts[i], (long long)len, (long long)j,
                  dst[(size_t)i * (size_t)len + (size_t)j], ref[starts[i] + j]);
    g_runs += count;
    g_tokens += (long long)elems;
    g_empty_calls += elems == 0;
    free(dst);
}

int main(int argc, char **argv) {
    hs_comm comm;
    hs_comm_init(&comm, &argc, &argv);
    g_rank = comm.rank;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    CHECK(argc == 2 || argc == 3, "usage: test_lm_data DIR [past-end|open]");
    char path[4096];
    snprintf(path, sizeof path, "%s/lm.h5", argv[1]);

    if (argc == 3 && !strcmp(argv[2], "open")) { /* only open: a broken file's message */
        hs_lm_close(hs_lm_open(argv[1], comm.io));
        printf("UNEXPECTED: %s opened\n", path);
        hs_comm_finalize(&comm);
        return 0;
    }
    if (argc == 3) { /* the caller's bug: a run past the end of the split, on the last rank only */
        hs_lm_data *d = hs_lm_open(argv[1], comm.io);
        int64_t n = hs_lm_split_tokens(d, HS_LM_VALID);
        int64_t start = n - 3;
        int32_t dst[5];
        int mine = comm.rank == comm.size - 1;
        hs_lm_read_runs(d, HS_LM_VALID, &start, mine, 5, dst);
        hs_lm_close(d);
        printf("UNEXPECTED: a run past the end was read\n");
        hs_comm_finalize(&comm);
        return 0;
    }

    int32_t *ref[3];
    int64_t n[3], vocab = 0;
    for (int s = 0; s < 3; s++) ref[s] = serial_split(path, s, &n[s], &vocab);

    hs_lm_data *d = hs_lm_open(argv[1], comm.io);
    CHECK(hs_lm_vocab_size(d) == vocab, "vocab_size %d, /vocab holds %lld", hs_lm_vocab_size(d), (long long)vocab);
    CHECK(!strcmp(hs_lm_word(d, hs_lm_eos_id(d)), "<eos>"), "word of eos_id %d is %s", hs_lm_eos_id(d),
          hs_lm_word(d, hs_lm_eos_id(d)));
    CHECK(!strcmp(hs_lm_word(d, -1), "?") && !strcmp(hs_lm_word(d, hs_lm_vocab_size(d)), "?"),
          "words outside the vocabulary should be ?");
    CHECK(hs_lm_unk_id(d) < 0 || !strcmp(hs_lm_word(d, hs_lm_unk_id(d)), "<unk>"), "word of unk_id is %s",
          hs_lm_word(d, hs_lm_unk_id(d)));
    CHECK(!strcmp(hs_lm_path(d), path), "path %s", hs_lm_path(d));

    for (int s = 0; s < 3; s++) {
        CHECK(hs_lm_split_tokens(d, (hs_lm_split)s) == n[s], "split %s: %lld tokens, the file has %lld", names[s],
              (long long)hs_lm_split_tokens(d, (hs_lm_split)s), (long long)n[s]);
        for (int64_t i = 0; i < n[s]; i++)
            CHECK(ref[s][i] >= 0 && ref[s][i] < vocab, "split %s token %lld: id %d outside the vocabulary", names[s],
                  (long long)i, ref[s][i]);

        /* the whole split on rank 0, nothing elsewhere */
        int64_t zero = 0;
        read_and_check(d, s, ref[s], &zero, comm.rank == 0, n[s], "whole split on rank 0");

        /* Transformer-XL batching: B columns of n/B tokens, ranks take contiguous slices of columns (with
         * 3 ranks and B = 2 the last rank has none), segments of tgt tokens walk the columns in order */
        for (int B = 2; B <= 7; B += 5) {
            int64_t col = n[s] / B;
            int first = (int)((long long)B * comm.rank / comm.size), last = (int)((long long)B * (comm.rank + 1) / comm.size);
            int64_t starts[8];
            for (int64_t pos = 0, tgt = 13; pos < col; pos += tgt) {
                int64_t len = col - pos < tgt ? col - pos : tgt;
                for (int c = first; c < last; c++) starts[c - first] = (int64_t)c * col + pos;
                read_and_check(d, s, ref[s], starts, last - first, len, "columns");
            }
        }

        /* irregular runs: ascending with gaps, unordered, overlapping, repeated, ending at the last token,
         * and counts of 0 on some ranks; every rank makes the same number of calls */
        uint64_t state = 0x9E3779B97F4A7C15ull * (uint64_t)(comm.rank + 1) + (uint64_t)s;
        for (int round = 0; round < 40; round++) {
            int64_t len = 1 + (int64_t)(next_rand(&state) % 9);
            if (len > n[s]) len = n[s];
            int count = (round + comm.rank) % 4 == 0 ? 0 : (int)(next_rand(&state) % 7);
            int64_t starts[8];
            for (int i = 0; i < count; i++) starts[i] = (int64_t)(next_rand(&state) % (uint64_t)(n[s] - len + 1));
            if (count > 0 && round % 5 == 1) starts[count - 1] = n[s] - len; /* the last token */
            if (count > 1 && round % 3 == 0) starts[1] = starts[0];          /* the same run twice */
            if (count > 1 && round % 7 == 2) starts[1] = starts[0] + len / 2; /* overlapping */
            if (round % 2 == 0) /* ascending: the direct path (equal spacing or not) */
                for (int i = 1; i < count; i++)
                    for (int j = i; j > 0 && starts[j] < starts[j - 1]; j--) {
                        int64_t t = starts[j];
                        starts[j] = starts[j - 1];
                        starts[j - 1] = t;
                    }
            read_and_check(d, s, ref[s], starts, count, len, "irregular runs");
        }
        /* runs of length 0 still join the collective */
        int64_t any = 1;
        read_and_check(d, s, ref[s], &any, 1, 0, "zero-length runs");
    }
    CHECK_ALL_COLLECTIVE(hs_lm_no_collective_cause(d), comm.world);
    hs_lm_close(d);
    for (int s = 0; s < 3; s++) free(ref[s]);

    long long totals[3] = {g_runs, g_tokens, g_empty_calls};
    MPI_Allreduce(MPI_IN_PLACE, totals, 3, MPI_LONG_LONG, MPI_SUM, comm.world);
    if (comm.rank == 0)
        printf("ok: %d rank(s): %lld runs, %lld tokens, %lld empty reads, all equal to the file, all collective\n",
               comm.size, totals[0], totals[1], totals[2]);
    hs_comm_finalize(&comm);
    return 0;
}
