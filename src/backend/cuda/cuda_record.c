/* Recording a graph region: see cuda_record.h. */
#include "backend/cuda/cuda_record.h"

#include <string.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_ops.h"
#include "util/check.h"
#include "util/hash.h"

static uint64_t state_generation, memory_epoch; /* changed from any thread: atomics */
/* The thread that began the region records; the others (the input prefetch thread: host_alloc,
 * event_synchronize) call the wrappers as always. */
static _Thread_local int recording_thread;

static inline int recording(const hs_backend *be) { return recording_thread && hs_cuda_dev(be)->recording; }

void hs_cuda_state_changed(void) { __atomic_add_fetch(&state_generation, 1, __ATOMIC_RELAXED); }
uint64_t hs_cuda_state_generation(void) { return __atomic_load_n(&state_generation, __ATOMIC_RELAXED); }
void hs_cuda_memory_freed(void) { __atomic_add_fetch(&memory_epoch, 1, __ATOMIC_RELAXED); }
uint64_t hs_cuda_memory_epoch(void) { return __atomic_load_n(&memory_epoch, __ATOMIC_RELAXED); }

/* A command: its play function and argument bytes, then the arguments (16-byte aligned) */
typedef struct command {
    void (*play)(const void *args);
    size_t bytes;
} command;
#define ALIGN16(n) (((n) + 15) & ~(size_t)15)

static void hash(hs_cuda_device *d, const void *p, size_t n) { d->rec_hash = hs_fnv1a64(d->rec_hash, p, n); }

void hs_cuda_record_begin(const hs_backend *be) {
    hs_cuda_device *d = hs_cuda_dev(be);
    d->recording = 1;
    recording_thread = 1;
    d->rec_used = 0;
    d->rec_blocked = NULL;
    d->rec_hash = HS_FNV64_OFFSET;
    /* the backend's own blocks the wrappers will use (grow-only: a graph that used a smaller one at the
     * same address stays within it) and the 16-bit copies' bookkeeping: the parameter copies' changes
     * counted, the activations' twins as they are (the region's binds and unbinds start from them) */
    const uint64_t state[3] = {(uint64_t)(uintptr_t)d->scratch, (uint64_t)(uintptr_t)d->gemm_half,
                               hs_cuda_state_generation()};
    hash(d, state, sizeof state);
    d->rec_hash = hs_cuda_twins_hash(d->rec_hash);
}

uint64_t hs_cuda_record_end(const hs_backend *be) {
    hs_cuda_device *d = hs_cuda_dev(be);
    d->recording = 0;
    recording_thread = 0;
    d->slots_recorded = d->slots_used;
    hash(d, &d->slots_used, sizeof d->slots_used);
    return d->rec_hash;
}

const char *hs_cuda_record_blocked(const hs_backend *be) { return hs_cuda_dev(be)->rec_blocked; }

void hs_cuda_record_blocks(const hs_backend *be, const char *op) {
    hs_cuda_device *d = hs_cuda_dev(be);
    if (!d->rec_blocked) d->rec_blocked = op;
}

void hs_cuda_record(const hs_backend *be, const char *op, void (*play)(const void *), const void *args,
                    const void *hashed, size_t bytes, int blocks_replay) {
    hs_cuda_device *d = hs_cuda_dev(be);
    hash(d, op, strlen(op) + 1);
    hash(d, hashed, bytes);
    const size_t need = ALIGN16(sizeof(command)) + ALIGN16(bytes);
    if (d->rec_used + need > d->rec_cap) {
        d->rec_cap = d->rec_cap * 2 > d->rec_used + need ? d->rec_cap * 2 : d->rec_used + need + 65536;
        HS_REALLOC(d->rec_buf, d->rec_cap);
    }
    command c = {play, bytes};
    memcpy(d->rec_buf + d->rec_used, &c, sizeof c);
    memcpy(d->rec_buf + d->rec_used + ALIGN16(sizeof(command)), args, bytes);
    d->rec_used += need;
    if (blocks_replay) hs_cuda_record_blocks(be, op);
}

void hs_cuda_record_now(const hs_backend *be, const char *op, const void *args, size_t bytes, int blocks_replay) {
    hs_cuda_device *d = hs_cuda_dev(be);
    hash(d, op, strlen(op) + 1);
    hash(d, args, bytes);
    if (blocks_replay) hs_cuda_record_blocks(be, op);
}

void hs_cuda_record_hash(const hs_backend *be, const void *p, size_t n) { hash(hs_cuda_dev(be), p, n); }

void hs_cuda_record_refuse(const hs_backend *be, const char *op) {
    (void)be;
    HS_FATAL("internal: nothing between graph_begin and graph_end_launch may wait for the device (ops.def, "
             "\"CUDA graphs\")",
             "%s inside a CUDA graph region", op);
}

void hs_cuda_record_slots_begin(const hs_backend *be) { hs_cuda_dev(be)->slots_only = 1; }
void hs_cuda_record_slots_end(const hs_backend *be) { hs_cuda_dev(be)->slots_only = 0; }

void hs_cuda_record_play(const hs_backend *be) {
    hs_cuda_device *d = hs_cuda_dev(be);
    d->slots_used = 0; /* the played wrappers take the recorded slots again, in the same order */
    d->slots_verify = 1;
    for (size_t at = 0; at < d->rec_used;) {
        command c;
        memcpy(&c, d->rec_buf + at, sizeof c);
        c.play(d->rec_buf + at + ALIGN16(sizeof(command)));
        at += ALIGN16(sizeof(command)) + ALIGN16(c.bytes);
    }
    d->slots_verify = 0;
    if (d->slots_used != d->slots_recorded)
        HS_FATAL("internal: a wrapper's slots differ between its record and its play (cuda_slots.h)",
                 "%zu slots recorded, %zu played", d->slots_recorded, d->slots_used);
}

/* the entries: hs_cuda_rec_<op> for every op of ops.def */
#include "hs_cuda_record_ops.h"
