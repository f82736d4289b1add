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
#include "data/sampler.h" /* hs_range */
#include "nn/params.h"
#include "tasks/task_settings.h"
#include "nn/step_ctx_stats.h"

/* HS_SPLIT_TEST: `hetseq eval --split test` (tasks without a test split refuse it with a message). */
typedef enum { HS_SPLIT_TRAIN = 0, HS_SPLIT_VALID = 1, HS_SPLIT_TEST = 2 } hs_split;
#define HS_NSPLITS 3

/* State besides parameters that a bit-exact resume needs (Transformer-XL's segment memories), as named
 * host arrays in a GLOBAL layout (independent of the number of ranks, so a run may resume on another
 * world size where the task allows it). Saved under /task_state/<name> in checkpoints
 * (docs/checkpoint-format.md). */
#define HS_TASK_STATE_MAX 8
typedef struct hs_task_state_array {
    char name[64];
    int is_int64;   /* 0: float32 data, 1: int64 data */
    int ndim;
    int64_t dims[4];
    void *data;     /* host, malloc'd (hs_task_state_free frees it) */
} hs_task_state_array;
typedef struct hs_task_state {
    int count;
    hs_task_state_array arrays[HS_TASK_STATE_MAX];
} hs_task_state;

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
     * layout (nn/step_ctx_stats.h). count > 0. Nothing here waits for the device. */
    void (*forward_backward)(hs_task *t, const void *host_buf, int64_t first, int count,
                             const hs_step_ctx *ctx, double *stats);
    /* Optional (NULL: forward_backward stages synchronously): input staging one update ahead
     * (docs/adding-a-task.md). Checks the host micro-batch with the same checks and messages as
     * forward_backward, builds its derived host arrays and ENQUEUES its uploads (be->upload_async, copy
     * stream) into the task's input set [parity][micro_index]: two sets per micro-batch position, so the
     * next update stages into one while the current update computes from the other. host_buf is
     * prefetch staging memory; the caller records the slot's fence on the copy stream after staging the
     * slot. The next forward_backward of the same host_buf and count computes from the staged set (its
     * ops wait for the uploads); forward_backward of a host_buf that was not staged stages it itself. */
    void (*stage)(hs_task *t, const void *host_buf, int count, int micro_index, int parity);
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
    int has_test_split; /* 1: HS_SPLIT_TEST exists (`hetseq eval --split test`); 0: eval refuses it */
    /* Optional: model FLOPs of training on one sample, for the TFLOP/s and MFU figures (tasks/model_flops.h). */
    double (*flops_per_sample)(hs_task *t);

    /* ---- ordered streams (optional; NULL for shuffled tasks) ----------------------------------------
     * A task whose samples must be visited in order, carrying state from one update to the next
     * (Transformer-XL: B columns of a token stream walked in segments, each column's memory kept on one
     * rank), gives its own batches instead of HetSeq's shuffling sampler. Sample indices are the
     * task's own (Transformer-XL: segment·B + column). */
    /* Updates (train) or evaluation steps (valid/test) in one pass over the split; uf = micro-batches per
     * update on every rank (batch_chunk). Dies with a message if the split cannot be cut so. */
    int64_t (*stream_steps)(hs_task *t, hs_split split, int uf, int world);
    /* The micro-batches of step k on `rank`: fills out[0..uf) and returns how many (count 0 = empty
     * micro-batch that still joins every collective). Every rank asks for every step. */
    int (*stream_step_ranges)(hs_task *t, hs_split split, int64_t epoch, int64_t k, int uf, int rank, int world,
                              hs_range *out);
    /* Start of a pass over a split: forget the carried state of that split (train: at epoch start unless
     * resuming inside the epoch; valid/test: before every evaluation, which keeps training's state). */
    void (*stream_reset)(hs_task *t, hs_split split);
    /* Tokens a whole host micro-batch of `count` samples predicts (for tokens/s; stream tasks vary it per
     * segment); NULL: count · tokens_per_sample. */
    int64_t (*batch_tokens)(hs_task *t, const void *host_buf, int count);

    /* ---- state for exact resume (optional) ------------------------------------------------------ */
    /* COLLECTIVE over comm->world: gather the task's state into `out` on rank 0 (other ranks get
     * count 0). */
    void (*gather_state)(hs_task *t, const hs_comm *comm, hs_task_state *out);
    /* COLLECTIVE: rank 0's `in` (read from a checkpoint; other ranks pass an empty one) is sent to every
     * rank and installed; in->count == 0 means "none saved": start fresh. */
    void (*scatter_state)(hs_task *t, const hs_comm *comm, const hs_task_state *in);
    void (*destroy)(hs_task *t);
};

/* ---- input sets of a stage hook (src/tasks/input_sets.c) ----------------------------------------------
 * One set holds what one staged micro-batch needs on the device (and the host arrays derived from it),
 * in buffers of the task's own (data); two per micro-batch position (parity = the prefetch slot). Events
 * order each set: `ready` (copy stream) after its uploads, `consumed` (compute stream) after the last op
 * that reads its device buffers, which the task enqueues when it takes the set (it copies the set into
 * the model's own inputs, so the set is free again as soon as those copies ran). */
typedef struct hs_input_set {
    const void *host_buf; /* the staged host micro-batch; NULL: nothing pending */
    int count;
    void *ready, *consumed;
    void *data;
} hs_input_set;
typedef struct hs_input_sets {
    const hs_backend *be;
    void *owner;
    void *(*create)(void *owner);             /* one set's buffers */
    void (*destroy)(void *owner, void *data);
    int n[2];
    hs_input_set *sets[2];
} hs_input_sets;

/* Set [parity][index] (created on first use) ready to be refilled: the host waited for its previous
 * uploads (its host arrays may be rewritten) and the copy stream waits for the compute ops that read it
 * (its device buffers may be overwritten by later upload_async). */
hs_input_set *hs_input_sets_begin(hs_input_sets *s, int parity, int index);
/* After the set's uploads were enqueued: records `ready` and marks it pending for host_buf/count. */
void hs_input_sets_end(hs_input_sets *s, hs_input_set *set, const void *host_buf, int count);
/* The pending set staged from host_buf with count samples (no longer pending), with the compute stream
 * waiting for its uploads; NULL when none is. */
hs_input_set *hs_input_sets_take(hs_input_sets *s, const void *host_buf, int count);
/* After the compute ops that read the set were enqueued: records `consumed`. */
void hs_input_sets_done(hs_input_sets *s, hs_input_set *set);
void hs_input_sets_free(hs_input_sets *s);

/* Build the task s->name from its settings (data files are opened collectively on comm->io). */
hs_task *hs_task_create(const hs_task_settings *s, const hs_comm *comm, const hs_backend *be);
void hs_task_destroy(hs_task *t);
/* The registered task names, for messages and the schema ("mnist, bert, txl"). */
const char *hs_task_names(void);
void hs_task_state_free(hs_task_state *s);

#endif
