/* Run-time backend choice: one installed binary serves CPU and GPU nodes of a mixed cluster. */
#include "backend/backend.h"

#include <string.h>

#include "build_config.h" /* HS_HAVE_CUDA */
#include "util/check.h"
#include "util/log.h"

const hs_backend *hs_backend_select(const char *device, int local_rank) {
    (void)local_rank;
    if (strcmp(device, "cpu") == 0) return hs_backend_cpu();
    if (strcmp(device, "auto") == 0) {
#ifdef HS_HAVE_CUDA
        /* The CUDA backend arrives with its own issue; until then auto means the CPU. */
#endif
        hs_log("| device = auto: no usable GPU backend in this build, running on the CPU");
        return hs_backend_cpu();
    }
    if (strcmp(device, "cuda") == 0)
        hs_die_all("device = \"cuda\" but this build has no usable CUDA backend%s. Set device = \"cpu\" or "
                   "\"auto\" (or rebuild with ./configure --with-cuda on a GPU node).",
#ifdef HS_HAVE_CUDA
                   " yet"
#else
                   ""
#endif
        );
    hs_die_all("device = \"%s\" is not one of \"auto\", \"cpu\", \"cuda\"", device);
}
