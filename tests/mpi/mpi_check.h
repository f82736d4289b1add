/* Checks for the MPI test programs (test_bert_shards.c, test_mnist_collective.c): a failed check names
 * the rank, file and line and aborts every rank, so a multi-rank run cannot hang on a missing partner. */
#ifndef HS_TESTS_MPI_CHECK_H
#define HS_TESTS_MPI_CHECK_H

#include <mpi.h>
#include <stdio.h>

/* this process's rank in MPI_COMM_WORLD, for the messages; set right after MPI is up */
static int g_rank;

#define CHECK(cond, ...)                                                                                    \
    do {                                                                                                    \
        if (!(cond)) {                                                                                      \
            fprintf(stderr, "FAIL [rank %d] %s:%d: ", g_rank, __FILE__, __LINE__);                           \
            fprintf(stderr, __VA_ARGS__);                                                                   \
            fputc('\n', stderr);                                                                            \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                                   \
        }                                                                                                   \
    } while (0)

/* Every rank passes its reader's H5Pget_mpio_no_collective_cause (OR-ed over its reads); a non-zero
 * cause on any rank means some transfer fell back to independent I/O. */
#define CHECK_ALL_COLLECTIVE(cause, world)                                                                  \
    do {                                                                                                    \
        unsigned cause_ = (cause), any_cause_ = 0;                                                          \
        MPI_Allreduce(&cause_, &any_cause_, 1, MPI_UNSIGNED, MPI_BOR, (world));                             \
        CHECK(any_cause_ == 0, "a read was not collective: H5Pget_mpio_no_collective_cause = 0x%x",         \
              any_cause_);                                                                                  \
    } while (0)

#endif
