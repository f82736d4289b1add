/* Dynamic loss scaling (see loss_scaler.h for the rule). */
#include "train/loss_scaler.h"

#include <string.h>

#include "util/check.h"

void hs_loss_scaler_config_read(const hs_config *cfg, const char *precision, hs_loss_scaler_config *sc) {
    memset(sc, 0, sizeof *sc);
    const char *enabled = hs_cfg_string(cfg, "loss_scaler.enabled");
    sc->enabled = !strcmp(enabled, "on") || (!strcmp(enabled, "auto") && precision && !strcmp(precision, "fp16"));
    sc->init_scale = hs_cfg_float(cfg, "loss_scaler.init_scale");
    sc->growth_factor = hs_cfg_float(cfg, "loss_scaler.growth_factor");
    sc->backoff_factor = hs_cfg_float(cfg, "loss_scaler.backoff_factor");
    sc->growth_interval = hs_cfg_int(cfg, "loss_scaler.growth_interval");
    sc->min_scale = hs_cfg_float(cfg, "loss_scaler.min_scale");
    sc->max_scale = hs_cfg_float(cfg, "loss_scaler.max_scale");
}

void hs_loss_scaler_config_load(const hs_config *cfg, const char *precision, hs_loss_scaler_config *sc) {
    hs_loss_scaler_config_read(cfg, precision, sc);
    /* The schema checks each key's range; what it cannot is their order. */
    const char *pairs[][2] = {{"loss_scaler.min_scale", "loss_scaler.init_scale"},
                              {"loss_scaler.init_scale", "loss_scaler.max_scale"}};
    for (int i = 0; i < 2; i++) {
        const double lo = hs_cfg_float(cfg, pairs[i][0]), hi = hs_cfg_float(cfg, pairs[i][1]);
        if (lo > hi) {
            char w0[256], w1[256];
            hs_die_all("%s = %.10g (%s) is larger than %s = %.10g (%s): loss_scaler needs min_scale <= init_scale <= "
                       "max_scale",
                       pairs[i][0], lo, hs_cfg_origin(cfg, pairs[i][0], w0, (int)sizeof w0), pairs[i][1], hi,
                       hs_cfg_origin(cfg, pairs[i][1], w1, (int)sizeof w1));
        }
    }
}

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
