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

/* cpu_gemm.c: the same product as hs_cpu_gemm without the device, for the convolutions */
void hs_cpu_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                  int ldb, float beta, float *c, int ldc);
/* (Winograd, which cpu_conv.c dispatches to: cpu_winograd.h) */

#endif
