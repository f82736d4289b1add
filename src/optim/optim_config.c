/* The optimizer from the experiment file's `optimizer` group (types, defaults and ranges are checked by
 * the config schema). */
#include <string.h>

#include "optim/optimizer.h"
#include "util/check.h"

void hs_optim_settings_load(const hs_config *cfg, hs_optim_settings *os) {
    memset(os, 0, sizeof *os);
    os->name = hs_cfg_string(cfg, "optimizer.name");
    if (hs_cfg_list_len(cfg, "optimizer.adam_betas") != 2) {
        char where[256];
        hs_die_all("optimizer.adam_betas (%s) must hold two values, e.g. [0.9, 0.999]",
                   hs_cfg_origin(cfg, "optimizer.adam_betas", where, (int)sizeof where));
    }
    os->beta1 = hs_cfg_float_elem(cfg, "optimizer.adam_betas", 0);
    os->beta2 = hs_cfg_float_elem(cfg, "optimizer.adam_betas", 1);
    os->eps = strcmp(os->name, "adadelta") == 0 ? hs_cfg_float(cfg, "optimizer.adadelta_eps")
                                                : hs_cfg_float(cfg, "optimizer.adam_eps");
    os->weight_decay = hs_cfg_float(cfg, "optimizer.weight_decay");
    os->rho = hs_cfg_float(cfg, "optimizer.adadelta_rho");
    os->momentum = hs_cfg_float(cfg, "optimizer.momentum");
    os->clip_norm = hs_cfg_float(cfg, "optimizer.clip_norm");
    os->trust_ratio_on_no_decay = hs_cfg_bool(cfg, "optimizer.lamb_trust_ratio_on_no_decay");
}

hs_optimizer *hs_optimizer_create(const hs_optim_settings *os, hs_params *params) {
    hs_optimizer *o = hs_optimizer_create_named(os->name, params, os->beta1, os->beta2, os->eps, os->weight_decay,
                                                os->rho, os->momentum);
    if (o->kind == HS_OPTIM_LAMB) {
        /* NVIDIA BERT: FusedLAMB(max_grad_norm=1.0); the trainer then leaves the clipping to the step */
        o->max_grad_norm = os->clip_norm;
        o->trust_ratio_on_no_decay = os->trust_ratio_on_no_decay;
    }
    return o;
}
