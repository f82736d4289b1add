/* Linear layer, PyTorch layout W[out,in]. */
#include "nn/layers.h"

/* y[B,out] = x[B,in] · W[out,in]ᵀ + b[out] */
void hs_linear_forward(const hs_backend *be, float *y, const float *x, const float *w, const float *b, int batch,
                       int in, int out) {
    be->gemm(be, 0, 1, batch, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
    be->add_bias(be, y, b, batch, out);
}

/* ∂L/∂W[out,in] += dy[B,out]ᵀ · x[B,in];  ∂L/∂b[out] += Σ_B dy;  ∂L/∂x[B,in] = dy[B,out] · W[out,in] */
void hs_linear_backward(const hs_backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                        const float *w, int batch, int in, int out) {
    be->gemm(be, 1, 0, out, in, batch, 1.0f, dy, out, x, in, 1.0f, dw, in);
    be->bias_grad(be, db, dy, batch, out);
    if (dx) be->gemm(be, 0, 0, batch, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}
