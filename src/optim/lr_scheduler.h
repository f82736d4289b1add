/* Learning-rate schedules. HetSeq timing: the lr used by update k (1-based) is f(k-1): the schedule is
 * evaluated at start (step_update(0)) and after each update (step_update(num_updates)). */
#ifndef HS_OPTIM_LR_SCHEDULER_H
#define HS_OPTIM_LR_SCHEDULER_H

#include <stdint.h>

#include "config.h"

/* Schedules (n = updates done; the value is the lr of update n+1). docs/optimization.md has the table.
 *   polynomial_decay  HetSeq/fairseq: warmup base·n/W for n <= W, then
 *                     (base-end)·(1-(n-W)/(T-W))^power + end, end for n >= T
 *   poly_warmup       NVIDIA BERT: p = (n+1)/T; base·p/wp for p < wp, else end + (base-end)·(1-p)^power
 *   cosine            warmup base·n/W for n < W, then end + (base-end)·(1+cos(pi·(n-W)/(T-W)))/2, end for n >= T
 *   inverse_sqrt      fairseq: warmup base·n/W for n < W, then base·sqrt(W/n)   (needs W >= 1)
 *   constant          warmup base·n/W for n < W (if W > 0), then base */
typedef struct hs_lr_scheduler {
    int kind;            /* internal enum */
    const char *name;    /* the schedule's config name */
    double init_lr;      /* optimizer.lr: the base every epoch restarts from without force_anneal */
    double base_lr;      /* current base (changes at epoch ends only with force_anneal) */
    double lr;           /* current lr */
    double end_lr, power;
    double warmup_proportion; /* poly_warmup: warmup length as a fraction of total */
    int64_t warmup, total;
    int force_anneal;    /* polynomial_decay: from this epoch on, each epoch end re-bases on the current lr; 0 = off */
} hs_lr_scheduler;

/* The experiment file's lr_scheduler group and optimizer.lr, typed (read by src/train/train_config.c). */
typedef struct hs_lr_settings {
    const char *name;         /* lr_scheduler.name */
    double lr;                /* optimizer.lr: the base lr */
    int64_t warmup_updates;   /* lr_scheduler.warmup_updates */
    double warmup_proportion; /* lr_scheduler.warmup_proportion */
    int64_t total_num_update; /* lr_scheduler.total_num_update */
    double end_learning_rate, power; /* lr_scheduler.end_learning_rate, lr_scheduler.power */
    int force_anneal;         /* lr_scheduler.force_anneal */
} hs_lr_settings;

/* From the settings. Sets s->lr = f(0). */
void hs_lr_init(hs_lr_scheduler *s, const hs_lr_settings *ls);
/* The same without a config (tests, tools). An unknown name or an impossible combination ends every
 * rank with a message naming the lr_scheduler key. */
void hs_lr_init_params(hs_lr_scheduler *s, const char *name, double base_lr, int64_t warmup, double warmup_proportion,
                       int64_t total, double end_lr, double power, int force_anneal);
/* After update num_updates (0 at start): sets and returns the lr for the next update. */
double hs_lr_step_update(hs_lr_scheduler *s, int64_t num_updates);
/* At the end of epoch `epoch` (1-based), HetSeq's step(epoch): force_anneal handling, then
 * step_update(num_updates). Returns the new lr. */
double hs_lr_step_epoch(hs_lr_scheduler *s, int epoch, int64_t num_updates);

#endif
