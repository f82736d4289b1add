/* The CPU backend's function table. */
#include "backend/cpu/cpu_ops.h"

static const hs_backend cpu_backend = {
    .name = "cpu",
    .alloc = hs_cpu_alloc,
    .free = hs_cpu_free,
    .upload = hs_cpu_upload,
    .download = hs_cpu_download,
    .copy = hs_cpu_copy,
    .zero = hs_cpu_zero,
    .synchronize = hs_cpu_synchronize,
    .gemm = hs_cpu_gemm,
    .add_bias = hs_cpu_add_bias,
    .bias_grad = hs_cpu_bias_grad,
    .u8_to_float = hs_cpu_u8_to_float,
    .relu_forward = hs_cpu_relu_forward,
    .relu_backward = hs_cpu_relu_backward,
    .dropout_forward = hs_cpu_dropout_forward,
    .dropout_backward = hs_cpu_dropout_backward,
    .conv2d_workspace_bytes = hs_cpu_conv2d_workspace_bytes,
    .conv2d_forward = hs_cpu_conv2d_forward,
    .conv2d_backward = hs_cpu_conv2d_backward,
    .maxpool2d_forward = hs_cpu_maxpool2d_forward,
    .maxpool2d_backward = hs_cpu_maxpool2d_backward,
    .log_softmax_nll_forward = hs_cpu_log_softmax_nll_forward,
    .log_softmax_nll_backward = hs_cpu_log_softmax_nll_backward,
    .sumsq = hs_cpu_sumsq,
    .scale = hs_cpu_scale,
    .adam_update = hs_cpu_adam_update,
    .adadelta_update = hs_cpu_adadelta_update,
    .sgd_update = hs_cpu_sgd_update,
};

const hs_backend *hs_backend_cpu(void) { return &cpu_backend; }
