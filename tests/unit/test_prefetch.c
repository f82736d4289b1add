/* The prefetch thread serves requests in the order they were made, calls read_batch for every
 * micro-batch (EMPTY ones too, since the real read is collective), holds at most two requests, and
 * counts the time the trainer waited for data. The task here is a stand-in whose read_batch logs calls
 * and writes a pattern that depends on the range. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "train/prefetch.h"

#define MAX_CALLS 256

typedef struct fake_io {
    int n_calls;
    hs_split split[MAX_CALLS];
    int64_t first[MAX_CALLS];
    int count[MAX_CALLS];
    long delay_ns; /* how long one read takes */
} fake_io;

static void sleep_ns(long ns) {
    struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
    nanosleep(&ts, NULL);
}

static size_t fake_batch_bytes(hs_task *t, int max_count) {
    (void)t;
    return (size_t)max_count * 4;
}

static void fake_read_batch(hs_task *t, hs_split split, int64_t first, int count, void *buf) {
    fake_io *io = t->impl;
    if (io->delay_ns) sleep_ns(io->delay_ns);
    assert_true(io->n_calls < MAX_CALLS);
    io->split[io->n_calls] = split;
    io->first[io->n_calls] = first;
    io->count[io->n_calls] = count;
    io->n_calls++;
    int32_t *v = buf;
    for (int i = 0; i < count; i++) v[i] = (int32_t)(first + i) * 3 + (int32_t)split;
}

static hs_task make_task(fake_io *io) {
    hs_task t;
    memset(&t, 0, sizeof t);
    t.name = "fake";
    t.impl = io;
    t.batch_bytes = fake_batch_bytes;
    t.read_batch = fake_read_batch;
    return t;
}

static void check_slot(const hs_prefetch_slot *s, hs_split split, const hs_range *r, int n) {
    assert_int_equal(s->split, split);
    assert_int_equal(s->n, n);
    for (int i = 0; i < n; i++) {
        assert_int_equal(s->ranges[i].first, r[i].first);
        assert_int_equal(s->ranges[i].count, r[i].count);
        const int32_t *v = s->bufs[i];
        for (int k = 0; k < r[i].count; k++) assert_int_equal(v[k], (int32_t)(r[i].first + k) * 3 + (int32_t)split);
    }
}

static void requests_are_served_in_order_including_empty_micro_batches(void **state) {
    (void)state;
    fake_io io = {0};
    hs_task task = make_task(&io);
    hs_prefetch *pf = hs_prefetch_start(&task, hs_backend_cpu(), 8, 3);
    const hs_range a[3] = {{16, 8}, {0, 0}, {40, 5}}, b[2] = {{0, 0}, {0, 0}}, c[1] = {{8, 8}}, d[3] = {{24, 8}, {32, 8}, {0, 0}};
    /* the trainer's pattern: request the next update before computing on the current one */
    hs_prefetch_request(pf, HS_SPLIT_TRAIN, a, 3);
    hs_prefetch_slot *s = hs_prefetch_wait(pf);
    hs_prefetch_request(pf, HS_SPLIT_TRAIN, b, 2);
    check_slot(s, HS_SPLIT_TRAIN, a, 3);
    hs_prefetch_release(pf, s);
    s = hs_prefetch_wait(pf);
    hs_prefetch_request(pf, HS_SPLIT_VALID, c, 1);
    check_slot(s, HS_SPLIT_TRAIN, b, 2);
    hs_prefetch_release(pf, s);
    s = hs_prefetch_wait(pf);
    hs_prefetch_request(pf, HS_SPLIT_TRAIN, d, 3);
    check_slot(s, HS_SPLIT_VALID, c, 1);
    hs_prefetch_release(pf, s);
    s = hs_prefetch_wait(pf);
    check_slot(s, HS_SPLIT_TRAIN, d, 3);
    hs_prefetch_release(pf, s);
    hs_prefetch_stop(pf);

    /* read_batch saw exactly these nine micro-batches, in this order */
    const hs_range all[9] = {{16, 8}, {0, 0}, {40, 5}, {0, 0}, {0, 0}, {8, 8}, {24, 8}, {32, 8}, {0, 0}};
    const hs_split splits[9] = {0, 0, 0, 0, 0, 1, 0, 0, 0};
    assert_int_equal(io.n_calls, 9);
    for (int i = 0; i < 9; i++) {
        assert_int_equal(io.split[i], splits[i]);
        assert_int_equal(io.count[i], all[i].count);
        if (all[i].count) assert_int_equal(io.first[i], all[i].first);
    }
}

