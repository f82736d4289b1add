/* The 16-bit twins of activations (the seam's bind_half / unbind_half; docs/gpu.md "Mixed precision").
 * Under bf16/fp16 every product reads its operands in 16 bits. A weight comes from the parameter arena's
 * copy (cuda_shadow.c); an activation or an activation gradient would be converted by the GEMM on every
 * call — once for the forward product and again for the weight gradient, or once for each of the two
 * backward products of a gradient. Instead the op that produces it writes its 16-bit rounding in the same
 * pass (the optional outputs y16, da16, x16, dx16 of ops.def), and the model binds that copy to the fp32
 * tensor: a GEMM operand whose elements lie in a bound range is read from the twin, no conversion.
 *
 * Validity is the model's, scoped: it binds f to h right after the op that wrote both, and unbinds f
 * before any op writes f without writing h (its bindings never outlive a forward/backward pass). The
 * backend ends a binding itself when memory overlapping f or h is written by a memory op (upload,
 * upload_async, copy, zero, broadcast) or when the block starting at f or h is freed. And it can prove it:
 * under HETSEQ_CHECK_HALF_TWINS=1 (the CUDA training tests set it) every twin a product takes is compared,
 * element for element, with a fresh conversion of its fp32 range, and a mismatch stops the run naming the
 * op, the operand and the binding. The check waits for the device, so it is skipped while a CUDA graph is
 * being captured (a warm-up update runs uncaptured first).
 *
 * The registry is host-side, guarded by a mutex (the prefetch thread's upload_async asks it too).
 *
 * CUDA graphs (docs/gpu.md, "CUDA graphs"): which operands a recorded GEMM reads from a twin is decided
 * when its call is played into a capture, from the registry as the region's earlier binds and unbinds
 * left it. A region's signature holds the registry as it was at the region's start (hs_cuda_twins_hash),
 * and its binds and unbinds are ops of the signature like any other, so the registry after a capture is
 * a function of the signature: it is kept with the graph (hs_cuda_twins_save) and put back at each
 * replay (hs_cuda_twins_restore), which runs no wrapper. */
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_ops.h"
#include "util/env_flag.h"
#include "util/hash.h"

typedef struct twin {
    uintptr_t lo, hi;     /* the fp32 bytes [lo, hi): float f[n] */
    const uint16_t *half; /* device [n]: round(f) in the type of the precision */
    uint64_t only16;      /* 1: bound by bind_half_only, f's values need not exist (and are not checked) */
} twin;

static twin *twins; /* [n_twins]: a few per layer being computed */
static int n_twins, capacity;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void locked(void) { HS_CHECK_ERRNO(pthread_mutex_lock(&lock), "locking the 16-bit twins' registry"); }
static void unlocked(void) { HS_CHECK_ERRNO(pthread_mutex_unlock(&lock), "unlocking the 16-bit twins' registry"); }

static void drop(int i) { twins[i] = twins[--n_twins]; }

static int checking(void);

static void bind(const float *f, const uint16_t *h, size_t n, int only16) {
    if (!f || !h || n == 0) return;
    const uintptr_t lo = (uintptr_t)f, hi = lo + n * sizeof(float);
    locked();
    for (int i = n_twins - 1; i >= 0; i--)
        if (twins[i].lo < hi && lo < twins[i].hi) drop(i); /* rebinding replaces; an overlap ends the older */
    if (n_twins == capacity) {
        capacity = capacity ? 2 * capacity : 16;
        HS_REALLOC(twins, capacity);
    }
    twins[n_twins++] = (twin){.lo = lo, .hi = hi, .half = h, .only16 = (uint64_t)only16};
    unlocked();
}

void hs_cuda_bind_half(const hs_backend *be, const float *f, const uint16_t *h, size_t n) {
    (void)be;
    bind(f, h, n, 0);
}

/* The 16-bit dataflow: f holds nothing a product needs. Checking mode fills it with NaNs (all bits set:
 * a quiet NaN) on the compute stream, not through the ledger's ops (the device-op counts stay those of a
 * run without checking) and not through the memory ops that end bindings. */
void hs_cuda_bind_half_only(const hs_backend *be, const float *f, const uint16_t *h, size_t n) {
    if (!be->products_read_twins)
        HS_FATAL("bind_half_only where the products do not read twins (precision fp32 or tf32)",
                 "a tensor of %zu values would have no fp32 values for its products to read", n);
    if (!f || !h || n == 0) return;
    if (checking())
        HS_CUDA_CHECK(cudaMemsetAsync((void *)f, 0xff, n * sizeof(float), hs_cuda_dev(be)->compute));
    bind(f, h, n, 1);
}

void hs_cuda_unbind_half(const hs_backend *be, const float *f) {
    (void)be;
    locked();
    for (int i = n_twins - 1; i >= 0; i--)
        if (twins[i].lo == (uintptr_t)f) drop(i);
    unlocked();
}

void hs_cuda_twins_written(const void *dst, size_t bytes) {
    if (!bytes) return;
    const uintptr_t lo = (uintptr_t)dst, hi = lo + bytes;
    locked();
    for (int i = n_twins - 1; i >= 0; i--) {
        const uintptr_t hlo = (uintptr_t)twins[i].half, hhi = hlo + (twins[i].hi - twins[i].lo) / 2;
        if ((twins[i].lo < hi && lo < twins[i].hi) || (hlo < hi && lo < hhi)) drop(i);
    }
    unlocked();
}

