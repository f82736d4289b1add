/* GEMMs of the CUDA backend through cuBLASLt. Every product of the backend (the seam's gemm, and the
 * attention products through hs_cuda_gemm_strided_batched) follows be->precision:
 *   fp32  CUDA_R_32F A, B, C, D; CUBLAS_COMPUTE_32F (no tensor-core down-conversion).
 *   tf32  the same data, CUBLAS_COMPUTE_32F_FAST_TF32: the library may round A and B to TF32 and use
 *         tensor cores; products and sums in fp32.
 *   bf16, fp16  A and B as CUDA_R_16BF / CUDA_R_16F: an operand inside a parameter arena is read from
 *         the arena's 16-bit copy (cuda_shadow.c), one inside a range bound to a 16-bit twin (bind_half,
 *         cuda_twins.c) from the twin, any other converted (kernels/lowp.cu, nearest-even, the bits of
 *         src/util/lowp.h) into a grow-only device workspace; C and D CUDA_R_32F, CUBLAS_COMPUTE_32F
 *         (fp32 accumulation), scale type CUDA_R_32F — a combination cuBLASLt's type table lists for
 *         CUBLAS_COMPUTE_32F. The outputs stay fp32, so nothing downstream changes type; but for
 *         gemm_bias_half, whose C and D (and bias) have A's 16-bit type, another row of that table.
 *
 * The seam is row-major; cuBLASLt is column-major. A row-major matrix X[r,c] with row stride ld is the
 * column-major matrix Xᵀ[c,r] with the same ld, so the row-major product C = op(A)·op(B) is computed as
 * the column-major product Cᵀ = op(B)ᵀ·op(A)ᵀ: cuBLASLt's "A" is our b and its "B" is our a, each
 * transposed exactly when ours is, and m and n swap.
 *
 * Per distinct shape (precision, transposes, sizes, leading dimensions, batch and strides, and the
 * alignment of the pointers) the descriptors and the algorithm the heuristic returns are made once and
 * cached, so a shape always runs the same algorithm (deterministic results) and the training loop makes
 * no descriptors.
 *
 * Alignment: the heuristic assumes every matrix pointer 256-byte aligned unless told otherwise
 * (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES), and cublasLtMatmul refuses (NOT_SUPPORTED) a pointer less
 * aligned than its algorithm needs. Parameters sit 64 bytes apart in their arena (32 in its 16-bit copy),
 * and products read column slices and row offsets of larger matrices, so each call's pointers' alignment
 * (up to 256) is part of its shape and is what the heuristic is told. The epilogue's bias vector is not
 * covered by those preferences, and a GPU's epilogue loads it 16 bytes at a time: a bias less aligned than
 * that takes the separate ops (the path a shape without an epilogue algorithm takes). */
#include <cublasLt.h>
#include <string.h>

#include "backend/cuda/cuda_blas.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_ops.h"

/* cuBLASLt's workspace: the cuBLAS documentation recommends 32 MiB on Hopper (compute capability 9.x and
 * later) and 4 MiB before it (cublasSetWorkspace); the heuristic leaves out the algorithms (split-K among
 * them) whose workspace does not fit, and PyTorch, which the benchmarks compare with, gives the same. */
#define GEMM_WORKSPACE_BYTES_HOPPER ((size_t)32 << 20)
#define GEMM_WORKSPACE_BYTES ((size_t)4 << 20)
#define GEMM_CACHE_SIZE 16 /* plans at first; the cache doubles when a run has more shapes */

#define HS_CUBLAS_CHECK(call)                                                                          \
    do {                                                                                               \
        cublasStatus_t hs_blas_rc_ = (call);                                                           \
        if (hs_blas_rc_ != CUBLAS_STATUS_SUCCESS)                                                      \
            hs_fatal_at(__FILE__, __LINE__, #call,                                                     \
                        "a cuBLASLt call failed: check the CUDA toolkit and driver versions match "     \
                        "(nvidia-smi) and that GPU memory is not exhausted",                           \
                        "%s (status %d)", cublasLtGetStatusString(hs_blas_rc_), (int)hs_blas_rc_);     \
    } while (0)

