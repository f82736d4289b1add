#include "comm/comm.h"

#include <stdint.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"

void hs_comm_init(hs_comm *c, int *argc, char ***argv) {
    memset(c, 0, sizeof *c);
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

/* Device memory that is not host memory moves with the device's own collectives (NCCL on CUDA); the
 * group is made on first use, by every rank at the same collective call. One device per process. */
static void join_device_group(const hs_comm *c, const hs_backend *be) {
    static const hs_backend *joined;
    if (joined == be) return;
    if (joined) hs_die("internal: device collectives of two devices in one process (%s, %s)", joined->name, be->name);
    if (!be->collectives_init || !be->allreduce_sum || !be->broadcast)
        hs_die("the %s device has no collectives for its memory; this build cannot run it on %d ranks", be->name,
               c->size);
    be->collectives_init(be, &c->world);
    joined = be;
}

void hs_comm_allreduce_device_sum(const hs_comm *c, const hs_backend *be, float *buf, size_t n) {
    if (c->size == 1 || n == 0) return;
    if (!be->memory_is_host) {
        join_device_group(c, be);
        be->allreduce_sum(be, buf, n);
        return;
    }
    const size_t chunk = MAX_MPI_COUNT;
    for (size_t off = 0; off < n; off += chunk) {
        int cnt = (int)(n - off < chunk ? n - off : chunk);
        HS_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, buf + off, cnt, MPI_FLOAT, MPI_SUM, c->world),
                     "gradient all-reduce failed; a rank may have died (see its message above)");
    }
}

void hs_comm_bcast_device(const hs_comm *c, const hs_backend *be, void *buf, size_t bytes, int root) {
    if (c->size == 1 || bytes == 0) return;
    if (!be->memory_is_host) {
        join_device_group(c, be);
        be->broadcast(be, buf, bytes, root);
        return;
    }
    hs_comm_bcast_bytes(c, buf, bytes, root);
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
