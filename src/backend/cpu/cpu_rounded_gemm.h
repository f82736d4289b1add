/* Products with rounded operands (reduced-precision products) of the CPU backend, and the operand roundings
 * they use (bf16, tf32, fp16): every product's inputs rounded, the products summed in fp32; everything else
 * (element-wise math, LayerNorm, softmax, losses, parameters, gradients, optimizer state) stays fp32.
 * bf16 (precision = "bf16") is PyTorch's bf16 autocast. On a CPU with BF16 instructions the large products go
 * through oneDNN's bf16 matmul (configure finds libdnnl-dev); a product called from inside an OpenMP parallel
 * region (attention per head, convolution per sample), and every product on a CPU without BF16 instructions,
 * rounds its inputs and runs OpenBLAS SGEMM on them — the same arithmetic, because the product of two bf16
 * values (8-bit significands) is exact in fp32 (24 bits), so both sum exact products in fp32.
 * tf32 and fp16 (precision = "tf32" | "fp16", a GPU's tensor-core types) are emulated the same way: operands
 * rounded (util/lowp.h), then SGEMM; 11-bit significands multiply exactly in fp32 too. They are for checking
 * a recipe's numerics on the CPU: correct, not faster. */
#ifndef HS_BACKEND_CPU_ROUNDED_GEMM_H
#define HS_BACKEND_CPU_ROUNDED_GEMM_H

#include <cblas.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend/backend.h"
#include "util/lowp.h"

/* The rounding of one operand value under precision p (hs_precision): bf16, tf32 or fp16 (util/lowp.h);
 * fp32 values pass unchanged. */
static inline float hs_lowp_round(int p, float x) {
    switch (p) {
    case HS_PRECISION_BF16: return hs_bf16_round(x);
    case HS_PRECISION_TF32: return hs_tf32_round(x);
    case HS_PRECISION_FP16: return hs_fp16_round(x);
    default: return x;
    }
}

/* y[n] = round_p(x[n]) kept in fp32 (y may alias x) */
void hs_lowp_round_array(int p, float *y, const float *x, size_t n);

/* c[m,n] = alpha * op(round_p(a))[m,k] · op(round_p(b))[k,n] + beta * c[m,n], products exact and summed
 * in fp32, for p = TF32 or FP16: the operands rounded into thread-local scratch, then SGEMM (the CPU
 * has no tf32 or fp16 arithmetic; this is an emulation for checking a recipe's numerics). Safe to call
 * from any thread. */
void hs_cpu_gemm_rounded(int p, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                         const float *b, int ldb, float beta, float *c, int ldc);

/* c[m,n] = alpha * op(bf16(a))[m,k] · op(bf16(b))[k,n] + beta * c[m,n], products summed in fp32 (row
 * major, op = transpose if trans_* != 0: hs_cpu_blas_sgemm's contract). Safe to call from any thread. */
void hs_cpu_gemm_bf16(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                      const float *b, int ldb, float beta, float *c, int ldc);

/* A product at be->precision, for the ops that compute products inside their own loops (attention per
 * head): cblas_sgemm unchanged under fp32, hs_cpu_gemm_bf16 under bf16, hs_cpu_gemm_rounded under tf32
 * and fp16. Same arguments as hs_cpu_blas_sgemm. */
static inline void hs_cpu_precision_gemm(const hs_backend *be, int trans_a, int trans_b, int m, int n, int k,
                                         float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                                         float *c, int ldc) {
    if (be->precision == HS_PRECISION_BF16)
        hs_cpu_gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else if (be->precision == HS_PRECISION_TF32 || be->precision == HS_PRECISION_FP16)
        hs_cpu_gemm_rounded(be->precision, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
                    alpha, a, lda, b, ldb, beta, c, ldc);
}

/* x[n] rounded to precision p into this thread's scratch slot (0..2), kept until the next call on the
 * same slot (the rounded operands of a convolution); x itself under fp32. */
const float *hs_lowp_rounded_copy(int p, int slot, const float *x, size_t n);

/* 1 if this build can run bf16 on the CPU (oneDNN linked); else 0 and why[] says what to install. */
int hs_cpu_bf16_available(char *why, size_t why_len);

/* Chooses the path of the products outside parallel regions: 1 = oneDNN's bf16 matmul, 0 = rounded
 * operands + SGEMM (by default: oneDNN where the CPU has BF16 instructions). For tests and benchmarks;
 * no effect without oneDNN. */
void hs_cpu_bf16_set_path(int dnnl);

/* Logs once which code oneDNN runs the bf16 products with (its CPU ISA and implementation) and warns
 * when the CPU has no BF16 instructions (oneDNN then emulates them: correct, but slow). */
void hs_cpu_bf16_report(void);

#endif
