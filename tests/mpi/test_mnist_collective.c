/* A user prepares a slice of Fashion-MNIST with `hetseq prep mnist` and trains on 1, 2 or 3 ranks:
 * every rank reads its shard of micro-batches (EMPTY ones included) through the prefetch thread with
 * collective parallel-HDF5 reads while the main thread all-reduces on another communicator. Every byte
 * read must equal the IDX source (read here with zlib directly), every sample must be read exactly
 * once, and HDF5 must report that no transfer fell back to independent I/O.
 *
 * usage: test_mnist_collective IDX_DIR OUT.h5 */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "comm/comm.h"
#include "data/mnist.h"
#include "train/prefetch.h"
#include "data/sampler.h"
#include "prep/prep.h"
#include "tasks/task.h"

#include "mpi_check.h"

#define LIMIT_TRAIN 1000
#define LIMIT_TEST 333
#define TRAIN_BATCH 7 /* 1000 = 142 x 7 + 6: the last micro-batch is short */
#define TEST_BATCH 50
#define UPDATE_FREQ 3

/* The IDX source, read without hetseq's reader: skip the header, take the first `keep` records. */
static uint8_t *read_idx_records(const char *dir, const char *name, int header, size_t record, int keep) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.gz", dir, name);
    gzFile g = gzopen(path, "rb");
    if (!g) {
        snprintf(path, sizeof path, "%s/%s", dir, name);
        g = gzopen(path, "rb");
    }
    CHECK(g, "cannot open %s", path);
    uint8_t head[16];
    CHECK(gzread(g, head, (unsigned)header) == header, "%s: short header", path);
    uint8_t *data = malloc(record * (size_t)keep);
    CHECK(data, "out of memory");
    CHECK(gzread(g, data, (unsigned)(record * (size_t)keep)) == (int)(record * (size_t)keep), "%s: short", path);
    gzclose(g);
    return data;
}

/* ---- the smallest task that reads: micro-batch = images[count,28,28] then labels[count] ------------- */

static size_t tiny_batch_bytes(hs_task *t, int max_count) {
    (void)t;
    return (size_t)max_count * (HS_MNIST_PIXELS + 1);
}

static void tiny_read_batch(hs_task *t, hs_split split, int64_t first, int count, void *buf) {
    uint8_t *images = buf;
    hs_mnist_read(t->impl, split == HS_SPLIT_TRAIN ? 0 : 1, first, count, images,
                  images + (size_t)count * HS_MNIST_PIXELS);
}

/* ---- main-thread traffic on the world communicator while the thread reads on the I/O one ------------- */

static long long g_allreduces;

static void allreduce_traffic(const hs_comm *comm, int rounds) {
    for (int r = 0; r < rounds; r++) {
        double v[64];
        for (int i = 0; i < 64; i++) v[i] = comm->rank + 1 + i;
        MPI_Allreduce(MPI_IN_PLACE, v, 64, MPI_DOUBLE, MPI_SUM, comm->world);
        double ranks_sum = comm->size * (comm->size + 1) / 2.0;
        for (int i = 0; i < 64; i++) CHECK(v[i] == ranks_sum + (double)i * comm->size, "all-reduce gave %g", v[i]);
        g_allreduces++;
    }
}

typedef struct source {
    const uint8_t *images, *labels;
    int64_t n;
} source;

/* Check one slot against the source; mark the samples seen. Returns the number of EMPTY micro-batches. */
static int verify_slot(const hs_prefetch_slot *slot, const source *src, int *seen) {
    int empties = 0;
    for (int i = 0; i < slot->n; i++) {
        hs_range r = slot->ranges[i];
        if (r.count == 0) {
            empties++;
            continue;
        }
        const uint8_t *images = slot->bufs[i], *labels = images + (size_t)r.count * HS_MNIST_PIXELS;
        CHECK(r.first >= 0 && r.first + r.count <= src->n, "range %lld+%d", (long long)r.first, r.count);
        for (int k = 0; k < r.count; k++) {
            int64_t s = r.first + k;
            CHECK(memcmp(images + (size_t)k * HS_MNIST_PIXELS, src->images + (size_t)s * HS_MNIST_PIXELS,
                         HS_MNIST_PIXELS) == 0,
                  "sample %lld: image bytes differ from the IDX file", (long long)s);
            CHECK(labels[k] == src->labels[s], "sample %lld: label %u, IDX says %u", (long long)s, labels[k],
                  src->labels[s]);
            seen[s]++;
        }
    }
    return empties;
}

/* Read a whole split the way the trainer does: request update u+1 before working on update u. Extra
 * all-EMPTY requests are mixed in so even a single rank reads empty selections. */
