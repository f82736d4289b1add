/* Which ranks hold which memory and which GPU (gpu_census.h). One MPI_Allgather of a fixed-size record
 * per rank: its memory kind, its host name (MPI_Get_processor_name) and the PCI bus id of its GPU. Two
 * GPU ranks share a GPU when both strings are equal: a bus id names a GPU only within its node, and on
 * one node two ranks that picked the same device (more ranks than GPUs: local_rank % GPUs) see the
 * same id. */
#include "comm/gpu_census.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"

typedef struct census_entry {
    int gpu;                        /* 1: this rank's device memory is not host memory */
    char host[MPI_MAX_PROCESSOR_NAME];
    char bus[sizeof(((hs_backend *)0)->pci_bus_id)];
} census_entry;

/* "0, 1, 2" of the ranks in `list` (n of them), cut with "..." when it does not fit */
static void rank_list(char *out, size_t len, const int *list, int n) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n && used + 16 < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%s%d", i ? ", " : "", list[i]);
    if (used + 16 >= len) snprintf(out + len - 5, 5, "...");
}

hs_gpu_census hs_gpu_census_take(const hs_comm *c, const hs_backend *be) {
    hs_gpu_census out = {0, 0, 0};
    census_entry mine;
    memset(&mine, 0, sizeof mine);
    mine.gpu = be->memory_is_host ? 0 : 1;
    int len = 0;
    HS_CHECK_MPI(MPI_Get_processor_name(mine.host, &len), "MPI_Get_processor_name failed");
    snprintf(mine.bus, sizeof mine.bus, "%s", be->pci_bus_id);
    census_entry *all;
    HS_ALLOC(all, c->size);
    HS_CHECK_MPI(MPI_Allgather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, c->world),
                 "gathering every rank's device failed; a rank may have died (see its message above)");
    int *group, *seen;
    HS_ALLOC(group, c->size);
    HS_ALLOC(seen, c->size);
    for (int r = 0; r < c->size; r++) {
        if (all[r].gpu) out.gpu_ranks++;
        if (!all[r].gpu || seen[r]) continue;
        /* the ranks after r on r's GPU */
        int n = 0;
        group[n++] = r;
        for (int q = r + 1; q < c->size; q++)
            if (all[q].gpu && !seen[q] && strcmp(all[q].host, all[r].host) == 0 && strcmp(all[q].bus, all[r].bus) == 0) {
                group[n++] = q;
                seen[q] = 1;
            }
        if (n < 2) continue;
        out.shared_gpus++;
        out.sharing_ranks += n;
        if (c->rank == 0) {
            char ranks[256];
            rank_list(ranks, sizeof ranks, group, n);
            hs_log("| ranks %s share one GPU (PCI %s on %s)", ranks, all[r].bus, all[r].host);
        }
    }
    free(seen);
    free(group);
    free(all);
    return out;
}
