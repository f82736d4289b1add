/* Products with rounded operands on the CPU (bf16, tf32, fp16; cpu_rounded_gemm.h has the arithmetic).
 * oneDNN 2.6 has no bf16 GEMM in its C API (dnnl_gemm_bf16bf16f32 is internal), so the products use its
 * matmul primitive: src[M,K] bf16 · weights[K,N] bf16 -> dst[M,N] f32, transposes expressed as strides, alpha
 * as the output scale and beta as a sum post-op (dst = alpha·A·B + beta·dst). Creating a primitive costs far
 * more than a small product, so primitives are cached per shape (a model has a few dozen shapes). */
#include "build_config.h"

#include "backend/cpu/cpu_rounded_gemm.h"

#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/check.h"
#include "util/log.h"

void hs_lowp_round_array(int p, float *y, const float *x, size_t n) {
#pragma omp parallel for schedule(static) if (n > 65536 && !omp_in_parallel())
    for (size_t i = 0; i < n; i++) y[i] = hs_lowp_round(p, x[i]);
}

const float *hs_lowp_rounded_copy(int p, int slot, const float *x, size_t n) {
    static _Thread_local float *bufs[3];
    static _Thread_local size_t lens[3];
    if (p == HS_PRECISION_FP32) return x;
    if (n > lens[slot]) {
        HS_REALLOC(bufs[slot], n);
        lens[slot] = n;
    }
    hs_lowp_round_array(p, bufs[slot], x, n);
    return bufs[slot];
}

/* dst[rows*cols] = round_p(src[rows, ld]) compacted, as fp32 values */
static void round_compact(int p, float *dst, const float *src, int rows, int cols, int ld) {
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols > 65536 && !omp_in_parallel())
    for (int r = 0; r < rows; r++) {
        const float *s = src + (size_t)r * (size_t)ld;
        float *d = dst + (size_t)r * (size_t)cols;
        for (int j = 0; j < cols; j++) d[j] = hs_lowp_round(p, s[j]);
    }
}

/* The portable path: round both inputs (in thread-local scratch), then SGEMM. Exact products, fp32
 * sums: the same arithmetic as a bf16/tf32/fp16 GEMM with fp32 accumulation, up to the order of the sums. */
static void gemm_rounded_sgemm(int p, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                               int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    static _Thread_local float *buf;
    static _Thread_local size_t buf_len;
    const int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
    const int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
    const size_t a_len = (size_t)a_rows * (size_t)a_cols, need = a_len + (size_t)b_rows * (size_t)b_cols;
    if (need > buf_len) {
        HS_REALLOC(buf, need); /* kept for the thread's life: the next product of this shape reuses it */
        buf_len = need;
    }
    round_compact(p, buf, a, a_rows, a_cols, lda);
    round_compact(p, buf + a_len, b, b_rows, b_cols, ldb);
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
                alpha, buf, a_cols, buf + a_len, b_cols, beta, c, ldc);
}

