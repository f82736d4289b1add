/* Fault injection, a test facility (docs/reliability.md): the environment variable HETSEQ_FAULT, read
 * once at start, makes one rank fail in a chosen way at a chosen moment, so the tests can show that
 * every failure ends the job quickly, names the rank and the cause, and loses nothing already saved.
 *
 *   HETSEQ_FAULT="kind[:rank=R][:update=N][:file=SUBSTRING][:seconds=S]"   (several separated by ';')
 *
 *   die          rank R is killed (SIGKILL, as a node failure) when update N starts
 *   stall        rank R sleeps S seconds (default: for ever) when update N starts, before its collectives
 *   ckpt_die     rank R is killed halfway through writing the checkpoint of update N
 *   enospc       the checkpoint write of update N fails as on a full disk (a file-size limit makes the
 *                file system refuse the write)
 *   unreadable   on rank R, data files whose path contains SUBSTRING cannot be opened (EACCES)
 *   nan          rank R's gradient of update N gets a NaN in its first element
 *   corrupt      rank R's parameters get one flipped bit after update N (a silent replica divergence)
 *   overflow     rank R's gradient of update N gets +Inf in its first element (an fp16 overflow: with the
 *                loss scaler on, every rank skips that update; off, the run stops as diverged)
 *
 * rank defaults to 0 and update to 1 (updates count from 1, as in the logs). Unknown kinds or keys are
 * a clear error: a test that mistypes a fault must not pass for the wrong reason. */
#ifndef HS_UTIL_FAULT_H
#define HS_UTIL_FAULT_H

#include <stdint.h>

typedef enum {
    HS_FAULT_DIE,
    HS_FAULT_STALL,
    HS_FAULT_CKPT_DIE,
    HS_FAULT_ENOSPC,
    HS_FAULT_UNREADABLE,
    HS_FAULT_NAN,
    HS_FAULT_CORRUPT,
    HS_FAULT_OVERFLOW,
    HS_FAULT_KINDS
} hs_fault_kind;

/* Parse HETSEQ_FAULT (if set) for this rank; prints one line naming each armed fault. */
void hs_fault_init(int rank);
/* 1 if a fault of this kind is armed on this rank for update `update` (1-based); it fires once. */
int hs_fault_fires(hs_fault_kind kind, int64_t update);
/* Update-start faults (die, stall): called by the trainer as update `update` (1-based) begins. */
void hs_fault_update_start(int64_t update);
/* access(2) that also fails with EACCES for files made unreadable by the `unreadable` fault. */
int hs_fault_access(const char *path, int mode);

#endif
