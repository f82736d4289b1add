/* The trainer's settings from the experiment file (the `training`, `checkpoint`, `log` and
 * `distributed` groups and the top-level keys it reads), typed and checked once, as the optimizer
 * (optim_config.c) and BERT (bert_config.c) read theirs. Types, defaults and ranges come from the
 * config schema (src/config_schema.c, docs/configuration.md). */
#ifndef HS_TRAIN_TRAIN_CONFIG_H
#define HS_TRAIN_TRAIN_CONFIG_H

#include <stdint.h>

#include "config.h"
#include "train/loss_scaler.h"

#define HS_MAX_UPDATE_FREQ_LIST 64
#define HS_MAX_RANK_LIST 4096 /* distributed.weights and distributed.rank_max_sentences */

typedef struct hs_train_config {
    const char *task, *device, *data_path, *valid_subset; /* task, device, data.path, data.valid_subset */
    const char *precision; /* "fp32" | "tf32" | "bf16" | "fp16": the backend refuses what it cannot run
                            * (hs_backend_with_precision) */
    uint64_t seed;
    /* training */
    int64_t max_epoch, max_update;  /* 0 = unlimited (not both) */
    int max_sentences;              /* samples per micro-batch */
    int n_update_freq;              /* update_freq[e-1] for epoch e; the last value repeats */
    int64_t update_freq[HS_MAX_UPDATE_FREQ_LIST];
    int max_update_freq;            /* the largest: micro-batches of one prefetch request */
    int64_t validate_interval, validate_interval_updates; /* 0 with training.disable_validation */
    double clip_norm;               /* optimizer.clip_norm */
    hs_loss_scaler_config scaler;   /* loss_scaler.*: enabled resolved against precision */
    /* checkpoint */
    const char *save_dir, *init_checkpoint;
    int no_save, keep_last;
    int64_t save_interval, save_interval_updates;
    int reset_dataloader, reset_optimizer, reset_lr_scheduler, reset_step;
    /* log */
    int log_interval;
    const char *log_format, *metrics_file;
    /* distributed */
    double stall_timeout;
    int64_t bucket_cap_mb;                /* gradient all-reduce buckets (MiB of fp32); 0 = one after backward */
    const char *allreduce_dtype;          /* "fp32" | "bf16" | "fp16" */
    int64_t check_replicas_every;
    int n_weights, n_rank_max_sentences;  /* list lengths (0 = not given) */
    double weights[HS_MAX_RANK_LIST];     /* distributed.weights */
    int32_t rank_max_sentences[HS_MAX_RANK_LIST];
    int balance_auto;                     /* distributed.balance == "auto" */
    int64_t balance_warmup, rebalance_every;
    int weighted;                         /* any of the three: shares replace HetSeq's equal micro-batches */
} hs_train_config;

/* Reads and checks the settings (no stopping rule or a too long update_freq list ends every rank with
 * a message: collective). The strings belong to cfg. */
void hs_train_config_load(const hs_config *cfg, hs_train_config *tc);
/* Reads only, on any one rank (a checkpoint's saved configuration, for the resume checks). */
void hs_train_config_read(const hs_config *cfg, hs_train_config *tc);
/* update_freq of epoch e (1-based): the list's last value repeats. */
int64_t hs_train_config_update_freq(const hs_train_config *tc, int64_t epoch);

#endif
