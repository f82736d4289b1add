/* Every rank's device at the start of a job: which ranks are GPU ranks and which of them share one
 * GPU. NCCL refuses a communicator in which two ranks use the same GPU (ncclCommInitRank: "Duplicate
 * GPU detected", ncclInvalidUsage), so comm.c asks this before it creates one (docs/gpu.md, "More ranks
 * than GPUs"). */
#ifndef HS_COMM_GPU_CENSUS_H
#define HS_COMM_GPU_CENSUS_H

#include "backend/backend.h"
#include "comm/comm.h"

typedef struct hs_gpu_census {
    int gpu_ranks;     /* ranks whose device memory is not host memory */
    int shared_gpus;   /* GPUs used by two or more ranks */
    int sharing_ranks; /* the ranks on those GPUs */
} hs_gpu_census;

/* Collective over c->world (one MPI_Allgather). Rank 0 logs one line per shared GPU: its ranks, its
 * PCI bus id and its host. */
hs_gpu_census hs_gpu_census_take(const hs_comm *c, const hs_backend *be);

#endif