static int read_split(hs_prefetch *pf, const hs_comm *comm, hs_split split, int64_t n, int batch,
                      const source *src, int *seen) {
    hs_sampler s;
    hs_sampler_init(&s, n, batch, comm->size, comm->rank, 19940802u, split == HS_SPLIT_TRAIN);
    int64_t len = hs_sampler_shard_len(&s);
    hs_range *shard = calloc((size_t)len, sizeof *shard);
    CHECK(shard, "out of memory");
    hs_sampler_epoch_shard(&s, 1, shard);

    /* requests: groups of UPDATE_FREQ micro-batches, and after every third group one all-EMPTY group */
    int64_t n_groups = (len + UPDATE_FREQ - 1) / UPDATE_FREQ;
    int64_t n_requests = n_groups + n_groups / 3;
    hs_range empties[UPDATE_FREQ] = {{0, 0}};
    int empties_read = 0, empties_expected = 0;
    for (int64_t j = 0; j < len; j++) empties_expected += shard[j].count == 0;
    empties_expected += (int)(n_groups / 3) * UPDATE_FREQ;

    int64_t g = 0, req = 0;
#define NEXT_REQUEST()                                                                                      \
    do {                                                                                                    \
        if ((req + 1) % 4 == 0) {                                                                           \
            hs_prefetch_request(pf, split, empties, UPDATE_FREQ);                                           \
        } else {                                                                                            \
            int k = (int)(len - g * UPDATE_FREQ < UPDATE_FREQ ? len - g * UPDATE_FREQ : UPDATE_FREQ);       \
            hs_prefetch_request(pf, split, shard + g * UPDATE_FREQ, k);                                     \
            g++;                                                                                            \
        }                                                                                                   \
        req++;                                                                                              \
    } while (0)
    NEXT_REQUEST();
    for (int64_t done = 0; done < n_requests; done++) {
        hs_prefetch_slot *slot = hs_prefetch_wait(pf);
        if (req < n_requests) NEXT_REQUEST();
        allreduce_traffic(comm, 5); /* concurrent with the thread's collective read of the next request */
        CHECK(slot->split == split, "slot of split %d, expected %d", slot->split, split);
        empties_read += verify_slot(slot, src, seen);
        hs_prefetch_release(pf, slot);
    }
#undef NEXT_REQUEST
    CHECK(g == n_groups && req == n_requests, "requested %lld groups of %lld", (long long)g, (long long)n_groups);
    CHECK(empties_read == empties_expected, "%d EMPTY micro-batches read, expected %d", empties_read,
          empties_expected);
    free(shard);
    return empties_read;
}

int main(int argc, char **argv) {
    hs_comm comm;
    hs_comm_init(&comm, &argc, &argv);
    g_rank = comm.rank;
    CHECK(argc == 3, "usage: test_mnist_collective IDX_DIR OUT.h5");
    const char *idx_dir = argv[1], *out = argv[2];

    /* hetseq prep mnist --in IDX_DIR --out OUT.h5 --limit-train 1000 --limit-test 333 */
    char lt[16], ls[16];
    snprintf(lt, sizeof lt, "%d", LIMIT_TRAIN);
    snprintf(ls, sizeof ls, "%d", LIMIT_TEST);
    char *prep_argv[] = {"mnist", "--in", (char *)idx_dir, "--out", (char *)out, "--limit-train", lt,
                         "--limit-test", ls, NULL};
    CHECK(hs_prep_mnist_main(9, prep_argv, &comm) == 0, "prep mnist failed");

    source src[2] = {
        {read_idx_records(idx_dir, "train-images-idx3-ubyte", 16, HS_MNIST_PIXELS, LIMIT_TRAIN),
         read_idx_records(idx_dir, "train-labels-idx1-ubyte", 8, 1, LIMIT_TRAIN), LIMIT_TRAIN},
        {read_idx_records(idx_dir, "t10k-images-idx3-ubyte", 16, HS_MNIST_PIXELS, LIMIT_TEST),
         read_idx_records(idx_dir, "t10k-labels-idx1-ubyte", 8, 1, LIMIT_TEST), LIMIT_TEST},
    };

    hs_mnist_file *f = hs_mnist_open(out, comm.io);
    CHECK(hs_mnist_num_samples(f, 0) == LIMIT_TRAIN, "train has %lld rows", (long long)hs_mnist_num_samples(f, 0));
    CHECK(hs_mnist_num_samples(f, 1) == LIMIT_TEST, "test has %lld rows", (long long)hs_mnist_num_samples(f, 1));

    hs_task task;
    memset(&task, 0, sizeof task);
    task.name = "tiny";
    task.impl = f;
    task.batch_bytes = tiny_batch_bytes;
    task.read_batch = tiny_read_batch;
    hs_prefetch *pf = hs_prefetch_start(&task, hs_backend_cpu(), TEST_BATCH, UPDATE_FREQ);

    int *seen[2];
    int empties = 0;
    for (int s = 0; s < 2; s++) {
        seen[s] = calloc((size_t)src[s].n, sizeof(int));
        CHECK(seen[s], "out of memory");
        empties += read_split(pf, &comm, s == 0 ? HS_SPLIT_TRAIN : HS_SPLIT_VALID, src[s].n,
                              s == 0 ? TRAIN_BATCH : TEST_BATCH, &src[s], seen[s]);
    }
    double stall = hs_prefetch_stall_seconds(pf);
    hs_prefetch_stop(pf);

    /* every sample of both splits was read by exactly one rank */
    for (int s = 0; s < 2; s++) {
        MPI_Allreduce(MPI_IN_PLACE, seen[s], (int)src[s].n, MPI_INT, MPI_SUM, comm.world);
        for (int64_t i = 0; i < src[s].n; i++)
            CHECK(seen[s][i] == 1, "split %d sample %lld read %d times over all ranks", s, (long long)i, seen[s][i]);
    }
    CHECK_ALL_COLLECTIVE(hs_mnist_no_collective_cause(f), comm.world);
    hs_mnist_close(f);

    if (comm.rank == 0)
        printf("ok: %d rank(s): %d train + %d test samples verified, %d EMPTY micro-batches on rank 0, "
               "%lld all-reduces alongside, no-collective cause 0, stall %.3f s\n",
               comm.size, LIMIT_TRAIN, LIMIT_TEST, empties, g_allreduces, stall);
    for (int s = 0; s < 2; s++) {
        free((void *)src[s].images);
        free((void *)src[s].labels);
        free(seen[s]);
    }
    hs_comm_finalize(&comm);
    return 0;
}
