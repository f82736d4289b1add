/* CUDA graphs of the update's device work (cuda_graphs = true; docs/gpu.md, "CUDA graphs"): which
 * updates are captured, one executable graph per micro-batch shape. */
#ifndef HS_TRAIN_UPDATE_GRAPHS_H
#define HS_TRAIN_UPDATE_GRAPHS_H

#include <stdint.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HS_UPDATE_GRAPHS_MAX 8 /* shapes kept; the least recently used one makes room */

typedef struct hs_update_graphs {
    const hs_backend *be;
    int enabled; /* cuda_graphs = true on a backend with graphs */
    struct {
        uint64_t key;  /* the shape: staging parity, micro-batch count and sizes */
        void *exec;    /* its executable graphs (the backend's, by signature), NULL until its second update */
        int64_t used;  /* the update that used it last */
    } entry[HS_UPDATE_GRAPHS_MAX];
    int n;
    int current; /* the entry being captured, or -1 */
    int64_t calls;                    /* hs_update_graphs_begin calls (the recency clock) */
    /* launches that instantiated a graph / updated one in place (both captured) / replayed a graph
     * without a capture */
    int64_t graphs_made, graphs_reused, graphs_replayed;
} hs_update_graphs;

void hs_update_graphs_init(hs_update_graphs *g, const hs_backend *be, int enabled);
/* At the start of a part of an update's device work. `key` names the part and its shape: seen for the
 * first time, the part runs eagerly (its grow-only buffers allocate then); from its second time on it is
 * a graph region (recorded, then replayed or captured): returns 1, and hs_update_graphs_end must follow
 * before anything waits for the device.
 * `eligible` = 0 runs eagerly. */
int hs_update_graphs_begin(hs_update_graphs *g, uint64_t key, int eligible);
/* Ends the region and launches it (after hs_update_graphs_begin returned 1): a graph of the same op
 * sequence replayed, else the region captured (ops.def, graph_end_launch). */
/* Returns 2 when the launch replayed a graph without a capture, else 0 (instantiated) or 1 (updated). */
int hs_update_graphs_end(hs_update_graphs *g);
void hs_update_graphs_free(hs_update_graphs *g);

#ifdef __cplusplus
}
#endif
#endif
