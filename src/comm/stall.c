/* The stall inspector (see stall.h). The main thread publishes (phase, update, waiting, since, seq) with
 * relaxed atomics, one store each per phase change; the inspector thread polls them every 50 ms and
 * answers its peers' questions over its own communicator (point-to-point only: no collective there
 * could ever match a collective of another thread). `seq` counts the waiting phases entered; every
 * rank enters the same waiting phases in the same order, so a peer has arrived where this rank waits
 * when it is waiting with a seq at least as large. */
#include "comm/stall.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/check.h"
#include "util/timer.h"

enum { TAG_QUERY = 1, TAG_REPLY = 2 };
#define ANSWER_SECONDS 3.0   /* a peer that does not answer within this is reported as hung or dead */
#define DEFER_SECONDS 5.0    /* a rank that is not the reporter waits this long for the reporter's abort */
#define POLL_USEC 50000

/* What a rank says about itself: [phase, update, waiting, seconds in phase, seq]. */
#define REPLY_LEN 5

static struct {
    atomic_int phase, waiting, stop;
    atomic_llong update, seq, since_us;
    MPI_Comm comm;
    int rank, size, running;
    double timeout;
    pthread_t thread;
} g;

static const char *const phase_names[HS_PHASE_COUNT] = {
    "start-up",         "waiting for input", "forward/backward", "gradient all-reduce", "statistics all-reduce",
    "optimizer step",   "validation",        "checkpoint write", "replica check",       "end of training"};

const char *hs_phase_name(hs_phase phase) {
    return phase >= 0 && phase < HS_PHASE_COUNT ? phase_names[phase] : "unknown phase";
}

void hs_stall_phase(hs_phase phase, int64_t update, int waiting) {
    atomic_store_explicit(&g.phase, (int)phase, memory_order_relaxed);
    atomic_store_explicit(&g.update, (long long)update, memory_order_relaxed);
    atomic_store_explicit(&g.since_us, (long long)(hs_now() * 1e6), memory_order_relaxed);
    if (waiting) atomic_fetch_add_explicit(&g.seq, 1, memory_order_relaxed);
    atomic_store_explicit(&g.waiting, waiting, memory_order_release);
}

static void describe_self(double out[REPLY_LEN]) {
    out[0] = atomic_load(&g.phase);
    out[1] = (double)atomic_load(&g.update);
    out[2] = atomic_load(&g.waiting);
    out[3] = hs_now() - (double)atomic_load(&g.since_us) * 1e-6;
    out[4] = (double)atomic_load(&g.seq);
}

/* Answer every pending "where are you?" with this rank's state. */
static void answer_queries(void) {
    for (;;) {
        int flag = 0;
        MPI_Status st;
        HS_CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, TAG_QUERY, g.comm, &flag, &st), "stall inspector");
        if (!flag) return;
        int dummy;
        HS_CHECK_MPI(MPI_Recv(&dummy, 1, MPI_INT, st.MPI_SOURCE, TAG_QUERY, g.comm, MPI_STATUS_IGNORE),
                     "stall inspector");
        double me[REPLY_LEN];
        describe_self(me);
        /* Buffered by the library for small messages; the asker is polling for it. */
        HS_CHECK_MPI(MPI_Send(me, REPLY_LEN, MPI_DOUBLE, st.MPI_SOURCE, TAG_REPLY, g.comm), "stall inspector");
    }
}

static void sleep_answering(double seconds) {
    double t0 = hs_now();
    while (hs_now() - t0 < seconds && !atomic_load(&g.stop)) {
        answer_queries();
        usleep(POLL_USEC);
    }
}

/* Ask every peer where it is; report and end the job if some have not arrived. Returns if every peer
 * has arrived or a missing one is writing a checkpoint (then the wait is legitimate). */
