/* A deliberately broken MPI program for tests/sanitizers/test_sanitizer_canary.sh: proves that a
 * sanitizer report in one rank of an mpirun job reaches the test (the job fails, the report is
 * written), so that the sanitizer runs of the MPI tests cannot pass silently.
 *   san_canary ok      every rank ends cleanly
 *   san_canary heap    the last rank writes one element past a heap block (AddressSanitizer)
 *   san_canary ub      the last rank overflows a signed int (UndefinedBehaviorSanitizer)
 *   san_canary race    the last rank runs two threads that write one variable unsynchronized (TSan)
 * Built in every build (cheap); only run in sanitizer builds. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int shared_counter; /* written by two threads without a lock in mode "race" */
static volatile int g_index = 8, g_big = 2147483600;

static void *racer(void *arg) {
    for (int i = 0; i < 1000; i++) shared_counter += (int)(size_t)arg;
    return NULL;
}

int main(int argc, char **argv) {
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *mode = argc > 1 ? argv[1] : "ok";
    int bad = rank == size - 1;
    int result = 0;
    if (bad && !strcmp(mode, "heap")) {
        int *p = malloc(8 * sizeof *p);
        if (!p) return 2;
        /* through memset, so that ASan (not UBSan's object-size check) reports the write past the end */
        memset(p, 0, (size_t)(g_index + 1) * sizeof *p);
        result = p[3];
        free(p);
    } else if (bad && !strcmp(mode, "ub")) {
        int x = g_big;
        for (int i = 0; i < 100; i++) x += argc + 1; /* passes INT_MAX */
        result = x & 1;
    } else if (bad && !strcmp(mode, "race")) {
        pthread_t a, b;
        pthread_create(&a, NULL, racer, (void *)1);
        pthread_create(&b, NULL, racer, (void *)2);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        result = shared_counter & 1;
    } else if (strcmp(mode, "ok") && strcmp(mode, "heap") && strcmp(mode, "ub") && strcmp(mode, "race")) {
        fprintf(stderr, "usage: san_canary ok|heap|ub|race\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) printf("san_canary %s: ended normally (%d)\n", mode, result);
    MPI_Finalize();
    return 0;
}
