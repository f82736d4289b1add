/* Run-time backend choice: one installed binary serves CPU and GPU nodes of a mixed cluster. The CUDA
 * backend is not in this release (docs/gpu.md): configure --with-cuda checks the toolkit but builds no
 * device code yet, so every device choice here ends on the CPU or with a message. */
#include "backend/backend.h"

#include <string.h>

#include "util/check.h"
#include "util/log.h"

const hs_backend *hs_backend_select(const char *device, int local_rank) {
    (void)local_rank; /* picks the GPU once there is a CUDA backend */
    if (strcmp(device, "cpu") == 0) return hs_backend_cpu();
    if (strcmp(device, "auto") == 0) {
        hs_log("| device = auto: no usable GPU backend in this build, running on the CPU");
        return hs_backend_cpu();
    }
    if (strcmp(device, "cuda") == 0)
        hs_die_all("device = \"cuda\" but this build has no usable CUDA backend. Set device = \"cpu\" or \"auto\" "
                   "(the CUDA backend arrives in a later release; see docs/gpu.md).");
    hs_die_all("device = \"%s\" is not one of \"auto\", \"cpu\", \"cuda\"", device);
}
