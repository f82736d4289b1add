/* The double-buffered input sets of a task's stage hook (tasks/task.h). Two events order each set:
 *   copy stream:    [wait consumed] upload ... upload [record ready]
 *   compute stream: [wait ready] copy the set into the model's inputs [record consumed] forward ...
 * so an upload never overwrites a set the compute stream has still to read, and no op reads a set before
 * its uploads ran. The host waits for `ready` only before it rewrites a set's host arrays. */
#include <stdlib.h>

#include "tasks/task.h"
#include "util/check.h"

hs_input_set *hs_input_sets_begin(hs_input_sets *s, int parity, int index) {
    if (parity < 0 || parity > 1 || index < 0) HS_FATAL(NULL, "input set [%d][%d]", parity, index);
    const hs_backend *be = s->be;
    if (index >= s->n[parity]) {
        const int n = index + 1;
        hs_input_set *grown = realloc(s->sets[parity], (size_t)n * sizeof *grown);
        if (!grown) HS_FATAL(NULL, "out of memory: %d input sets", n);
        for (int i = s->n[parity]; i < n; i++) {
            grown[i] = (hs_input_set){.ready = be->event_create(be), .consumed = be->event_create(be),
                                      .data = s->create(s->owner)};
            /* be->alloc zero-fills on the compute stream: uploads into the new buffers come after that */
            be->event_record(be, grown[i].consumed, HS_STREAM_COMPUTE);
        }
        s->sets[parity] = grown;
        s->n[parity] = n;
    }
    hs_input_set *set = &s->sets[parity][index];
    be->event_synchronize(be, set->ready);           /* its host arrays were read by the last uploads */
    be->stream_wait(be, HS_STREAM_COPY, set->consumed); /* its device buffers were read by compute ops */
    set->host_buf = NULL;
    return set;
}

void hs_input_sets_end(hs_input_sets *s, hs_input_set *set, const void *host_buf, int count) {
    s->be->event_record(s->be, set->ready, HS_STREAM_COPY);
    set->host_buf = host_buf;
    set->count = count;
}

hs_input_set *hs_input_sets_take(hs_input_sets *s, const void *host_buf, int count) {
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < s->n[p]; i++) {
            hs_input_set *set = &s->sets[p][i];
            if (set->host_buf != host_buf || !host_buf) continue;
            if (set->count != count)
                HS_FATAL(NULL, "micro-batch staged with %d samples is computed with %d", set->count, count);
            set->host_buf = NULL;
            s->be->stream_wait(s->be, HS_STREAM_COMPUTE, set->ready);
            return set;
        }
    return NULL;
}

void hs_input_sets_done(hs_input_sets *s, hs_input_set *set) {
    s->be->event_record(s->be, set->consumed, HS_STREAM_COMPUTE);
}

void hs_input_sets_free(hs_input_sets *s) {
    if (!s->be) return;
    s->be->synchronize(s->be); /* no copy or op may still use a buffer freed here */
    for (int p = 0; p < 2; p++) {
        for (int i = 0; i < s->n[p]; i++) {
            s->destroy(s->owner, s->sets[p][i].data);
            s->be->event_destroy(s->be, s->sets[p][i].ready);
            s->be->event_destroy(s->be, s->sets[p][i].consumed);
        }
        free(s->sets[p]);
        s->sets[p] = NULL;
        s->n[p] = 0;
    }
}
