/* 16-bit activation storage on the CPU (the family of kernels/lowp.cu): to_half / from_half in the
 * 16-bit type of be->precision, with the roundings of src/util/lowp.h (the same bits as the CUDA
 * kernels). Loops below ~32k elements stay serial: waking the thread pool costs more than the work. */
/* Floating-point exceptions are never trapped here (as in cpu_elementwise.c). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include "backend/cpu/cpu_ops.h"
#include "util/check.h"
#include "util/lowp.h"

#define HS_PAR_MIN 32768

/* dst[n] = src[n] rounded to the 16-bit type of be->precision (bfloat16 under bf16, IEEE half
 * otherwise), as bit patterns: activations stored for the backward pass. */
void hs_cpu_to_half(const hs_backend *be, uint16_t *dst, const float *src, size_t n) {
    if (be->precision == HS_PRECISION_BF16) {
#pragma omp parallel for simd schedule(static) if (n > HS_PAR_MIN)
        for (size_t i = 0; i < n; i++) dst[i] = hs_bf16_bits(src[i]);
    } else {
#pragma omp parallel for schedule(static) if (n > HS_PAR_MIN)
        for (size_t i = 0; i < n; i++) dst[i] = hs_fp16_bits(src[i]);
    }
}

/* dst[n] = src[n] widened to fp32 (exact) */
void hs_cpu_from_half(const hs_backend *be, float *dst, const uint16_t *src, size_t n) {
    if (be->precision == HS_PRECISION_BF16) {
#pragma omp parallel for simd schedule(static) if (n > HS_PAR_MIN)
        for (size_t i = 0; i < n; i++) dst[i] = hs_bf16_to_float(src[i]);
    } else {
#pragma omp parallel for schedule(static) if (n > HS_PAR_MIN)
        for (size_t i = 0; i < n; i++) dst[i] = hs_fp16_to_float(src[i]);
    }
}

/* The conversions one after another (the CPU has no launches to save). */
void hs_cpu_convert_halves(const hs_backend *be, const hs_half_conversion *t, int count) {
    if (count > HS_HALF_CONVERSIONS_MAX)
        HS_FATAL(NULL, "convert_halves: %d conversions, at most %d", count, HS_HALF_CONVERSIONS_MAX);
    for (int k = 0; k < count; k++) {
        if (t[k].to_half) hs_cpu_to_half(be, t[k].h, t[k].f, t[k].n);
        else hs_cpu_from_half(be, t[k].f, t[k].h, t[k].n);
    }
}

/* No 16-bit copy of the parameters: the CPU's bf16 products (oneDNN, cpu_bf16.c) and rounded ones
 * (cpu_gemm.c) round their operands as they read them. */
void hs_cpu_register_params(const hs_backend *be, const float *data, size_t n) {
    (void)be;
    (void)data;
    (void)n;
}

/* 16-bit twins (bind_half): the CPU's products round every operand themselves, so it keeps none. */
void hs_cpu_bind_half(const hs_backend *be, const float *f, const uint16_t *h, size_t n) {
    (void)be, (void)f, (void)h, (void)n;
}

void hs_cpu_unbind_half(const hs_backend *be, const float *f) { (void)be, (void)f; }
