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

const hs_backend *hs_backend_with_precision(const hs_backend *be, const char *precision) {
    char why[256] = "";
    if (strcmp(precision, "fp32") == 0) return be;
    if (strcmp(be->name, "cpu") == 0) {
        if (strcmp(precision, "bf16") != 0)
            hs_die("precision = \"%s\": %s is a CUDA precision (tensor cores), this run is on the CPU, which "
                   "computes in \"fp32\" or \"bf16\"; set one of those",
                   precision, precision);
        const hs_backend *bf16 = hs_backend_cpu_bf16(why, sizeof why);
        if (!bf16) hs_die("precision = \"bf16\" on the CPU: %s; or set precision = \"fp32\"", why);
        return bf16;
    }
    hs_die("precision = \"%s\" on the %s backend: this release trains on GPUs in fp32 only (mixed precision on "
           "CUDA is not built yet); set precision = \"fp32\", or device = \"cpu\" with precision = \"bf16\"",
           precision, be->name);
}
