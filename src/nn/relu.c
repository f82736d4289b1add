/* ReLU. The backward pass uses the forward output (y > 0 exactly where x > 0), so the layer can run in
 * place and keep a single buffer. */
#include "nn/layers.h"

/* y = max(x, 0) */
void hs_relu_forward(const hs_backend *be, float *y, const float *x, size_t count) { be->relu_forward(be, y, x, count); }

/* ∂L/∂x = ∂L/∂y · 1[y > 0] */
void hs_relu_backward(const hs_backend *be, float *dx, const float *dy, const float *y, size_t count) {
    be->relu_backward(be, dx, dy, y, count);
}
