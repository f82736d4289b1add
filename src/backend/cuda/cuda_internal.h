/* What the files of the CUDA backend share beyond the seam: library set-up called once by
 * hs_backend_cuda, and the device collectives (cuda_nccl.c). */
#ifndef HS_BACKEND_CUDA_INTERNAL_H
#define HS_BACKEND_CUDA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

void hs_cuda_gemm_init(const hs_backend *be); /* cuBLASLt handle and workspace (cuda_gemm.c) */
void hs_cuda_conv_init(const hs_backend *be); /* cuDNN handle on the compute stream (cuda_conv.c) */

/* cuda_nccl.c: the seam's collectives members (HS_OPTIONAL_OP in ops.def; prototypes in cuda_ops.h) */
/* kernels/lowp.cu: fp32 <-> 16-bit (bf16 != 0: bfloat16, else IEEE half) on `stream`, for the
 * all-reduce's 16-bit transit */
void hs_cuda_grad_to16(cudaStream_t stream, uint16_t *y, const float *x, size_t n, int bf16);
void hs_cuda_grad_from16(cudaStream_t stream, float *y, const uint16_t *x, size_t n, int bf16);

/* cuda_shadow.c: the 16-bit copies of the parameter arenas (register_params). */
/* Where x would point in the 16-bit copy (of `precision`'s type) of the registered arena that holds the
 * operand's elements x[lo, hi), made current first (one conversion of the whole arena, on the compute
 * stream, when it is stale); NULL when no arena holds them or the precision is not bf16/fp16. */
const uint16_t *hs_cuda_shadow_operand(const hs_backend *be, const float *x, int64_t lo, int64_t hi, int precision);
/* The copy an optimizer op updating the arena whose first element is p keeps current by writing
 * round(p[i]) for every p[i] it writes (*bf16 = 1: bfloat16, 0: IEEE half); NULL when there is none to
 * keep (no copy yet, or a stale one that the next product reconverts anyway). */
uint16_t *hs_cuda_shadow_target(const float *p, int *bf16);
/* dst[bytes] is written otherwise than by an optimizer op: the copies of the arenas it overlaps are stale. */
void hs_cuda_shadow_written(const void *dst, size_t bytes);
/* p is being freed: the registration of the arena starting at p (if any) ends and its copy is freed. */
void hs_cuda_shadow_forget(const void *p);
/* dst[bytes] is written by an op other than the ones that keep the 16-bit copies current (the memory
 * ops, copy_rows, add_rows): the parameter copies (hs_cuda_shadow_written) and the activations' twins
 * (hs_cuda_twins_written) that overlap it end. The one call every such op makes (cuda_memory.c). */
void hs_cuda_memory_written(const void *dst, size_t bytes);

/* cuda_twins.c: the 16-bit twins of activations (bind_half / unbind_half). */
/* Where x would point in the twin bound to a range holding the operand's elements x[lo, hi), or NULL
 * (none, or the precision is not bf16/fp16). Under HETSEQ_CHECK_HALF_TWINS=1 the twin is first compared
 * with a fresh conversion; a mismatch stops the run naming op and operand. */
const uint16_t *hs_cuda_twin_operand(const hs_backend *be, const float *x, int64_t lo, int64_t hi, int precision,
                                     const char *op, const char *operand);
/* The twin of x[0, n) when the range lies in a binding of bind_half_only (its fp32 values do not exist),
 * else NULL: an op other than a product that must read the values reads them from there. */
const uint16_t *hs_cuda_twin_only16(const float *x, size_t n);
/* dst[bytes] is written by a memory op: the bindings whose fp32 range or twin it overlaps end. */
void hs_cuda_twins_written(const void *dst, size_t bytes);
/* p is being freed: the bindings whose fp32 range or twin starts at p end. */
void hs_cuda_twins_forget(const void *p);
/* CUDA graphs: the registry hashed into h (a region's signature holds it as the region starts); a copy
 * of it (hs_xcalloc'd: free() it), and the registry set back to a copy (a replay: the binds and unbinds
 * of the region, made while its capture was played, are not made again) */
typedef struct hs_cuda_twins_state hs_cuda_twins_state;
uint64_t hs_cuda_twins_hash(uint64_t h);
hs_cuda_twins_state *hs_cuda_twins_save(void);
void hs_cuda_twins_restore(const hs_cuda_twins_state *s);

/* cuda_gemm.c: the operand conversions the bf16/fp16 GEMMs have launched so far (a parameter operand
 * read from its arena's copy is not one), for the tests that check weights are not converted per GEMM. */
size_t hs_cuda_gemm_conversions(void);

#ifdef __cplusplus
}
#endif
#endif
