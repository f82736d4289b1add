/* Device buffers freed during a CUDA graph capture (hs_cuda_free_later, docs/gpu.md "CUDA graphs"): a
 * capture may not wait for the device, and cudaFree does, so the CUDA backend keeps the blocks and
 * frees them after the capture's launch. The list grows: far more frees than its first 64 entries fall
 * inside one capture without stopping the run, none is freed before the launch (the graph's nodes may
 * read them), every one is freed after it, and a second capture reuses the list. Checked through the
 * device-op ledger's live bytes on the emulated device, which refuses a cudaFree during a capture as
 * CUDA does. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"
#include "backend/ledger.h"
#include "expect.h"

#define FREES 1000   /* per capture: well past the list's first 64 entries */
#define BLOCK 256    /* bytes of each block */


/* One capture: FREES blocks allocated before it, freed inside it around a node that writes `keep`. */
static void capture_with_frees(const hs_backend *be, float *keep, void **exec, int round) {
    static void *blocks[FREES];
    for (int i = 0; i < FREES; i++) blocks[i] = be->alloc(be, BLOCK);
    be->synchronize(be);
    be->graph_begin(be); /* the first one allocates the per-update scalars' slots (cuda_slots.c) */
    const uint64_t live = hs_ledger_state.live_bytes;
    be->zero(be, keep, 64 * sizeof(float));
    for (int i = 0; i < FREES; i++) be->free(be, blocks[i]);
    EXPECT(hs_ledger_state.live_bytes == live, "round %d: %llu bytes freed during the capture", round,
           (unsigned long long)(live - hs_ledger_state.live_bytes));
    be->graph_end_launch(be, exec);
    be->synchronize(be);
    EXPECT(hs_ledger_state.live_bytes == live - (uint64_t)FREES * BLOCK,
           "round %d: %llu bytes still live after the launch, %llu expected", round,
           (unsigned long long)hs_ledger_state.live_bytes, (unsigned long long)(live - (uint64_t)FREES * BLOCK));
}

int main(void) {
    const hs_backend *be = cuda_backend_or_skip();
    float *keep = be->alloc(be, 64 * sizeof(float));
    void *exec = NULL;
    for (int round = 1; round <= 2; round++) capture_with_frees(be, keep, &exec, round);
    be->graph_destroy(be, exec);
    be->free(be, keep);
    if (failures) return 1;
    printf("PASS: %d device buffers freed during each of 2 graph captures, all after the launch\n", FREES);
    return 0;
}