static void inspect(double waited) {
    double replies[REPLY_LEN * 1024];
    int cap = (int)(sizeof replies / sizeof replies[0]) / REPLY_LEN;
    int n = g.size < cap ? g.size : cap;
    char answered[1024];
    memset(answered, 0, sizeof answered);
    MPI_Request reqs[1024];
    int query = 0;
    for (int r = 0; r < n; r++) {
        reqs[r] = MPI_REQUEST_NULL;
        if (r != g.rank) HS_CHECK_MPI(MPI_Isend(&query, 1, MPI_INT, r, TAG_QUERY, g.comm, &reqs[r]), "stall inspector");
    }
    describe_self(&replies[g.rank * REPLY_LEN]);
    answered[g.rank] = 1;
    int missing = n - 1;
    double t0 = hs_now();
    while (missing > 0 && hs_now() - t0 < ANSWER_SECONDS) {
        answer_queries();
        int flag = 0;
        MPI_Status st;
        HS_CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, TAG_REPLY, g.comm, &flag, &st), "stall inspector");
        if (!flag) {
            usleep(10000);
            continue;
        }
        double buf[REPLY_LEN];
        HS_CHECK_MPI(MPI_Recv(buf, REPLY_LEN, MPI_DOUBLE, st.MPI_SOURCE, TAG_REPLY, g.comm, MPI_STATUS_IGNORE),
                     "stall inspector");
        if (st.MPI_SOURCE < n && !answered[st.MPI_SOURCE]) {
            memcpy(&replies[st.MPI_SOURCE * REPLY_LEN], buf, sizeof buf);
            answered[st.MPI_SOURCE] = 1;
            missing--;
        }
    }
    for (int r = 0; r < n; r++)
        if (reqs[r] != MPI_REQUEST_NULL) MPI_Request_free(&reqs[r]); /* a dead peer never takes its query */

    const double *me = &replies[g.rank * REPLY_LEN];
    char absent[2048] = "", present[512] = "";
    size_t la = 0, lp = 0;
    int n_absent = 0, reporter = g.rank, busy_checkpoint = 0;
    for (int r = 0; r < n; r++) {
        const double *p = &replies[r * REPLY_LEN];
        int arrived = answered[r] && p[2] != 0 && p[4] >= me[4];
        if (arrived) {
            if (r < reporter) reporter = r;
            if (lp < sizeof present) lp += (size_t)snprintf(present + lp, sizeof present - lp, "%s%d", lp ? ", " : "", r);
            continue;
        }
        n_absent++;
        if (answered[r] && (int)p[0] == HS_PHASE_CHECKPOINT) busy_checkpoint = 1;
        if (la >= sizeof absent) continue;
        if (answered[r])
            la += (size_t)snprintf(absent + la, sizeof absent - la, "\n    rank %d: in %s of update %lld for %.1f s", r,
                                   hs_phase_name((hs_phase)(int)p[0]), (long long)p[1], p[3]);
        else
            la += (size_t)snprintf(absent + la, sizeof absent - la,
                                   "\n    rank %d: did not answer within %.0f s (its process is hung or dead)", r,
                                   ANSWER_SECONDS);
    }
    if (n_absent == 0 || busy_checkpoint) return; /* everyone is here (a slow collective), or a save runs */
    if (reporter != g.rank) sleep_answering(DEFER_SECONDS); /* the lowest waiting rank reports */
    hs_die_code(HS_EXIT_STALLED,
                "stalled: rank %d has waited %.1f s in %s of update %lld (distributed.stall_timeout = %g s); "
                "ranks waiting with it: %s; ranks that have not arrived:%s\n"
                "  hint: a rank that did not arrive is stuck (a hung file system, a GPU or node fault) or far "
                "slower than the others; raise distributed.stall_timeout if the wait was legitimate",
                g.rank, waited, hs_phase_name((hs_phase)(int)me[0]), (long long)me[1], g.timeout, present, absent);
}

static void *inspector_main(void *arg) {
    (void)arg;
    while (!atomic_load(&g.stop)) {
        answer_queries();
        int waiting = atomic_load_explicit(&g.waiting, memory_order_acquire);
        double waited = hs_now() - (double)atomic_load(&g.since_us) * 1e-6;
        if (waiting && waited > g.timeout) {
            inspect(waited);
            /* Everyone was there (or a save ran): look again only after another full timeout. */
            atomic_store(&g.since_us, (long long)(hs_now() * 1e6));
        }
        usleep(POLL_USEC);
    }
    return NULL;
}

void hs_stall_start(const hs_comm *c, double timeout_seconds) {
    g.rank = c->rank;
    g.size = c->size;
    g.timeout = timeout_seconds;
    atomic_store(&g.stop, 0);
    hs_stall_phase(HS_PHASE_SETUP, 0, 0);
    if (timeout_seconds <= 0 || c->size < 2) return;
    HS_CHECK_MPI(MPI_Comm_dup(c->world, &g.comm), "stall inspector communicator");
    hs_check_mpi_thread(+1);
    HS_CHECK_ERRNO(pthread_create(&g.thread, NULL, inspector_main, NULL), "cannot start the stall inspector");
    g.running = 1;
}

void hs_stall_stop(void) {
    if (!g.running) return;
    atomic_store(&g.stop, 1);
    HS_CHECK_ERRNO(pthread_join(g.thread, NULL), NULL);
    hs_check_mpi_thread(-1);
    g.running = 0;
    /* Every rank stops here at the end of training (a question still in flight is a peer's that had
     * not yet seen the end; MPI delivers or drops it with the communicator). */
    HS_CHECK_MPI(MPI_Comm_free(&g.comm), NULL);
}
