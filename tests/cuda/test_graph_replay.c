/* CUDA graph regions replayed without a capture (src/backend/cuda/cuda_record.c, cuda_graph.c,
 * cuda_slots.c; docs/gpu.md "CUDA graphs") on the emulated device. A region of a dropout (its key and
 * first sample change every round: per-update scalars, in slots) and a loss backward (its scale changes
 * every round) is recorded each round: the first round captures it, the next ones launch the same
 * executable graph without a capture, and every round's outputs are the bits of the same ops run
 * eagerly. A non-slotted argument that changes (the dropout probability) gives another signature: a
 * capture; back to the first one, its graph is replayed again (kept by signature). A region that frees
 * a block is captured every time. A replayed region counts the same device ops in the ledger as a
 * captured one. A bf16 region that binds a 16-bit twin (bind_half) and leaves it bound is replayed, and
 * after the replay the binding is there as after its capture (cuda_twins.c: kept with the graph, set
 * again at the replay, which runs no wrapper): an eager product then reads the twin, converting
 * nothing; with another binding at the region's start (in its signature) it is captured again. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/ledger.h"
#include "expect.h"

#define ROWS 6
#define COLS 40
#define N (ROWS * COLS)


typedef struct bufs {
    float *x, *y, *logprobs, *dlogits;
    int32_t *labels;
} bufs;

/* the region's ops: y = dropout(x) [ROWS, COLS]; dlogits = scale·(softmax - onehot) from logprobs */
static void ops(const hs_backend *be, const bufs *b, float p, int round) {
    be->dropout_forward(be, b->y, b->x, ROWS, COLS, 1, p, 0x1234ull + (uint64_t)round * 77, 3 * round);
    be->log_softmax_nll_backward(be, b->dlogits, b->logprobs, NULL, NULL, b->labels, ROWS, COLS,
                                 1.0f / (float)(round + 1), NULL);
}

/* the outputs, downloaded */
static void outputs(const hs_backend *be, const bufs *b, float *y, float *d) {
    be->download(be, y, b->y, N * sizeof(float));
    be->download(be, d, b->dlogits, N * sizeof(float));
}

/* one round as a region: returns graph_end_launch's answer (0 instantiated, 1 updated, 2 replayed) and
 * checks the outputs against the same ops run eagerly */
static int region(const hs_backend *be, const bufs *b, void **exec, float p, int round, int with_free) {
    static float ye[N], de[N], yg[N], dg[N];
    ops(be, b, p, round);
    outputs(be, b, ye, de);
    be->zero(be, b->y, N * sizeof(float));
    be->zero(be, b->dlogits, N * sizeof(float));
    void *block = with_free ? be->alloc(be, 256) : NULL;
    be->graph_begin(be);
    ops(be, b, p, round);
    if (block) be->free(be, block);
    const int how = be->graph_end_launch(be, exec);
    outputs(be, b, yg, dg);
    EXPECT(memcmp(ye, yg, sizeof ye) == 0, "round %d (p %g): the graph's dropout differs from the eager one", round,
           (double)p);
    EXPECT(memcmp(de, dg, sizeof de) == 0, "round %d (p %g): the graph's loss gradient differs from the eager one",
           round, (double)p);
    return how;
}