typedef struct gemm_shape {
    int precision; /* hs_precision: part of the cache key (another compute type and operand types) */
    int trans_a, trans_b, m, n, k, lda, ldb, ldc, batch, beta_zero;
    int64_t stride_a, stride_b, stride_c;
    int epilogue; /* cublasLtEpilogue_t: DEFAULT, BIAS or BGRADB (the bias pointer is set per call) */
    int out16;    /* C, D and the bias of the operands' 16-bit type (gemm_bias_half), else fp32 */
    int align_a, align_b, align_c; /* bytes, up to 256: the pointers cublasLtMatmul gets for our a, b, c */
} gemm_shape;

typedef struct gemm_plan {
    gemm_shape shape;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c; /* cuBLASLt's A (our b), B (our a), C = D */
    cublasLtMatmulAlgo_t algo;
    int usable; /* the heuristic found an algorithm (an epilogue a GPU lacks falls back to separate ops) */
} gemm_plan;

/* State in the device object (docs/gpu.md "The device object"): the plan cache (the tables of every
 * precision share it), and the 16-bit copies of A and B under bf16/fp16 in d->gemm_half: grow-only, so
 * after the first update nothing is allocated; the conversions and the GEMMs that read them are all on
 * the compute stream, in order. */
static const hs_backend *conversions_of; /* the device hs_cuda_gemm_conversions reports (one per process) */

size_t hs_cuda_gemm_conversions(void) { return conversions_of ? hs_cuda_dev(conversions_of)->gemm_conversions : 0; }

void hs_cuda_gemm_init(const hs_backend *be) {
    hs_cuda_device *d = hs_cuda_dev(be);
    cublasLtHandle_t h;
    HS_CUBLAS_CHECK(cublasLtCreate(&h));
    d->blas = h;
    d->gemm_workspace_bytes = be->cc_major >= 9 ? GEMM_WORKSPACE_BYTES_HOPPER : GEMM_WORKSPACE_BYTES;
    HS_CUDA_CHECK(cudaMalloc(&d->gemm_workspace, d->gemm_workspace_bytes));
    hs_ledger_alloc(d->gemm_workspace, d->gemm_workspace_bytes);
    gemm_plan *plans;
    HS_ALLOC(plans, GEMM_CACHE_SIZE);
    d->gemm_plans = plans;
    d->gemm_plans_used = 0, d->gemm_plan_capacity = GEMM_CACHE_SIZE;
    conversions_of = be;
}

/* The cuBLASLt type of the A and B operands under a precision. */
static cudaDataType_t operand_type(int precision) {
    return precision == HS_PRECISION_BF16 ? CUDA_R_16BF : precision == HS_PRECISION_FP16 ? CUDA_R_16F : CUDA_R_32F;
}

static cublasLtMatrixLayout_t layout(cudaDataType_t type, int rows, int cols, int ld, int batch, int64_t stride) {
    cublasLtMatrixLayout_t l;
    HS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, type, (uint64_t)rows, (uint64_t)cols, (int64_t)ld));
    if (batch > 1) {
        int32_t count = batch;
        HS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
        HS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                         sizeof stride));
    }
    return l;
}

