/* Neural-network layers as forward/backward pairs. Layers hold no state of their own: the model owns
 * parameters (in the hs_params table) and activations, and passes device pointers. Every layer reaches
 * the device only through the backend table, so the same layer code runs on the CPU and on GPUs.
 * Conventions (backend.h): row-major float32; parameter gradients ACCUMULATE (+=), activation
 * gradients are overwritten. */
#ifndef HS_NN_LAYERS_H
#define HS_NN_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* ---- scratch memory ------------------------------------------------------------------------------ */
/* A device scratch buffer that grows on demand (conv2d's im2col columns). Starts zeroed ({0}). */
typedef struct hs_workspace {
    void *ptr;
    size_t bytes;
} hs_workspace;
/* Make ws at least `bytes` large (contents are not kept when it grows). */
void hs_workspace_reserve(const hs_backend *be, hs_workspace *ws, size_t bytes);
void hs_workspace_release(const hs_backend *be, hs_workspace *ws);

/* ---- linear (PyTorch nn.Linear, W[out,in]) --------------------------------------------------------- */
/* y[B,out] = x[B,in] · W[out,in]ᵀ + b[out] */
void hs_linear_forward(const hs_backend *be, float *y, const float *x, const float *w, const float *b, int batch,
                       int in, int out);
/* dW[out,in] += dyᵀ·x, db[out] += colsum(dy), dx[B,in] = dy·W (skipped when dx is NULL) */
void hs_linear_backward(const hs_backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                        const float *w, int batch, int in, int out);

/* ---- conv2d (stride 1, no padding; PyTorch nn.Conv2d, W[c_out,c_in,kh,kw]) ------------------------- */
/* y[n,c_out,oh,ow] = x[n,c_in,h,w] ⋆ W + b[c_out]; ws grows to what the backend asks for. */
void hs_conv2d_forward(const hs_backend *be, const hs_conv2d_shape *s, float *y, const float *x, const float *w,
                       const float *b, hs_workspace *ws);
/* dW += ∂L/∂W, db += ∂L/∂b, dx[n,c_in,h,w] = ∂L/∂x (skipped when dx is NULL, e.g. the first layer) */
void hs_conv2d_backward(const hs_backend *be, const hs_conv2d_shape *s, float *dx, float *dw, float *db,
                        const float *dy, const float *x, const float *w, hs_workspace *ws);

/* ---- max pooling k×k, stride k --------------------------------------------------------------------- */
/* y[n,c,h/k,w/k] = window max of x[n,c,h,w]; argmax[n,c,h/k,w/k] remembers the winner */
void hs_maxpool2d_forward(const hs_backend *be, float *y, int32_t *argmax, const float *x, int n, int c, int h,
                          int w, int k);
/* dx[n,c,h,w] = dy routed to the winners, 0 elsewhere */
void hs_maxpool2d_backward(const hs_backend *be, float *dx, const float *dy, const int32_t *argmax, int n, int c,
                           int h, int w, int k);

/* ---- ReLU -------------------------------------------------------------------------------------------- */
/* y[count] = max(x, 0); in place (y == x) is allowed */
void hs_relu_forward(const hs_backend *be, float *y, const float *x, size_t count);
/* dx[count] = dy * 1[y > 0] from the forward OUTPUT y; in place (dx == dy) is allowed */
void hs_relu_backward(const hs_backend *be, float *dx, const float *dy, const float *y, size_t count);

/* ---- dropout (inverted) -------------------------------------------------------------------------------- */
/* What one dropout call needs: rate p (0 = off: a plain copy), values per drop decision (1 for
 * element-wise nn.Dropout, h*w for channel-wise nn.Dropout2d), and the mask key and global index of the
 * first sample (masks depend on (key, global sample, group) only). */
typedef struct hs_dropout_mask {
    float p;
    size_t group;
    uint64_t key;
    int64_t first_sample;
} hs_dropout_mask;
/* y[B,per_sample] = x · mask / (1-p) */
void hs_dropout_forward(const hs_backend *be, const hs_dropout_mask *m, float *y, const float *x, int batch,
                        size_t per_sample);
/* dx[B,per_sample] = dy · mask / (1-p), the same mask recomputed from the key */
void hs_dropout_backward(const hs_backend *be, const hs_dropout_mask *m, float *dx, const float *dy, int batch,
                         size_t per_sample);

/* ---- log_softmax + NLL loss (F.log_softmax then F.nll_loss(reduction='sum')) ----------------------------- */
/* logprobs[B,classes] = log_softmax(logits); stats[0] += Σ NLL, stats[1] += B, stats[2] += correct, where
 * stats is a device float64 [3] (e.g. &hs_stats.loss_sum of a device stats buffer: loss_sum,
 * sample_count, correct). labels: device int32, each in [0, classes) (checked on the host when staged). */
void hs_log_softmax_nll_forward(const hs_backend *be, float *logprobs, const float *logits, const int32_t *labels,
                                int batch, int classes, double *stats);
/* dlogits[B,classes] = scale · (softmax - onehot(label)): the gradient of scale · Σ NLL */
void hs_log_softmax_nll_backward(const hs_backend *be, float *dlogits, const float *logprobs,
                                 const int32_t *labels, int batch, int classes, float scale);

#endif
