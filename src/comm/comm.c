#include "comm/comm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/gpu_census.h"
#include "util/check.h"
#include "util/log.h"

/* Open MPI 4.1.0 to 4.1.4 (Debian 12 ships 4.1.4): OMPIO's data sieving for reads returns wrong bytes for
 * collective reads whose pieces do not come in ascending order of their ends (open-mpi/ompi issue 10546,
 * fixed in 4.1.5) — silently wrong training data. tests/mpi/test_lm_data.c sees it with 3 ranks. Turning
 * read sieving off is the workaround given there; set before MPI starts, it covers every file hetseq
 * reads (BERT shards, the MNIST file, language-model tokens). A user's own setting is kept.
 * MPI_Get_library_version may be called before MPI_Init. */
static void avoid_ompio_sieving_bug(void) {
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0, major = 0, minor = 0, patch = 0;
    if (MPI_Get_library_version(version, &len) != MPI_SUCCESS) return;
    const char *v = strstr(version, "Open MPI v");
    if (!v || sscanf(v, "Open MPI v%d.%d.%d", &major, &minor, &patch) != 3) return;
    if (major == 4 && minor == 1 && patch <= 4) setenv("OMPI_MCA_fbtl_posix_read_datasieving", "0", 0);
}

void hs_comm_init(hs_comm *c, int *argc, char ***argv) {
    memset(c, 0, sizeof *c);
    avoid_ompio_sieving_bug();
    int provided = 0;
    HS_CHECK_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided),
                 "MPI could not start; check the mpirun/srun environment (srun --mpi=pmix)");
    /* Return errors to our checks instead of aborting inside the library without a message. */
    HS_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN), NULL);
    HS_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &c->rank), NULL);
    HS_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &c->size), NULL);
    hs_check_set_rank(c->rank, c->size);
    hs_log_set_rank(c->rank);
    if (provided < MPI_THREAD_MULTIPLE)
        hs_die("the MPI library provides thread level %d, hetseq needs MPI_THREAD_MULTIPLE (%d) for its prefetch "
               "thread. Use an MPI built with thread support (Open MPI >= 3 has it by default).",
               provided, MPI_THREAD_MULTIPLE);
    HS_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c->world), NULL);
    HS_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c->io), NULL);
    HS_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c->error), NULL);
    hs_check_set_error_comm(c->error);
    HS_CHECK_MPI(MPI_Comm_set_errhandler(c->io, MPI_ERRORS_RETURN), NULL);
    HS_CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &c->node),
                 "MPI-3 shared-memory split failed");
    HS_CHECK_MPI(MPI_Comm_rank(c->node, &c->local_rank), NULL);
    hs_log_set_local_rank(c->local_rank);
    HS_CHECK_MPI(MPI_Comm_size(c->node, &c->local_size), NULL);
}

void hs_comm_finalize(hs_comm *c) {
    if (c->world != MPI_COMM_NULL && c->world) MPI_Comm_free(&c->world);
    if (c->io != MPI_COMM_NULL && c->io) MPI_Comm_free(&c->io);
    if (c->node != MPI_COMM_NULL && c->node) MPI_Comm_free(&c->node);
    hs_check_set_error_comm(MPI_COMM_NULL);
    if (c->error != MPI_COMM_NULL && c->error) MPI_Comm_free(&c->error);
    MPI_Finalize();
}

/* MPI counts are int: every call moves at most this many elements, larger buffers go in pieces. */
#define MAX_MPI_COUNT ((size_t)1 << 30)

/* How device buffers move (comm.h: HS_COMM_MOVE_*), decided once by every rank together at the first
 * device collective; NCCL's communicator is made then. */
enum {
    MOVE_UNDECIDED,
    MOVE_HOST = HS_COMM_MOVE_HOST,
    MOVE_DEVICE = HS_COMM_MOVE_DEVICE,
    MOVE_STAGED = HS_COMM_MOVE_STAGED
};
static int move_mode;
static const hs_backend *move_backend;
static void *staging;        /* STAGED: host copy of the largest buffer moved so far */
static size_t staging_bytes;