static void make_plan(const hs_backend *be, gemm_plan *p, const gemm_shape *s, void *bias) {
    hs_cuda_device *d = hs_cuda_dev(be);
    p->shape = *s;
    const cublasComputeType_t compute =
        s->precision == HS_PRECISION_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    HS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, compute, CUDA_R_32F));
    cublasOperation_t op_a = s->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's A is our b */
    cublasOperation_t op_b = s->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    HS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    HS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
    if (s->epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
        const uint32_t e = (uint32_t)s->epilogue;
        HS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
        HS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
    /* stored (column-major) shapes before the op: our b is [k,n] row-major = [n,k] column-major */
    const cudaDataType_t t = operand_type(s->precision);
    p->a = s->trans_b ? layout(t, s->k, s->n, s->ldb, s->batch, s->stride_b)
                      : layout(t, s->n, s->k, s->ldb, s->batch, s->stride_b);
    p->b = s->trans_a ? layout(t, s->m, s->k, s->lda, s->batch, s->stride_a)
                      : layout(t, s->k, s->m, s->lda, s->batch, s->stride_a);
    p->c = layout(s->out16 ? t : CUDA_R_32F, s->n, s->m, s->ldc, s->batch, s->stride_c);
    cublasLtMatmulPreference_t pref;
    HS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = d->gemm_workspace_bytes;
    HS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    /* cuBLASLt's A is our b, its B our a; C and D are our c */
    const uint32_t align[4] = {(uint32_t)s->align_b, (uint32_t)s->align_a, (uint32_t)s->align_c, (uint32_t)s->align_c};
    static const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++)
        HS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &align[i], sizeof align[i]));
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    HS_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)d->blas, p->desc, p->a, p->b, p->c, p->c, pref, 1,
                                                   &result, &found));
    HS_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    p->usable = found >= 1;
    if (found >= 1) p->algo = result.algo;
    if (found < 1 && (s->epilogue != CUBLASLT_EPILOGUE_DEFAULT || s->out16)) return; /* the caller runs separate ops */
    if (found < 1)
        HS_FATAL("cuBLASLt has no algorithm for this GEMM: please report it with the model configuration",
                 "GEMM m=%d n=%d k=%d lda=%d ldb=%d ldc=%d batch=%d precision %d", s->m, s->n, s->k, s->lda, s->ldb,
                 s->ldc, s->batch, s->precision);
}

/* The elements a strided batch of row-major matrices spans, relative to its pointer: [lo, hi). */
typedef struct span {
    int64_t lo, hi;
} span;

static span span_of(int rows, int cols, int ld, int batch, int64_t stride) {
    const int64_t one = (int64_t)(rows - 1) * ld + cols, last = (int64_t)(batch - 1) * stride;
    span sp = {last < 0 ? last : 0, (last > 0 ? last : 0) + one};
    return sp;
}

/* The operands as 16-bit copies under bf16/fp16: where they are (a16, b16: where a / b would point in the
 * copy), and the spans still to be converted into the workspace (na, nb elements from a + lo_a, b + lo_b;
 * 0: read in place). */
typedef struct half_operands {
    const void *a16, *b16;
    size_t na, nb;
    int64_t lo_a, lo_b;
} half_operands;

/* Where the 16-bit operands are. An operand whose span lies in a parameter arena is read from the arena's
 * copy (cuda_shadow.c: written by the optimizer, no conversion), one whose span lies in a range bound to a
 * twin from the twin (cuda_twins.c: written by the op that produced the activation); any other operand's
 * whole span (gaps between rows and batch entries included, so leading dimensions and strides stay as they
 * are) goes into the workspace (grown here; converted by convert_half once the GEMM will run). op names
 * the seam's op and its operands a and b, for the twin check. */
