/* The training loop and evaluation. */
#ifndef HS_TRAIN_TRAINER_H
#define HS_TRAIN_TRAINER_H

#include "comm/comm.h"
#include "config.h"
#include "data/prefetch.h"
#include "tasks/task.h"

/* `hetseq train`: returns the process exit status. */
int hs_train_main(const hs_config *cfg, const hs_comm *comm);
/* `hetseq eval`: evaluates a checkpoint on the validation split and prints HetSeq's test-set line. */
int hs_eval_main(const hs_config *cfg, const char *checkpoint, const hs_comm *comm);

/* One pass over a split in order (no shuffle), rank-strided micro-batches of max_sentences samples,
 * through the prefetch thread; returns the all-reduced stats. Collective. */
void hs_evaluate_split(hs_task *task, hs_prefetch *pf, const hs_comm *comm, hs_split split, int max_sentences,
                       int max_per_request, hs_stats *global);

/* Threads per rank: OMP_NUM_THREADS if set, else cores of the node / ranks on the node; splits them
 * between OpenBLAS and OpenMP by the OpenBLAS build that is loaded and logs both (src/train/threads.c). */
void hs_setup_threads(const hs_comm *comm);

#endif
