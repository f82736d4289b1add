/* The 16-bit copies of the parameter arenas (the seam's register_params; docs/gpu.md, "Mixed
 * precision"). Under bf16/fp16 every product reads its operands in 16 bits. Without a copy, each GEMM
 * would convert its weight operand on every call (forward and backward, every micro-batch): the
 * weights change only once per update, so the arena keeps one copy, rounded as every product rounds
 * (src/util/lowp.h, nearest-even), that the products read in place of a conversion.
 *
 * The copy of arena data[n] is half[n], element for element (a tensor at data + offset is at
 * half + offset, so a GEMM's leading dimensions and strides stay as they are). It is kept equal to
 * round(data) in two ways:
 *   - the optimizer ops (kernels/multi_tensor.cu) write round(p) into it in the same pass that updates
 *     the fp32 master p (hs_cuda_shadow_target): no extra launch, no extra read of p;
 *   - every other write into the arena (upload, upload_async, copy, zero, broadcast, scale_tensors:
 *     initialisation, the broadcast from rank 0, a checkpoint load) marks it stale
 *     (hs_cuda_shadow_written), and the next product that reads the arena first converts the whole arena
 *     once (one launch, on the compute stream, so after the write).
 * The copy is made when a 16-bit product first reads the arena (none under fp32/tf32), in the type of
 * that product's precision; a product of the other 16-bit type retypes it (stale, so reconverted).
 * Freeing the arena (hs_cuda_free) ends its registration, so a later allocation at the same address is
 * never taken for a parameter. The host-side registry is guarded by a mutex: the prefetch thread's
 * upload_async asks it too. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_ops.h"

typedef struct shadow {
    uintptr_t lo, hi; /* the arena's bytes [lo, hi): float data[n] */
    uint16_t *half;   /* device [n]: round(data) in the type of `precision`; NULL until a product reads it */
    int precision;    /* HS_PRECISION_BF16 or HS_PRECISION_FP16, the type of half */
    int stale;        /* half is not round(data): converted before the next product reads it */
} shadow;

static shadow *arenas; /* [n_arenas]: one per live model, usually one */
static int n_arenas, capacity;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void locked(void) { HS_CHECK_ERRNO(pthread_mutex_lock(&lock), "locking the parameter copies' registry"); }
static void unlocked(void) { HS_CHECK_ERRNO(pthread_mutex_unlock(&lock), "unlocking the parameter copies' registry"); }

/* The arena holding the bytes [lo, hi), or NULL. */
static shadow *holding(uintptr_t lo, uintptr_t hi) {
    for (int i = 0; i < n_arenas; i++)
        if (arenas[i].lo <= lo && hi <= arenas[i].hi) return &arenas[i];
    return NULL;
}

void hs_cuda_register_params(const hs_backend *be, const float *data, size_t n) {
    (void)be;
    if (!data || n == 0) return;
    const uintptr_t lo = (uintptr_t)data, hi = lo + n * sizeof(float);
    locked();
    for (int i = 0; i < n_arenas; i++)
        if (arenas[i].lo < hi && lo < arenas[i].hi) {
            unlocked();
            HS_FATAL("internal: a parameter arena registered twice",
                     "register_params(%p, %zu) overlaps an arena already registered", (const void *)data, n);
        }
    if (n_arenas == capacity) {
        capacity = capacity ? 2 * capacity : 4;
        HS_REALLOC(arenas, capacity);
    }
    arenas[n_arenas++] = (shadow){.lo = lo, .hi = hi, .half = NULL, .precision = 0, .stale = 1};
    hs_cuda_state_changed();
    unlocked();
}

void hs_cuda_shadow_forget(const void *p) {
    uint16_t *half = NULL;
    locked();
    for (int i = 0; i < n_arenas; i++)
        if (arenas[i].lo == (uintptr_t)p) {
            half = arenas[i].half;
            arenas[i] = arenas[--n_arenas];
            hs_cuda_state_changed();
            break;
        }
    unlocked();
    if (half) {
        hs_cuda_memory_freed(); /* a graph may hold its address */
        HS_CUDA_CHECK(cudaFree(half)); /* cudaFree waits for the products that may still read it */
        hs_ledger_free(half);
    }
}

void hs_cuda_shadow_written(const void *dst, size_t bytes) {
    if (!bytes) return;
    const uintptr_t lo = (uintptr_t)dst, hi = lo + bytes;
    locked();
    for (int i = 0; i < n_arenas; i++)
        if (arenas[i].lo < hi && lo < arenas[i].hi && !arenas[i].stale) {
            arenas[i].stale = 1;
            hs_cuda_state_changed();
        }
    unlocked();
}

const uint16_t *hs_cuda_shadow_operand(const hs_backend *be, const float *x, int64_t lo, int64_t hi, int precision) {
    if (precision != HS_PRECISION_BF16 && precision != HS_PRECISION_FP16) return NULL;
    const uintptr_t from = (uintptr_t)(x + lo), to = (uintptr_t)(x + hi);
    locked();
    shadow *s = n_arenas ? holding(from, to) : NULL;
    if (!s) {
        unlocked();
        return NULL;
    }
    const size_t n = (s->hi - s->lo) / sizeof(float);
    if (!s->half) {
        HS_CUDA_CHECK(cudaMalloc((void **)&s->half, n * sizeof(uint16_t)));
        hs_ledger_alloc(s->half, n * sizeof(uint16_t)); /* device memory outside the seam's alloc */
        hs_cuda_state_changed();
    }
    if (s->precision != precision) s->precision = precision, s->stale = 1;
    if (s->stale) { /* enqueued on the compute stream: after the write that made it stale */
        hs_cuda_params_to_half(be, precision, s->half, (const float *)s->lo, n);
        s->stale = 0;
        hs_cuda_state_changed();
    }
    /* signed: with a negative batch stride x itself may precede the arena while its span lies inside */
    const uint16_t *h = s->half + (intptr_t)((uintptr_t)x - s->lo) / (intptr_t)sizeof(float);
    unlocked();
    return h;
}

uint16_t *hs_cuda_shadow_target(const float *p, int *bf16) {
    uint16_t *h = NULL;
    locked();
    for (int i = 0; i < n_arenas && !h; i++)
        if (arenas[i].lo == (uintptr_t)p && arenas[i].half && !arenas[i].stale) {
            h = arenas[i].half;
            *bf16 = arenas[i].precision == HS_PRECISION_BF16;
        }
    unlocked();
    return h;
}
