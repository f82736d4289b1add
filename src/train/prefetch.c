/* The prefetch thread (see prefetch.h). Two slots make a ring: the main thread queues requests into
 * them in order and collects them in the same order, the thread fills them in that order. Because the
 * order is FIFO and identical on every rank, the collective reads inside task->read_batch match across
 * ranks. Each read holds the process-wide HDF5 lock (util/h5util.h), so a checkpoint written by the
 * main thread never overlaps it; the main thread's MPI collectives use another communicator
 * (MPI_THREAD_MULTIPLE). */
#include "train/prefetch.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"
#include "util/h5util.h"
#include "util/timer.h"

#define PF_SLOTS 2

typedef enum { SLOT_FREE, SLOT_QUEUED, SLOT_READY, SLOT_HELD } slot_state;

typedef struct pf_slot {
    hs_prefetch_slot pub;
    slot_state state;
} pf_slot;

struct hs_prefetch {
    hs_task *task;
    const hs_backend *be; /* the slots' buffers are its staging memory */
    int max_count, max_per_request;
    size_t buf_bytes;
    pf_slot slots[PF_SLOTS];
    int next_request, next_fill, next_wait; /* ring positions */
    int stopping;
    double stall_seconds;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t changed; /* any slot changed state, or stopping was set */
};

static void lock(hs_prefetch *pf) { HS_CHECK_ERRNO(pthread_mutex_lock(&pf->lock), NULL); }
static void unlock(hs_prefetch *pf) { HS_CHECK_ERRNO(pthread_mutex_unlock(&pf->lock), NULL); }
static void wait_changed(hs_prefetch *pf) { HS_CHECK_ERRNO(pthread_cond_wait(&pf->changed, &pf->lock), NULL); }
static void announce(hs_prefetch *pf) { HS_CHECK_ERRNO(pthread_cond_broadcast(&pf->changed), NULL); }

static void *prefetch_main(void *arg) {
    hs_prefetch *pf = arg;
    for (;;) {
        lock(pf);
        pf_slot *s = &pf->slots[pf->next_fill];
        while (s->state != SLOT_QUEUED && !pf->stopping) wait_changed(pf);
        if (s->state != SLOT_QUEUED) { /* stopping, and every queued request is done */
            unlock(pf);
            return NULL;
        }
        unlock(pf);
        /* Uploads from the previous batch in these buffers may still be in flight on the copy stream. */
        pf->be->event_synchronize(pf->be, s->pub.fence);
        /* Every micro-batch, EMPTY ones too: read_batch is collective over the I/O communicator. */
        for (int i = 0; i < s->pub.n; i++) {
            hs_h5_lock(); /* checkpoint writes on the main thread wait for this read, and vice versa */
            pf->task->read_batch(pf->task, s->pub.split, s->pub.ranges[i].first, s->pub.ranges[i].count,
                                 s->pub.bufs[i]);
            hs_h5_unlock();
        }
        lock(pf);
        s->state = SLOT_READY;
        pf->next_fill = (pf->next_fill + 1) % PF_SLOTS;
        announce(pf);
        unlock(pf);
    }
}

hs_prefetch *hs_prefetch_start(hs_task *task, const hs_backend *be, int max_count, int max_per_request) {
    if (max_count < 1 || max_per_request < 1)
        HS_FATAL(NULL, "prefetch of %d micro-batches of %d samples", max_per_request, max_count);
    hs_prefetch *pf;
    HS_ALLOC(pf, 1);
    pf->task = task;
    pf->be = be;
    pf->max_count = max_count;
    pf->max_per_request = max_per_request;
    pf->buf_bytes = task->batch_bytes(task, max_count);
    for (int k = 0; k < PF_SLOTS; k++) {
        pf_slot *s = &pf->slots[k];
        HS_ALLOC(s->pub.ranges, max_per_request);
        HS_ALLOC(s->pub.bufs, max_per_request);
        for (int i = 0; i < max_per_request; i++) s->pub.bufs[i] = be->host_alloc(be, pf->buf_bytes); /* zero-filled */
        s->pub.index = k;
        s->pub.fence = be->event_create(be);
        s->state = SLOT_FREE;
    }
    HS_CHECK_ERRNO(pthread_mutex_init(&pf->lock, NULL), NULL);
    HS_CHECK_ERRNO(pthread_cond_init(&pf->changed, NULL), NULL);
    hs_check_mpi_thread(+1);
    HS_CHECK_ERRNO(pthread_create(&pf->thread, NULL, prefetch_main, pf), "cannot start the prefetch thread");
    return pf;
}

