/* The peak FLOP/s that model FLOP utilisation (MFU) is measured against: on the CPU a short SGEMM
 * measurement at start, on a GPU a table by compute capability and precision (published figures, not
 * measured). MFU = model FLOP/s achieved ÷ peak (docs/performance.md, docs/gpu.md). */
#ifndef HS_TRAIN_MFU_H
#define HS_TRAIN_MFU_H

#include <stddef.h>

#include "backend/backend.h"

/* SGEMM rate of the backend's gemm on c[n,n] = a[n,n]·b[n,n] with the calling thread's OpenMP/OpenBLAS
 * threads: one warm-up product, then timed products until `seconds` have passed (at least two), and
 * the best of them (other load only ever slows one down). FLOP/s. */
double hs_mfu_measure_gemm(const hs_backend *be, int n, double seconds);

/* Dense peak of a GPU of compute capability major.minor with sm_count multiprocessors, for precision
 * "fp32" (CUDA cores), "tf32", "bf16" or "fp16" (tensor cores, fp32 accumulation): the datasheet
 * figure of the table's reference GPU for that compute capability, scaled by sm_count / its SMs.
 * 0 if the table does not know the compute capability or the GPU lacks the precision (bf16 before
 * 8.0). `source` (may be NULL) gets e.g. "table: A100 SXM 312 TFLOP/s bf16, scaled to 108 SMs". */
double hs_mfu_gpu_peak(int major, int minor, int sm_count, const char *precision, char *source, size_t n);

#endif
