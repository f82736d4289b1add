/* The training loop and evaluation. */
#ifndef HS_TRAIN_TRAINER_H
#define HS_TRAIN_TRAINER_H

#include "cli.h"
#include "comm/comm.h"
#include "config.h"
#include "train/prefetch.h"
#include "tasks/task.h"

/* `hetseq train`: returns the process exit status. */
int hs_train_main(const hs_config *cfg, const hs_comm *comm);
/* `hetseq eval`: evaluates a checkpoint on the validation or test split; prints HetSeq's test-set line
 * (MNIST) or the loss and the task's metrics, then throughput and latency percentiles as NVIDIA's
 * scripts print them, and writes them as JSON with --report (docs/evaluation.md). */
int hs_eval_main(const hs_config *cfg, const hs_eval_options *opt, const hs_comm *comm);

/* One pass over a split in order (no shuffle), through the prefetch thread (reads run up to two requests
 * of max_per_request micro-batches ahead); returns the all-reduced stats. Collective. A step is one
 * micro-batch on every rank: an ordered-stream task's steps (stream_steps with uf = 1, after
 * stream_reset of the split), else HetSeq's rank-strided micro-batches of max_sentences samples. */
void hs_evaluate_split(hs_task *task, hs_prefetch *pf, const hs_comm *comm, hs_split split, int max_sentences,
                       int max_per_request, hs_stats *global);

/* The measurements of a pass (hs_evaluate_split_timed). */
typedef struct hs_eval_timing {
    int64_t steps;        /* steps of the pass (the same on every rank) */
    double *step_seconds; /* [steps]: from taking a step's micro-batch to its evaluation finished on the
                           * device, on the slowest rank (malloc'd: free it) */
    double seconds;       /* the whole pass, reads included, on the slowest rank */
    int64_t samples;      /* over all ranks */
    int64_t tokens;       /* over all ranks (task->batch_tokens, else tokens_per_sample per sample) */
} hs_eval_timing;

/* hs_evaluate_split that also times every step (the device is synchronised after each) and fills
 * *timing; the per-step times are gathered in one all-reduce at the end. Collective. */
void hs_evaluate_split_timed(hs_task *task, hs_prefetch *pf, const hs_comm *comm, hs_split split,
                             int max_sentences, int max_per_request, hs_stats *global, hs_eval_timing *timing);

/* The largest micro-batch of a pass over split: max_sentences, or for an ordered-stream task the largest
 * of its evaluation steps on this rank (for sizing the prefetcher). */
int hs_evaluate_max_count(hs_task *task, const hs_comm *comm, hs_split split, int max_sentences);

/* Threads per rank: OMP_NUM_THREADS if set, else cores of the node / ranks on the node; splits them
 * between OpenBLAS and OpenMP by the OpenBLAS build that is loaded and logs both (src/train/threads.c). */
void hs_setup_threads(const hs_comm *comm);

#endif
