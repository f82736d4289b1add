/* Linear layer, PyTorch layout W[out,in]. */
#include "nn/layers.h"

/* y[B,out] = x[B,in] · W[out,in]ᵀ + b[out] */
void hs_linear_forward(const hs_backend *be, float *y, const float *x, const float *w, const float *b, int batch,
                       int in, int out) {
    be->gemm_bias(be, y, out, x, w, b, batch, in, out);
}

/* ∂L/∂W[out,in] += dy[B,out]ᵀ · x[B,in];  ∂L/∂b[out] += Σ_B dy (written when db_zero);
 * ∂L/∂x[B,in] = dy[B,out] · W[out,in] */
void hs_linear_backward(const hs_backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                        const float *w, int batch, int in, int out, int db_zero) {
    be->gemm_wgrad_bgrad(be, dw, db, dy, out, x, batch, in, out, db_zero);
    if (dx) be->gemm(be, 0, 0, batch, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}
