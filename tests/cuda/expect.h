/* EXPECT(cond, fmt, ...) for the CUDA backend's small test programs: a failed condition prints its file,
 * line and message to stderr and counts in `failures` (the program's exit status is 1 when it is not 0),
 * so every check of a run is reported, not only the first. */
#ifndef HS_TESTS_CUDA_EXPECT_H
#define HS_TESTS_CUDA_EXPECT_H

#include <stdio.h>

static int failures;
#define EXPECT(cond, ...)                                                                                          \
    do {                                                                                                           \
        if (!(cond)) {                                                                                             \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                   \
            fprintf(stderr, __VA_ARGS__);                                                                          \
            fputc('\n', stderr);                                                                                   \
            failures++;                                                                                            \
        }                                                                                                          \
    } while (0)

#endif