int main(void) {
    const hs_backend *be = cuda_backend_or_skip();
    bufs b;
    b.x = be->alloc(be, N * sizeof(float));
    b.y = be->alloc(be, N * sizeof(float));
    b.logprobs = be->alloc(be, N * sizeof(float));
    b.dlogits = be->alloc(be, N * sizeof(float));
    b.labels = be->alloc(be, ROWS * sizeof(int32_t));
    static float host[N];
    int32_t labels[ROWS];
    for (int i = 0; i < N; i++) host[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
    be->upload(be, b.x, host, sizeof host);
    for (int r = 0; r < ROWS; r++) { /* log-probabilities of a row: x - log Σ e^x */
        double s = 0.0;
        for (int c = 0; c < COLS; c++) s += exp(host[r * COLS + c]);
        for (int c = 0; c < COLS; c++) host[r * COLS + c] -= (float)log(s);
        labels[r] = (r * 7) % COLS;
    }
    be->upload(be, b.logprobs, host, sizeof host);
    be->upload(be, b.labels, labels, sizeof labels);

    void *exec = NULL;
    int how = region(be, &b, &exec, 0.5f, 0, 0);
    EXPECT(how == 0, "the first region was not instantiated (%d)", how);
    for (int round = 1; round <= 4; round++) {
        how = region(be, &b, &exec, 0.5f, round, 0);
        EXPECT(how == 2, "round %d was not replayed without a capture (%d)", round, how);
    }
    how = region(be, &b, &exec, 0.25f, 5, 0);
    EXPECT(how != 2, "another dropout probability was replayed (%d)", how);
    how = region(be, &b, &exec, 0.5f, 6, 0);
    EXPECT(how == 2, "the first signature's graph was not replayed again (%d)", how);
    for (int round = 7; round <= 8; round++) {
        how = region(be, &b, &exec, 0.5f, round, 1);
        EXPECT(how != 2, "round %d: a region that frees a block was replayed (%d)", round, how);
    }

    /* the ledger: a replayed region counts the ops a captured one ran */
    void *exec2 = NULL;
    uint64_t ops_of[3];
    for (int k = 0; k < 3; k++) {
        hs_ledger_reset();
        hs_ledger_counting(1);
        be->graph_begin(be);
        ops(be, &b, 0.5f, 10 + k);
        how = be->graph_end_launch(be, &exec2);
        hs_ledger_counting(0);
        ops_of[k] = hs_ledger_state.ops;
        EXPECT((k == 0) == (how != 2), "ledger region %d: %d", k, how);
    }
    EXPECT(ops_of[1] == ops_of[0] && ops_of[2] == ops_of[0],
           "the ledger counts %llu ops for a captured region, %llu and %llu for replayed ones",
           (unsigned long long)ops_of[0], (unsigned long long)ops_of[1], (unsigned long long)ops_of[2]);
    /* the twins: a region round r of x16 = round(x), bind x to x16, c = x·wᵀ (reads the twin), left
     * bound; then eagerly c = x·wᵀ again (no conversion of x when the binding is there, one otherwise) */
    const hs_backend *bf = hs_backend_with_precision(be, "bf16");
    uint16_t *x16 = bf->alloc(bf, N * sizeof(uint16_t));
    float *w = bf->alloc(bf, COLS * COLS * sizeof(float)), *c = bf->alloc(bf, ROWS * COLS * sizeof(float));
    bf->copy(bf, w, b.logprobs, COLS * COLS * sizeof(float) < N * sizeof(float) ? COLS * COLS * sizeof(float)
                                                                                 : N * sizeof(float));
    bf->zero(bf, w, 4); /* (w is no parameter arena: converted by every product, counted the same each time) */
    /* eagerly first, as a key's first update runs: the GEMM's 16-bit operand buffer grows then, not in
     * a capture (its address is in the signature) */
    bf->gemm(bf, 0, 1, ROWS, COLS, COLS, 1.0f, b.x, COLS, w, COLS, 0.0f, c, COLS);
    void *exec3 = NULL;
    int twin_hows[4];
    size_t eager_conversions[4];
    for (int round = 0; round < 4; round++) {
        if (round == 3) bf->bind_half(bf, b.y, x16, 8); /* another registry at the start: another signature */
        bf->graph_begin(bf);
        bf->to_half(bf, x16, b.x, N);
        bf->bind_half(bf, b.x, x16, N);
        bf->gemm(bf, 0, 1, ROWS, COLS, COLS, 1.0f, b.x, COLS, w, COLS, 0.0f, c, COLS);
        twin_hows[round] = bf->graph_end_launch(bf, &exec3);
        const size_t before = hs_cuda_gemm_conversions();
        bf->gemm(bf, 0, 1, ROWS, COLS, COLS, 1.0f, b.x, COLS, w, COLS, 0.0f, c, COLS);
        eager_conversions[round] = hs_cuda_gemm_conversions() - before;
        bf->unbind_half(bf, b.x);
        bf->unbind_half(bf, b.y);
    }
    EXPECT(twin_hows[0] == 0 && twin_hows[1] == 2 && twin_hows[2] == 2 && twin_hows[3] != 2,
           "a region binding a twin: %d %d %d %d (0 instantiated, 2 replayed; the last starts from another binding)",
           twin_hows[0], twin_hows[1], twin_hows[2], twin_hows[3]);
    for (int round = 0; round < 4; round++)
        EXPECT(eager_conversions[round] == 1,
               "round %d: the product after the region converted %zu operands (1: the weight; x's twin bound)", round,
               eager_conversions[round]);

    be->synchronize(be);
    be->graph_destroy(be, exec);
    be->graph_destroy(be, exec2);
    bf->graph_destroy(bf, exec3);
    if (failures) return 1;
    printf("PASS: a region replayed without a capture 5 times and again after another signature, the eager "
           "bits every round; a region that frees a block captured every round; the ledger counts %llu ops "
           "for a captured and for a replayed region; a region binding a twin replayed, its binding there after "
           "the replay\n",
           (unsigned long long)ops_of[0]);
    return 0;
}
