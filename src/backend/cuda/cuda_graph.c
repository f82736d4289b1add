/* CUDA graphs of the update's device work (ops.def, "CUDA graphs"; docs/gpu.md, "CUDA graphs"); the
 * trainer decides which parts of an update are regions (src/train/update_graphs.c).
 *
 * graph_begin starts RECORDING (cuda_record.h): until graph_end_launch the ops are kept in a command
 * list and hashed into a signature instead of being enqueued, and their per-update scalars go into
 * device slots (cuda_slots.h). graph_end_launch then
 *   - launches the executable graph kept under that signature, when there is one: the mirror of the
 *     slots is copied to the device first (one cudaMemcpyAsync, outside the graph), so the same graph
 *     computes this update's numbers; no capture, no instantiation ("replayed without a capture");
 *   - else captures the command list: the compute stream in capture mode (relaxed: a grow-only buffer
 *     that grows may cudaMalloc its new block; its old block is freed after the launch,
 *     hs_cuda_free_later; nothing in a capture waits for the device), every recorded call played on
 *     its wrapper, so kernels, cuBLASLt and cuDNN calls, async copies and memsets and the NCCL
 *     all-reduces (the comm stream joins the capture through the compute_done event and leaves it
 *     through comm_done, cuda_nccl.c) become nodes; the seam's own events (input staging) cross the
 *     boundary as external records and waits (cuda_memory.c), so each launch records and waits for
 *     them then. The graph is instantiated (or an old executable graph of the same key updated in
 *     place, cudaGraphExecUpdate) and kept under the signature, up to HS_CUDA_GRAPHS_PER_KEY per key,
 *     the least recently launched one making room; the ledger counts of its capture are kept with it
 *     and counted again at each replay.
 * A graph is kept for replay only when nothing it holds an address of was freed (hs_cuda_free_later:
 * a grow-only buffer that grew during its capture) and the 16-bit copies' bookkeeping did not change
 * during its capture (both are in the signature too); a region that holds an op that must run every
 * update or changes that bookkeeping (cuda_record.h) is captured every update, as one graph per key
 * updated in place. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_record.h"
#include "backend/cuda/cuda_slots.h"
#include "util/check.h"
#include "util/env_flag.h"

#define HS_CUDA_GRAPHS_PER_KEY 4

/* HETSEQ_GRAPH_TRACE=1: one line per region on stderr (its signature, replayed or captured, and the op
 * that keeps it from being replayed) */
static int tracing(void) {
    static int on = -1;
    return hs_env_flag("HETSEQ_GRAPH_TRACE", &on);
}

typedef struct graph_entry {
    uint64_t signature;
    cudaGraphExec_t exec;
    int64_t used;     /* the launch that used it last (LRU) */
    int replayable;   /* 0: captured while a block it holds was freed or the bookkeeping changed */
    hs_ledger_tape tape; /* the ledger counts of its capture */
    hs_cuda_twins_state *twins; /* the activations' twins after its capture: set again at each replay */
} graph_entry;

/* What *exec of graph_end_launch points to: one key's executable graphs */
typedef struct graph_set {
    graph_entry e[HS_CUDA_GRAPHS_PER_KEY];
    int n;
    int64_t clock;
    cudaGraphExec_t always; /* the key's graph of regions that are captured every update */
} graph_set;

void hs_cuda_graph_begin(const hs_backend *be) {
    hs_cuda_device *d = hs_cuda_dev(be);
    hs_cuda_slots_begin(be); /* it may wait for a mirror's last copy: before anything is recorded */
    d->capturing = 1;        /* a block freed in the region is freed after the launch */
    hs_cuda_record_begin(be);
}

/* graph into *x: updated in place when the nodes are the same kinds (returns 1), else instantiated */
static int instantiate(cudaGraphExec_t *x, cudaGraph_t graph) {
    if (*x) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(*x, graph, &info) == cudaSuccess) return 1;
        (void)cudaGetLastError(); /* other nodes: a new executable graph (the failed update is not an error) */
        HS_CUDA_CHECK(cudaGraphExecDestroy(*x));
        *x = NULL;
    }
    HS_CUDA_CHECK(cudaGraphInstantiate(x, graph, 0));
    return 0;
}

