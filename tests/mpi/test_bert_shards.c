/* A user points hetseq at a directory of NVIDIA-format BERT shards and trains on 1, 2 or 3 ranks:
 * every rank reads its micro-batches (of many sizes, spanning file boundaries, EMPTY ones included)
 * with collective parallel-HDF5 reads. Every value must equal the reference the independent Python
 * writer dumped (masked-LM labels built as NVIDIA's run_pretraining.py builds them), every row must be
 * read exactly once, and HDF5 must report that no transfer fell back to independent I/O.
 *
 *   test_bert_shards verify PATH SPLIT NUM_FILE L P VOCAB REF.bin
 *       REF.bin: the writer's --dump of the files PATH/SPLIT selects (first NUM_FILE when > 0: the
 *       prefix of the dump). Also checks micro-batches that span many files while the other ranks'
 *       cover other files or nothing (EMPTY). Prints "ok: R rank(s) ..." on success, then how many
 *       MPI-IO opens of shard files the reads made and how many files may stay open at once
 *       ("file opens N, at most M open")
 *   test_bert_shards scan PATH SPLIT VOCAB
 *       opens and reads every row in micro-batches of 16, rank-strided, as training would; prints the
 *       number of rows and a checksum (the shell tests use it to see the reader's error messages)
 *   test_bert_shards repack ARGS...
 *       exactly `hetseq prep repack ARGS...`
 *   test_bert_shards bench PATH SPLIT BATCH EPOCHS
 *       reading as training reads: every epoch, the micro-batches of BATCH rows at batch-aligned
 *       offsets in a new shuffled order, dealt to the ranks in turn (ranks past the last batch read an
 *       EMPTY one); prints the time of the open and of every epoch per micro-batch */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "comm/comm.h"
#include "data/bert_shards.h"
#include "prep/prep.h"

#include "mpi_check.h"

