/* The stall inspector (as Horovod's): a thread per rank watches where its main thread is. When the main
 * thread has waited longer than distributed.stall_timeout seconds for its peers (in a collective, or
 * for input whose collective read needs them), the thread asks every other rank where it is, over a
 * communicator used for nothing else, prints which ranks have not arrived and where they were (update,
 * phase, for how long), and ends the job (exit status HS_EXIT_STALLED). A peer that does not answer
 * within a few seconds is reported as hung or dead. A peer busy writing a checkpoint is waited for. */
#ifndef HS_COMM_STALL_H
#define HS_COMM_STALL_H

#include <stdint.h>

#include "comm/comm.h"

typedef enum {
    HS_PHASE_SETUP,            /* start-up, restore */
    HS_PHASE_INPUT,            /* waiting for the update's input (the prefetch thread's collective read) */
    HS_PHASE_COMPUTE,          /* forward and backward */
    HS_PHASE_GRAD_ALLREDUCE,   /* the gradient all-reduce */
    HS_PHASE_STAT_ALLREDUCE,   /* the statistics and stop-flag all-reduce */
    HS_PHASE_OPTIMIZER,        /* clipping, optimizer step */
    HS_PHASE_VALIDATION,       /* validation (compute and reads) */
    HS_PHASE_CHECKPOINT,       /* rank 0 writing a checkpoint */
    HS_PHASE_CHECK,            /* replica check, checkpoint agreement, broadcasts */
    HS_PHASE_DONE,
    HS_PHASE_COUNT
} hs_phase;

/* Start the inspector thread (timeout <= 0: no thread; the phase calls stay cheap no-ops). */
void hs_stall_start(const hs_comm *c, double timeout_seconds);
/* The main thread enters `phase` of update `update` (1-based). waiting = 1 if the phase waits for peers. */
void hs_stall_phase(hs_phase phase, int64_t update, int waiting);
/* Stop and join the thread (before MPI_Finalize). */
void hs_stall_stop(void);
/* A phase's name for messages. */
const char *hs_phase_name(hs_phase phase);

#endif
