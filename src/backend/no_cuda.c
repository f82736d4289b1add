/* hs_backend_cuda of a build without the CUDA backend (configure without --with-cuda). Linked after the
 * CUDA backend's library when there is one, so that library's definition wins. */
#include <stdio.h>

#include "backend/backend.h"

const hs_backend *hs_backend_cuda(int local_rank, char *why, size_t why_len) {
    (void)local_rank;
    snprintf(why, why_len, "this build of hetseq has no CUDA backend (configure --with-cuda builds it)");
    return NULL;
}

/* Unreachable without a CUDA backend (hs_backend_cuda above never returns one). */
const hs_backend *hs_backend_cuda_with_precision(const hs_backend *be, int precision) {
    (void)precision;
    return be;
}