void hs_prefetch_request(hs_prefetch *pf, hs_split split, const hs_range *ranges, int n) {
    if (n < 0 || n > pf->max_per_request)
        HS_FATAL(NULL, "prefetch request of %d micro-batches (at most %d)", n, pf->max_per_request);
    for (int i = 0; i < n; i++)
        if (ranges[i].count < 0 || ranges[i].count > pf->max_count)
            HS_FATAL(NULL, "micro-batch of %d samples (at most %d)", ranges[i].count, pf->max_count);
    lock(pf);
    if (pf->stopping) HS_FATAL(NULL, "prefetch request after stop");
    pf_slot *s = &pf->slots[pf->next_request];
    /* Both slots busy: the caller holds one and one is in flight (or two are in flight). */
    while (s->state != SLOT_FREE) wait_changed(pf);
    s->pub.split = split;
    s->pub.n = n;
    memcpy(s->pub.ranges, ranges, (size_t)n * sizeof *ranges);
    s->state = SLOT_QUEUED;
    pf->next_request = (pf->next_request + 1) % PF_SLOTS;
    announce(pf);
    unlock(pf);
}

hs_prefetch_slot *hs_prefetch_wait(hs_prefetch *pf) {
    lock(pf);
    pf_slot *s = &pf->slots[pf->next_wait];
    if (s->state == SLOT_FREE || s->state == SLOT_HELD)
        HS_FATAL(NULL, "hs_prefetch_wait without an outstanding request");
    if (s->state != SLOT_READY) {
        double t0 = hs_now(); /* the reads were not hidden behind compute */
        while (s->state != SLOT_READY) wait_changed(pf);
        pf->stall_seconds += hs_now() - t0;
    }
    s->state = SLOT_HELD;
    pf->next_wait = (pf->next_wait + 1) % PF_SLOTS;
    unlock(pf);
    return &s->pub;
}

hs_prefetch_slot *hs_prefetch_try_wait(hs_prefetch *pf) {
    lock(pf);
    pf_slot *s = &pf->slots[pf->next_wait];
    if (s->state != SLOT_READY) {
        unlock(pf);
        return NULL;
    }
    s->state = SLOT_HELD;
    pf->next_wait = (pf->next_wait + 1) % PF_SLOTS;
    unlock(pf);
    return &s->pub;
}

void hs_prefetch_release(hs_prefetch *pf, hs_prefetch_slot *slot) {
    lock(pf);
    pf_slot *s = (pf_slot *)slot; /* pub is the first member */
    if (s < pf->slots || s >= pf->slots + PF_SLOTS || s->state != SLOT_HELD)
        HS_FATAL(NULL, "hs_prefetch_release of a slot that is not held");
    s->state = SLOT_FREE;
    announce(pf);
    unlock(pf);
}

double hs_prefetch_stall_seconds(const hs_prefetch *pf) {
    hs_prefetch *m = (hs_prefetch *)pf; /* the lock is state, not part of the value */
    lock(m);
    double t = m->stall_seconds;
    unlock(m);
    return t;
}

void hs_prefetch_stop(hs_prefetch *pf) {
    if (!pf) return;
    lock(pf);
    pf->stopping = 1;
    announce(pf);
    unlock(pf);
    HS_CHECK_ERRNO(pthread_join(pf->thread, NULL), NULL);
    hs_check_mpi_thread(-1);
    HS_CHECK_ERRNO(pthread_cond_destroy(&pf->changed), NULL);
    HS_CHECK_ERRNO(pthread_mutex_destroy(&pf->lock), NULL);
    for (int k = 0; k < PF_SLOTS; k++) {
        pf->be->event_synchronize(pf->be, pf->slots[k].pub.fence); /* host_free must not race a copy */
        pf->be->event_destroy(pf->be, pf->slots[k].pub.fence);
        for (int i = 0; i < pf->max_per_request; i++) pf->be->host_free(pf->be, pf->slots[k].pub.bufs[i]);
        free(pf->slots[k].pub.bufs);
        free(pf->slots[k].pub.ranges);
    }
    free(pf);
}
