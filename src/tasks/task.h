/* A task = dataset + model + metrics (HetSeq's Task). The trainer drives every task through this
 * table; adding a task means writing one of these and registering it in src/tasks/registry.c
 * (docs/adding-a-task.md). */
#ifndef HS_TASKS_TASK_H
#define HS_TASKS_TASK_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "config.h"
#include "nn/params.h"
#include "nn/step.h"

typedef enum { HS_SPLIT_TRAIN = 0, HS_SPLIT_VALID = 1 } hs_split;

typedef struct hs_task hs_task;
struct hs_task {
    const char *name;
    hs_params params;
    void *impl;

    /* ---- data ---------------------------------------------------------------------------------- */
    int64_t (*num_samples)(hs_task *t, hs_split split);
    /* Host bytes needed to hold one micro-batch of up to max_count samples. */
    size_t (*batch_bytes)(hs_task *t, int max_count);
    /* Read samples [first, first+count) of a split into host_buf. COLLECTIVE over the I/O
     * communicator: every rank calls it the same number of times in the same order; count == 0 joins
     * with an empty selection. Called only from the prefetch thread (HDF5 is not thread-safe). */
    void (*read_batch)(hs_task *t, hs_split split, int64_t first, int count, void *host_buf);

    /* ---- model --------------------------------------------------------------------------------- */
    /* Counts of the loss terms in a host micro-batch (counts[k] for term k; unused terms 0). */
    void (*batch_norm_counts)(hs_task *t, const void *host_buf, int count, double counts[HS_NORM_TERMS]);
    /* Forward + backward of one micro-batch: checks and uploads the host micro-batch, then ENQUEUES the
     * work that ACCUMULATES sum_k loss_scale[k] * d(sum of term k over the batch)/d(params) into
     * params.grad and adds the batch's sums into stats, a device float64 [HS_STATS_NDOUBLE] in hs_stats'
     * layout (step.h). count > 0. Nothing here waits for the device. */
    void (*forward_backward)(hs_task *t, const void *host_buf, int64_t first, int count,
                             const hs_step_ctx *ctx, double *stats);
    /* Forward only in eval mode; adds into the device stats the same way. */
    void (*evaluate)(hs_task *t, const void *host_buf, int64_t first, int count, double *stats);
    /* Initialise parameters (PyTorch default initialisation for the task's layers) from seed. */
    void (*init_params)(hs_task *t, uint64_t seed);
    /* Names of extra[] stats for logs (NULL-terminated), may be NULL. */
    const char *const *extra_stat_names;
    /* Optional: the scalar loss (nats) of all-reduced stats; default loss_sum / sample_count. */
    double (*loss_from_stats)(const hs_stats *s);
    /* Optional: append the task's own metrics of (interval or validation) stats to a log line, as
     * ", name=value" (json = 0) or ", \"name\": value" (json = 1). */
    void (*format_stats)(const hs_stats *s, int json, char *buf, size_t n);
    /* Tokens per sample for the tokens/s figure (sequence length; 0 = not a sequence task). */
    int tokens_per_sample;
    void (*destroy)(hs_task *t);
};

/* Build the task named by config key `task` (data files are opened collectively on comm->io). */
hs_task *hs_task_create(const hs_config *cfg, const hs_comm *comm, const hs_backend *be);
void hs_task_destroy(hs_task *t);

#endif
