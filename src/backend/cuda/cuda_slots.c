/* Per-update scalars in device memory: see cuda_slots.h. */
#include "backend/cuda/cuda_slots.h"

#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "util/check.h"
#include "util/env_flag.h"

#define SLOT_BYTES ((size_t)HS_CUDA_SLOTS_MAX * 8)

_Static_assert(HS_CUDA_MIRRORS == sizeof ((hs_cuda_device *)0)->mirror / sizeof(void *), "mirror ring size");

void hs_cuda_slots_begin(const hs_backend *be) {
    hs_cuda_device *d = hs_cuda_dev(be);
    if (!d->slots_dev) { /* once, before the first region (outside any capture) */
        HS_CUDA_CHECK(cudaMalloc(&d->slots_dev, SLOT_BYTES));
        hs_ledger_alloc(d->slots_dev, SLOT_BYTES);
        for (int i = 0; i < HS_CUDA_MIRRORS; i++) {
            HS_CUDA_CHECK(cudaHostAlloc(&d->mirror[i], SLOT_BYTES, cudaHostAllocPortable));
            HS_CUDA_CHECK(cudaEventCreateWithFlags(&d->mirror_read[i], cudaEventDisableTiming));
        }
    }
    /* the next mirror of the ring, once the copy that read it last has run (HS_CUDA_MIRRORS regions
     * ago: in practice long done, the trainer downloads its stats every update) */
    d->mirror_cur = (d->mirror_cur + 1) % HS_CUDA_MIRRORS;
    HS_CUDA_CHECK(cudaEventSynchronize(d->mirror_read[d->mirror_cur]));
    d->slots_used = 0;
    d->slots_active = 1;
}

const void *hs_cuda_slots(const hs_backend *be, const void *values, size_t bytes) {
    hs_cuda_device *d = hs_cuda_dev(be);
    if (!d->slots_active) return NULL;
    const size_t n = (bytes + 7) / 8;
    if (d->slots_used + n > HS_CUDA_SLOTS_MAX)
        HS_FATAL("a CUDA graph region needs more per-update scalars than its slot buffer holds: run with "
                 "cuda_graphs = false, or raise HS_CUDA_SLOTS_MAX (src/backend/cuda/cuda_slots.h)",
                 "%zu slots", d->slots_used + n);
    uint64_t *m = (uint64_t *)d->mirror[d->mirror_cur] + d->slots_used;
    if (d->slots_verify) { /* a recorded call played: its slots were written when it was recorded */
        if (d->slots_used + n > d->slots_recorded || memcmp(m, values, bytes) != 0)
            HS_FATAL("internal: a wrapper's slots differ between its record and its play (cuda_slots.h)",
                     "slot %zu", d->slots_used);
    } else {
        m[n - 1] = 0; /* padding bytes defined */
        memcpy(m, values, bytes);
    }
    const void *slot = (const uint64_t *)d->slots_dev + d->slots_used;
    d->slots_used += n;
    return slot;
}

const float *hs_cuda_slot_f32(const hs_backend *be, float v) {
    return (const float *)hs_cuda_slots(be, &v, sizeof v);
}

/* HETSEQ_GRAPH_UNSLOT_DROPOUT=1 (tests only): the dropout kernels take key and first_sample by value
 * even in a graph region, as if they had no slot, so a replayed graph redraws its capture's masks:
 * tests/cuda/test_cuda_graphs.sh checks that the bit comparison with an eager run catches it */
static int unslot_dropout(void) {
    static int on = -1;
    return hs_env_flag("HETSEQ_GRAPH_UNSLOT_DROPOUT", &on);
}

const hs_dropout_slot *hs_cuda_dropout_slot(const hs_backend *be, uint64_t key, int64_t first_sample) {
    const hs_dropout_slot v = {key, first_sample};
    const hs_dropout_slot *slot = (const hs_dropout_slot *)hs_cuda_slots(be, &v, sizeof v);
    return unslot_dropout() ? NULL : slot;
}

void hs_cuda_slots_upload(const hs_backend *be) {
    hs_cuda_device *d = hs_cuda_dev(be);
    if (d->slots_used == 0) return;
    HS_CUDA_CHECK(cudaMemcpyAsync(d->slots_dev, d->mirror[d->mirror_cur], d->slots_used * 8, cudaMemcpyHostToDevice,
                                  d->compute));
    HS_CUDA_COPY_OP("cudaMemcpyAsync host->device (graph slots)", d->slots_used * 8);
    HS_CUDA_CHECK(cudaEventRecord(d->mirror_read[d->mirror_cur], d->compute));
}

size_t hs_cuda_slots_used(const hs_backend *be) { return hs_cuda_dev(be)->slots_used; }

void hs_cuda_slots_end(const hs_backend *be) { hs_cuda_dev(be)->slots_active = 0; }
