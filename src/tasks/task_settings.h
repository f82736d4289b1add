/* What a task is built from: the experiment file's settings of the task (`task`, `data.*`, the model's
 * group, `training.max_sentences`, `seed`), read and checked once by the trainer's settings loading
 * (src/train/train_config.c) and handed down typed, so no task or model looks a key up by name. */
#ifndef HS_TASKS_TASK_SETTINGS_H
#define HS_TASKS_TASK_SETTINGS_H

#include <stdint.h>

#include "models/bert_config.h"
#include "models/txl_config.h"

typedef struct hs_task_settings {
    const char *name;                        /* task */
    const char *data_path;                   /* data.path */
    const char *train_subset, *valid_subset; /* data.train_subset, data.valid_subset */
    int num_file;                            /* data.num_file (BERT shards; 0 = every file) */
    double data_mean, data_std;              /* data.mean, data.std (MNIST's input normalisation) */
    int max_sentences;                       /* training.max_sentences: samples per micro-batch */
    uint64_t seed;                           /* seed */
    /* The model, filled for the task named only (hs_train_config_load, hs_eval_config_load): */
    double conv_dropout, fc_dropout;         /* mnist: model.conv_dropout, model.fc_dropout */
    hs_bert_config bert;                     /* bert: model.config_file or the model.* keys, checked */
    hs_txl_config txl;                       /* txl: the txl.* keys with n_token as given (0: from the data),
                                              * resolved against the data by hs_txl_config_resolve */
    char txl_n_token_origin[256];            /* where txl.n_token was set, for that check's message */
} hs_task_settings;

#endif
