/* The CPU backend's operations (OpenBLAS + OpenMP): hs_cpu_<op> for every HS_OP of src/backend/ops.def,
 * with that member's signature and contract, defined in cpu_<family>.c (the file of the op family:
 * cpu_memory.c, cpu_gemm.c, cpu_bias.c, cpu_elementwise.c, cpu_lowp.c, cpu_conv.c, cpu_pool.c, cpu_loss.c,
 * cpu_multi_tensor.c, cpu_rows.c, cpu_layernorm.c, cpu_activations.c, cpu_attention.c, cpu_rel_attention.c,
 * cpu_softmax_xent.c). The CPU has no HS_OPTIONAL_OP (its memory is host memory: comm/ runs MPI on it). */
#ifndef HS_BACKEND_CPU_OPS_H
#define HS_BACKEND_CPU_OPS_H

#include "backend/backend.h"

#define HS_OP(ret, name, params) ret hs_cpu_##name params;
#define HS_OPTIONAL_OP(ret, name, params)
#include "backend/ops.def"

/* The CPU's three matrix products (row major, op = transpose if trans_* != 0, c = alpha·op(a)·op(b) +
 * beta·c):
 *   hs_cpu_gemm            the backend's gemm member (ops.def): at be->precision, for the layers;
 *   hs_cpu_precision_gemm  the same product for the ops' own inner loops (attention per head), inline in
 *                          cpu_rounded_gemm.h: fp32 SGEMM, or rounded operands under bf16/tf32/fp16;
 *   hs_cpu_blas_sgemm      plain OpenBLAS SGEMM in fp32 whatever the precision (cpu_gemm.c), for the
 *                          convolutions, which round their operands themselves. */
void hs_cpu_blas_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                       const float *b, int ldb, float beta, float *c, int ldc);
/* (Winograd, which cpu_conv.c dispatches to: cpu_winograd.h) */

#endif
