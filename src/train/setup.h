/* The setup `hetseq train` and `hetseq eval` share (src/train/setup.c): from the typed settings of the
 * run (train_config.h), the backend the ranks compute on and the task built on it. */
#ifndef HS_TRAIN_SETUP_H
#define HS_TRAIN_SETUP_H

#include "backend/backend.h"
#include "comm/comm.h"
#include "tasks/task.h"
#include "train/train_config.h"

/* The backend of `device` for this rank (its local rank picks the GPU) at `precision`; a device or a
 * precision this build or machine cannot run ends the run with a message naming the key. */
const hs_backend *hs_setup_backend(const hs_train_config *tc, const hs_comm *comm);
/* The task of tc->task on be: its data opened (collectively), its model's parameters allocated. */
hs_task *hs_setup_task(const hs_train_config *tc, const hs_comm *comm, const hs_backend *be);

#endif
