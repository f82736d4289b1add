/* Optimizers on the flat parameter/gradient buffers. State buffers have the parameter table's layout,
 * so the checkpoint stores them per tensor under the parameter names. */
#ifndef HS_OPTIM_OPTIMIZER_H
#define HS_OPTIM_OPTIMIZER_H

#include "config.h" /* (hs_optim_settings_load) */
#include "nn/params.h"

#define HS_OPTIM_MAX_STATES 3

/* Which update rule; weight decay:
 *   ADAM      HetSeq/fairseq Adam, decoupled decay p -= lr*wd*p on EVERY tensor (HetSeq has no exclusion)
 *   ADAMW     torch.optim.AdamW, decoupled decay only on tensors whose weight_decay flag is set
 *   ADADELTA  torch Adadelta, L2 decay (g += wd*p) on every tensor
 *   SGD       torch SGD (momentum, dampening 0, no Nesterov), L2 decay on every tensor
 *   LAMB      NVLAMB as apex FusedLAMB runs it (NVIDIA BERT): global-norm clipping inside the step,
 *             decoupled decay and the per-tensor trust ratio only on flagged tensors (by default) */
typedef enum { HS_OPTIM_ADAM, HS_OPTIM_ADAMW, HS_OPTIM_ADADELTA, HS_OPTIM_SGD, HS_OPTIM_LAMB } hs_optim_kind;

typedef struct hs_optimizer {
    const char *name;             /* "adam" | "adamw" | "adadelta" | "sgd" | "lamb" */
    hs_optim_kind kind;
    hs_params *params;
    int n_states;
    /* PyTorch names: "exp_avg", "exp_avg_sq" (adam, adamw, lamb); "square_avg", "acc_delta" (adadelta);
     * "momentum_buffer" (sgd with momentum) */
    const char *state_names[HS_OPTIM_MAX_STATES];
    float *state[HS_OPTIM_MAX_STATES];            /* device, params->total floats each (SGD without momentum: none) */
    int64_t step;                 /* number of steps taken */
    /* hyper-parameters from the config (double, as PyTorch's Python floats; see backend.h) */
    double beta1, beta2, eps, weight_decay, rho, momentum;
    /* lamb only (set after hs_optimizer_create_named; hs_optimizer_create takes them from the settings):
     * max_grad_norm: clip the global gradient norm to this inside the step (apex max_grad_norm; 0 = no
     * clipping; created as 0); trust_ratio_on_no_decay: 1 = trust ratio on every tensor (apex
     * use_nvlamb, pre-2020 apex), 0 = only on tensors with weight decay (apex 2020+; created as 0). */
    double max_grad_norm;
    int trust_ratio_on_no_decay;
    double *lamb_norms; /* lamb: device float64 [2·count], each tensor's Σ p², Σ u² of the last step */
} hs_optimizer;

/* The experiment file's optimizer group, typed (the learning rate is not here: the scheduler passes it
 * to every step). */
typedef struct hs_optim_settings {
    const char *name;             /* optimizer.name */
    double beta1, beta2;          /* optimizer.adam_betas (adam, adamw, lamb) */
    double eps;                   /* the chosen optimizer's own: optimizer.adadelta_eps or optimizer.adam_eps */
    double weight_decay;          /* optimizer.weight_decay */
    double rho;                   /* optimizer.adadelta_rho */
    double momentum;              /* optimizer.momentum (sgd) */
    double clip_norm;             /* optimizer.clip_norm: the trainer clips, or lamb inside its step */
    int trust_ratio_on_no_decay;  /* optimizer.lamb_trust_ratio_on_no_decay */
} hs_optim_settings;

/* Reads the optimizer group (optim_config.c; adam_betas not of two values ends every rank with a
 * message naming it). */
void hs_optim_settings_load(const hs_config *cfg, hs_optim_settings *os);
/* From the settings: hs_optimizer_create_named, then lamb's clipping (max_grad_norm = clip_norm) and
 * trust-ratio switch. Unknown names end every rank with a message. */
hs_optimizer *hs_optimizer_create(const hs_optim_settings *os, hs_params *params);
/* The same without a config (tests, tools). eps is the chosen optimizer's own epsilon; parameters an
 * optimizer does not use are ignored. State buffers start at zero, step at 0. */
hs_optimizer *hs_optimizer_create_named(const char *name, hs_params *params, double beta1, double beta2, double eps,
                                        double weight_decay, double rho, double momentum);
/* One update with learning rate lr on params->grad (already averaged, and clipped unless the optimizer
 * clips internally): o->step += 1, then every tensor of the table is updated over its own elements
 * (padding between tensors stays zero). Every tensor has a gradient here (zero if unused), so unlike
 * PyTorch no parameter is skipped. lamb computes the global gradient norm itself (one extra pass). */
void hs_optimizer_step(hs_optimizer *o, double lr);
/* The same with the global gradient norm already known (grad_norm = hs_grad_norm(o->params), as the
 * trainer computes it for its log anyway); only optimizers that clip internally use it. */
void hs_optimizer_step_with_grad_norm(hs_optimizer *o, double lr, double grad_norm);
/* 1 if the optimizer clips the gradients by their global norm itself (lamb: g / (norm/max_norm) before
 * the moments, as apex FusedLAMB): the caller must then not clip them (hs_clip_grad_norm would clip a
 * second time, with torch's slightly different coefficient max_norm/(norm+1e-6)). params->grad is
 * left unchanged by such an optimizer. */
int hs_optimizer_clips_internally(const hs_optimizer *o);
void hs_optimizer_free(hs_optimizer *o);

/* Global L2 norm of params->grad: sumsq[i] = Σ g² of tensor i (device float64 [params->count]) and
 * *total = Σ_i sumsq[i] in table order (device float64), one multi-tensor op that returns at once;
 * the norm is sqrt(*total) once the caller has downloaded it (the trainer, with its stats buffer). */
void hs_grad_sumsq(const hs_params *p, double *sumsq, double *total);
/* torch.nn.utils.clip_grad_norm_ given the pre-clip norm: if max_norm > 0, the norm is finite and
 * coef = max_norm / (norm + 1e-6) < 1, scale every gradient by coef (one multi-tensor op).
 * Returns 1 if it scaled. */
int hs_clip_grad_scale(hs_params *p, double norm, double max_norm);
/* Both in one call for tests and tools (waits for the norm): returns the pre-clip norm (non-finite if
 * a gradient is; then nothing is scaled and the caller decides). max_norm <= 0: norm only. */
double hs_clip_grad_norm(hs_params *p, double max_norm);
/* The global L2 norm of params->grad without clipping (waits for it; tests and tools). */
double hs_grad_norm(const hs_params *p);

#endif