static int device_moves(const hs_comm *c, const hs_backend *be) {
    if (move_mode == MOVE_UNDECIDED) {
        /* one all-gather of every rank's memory kind, host and GPU (gpu_census.c) */
        const hs_gpu_census k = hs_gpu_census_take(c, be);
        const int all_host = k.gpu_ranks == 0, any_host = k.gpu_ranks < c->size;
        move_mode = all_host ? MOVE_HOST : !any_host && k.shared_gpus == 0 ? MOVE_DEVICE : MOVE_STAGED;
        /* NCCL refuses two ranks on one GPU (ncclInvalidUsage): such a job never calls it and moves
         * everything through host memory, the mixed job's path (a whole-job choice: NCCL among the
         * distinct GPUs plus host staging for the rest would need two levels of reduction) */
        if (k.shared_gpus && c->rank == 0)
            hs_log("| %d of %d GPU ranks share %d GPU(s) and NCCL refuses two ranks on one GPU: gradients and "
                   "broadcasts of the whole job go through host memory and MPI (host-staged), not NCCL",
                   k.sharing_ranks, k.gpu_ranks, k.shared_gpus);
        if (move_mode == MOVE_DEVICE) {
            if (!be->collectives_init || !be->broadcast)
                hs_die("the %s device has no collectives for its memory; this build cannot run it on %d ranks", be->name,
                       c->size);
            be->collectives_init(be, &c->world);
        }
        if (move_mode == MOVE_STAGED && any_host && c->rank == 0)
            hs_log("| a mixed job (CPU and GPU ranks): gradients and broadcasts go through host memory and MPI");
        move_backend = be;
    } else if (move_backend != be) {
        hs_die("internal: device collectives of two devices in one process (%s, %s)", move_backend->name, be->name);
    }
    return move_mode;
}

int hs_comm_device_mode(const hs_comm *c, const hs_backend *be) {
    return c->size == 1 ? (be->memory_is_host ? MOVE_HOST : MOVE_DEVICE) : device_moves(c, be);
}

static void *staged(const hs_backend *be, size_t bytes) {
    if (bytes > staging_bytes) {
        if (staging) be->host_free(be, staging);
        staging = be->host_alloc(be, bytes);
        staging_bytes = bytes;
    }
    return staging;
}

void hs_comm_bcast_device(const hs_comm *c, const hs_backend *be, void *buf, size_t bytes, int root) {
    if (c->size == 1 || bytes == 0) return;
    switch (device_moves(c, be)) {
    case MOVE_DEVICE: be->broadcast(be, buf, bytes, root); return;
    case MOVE_HOST: hs_comm_bcast_bytes(c, buf, bytes, root); return;
    default:
        if (be->memory_is_host) {
            hs_comm_bcast_bytes(c, buf, bytes, root);
        } else {
            void *h = staged(be, bytes);
            if (c->rank == root) be->download(be, h, buf, bytes);
            else be->synchronize(be);
            hs_comm_bcast_bytes(c, h, bytes, root);
            be->upload(be, buf, h, bytes);
        }
    }
}

void hs_comm_allreduce_sum_double(const hs_comm *c, double *v, int n) {
    if (c->size == 1) return;
    HS_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, c->world), "stat all-reduce failed");
}

void hs_comm_bcast_bytes(const hs_comm *c, void *buf, size_t bytes, int root) {
    if (c->size == 1) return;
    for (size_t off = 0; off < bytes; off += MAX_MPI_COUNT) {
        int cnt = (int)(bytes - off < MAX_MPI_COUNT ? bytes - off : MAX_MPI_COUNT);
        HS_CHECK_MPI(MPI_Bcast((char *)buf + off, cnt, MPI_BYTE, root, c->world),
                     "broadcast failed; a rank may have died (see its message above)");
    }
}

void hs_comm_allreduce_minmax_u64(const hs_comm *c, uint64_t *lo, uint64_t *hi, int n) {
    if (c->size == 1) return;
    HS_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, lo, n, MPI_UINT64_T, MPI_MIN, c->world), "replica check");
    HS_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, hi, n, MPI_UINT64_T, MPI_MAX, c->world), "replica check");
}

void hs_comm_barrier(const hs_comm *c) {
    if (c->size == 1) return;
    HS_CHECK_MPI(MPI_Barrier(c->world), NULL);
}

int hs_comm_all_true(const hs_comm *c, int value) {
    int v = value ? 1 : 0, r = v;
    if (c->size > 1) HS_CHECK_MPI(MPI_Allreduce(&v, &r, 1, MPI_INT, MPI_LAND, c->world), NULL);
    return r;
}

long long hs_comm_max_ll(const hs_comm *c, long long value) {
    long long r = value;
    if (c->size > 1) HS_CHECK_MPI(MPI_Allreduce(&value, &r, 1, MPI_LONG_LONG, MPI_MAX, c->world), NULL);
    return r;
}

int hs_comm_share_status(const hs_comm *c, int status) {
    if (c->size == 1) return status;
    MPI_Request req;
    HS_CHECK_MPI(MPI_Ibcast(&status, 1, MPI_INT, 0, c->world, &req), NULL);
    for (;;) {
        int done = 0;
        HS_CHECK_MPI(MPI_Test(&req, &done, MPI_STATUS_IGNORE), NULL);
        if (done) break;
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    }
    return status;
}
