/* Inverted dropout (nn.Dropout with group = 1, nn.Dropout2d with group = h*w). The mask is not stored:
 * backward recomputes it from the same key, sample index and group index. */
#include "nn/layers.h"

/* y[B,per_sample] = x · keep / (1-p), keep ~ Bernoulli(1-p) per group */
void hs_dropout_forward(const hs_backend *be, const hs_dropout_mask *m, float *y, const float *x, int batch,
                        size_t per_sample) {
    be->dropout_forward(be, y, x, batch, per_sample, m->group, m->p, m->key, m->first_sample);
}

/* ∂L/∂x = ∂L/∂y · keep / (1-p) */
void hs_dropout_backward(const hs_backend *be, const hs_dropout_mask *m, float *dx, const float *dy, int batch,
                         size_t per_sample) {
    be->dropout_backward(be, dx, dy, batch, per_sample, m->group, m->p, m->key, m->first_sample);
}
