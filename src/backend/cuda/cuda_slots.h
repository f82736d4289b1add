/* Per-update scalars in device memory (docs/gpu.md, "CUDA graphs"). Kernels take some values that
 * change from update to update while the op sequence stays the same: dropout keys and first samples,
 * loss normalisations, the optimizer step's factors. Inside a graph region (graph_begin ..
 * graph_end_launch) the CUDA op wrappers write such values into the next slots of a pinned host mirror
 * and pass the kernel the slots' device address instead; one cudaMemcpyAsync of the mirror, enqueued
 * before each launch of the graph (outside it), sets the slots. So the graph's nodes no longer hold
 * the values, and the same executable graph computes the next update's numbers. Outside a region
 * hs_cuda_slots returns NULL and the kernels use their value arguments (`v = slot ? *slot : value`):
 * eager launches and the CPU backend are unchanged, the same bits either way.
 *
 * Layout: 8-byte slots; one op's values are one struct (hs_dropout_slot below, or the optimizer's own),
 * copied whole. A region may hold HS_CUDA_SLOTS_MAX slots; the mirror is a ring of HS_CUDA_MIRRORS
 * buffers, each reused only after the copy that read it last has run (an event). */
#ifndef HS_BACKEND_CUDA_SLOTS_H
#define HS_BACKEND_CUDA_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HS_CUDA_SLOTS_MAX 131072 /* 1 MiB of slots per region */
#define HS_CUDA_MIRRORS 4

/* The dropout's counters (dropout ops, fused dropout of LayerNorm, ReLU and attention). */
typedef struct hs_dropout_slot {
    uint64_t key;
    int64_t first_sample;
} hs_dropout_slot;

/* Inside a graph region: copies values[bytes] into the next slots (bytes rounded up to 8) and returns
 * their device address; outside one: NULL (the kernel takes its value arguments). */
const void *hs_cuda_slots(const hs_backend *be, const void *values, size_t bytes);
/* One float's slot, or NULL */
const float *hs_cuda_slot_f32(const hs_backend *be, float v);
/* The dropout values' slots, or NULL (hs_cuda_slots of an hs_dropout_slot) */
const hs_dropout_slot *hs_cuda_dropout_slot(const hs_backend *be, uint64_t key, int64_t first_sample);

/* cuda_graph.c: a region starts (cursor at slot 0, the next mirror of the ring, waited for) */
void hs_cuda_slots_begin(const hs_backend *be);
/* Enqueues the mirror's used slots -> the device slots on the compute stream (before a graph launch) */
void hs_cuda_slots_upload(const hs_backend *be);
/* slots used since hs_cuda_slots_begin */
size_t hs_cuda_slots_used(const hs_backend *be);
/* The region ends: hs_cuda_slots returns NULL again */
void hs_cuda_slots_end(const hs_backend *be);

#ifdef __cplusplus
}
#endif
#endif
