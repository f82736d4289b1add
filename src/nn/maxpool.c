/* Max pooling k×k with stride k (non-overlapping windows, floor mode as in F.max_pool2d(x, k)). */
#include "nn/layers.h"

/* y[n,c,h/k,w/k] = max of each window of x[n,c,h,w]; argmax = winner's index in its h*w plane */
void hs_maxpool2d_forward(const hs_backend *be, float *y, int32_t *argmax, const float *x, int n, int c, int h,
                          int w, int k) {
    be->maxpool2d_forward(be, y, argmax, x, n, c, h, w, k);
}

/* ∂L/∂x = ∂L/∂y at each window's winner (first maximum on ties), 0 elsewhere */
void hs_maxpool2d_backward(const hs_backend *be, float *dx, const float *dy, const int32_t *argmax, int n, int c,
                           int h, int w, int k) {
    be->maxpool2d_backward(be, dx, dy, argmax, n, c, h, w, k);
}
