/* LayerNorm over the last dimension (TF-style BertLayerNorm), alone or with the post-LN residual add
 * folded in (one pass reads both inputs, writes the sum the backward pass needs and the output). */
#include "nn/bert_layers.h"

/* y[R,C] = gamma·(x - mean)/sqrt(var + eps) + beta; mean[R], rstd[R] kept */
void hs_layernorm_forward(const hs_backend *be, float *y, float *mean, float *rstd, const float *x,
                          const float *gamma, const float *beta, int rows, int cols, float eps) {
    be->layernorm_forward(be, y, NULL, mean, rstd, x, NULL, gamma, beta, rows, cols, eps);
}

/* x_sum[R,C] = a + residual; y = LayerNorm(x_sum) */
void hs_add_layernorm_forward(const hs_backend *be, float *y, float *x_sum, float *mean, float *rstd,
                              const float *a, const float *residual, const float *gamma, const float *beta,
                              int rows, int cols, float eps) {
    be->layernorm_forward(be, y, x_sum, mean, rstd, a, residual, gamma, beta, rows, cols, eps);
}

/* ∂L/∂x = rstd·(g - mean(g) - x̂·mean(g·x̂)), g = dy·gamma;  ∂L/∂gamma += Σ dy·x̂;  ∂L/∂beta += Σ dy */
void hs_layernorm_backward(const hs_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy,
                           const float *x, const float *mean, const float *rstd, const float *gamma, int rows,
                           int cols) {
    be->layernorm_backward(be, dx, dgamma, dbeta, dy, x, mean, rstd, gamma, rows, cols);
}
