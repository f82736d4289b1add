/* hs_step_ctx and hs_stats: what one forward/backward step of a model needs (dropout keys, the loss
 * normalisation) and what it produces besides gradients (loss sums, counts, accuracies in the device
 * stats buffer). Shared by the models, the tasks and the trainer, so it sits below all of them. */
#ifndef HS_NN_STEP_CTX_STATS_H
#define HS_NN_STEP_CTX_STATS_H

#include <stddef.h>
#include <stdint.h>

/* Per-micro-batch statistics, summed over samples, all-reduced as one float64 vector per update
 * (fast stat sync). Tasks may use extra[] for their own metrics and name them in stat_names. */
#define HS_STAT_EXTRA 5
typedef struct hs_stats {
    double loss_sum;     /* sum over samples of the per-sample loss (nats) */
    double sample_count; /* samples the loss is normalised by */
    double correct;      /* correctly classified samples */
    double extra[HS_STAT_EXTRA];
} hs_stats;
#define HS_STATS_NDOUBLE ((int)(sizeof(hs_stats) / sizeof(double)))

/* On the device the statistics are a float64 array in hs_stats' layout (a region of the trainer's
 * stats buffer): models ADD into it with the loss ops, the trainer downloads it once per update.
 * Loss ops write (Σ NLL, counted rows, correct) into three consecutive slots, so the first three
 * slots are the sample-level loss of every task. */
enum {
    HS_STAT_LOSS_SUM = (int)(offsetof(hs_stats, loss_sum) / sizeof(double)),
    HS_STAT_SAMPLE_COUNT = (int)(offsetof(hs_stats, sample_count) / sizeof(double)),
    HS_STAT_CORRECT = (int)(offsetof(hs_stats, correct) / sizeof(double)),
    HS_STAT_EXTRA0 = (int)(offsetof(hs_stats, extra) / sizeof(double)),
};
_Static_assert(HS_STAT_LOSS_SUM == 0 && HS_STAT_SAMPLE_COUNT == 1 && HS_STAT_CORRECT == 2,
               "loss ops write (loss, count, correct) into three consecutive slots");

/* A task's loss is a sum of up to HS_NORM_TERMS terms, each a mean over its own global count (MNIST: NLL
 * over samples; BERT: MLM cross-entropy over labelled tokens + NSP over sentences). The trainer sums
 * each term's count over the update's micro-batches and all ranks BEFORE computing, so every rank
 * backpropagates the true global mean: the result does not depend on world size or update_freq. */
#define HS_NORM_TERMS 2

/* What a forward/backward needs: dropout keys and the loss normalisation. */
typedef struct hs_step_ctx {
    uint64_t seed;
    uint64_t update; /* 0-based number of the update being computed */
    int training;    /* 0 = eval mode: dropout off */
    double loss_scale[HS_NORM_TERMS]; /* 1 / global count of each loss term (0 if the count is 0) */
    /* Gradient readiness for the overlapped all-reduce (src/comm/grad_buckets.h). When grads_ready is
     * set (the trainer sets it for the last micro-batch of an update only), a model calls it during
     * backward, through hs_step_grads_ready, each time every gradient at flat-buffer offsets >= offset
     * (in floats, the parameter table's layout) is final for this update: nothing later in the backward
     * pass writes there. Offsets passed decrease; a model that never calls it is still correct (the
     * trainer reduces everything after backward), it just overlaps nothing. */
    void (*grads_ready)(void *arg, int64_t offset);
    void *grads_ready_arg;
    /* 1 for the first micro-batch of an update (the trainer sets it): the gradients of the tensors the
     * model declared written (hs_params_grad_written) hold anything, and their first writer in this
     * backward pass must write them whole (be->gemm_wgrad_bgrad's overwrite, a weight-gradient gemm's
     * beta 0); every other gradient is zero. 0: every gradient holds the sum so far (or zero), and every
     * writer adds. A caller that zeroes every gradient (hs_params_zero_grad) may pass either. */
    int grads_zero;
} hs_step_ctx;

/* Tell the trainer that the gradients at offsets >= offset are final (see hs_step_ctx.grads_ready). */
static inline void hs_step_grads_ready(const hs_step_ctx *ctx, int64_t offset) {
    if (ctx->grads_ready) ctx->grads_ready(ctx->grads_ready_arg, offset);
}

#endif
