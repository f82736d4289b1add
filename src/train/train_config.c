/* The settings of a run from the experiment file (see train_config.h): the one place that reads the
 * trainer's and the tasks' keys. */
#include "train/train_config.h"

#include <string.h>

#include "util/check.h"

/* ---- loss_scaler.* ---- */

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

/* The schema checks each key's range; what it cannot is their order (cfg only names where they were set). */
static void check_scaler_order(const hs_config *cfg, const hs_loss_scaler_config *sc) {
    const struct {
        const char *lo_key, *hi_key;
        double lo, hi;
    } pairs[] = {{"loss_scaler.min_scale", "loss_scaler.init_scale", sc->min_scale, sc->init_scale},
                 {"loss_scaler.init_scale", "loss_scaler.max_scale", sc->init_scale, sc->max_scale}};
    for (int i = 0; i < 2; i++) {
        if (pairs[i].lo > pairs[i].hi) {
            char w0[256], w1[256];
            hs_die_all("%s = %.10g (%s) is larger than %s = %.10g (%s): loss_scaler needs min_scale <= init_scale <= "
                       "max_scale",
                       pairs[i].lo_key, pairs[i].lo, hs_cfg_origin(cfg, pairs[i].lo_key, w0, (int)sizeof w0),
                       pairs[i].hi_key, pairs[i].hi, hs_cfg_origin(cfg, pairs[i].hi_key, w1, (int)sizeof w1));
        }
    }
}

void hs_loss_scaler_config_load(const hs_config *cfg, const char *precision, hs_loss_scaler_config *sc) {
    hs_loss_scaler_config_read(cfg, precision, sc);
    check_scaler_order(cfg, sc);
}

/* ---- the run ---- */

void hs_train_config_read(const hs_config *cfg, hs_train_config *tc) {
    memset(tc, 0, sizeof *tc);
    hs_task_settings *ts = &tc->task;
    ts->name = hs_cfg_string(cfg, "task");
    ts->data_path = hs_cfg_string(cfg, "data.path");
    ts->train_subset = hs_cfg_string(cfg, "data.train_subset");
    ts->valid_subset = hs_cfg_string(cfg, "data.valid_subset");
    ts->num_file = (int)hs_cfg_int(cfg, "data.num_file");
    ts->data_mean = hs_cfg_float(cfg, "data.mean");
    ts->data_std = hs_cfg_float(cfg, "data.std");
    ts->max_sentences = (int)hs_cfg_int(cfg, "training.max_sentences");
    ts->seed = (uint64_t)hs_cfg_int(cfg, "seed");
    tc->device = hs_cfg_string(cfg, "device");
    tc->precision = hs_cfg_string(cfg, "precision");
    tc->cuda_graphs = hs_cfg_bool(cfg, "cuda_graphs");
    char origin[256];
    tc->cuda_graphs_set = strcmp(hs_cfg_origin(cfg, "cuda_graphs", origin, (int)sizeof origin), "default") != 0;

    tc->max_epoch = hs_cfg_int(cfg, "training.max_epoch");
    tc->max_update = hs_cfg_int(cfg, "training.max_update");
    tc->n_update_freq = hs_cfg_list_len(cfg, "training.update_freq");
    if (tc->n_update_freq > HS_MAX_UPDATE_FREQ_LIST) tc->n_update_freq = HS_MAX_UPDATE_FREQ_LIST; /* load refuses */
    for (int i = 0; i < tc->n_update_freq; i++) {
        tc->update_freq[i] = hs_cfg_int_elem(cfg, "training.update_freq", i);
        if (tc->update_freq[i] > tc->max_update_freq) tc->max_update_freq = (int)tc->update_freq[i];
    }
    const int no_validation = hs_cfg_bool(cfg, "training.disable_validation");
    tc->validate_interval = no_validation ? 0 : hs_cfg_int(cfg, "training.validate_interval");
    tc->validate_interval_updates = no_validation ? 0 : hs_cfg_int(cfg, "training.validate_interval_updates");
    hs_loss_scaler_config_read(cfg, tc->precision, &tc->scaler);
    tc->lr = (hs_lr_settings){
        .name = hs_cfg_string(cfg, "lr_scheduler.name"),
        .lr = hs_cfg_float(cfg, "optimizer.lr"),
        .warmup_updates = hs_cfg_int(cfg, "lr_scheduler.warmup_updates"),
        .warmup_proportion = hs_cfg_float(cfg, "lr_scheduler.warmup_proportion"),
        .total_num_update = hs_cfg_int(cfg, "lr_scheduler.total_num_update"),
        .end_learning_rate = hs_cfg_float(cfg, "lr_scheduler.end_learning_rate"),
        .power = hs_cfg_float(cfg, "lr_scheduler.power"),
        .force_anneal = (int)hs_cfg_int(cfg, "lr_scheduler.force_anneal"),
    };

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

/* The model of the task named (the others' keys keep their defaults and are not looked at): every rank
 * reads the same file, so a bad setting ends every rank with one message naming the key. */
static void load_model(const hs_config *cfg, hs_task_settings *ts) {
    if (!strcmp(ts->name, "mnist")) {
        ts->conv_dropout = hs_cfg_float(cfg, "model.conv_dropout");
        ts->fc_dropout = hs_cfg_float(cfg, "model.fc_dropout");
    } else if (!strcmp(ts->name, "bert")) {
        hs_bert_config_load(cfg, &ts->bert);
    } else if (!strcmp(ts->name, "txl")) {
        hs_txl_config_read(cfg, &ts->txl, ts->txl_n_token_origin, (int)sizeof ts->txl_n_token_origin);
    }
}

void hs_eval_config_load(const hs_config *cfg, hs_train_config *tc) {
    hs_train_config_read(cfg, tc);
    load_model(cfg, &tc->task);
}

void hs_train_config_load(const hs_config *cfg, hs_train_config *tc) {
    hs_train_config_read(cfg, tc);
    check_scaler_order(cfg, &tc->scaler);
    if (hs_cfg_list_len(cfg, "training.update_freq") > HS_MAX_UPDATE_FREQ_LIST) {
        char where[256];
        hs_die_all("training.update_freq (%s) lists %d values; at most %d (the last value repeats for later epochs)",
                   hs_cfg_origin(cfg, "training.update_freq", where, (int)sizeof where),
                   hs_cfg_list_len(cfg, "training.update_freq"), HS_MAX_UPDATE_FREQ_LIST);
    }
    if (tc->max_epoch == 0 && tc->max_update == 0)
        hs_die_all("training.max_epoch and training.max_update are both 0 (unlimited): set at least one");
    hs_optim_settings_load(cfg, &tc->optim);
    load_model(cfg, &tc->task);
}

int64_t hs_train_config_update_freq(const hs_train_config *tc, int64_t epoch) {
    const int n = tc->n_update_freq;
    return tc->update_freq[epoch - 1 < n - 1 ? epoch - 1 : n - 1];
}
