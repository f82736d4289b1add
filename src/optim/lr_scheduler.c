/* Learning-rate schedules as functions of the number of updates done (formulas in lr_scheduler.h and
 * docs/optimization.md). Reading the experiment file is in optim_config.c. */
#include "optim/lr_scheduler.h"

#include <math.h>
#include <string.h>

#include "util/check.h"

enum { LR_POLYNOMIAL_DECAY, LR_POLY_WARMUP, LR_COSINE, LR_INVERSE_SQRT, LR_CONSTANT };

static const struct {
    const char *name;
    int kind;
} schedules[] = {
    {"polynomial_decay", LR_POLYNOMIAL_DECAY}, {"poly_warmup", LR_POLY_WARMUP}, {"cosine", LR_COSINE},
    {"inverse_sqrt", LR_INVERSE_SQRT},         {"constant", LR_CONSTANT},
};

void hs_lr_init_params(hs_lr_scheduler *s, const char *name, double base_lr, int64_t warmup, double warmup_proportion,
                       int64_t total, double end_lr, double power, int force_anneal) {
    memset(s, 0, sizeof *s);
    s->kind = -1;
    for (size_t i = 0; i < sizeof schedules / sizeof schedules[0]; i++)
        if (strcmp(name, schedules[i].name) == 0) {
            s->kind = schedules[i].kind;
            s->name = schedules[i].name;
        }
    if (s->kind < 0)
        hs_die_all("lr_scheduler.name = \"%s\" is not a schedule; choose \"polynomial_decay\" (HetSeq), "
                   "\"poly_warmup\" (NVIDIA BERT), \"cosine\", \"inverse_sqrt\" or \"constant\".",
                   name);
    if (warmup < 0) hs_die_all("lr_scheduler.warmup_updates = %lld must be >= 0", (long long)warmup);
    if (s->kind == LR_POLY_WARMUP && total < 1)
        hs_die_all("lr_scheduler.name = \"poly_warmup\" needs lr_scheduler.total_num_update >= 1 (it is %lld): "
                   "the schedule is a fraction of the total number of updates",
                   (long long)total);
    if (s->kind == LR_POLY_WARMUP && !(warmup_proportion >= 0.0 && warmup_proportion <= 1.0))
        hs_die_all("lr_scheduler.warmup_proportion = %g must be in [0, 1]", warmup_proportion);
    if (s->kind == LR_COSINE && total <= warmup)
        hs_die_all("lr_scheduler.name = \"cosine\" needs total_num_update (%lld) > warmup_updates (%lld)",
                   (long long)total, (long long)warmup);
    if (s->kind == LR_INVERSE_SQRT && warmup < 1)
        hs_die_all("lr_scheduler.name = \"inverse_sqrt\" needs lr_scheduler.warmup_updates >= 1: the decay is "
                   "lr·sqrt(warmup_updates/num_updates)");
    if (force_anneal > 0 && s->kind != LR_POLYNOMIAL_DECAY)
        hs_die_all("lr_scheduler.force_anneal = %d only applies to \"polynomial_decay\", not \"%s\"; set it to 0",
                   force_anneal, s->name);
    s->init_lr = s->base_lr = base_lr;
    s->warmup = warmup;
    s->warmup_proportion = warmup_proportion;
    s->total = total;
    s->end_lr = end_lr;
    s->power = power;
    s->force_anneal = force_anneal;
    hs_lr_step_update(s, 0);
}

/* Linear warmup from 0: base·n/W. */
static double warmup_lr(const hs_lr_scheduler *s, int64_t n) { return s->base_lr * (double)n / (double)s->warmup; }

double hs_lr_step_update(hs_lr_scheduler *s, int64_t n) {
    const double base = s->base_lr, end = s->end_lr;
    const int64_t W = s->warmup, T = s->total;
    double lr = base;
    switch (s->kind) {
    case LR_POLYNOMIAL_DECAY: /* HetSeq: note n <= W, so update W+1 is the first at the full base */
        if (W > 0 && n <= W)
            lr = warmup_lr(s, n);
        else if (n >= T)
            lr = end;
        else
            lr = (base - end) * pow(1.0 - (double)(n - W) / (double)(T - W), s->power) + end;
        break;
    case LR_POLY_WARMUP: { /* NVIDIA: the update about to run is number n+1; progress = (n+1)/T */
        const double progress = (double)(n + 1) / (double)T;
        if (progress < s->warmup_proportion)
            lr = base * progress / s->warmup_proportion;
        else if (progress >= 1.0)
            lr = end;
        else
            lr = end + (base - end) * pow(1.0 - progress, s->power);
        break;
    }
    case LR_COSINE:
        if (n < W)
            lr = warmup_lr(s, n);
        else if (n >= T)
            lr = end;
        else
            lr = end + (base - end) * 0.5 * (1.0 + cos(M_PI * (double)(n - W) / (double)(T - W)));
        break;
    case LR_INVERSE_SQRT: /* fairseq: base·sqrt(W)·n^-1/2 after warmup */
        lr = n < W ? warmup_lr(s, n) : base * sqrt((double)W) / sqrt((double)n);
        break;
    case LR_CONSTANT:
        lr = (W > 0 && n < W) ? warmup_lr(s, n) : base;
        break;
    }
    s->lr = lr;
    return lr;
}

double hs_lr_step_epoch(hs_lr_scheduler *s, int epoch, int64_t num_updates) {
    /* HetSeq's step(epoch): before force_anneal the base is the configured lr; from force_anneal on it is
     * the optimizer's current (already decayed) lr, so the decay compounds at every epoch end. */
    if (s->kind == LR_POLYNOMIAL_DECAY)
        s->base_lr = (s->force_anneal > 0 && epoch >= s->force_anneal) ? s->lr : s->init_lr;
    return hs_lr_step_update(s, num_updates);
}

void hs_lr_init(hs_lr_scheduler *s, const hs_lr_settings *ls) {
    hs_lr_init_params(s, ls->name, ls->lr, ls->warmup_updates, ls->warmup_proportion, ls->total_num_update,
                      ls->end_learning_rate, ls->power, ls->force_anneal);
}
