/* Checkpoints are HDF5 files readable by anyone (h5py, PyTorch). Layout in docs/checkpoint-format.md:
 *   /model/<pytorch name>                 float32, the tensor's shape
 *   /optimizer            attrs name, step; /optimizer/<state>/<pytorch name> float32
 *   /train_state          attrs (hs_train_state fields)
 *   /task_state/<name>    float32 | int64: a task's resume state (Transformer-XL's memories), optional
 *   /train_state/balance_shares  int64 [2][ranks], optional: the shares balance = auto learned
 *   /config               string: the effective configuration
 * Written by rank 0 to "<name>.tmp", flushed and fsync'd, then renamed: a crash never leaves a
 * half-written file under a checkpoint's name. */
#ifndef HS_TRAIN_CHECKPOINT_H
#define HS_TRAIN_CHECKPOINT_H

#include <stdint.h>

#include "nn/params.h"
#include "optim/optimizer.h"
#include "tasks/task.h" /* hs_task_state */

/* Everything besides parameters and optimizer buffers that a bit-exact resume needs. */
typedef struct hs_train_state {
    int64_t epoch;            /* epoch in progress (1-based) */
    int64_t updates_in_epoch; /* updates of `epoch` already done */
    int64_t num_updates;      /* total updates done */
    int64_t end_of_epoch;     /* 1 if saved at the end of `epoch` */
    double lr_base, lr;       /* scheduler state */
    /* cumulative meters since the start of training (HetSeq logs running averages) */
    double meter_loss_sum, meter_sample_count, meter_gnorm_sum, meter_clip_count, meter_updates;
    double train_wall;        /* seconds spent in updates */
    uint64_t seed;
    /* the run that wrote it (0 in checkpoints of hetseq before 0.2: not checked on resume) */
    int64_t world_size;       /* ranks */
    int64_t train_samples;    /* samples of the training split */
    /* dynamic loss scaling (src/train/loss_scaler.h); 0 when the scaler is off or the checkpoint
     * predates it: a resumed run then starts from loss_scaler.init_scale */
    double loss_scale;             /* S of the next update */
    int64_t loss_scale_good_steps; /* updates without overflow since S last changed */
    int64_t loss_scale_skipped;    /* updates skipped for overflow since the start of training */
    /* balance = auto: shares to store as /train_state/balance_shares, [2][balance_ranks] integer weights
     * (hs_balance_checkpoint_shares); NULL: none. Written only: set before a save, never filled by a load
     * (hs_checkpoint_read_balance_shares reads them back). */
    const int64_t *balance_shares;
    int64_t balance_ranks;
} hs_train_state;

/* Save to dir/name atomically (rank 0 only; the caller guarantees that). Parameters and optimizer
 * state are downloaded from the device. opt may be NULL (weights only). */
void hs_checkpoint_save(const char *dir, const char *name, const hs_params *params, const hs_optimizer *opt,
                        const hs_train_state *state, const char *config_text);

/* As hs_checkpoint_save, with the task's resume state under /task_state/<name> (task_state NULL or
 * empty: no group). */
void hs_checkpoint_save_with_task(const char *dir, const char *name, const hs_params *params,
                                  const hs_optimizer *opt, const hs_train_state *state, const char *config_text,
                                  const hs_task_state *task_state);
/* The arrays under /task_state (count 0 when the checkpoint has none); hs_task_state_free frees them. */
void hs_checkpoint_read_task_state(const char *path, hs_task_state *out);

/* Make dir/alias name the same file as dir/name (a hard link, or a copy where the file system has
 * none), atomically replacing any old dir/alias: checkpoint_last.h5 costs no second write. */
void hs_checkpoint_link(const char *dir, const char *name, const char *alias);

/* Load a checkpoint into params (every tensor of the table must be present with the same shape: a
 * clear error otherwise), and optionally opt (state buffers, step), state and the stored config text
 * (malloc'd, caller frees). Any rank may call it (read-only, serial HDF5 driver). */
void hs_checkpoint_load(const char *path, hs_params *params, hs_optimizer *opt, hs_train_state *state,
                        char **config_text);

/* Only /train_state and the /config text (malloc'd or NULL; caller frees): what resume checks compare
 * before loading any tensor. */
void hs_checkpoint_read_state(const char *path, hs_train_state *state, char **config_text);

/* The shares balance = auto learned (/train_state/balance_shares) into rows[2 * ranks]: returns 1, or 0
 * if the checkpoint holds none (older checkpoints, other balance settings) or holds them for another
 * number of ranks. A malformed dataset is an error naming the file. */
int hs_checkpoint_read_balance_shares(const char *path, int64_t ranks, int64_t *rows);

/* Which optional parts a checkpoint holds (a converted PyTorch model has weights only). */
void hs_checkpoint_contents(const char *path, int *has_optimizer, int *has_train_state);

/* Read only the stored config text of a checkpoint (for `hetseq eval`). Caller frees. */
char *hs_checkpoint_read_config(const char *path);

/* Keep the newest `keep` files matching checkpoint_<epoch>_<updates>.h5 and checkpoint<epoch>.h5 in dir
 * (by number, descending); delete older ones. keep <= 0: keep all. checkpoint_last.h5 is never removed. */
void hs_checkpoint_prune(const char *dir, int keep);

/* Remove checkpoint*.h5.tmp files that a killed run left behind (rank 0, before training). */
void hs_checkpoint_remove_stale(const char *dir);

/* 1 if path exists and is a readable file. */
int hs_file_exists(const char *path);

#endif
