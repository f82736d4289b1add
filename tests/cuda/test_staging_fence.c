/* A staging buffer is not refilled while an upload from it is still in flight. The trainer uploads a
 * held slot's batch on the copy stream (upload_async), records the slot's fence after it and releases
 * the slot at once; the prefetch thread then reads the batch after next into the same buffers. On the
 * emulated device nothing runs until the host synchronises, so the copy runs as late as CUDA allows: if
 * the thread did not wait for the fence before it overwrote the buffer, the device would receive the
 * newer batch and the check below fails. Also: hs_prefetch_try_wait returns a read request without
 * blocking and NULL when nothing is read. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "train/prefetch.h"
#include "expect.h"

#define COUNT 64


static size_t fake_batch_bytes(hs_task *t, int max_count) {
    (void)t;
    return (size_t)max_count * sizeof(int32_t);
}

/* Sample i of batch `first`: first·1000 + i. */
static void fake_read_batch(hs_task *t, hs_split split, int64_t first, int count, void *buf) {
    (void)t;
    (void)split;
    int32_t *v = buf;
    for (int i = 0; i < count; i++) v[i] = (int32_t)(first * 1000 + i);
}

static int holds_batch(const int32_t *v, int64_t first) {
    for (int i = 0; i < COUNT; i++)
        if (v[i] != (int32_t)(first * 1000 + i)) return 0;
    return 1;
}

int main(void) {
    const hs_backend *be = cuda_backend_or_skip();
    hs_task task;
    memset(&task, 0, sizeof task);
    task.name = "fake";
    task.batch_bytes = fake_batch_bytes;
    task.read_batch = fake_read_batch;
    hs_prefetch *pf = hs_prefetch_start(&task, be, COUNT, 1);
    int32_t *dev = be->alloc(be, COUNT * sizeof(int32_t));
    /* alloc zero-fills on the compute stream: the copy stream waits for it, as the input sets do */
    void *zeroed = be->event_create(be);
    be->event_record(be, zeroed, HS_STREAM_COMPUTE);
    be->stream_wait(be, HS_STREAM_COPY, zeroed);

    hs_range r[3] = {{.first = 1, .count = COUNT}, {.first = 2, .count = COUNT}, {.first = 3, .count = COUNT}};
    hs_prefetch_request(pf, HS_SPLIT_TRAIN, &r[0], 1);
    hs_prefetch_request(pf, HS_SPLIT_TRAIN, &r[1], 1);
    hs_prefetch_slot *s0 = hs_prefetch_wait(pf);
    EXPECT(holds_batch(s0->bufs[0], 1), "the first slot does not hold batch 1");
    /* Upload batch 1 asynchronously, fence the slot, let the compute stream wait for it, release. */
    be->upload_async(be, dev, s0->bufs[0], COUNT * sizeof(int32_t));
    be->event_record(be, s0->fence, HS_STREAM_COPY);
    be->stream_wait(be, HS_STREAM_COMPUTE, s0->fence);
    const int parity0 = s0->index;
    hs_prefetch_release(pf, s0);
    /* Batch 3 goes into the released slot's buffers, while the copy of batch 1 has not run. */
    hs_prefetch_request(pf, HS_SPLIT_TRAIN, &r[2], 1);
    hs_prefetch_slot *s1 = hs_prefetch_wait(pf);
    EXPECT(holds_batch(s1->bufs[0], 2), "the second slot does not hold batch 2");
    hs_prefetch_release(pf, s1);
    hs_prefetch_slot *s2 = NULL;
    for (int spins = 0; !s2 && spins < 200000; spins++) { /* try_wait never blocks: poll until read */
        s2 = hs_prefetch_try_wait(pf);
        if (!s2) nanosleep(&(struct timespec){0, 100000}, NULL);
    }
    EXPECT(s2 != NULL, "hs_prefetch_try_wait never returned the read request");
    if (s2) {
        EXPECT(s2->index == parity0, "batch 3 is not in the first slot's buffers (slot %d)", s2->index);
        EXPECT(holds_batch(s2->bufs[0], 3), "the first slot was not refilled with batch 3");
        hs_prefetch_release(pf, s2);
    }
    EXPECT(hs_prefetch_try_wait(pf) == NULL, "hs_prefetch_try_wait without a request returned a slot");

    int32_t got[COUNT];
    be->download(be, got, dev, sizeof got);
    EXPECT(holds_batch(got, 1),
           "the device received %d... instead of batch 1 (1000...): the staging buffer was overwritten before its "
           "upload ran",
           (int)got[0]);
    hs_prefetch_stop(pf);
    be->free(be, dev);
    be->event_destroy(be, zeroed);
    if (failures) return 1;
    printf("ok: a staging buffer is refilled only after its in-flight upload ran\n");
    return 0;
}
