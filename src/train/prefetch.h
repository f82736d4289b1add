/* The prefetch thread: reads input with HDF5 under the process-wide HDF5 lock. The main thread requests the micro-batches of
 * an update (in the same order on every rank, so the collective reads match); the thread reads them
 * into one of two slots while the main thread computes on the other. */
#ifndef HS_TRAIN_PREFETCH_H
#define HS_TRAIN_PREFETCH_H

#include "data/sampler.h"
#include "tasks/task.h"

typedef struct hs_prefetch hs_prefetch;

/* A filled slot: n micro-batches, bufs[i] holds ranges[i] (count 0 = EMPTY, buffer unused). */
typedef struct hs_prefetch_slot {
    hs_split split;
    int n;
    hs_range *ranges;
    void **bufs;
    int index;   /* 0 or 1: which of the two slots (the parity of input sets staged from it) */
    /* be's event (backend.h, input staging): whoever enqueues upload_async from bufs records it on the
     * copy stream after the last one, before hs_prefetch_release; the thread waits for it before it
     * reads into bufs again, so a copy still in flight never sees the next batch. Never recorded:
     * complete (synchronous uploads). */
    void *fence;
} hs_prefetch_slot;

/* max_count: largest micro-batch; max_per_request: most micro-batches in one request (update_freq).
 * The slots' buffers are be's staging memory (page-locked on CUDA), so batches upload from where they
 * were read. */
hs_prefetch *hs_prefetch_start(hs_task *task, const hs_backend *be, int max_count, int max_per_request);
/* Queue a read of n micro-batches (returns at once; at most 2 requests outstanding, blocks if full). */
void hs_prefetch_request(hs_prefetch *pf, hs_split split, const hs_range *ranges, int n);
/* Wait for the oldest outstanding request; the slot stays valid until hs_prefetch_release. */
hs_prefetch_slot *hs_prefetch_wait(hs_prefetch *pf);
/* The oldest outstanding request if it is already read (then held as by hs_prefetch_wait), else NULL
 * (also when nothing is outstanding); never blocks on the reads. */
hs_prefetch_slot *hs_prefetch_try_wait(hs_prefetch *pf);
void hs_prefetch_release(hs_prefetch *pf, hs_prefetch_slot *slot);
/* Seconds the main thread spent blocked in hs_prefetch_wait (I/O not hidden by compute). */
double hs_prefetch_stall_seconds(const hs_prefetch *pf);
/* Finish outstanding requests and join the thread. */
void hs_prefetch_stop(hs_prefetch *pf);

#endif
