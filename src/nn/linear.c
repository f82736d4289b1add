/* Linear layer, PyTorch layout W[out,in]. */
#include "nn/layers.h"

/* y[B,out] = x[B,in] · W[out,in]ᵀ + b[out] */
void hs_linear_forward(const hs_backend *be, float *y, const float *x, const float *w, const float *b, int batch,
                       int in, int out) {
    be->gemm_bias(be, y, out, x, w, b, batch, in, out);
}

/* ∂L/∂W[out,in] += dy[B,out]ᵀ · x[B,in];  ∂L/∂b[out] += Σ_B dy (both written when overwrite);
 * ∂L/∂x[B,in] = dy[B,out] · W[out,in] */
void hs_linear_backward(const hs_backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                        const float *w, int batch, int in, int out, int overwrite) {
    be->gemm_wgrad_bgrad(be, dw, db, dy, out, x, batch, in, out, overwrite);
    if (dx) be->gemm(be, 0, 0, batch, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
}

void hs_linear_forward_rounded(const hs_backend *be, uint16_t *y16, float *y, const float *x, const float *w,
                               const float *b, int batch, int in, int out) {
    if (!hs_precision_is_16bit(be->precision)) {
        if (b)
            hs_linear_forward(be, y, x, w, b, batch, in, out);
        else
            be->gemm(be, 0, 1, batch, out, in, 1.0f, x, in, w, in, 0.0f, y, out);
        return;
    }
    be->gemm_bias_half(be, y16, y, x, w, b, batch, in, out);
    if (y16) be->bind_half_only(be, y, y16, (size_t)batch * (size_t)out);
}

void hs_linear_dx_rounded(const hs_backend *be, uint16_t *dx16, float *dx, const float *dy, const float *w, int batch,
                          int in, int out) {
    if (!hs_precision_is_16bit(be->precision)) {
        be->gemm(be, 0, 0, batch, in, out, 1.0f, dy, out, w, in, 0.0f, dx, in);
        return;
    }
    be->gemm_half_out(be, dx16, dx, 0, 0, batch, in, out, dy, out, w, in);
    if (dx16) be->bind_half_only(be, dx, dx16, (size_t)batch * (size_t)in);
}
