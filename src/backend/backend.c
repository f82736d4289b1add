/* Run-time backend choice: one installed binary serves CPU and GPU nodes of a mixed cluster. With
 * configure --with-cuda the CUDA backend (src/backend/cuda/) is a module, hetseq_cuda.so, that
 * cuda_module.c opens only when a rank asks for device "cuda" or "auto"; a build without it links
 * no_cuda.c, whose hs_backend_cuda always says why there is no GPU. */
#include "backend/backend.h"

#include <stdio.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"

const char *hs_backend_missing_op(const hs_backend *be) {
#define HS_OP(ret, name, params) \
    if (!be->name) return #name;
#define HS_OPTIONAL_OP(ret, name, params) \
    if (!be->memory_is_host && !be->name) return #name;
#include "backend/ops.def"
    return NULL;
}

void hs_backend_check(const hs_backend *be) {
    const char *missing = hs_backend_missing_op(be);
    if (missing)
        hs_die_code(HS_EXIT_INTERNAL,
                    "the %s backend's table has no entry for op \"%s\": define hs_%s_%s and check that "
                    "src/backend/ops.def lists %s (docs/gpu.md, \"Adding an op\")",
                    be->name, missing, be->name, missing, missing);
}

const hs_backend *hs_backend_select(const char *device, int local_rank) {
    char why[1024] = ""; /* cuda_module.c's load error names a path, dlerror's text and what to do */
    if (strcmp(device, "cpu") == 0) {
        hs_backend_check(hs_backend_cpu());
        return hs_backend_cpu();
    }
    if (strcmp(device, "auto") == 0) {
        const hs_backend *gpu = hs_backend_cuda(local_rank, why, sizeof why);
        if (gpu) return gpu;
        hs_log("| device = auto: %s; running on the CPU", why);
        hs_backend_check(hs_backend_cpu());
        return hs_backend_cpu();
    }
    if (strcmp(device, "cuda") == 0) {
        const hs_backend *gpu = hs_backend_cuda(local_rank, why, sizeof why);
        if (gpu) return gpu;
        hs_die("device = \"cuda\" but %s. Run on a GPU node (check nvidia-smi and CUDA_VISIBLE_DEVICES), or set "
               "device = \"cpu\" or \"auto\"",
               why);
    }
    hs_die("device = \"%s\" is not one of \"auto\", \"cpu\", \"cuda\"", device);
}

/* The hs_precision of a config value, or -1. */
static int precision_of(const char *precision) {
    if (strcmp(precision, "fp32") == 0) return HS_PRECISION_FP32;
    if (strcmp(precision, "bf16") == 0) return HS_PRECISION_BF16;
    if (strcmp(precision, "tf32") == 0) return HS_PRECISION_TF32;
    if (strcmp(precision, "fp16") == 0) return HS_PRECISION_FP16;
    return -1;
}

const hs_backend *hs_backend_with_precision(const hs_backend *be, const char *precision) {
    char why[256] = "";
    const int p = precision_of(precision);
    if (p < 0) hs_die("precision = \"%s\" is not one of \"fp32\", \"tf32\", \"bf16\", \"fp16\"", precision);
    if (p == HS_PRECISION_FP32) return be;
    if (strcmp(be->name, "cpu") == 0) {
        if (p != HS_PRECISION_BF16) return hs_backend_cpu_rounded(p);
        const hs_backend *bf16 = hs_backend_cpu_bf16(why, sizeof why);
        if (!bf16) hs_die("precision = \"bf16\" on the CPU: %s; or set precision = \"fp32\"", why);
        return bf16;
    }
    return hs_backend_cuda_with_precision(be, p);
}

void hs_output_check(const char *what, const void *f, const void *f16) {
    if (!f && !f16) HS_FATAL(NULL, "%s: neither given", what);
}

void hs_flash_qkv16_out_check(const void *qkv16, const void *qkv16_out) {
    if (qkv16 && qkv16_out) HS_FATAL(NULL, "flash_attention_forward: qkv16 (read) and qkv16_out (written) both given");
}

void hs_log_softmax_nll_backward_check(const float *logprobs, const float *logits, const double *log_norm) {
    if (!logprobs && (!logits || !log_norm))
        HS_FATAL(NULL, "log_softmax_nll_backward: neither logprobs nor the logits with their log_norm given");
}

void hs_half_precision_check(const hs_backend *be, const char *what) {
    if (!hs_precision_is_16bit(be->precision))
        HS_FATAL(NULL, "%s: an op of the 16-bit precisions (bf16, fp16) called under another", what);
}

void hs_gelu_backward_check(const hs_backend *be, const float *dx, const uint16_t *dx16, const float *x,
                            const uint16_t *x16) {
    hs_output_check("gelu_backward: dx or dx16", dx, dx16);
    if (!x == !x16) HS_FATAL(NULL, "gelu_backward: x or x16, not %s", x ? "both" : "neither");
    if (x16 && be->precision != HS_PRECISION_BF16 && be->precision != HS_PRECISION_FP16)
        HS_FATAL(NULL, "gelu_backward: x16 under a precision without 16-bit values");
}
