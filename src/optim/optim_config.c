/* The optimizer and the learning-rate schedule from the experiment file's `optimizer` and
 * `lr_scheduler` groups (types, defaults and ranges are checked by the config schema). */
#include <string.h>

#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "util/check.h"

hs_optimizer *hs_optimizer_create(const hs_config *cfg, hs_params *params) {
    const char *name = hs_cfg_string(cfg, "optimizer.name");
    if (hs_cfg_list_len(cfg, "optimizer.adam_betas") != 2) {
        char where[256];
        hs_die_all("optimizer.adam_betas (%s) must hold two values, e.g. [0.9, 0.999]",
                   hs_cfg_origin(cfg, "optimizer.adam_betas", where, (int)sizeof where));
    }
    const double beta1 = hs_cfg_float_elem(cfg, "optimizer.adam_betas", 0);
    const double beta2 = hs_cfg_float_elem(cfg, "optimizer.adam_betas", 1);
    const double eps = strcmp(name, "adadelta") == 0 ? hs_cfg_float(cfg, "optimizer.adadelta_eps")
                                                     : hs_cfg_float(cfg, "optimizer.adam_eps");
    hs_optimizer *o = hs_optimizer_create_named(name, params, beta1, beta2, eps,
                                                hs_cfg_float(cfg, "optimizer.weight_decay"),
                                                hs_cfg_float(cfg, "optimizer.adadelta_rho"),
                                                hs_cfg_float(cfg, "optimizer.momentum"));
    if (o->kind == HS_OPTIM_LAMB) {
        /* NVIDIA BERT: FusedLAMB(max_grad_norm=1.0); the trainer then leaves the clipping to the step */
        o->max_grad_norm = hs_cfg_float(cfg, "optimizer.clip_norm");
        o->trust_ratio_on_no_decay = hs_cfg_bool(cfg, "optimizer.lamb_trust_ratio_on_no_decay");
    }
    return o;
}

void hs_lr_init(hs_lr_scheduler *s, const hs_config *cfg) {
    hs_lr_init_params(s, hs_cfg_string(cfg, "lr_scheduler.name"), hs_cfg_float(cfg, "optimizer.lr"),
                      hs_cfg_int(cfg, "lr_scheduler.warmup_updates"),
                      hs_cfg_float(cfg, "lr_scheduler.warmup_proportion"),
                      hs_cfg_int(cfg, "lr_scheduler.total_num_update"),
                      hs_cfg_float(cfg, "lr_scheduler.end_learning_rate"), hs_cfg_float(cfg, "lr_scheduler.power"),
                      (int)hs_cfg_int(cfg, "lr_scheduler.force_anneal"));
}