static void launch(const hs_backend *be, cudaGraphExec_t x) {
    hs_cuda_device *d = hs_cuda_dev(be);
    hs_cuda_slots_upload(be); /* this update's scalars, read by the graph's kernels */
    HS_CUDA_CHECK(cudaGraphLaunch(x, d->compute));
    /* blocks freed in the region: the graph's nodes may read them, so only now (cudaFree waits for the
     * device: a growing buffer costs that update its overlap, once) */
    hs_cuda_free_deferred(be);
}

int hs_cuda_graph_end_launch(const hs_backend *be, void **exec) {
    hs_cuda_device *d = hs_cuda_dev(be);
    graph_set *set = (graph_set *)*exec;
    if (!set) *exec = set = hs_xcalloc(1, sizeof *set, __FILE__, __LINE__);
    const uint64_t signature = hs_cuda_record_end(be);
    const int replayable = hs_cuda_record_blocked(be) == NULL;
    set->clock++;
    if (replayable)
        for (int i = 0; i < set->n; i++)
            if (set->e[i].replayable && set->e[i].signature == signature) {
                graph_entry *e = &set->e[i];
                e->used = set->clock;
                hs_cuda_slots_end(be);
                d->capturing = 0;
                hs_ledger_tape_replay(&e->tape);
                hs_cuda_twins_restore(e->twins); /* the binds and unbinds its capture made */
                if (tracing()) fprintf(stderr, "| graph %016llx: replayed\n", (unsigned long long)signature);
                launch(be, e->exec);
                return 2;
            }
    /* capture the command list */
    const uint64_t epoch = hs_cuda_memory_epoch(), generation = hs_cuda_state_generation();
    hs_ledger_tape tape = {0};
    if (replayable) hs_ledger_tape_start(&tape);
    HS_CUDA_CHECK(cudaStreamBeginCapture(d->compute, cudaStreamCaptureModeRelaxed));
    hs_cuda_record_play(be);
    cudaGraph_t graph = NULL;
    HS_CUDA_CHECK(cudaStreamEndCapture(d->compute, &graph));
    if (replayable) hs_ledger_tape_stop();
    hs_cuda_slots_end(be);
    d->capturing = 0;
    int reused;
    cudaGraphExec_t x;
    if (!replayable) {
        reused = instantiate(&set->always, graph);
        x = set->always;
    } else {
        /* the entry: a free one, else the least recently launched (its executable graph updated in place) */
        int k = 0;
        if (set->n < HS_CUDA_GRAPHS_PER_KEY)
            k = set->n++;
        else
            for (int i = 1; i < set->n; i++)
                if (set->e[i].used < set->e[k].used) k = i;
        graph_entry *e = &set->e[k];
        hs_ledger_tape_free(&e->tape);
        free(e->twins);
        e->twins = hs_cuda_twins_save();
        reused = instantiate(&e->exec, graph);
        e->signature = signature;
        e->used = set->clock;
        e->tape = tape;
        e->replayable = epoch == hs_cuda_memory_epoch() && generation == hs_cuda_state_generation();
        x = e->exec;
    }
    HS_CUDA_CHECK(cudaGraphDestroy(graph));
    if (tracing())
        fprintf(stderr, "| graph %016llx: captured, %s%s%s\n", (unsigned long long)signature,
                reused ? "updated in place" : "instantiated", replayable ? "" : "; never replayed: it holds ",
                replayable ? "" : hs_cuda_record_blocked(be));
    launch(be, x);
    return reused;
}

void hs_cuda_graph_destroy(const hs_backend *be, void *exec) {
    (void)be;
    graph_set *set = (graph_set *)exec;
    if (!set) return;
    for (int i = 0; i < set->n; i++) {
        if (set->e[i].exec) HS_CUDA_CHECK(cudaGraphExecDestroy(set->e[i].exec));
        hs_ledger_tape_free(&set->e[i].tape);
        free(set->e[i].twins);
    }
    if (set->always) HS_CUDA_CHECK(cudaGraphExecDestroy(set->always));
    free(set);
}