void hs_cuda_twins_forget(const void *p) {
    locked();
    for (int i = n_twins - 1; i >= 0; i--)
        if (twins[i].lo == (uintptr_t)p || (uintptr_t)twins[i].half == (uintptr_t)p) drop(i);
    unlocked();
}

uint64_t hs_cuda_twins_hash(uint64_t h) {
    locked();
    h = hs_fnv1a64(h, &n_twins, sizeof n_twins);
    for (int i = 0; i < n_twins; i++) { /* field by field: no padding bytes */
        const uint64_t t[4] = {twins[i].lo, twins[i].hi, (uint64_t)(uintptr_t)twins[i].half, twins[i].only16};
        h = hs_fnv1a64(h, t, sizeof t);
    }
    unlocked();
    return h;
}

struct hs_cuda_twins_state {
    int n;
    twin t[]; /* [n] */
};

hs_cuda_twins_state *hs_cuda_twins_save(void) {
    locked();
    hs_cuda_twins_state *s = hs_xcalloc(1, sizeof *s + (size_t)n_twins * sizeof(twin), __FILE__, __LINE__);
    s->n = n_twins;
    if (n_twins) memcpy(s->t, twins, (size_t)n_twins * sizeof(twin));
    unlocked();
    return s;
}

void hs_cuda_twins_restore(const hs_cuda_twins_state *s) {
    locked();
    if (s->n > capacity) {
        capacity = s->n;
        HS_REALLOC(twins, capacity);
    }
    n_twins = s->n;
    if (s->n) memcpy(twins, s->t, (size_t)s->n * sizeof(twin));
    unlocked();
}

static int checking(void) {
    static int on = -1;
    return hs_env_flag("HETSEQ_CHECK_HALF_TWINS", &on);
}

/* Compares twin h[n] with a fresh conversion of f[n] (both downloaded: the check waits for the device). */
static void check(const hs_backend *be, int precision, const uint16_t *h, const float *f, size_t n, const char *op,
                  const char *operand, const twin *t) {
    hs_cuda_device *d = hs_cuda_dev(be);
    if (d->capturing) return;
    uint16_t *fresh_dev;
    HS_CUDA_CHECK(cudaMalloc((void **)&fresh_dev, n * sizeof(uint16_t)));
    hs_ledger_alloc(fresh_dev, n * sizeof(uint16_t));
    hs_cuda_to_half_check(be, precision, fresh_dev, f, n);
    uint16_t *fresh, *twin_bits;
    HS_ALLOC(fresh, n);
    HS_ALLOC(twin_bits, n);
    HS_CUDA_CHECK(cudaMemcpyAsync(fresh, fresh_dev, n * sizeof(uint16_t), cudaMemcpyDeviceToHost, d->compute));
    HS_CUDA_CHECK(cudaMemcpyAsync(twin_bits, h, n * sizeof(uint16_t), cudaMemcpyDeviceToHost, d->compute));
    HS_CUDA_CHECK(cudaStreamSynchronize(d->compute));
    HS_CUDA_CHECK(cudaFree(fresh_dev));
    hs_ledger_free(fresh_dev);
    size_t bad = n;
    for (size_t i = 0; i < n && bad == n; i++)
        if (fresh[i] != twin_bits[i]) bad = i;
    const uint16_t want = bad < n ? fresh[bad] : 0, got = bad < n ? twin_bits[bad] : 0;
    free(fresh);
    free(twin_bits);
    if (bad < n)
        HS_FATAL("a 16-bit twin is stale: an op wrote the fp32 tensor after bind_half without writing its 16-bit "
                 "copy (HETSEQ_CHECK_HALF_TWINS)",
                 "%s, operand %s: element %zu of %zu is 0x%04x in the twin, 0x%04x converted afresh (binding of "
                 "%" PRIuPTR " fp32 values at %p)",
                 op, operand, bad, n, (unsigned)got, (unsigned)want, (t->hi - t->lo) / sizeof(float),
                 (void *)t->lo);
}

const uint16_t *hs_cuda_twin_operand(const hs_backend *be, const float *x, int64_t lo, int64_t hi, int precision,
                                     const char *op, const char *operand) {
    if (precision != HS_PRECISION_BF16 && precision != HS_PRECISION_FP16) return NULL;
    const uintptr_t from = (uintptr_t)(x + lo), to = (uintptr_t)(x + hi);
    locked();
    const twin *t = NULL;
    twin copy;
    for (int i = 0; i < n_twins && !t; i++)
        if (twins[i].lo <= from && to <= twins[i].hi) copy = twins[i], t = &copy;
    unlocked();
    if (!t) return NULL;
    /* signed: with a negative batch stride x itself may precede the range while its span lies inside */
    const uint16_t *h = t->half + (intptr_t)((uintptr_t)x - t->lo) / (intptr_t)sizeof(float);
    if (checking() && !t->only16) check(be, precision, h + lo, x + lo, (size_t)(hi - lo), op, operand, t);
    return h;
}

const uint16_t *hs_cuda_twin_only16(const float *x, size_t n) {
    const uintptr_t from = (uintptr_t)x, to = (uintptr_t)(x + n);
    const uint16_t *h = NULL;
    locked();
    for (int i = 0; i < n_twins && !h; i++)
        if (twins[i].only16 && twins[i].lo <= from && to <= twins[i].hi)
            h = twins[i].half + (from - twins[i].lo) / sizeof(float);
    unlocked();
    return h;
}
