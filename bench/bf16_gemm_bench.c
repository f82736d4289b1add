/* Matrix-product rates on the CPU at the GEMM shapes hetseq issues (not a test; numbers for
 * docs/performance.md), four ways side by side:
 *   SGEMM        OpenBLAS cblas_sgemm (hetseq's fp32 products)
 *   dnnl f32     oneDNN's fp32 matmul primitive through the C API cpu_rounded_gemm.c uses (primitive cached per
 *                shape, memory objects made per call as a routing in hetseq would): the candidate for
 *                hetseq's fp32 products
 *   dnnl bf16    hetseq's bf16 product through oneDNN (hs_cpu_gemm_bf16, path forced to oneDNN: operands
 *                converted to bf16, fp32 sums)
 *   round+SGEMM  hetseq's bf16 product without BF16 instructions (path forced to rounding the operands,
 *                then SGEMM: the same arithmetic)
 * Every linear layer y[T,out] = x[T,in]·W[out,in]ᵀ gives three products with hetseq's operand layouts
 * (src/nn/linear.c): forward (NT), weight gradient dW += dyᵀ·x (TN, beta 1), data gradient dx = dy·W
 * (NN). Shape sets:
 *   mini  BERT-mini, 32 x 128 tokens (T 4096), H 256, I 1024, QKV fused, MLM head on 32 x 20 rows, V 30528
 *   base  BERT-base, 16 x 128 tokens (T 2048), H 768, I 3072, MLM head on 16 x 20 rows
 *   cnn   MNISTNet at batch 64: fc1 (9216 -> 128), fc2 (128 -> 10), and the per-image convolution
 *         products (conv1 im2col [32,9]·[9,676]; conv2 Winograd per point [36,32]·[32,64] and its two
 *         gradients), which hetseq issues inside its own parallel loop, one thread per product: read
 *         their 1-thread rows.
 * GFLOP/s = 2·M·N·K / time, best of REPS; the four columns take turns within every repetition (after
 * one untimed call each), so load on a shared node falls on all alike. Threads from OMP_NUM_THREADS.
 *   usage: bench/bf16_gemm_bench [REPS [SETS [fp32|all]]]   (defaults 5, mini,base,cnn, all; fp32 = the
 *          two fp32 columns only) */
#include "build_config.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/cpu_rounded_gemm.h"
#include "util/check.h"
#include "util/timer.h"

#ifdef HAVE_DNNL
#include <dnnl.h>