void hs_cpu_gemm_rounded(int p, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                         const float *b, int ldb, float beta, float *c, int ldc) {
    if (m <= 0 || n <= 0) return;
    gemm_rounded_sgemm(p, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

#ifdef HAVE_DNNL
#include <dnnl.h>

#define HS_DNNL(call)                                                                                       \
    do {                                                                                                    \
        dnnl_status_t hs_dnnl_st_ = (call);                                                                 \
        if (hs_dnnl_st_ != dnnl_success)                                                                    \
            hs_fatal_at(__FILE__, __LINE__, #call, "oneDNN (libdnnl) failed; set precision = \"fp32\" to run " \
                        "without it", "status %d", (int)hs_dnnl_st_);                                       \
    } while (0)

typedef struct gemm_key {
    int trans_a, trans_b, m, n, k, ldc;
    float alpha, beta;
} gemm_key;

typedef struct gemm_plan {
    gemm_key key;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a_md, b_md, c_md;
    size_t scratch_bytes;
} gemm_plan;

#define HS_BF16_PLANS 128 /* distinct product shapes kept; beyond, the oldest plan is replaced */

static struct {
    pthread_mutex_t lock; /* one product at a time through oneDNN: plans and scratch are shared */
    int ready;
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    gemm_plan plans[HS_BF16_PLANS];
    int n_plans, next_evict;
    uint16_t *a16, *b16; /* rounded inputs, compact */
    size_t a16_len, b16_len;
    void *scratch;
    size_t scratch_len;
    char impl[128]; /* oneDNN's name of the implementation of the first plan, for the log */
} dnnl_state = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void dnnl_ready(void) {
    if (dnnl_state.ready) return;
    HS_DNNL(dnnl_engine_create(&dnnl_state.engine, dnnl_cpu, 0));
    HS_DNNL(dnnl_stream_create(&dnnl_state.stream, dnnl_state.engine, dnnl_stream_default_flags));
    dnnl_state.ready = 1;
}

static int key_eq(const gemm_key *x, const gemm_key *y) {
    return x->trans_a == y->trans_a && x->trans_b == y->trans_b && x->m == y->m && x->n == y->n && x->k == y->k &&
           x->ldc == y->ldc && x->alpha == y->alpha && x->beta == y->beta;
}

static gemm_plan *plan_for(const gemm_key *key) {
    for (int i = 0; i < dnnl_state.n_plans; i++)
        if (key_eq(&dnnl_state.plans[i].key, key)) return &dnnl_state.plans[i];
    gemm_plan *p;
    if (dnnl_state.n_plans < HS_BF16_PLANS) {
        p = &dnnl_state.plans[dnnl_state.n_plans++];
    } else {
        p = &dnnl_state.plans[dnnl_state.next_evict];
        dnnl_state.next_evict = (dnnl_state.next_evict + 1) % HS_BF16_PLANS;
        HS_DNNL(dnnl_primitive_destroy(p->prim));
    }
    p->key = *key;
    const dnnl_dim_t m = key->m, n = key->n, k = key->k;
    /* a: op(A)[M,K] over the compact stored matrix (A[M,K] or A[K,M]); b likewise; c row-major ld ldc. */
    dnnl_dims_t a_dims = {m, k}, b_dims = {k, n}, c_dims = {m, n};
    dnnl_dims_t a_str = {key->trans_a ? 1 : k, key->trans_a ? m : 1};
    dnnl_dims_t b_str = {key->trans_b ? 1 : n, key->trans_b ? k : 1};
    dnnl_dims_t c_str = {key->ldc, 1};
    HS_DNNL(dnnl_memory_desc_init_by_strides(&p->a_md, 2, a_dims, dnnl_bf16, a_str));
    HS_DNNL(dnnl_memory_desc_init_by_strides(&p->b_md, 2, b_dims, dnnl_bf16, b_str));
    HS_DNNL(dnnl_memory_desc_init_by_strides(&p->c_md, 2, c_dims, dnnl_f32, c_str));
    dnnl_matmul_desc_t desc;
    HS_DNNL(dnnl_matmul_desc_init(&desc, &p->a_md, &p->b_md, NULL, &p->c_md));
    dnnl_primitive_attr_t attr;
    HS_DNNL(dnnl_primitive_attr_create(&attr));
    HS_DNNL(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (key->alpha != 1.0f) HS_DNNL(dnnl_primitive_attr_set_output_scales(attr, 1, 0, &key->alpha));
    dnnl_post_ops_t post = NULL;
    if (key->beta != 0.0f) { /* beta = 0 must not read c (it may hold anything, NaN included) */
        HS_DNNL(dnnl_post_ops_create(&post));
        HS_DNNL(dnnl_post_ops_append_sum(post, key->beta));
        HS_DNNL(dnnl_primitive_attr_set_post_ops(attr, post));
    }
    dnnl_primitive_desc_t pd;
    HS_DNNL(dnnl_primitive_desc_create(&pd, &desc, attr, dnnl_state.engine, NULL));
    const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    p->scratch_bytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
    if (!dnnl_state.impl[0]) {
        const char *impl = NULL;
        if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
            snprintf(dnnl_state.impl, sizeof dnnl_state.impl, "%s", impl);
    }
    HS_DNNL(dnnl_primitive_create(&p->prim, pd));
    HS_DNNL(dnnl_primitive_desc_destroy(pd));
    if (post) HS_DNNL(dnnl_post_ops_destroy(post));
    HS_DNNL(dnnl_primitive_attr_destroy(attr));
    return p;
}

/* dst[rows*cols] = bf16 bits of src[rows, ld], compacted */
static void to_bf16_compact(uint16_t *dst, const float *src, int rows, int cols, int ld) {
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols > 65536)
    for (int r = 0; r < rows; r++) {
        const float *s = src + (size_t)r * (size_t)ld;
        uint16_t *d = dst + (size_t)r * (size_t)cols;
        for (int j = 0; j < cols; j++) d[j] = hs_bf16_bits(s[j]);
    }
}

static void grow(void **buf, size_t *len, size_t bytes) {
    if (bytes <= *len) return;
    unsigned char *p = *buf;
    HS_REALLOC(p, bytes);
    *buf = p;
    *len = bytes;
}

static void gemm_dnnl(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                      const float *b, int ldb, float beta, float *c, int ldc) {
    HS_CHECK_ERRNO(pthread_mutex_lock(&dnnl_state.lock), "locking the bf16 GEMM state");
    dnnl_ready();
    const gemm_key key = {trans_a != 0, trans_b != 0, m, n, k, ldc, alpha, beta};
    gemm_plan *p = plan_for(&key);
    const int a_rows = trans_a ? k : m, a_cols = trans_a ? m : k;
    const int b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
    size_t a_bytes = (size_t)a_rows * (size_t)a_cols * sizeof(uint16_t);
    size_t b_bytes = (size_t)b_rows * (size_t)b_cols * sizeof(uint16_t);
    void *a16 = dnnl_state.a16, *b16 = dnnl_state.b16;
    grow(&a16, &dnnl_state.a16_len, a_bytes);
    grow(&b16, &dnnl_state.b16_len, b_bytes);
    dnnl_state.a16 = a16;
    dnnl_state.b16 = b16;
    grow(&dnnl_state.scratch, &dnnl_state.scratch_len, p->scratch_bytes ? p->scratch_bytes : 1);
    to_bf16_compact(dnnl_state.a16, a, a_rows, a_cols, lda);
    to_bf16_compact(dnnl_state.b16, b, b_rows, b_cols, ldb);

    dnnl_memory_t am, bm, cm, sm = NULL;
    HS_DNNL(dnnl_memory_create(&am, &p->a_md, dnnl_state.engine, dnnl_state.a16));
    HS_DNNL(dnnl_memory_create(&bm, &p->b_md, dnnl_state.engine, dnnl_state.b16));
    HS_DNNL(dnnl_memory_create(&cm, &p->c_md, dnnl_state.engine, c));
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}, {0, NULL}};
    int nargs = 3;
    if (p->scratch_bytes) {
        const dnnl_memory_desc_t *smd = NULL;
        const_dnnl_primitive_desc_t pd;
        HS_DNNL(dnnl_primitive_get_primitive_desc(p->prim, &pd));
        smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        HS_DNNL(dnnl_memory_create(&sm, smd, dnnl_state.engine, dnnl_state.scratch));
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, sm};
    }
    HS_DNNL(dnnl_primitive_execute(p->prim, dnnl_state.stream, nargs, args));
    HS_DNNL(dnnl_stream_wait(dnnl_state.stream));
    HS_DNNL(dnnl_memory_destroy(am));
    HS_DNNL(dnnl_memory_destroy(bm));
    HS_DNNL(dnnl_memory_destroy(cm));
    if (sm) HS_DNNL(dnnl_memory_destroy(sm));
    HS_CHECK_ERRNO(pthread_mutex_unlock(&dnnl_state.lock), "unlocking the bf16 GEMM state");
}