static half_operands locate_half(const hs_backend *be, const gemm_shape *s, const float *a, const float *b,
                                 const char *op) {
    hs_cuda_device *d = hs_cuda_dev(be);
    const span sa = span_of(s->trans_a ? s->k : s->m, s->trans_a ? s->m : s->k, s->lda, s->batch, s->stride_a);
    const span sb = span_of(s->trans_b ? s->n : s->k, s->trans_b ? s->k : s->n, s->ldb, s->batch, s->stride_b);
    const uint16_t *pa = hs_cuda_shadow_operand(be, a, sa.lo, sa.hi, s->precision);
    const uint16_t *pb = hs_cuda_shadow_operand(be, b, sb.lo, sb.hi, s->precision);
    if (!pa) pa = hs_cuda_twin_operand(be, a, sa.lo, sa.hi, s->precision, op, "a");
    if (!pb) pb = hs_cuda_twin_operand(be, b, sb.lo, sb.hi, s->precision, op, "b");
    const size_t na = pa ? 0 : (size_t)(sa.hi - sa.lo), nb = pb ? 0 : (size_t)(sb.hi - sb.lo);
    const size_t a_bytes = (na * sizeof(uint16_t) + 255) & ~(size_t)255; /* B starts 256-byte aligned */
    const size_t need = a_bytes + nb * sizeof(uint16_t);
    if (need > d->gemm_half_bytes) {
        if (d->gemm_half) {
            hs_cuda_free_later(be, d->gemm_half); /* enqueued GEMMs may still read the old copy */
            hs_cuda_memory_freed();                /* a graph that holds it is not replayed (cuda_record.c) */
        }
        const size_t grown = need > 2 * d->gemm_half_bytes ? need : 2 * d->gemm_half_bytes;
        HS_CUDA_CHECK(cudaMalloc(&d->gemm_half, grown));
        hs_ledger_alloc(d->gemm_half, grown);
        d->gemm_half_bytes = grown;
    }
    half_operands h = {pa, pb, na, nb, sa.lo, sb.lo};
    if (!pa) h.a16 = (const uint16_t *)d->gemm_half - sa.lo;
    if (!pb) h.b16 = (const uint16_t *)((const char *)d->gemm_half + a_bytes) - sb.lo;
    return h;
}

/* Converts the operands locate_half placed in the workspace. */
static void convert_half(const hs_backend *be, const gemm_shape *s, const float *a, const float *b,
                         const half_operands *h) {
    hs_cuda_device *d = hs_cuda_dev(be);
    if (h->na) {
        hs_cuda_to_half_bits(be, s->precision, (uint16_t *)h->a16 + h->lo_a, a + h->lo_a, h->na);
        d->gemm_conversions++;
    }
    if (h->nb) {
        hs_cuda_to_half_bits(be, s->precision, (uint16_t *)h->b16 + h->lo_b, b + h->lo_b, h->nb);
        d->gemm_conversions++;
    }
}

/* The alignment of a pointer, in bytes, up to 256 (the heuristic's default assumption) */
static int alignment_of(const void *p) {
    const uintptr_t u = (uintptr_t)p;
    int align = 256;
    while (align > 1 && u % (uintptr_t)align) align /= 2;
    return align;
}

/* Runs the GEMM of shape s (with its epilogue's bias vector `bias`, NULL for DEFAULT); returns 0, having
 * enqueued nothing, when the heuristic has no algorithm for an epilogue or a 16-bit D. */
