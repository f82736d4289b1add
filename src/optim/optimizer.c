/* The optimizers: state buffers in the parameter table's layout, one backend update call per tensor.
 * Reading the experiment file is in optim_config.c. */
#include "optim/optimizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/check.h"

static void add_state(hs_optimizer *o, const char *name) {
    hs_params *p = o->params;
    o->state_names[o->n_states] = name;
    o->state[o->n_states] = p->be->alloc(p->total * sizeof(float)); /* zero-filled, padding included */
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
        free(o);
        hs_die_all("optimizer.name = \"lamb\" is not available yet: it arrives with BERT support. Use \"adam\", "
                   "\"adamw\", \"adadelta\" or \"sgd\".");
    } else {
        free(o);
        hs_die_all("optimizer.name = \"%s\" is not an optimizer; choose \"adam\" (HetSeq), \"adamw\", \"adadelta\" "
                   "or \"sgd\".",
                   name);
    }
    return o;
}

void hs_optimizer_step(hs_optimizer *o, double lr) {
    hs_params *p = o->params;
    const hs_backend *be = p->be;
    o->step++;
    const int first_step = o->step == 1;
    hs_adam_hparams adam = {.lr = lr, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps, .step = o->step,
                            .decoupled = 1};
    if (o->kind == HS_OPTIM_ADAMW)
        /* torch AdamW: m̂/(sqrt(v̂) + eps) = sqrt(1-b2^t)·m/(sqrt(v) + eps·sqrt(1-b2^t)), so it is the
         * HetSeq update with eps scaled by sqrt(1-b2^t). */
        adam.eps = o->eps * sqrt(1.0 - pow(o->beta2, (double)o->step));

    for (int i = 0; i < p->count; i++) {
        const hs_tensor_info *t = &p->tensors[i];
        float *data = p->data + t->offset, *grad = p->grad + t->offset;
        switch (o->kind) {
        case HS_OPTIM_ADAM:
        case HS_OPTIM_ADAMW:
            adam.weight_decay = (o->kind == HS_OPTIM_ADAM || t->weight_decay) ? o->weight_decay : 0.0;
            be->adam_update(data, grad, o->state[0] + t->offset, o->state[1] + t->offset, t->numel, &adam);
            break;
        case HS_OPTIM_ADADELTA:
            be->adadelta_update(data, grad, o->state[0] + t->offset, o->state[1] + t->offset, t->numel, lr, o->rho,
                                o->eps, o->weight_decay);
            break;
        case HS_OPTIM_SGD:
            be->sgd_update(data, grad, o->n_states ? o->state[0] + t->offset : NULL, t->numel, lr, o->momentum,
                           o->weight_decay, first_step);
            break;
        }
    }
}

void hs_optimizer_free(hs_optimizer *o) {
    if (!o) return;
    for (int k = 0; k < o->n_states; k++) o->params->be->free(o->state[k]);
    free(o);
}
