/* The gradient all-reduce in buckets, overlapped with backward (distributed.bucket_cap_mb,
 * distributed.allreduce_dtype). The flat gradient buffer is cut, once, into contiguous buckets of at
 * most bucket_cap_mb MiB of fp32 (4 bytes an element, whatever the travel dtype) at tensor boundaries,
 * taken from its END (backward produces the last tensors' gradients first; a tensor larger than the
 * cap is a bucket of its own). A bucket's all-reduce starts as soon as backward has declared every
 * gradient in it final (hs_step_ctx.grads_ready), in the same order on every rank, and the transfer
 * proceeds while backward goes on; finish waits for all of them.
 * On CPU ranks the sums are the same bits whatever the bucketing, for a fixed world size (rank-ordered
 * sums, see grad_buckets.c); on NCCL with 2 ranks too, with more ranks NCCL's order may vary.
 * bucket_cap_mb = 0: one all-reduce of the whole buffer after backward (no overlap). */
#ifndef HS_COMM_GRAD_BUCKETS_H
#define HS_COMM_GRAD_BUCKETS_H

#include <stdint.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "nn/params.h"

typedef struct hs_grad_buckets hs_grad_buckets;

/* dtype: "fp32" | "bf16" | "fp16": the type gradients travel in (CPU ranks: fp32 sums of the 16-bit
 * values in rank order, rounded once; NCCL: pairwise 16-bit sums). cap_mb 0: one bucket. Collective:
 * every rank passes the same cap and dtype (the first call also settles how device buffers move, see
 * hs_comm_device_mode). One rank: nothing moves, the gradient stays fp32. */
hs_grad_buckets *hs_grad_buckets_create(const hs_comm *c, const hs_backend *be, hs_params *p, double cap_mb,
                                        const char *dtype);
/* Before the backward pass of an update's last micro-batch: no bucket in flight. */
void hs_grad_buckets_start(hs_grad_buckets *b);
/* The hs_step_ctx.grads_ready callback (arg = the hs_grad_buckets): starts every not yet started
 * bucket lying wholly at offsets >= offset, and drives the progress of those in flight. */
void hs_grad_buckets_ready(void *b, int64_t offset);
/* Starts the remaining buckets and waits for all: p->grad holds the sum over ranks (enqueued on the
 * device's stream: the ops after it see the sum). */
void hs_grad_buckets_finish(hs_grad_buckets *b);
void hs_grad_buckets_free(hs_grad_buckets *b);
/* 1 when start..finish only enqueue device work (no sum, or NCCL): what a CUDA graph may capture. */
int hs_grad_buckets_capturable(const hs_grad_buckets *b);

#endif