static int run(const hs_backend *be, const gemm_shape *shape, float alpha, const float *a, const float *b, float beta,
               void *c, void *bias, const char *op) {
    hs_cuda_device *d = hs_cuda_dev(be);
    if (shape->epilogue != CUBLASLT_EPILOGUE_DEFAULT && (uintptr_t)bias % 16) return 0; /* top of this file */
    const int half = shape->precision == HS_PRECISION_BF16 || shape->precision == HS_PRECISION_FP16;
    half_operands h = {a, b, 0, 0, 0, 0};
    if (half) h = locate_half(be, shape, a, b, op);
    gemm_shape full = *shape, *s = &full;
    s->align_a = alignment_of(h.a16), s->align_b = alignment_of(h.b16), s->align_c = alignment_of(c);
    gemm_plan *cache = (gemm_plan *)d->gemm_plans;
    gemm_plan *p = NULL;
    for (int i = 0; i < d->gemm_plans_used && !p; i++)
        if (memcmp(&cache[i].shape, s, sizeof *s) == 0) p = &cache[i];
    if (!p) { /* a new shape: the cache grows (plans are only addressed inside this call) */
        if (d->gemm_plans_used == d->gemm_plan_capacity) {
            d->gemm_plan_capacity *= 2;
            HS_REALLOC(cache, d->gemm_plan_capacity);
            d->gemm_plans = cache;
        }
        p = &cache[d->gemm_plans_used++];
        make_plan(be, p, s, bias);
    }
    if (!p->usable) return 0;
    if (s->epilogue != CUBLASLT_EPILOGUE_DEFAULT) /* read by cublasLtMatmul itself: the cached desc can change */
        HS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    if (half) convert_half(be, s, a, b, &h);
    const void *A = h.a16, *B = h.b16;
    HS_CUBLAS_CHECK(cublasLtMatmul((cublasLtHandle_t)d->blas, p->desc, &alpha, B, p->a, A, p->b, &beta, c, p->c, c,
                                   p->c, &p->algo, d->gemm_workspace, d->gemm_workspace_bytes, d->compute));
    HS_CUDA_LIBRARY_OP("cublasLtMatmul");
    return 1;
}

void hs_cuda_gemm_strided_batched(const hs_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                                  const float *a, int lda, int64_t stride_a, const float *b, int ldb,
                                  int64_t stride_b, float beta, float *c, int ldc, int64_t stride_c, int batch) {
    if (m <= 0 || n <= 0 || batch <= 0) return;
    if (k <= 0) { /* an empty sum: C = beta·C, which cuBLASLt does not accept as a GEMM */
        HS_FATAL("internal: a GEMM with k = 0", "m=%d n=%d", m, n);
    }
    gemm_shape s;
    memset(&s, 0, sizeof s); /* padding too: shapes are compared with memcmp */
    s.precision = be->precision;
    s.trans_a = !!trans_a, s.trans_b = !!trans_b, s.m = m, s.n = n, s.k = k, s.lda = lda, s.ldb = ldb, s.ldc = ldc;
    s.batch = batch, s.beta_zero = beta == 0.0f;
    if (batch > 1) s.stride_a = stride_a, s.stride_b = stride_b, s.stride_c = stride_c;
    s.epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    run(be, &s, alpha, a, b, beta, c, NULL, "gemm (a, b)");
}