/* The writer's dump: rows of [ids L | segments L | mask L | positions P | labels P | nsp | count]. */
static int32_t *read_reference(const char *path, int row_ints, int64_t *rows) {
    FILE *f = fopen(path, "rb");
    CHECK(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    CHECK(bytes % (row_ints * 4) == 0, "%s: %ld bytes is not a whole number of %d-int rows", path, bytes, row_ints);
    int32_t *ref = malloc((size_t)bytes);
    CHECK(ref && fread(ref, 1, (size_t)bytes, f) == (size_t)bytes, "cannot read %s", path);
    fclose(f);
    *rows = bytes / (row_ints * 4);
    return ref;
}

/* Compare batch row k (global row g) with the reference; returns the labelled positions of the row. */
static int compare_row(const hs_bert_batch *b, int k, int64_t g, const int32_t *ref, int L, int P) {
    const int32_t *want = ref + (size_t)g * (size_t)(3 * L + 2 * P + 2);
    const int32_t *got_tok[3] = {b->input_ids, b->segment_ids, b->input_mask};
    static const char *const tok_names[3] = {"input_ids", "segment_ids", "input_mask"};
    for (int a = 0; a < 3; a++)
        for (int j = 0; j < L; j++)
            CHECK(got_tok[a][(size_t)k * L + j] == want[a * L + j], "row %lld %s[%d]: read %d, the file holds %d",
                  (long long)g, tok_names[a], j, got_tok[a][(size_t)k * L + j], want[a * L + j]);
    for (int j = 0; j < P; j++) {
        CHECK(b->mlm_positions[(size_t)k * P + j] == want[3 * L + j], "row %lld mlm_positions[%d]: %d, expected %d",
              (long long)g, j, b->mlm_positions[(size_t)k * P + j], want[3 * L + j]);
        CHECK(b->mlm_ids[(size_t)k * P + j] == want[3 * L + P + j], "row %lld mlm_ids[%d]: %d, expected %d",
              (long long)g, j, b->mlm_ids[(size_t)k * P + j], want[3 * L + P + j]);
    }
    CHECK(b->nsp_labels[k] == want[3 * L + 2 * P], "row %lld nsp %d, expected %d", (long long)g, b->nsp_labels[k],
          want[3 * L + 2 * P]);
    int m = b->num_mlm[k];
    CHECK(m == want[3 * L + 2 * P + 1], "row %lld: %d labelled positions, expected %d", (long long)g, m,
          want[3 * L + 2 * P + 1]);
    /* the list is exactly the m leading entries, ascending, then -1 */
    for (int j = 0; j < P; j++) {
        int32_t p = b->mlm_positions[(size_t)k * P + j], id = b->mlm_ids[(size_t)k * P + j];
        if (j < m) CHECK(p >= 1 && p < L && (j == 0 || p > b->mlm_positions[(size_t)k * P + j - 1]) && id >= 0,
                         "row %lld: labelled entry %d is (%d, %d)", (long long)g, j, p, id);
        else CHECK(p == -1 && id == -1, "row %lld: entry %d past the list is (%d, %d), expected -1", (long long)g, j, p, id);
    }
    return m;
}

/* The micro-batch sizes handed out in turn (0 = an EMPTY micro-batch of a rank's padding). */
static const int sizes[] = {13, 0, 1, 299, 40, 7, 2, 0, 64};
#define N_SIZES ((int)(sizeof sizes / sizeof sizes[0]))

static int verify(const hs_comm *comm, int argc, char **argv) {
    CHECK(argc == 9, "usage: test_bert_shards verify PATH SPLIT NUM_FILE L P VOCAB REF.bin");
    const char *path = argv[2], *split = argv[3];
    int num_file = atoi(argv[4]), L = atoi(argv[5]), P = atoi(argv[6]), vocab = atoi(argv[7]);
    int64_t ref_rows;
    int32_t *ref = read_reference(argv[8], 3 * L + 2 * P + 2, &ref_rows);

    hs_bert_shards *s = hs_bert_shards_open(path, split, num_file, comm->io);
    CHECK(hs_bert_shards_seq_len(s) == L && hs_bert_shards_max_pred(s) == P, "L %d, P %d; the writer used %d, %d",
          hs_bert_shards_seq_len(s), hs_bert_shards_max_pred(s), L, P);
    int64_t n = hs_bert_shards_num_samples(s);
    CHECK(n <= ref_rows && (num_file > 0 || n == ref_rows), "%lld rows, the writer wrote %lld", (long long)n,
          (long long)ref_rows);

    int max_count = 0;
    for (int i = 0; i < N_SIZES; i++) max_count = sizes[i] > max_count ? sizes[i] : max_count;
    if (max_count < n) max_count = (int)n; /* the one large read below */
    void *buf = malloc(hs_bert_batch_bytes(max_count, L, P));
    CHECK(buf, "out of memory");
    int *seen = calloc((size_t)n, sizeof *seen);
    CHECK(seen, "out of memory");

    /* Round after round, rank r takes the next micro-batch in the global sequence: the same sequence on
     * every rank, so the collective calls match; sizes cycle, so batches straddle file boundaries. */
    int64_t cursor = 0, labelled = 0;
    int turn = 0, reads = 0, empties = 0;
    while (cursor < n) {
        int64_t my_first = 0;
        int my_count = 0;
        for (int r = 0; r < comm->size; r++) {
            int want = sizes[turn++ % N_SIZES];
            int c = (int)(n - cursor < want ? n - cursor : want);
            if (r == comm->rank) my_first = cursor, my_count = c;
            cursor += c;
        }
        hs_bert_shards_read(s, my_first, my_count, vocab, buf);
        reads++;
        empties += my_count == 0;
        hs_bert_batch *b = buf;
        CHECK(b->count == my_count && b->seq_len == L && b->max_pred == P, "batch header %d %d %d", b->count,
              b->seq_len, b->max_pred);
        for (int k = 0; k < my_count; k++) {
            labelled += compare_row(b, k, my_first + k, ref, L, P);
            seen[my_first + k]++;
        }
    }
    /* every rank EMPTY (no file touched), then each rank in turn alone reads everything (every file)
     * while the others are EMPTY */
    hs_bert_shards_read(s, 0, 0, vocab, buf);
    hs_bert_shards_read(s, 0, 0, vocab, NULL);
    for (int reader = 0; reader < comm->size; reader++) {
        int all = comm->rank == reader ? (int)n : 0;
        hs_bert_shards_read(s, 0, all, vocab, buf);
        for (int k = 0; k < all; k++) compare_row(buf, k, k, ref, L, P);
    }
    /* Spans of many files at once: rank r reads the r-th of `size` equal parts of the rows (all ranks
     * at once, together every file), then the same parts in reverse rank order with every other rank
     * EMPTY, so the files of one read are partly touched by one rank only. */
    for (int pass = 0; pass < 2; pass++) {
        int part = pass == 0 ? comm->rank : comm->size - 1 - comm->rank;
        int64_t a = n * part / comm->size, e = n * (part + 1) / comm->size;
        int c = pass == 1 && comm->rank % 2 == 1 ? 0 : (int)(e - a);
        hs_bert_shards_read(s, a, c, vocab, buf);
        for (int k = 0; k < c; k++) compare_row(buf, k, a + k, ref, L, P);
    }

    MPI_Allreduce(MPI_IN_PLACE, seen, (int)n, MPI_INT, MPI_SUM, comm->world);
    for (int64_t i = 0; i < n; i++) CHECK(seen[i] == 1, "row %lld read %d times over all ranks", (long long)i, seen[i]);
    CHECK_ALL_COLLECTIVE(hs_bert_shards_no_collective_cause(s), comm->world);
    long long total_labelled = labelled;
    MPI_Allreduce(MPI_IN_PLACE, &total_labelled, 1, MPI_LONG_LONG, MPI_SUM, comm->world);
    if (comm->rank == 0)
        printf("ok: %d rank(s): %lld rows of %d file(s) (L %d, P %d) verified, %lld labelled tokens, %d reads with "
               "%d EMPTY on rank 0, no-collective cause 0\nfile opens %lld, at most %d open\n",
               comm->size, (long long)n, hs_bert_shards_num_files(s), L, P, total_labelled, reads, empties,
               (long long)hs_bert_shards_file_opens(s), hs_bert_shards_max_open(s));
    hs_bert_shards_close(s);
    free(seen);
    free(buf);
    free(ref);
    return 0;
}

static int scan(const hs_comm *comm, int argc, char **argv) {
    CHECK(argc == 5, "usage: test_bert_shards scan PATH SPLIT VOCAB");
    hs_bert_shards *s = hs_bert_shards_open(argv[2], argv[3], 0, comm->io);
    int L = hs_bert_shards_seq_len(s), P = hs_bert_shards_max_pred(s), vocab = atoi(argv[4]);
    int64_t n = hs_bert_shards_num_samples(s);
    const int batch = 16;
    void *buf = malloc(hs_bert_batch_bytes(batch, L, P));
    CHECK(buf, "out of memory");
    unsigned long long sum = 0;
    for (int64_t round = 0; round * batch * comm->size < n; round++) {
        int64_t first = (round * comm->size + comm->rank) * batch;
        int count = first < n ? (int)(n - first < batch ? n - first : batch) : 0;
        hs_bert_shards_read(s, first < n ? first : 0, count, vocab, buf);
        hs_bert_batch *b = buf;
        for (size_t i = 0; i < (size_t)count * L; i++) sum += (unsigned)b->input_ids[i];
    }
    printf("rank %d: %lld rows of %d file(s), L %d, P %d, checksum %llu\n", comm->rank, (long long)n,
           hs_bert_shards_num_files(s), L, P, sum);
    hs_bert_shards_close(s);
    free(buf);
    return 0;
}

static int bench(const hs_comm *comm, int argc, char **argv) {
    CHECK(argc == 6, "usage: test_bert_shards bench PATH SPLIT BATCH EPOCHS");
    MPI_Barrier(comm->world);
    double t_open = MPI_Wtime();
    hs_bert_shards *s = hs_bert_shards_open(argv[2], argv[3], 0, comm->io);
    MPI_Barrier(comm->world);
    t_open = MPI_Wtime() - t_open;
    int L = hs_bert_shards_seq_len(s), P = hs_bert_shards_max_pred(s), batch = atoi(argv[4]), epochs = atoi(argv[5]);
    int64_t n = hs_bert_shards_num_samples(s), nbatches = n / batch;
    CHECK(nbatches >= 1 && epochs >= 1, "fewer rows than one batch, or no epoch");
    void *buf = malloc(hs_bert_batch_bytes(batch, L, P));
    int64_t *order = malloc((size_t)nbatches * sizeof *order);
    CHECK(buf && order, "out of memory");
    const int64_t reads = (nbatches + comm->size - 1) / comm->size; /* per rank and epoch */
    if (comm->rank == 0)
        printf("bench: %d rank(s), %lld rows of %d file(s), %lld micro-batches of %d rows per epoch: open %.3f s\n",
               comm->size, (long long)n, hs_bert_shards_num_files(s), (long long)nbatches, batch, t_open);
    uint64_t x = 88172645463325252ull; /* xorshift: the same shuffled order on every rank */
    for (int64_t i = 0; i < nbatches; i++) order[i] = i;
    for (int ep = 1; ep <= epochs; ep++) {
        for (int64_t i = nbatches - 1; i > 0; i--) { /* Fisher-Yates */
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            int64_t j = (int64_t)(x % (uint64_t)(i + 1)), t = order[i];
            order[i] = order[j], order[j] = t;
        }
        int64_t opens0 = hs_bert_shards_file_opens(s);
        MPI_Barrier(comm->world);
        double t0 = MPI_Wtime();
        for (int64_t r = 0; r < reads; r++) {
            int64_t k = r * comm->size + comm->rank;
            hs_bert_shards_read(s, k < nbatches ? order[k] * batch : 0, k < nbatches ? batch : 0, 0, buf);
        }
        MPI_Barrier(comm->world);
        double dt = MPI_Wtime() - t0;
        if (comm->rank == 0)
            printf("bench: epoch %d: %lld reads per rank, %.3f ms per micro-batch, %lld file opens\n", ep,
                   (long long)reads, 1e3 * dt / (double)reads, (long long)(hs_bert_shards_file_opens(s) - opens0));
    }
    struct rusage ru;
    CHECK(getrusage(RUSAGE_SELF, &ru) == 0, "getrusage failed");
    if (comm->rank == 0)
        printf("bench: at most %d files open, rank 0 peak memory %.0f MB, no-collective cause 0x%x\n",
               hs_bert_shards_max_open(s), (double)ru.ru_maxrss / 1024.0, hs_bert_shards_no_collective_cause(s));
    hs_bert_shards_close(s);
    free(order);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    hs_comm comm;
    hs_comm_init(&comm, &argc, &argv);
    g_rank = comm.rank;
    int status = 2;
    if (argc >= 2 && !strcmp(argv[1], "verify")) status = verify(&comm, argc, argv);
    else if (argc >= 2 && !strcmp(argv[1], "scan")) status = scan(&comm, argc, argv);
    else if (argc >= 2 && !strcmp(argv[1], "bench")) status = bench(&comm, argc, argv);
    else if (argc >= 2 && !strcmp(argv[1], "repack")) status = hs_prep_repack_main(argc - 1, argv + 1, &comm);
    else if (comm.rank == 0) fprintf(stderr, "usage: test_bert_shards verify|scan|repack|bench ARGS...\n");
    hs_comm_finalize(&comm);
    return status;
}
