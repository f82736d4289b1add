/* Dynamic loss scaling (see loss_scaler.h for the rule). */
#include "train/loss_scaler.h"

#include <string.h>

void hs_loss_scaler_init(hs_loss_scaler *s, const hs_loss_scaler_config *cfg) {
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    s->scale = cfg->init_scale;
}

void hs_loss_scaler_restore(hs_loss_scaler *s, double scale, int64_t good_steps, int64_t skipped) {
    if (!(scale > 0)) return;
    s->scale = scale;
    s->good_steps = good_steps;
    s->skipped = skipped;
}

hs_scaler_result hs_loss_scaler_update(hs_loss_scaler *s, int overflow) {
    if (overflow) {
        s->scale *= s->cfg.backoff_factor;
        s->good_steps = 0;
        s->skipped++;
        return s->scale < s->cfg.min_scale ? HS_SCALER_UNDERFLOW : HS_SCALER_SKIP;
    }
    if (++s->good_steps >= s->cfg.growth_interval) {
        /* torch's _amp_update_scale: grow, then clamp (apex: max_loss_scale) */
        const double grown = s->scale * s->cfg.growth_factor;
        s->scale = grown < s->cfg.max_scale ? grown : s->cfg.max_scale;
        s->good_steps = 0;
    }
    return HS_SCALER_STEP;
}
