/* The trainer's settings from the experiment file (see train_config.h). */
#include "train/train_config.h"

#include <string.h>

#include "util/check.h"

void hs_train_config_read(const hs_config *cfg, hs_train_config *tc) {
    memset(tc, 0, sizeof *tc);
    tc->task = hs_cfg_string(cfg, "task");
    tc->device = hs_cfg_string(cfg, "device");
    tc->precision = hs_cfg_string(cfg, "precision");
    tc->data_path = hs_cfg_string(cfg, "data.path");
    tc->valid_subset = hs_cfg_string(cfg, "data.valid_subset");
    tc->seed = (uint64_t)hs_cfg_int(cfg, "seed");

    tc->max_epoch = hs_cfg_int(cfg, "training.max_epoch");
    tc->max_update = hs_cfg_int(cfg, "training.max_update");
    tc->max_sentences = (int)hs_cfg_int(cfg, "training.max_sentences");
    tc->n_update_freq = hs_cfg_list_len(cfg, "training.update_freq");
    if (tc->n_update_freq > HS_MAX_UPDATE_FREQ_LIST) tc->n_update_freq = HS_MAX_UPDATE_FREQ_LIST; /* load refuses */
    for (int i = 0; i < tc->n_update_freq; i++) {
        tc->update_freq[i] = hs_cfg_int_elem(cfg, "training.update_freq", i);
        if (tc->update_freq[i] > tc->max_update_freq) tc->max_update_freq = (int)tc->update_freq[i];
    }
    const int no_validation = hs_cfg_bool(cfg, "training.disable_validation");
    tc->validate_interval = no_validation ? 0 : hs_cfg_int(cfg, "training.validate_interval");
    tc->validate_interval_updates = no_validation ? 0 : hs_cfg_int(cfg, "training.validate_interval_updates");
    tc->clip_norm = hs_cfg_float(cfg, "optimizer.clip_norm");
    hs_loss_scaler_config_read(cfg, tc->precision, &tc->scaler);

    tc->save_dir = hs_cfg_string(cfg, "checkpoint.save_dir");
    tc->init_checkpoint = hs_cfg_string(cfg, "checkpoint.init_checkpoint");
    tc->no_save = hs_cfg_bool(cfg, "checkpoint.no_save");
    tc->keep_last = (int)hs_cfg_int(cfg, "checkpoint.keep_last");
    tc->save_interval = hs_cfg_int(cfg, "checkpoint.save_interval");
    tc->save_interval_updates = hs_cfg_int(cfg, "checkpoint.save_interval_updates");
    tc->reset_dataloader = hs_cfg_bool(cfg, "checkpoint.reset_dataloader");
    tc->reset_optimizer = hs_cfg_bool(cfg, "checkpoint.reset_optimizer");
    tc->reset_lr_scheduler = hs_cfg_bool(cfg, "checkpoint.reset_lr_scheduler");
    tc->reset_step = hs_cfg_bool(cfg, "checkpoint.reset_step");

    tc->log_interval = (int)hs_cfg_int(cfg, "log.interval");
    tc->log_format = hs_cfg_string(cfg, "log.format");
    tc->metrics_file = hs_cfg_string(cfg, "log.metrics_file");

    tc->stall_timeout = hs_cfg_float(cfg, "distributed.stall_timeout");
    tc->bucket_cap_mb = hs_cfg_int(cfg, "distributed.bucket_cap_mb");
    tc->allreduce_dtype = hs_cfg_string(cfg, "distributed.allreduce_dtype");
    tc->check_replicas_every = hs_cfg_int(cfg, "distributed.check_replicas_every");
    tc->n_weights = hs_cfg_list_len(cfg, "distributed.weights");
    if (tc->n_weights > HS_MAX_RANK_LIST) tc->n_weights = HS_MAX_RANK_LIST; /* the trainer refuses */
    for (int i = 0; i < tc->n_weights; i++) tc->weights[i] = hs_cfg_float_elem(cfg, "distributed.weights", i);
    tc->n_rank_max_sentences = hs_cfg_list_len(cfg, "distributed.rank_max_sentences");
    if (tc->n_rank_max_sentences > HS_MAX_RANK_LIST) tc->n_rank_max_sentences = HS_MAX_RANK_LIST;
    for (int i = 0; i < tc->n_rank_max_sentences; i++) {
        int64_t v = hs_cfg_int_elem(cfg, "distributed.rank_max_sentences", i);
        tc->rank_max_sentences[i] = (int32_t)(v > INT32_MAX ? INT32_MAX : v);
    }
    tc->balance_auto = strcmp(hs_cfg_string(cfg, "distributed.balance"), "auto") == 0;
    tc->balance_warmup = hs_cfg_int(cfg, "distributed.balance_warmup");
    tc->rebalance_every = hs_cfg_int(cfg, "distributed.rebalance_every");
    tc->weighted = tc->n_weights > 0 || tc->n_rank_max_sentences > 0 || tc->balance_auto;
}

void hs_train_config_load(const hs_config *cfg, hs_train_config *tc) {
    hs_train_config_read(cfg, tc);
    hs_loss_scaler_config_load(cfg, tc->precision, &tc->scaler);
    if (hs_cfg_list_len(cfg, "training.update_freq") > HS_MAX_UPDATE_FREQ_LIST) {
        char where[256];
        hs_die_all("training.update_freq (%s) lists %d values; at most %d (the last value repeats for later epochs)",
                   hs_cfg_origin(cfg, "training.update_freq", where, (int)sizeof where),
                   hs_cfg_list_len(cfg, "training.update_freq"), HS_MAX_UPDATE_FREQ_LIST);
    }
    if (tc->max_epoch == 0 && tc->max_update == 0)
        hs_die_all("training.max_epoch and training.max_update are both 0 (unlimited): set at least one");
}

int64_t hs_train_config_update_freq(const hs_train_config *tc, int64_t epoch) {
    const int n = tc->n_update_freq;
    return tc->update_freq[epoch - 1 < n - 1 ? epoch - 1 : n - 1];
}
