/* The CPU backend's function table. */
#include "backend/cpu/cpu_bf16.h"
#include "backend/cpu/cpu_ops.h"
#include "util/check.h"
#include "util/log.h"

static const hs_backend cpu_backend = {
    .name = "cpu",
    .impl = NULL, /* the CPU keeps no state: its stream is the calling thread, its memory the heap */
    .memory_is_host = 1,
    .precision = HS_PRECISION_FP32,
    .alloc = hs_cpu_alloc,
    .free = hs_cpu_free,
    .upload = hs_cpu_upload,
    .download = hs_cpu_download,
    .copy = hs_cpu_copy,
    .zero = hs_cpu_zero,
    .synchronize = hs_cpu_synchronize,
    .host_alloc = hs_cpu_host_alloc,
    .host_free = hs_cpu_host_free,
    .event_create = hs_cpu_event_create,
    .event_destroy = hs_cpu_event_destroy,
    .upload_async = hs_cpu_upload_async,
    .event_record = hs_cpu_event_record,
    .stream_wait = hs_cpu_stream_wait,
    .event_synchronize = hs_cpu_event_synchronize,
    .gemm = hs_cpu_gemm,
    .add_bias = hs_cpu_add_bias,
    .bias_grad = hs_cpu_bias_grad,
    .u8_to_float = hs_cpu_u8_to_float,
    .relu_forward = hs_cpu_relu_forward,
    .relu_backward = hs_cpu_relu_backward,
    .to_half = hs_cpu_to_half,
    .from_half = hs_cpu_from_half,
    .dropout_forward = hs_cpu_dropout_forward,
    .dropout_backward = hs_cpu_dropout_backward,
    .conv2d_workspace_bytes = hs_cpu_conv2d_workspace_bytes,
    .conv2d_forward = hs_cpu_conv2d_forward,
    .conv2d_backward = hs_cpu_conv2d_backward,
    .maxpool2d_forward = hs_cpu_maxpool2d_forward,
    .maxpool2d_backward = hs_cpu_maxpool2d_backward,
    .log_softmax_nll_forward = hs_cpu_log_softmax_nll_forward,
    .log_softmax_nll_backward = hs_cpu_log_softmax_nll_backward,
    .sumsq_tensors = hs_cpu_sumsq_tensors,
    .scale_tensors = hs_cpu_scale_tensors,
    .adam_update = hs_cpu_adam_update,
    .adadelta_update = hs_cpu_adadelta_update,
    .sgd_update = hs_cpu_sgd_update,
    .lamb_update = hs_cpu_lamb_update,
    .gather_rows = hs_cpu_gather_rows,
    .scatter_add_rows = hs_cpu_scatter_add_rows,
    .add_bias_strided = hs_cpu_add_bias_strided,
    .bias_grad_strided = hs_cpu_bias_grad_strided,
    .layernorm_forward = hs_cpu_layernorm_forward,
    .layernorm_backward = hs_cpu_layernorm_backward,
    .gelu_forward = hs_cpu_gelu_forward,
    .bias_gelu_forward = hs_cpu_bias_gelu_forward,
    .gelu_backward = hs_cpu_gelu_backward,
    .tanh_forward = hs_cpu_tanh_forward,
    .tanh_backward = hs_cpu_tanh_backward,
    .attention_mask_bias = hs_cpu_attention_mask_bias,
    .attention_forward = hs_cpu_attention_forward,
    .attention_backward = hs_cpu_attention_backward,
    .rel_attention_forward = hs_cpu_rel_attention_forward,
    .rel_attention_backward = hs_cpu_rel_attention_backward,
    .softmax_xent_forward = hs_cpu_softmax_xent_forward,
    .softmax_xent_backward = hs_cpu_softmax_xent_backward,
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