#define BENCH_DNNL(call)                                                                                    \
    do {                                                                                                    \
        dnnl_status_t st_ = (call);                                                                         \
        if (st_ != dnnl_success) hs_fatal_at(__FILE__, __LINE__, #call, "oneDNN (libdnnl) failed", "status %d", (int)st_); \
    } while (0)
#endif

typedef struct gemm_shape {
    const char *set, *name;
    int ta, tb, m, n, k; /* c[m,n] = op(a)[m,k]·op(b)[k,n] + beta·c, row major, packed operands */
    float beta;
} gemm_shape;

enum { MAX_SHAPES = 64 };
static gemm_shape shapes[MAX_SHAPES];
static int n_shapes;

static void add(const char *set, const char *name, int ta, int tb, int m, int n, int k, float beta) {
    if (n_shapes == MAX_SHAPES) hs_die("too many shapes");
    shapes[n_shapes++] = (gemm_shape){set, name, ta, tb, m, n, k, beta};
}

/* the three products of a linear layer x[T,in] -> y[T,out] (src/nn/linear.c) */
static void add_linear(const char *set, const char *name, int t, int in, int out) {
    char *f, *w, *d;
    const size_t len = strlen(name) + 8;
    HS_ALLOC(f, len);
    HS_ALLOC(w, len);
    HS_ALLOC(d, len);
    snprintf(f, len, "%s fwd", name);
    snprintf(w, len, "%s dW", name);
    snprintf(d, len, "%s dX", name);
    add(set, f, 0, 1, t, out, in, 0.0f);
    add(set, w, 1, 0, out, in, t, 1.0f);
    add(set, d, 0, 0, t, in, out, 0.0f);
}

static void bert_shapes(const char *set, int batch, int h, int inter) {
    const int t = batch * 128, np = batch * 20, vocab = 30528;
    add_linear(set, "QKV", t, h, 3 * h);
    add_linear(set, "attn out", t, h, h);
    add_linear(set, "FFN up", t, h, inter);
    add_linear(set, "FFN down", t, inter, h);
    add_linear(set, "MLM transform", np, h, h);
    add_linear(set, "MLM decoder", np, h, vocab);
}

static void cnn_shapes(void) {
    add_linear("cnn", "fc1", 64, 9216, 128);
    add_linear("cnn", "fc2", 64, 128, 10);
    add("cnn", "conv1 im2col fwd*", 0, 0, 32, 676, 9, 0.0f);
    add("cnn", "conv2 wino fwd*", 0, 0, 36, 64, 32, 0.0f);
    add("cnn", "conv2 wino dW*", 1, 0, 32, 64, 36, 1.0f);
    add("cnn", "conv2 wino dX*", 0, 0, 36, 32, 64, 0.0f);
}

/* ---- oneDNN fp32 matmul, one primitive per shape ---- */
#ifdef HAVE_DNNL
static dnnl_engine_t engine;
static dnnl_stream_t stream;
typedef struct dnnl_plan {
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a_md, b_md, c_md;
    char impl[64];
} dnnl_plan;
static dnnl_plan plans[MAX_SHAPES];

static void dnnl_plan_make(dnnl_plan *p, const gemm_shape *s) {
    const dnnl_dim_t m = s->m, n = s->n, k = s->k;
    dnnl_dims_t a_dims = {m, k}, b_dims = {k, n}, c_dims = {m, n};
    dnnl_dims_t a_str = {s->ta ? 1 : k, s->ta ? m : 1}; /* op(a)[m,k] of a stored [k,m] when transposed */
    dnnl_dims_t b_str = {s->tb ? 1 : n, s->tb ? k : 1};
    dnnl_dims_t c_str = {n, 1};
    BENCH_DNNL(dnnl_memory_desc_init_by_strides(&p->a_md, 2, a_dims, dnnl_f32, a_str));
    BENCH_DNNL(dnnl_memory_desc_init_by_strides(&p->b_md, 2, b_dims, dnnl_f32, b_str));
    BENCH_DNNL(dnnl_memory_desc_init_by_strides(&p->c_md, 2, c_dims, dnnl_f32, c_str));
    dnnl_matmul_desc_t desc;
    BENCH_DNNL(dnnl_matmul_desc_init(&desc, &p->a_md, &p->b_md, NULL, &p->c_md));
    dnnl_primitive_attr_t attr;
    BENCH_DNNL(dnnl_primitive_attr_create(&attr));
    dnnl_post_ops_t post = NULL;
    if (s->beta != 0.0f) { /* c = a·b + beta·c: the sum post-op */
        BENCH_DNNL(dnnl_post_ops_create(&post));
        BENCH_DNNL(dnnl_post_ops_append_sum(post, s->beta));
        BENCH_DNNL(dnnl_primitive_attr_set_post_ops(attr, post));
    }
    dnnl_primitive_desc_t pd;
    BENCH_DNNL(dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL));
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
        snprintf(p->impl, sizeof p->impl, "%s", impl);
    BENCH_DNNL(dnnl_primitive_create(&p->prim, pd));
    BENCH_DNNL(dnnl_primitive_desc_destroy(pd));
    if (post) BENCH_DNNL(dnnl_post_ops_destroy(post));
    BENCH_DNNL(dnnl_primitive_attr_destroy(attr));
}
#endif

static const gemm_shape *cur; /* the shape being timed */
static int cur_index;

typedef void (*gemm_fn)(const float *a, const float *b, float *c);

static void run_sgemm(const float *a, const float *b, float *c) {
    const gemm_shape *s = cur;
    cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans, s->m, s->n,
                s->k, 1.0f, a, s->ta ? s->m : s->k, b, s->tb ? s->k : s->n, s->beta, c, s->n);
}

#ifdef HAVE_DNNL
static void run_dnnl_f32(const float *a, const float *b, float *c) {
    dnnl_plan *p = &plans[cur_index];
    dnnl_memory_t am, bm, cm;
    BENCH_DNNL(dnnl_memory_create(&am, &p->a_md, engine, (void *)a));
    BENCH_DNNL(dnnl_memory_create(&bm, &p->b_md, engine, (void *)b));
    BENCH_DNNL(dnnl_memory_create(&cm, &p->c_md, engine, c));
    const dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}};
    BENCH_DNNL(dnnl_primitive_execute(p->prim, stream, 3, args));
    BENCH_DNNL(dnnl_stream_wait(stream));
    BENCH_DNNL(dnnl_memory_destroy(am));
    BENCH_DNNL(dnnl_memory_destroy(bm));
    BENCH_DNNL(dnnl_memory_destroy(cm));
}
#endif

static void run_bf16(const float *a, const float *b, float *c, int dnnl) {
    const gemm_shape *s = cur;
    hs_cpu_bf16_set_path(dnnl);
    hs_cpu_gemm_bf16(s->ta, s->tb, s->m, s->n, s->k, 1.0f, a, s->ta ? s->m : s->k, b, s->tb ? s->k : s->n, s->beta, c,
                     s->n);
}
static void run_bf16_dnnl(const float *a, const float *b, float *c) { run_bf16(a, b, c, 1); }
static void run_bf16_rounded(const float *a, const float *b, float *c) { run_bf16(a, b, c, 0); }

