/* Learning-rate schedules. HetSeq timing: the lr used by update k (1-based) is f(k-1): the schedule is
 * evaluated at start (step_update(0)) and after each update (step_update(num_updates)). */
#ifndef HS_OPTIM_LR_SCHEDULER_H
#define HS_OPTIM_LR_SCHEDULER_H

#include <stdint.h>

#include "config.h"

typedef struct hs_lr_scheduler {
    int kind;            /* internal enum */
    double base_lr;      /* current base (changes at epoch ends only with force_anneal) */
    double lr;           /* current lr */
    double end_lr, power;
    int64_t warmup, total;
    int force_anneal;    /* 0 = off */
} hs_lr_scheduler;

void hs_lr_init(hs_lr_scheduler *s, const hs_config *cfg);
/* After update num_updates (0 at start): sets and returns the lr for the next update. */
double hs_lr_step_update(hs_lr_scheduler *s, int64_t num_updates);
/* At the end of epoch `epoch` (1-based), HetSeq's step(epoch): force_anneal handling, then
 * step_update(num_updates). Returns the new lr. */
double hs_lr_step_epoch(hs_lr_scheduler *s, int epoch, int64_t num_updates);

#endif
