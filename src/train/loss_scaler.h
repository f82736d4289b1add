/* Dynamic loss scaling for precision = "fp16" (torch.cuda.amp.GradScaler's rule, apex's
 * DynamicLossScaler defaults as NVIDIA's BERT recipe uses them):
 *
 *   the backward pass runs on S * loss, so small fp16 gradients do not flush to zero; after the gradient
 *   all-reduce the gradients are multiplied by 1/S (S is a power of two with the default factors, so
 *   scaling and unscaling are exact in fp32 barring denormals).
 *   every update:  overflow (a NaN or Inf anywhere in the summed gradient, agreed over all ranks)
 *                     -> the optimizer step is skipped, S *= backoff_factor, good_steps = 0
 *                  else good_steps += 1; when good_steps == growth_interval:
 *                     S = min(S * growth_factor, max_scale), good_steps = 0
 *   S < min_scale after a backoff: the run has diverged in fp16 (HS_SCALER_UNDERFLOW).
 *
 * The config group `loss_scaler` (docs/configuration.md); enabled = "auto" turns the scaler on for
 * fp16 only. "on" is allowed with any precision: in fp32/bf16 it changes nothing but the skipped
 * updates on overflow (tests use it). The state is saved in /train_state (docs/checkpoint-format.md). */
#ifndef HS_TRAIN_LOSS_SCALER_H
#define HS_TRAIN_LOSS_SCALER_H

#include <stdint.h>

typedef struct hs_loss_scaler_config {
    int enabled; /* enabled = "on", or "auto" with precision = "fp16" */
    double init_scale, growth_factor, backoff_factor, min_scale, max_scale;
    int64_t growth_interval;
} hs_loss_scaler_config;

typedef struct hs_loss_scaler {
    hs_loss_scaler_config cfg;
    double scale;        /* S: the factor of the loss in the backward pass */
    int64_t good_steps;  /* consecutive updates without overflow since the last change of S */
    int64_t skipped;     /* updates skipped for overflow since the start of training */
} hs_loss_scaler;

typedef enum {
    HS_SCALER_STEP,     /* no overflow: apply the update */
    HS_SCALER_SKIP,     /* overflow: drop the gradients, S backed off */
    HS_SCALER_UNDERFLOW /* overflow and S fell below min_scale: the run cannot go on in fp16 */
} hs_scaler_result;

/* (The settings are read by src/train/train_config.c: hs_loss_scaler_config_load.) */

/* Fresh state: S = init_scale, no good steps, nothing skipped. */
void hs_loss_scaler_init(hs_loss_scaler *s, const hs_loss_scaler_config *cfg);
/* The state a checkpoint saved; scale <= 0 (a checkpoint without scaler state, or of a run without
 * the scaler) keeps the fresh state. */
void hs_loss_scaler_restore(hs_loss_scaler *s, double scale, int64_t good_steps, int64_t skipped);
/* The rule above for one update; `overflow` must be the same on every rank. */
hs_scaler_result hs_loss_scaler_update(hs_loss_scaler *s, int overflow);

#endif
