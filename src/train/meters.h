/* Training meters, HetSeq-format log lines and the JSON-lines metrics file (rank 0).
 *
 * Every record (a line of the metrics file, and with log.format = "json" the progress line on the
 * console) is built as a json-c object and serialised by json-c, so it is always one valid JSON
 * object: a number that is not finite (a diverged loss, an infinite gradient norm) is written as null.
 * The field names and their order are documented in docs/data-formats.md ("The metrics file"). Each
 * record is flushed when written, so a run that is killed keeps every record logged before. */
#ifndef HS_TRAIN_METERS_H
#define HS_TRAIN_METERS_H

#include <stdint.h>
#include <stdio.h>

#include "tasks/task.h"
#include "train/checkpoint.h"

typedef struct hs_meters {
    const hs_task *task; /* for the loss of a stats vector and the task's own log fields */
    /* since the last log line */
    hs_stats interval;
    double interval_time;
    int64_t interval_updates;
    /* since the start of the epoch */
    double epoch_start_time;
    int64_t epoch_updates;
    double start_time; /* process start, for `wall` */
    FILE *metrics;     /* JSON lines, rank 0 only; NULL if off */
    char *metrics_path; /* for error messages; NULL if off */
    const char *format; /* log.format: "simple" (HetSeq's lines), "json" (the metrics records on stdout), "none" */
    FILE *console;      /* where progress and validation lines go: stdout (hs_meters_init); tests redirect it */
    int warned_task_fields; /* the task's fields could not be parsed once: warned, not again */
    /* Model FLOP/s and MFU (task->flops_per_sample set): MFU = the model FLOP/s of the job ÷ (peak_flops ×
     * world size), peak_flops being this rank's peak for `precision`: measured SGEMM on the CPU
     * (hs_meters_init), the compute-capability table on a GPU (src/train/mfu.h). */
    const char *precision; /* "fp32" unless the trainer sets another before the first log line */
    double peak_flops;     /* per rank; 0 = unknown: MFU is left out (null in the records) */
    char peak_source[128]; /* how peak_flops was found, for the start-up line */
    int peak_ready;        /* peak_flops is for `precision` */
    int peak_remeasured;   /* the CPU peak was re-measured once (a stale peak): not again */
    /* the device-op ledger's sums at the previous train record (src/backend/ledger.h) */
    uint64_t ledger_ops_mark, ledger_bytes_mark;
    int64_t ledger_updates_mark;
} hs_meters;

/* Opens the metrics file on rank 0 ("w", or "a" when resuming; a partial last record left by a run
 * killed in the middle of a write is dropped first, so every line stays valid JSON). When the task
 * counts its FLOPs and runs on the CPU, every rank measures its SGEMM rate here (about 0.2 s, all ranks
 * at once as in training), the peak of the MFU figure. */
void hs_meters_init(hs_meters *m, const hs_task *task, const char *metrics_path, int resume);
/* The task's scalar loss (nats) of a stats vector. */
double hs_meters_loss(const hs_meters *m, const hs_stats *s);
void hs_meters_close(hs_meters *m);
void hs_meters_epoch_start(hs_meters *m);
/* Account one update (global stats, pre-clip gnorm, whether it clipped, seconds it took) in the
 * cumulative meters of *st and the interval meters. */
void hs_meters_update(hs_meters *m, hs_train_state *st, const hs_stats *global, double gnorm, int clipped,
                      double seconds);
/* `| epoch 001:     10 / 469 loss=..., ...` (HetSeq's simple format) and a metrics record. */
void hs_meters_log_train(hs_meters *m, const hs_train_state *st, int64_t index_in_epoch, int64_t updates_in_epoch,
                         double lr, int world_size);
void hs_meters_log_valid(hs_meters *m, const hs_train_state *st, const char *subset, const hs_stats *global,
                         double seconds);

#endif
