/* The CPU backend's function table. */
#include "backend/cpu/cpu_rounded_gemm.h"
#include "backend/cpu/cpu_ops.h"
#include "util/check.h"
#include "util/log.h"

static const hs_backend cpu_backend = {
    .name = "cpu",
    .impl = NULL, /* the CPU keeps no state: its stream is the calling thread, its memory the heap */
    .memory_is_host = 1,
    .precision = HS_PRECISION_FP32,
    /* every op of src/backend/ops.def: .op = hs_cpu_<op> */
#define HS_OP(ret, name, params) .name = hs_cpu_##name,
#define HS_OPTIONAL_OP(ret, name, params) /* none: comm/ runs MPI on host memory; the products read fp32 */
#include "backend/ops.def"
};

const hs_backend *hs_backend_cpu(void) { return &cpu_backend; }

/* The same table with bf16, tf32 or fp16 products, one table per precision: the ops read be->precision
 * (cpu_gemm.c, cpu_conv.c, cpu_attention.c, cpu_rel_attention.c; cpu_conv.c rounds the operands of its
 * Winograd path too). Made once, on the first call, before any thread computes. */
const hs_backend *hs_backend_cpu_bf16(char *why, size_t why_len) {
    static hs_backend bf16_backend;
    if (!hs_cpu_bf16_available(why, why_len)) return NULL;
    if (!bf16_backend.name) {
        bf16_backend = cpu_backend;
        bf16_backend.precision = HS_PRECISION_BF16;
        hs_cpu_bf16_report();
    }
    return &bf16_backend;
}

const hs_backend *hs_backend_cpu_rounded(int precision) {
    static hs_backend tf32_backend, fp16_backend;
    hs_backend *t;
    const char *what;
    switch (precision) {
    case HS_PRECISION_TF32: t = &tf32_backend, what = "tf32 (10-bit mantissa, fp32 range)"; break;
    case HS_PRECISION_FP16: t = &fp16_backend, what = "fp16 (IEEE binary16: 10-bit mantissa, |x| <= 65504)"; break;
    default: hs_die_code(HS_EXIT_INTERNAL, "hs_backend_cpu_rounded: precision %d is not tf32 or fp16", precision);
    }
    if (!t->name) {
        *t = cpu_backend;
        t->precision = precision;
        hs_log("| precision %s on the CPU: an emulation for checking a recipe's numerics, correct but not "
               "faster than fp32: every matrix product's operands are rounded to %s, then multiplied "
               "exactly and summed in fp32 by OpenBLAS SGEMM, as tensor cores with fp32 accumulation do",
               precision == HS_PRECISION_TF32 ? "tf32" : "fp16", what);
    }
    return t;
}
