/* Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_ (HetSeq's clip_norm): the norm is
 * one multi-tensor op into device memory, the scaling one op over the flat gradient buffer. */
#include <math.h>
#include <stdlib.h>

#include "optim/optimizer.h"
#include "util/check.h"

void hs_grad_sumsq(const hs_params *p, double *sumsq, double *total) {
    /* ||g||² = Σ_tensors Σ_i g_i², in double in table order: deterministic for a given model. */
    p->be->sumsq_tensors(p->be, sumsq, total, p->grad, p->table, p->count);
}

int hs_clip_grad_scale(hs_params *p, double norm, double max_norm) {
    if (max_norm <= 0.0 || !isfinite(norm)) return 0;
    /* torch: coef = max_norm / (norm + 1e-6), applied only when it shrinks the gradients. */
    const double coef = max_norm / (norm + 1e-6);
    if (coef >= 1.0) return 0;
    p->be->scale_tensors(p->be, p->grad, (float)coef, p->table, p->count);
    return 1;
}

double hs_grad_norm(const hs_params *p) {
    const hs_backend *be = p->be;
    double *dev = be->alloc(be, ((size_t)p->count + 1) * sizeof(double)); /* [count] per tensor, [count] total */
    hs_grad_sumsq(p, dev, dev + p->count);
    double total;
    be->download(be, &total, dev + p->count, sizeof total);
    be->free(be, dev);
    return sqrt(total);
}

double hs_clip_grad_norm(hs_params *p, double max_norm) {
    const double norm = hs_grad_norm(p);
    hs_clip_grad_scale(p, norm, max_norm);
    return norm;
}