/* Which path the products outside parallel regions take: 1 = oneDNN's bf16 matmul, 0 = rounded
 * operands + SGEMM; -1 = not chosen yet. oneDNN is chosen when the CPU has BF16 instructions
 * (AVX512-BF16 or AMX), where its bf16 kernels run at about twice SGEMM's rate; without them oneDNN
 * emulates bf16 with fp32 instructions, which measured no faster than SGEMM on the BERT-mini shapes and
 * slower on the CNN (docs/performance.md), so the rounded operands go to SGEMM instead — the same
 * arithmetic. */
static int use_dnnl = -1;

static int cpu_has_bf16(void) {
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
}

void hs_cpu_bf16_set_path(int dnnl) { use_dnnl = dnnl; }

static const char *isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx (AMX-BF16 tiles)";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16 (AVX512-BF16)";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni (no BF16 instructions)";
    case dnnl_cpu_isa_avx512_core: return "avx512_core (no BF16 instructions)";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni (no BF16 instructions)";
    case dnnl_cpu_isa_avx2: return "avx2 (no BF16 instructions)";
    default: return "an older ISA (no BF16 instructions)";
    }
}

int hs_cpu_bf16_available(char *why, size_t why_len) {
    (void)why;
    (void)why_len;
    return 1;
}

