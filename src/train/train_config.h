/* The settings of a run from the experiment file, typed and checked once: the trainer's (the
 * `training`, `checkpoint`, `log`, `distributed`, `loss_scaler` and `lr_scheduler` groups and the
 * top-level keys) and the task's (hs_task_settings: `task`, `data`, the model's group), as the optimizer
 * (optim_config.c) reads its own. `hetseq train` and `hetseq eval` hand these down; nothing below them
 * looks a key up by name. Types, defaults and ranges come from the config schema (src/config_schema.c,
 * docs/configuration.md). */
#ifndef HS_TRAIN_TRAIN_CONFIG_H
#define HS_TRAIN_TRAIN_CONFIG_H

#include <stdint.h>

#include "config.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "tasks/task_settings.h"
#include "train/loss_scaler.h"

#define HS_MAX_UPDATE_FREQ_LIST 64
#define HS_MAX_RANK_LIST 4096 /* distributed.weights and distributed.rank_max_sentences */

typedef struct hs_train_config {
    hs_task_settings task;  /* task, data.*, the model, training.max_sentences, seed */
    const char *device;     /* device */
    int cuda_graphs;        /* cuda_graphs (update_graphs.h); cuda_graphs_set: not the default */
    int cuda_graphs_set;
    const char *precision; /* "fp32" | "tf32" | "bf16" | "fp16": the backend refuses what it cannot run
                            * (hs_backend_with_precision) */
    /* training */
    int64_t max_epoch, max_update;  /* 0 = unlimited (not both) */
    int n_update_freq;              /* update_freq[e-1] for epoch e; the last value repeats */
    int64_t update_freq[HS_MAX_UPDATE_FREQ_LIST];
    int max_update_freq;            /* the largest: micro-batches of one prefetch request */
    int64_t validate_interval, validate_interval_updates; /* 0 with training.disable_validation */
    hs_optim_settings optim;        /* optimizer.* (hs_train_config_load only) */
    hs_loss_scaler_config scaler;   /* loss_scaler.*: enabled resolved against precision */
    hs_lr_settings lr;              /* lr_scheduler.* and optimizer.lr */
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

/* `hetseq train`: reads and checks the settings, the task's model included (no stopping rule, a too
 * long update_freq list or a bad model setting ends every rank with a message: collective). The strings
 * belong to cfg. */
void hs_train_config_load(const hs_config *cfg, hs_train_config *tc);
/* `hetseq eval`: the same without the checks of training (stopping rule, loss scaler, update_freq). */
void hs_eval_config_load(const hs_config *cfg, hs_train_config *tc);
/* Reads only, on any one rank, without the model (a checkpoint's saved configuration, for the resume
 * checks). */
void hs_train_config_read(const hs_config *cfg, hs_train_config *tc);
/* loss_scaler.* with enabled resolved against precision (any rank; no checks across keys: a saved
 * configuration is only compared). */
void hs_loss_scaler_config_read(const hs_config *cfg, const char *precision, hs_loss_scaler_config *sc);
/* Reads and checks what the schema's per-key ranges cannot (min_scale <= init_scale <= max_scale):
 * every rank stops with one message naming the keys. */
void hs_loss_scaler_config_load(const hs_config *cfg, const char *precision, hs_loss_scaler_config *sc);
/* update_freq of epoch e (1-based): the list's last value repeats. */
int64_t hs_train_config_update_freq(const hs_train_config *tc, int64_t epoch);

#endif
