/* The optimizers: state buffers in the parameter table's layout, one multi-tensor backend op per step.
 * Reading the experiment file is in optim_config.c. */
#include "optim/optimizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"

static void add_state(hs_optimizer *o, const char *name) {
    hs_params *p = o->params;
    o->state_names[o->n_states] = name;
    o->state[o->n_states] = p->be->alloc(p->be, p->total * sizeof(float)); /* zero-filled, padding included */
    o->n_states++;
}

hs_optimizer *hs_optimizer_create_named(const char *name, hs_params *params, double beta1, double beta2, double eps,
                                        double weight_decay, double rho, double momentum) {
    if (!params->data) HS_FATAL("allocate the parameter table before the optimizer", "optimizer %s", name);
    hs_optimizer *o;
    HS_ALLOC(o, 1);
    o->params = params;
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    o->weight_decay = weight_decay;
    o->rho = rho;
    o->momentum = momentum;
    if (strcmp(name, "adam") == 0 || strcmp(name, "adamw") == 0) {
        o->kind = name[4] == 'w' ? HS_OPTIM_ADAMW : HS_OPTIM_ADAM;
        o->name = o->kind == HS_OPTIM_ADAMW ? "adamw" : "adam";
        add_state(o, "exp_avg");
        add_state(o, "exp_avg_sq");
    } else if (strcmp(name, "adadelta") == 0) {
        o->kind = HS_OPTIM_ADADELTA;
        o->name = "adadelta";
        add_state(o, "square_avg");
        add_state(o, "acc_delta");
    } else if (strcmp(name, "sgd") == 0) {
        o->kind = HS_OPTIM_SGD;
        o->name = "sgd";
        if (momentum != 0.0) add_state(o, "momentum_buffer"); /* torch keeps no buffer without momentum */
    } else if (strcmp(name, "lamb") == 0) {
        o->kind = HS_OPTIM_LAMB;
        o->name = "lamb";
        add_state(o, "exp_avg");
        add_state(o, "exp_avg_sq");
        o->lamb_norms = params->be->alloc(params->be, 2 * (size_t)(params->count ? params->count : 1) * sizeof(double));
    } else {
        free(o);
        hs_die_all("optimizer.name = \"%s\" is not an optimizer; choose \"adam\" (HetSeq), \"adamw\", \"lamb\", "
                   "\"adadelta\" or \"sgd\".",
                   name);
    }
    return o;
}

int hs_optimizer_clips_internally(const hs_optimizer *o) { return o->kind == HS_OPTIM_LAMB; }

/* LAMB, one step (apex FusedLAMB: stage 1 per element, stage 2 per tensor; formulas in optim_math.h).
 * Global clipping divisor d = norm/max_norm when norm > max_norm, else 1. Per tensor, with u the
 * Adam direction plus decay and both norms taken before the update:
 *   step = lr·||p||/||u||  if the tensor is trusted and both norms are non-zero, else lr;
 *   trusted = its weight decay is non-zero (flag set and optimizer.weight_decay > 0), or
 *   trust_ratio_on_no_decay. Then p -= step·u. One multi-tensor op; the per-tensor norms stay on the
 * device (o->lamb_norms). */
static void lamb_step(hs_optimizer *o, double lr, double grad_norm) {
    hs_params *p = o->params;
    const hs_backend *be = p->be;
    const int clipped = o->max_grad_norm > 0.0 && grad_norm > o->max_grad_norm;
    const hs_lamb_hparams h = {.lr = lr, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
                               .weight_decay = o->weight_decay, .step = o->step,
                               .grad_divisor = clipped ? grad_norm / o->max_grad_norm : 1.0,
                               .trust_ratio_on_no_decay = o->trust_ratio_on_no_decay};
    be->lamb_update(be, p->data, p->grad, o->state[0], o->state[1], p->table, p->count, o->lamb_norms, &h);
}

void hs_optimizer_step(hs_optimizer *o, double lr) {
    hs_optimizer_step_with_grad_norm(o, lr, hs_optimizer_clips_internally(o) ? hs_grad_norm(o->params) : 0.0);
}

void hs_optimizer_step_with_grad_norm(hs_optimizer *o, double lr, double grad_norm) {
    hs_params *p = o->params;
    const hs_backend *be = p->be;
    o->step++;
    switch (o->kind) {
    case HS_OPTIM_LAMB:
        lamb_step(o, lr, grad_norm);
        break;
    case HS_OPTIM_ADAM:
    case HS_OPTIM_ADAMW: {
        hs_adam_hparams adam = {.lr = lr, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps, .step = o->step,
                                .weight_decay = o->weight_decay, .decoupled = 1,
                                /* HetSeq's Adam decays every tensor, AdamW only the flagged ones */
                                .decay_flagged_only = o->kind == HS_OPTIM_ADAMW};
        if (o->kind == HS_OPTIM_ADAMW)
            /* torch AdamW: m̂/(sqrt(v̂) + eps) = sqrt(1-b2^t)·m/(sqrt(v) + eps·sqrt(1-b2^t)), so it is the
             * HetSeq update with eps scaled by sqrt(1-b2^t). */
            adam.eps = o->eps * sqrt(1.0 - pow(o->beta2, (double)o->step));
        be->adam_update(be, p->data, p->grad, o->state[0], o->state[1], p->table, p->count, &adam);
        break;
    }
    case HS_OPTIM_ADADELTA:
        be->adadelta_update(be, p->data, p->grad, o->state[0], o->state[1], p->table, p->count, lr, o->rho, o->eps,
                            o->weight_decay);
        break;
    case HS_OPTIM_SGD:
        be->sgd_update(be, p->data, p->grad, o->n_states ? o->state[0] : NULL, p->table, p->count, lr, o->momentum,
                       o->weight_decay, o->step == 1);
        break;
    }
}

void hs_optimizer_free(hs_optimizer *o) {
    if (!o) return;
    for (int k = 0; k < o->n_states; k++) o->params->be->free(o->params->be, o->state[k]);
    if (o->lamb_norms) o->params->be->free(o->params->be, o->lamb_norms);
    free(o);
}
