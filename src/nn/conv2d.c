/* 2-d convolution (stride 1, no padding), PyTorch layout W[c_out,c_in,kh,kw]. The backend chooses the
 * algorithm (im2col + GEMM on the CPU); the layer only keeps its scratch buffer large enough for the
 * shape of each call (a smaller batch reuses the buffer of a larger one). */
#include "nn/layers.h"

/* y[n,c_out,oh,ow] = Σ_{c,i,j} W[c_out,c,i,j] · x[n,c,oy+i,ox+j] + b[c_out] */
void hs_conv2d_forward(const hs_backend *be, const hs_conv2d_shape *s, float *y, const float *x, const float *w,
                       const float *b, hs_workspace *ws) {
    hs_workspace_reserve(be, ws, be->conv2d_workspace_bytes(be, s));
    be->conv2d_forward(be, s, y, x, w, b, ws->ptr);
}

/* ∂L/∂W[c_out,c,i,j] += Σ_{n,oy,ox} dy[n,c_out,oy,ox] · x[n,c,oy+i,ox+j];  ∂L/∂b += Σ dy;
 * ∂L/∂x[n,c,y,x] = Σ_{c_out,i,j} W[c_out,c,i,j] · dy[n,c_out,y-i,x-j] */
void hs_conv2d_backward(const hs_backend *be, const hs_conv2d_shape *s, float *dx, float *dw, float *db,
                        const float *dy, const float *x, const float *w, hs_workspace *ws) {
    hs_workspace_reserve(be, ws, be->conv2d_workspace_bytes(be, s));
    be->conv2d_backward(be, s, dx, dw, db, dy, x, w, ws->ptr);
}
