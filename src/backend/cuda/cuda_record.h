/* Recording a graph region (docs/gpu.md, "CUDA graphs"). Between graph_begin and graph_end_launch the
 * CUDA backend's table entries (hs_cuda_rec_<op>, generated from src/backend/ops.def by
 * tools/gen_record_ops.awk) do not enqueue: each call's arguments go into a command list (host structs
 * the op reads through a pointer copied) and into a 64-bit signature, an FNV-1a hash of the op names
 * and every argument but the per-update scalars, which go into slots instead (cuda_slots.h). Ops that
 * return a value run at once (alloc, event_create, conv2d_workspace_bytes), ops that wait for the
 * device are refused, and ops whose effect must be seen every update (free, host_free, event_destroy,
 * upload_async on the copy stream, event_record / stream_wait on the copy stream) or that change the
 * wrappers' host state (bind_half, unbind_half, register_params) make the region one that is always
 * captured, never replayed. At the region's end cuda_graph.c launches the executable graph kept under
 * the signature, or captures the command list by playing it (hs_cuda_record_play). */
#ifndef HS_BACKEND_CUDA_RECORD_H
#define HS_BACKEND_CUDA_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* graph_begin: recording starts; the signature starts from the addresses of the backend's own grow-only
 * blocks and the wrappers' state generation (cuda_device.h), so a graph is not replayed after a block
 * it holds was replaced or after the 16-bit copies' bookkeeping changed */
void hs_cuda_record_begin(const hs_backend *be);
/* graph_end_launch: recording ends; returns the signature */
uint64_t hs_cuda_record_end(const hs_backend *be);
/* Plays the command list: every recorded call made on the real wrapper, in order (inside a capture) */
void hs_cuda_record_play(const hs_backend *be);
/* The op that keeps the recorded region from being replayed, or NULL */
const char *hs_cuda_record_blocked(const hs_backend *be);

/* For the generated entries: */
void hs_cuda_record(const hs_backend *be, const char *op, void (*play)(const void *), const void *args,
                    const void *hashed, size_t bytes, int blocks_replay);
void hs_cuda_record_now(const hs_backend *be, const char *op, const void *args, size_t bytes, int blocks_replay);
void hs_cuda_record_hash(const hs_backend *be, const void *p, size_t n);
void hs_cuda_record_refuse(const hs_backend *be, const char *op);
void hs_cuda_record_blocks(const hs_backend *be, const char *op);
/* around the slots-only call of a wrapper with per-update scalars */
void hs_cuda_record_slots_begin(const hs_backend *be);
void hs_cuda_record_slots_end(const hs_backend *be);

#ifdef __cplusplus
}
#endif
#endif
