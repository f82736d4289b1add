/* Optimizers on the flat parameter/gradient buffers. State buffers have the parameter table's layout,
 * so the checkpoint stores them per tensor under the parameter names. */
#ifndef HS_OPTIM_OPTIMIZER_H
#define HS_OPTIM_OPTIMIZER_H

#include "config.h"
#include "nn/params.h"

#define HS_OPTIM_MAX_STATES 3

typedef struct hs_optimizer {
    const char *name;             /* "adam" | "adadelta" | "sgd" (later "adamw", "lamb") */
    hs_params *params;
    int n_states;
    const char *state_names[HS_OPTIM_MAX_STATES]; /* PyTorch names: "exp_avg", "exp_avg_sq", "square_avg", "acc_delta", "momentum_buffer" */
    float *state[HS_OPTIM_MAX_STATES];            /* device, params->total floats each */
    int64_t step;                 /* number of steps taken */
    /* hyper-parameters from the config */
    float beta1, beta2, eps, weight_decay, rho, momentum;
} hs_optimizer;

hs_optimizer *hs_optimizer_create(const hs_config *cfg, hs_params *params);
/* One update with learning rate lr on params->grad (already averaged and clipped). */
void hs_optimizer_step(hs_optimizer *o, double lr);
void hs_optimizer_free(hs_optimizer *o);

/* Global L2 norm of params->grad (double, fixed order); if max_norm > 0 and norm > max_norm, scale
 * the gradients by max_norm / (norm + 1e-6) (torch.nn.utils.clip_grad_norm_). Returns the pre-clip norm. */
double hs_clip_grad_norm(hs_params *p, double max_norm);

#endif
