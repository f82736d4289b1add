/* The CUDA device object: what hs_backend.impl points to on the CUDA backend. Only files of the CUDA
 * backend (src/backend/cuda/, the .cu files under kernels/) include this header.
 *
 * Streams (docs/gpu.md, "Streams and events"):
 *   compute  every op of the seam is enqueued here, in call order;
 *   copy     uploads from pinned staging buffers (ordered against compute by events);
 *   comm     NCCL collectives; compute -> comm and comm -> compute are ordered by events.
 * All three are created with cudaStreamNonBlocking, so nothing else (the legacy default stream) orders
 * them implicitly. */
#ifndef HS_BACKEND_CUDA_DEVICE_H
#define HS_BACKEND_CUDA_DEVICE_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hs_cuda_device {
    int ordinal;        /* the GPU this rank uses (local_rank % device count) */
    int sm_count;       /* multiprocessors, for grid sizes */
    cudaStream_t compute, copy, comm;
    cudaEvent_t compute_done, copy_done, comm_done; /* recorded to order one stream after another */
    void *blas;         /* cublasLtHandle_t (cuda_gemm.c) */
    void *dnn;          /* cudnnHandle_t (cuda_conv.c) */
    void *gemm_workspace; /* cuBLASLt workspace, gemm_workspace_bytes */
    size_t gemm_workspace_bytes;
    /* cuda_gemm.c: the cached plans (struct gemm_plan[gemm_plan_capacity], gemm_plans_used of them; every
     * precision's table shares them, the precision is part of the key), the grow-only buffer the
     * bf16/fp16 GEMMs convert operands into, and how many conversions they launched */
    void *gemm_plans;
    int gemm_plans_used, gemm_plan_capacity;
    void *gemm_half;
    size_t gemm_half_bytes;
    size_t gemm_conversions;
    void *scratch;      /* grow-only device scratch (hs_cuda_scratch) */
    size_t scratch_bytes;
    void *nccl;         /* ncclComm_t once hs_comm has made one (comm.c), else NULL */
    int capturing;      /* between graph_begin and graph_end_launch (cuda_graph.c) */
    /* Blocks freed during a capture, freed after its launch (hs_cuda_free_later): a host array that
     * doubles when full, so any number of frees may fall inside one capture. */
    void **deferred_free;
    size_t n_deferred, cap_deferred;
    /* cuda_slots.c: per-update scalars of a graph region (device slots, the pinned mirror ring, the
     * events after the copies that read each mirror; slots_active between graph_begin and the launch) */
    void *slots_dev;
    void *mirror[4];
    cudaEvent_t mirror_read[4];
    int mirror_cur, slots_active;
    size_t slots_used;
    /* cuda_slots.c / cuda_record.c: slots_only: a wrapper called by the recorder only writes its slots
     * (and enqueues nothing); slots_verify: a played wrapper's slots must equal the recorded ones, up
     * to slots_recorded */
    int slots_only, slots_verify;
    size_t slots_recorded;
    /* cuda_record.c: a graph region being recorded (its command list, signature, and why it may not be
     * replayed: the op that blocks it, or NULL) */
    int recording;
    unsigned char *rec_buf;
    size_t rec_used, rec_cap;
    uint64_t rec_hash;
    const char *rec_blocked;
} hs_cuda_device;

static inline hs_cuda_device *hs_cuda_dev(const hs_backend *be) { return (hs_cuda_device *)be->impl; }
static inline cudaStream_t hs_cuda_stream(const hs_backend *be) { return hs_cuda_dev(be)->compute; }
/* 1 while the recorder runs a wrapper for its slots only: the wrapper returns after its hs_cuda_slots
 * calls, before it enqueues anything or touches other state (cuda_slots.h) */
static inline int hs_cuda_slots_only(const hs_backend *be) { return hs_cuda_dev(be)->slots_only; }

/* The wrappers' host state that decides what they enqueue, the parameter copies' registry (cuda_shadow.c:
 * registered arenas, stale copies), changed: a recorded region's signature includes this count, and a
 * graph captured while it changed is not replayed (cuda_record.c, cuda_graph.c). The activations' twins
 * (cuda_twins.c) are hashed by content instead and kept with the graph (hs_cuda_twins_save). */
void hs_cuda_state_changed(void);
uint64_t hs_cuda_state_generation(void);
/* A block of the backend's own (the scratch, the GEMM's 16-bit operand buffer, a parameter arena's
 * 16-bit copy: addresses a graph holds that are no op's argument) is being freed: a graph captured
 * meanwhile is not kept for replay, and the signature holds the count (cuda_record.c). Blocks freed
 * through the seam need no count: their addresses are op arguments, in the signature. */
void hs_cuda_memory_freed(void);
uint64_t hs_cuda_memory_epoch(void);

/* Device scratch of at least `bytes` for one op's temporaries (per-row partial sums and the like),
 * valid until the next call. Grows only (synchronising the device before it frees the old block), so
 * after the first update the training loop allocates nothing. */
void *hs_cuda_scratch(const hs_backend *be, size_t bytes);

/* Frees device memory that enqueued work may still read: at once (cudaFree waits for the device), or,
 * during a graph capture, where nothing may wait for the device, after the capture's launch
 * (cuda_graph.c: hs_cuda_free_deferred). The grow-only buffers call it when they grow. */
void hs_cuda_free_later(const hs_backend *be, void *p);
/* Frees what hs_cuda_free_later deferred during the capture that just ended (cudaFree: after the
 * launch, which the graph's nodes that read the blocks belong to). */
void hs_cuda_free_deferred(const hs_backend *be);

#ifdef __cplusplus
}
#endif
#endif