void hs_cpu_bf16_report(void) {
    static int done;
    if (done) return;
    done = 1;
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    /* Build one plan of a typical shape to learn oneDNN's implementation name (brg:avx512_core_bf16,
     * gemm:jit, ...); it may differ for other shapes. */
    enum { PROBE = 256 };
    float *probe;
    HS_ALLOC(probe, 3 * PROBE * PROBE);
    gemm_dnnl(0, 0, PROBE, PROBE, PROBE, 1.0f, probe, PROBE, probe + PROBE * PROBE, PROBE, 0.0f,
              probe + 2 * PROBE * PROBE, PROBE);
    free(probe);
    if (use_dnnl < 0) use_dnnl = cpu_has_bf16();
    if (use_dnnl)
        hs_log("| precision bf16 on the CPU: bf16 matrix products through oneDNN %d.%d, CPU ISA %s, matmul %s",
               dnnl_version()->major, dnnl_version()->minor, isa_name(isa), dnnl_state.impl[0] ? dnnl_state.impl : "?");
    else
        hs_log("| precision bf16 on the CPU: CPU ISA %s; oneDNN %d.%d would emulate bf16 (matmul %s), so the "
               "products run as bf16-rounded operands through OpenBLAS SGEMM (the same arithmetic)",
               isa_name(isa), dnnl_version()->major, dnnl_version()->minor, dnnl_state.impl[0] ? dnnl_state.impl : "?");
    if (!cpu_has_bf16())
        hs_warn_node("this CPU has no BF16 instructions (no avx512_bf16 or amx_bf16 in lscpu): bf16 is computed "
                     "correctly but no faster than fp32 (slightly slower: the operands are rounded first)");
}
#else
int hs_cpu_bf16_available(char *why, size_t why_len) {
    snprintf(why, why_len, "this hetseq was built without oneDNN: install libdnnl-dev (Debian/Ubuntu), then "
                           "rerun configure and make");
    return 0;
}

void hs_cpu_bf16_report(void) {}
void hs_cpu_bf16_set_path(int dnnl) { (void)dnnl; }
#endif

void hs_cpu_gemm_bf16(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                      const float *b, int ldb, float beta, float *c, int ldc) {
    if (m <= 0 || n <= 0) return;
#ifdef HAVE_DNNL
    if (use_dnnl < 0) use_dnnl = cpu_has_bf16();
    if (use_dnnl && k > 0 && !omp_in_parallel()) {
        gemm_dnnl(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
        return;
    }
#endif
    gemm_rounded_sgemm(HS_PRECISION_BF16, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
