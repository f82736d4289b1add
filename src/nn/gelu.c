/* BERT's point-wise activations: exact-erf GELU (encoder FFN and MLM transform, with the bias add
 * fused in) and tanh (pooler). */
#include "nn/bert_layers.h"

/* y = 0.5·x·(1 + erf(x/√2)) */
void hs_gelu_forward(const hs_backend *be, float *y, const float *x, size_t count) { be->gelu_forward(be, y, x, count); }

/* x[R,C] += bias; y = gelu(x) */
void hs_bias_gelu_forward(const hs_backend *be, float *y, float *x, const float *bias, int rows, int cols) {
    be->bias_gelu_forward(be, y, x, bias, rows, cols);
}

/* ∂L/∂x = ∂L/∂y · (Φ(x) + x·φ(x)) */
void hs_gelu_backward(const hs_backend *be, float *dx, const float *dy, const float *x, size_t count) {
    be->gelu_backward(be, dx, dy, x, count);
}

/* y = tanh(x) */
void hs_tanh_forward(const hs_backend *be, float *y, const float *x, size_t count) { be->tanh_forward(be, y, x, count); }

/* ∂L/∂x = ∂L/∂y · (1 - y²) */
void hs_tanh_backward(const hs_backend *be, float *dx, const float *dy, const float *y, size_t count) {
    be->tanh_backward(be, dx, dy, y, count);
}
