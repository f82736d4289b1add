/* Run-time backend choice: one installed binary serves CPU and GPU nodes of a mixed cluster. The CUDA
 * backend is linked in by configure --with-cuda (src/backend/cuda/); a build without it links
 * no_cuda.c, whose hs_backend_cuda always says why there is no GPU. */
#include "backend/backend.h"

#include <stdio.h>
#include <string.h>

#include "util/check.h"
#include "util/log.h"

const hs_backend *hs_backend_select(const char *device, int local_rank) {
    char why[256] = "";
    if (strcmp(device, "cpu") == 0) return hs_backend_cpu();
    if (strcmp(device, "auto") == 0) {
        const hs_backend *gpu = hs_backend_cuda(local_rank, why, sizeof why);
        if (gpu) return gpu;
        hs_log("| device = auto: %s; running on the CPU", why);
        return hs_backend_cpu();
    }
    if (strcmp(device, "cuda") == 0) {
        const hs_backend *gpu = hs_backend_cuda(local_rank, why, sizeof why);
        if (gpu) return gpu;
        hs_die("device = \"cuda\" but %s. Run on a GPU node (check nvidia-smi and CUDA_VISIBLE_DEVICES), or set "
               "device = \"cpu\" or \"auto\"",
               why);
    }
    hs_die("device = \"%s\" is not one of \"auto\", \"cpu\", \"cuda\"", device);
}
