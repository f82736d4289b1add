/* The CUDA backend's operations: hs_cuda_<op> for every op of src/backend/ops.def (HS_OPTIONAL_OP
 * included), with that member's signature and contract; all are enqueued on the device's compute stream
 * (hs_cuda_stream(be)) and return at once, except download and synchronize. Defined with C linkage: the
 * kernels and their launchers in kernels/<family>.cu, the library calls in src/backend/cuda/
 * (cuda_memory.c: memory, copies, pinned staging, events; cuda_gemm.c: GEMMs through cuBLASLt;
 * cuda_conv.c: convolutions through cuDNN; cuda_nccl.c: the collectives). */
#ifndef HS_BACKEND_CUDA_OPS_H
#define HS_BACKEND_CUDA_OPS_H

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define HS_OP(ret, name, params) ret hs_cuda_##name params;
#include "backend/ops.def"
/* the table's entries (cuda_record.c, generated): hs_cuda_<op>, or its record inside a graph region */
#define HS_OP(ret, name, params) ret hs_cuda_rec_##name params;
#include "backend/ops.def"

/* kernels/lowp.cu: operands of the bf16/fp16 products (precision = HS_PRECISION_BF16 or _FP16; src/util/lowp.h):
 * y[n] = the 16-bit patterns of x[n] (CUDA_R_16BF / CUDA_R_16F), or x[n] rounded and kept in fp32 (y may alias x) */
void hs_cuda_to_half_bits(const hs_backend *be, int precision, uint16_t *y, const float *x, size_t n);
/* the same conversion for the 16-bit twins' check (cuda_twins.c, HETSEQ_CHECK_HALF_TWINS) */
void hs_cuda_to_half_check(const hs_backend *be, int precision, uint16_t *y, const float *x, size_t n);
/* the same conversion of a parameter arena into its 16-bit copy (src/backend/cuda/cuda_shadow.c) */
void hs_cuda_params_to_half(const hs_backend *be, int precision, uint16_t *y, const float *x, size_t n);
void hs_cuda_round_floats(const hs_backend *be, int precision, float *y, const float *x, size_t n);

/* kernels/rel_flash_attention.cu: the most warps per block the fused relative attention's kernels may
 * take (0, the default: no cap, each launch picks its count). For tests: a run capped at 1 gives the
 * same bits as any other, which test_op_conformance checks. */
void hs_cuda_rel_flash_max_warps(int warps);
/* The same kernels' backward under bf16/fp16 loads its dC tiles from a 16-bit copy of dctx (1, the
 * default) or from dctx (0). For tests: both give the same bits, which test_op_conformance checks. */
void hs_cuda_rel_flash_dctx16(int on);
/* kernels/flash_attention.cu: HETSEQ_FLASH_KERNELS, 1 for "wmma" (BERT's fused attention on its WMMA kernels),
 * 0 for the default; any other value ends the job with a message naming it (hs_backend_cuda asks at start) */
int hs_cuda_flash_kernels_wmma(void);

#ifdef __cplusplus
}
#endif
#endif
