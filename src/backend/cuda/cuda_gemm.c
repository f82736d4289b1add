/* GEMMs of the CUDA backend through cuBLASLt (fp32 data, fp32 compute).
 *
 * The seam is row-major; cuBLASLt is column-major. A row-major matrix X[r,c] with row stride ld is the
 * column-major matrix Xᵀ[c,r] with the same ld, so the row-major product C = op(A)·op(B) is computed as
 * the column-major product Cᵀ = op(B)ᵀ·op(A)ᵀ: cuBLASLt's "A" is our b and its "B" is our a, each
 * transposed exactly when ours is, and m and n swap.
 *
 * Per distinct shape (transposes, sizes, leading dimensions, batch and strides) the descriptors and
 * the algorithm the heuristic returns are made once and cached, so a shape always runs the same
 * algorithm (deterministic results) and the training loop makes no descriptors. */
#include <cublasLt.h>
#include <string.h>

#include "backend/cuda/cuda_blas.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_ops.h"

#define GEMM_WORKSPACE_BYTES ((size_t)4 << 20) /* NVIDIA's recommendation for pre-Hopper GPUs */
#define GEMM_CACHE_SIZE 256

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
    int trans_a, trans_b, m, n, k, lda, ldb, ldc, batch, beta_zero;
    int64_t stride_a, stride_b, stride_c;
} gemm_shape;

typedef struct gemm_plan {
    gemm_shape shape;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c; /* cuBLASLt's A (our b), B (our a), C = D */
    cublasLtMatmulAlgo_t algo;
} gemm_plan;

static gemm_plan cache[GEMM_CACHE_SIZE];
static int cached;

void hs_cuda_gemm_init(const hs_backend *be) {
    hs_cuda_device *d = hs_cuda_dev(be);
    cublasLtHandle_t h;
    HS_CUBLAS_CHECK(cublasLtCreate(&h));
    d->blas = h;
    d->gemm_workspace_bytes = GEMM_WORKSPACE_BYTES;
    HS_CUDA_CHECK(cudaMalloc(&d->gemm_workspace, d->gemm_workspace_bytes));
}

static cublasLtMatrixLayout_t layout(int rows, int cols, int ld, int batch, int64_t stride) {
    cublasLtMatrixLayout_t l;
    HS_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, (uint64_t)rows, (uint64_t)cols, (int64_t)ld));
    if (batch > 1) {
        int32_t count = batch;
        HS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
        HS_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                         sizeof stride));
    }
    return l;
}

static void make_plan(const hs_backend *be, gemm_plan *p, const gemm_shape *s) {
    hs_cuda_device *d = hs_cuda_dev(be);
    p->shape = *s;
    HS_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t op_a = s->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLASLt's A is our b */
    cublasOperation_t op_b = s->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    HS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    HS_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
    /* stored (column-major) shapes before the op: our b is [k,n] row-major = [n,k] column-major */
    p->a = s->trans_b ? layout(s->k, s->n, s->ldb, s->batch, s->stride_b) : layout(s->n, s->k, s->ldb, s->batch, s->stride_b);
    p->b = s->trans_a ? layout(s->m, s->k, s->lda, s->batch, s->stride_a) : layout(s->k, s->m, s->lda, s->batch, s->stride_a);
    p->c = layout(s->n, s->m, s->ldc, s->batch, s->stride_c);
    cublasLtMatmulPreference_t pref;
    HS_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = d->gemm_workspace_bytes;
    HS_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t result;
    int found = 0;
    HS_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)d->blas, p->desc, p->a, p->b, p->c, p->c, pref, 1,
                                                   &result, &found));
    HS_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(pref));
    if (found < 1)
        HS_FATAL("cuBLASLt has no algorithm for this GEMM: please report it with the model configuration",
                 "GEMM m=%d n=%d k=%d lda=%d ldb=%d ldc=%d batch=%d", s->m, s->n, s->k, s->lda, s->ldb, s->ldc,
                 s->batch);
    p->algo = result.algo;
}

static void destroy_plan(gemm_plan *p) {
    cublasLtMatrixLayoutDestroy(p->a);
    cublasLtMatrixLayoutDestroy(p->b);
    cublasLtMatrixLayoutDestroy(p->c);
    cublasLtMatmulDescDestroy(p->desc);
}

static void run(const hs_backend *be, const gemm_shape *s, float alpha, const float *a, const float *b, float beta,
                float *c) {
    hs_cuda_device *d = hs_cuda_dev(be);
    gemm_plan *p = NULL, once;
    for (int i = 0; i < cached && !p; i++)
        if (memcmp(&cache[i].shape, s, sizeof *s) == 0) p = &cache[i];
    if (!p) {
        p = cached < GEMM_CACHE_SIZE ? &cache[cached++] : &once;
        make_plan(be, p, s);
    }
    HS_CUBLAS_CHECK(cublasLtMatmul((cublasLtHandle_t)d->blas, p->desc, &alpha, b, p->a, a, p->b, &beta, c, p->c, c,
                                   p->c, &p->algo, d->gemm_workspace, d->gemm_workspace_bytes, d->compute));
    if (p == &once) {
        HS_CUDA_CHECK(cudaStreamSynchronize(d->compute)); /* descriptors must outlive the enqueued call */
        destroy_plan(p);
    }
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
    s.trans_a = !!trans_a, s.trans_b = !!trans_b, s.m = m, s.n = n, s.k = k, s.lda = lda, s.ldb = ldb, s.ldc = ldc;
    s.batch = batch, s.beta_zero = beta == 0.0f;
    if (batch > 1) s.stride_a = stride_a, s.stride_b = stride_b, s.stride_c = stride_c;
    run(be, &s, alpha, a, b, beta, c);
}

void hs_cuda_gemm(const hs_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                  int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    hs_cuda_gemm_strided_batched(be, trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1);
}
