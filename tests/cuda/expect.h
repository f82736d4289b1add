/* For the CUDA backend's small test programs: EXPECT(cond, fmt, ...), a failed condition prints its
 * file, line and message to stderr and counts in `failures` (the program's exit status is 1 when it is
 * not 0), so every check of a run is reported, not only the first; and the CUDA backend or a skip. */
#ifndef HS_TESTS_CUDA_EXPECT_H
#define HS_TESTS_CUDA_EXPECT_H

#include <stdio.h>
#include <stdlib.h>

#include "backend/backend.h"

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

/* The CUDA backend of device 0 (the emulated device under make check); none: exit 77, automake's skip */
static const hs_backend *cuda_backend_or_skip(void) {
    char why[512] = "";
    const hs_backend *be = hs_backend_cuda(0, why, sizeof why);
    if (!be) {
        fprintf(stderr, "SKIP: no CUDA device: %s\n", why);
        exit(77);
    }
    return be;
}

#endif
