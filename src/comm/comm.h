/* MPI world: ranks, the node-local rank (for GPU choice), a duplicated communicator for parallel-HDF5
 * I/O (the prefetch thread's collectives must never interleave with the main thread's gradient
 * collectives on one communicator), the device-buffer broadcasts (parameters and optimizer states), the
 * agreement on how device buffers move (hs_comm_device_mode; the gradient all-reduce itself is
 * grad_buckets.h) and the host float64 stat sync. Also runs without mpirun as a single process (Open MPI
 * singleton).
 * Two kinds of buffer, never mixed: *_device functions take device pointers of a backend and run as
 * device collectives (MPI on the CPU backend, whose device memory is host memory; NCCL on the device's
 * stream on CUDA); the others take host memory and are MPI calls. No device pointer reaches MPI. */
#ifndef HS_COMM_H
#define HS_COMM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

typedef struct hs_comm {
    int rank, size;             /* world */
    int local_rank, local_size; /* on this node (MPI_COMM_TYPE_SHARED) */
    MPI_Comm world;             /* dup of MPI_COMM_WORLD, errors returned */
    MPI_Comm node;
    MPI_Comm io;                /* dup for HDF5 collective I/O (prefetch thread only) */
    MPI_Comm error;             /* dup used only to agree on fatal errors (util/check.c) */
} hs_comm;

/* MPI_Init_thread(MPI_THREAD_MULTIPLE); fatal if the library cannot provide it. */
void hs_comm_init(hs_comm *c, int *argc, char ***argv);
void hs_comm_finalize(hs_comm *c);

/* How device buffers move between ranks, agreed by every rank at the first device collective (a
 * collective call the first time; on DEVICE it also joins the device's collective group):
 *   HOST    every rank's device memory is host memory (CPU backends): MPI on the buffers;
 *   DEVICE  no rank's is: the devices' own collectives (NCCL);
 *   STAGED  a mixed job (CPU and GPU ranks), or GPU ranks of which two share one GPU (NCCL refuses
 *           that; gpu_census.h): GPU ranks copy to host memory around the same MPI calls. */
enum { HS_COMM_MOVE_HOST = 1, HS_COMM_MOVE_DEVICE = 2, HS_COMM_MOVE_STAGED = 3 };
int hs_comm_device_mode(const hs_comm *c, const hs_backend *be);
/* Broadcast a device buffer of any size from root (the parameters and optimizer states of a resume). */
void hs_comm_bcast_device(const hs_comm *c, const hs_backend *be, void *buf, size_t bytes, int root);
/* Sum a small float64 vector (fast stat sync: one call per update). */
void hs_comm_allreduce_sum_double(const hs_comm *c, double *v, int n);
/* Host memory of any size (sent in pieces of at most 2^30 bytes: MPI counts are int). */
void hs_comm_bcast_bytes(const hs_comm *c, void *buf, size_t bytes, int root);
/* Element-wise minimum into lo and maximum into hi over all ranks (the replica check). */
void hs_comm_allreduce_minmax_u64(const hs_comm *c, uint64_t *lo, uint64_t *hi, int n);
void hs_comm_barrier(const hs_comm *c);
/* Logical AND / max over ranks of an int (agreeing on an error or a decision). */
int hs_comm_all_true(const hs_comm *c, int value);
long long hs_comm_max_ll(const hs_comm *c, long long value);
/* Every rank gets rank 0's status (the prep commands: rank 0 works alone, then all agree on how it went).
 * The others sleep-poll instead of spinning in MPI, so they leave the cores to rank 0 while it works. */
int hs_comm_share_status(const hs_comm *c, int status);

#endif