typedef struct third_request {
    hs_prefetch *pf;
    hs_range r;
    volatile int done;
} third_request;

static void *make_third_request(void *arg) {
    third_request *t = arg;
    hs_prefetch_request(t->pf, HS_SPLIT_TRAIN, &t->r, 1);
    __atomic_store_n(&t->done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static void a_third_request_waits_for_a_free_slot(void **state) {
    (void)state;
    fake_io io = {0};
    hs_task task = make_task(&io);
    hs_prefetch *pf = hs_prefetch_start(&task, hs_backend_cpu(), 4, 1);
    const hs_range r0 = {0, 4}, r1 = {4, 4};
    hs_prefetch_request(pf, HS_SPLIT_TRAIN, &r0, 1);
    hs_prefetch_request(pf, HS_SPLIT_TRAIN, &r1, 1);
    hs_prefetch_slot *s0 = hs_prefetch_wait(pf); /* slot 0 held, slot 1 queued or read */
    third_request t = {pf, {8, 4}, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, make_third_request, &t), 0);
    sleep_ns(100 * 1000 * 1000L);
    assert_int_equal(__atomic_load_n(&t.done, __ATOMIC_SEQ_CST), 0); /* both slots busy: still blocked */
    check_slot(s0, HS_SPLIT_TRAIN, &r0, 1);
    hs_prefetch_release(pf, s0); /* frees a slot: the third request goes in */
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(t.done, 1);
    hs_prefetch_slot *s1 = hs_prefetch_wait(pf);
    check_slot(s1, HS_SPLIT_TRAIN, &r1, 1);
    hs_prefetch_release(pf, s1);
    hs_prefetch_slot *s2 = hs_prefetch_wait(pf);
    check_slot(s2, HS_SPLIT_TRAIN, &t.r, 1);
    hs_prefetch_release(pf, s2);
    hs_prefetch_stop(pf);
    assert_int_equal(io.n_calls, 3);
}

static void stall_time_counts_waiting_for_slow_reads_only(void **state) {
    (void)state;
    fake_io io = {0};
    io.delay_ns = 50 * 1000 * 1000L; /* 50 ms per micro-batch */
    hs_task task = make_task(&io);
    hs_prefetch *pf = hs_prefetch_start(&task, hs_backend_cpu(), 4, 2);
    const hs_range r[2] = {{0, 4}, {4, 4}};
    hs_prefetch_request(pf, HS_SPLIT_TRAIN, r, 2); /* 100 ms of reading */
    hs_prefetch_release(pf, hs_prefetch_wait(pf)); /* waits ~100 ms */
    double stalled = hs_prefetch_stall_seconds(pf);
    assert_true(stalled > 0.08 && stalled < 5.0);
    hs_prefetch_request(pf, HS_SPLIT_TRAIN, r, 1);
    sleep_ns(200 * 1000 * 1000L); /* "compute" longer than the read: no stall */
    hs_prefetch_release(pf, hs_prefetch_wait(pf));
    assert_true(hs_prefetch_stall_seconds(pf) - stalled < 0.02);
    hs_prefetch_stop(pf);
}

static void stop_finishes_outstanding_requests(void **state) {
    (void)state;
    fake_io io = {0};
    io.delay_ns = 10 * 1000 * 1000L;
    hs_task task = make_task(&io);
    hs_prefetch *pf = hs_prefetch_start(&task, hs_backend_cpu(), 4, 2);
    const hs_range r[2] = {{0, 4}, {0, 0}};
    hs_prefetch_request(pf, HS_SPLIT_TRAIN, r, 2);
    hs_prefetch_request(pf, HS_SPLIT_VALID, r, 2);
    hs_prefetch_stop(pf); /* every rank must still take part in the queued collective reads */
    assert_int_equal(io.n_calls, 4);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(requests_are_served_in_order_including_empty_micro_batches),
        cmocka_unit_test(a_third_request_waits_for_a_free_slot),
        cmocka_unit_test(stall_time_counts_waiting_for_slow_reads_only),
        cmocka_unit_test(stop_finishes_outstanding_requests),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
