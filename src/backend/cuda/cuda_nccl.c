/* Device collectives of the CUDA backend: NCCL on the comm stream, ordered against the compute stream
 * by events (compute → comm before the collective reads the buffer, comm → compute before anything
 * after it touches the buffer). The communicator: rank 0 calls ncclGetUniqueId, MPI_Bcast sends the
 * id to every rank, and every rank calls ncclCommInitRank — the MPI/NCCL hand-shake of the design. */
#include <mpi.h>
#include <nccl.h>
#include <string.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_ops.h"

#define HS_NCCL_CHECK(call)                                                                            \
    do {                                                                                               \
        ncclResult_t hs_nccl_rc_ = (call);                                                             \
        if (hs_nccl_rc_ != ncclSuccess)                                                                \
            hs_fatal_at(__FILE__, __LINE__, #call,                                                     \
                        "an NCCL call failed: run with NCCL_DEBUG=WARN for NCCL's reason; check that "  \
                        "every rank reaches the network (NCCL_SOCKET_IFNAME) and that one GPU is not " \
                        "shared by two ranks",                                                         \
                        "%s (result %d): %s", ncclGetErrorString(hs_nccl_rc_), (int)hs_nccl_rc_,      \
                        ncclGetLastError(NULL));                                                       \
    } while (0)

void hs_cuda_collectives_init(const hs_backend *be, const void *mpi_comm) {
    MPI_Comm world = *(const MPI_Comm *)mpi_comm;
    int rank, size;
    HS_CHECK_MPI(MPI_Comm_rank(world, &rank), "MPI_Comm_rank failed");
    HS_CHECK_MPI(MPI_Comm_size(world, &size), "MPI_Comm_size failed");
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (rank == 0) HS_NCCL_CHECK(ncclGetUniqueId(&id));
    HS_CHECK_MPI(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, world),
                 "sending the NCCL id from rank 0 failed; a rank may have died (see its message above)");
    ncclComm_t comm;
    HS_NCCL_CHECK(ncclCommInitRank(&comm, size, id, rank));
    hs_cuda_dev(be)->nccl = comm;
}

/* comm stream waits for the compute stream's work so far */
static void comm_after_compute(hs_cuda_device *d) {
    HS_CUDA_CHECK(cudaEventRecord(d->compute_done, d->compute));
    HS_CUDA_CHECK(cudaStreamWaitEvent(d->comm, d->compute_done, 0));
}

/* compute stream waits for the collective */
static void compute_after_comm(hs_cuda_device *d) {
    HS_CUDA_CHECK(cudaEventRecord(d->comm_done, d->comm));
    HS_CUDA_CHECK(cudaStreamWaitEvent(d->compute, d->comm_done, 0));
}

void hs_cuda_broadcast(const hs_backend *be, void *buf, size_t bytes, int root) {
    hs_cuda_device *d = hs_cuda_dev(be);
    hs_cuda_memory_written(buf, bytes); /* rank 0's values: 16-bit copies of what it overwrites end */
    comm_after_compute(d);
    HS_NCCL_CHECK(ncclBroadcast(buf, buf, bytes, ncclUint8, root, (ncclComm_t)d->nccl, d->comm));
    HS_CUDA_LIBRARY_OP("ncclBroadcast");
    compute_after_comm(d);
}

/* The gradient buckets' all-reduce: the comm stream waits for the compute work so far (the bucket's
 * gradients are final), the compute stream goes on with backward meanwhile. */
void hs_cuda_allreduce_sum_async(const hs_backend *be, float *buf, size_t n, int dtype, void *tmp16) {
    hs_cuda_device *d = hs_cuda_dev(be);
    comm_after_compute(d);
    if (dtype == HS_ALLREDUCE_FP32) {
        HS_NCCL_CHECK(ncclAllReduce(buf, buf, n, ncclFloat32, ncclSum, (ncclComm_t)d->nccl, d->comm));
        HS_CUDA_LIBRARY_OP("ncclAllReduce");
        return;
    }
    /* 16-bit transit: round, sum (NCCL adds 16-bit values pairwise, each sum rounded to 16 bits), widen;
     * all three on the comm stream, so the compute stream goes on with backward */
    const int bf16 = dtype == HS_ALLREDUCE_BF16;
    uint16_t *low = tmp16;
    hs_cuda_grad_to16(d->comm, low, buf, n, bf16);
    HS_NCCL_CHECK(ncclAllReduce(low, low, n, bf16 ? ncclBfloat16 : ncclFloat16, ncclSum, (ncclComm_t)d->nccl, d->comm));
    HS_CUDA_LIBRARY_OP("ncclAllReduce");
    hs_cuda_grad_from16(d->comm, buf, low, n, bf16);
}

void hs_cuda_allreduce_wait(const hs_backend *be) { compute_after_comm(hs_cuda_dev(be)); }