int main(int argc, char **argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 5;
    const char *sets = argc > 2 ? argv[2] : "mini,base,cnn";
    const char *cols = argc > 3 ? argv[3] : "all";
    if (reps < 1 || (strcmp(cols, "fp32") && strcmp(cols, "all"))) {
        fprintf(stderr, "usage: %s [REPS [SETS [fp32|all]]]   SETS: comma-separated mini,base,cnn\n", argv[0]);
        return 2;
    }
    if (strstr(sets, "mini")) bert_shapes("mini", 32, 256, 1024);
    if (strstr(sets, "base")) bert_shapes("base", 16, 768, 3072);
    if (strstr(sets, "cnn")) cnn_shapes();
    if (!n_shapes) {
        fprintf(stderr, "%s: no shape set in '%s' (mini, base, cnn)\n", argv[0], sets);
        return 2;
    }
    char why[256];
    if (!hs_cpu_bf16_available(why, sizeof why)) {
        fprintf(stderr, "%s: %s\n", argv[0], why);
        return 1;
    }
#ifdef HAVE_DNNL
    BENCH_DNNL(dnnl_engine_create(&engine, dnnl_cpu, 0));
    BENCH_DNNL(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    const dnnl_version_t *v = dnnl_version();
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    printf("oneDNN %d.%d.%d, CPU ISA %s, ", v->major, v->minor, v->patch,
           isa == dnnl_cpu_isa_avx512_core_amx    ? "avx512_core_amx"
           : isa == dnnl_cpu_isa_avx512_core_bf16 ? "avx512_core_bf16"
           : isa == dnnl_cpu_isa_avx512_core_vnni ? "avx512_core_vnni (no BF16 instructions)"
           : isa == dnnl_cpu_isa_avx512_core      ? "avx512_core (no BF16 instructions)"
                                                  : "below AVX-512 (no BF16 instructions)");
#endif
    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("threads %d, OPENBLAS_CORETYPE %s, %s; best of %d, GFLOP/s\n", omp_get_max_threads(), ct ? ct : "unset",
           openblas_get_config(), reps);
    const int all = !strcmp(cols, "all");
    printf("%-4s %-20s %2s %5s %5s %5s %9s %9s %7s %9s %11s  %s\n", "set", "product", "op", "M", "N", "K", "SGEMM",
           "dnnl f32", "f32 d/S", all ? "dnnl bf16" : "", all ? "round+SGEMM" : "", "oneDNN f32 implementation");
    gemm_fn fns[4] = {run_sgemm, NULL, run_bf16_dnnl, run_bf16_rounded};
#ifdef HAVE_DNNL
    fns[1] = run_dnnl_f32;
#endif
    const int n_fns = all ? 4 : 2;
    for (int i = 0; i < n_shapes; i++) {
        const gemm_shape *s = cur = &shapes[i];
        cur_index = i;
#ifdef HAVE_DNNL
        dnnl_plan_make(&plans[i], s);
#endif
        const size_t a_len = (size_t)s->m * (size_t)s->k, b_len = (size_t)s->k * (size_t)s->n;
        const size_t c_len = (size_t)s->m * (size_t)s->n;
        float *a, *b, *c;
        HS_ALLOC(a, a_len);
        HS_ALLOC(b, b_len);
        HS_ALLOC(c, c_len);
        for (size_t j = 0; j < a_len; j++) a[j] = (float)((j * 2654435761u) % 1000) / 1000.0f - 0.5f;
        for (size_t j = 0; j < b_len; j++) b[j] = (float)((j * 2246822519u) % 1000) / 1000.0f - 0.5f;
        /* small products repeat inside a timing so that one timing is >= ~1 ms */
        const double flop = 2.0 * s->m * s->n * s->k;
        const int inner = flop >= 2e8 ? 1 : (int)(2e8 / flop);
        double best[4] = {1e30, 1e30, 1e30, 1e30};
        for (int f = 0; f < n_fns; f++)
            if (fns[f]) fns[f](a, b, c); /* untimed: plans, buffers, thread pools */
        for (int r = 0; r < reps; r++)
            for (int f = 0; f < n_fns; f++) {
                if (!fns[f]) continue;
                const double t0 = hs_now();
                for (int q = 0; q < inner; q++) fns[f](a, b, c);
                const double t = (hs_now() - t0) / inner;
                if (t < best[f]) best[f] = t;
            }
        double g[4];
        for (int f = 0; f < 4; f++) g[f] = f < n_fns && fns[f] ? flop / best[f] / 1e9 : 0.0;
        const char *op = s->ta ? "TN" : s->tb ? "NT" : "NN";
        printf("%-4s %-20s %2s %5d %5d %5d %9.1f %9.1f %7.2f", s->set, s->name, op, s->m, s->n, s->k, g[0], g[1],
               g[0] > 0 ? g[1] / g[0] : 0.0);
        if (all) printf(" %9.1f %11.1f", g[2], g[3]);
        else printf(" %9s %11s", "", "");
#ifdef HAVE_DNNL
        printf("  %s\n", plans[i].impl);
        BENCH_DNNL(dnnl_primitive_destroy(plans[i].prim));
#else
        printf("\n");
#endif
        free(a);
        free(b);
        free(c);
    }
    printf("(* issued inside hetseq's parallel loops, one thread per product: compare the 1-thread rows)\n");
    return 0;
}
