/* CUDA graphs of the update's device work: see update_graphs.h. */
#include "train/update_graphs.h"

#include <string.h>

void hs_update_graphs_init(hs_update_graphs *g, const hs_backend *be, int enabled) {
    memset(g, 0, sizeof *g);
    g->be = be;
    g->enabled = enabled && be->graph_begin != NULL;
    g->current = -1;
}

int hs_update_graphs_begin(hs_update_graphs *g, uint64_t key, int eligible) {
    if (!g->enabled || !eligible) return 0;
    const int64_t update = ++g->calls;
    int k = -1;
    for (int i = 0; i < g->n && k < 0; i++)
        if (g->entry[i].key == key) k = i;
    if (k < 0) { /* a new shape: eager this time, remembered for the next */
        if (g->n < HS_UPDATE_GRAPHS_MAX) {
            k = g->n++;
        } else {
            k = 0;
            for (int i = 1; i < g->n; i++)
                if (g->entry[i].used < g->entry[k].used) k = i;
            if (g->entry[k].exec) g->be->graph_destroy(g->be, g->entry[k].exec);
        }
        g->entry[k].key = key;
        g->entry[k].exec = NULL;
        g->entry[k].used = update;
        return 0;
    }
    g->entry[k].used = update;
    g->current = k;
    g->be->graph_begin(g->be);
    return 1;
}

int hs_update_graphs_end(hs_update_graphs *g) {
    if (g->current < 0) return 0;
    const int how = g->be->graph_end_launch(g->be, &g->entry[g->current].exec);
    if (how == 2) g->graphs_replayed++;
    else if (how == 1) g->graphs_reused++;
    else g->graphs_made++;
    g->current = -1;
    return how;
}

void hs_update_graphs_free(hs_update_graphs *g) {
    for (int i = 0; i < g->n; i++)
        if (g->entry[i].exec) g->be->graph_destroy(g->be, g->entry[i].exec);
    g->n = 0;
}
