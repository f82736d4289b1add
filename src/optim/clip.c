/* Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_ (HetSeq's clip_norm). */
#include <math.h>

#include "optim/optimizer.h"

double hs_grad_norm(const hs_params *p) {
    /* ||g||² = Σ_tensors Σ_i g_i², accumulated in double in table order: deterministic for a given model. */
    double sumsq = 0.0;
    for (int i = 0; i < p->count; i++) sumsq += p->be->sumsq(hs_param_grad(p, i), p->tensors[i].numel);
    return sqrt(sumsq);
}

double hs_clip_grad_norm(hs_params *p, double max_norm) {
    const hs_backend *be = p->be;
    const double norm = hs_grad_norm(p);
    if (max_norm <= 0.0 || !isfinite(norm)) return norm;

    /* torch: coef = max_norm / (norm + 1e-6), applied only when it shrinks the gradients. */
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0)
        for (int i = 0; i < p->count; i++) be->scale(hs_param_grad(p, i), (float)coef, p->tensors[i].numel);
    return norm;
}