void hs_cuda_gemm(const hs_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                  int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    hs_cuda_gemm_strided_batched(be, trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}

/* ---- GEMMs with a bias epilogue -------------------------------------------------------------------------
 * In the column-major view (top of this file) the row-major y[rows, out] is D[out, rows]: the bias[out] of a
 * linear layer is one value per row of D, which is what CUBLASLT_EPILOGUE_BIAS adds (broadcast over D's
 * columns). The weight gradient dw[out, in] = dyᵀ·x is D[in, out] = op(A)·op(B) with cuBLASLt's A = x
 * ([in, rows], not transposed) and B = dy ([out, rows] transposed to [rows, out]); the bias gradient
 * Σ_r dy[r, :] is the sum of op(B) over the GEMM's k (= rows), one value per column of D: exactly
 * CUBLASLT_EPILOGUE_BGRADB (BGRADA would sum x). The library WRITES the bias gradient (it does not add it),
 * so a call that must add has it written into scratch and adds it with one small kernel; a shape for which
 * the heuristic has no algorithm with the epilogue runs the GEMM and the bias_grad kernel. Under bf16/fp16
 * the bias gradient is the sum of the 16-bit dy the GEMM reads. cuBLASLt's GELU epilogues are never used:
 * they compute the tanh approximation, and hetseq's GELU is the exact erf one (docs/gpu.md, "GEMM
 * epilogues"). */

static gemm_shape epilogue_shape(const hs_backend *be, int trans_a, int trans_b, int m, int n, int k, int lda,
                                 int ldb, int ldc, float beta, int epilogue) {
    gemm_shape s;
    memset(&s, 0, sizeof s);
    s.precision = be->precision;
    s.trans_a = trans_a, s.trans_b = trans_b, s.m = m, s.n = n, s.k = k, s.lda = lda, s.ldb = ldb, s.ldc = ldc;
    s.batch = 1, s.beta_zero = beta == 0.0f, s.epilogue = epilogue;
    return s;
}

void hs_cuda_gemm_bias(const hs_backend *be, float *y, int ldy, const float *x, const float *w, const float *bias,
                       int rows, int in, int out) {
    if (rows <= 0 || out <= 0) return;
    const gemm_shape s = epilogue_shape(be, 0, 1, rows, out, in, in, in, ldy, 0.0f, CUBLASLT_EPILOGUE_BIAS);
    if (in > 0 && run(be, &s, 1.0f, x, w, 0.0f, y, (void *)bias, "gemm_bias (a = x, b = w)")) return;
    hs_cuda_gemm(be, 0, 1, rows, out, in, 1.0f, x, in, w, in, 0.0f, y, ldy);
    if (ldy == out)
        hs_cuda_add_bias(be, y, bias, rows, out);
    else
        hs_cuda_add_bias_strided(be, y, ldy, bias, rows, out);
}

/* y16 = round(x·wᵀ + round(bias)): BIAS with C, D and the bias vector in the 16-bit type (cuBLASLt's bias
 * has D's type), the bias read from the parameter arena's 16-bit copy (else rounded into scratch). Where
 * the heuristic has no algorithm, and for the fp32 output (y16 NULL): the fp32 GEMM into y, the rounded
 * bias added, then rounded (into y16, or in place). No bias: DEFAULT with the 16-bit D (y16), or the fp32
 * GEMM rounded in place (y). */
void hs_cuda_gemm_bias_half(const hs_backend *be, uint16_t *y16, float *y, const float *x, const float *w,
                            const float *bias, int rows, int in, int out) {
    hs_half_precision_check(be, "gemm_bias_half");
    if (rows <= 0 || out <= 0) return;
    if (!bias) {
        hs_cuda_gemm_half_out(be, y16, y, 0, 1, rows, out, in, x, in, w, in);
        return;
    }
    if (!y16) {
        float *bias_rounded = (float *)hs_cuda_scratch(be, (size_t)out * sizeof *bias_rounded);
        hs_cuda_round_floats(be, be->precision, bias_rounded, bias, (size_t)out);
        hs_cuda_gemm_bias(be, y, out, x, w, bias_rounded, rows, in, out);
        hs_cuda_round_floats(be, be->precision, y, y, (size_t)rows * (size_t)out);
        return;
    }
    const uint16_t *bias16 = hs_cuda_shadow_operand(be, bias, 0, out, be->precision);
    if (!bias16) {
        uint16_t *b = (uint16_t *)hs_cuda_scratch(be, (size_t)out * sizeof *b);
        hs_cuda_to_half_bits(be, be->precision, b, bias, (size_t)out);
        bias16 = b;
    }
    gemm_shape s = epilogue_shape(be, 0, 1, rows, out, in, in, in, out, 0.0f, CUBLASLT_EPILOGUE_BIAS);
    s.out16 = 1;
    if (in > 0 && run(be, &s, 1.0f, x, w, 0.0f, y16, (void *)bias16, "gemm_bias_half (a = x, b = w)")) return;
    hs_cuda_gemm(be, 0, 1, rows, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
    float *bias_rounded = (float *)hs_cuda_scratch(be, (size_t)out * sizeof *bias_rounded);
    hs_cuda_round_floats(be, be->precision, bias_rounded, bias, (size_t)out);
    hs_cuda_add_bias(be, y, bias_rounded, rows, out);
    hs_cuda_to_half_bits(be, be->precision, y16, y, (size_t)rows * (size_t)out);
}

/* c16 = round(op(a)·op(b)): DEFAULT with C and D in the 16-bit type; where the heuristic has no algorithm,
 * and for the fp32 output (c16 NULL), the fp32 GEMM into c, then rounded (into c16, or in place). */
void hs_cuda_gemm_half_out(const hs_backend *be, uint16_t *c16, float *c, int trans_a, int trans_b, int m, int n,
                           int k, const float *a, int lda, const float *b, int ldb) {
    hs_half_precision_check(be, "gemm_half_out");
    if (m <= 0 || n <= 0) return;
    if (c16) {
        gemm_shape s = epilogue_shape(be, !!trans_a, !!trans_b, m, n, k, lda, ldb, n, 0.0f, CUBLASLT_EPILOGUE_DEFAULT);
        s.out16 = 1;
        if (k > 0 && run(be, &s, 1.0f, a, b, 0.0f, c16, NULL, "gemm_half_out (a, b)")) return;
    }
    hs_cuda_gemm(be, trans_a, trans_b, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, n);
    const size_t count = (size_t)m * (size_t)n;
    if (c16)
        hs_cuda_to_half_bits(be, be->precision, c16, c, count);
    else
        hs_cuda_round_floats(be, be->precision, c, c, count);
}

void hs_cuda_gemm_wgrad_bgrad(const hs_backend *be, float *dw, float *dbias, const float *dy, int ldy, const float *x,
                              int rows, int in, int out, int overwrite) {
    if (out <= 0) return;
    if (rows <= 0 || in <= 0) { /* no GEMM to ride on (dw has nothing to add: a product of zero terms) */
        if (overwrite && in > 0) hs_cuda_zero(be, dw, (size_t)out * (size_t)in * sizeof *dw);
        if (overwrite) hs_cuda_zero(be, dbias, (size_t)out * sizeof *dbias);
        if (rows > 0) hs_cuda_bias_grad_strided(be, dbias, dy, ldy, rows, out);
        return;
    }
    /* overwrite: beta 0 (cuBLASLt reads no C, so dw may hold anything) and the library's bias sum written
     * into dbias itself */
    const float beta = overwrite ? 0.0f : 1.0f;
    /* Adding: the library's sum into scratch, then one small add, so that every micro-batch's bias
     * gradient is the same library sum however an update's samples fall into micro-batches and ranks
     * (world-size invariance on CUDA: written s0 then s0 + s1 on one rank = s0 + s1 summed over two). */
    const gemm_shape s = epilogue_shape(be, 1, 0, out, in, rows, ldy, in, in, beta, CUBLASLT_EPILOGUE_BGRADB);
    float *sum = overwrite ? dbias : (float *)hs_cuda_scratch(be, (size_t)out * sizeof *dbias);
    if (run(be, &s, 1.0f, dy, x, beta, dw, sum, "gemm_wgrad_bgrad (a = dy, b = x)")) {
        if (!overwrite) hs_cuda_add_bias(be, dbias, sum, 1, out);
        return;
    }
    if (overwrite) hs_cuda_zero(be, dbias, (size_t)out * sizeof *dbias);
    hs_cuda_gemm(be, 1, 0, out, in, rows, 1.0f, dy, ldy, x, in, beta, dw, in);
    const size_t span = (size_t)(rows - 1) * (size_t)ldy + (size_t)out;
    const uint16_t *dy16 = hs_cuda_twin_only16(dy, span);
    if (dy16) { /* dy exists only in 16 bits (bind_half_only): its sum from the twin widened (exact) */
        float *wide = (float *)hs_cuda_scratch(be, span * sizeof *wide);
        hs_cuda_from_half(be, wide, dy16, span);
        dy = wide;
    }
    if (ldy == out)
        hs_cuda_bias_grad(be, dbias, dy, rows, out);
    else
        hs_cuda_bias_grad_strided(be, dbias, dy, ldy, rows, out);
}
