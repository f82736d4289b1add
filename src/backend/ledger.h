/* The device-operation ledger (docs/gpu.md, "The device-operation ledger"): what a device backend
 * enqueues per update, counted on the host as it is enqueued, without a synchronisation.
 *
 * A row per operation name: a kernel (counted where it is launched, HS_CUDA_LAUNCHED in
 * src/backend/cuda/cuda_check.h), a library call (cublasLtMatmul, cudnnConvolutionForward,
 * ncclAllReduce, ...) or a copy/fill (cudaMemcpyAsync, cudaMemsetAsync). A row holds its calls and the
 * bytes the calls move in device memory (reads + writes, from the operands' shapes; 0 for library
 * calls, whose traffic is the library's). Counting is an increment of a row found once per call site
 * (a static slot), and only while the trainer has counting on (from the start of an update to its end),
 * so set-up, validation and checkpoints stay out of the per-update figures.
 *
 * Peak device memory: every allocation of the backend (the seam's alloc, scratch, library workspaces)
 * is recorded with its size, and the peak of their sum is kept, counting on or off.
 *
 * One ledger per process (one device per rank); plain C, read by the trainer (src/train/meters.c)
 * whatever the backend: it is empty on the CPU. Single-threaded: the ops are enqueued by the main
 * thread (the prefetch thread only waits on events). */
#ifndef HS_BACKEND_LEDGER_H
#define HS_BACKEND_LEDGER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a row counts (the table's `kind` column). */
typedef enum hs_ledger_kind {
    HS_LEDGER_KERNEL = 0,  /* one of hetseq's kernels (kernels/, the .cu files) */
    HS_LEDGER_LIBRARY = 1, /* a call into cuBLASLt, cuDNN or NCCL: one device op, its bytes not counted */
    HS_LEDGER_COPY = 2     /* a copy or fill the runtime does (cudaMemcpyAsync, cudaMemsetAsync) */
} hs_ledger_kind;

/* Bytes unknown: a launch whose call site gives no byte count (HS_CUDA_LAUNCHED(name) without bytes);
 * its row says so in the table, and the ledger tests fail on such a row in a model's update. */
#define HS_LEDGER_UNSIZED UINT64_MAX

#define HS_LEDGER_MAX_ROWS 256

typedef struct hs_ledger_row {
    const char *name;   /* a string literal of the call site */
    int kind;           /* hs_ledger_kind */
    uint64_t calls;
    uint64_t bytes;     /* sum of the sized calls */
    uint64_t unsized;   /* calls that gave no byte count */
} hs_ledger_row;

typedef struct hs_ledger {
    int counting;        /* 1 between hs_ledger_counting(1) and hs_ledger_counting(0) */
    int64_t updates;     /* updates counted (hs_ledger_update_end) */
    int used;            /* the device backend records into it (the CPU leaves it unused) */
    int rows;
    hs_ledger_row row[HS_LEDGER_MAX_ROWS];
    uint64_t ops, bytes; /* sums over the rows */
    uint64_t live_bytes, peak_bytes; /* device memory allocated now, and at most so far */
} hs_ledger;

extern hs_ledger hs_ledger_state;

/* The row of `name` (made on first use; names compare as strings, so call sites that share a name
 * share a row). More than HS_LEDGER_MAX_ROWS names fold into one row "(other)". */
int hs_ledger_slot(const char *name, int kind);

/* The calls counted while a tape is on (hs_ledger_taping): a CUDA graph keeps those of its capture and
 * counts them again at each launch without a capture (src/backend/cuda/cuda_graph.c), so the ledger
 * shows the ops a replayed graph runs. */
typedef struct hs_ledger_tape {
    int *slot;
    uint64_t *bytes;
    size_t n, cap;
} hs_ledger_tape;
extern hs_ledger_tape *hs_ledger_taping;
/* the calling thread's counts go into t (NULL: none); other threads' counts are not taped */
void hs_ledger_tape_start(hs_ledger_tape *t);
void hs_ledger_tape_stop(void);
void hs_ledger_tape_add(hs_ledger_tape *t, int slot, uint64_t bytes);
void hs_ledger_tape_replay(const hs_ledger_tape *t);
void hs_ledger_tape_free(hs_ledger_tape *t);

/* One call of row `slot` moving `bytes` (HS_LEDGER_UNSIZED: unknown); nothing while counting is off. */
static inline void hs_ledger_count(int slot, uint64_t bytes) {
    if (hs_ledger_taping) hs_ledger_tape_add(hs_ledger_taping, slot, bytes);
    if (!hs_ledger_state.counting) return;
    hs_ledger_row *r = &hs_ledger_state.row[slot];
    r->calls++;
    hs_ledger_state.ops++;
    if (bytes == HS_LEDGER_UNSIZED) {
        r->unsized++;
    } else {
        r->bytes += bytes;
        hs_ledger_state.bytes += bytes;
    }
}

/* Count one call of `name` (a string literal) at this call site: the row is looked up once per site. */
#define HS_LEDGER_COUNT(name, kind, bytes)                                        \
    do {                                                                          \
        static int hs_ledger_slot_ = -1;                                          \
        if (hs_ledger_slot_ < 0) hs_ledger_slot_ = hs_ledger_slot((name), (kind)); \
        hs_ledger_count(hs_ledger_slot_, (uint64_t)(bytes));                      \
    } while (0)

/* Counting on or off (tests); the trainer brackets each update with begin (on) and end (off, and one
 * more update counted). */
void hs_ledger_counting(int on);
void hs_ledger_update_begin(void);
void hs_ledger_update_end(void);
/* Device memory: p (bytes) was allocated / is being freed (p NULL: nothing). */
void hs_ledger_alloc(const void *p, size_t bytes);
void hs_ledger_free(const void *p);
/* The elements a device tensor table (hs_tensor_span[]) covers, for the byte counts of the multi-tensor
 * ops, whose host side cannot read the table: recorded by whoever uploads a table (src/nn/params.c),
 * forgotten when its memory is freed. hs_ledger_table_bytes: bytes_per_element times the table's
 * elements plus `extra`, or HS_LEDGER_UNSIZED for a table nobody recorded. */
void hs_ledger_table(const void *table, uint64_t elements);
uint64_t hs_ledger_table_bytes(const void *table, uint64_t bytes_per_element, uint64_t extra);
/* Every row and sum back to zero (the peak too: it restarts at the memory allocated now). */
void hs_ledger_reset(void);
/* The row of `name`, or NULL if no call of it was counted (for tests and the table). */
const hs_ledger_row *hs_ledger_find(const char *name);
/* The per-op table (name, kind, calls, calls per update, bytes, bytes per update), rows by calls,
 * with `updates` the number of updates counted. */
void hs_ledger_print(FILE *out, int64_t updates);
/* The same for the updates since hs_ledger_mark (the counts then taken off; `left_out`, the updates
 * before the mark, named in the heading), or for every update without a mark. The trainer marks after
 * HETSEQ_CUDA_LEDGER_WARMUP updates: a run's first update allocates the workspaces (and zero-fills
 * some) that the later ones reuse. */
void hs_ledger_mark(void);
void hs_ledger_print_since_mark(FILE *out);

#ifdef __cplusplus
}
#endif
#endif
