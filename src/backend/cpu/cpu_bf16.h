/* bf16 arithmetic of the CPU backend (precision = "bf16"): matrix products whose inputs are rounded to
 * bfloat16 and whose products are accumulated in fp32, as PyTorch's bf16 autocast does; everything
 * else (element-wise math, LayerNorm, softmax, losses, parameters, gradients, optimizer state) stays
 * fp32. On a CPU with BF16 instructions the large products go through oneDNN's bf16 matmul (configure
 * finds libdnnl-dev); a product called from inside an OpenMP parallel region (attention per head,
 * convolution per sample), and every product on a CPU without BF16 instructions, rounds its inputs and
 * runs OpenBLAS SGEMM on them — the same arithmetic, because the product of two bf16 values (8-bit
 * significands) is exact in fp32 (24 bits), so both sum exact products in fp32. */
#ifndef HS_BACKEND_CPU_BF16_H
#define HS_BACKEND_CPU_BF16_H

#include <cblas.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "backend/backend.h"

/* x rounded to the nearest bfloat16, ties to even (torch's float -> bfloat16 conversion), returned as
 * the bf16 bit pattern. NaN stays a (quiet) NaN; overflow rounds to infinity as in IEEE. */
static inline uint16_t hs_bf16_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN: keep it quiet */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* The same value as an fp32 number (the low 16 bits of the significand zero). */
static inline float hs_bf16_round(float x) {
    const uint32_t u = (uint32_t)hs_bf16_bits(x) << 16;
    float y;
    memcpy(&y, &u, sizeof y);
    return y;
}

/* y[n] = bf16(x[n]) kept in fp32 (y may alias x) */
void hs_bf16_round_array(float *y, const float *x, size_t n);

/* c[m,n] = alpha * op(bf16(a))[m,k] · op(bf16(b))[k,n] + beta * c[m,n], products summed in fp32 (row
 * major, op = transpose if trans_* != 0: hs_cpu_sgemm's contract). Safe to call from any thread. */
void hs_cpu_gemm_bf16(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                      const float *b, int ldb, float beta, float *c, int ldc);

/* The products the CPU ops compute inside their own loops (attention, convolution): cblas_sgemm
 * unchanged under fp32, hs_cpu_gemm_bf16 under bf16. Same arguments as hs_cpu_sgemm. */
static inline void hs_cpu_mm(const hs_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                             const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc) {
    if (be->precision == HS_PRECISION_BF16)
        hs_cpu_gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k,
                    alpha, a, lda, b, ldb, beta, c, ldc);
}

/* x[n] rounded to bf16 into this thread's scratch slot (0..2), kept until the next call on the same
 * slot: the rounded operands of a convolution under bf16. */
const float *hs_bf16_rounded_copy(int slot, const float *x, size_t n);

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
