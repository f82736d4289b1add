/* hs_backend_cuda of a build with the CUDA backend (configure --with-cuda). The backend is a module,
 * hetseq_cuda.so (src/backend/cuda/ and the kernels of kernels/, linked against cudart, cuBLASLt, cuDNN and NCCL),
 * which this file opens on the first call, that is only on a rank whose device is "cuda" or "auto":
 * the hetseq executable itself needs none of the CUDA libraries, so a CPU rank starts on a node that
 * lacks them and does not pay for loading them. The module calls back into the executable (logging,
 * error reports, the device-op ledger: hetseq is linked with --export-dynamic), so there is one copy of
 * that state. Where the module is looked for (docs/gpu.md, "The CUDA module"):
 *   1. $HETSEQ_CUDA_MODULE, when set (and then only there);
 *   2. hetseq_cuda.so next to the executable (/proc/self/exe's directory: a build tree);
 *   3. ../lib/hetseq/hetseq_cuda.so from the executable's directory (an installed tree moved or copied
 *      elsewhere after make install, as module trees often are);
 *   4. the configured $(pkglibdir) (HS_PKGLIBDIR: an installed hetseq).
 * A build without the CUDA backend links no_cuda.c instead. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build_config.h" /* PACKAGE_VERSION */
#include "backend/backend.h"
#include "util/log.h"

#ifndef HS_PKGLIBDIR
#error "HS_PKGLIBDIR (the directory make install puts hetseq_cuda.so in) comes from Makefile.am"
#endif

#define HS_CUDA_MODULE_NAME "hetseq_cuda.so"

typedef const hs_backend *(*hs_cuda_make_fn)(int local_rank, char *why, size_t why_len);
typedef const hs_backend *(*hs_cuda_precision_fn)(const hs_backend *be, int precision);
typedef const char *(*hs_cuda_id_fn)(void);

static struct {
    int tried;                      /* the module was looked for (once per process) */
    hs_cuda_make_fn make;           /* its hs_backend_cuda, NULL when it could not be loaded */
    hs_cuda_precision_fn precision; /* its hs_backend_cuda_with_precision */
    char error[1024];               /* why it could not be loaded: the path, dlerror's text, what to do */
    char path[PATH_MAX];            /* the file looked for (opened, when make is set) and how it was found */
    char where[64];
    int logged;                     /* the log line was written (once per process) */
} module;

/* The module's path into path[len]: $HETSEQ_CUDA_MODULE, else next to the executable or in ../lib/hetseq
 * from it when a file is there, else in HS_PKGLIBDIR; where[where_len] says which it is, for the error. */
static void module_path(char *path, size_t len, char *where, size_t where_len) {
    const char *env = getenv("HETSEQ_CUDA_MODULE");
    if (env && *env) {
        snprintf(path, len, "%s", env);
        snprintf(where, where_len, "HETSEQ_CUDA_MODULE");
        return;
    }
    char exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            slash[1] = '\0';
            if ((size_t)snprintf(path, len, "%s" HS_CUDA_MODULE_NAME, exe) < len && access(path, F_OK) == 0) {
                snprintf(where, where_len, "next to hetseq");
                return;
            }
            if ((size_t)snprintf(path, len, "%s../lib/hetseq/" HS_CUDA_MODULE_NAME, exe) < len && access(path, F_OK) == 0) {
                snprintf(where, where_len, "../lib/hetseq from hetseq");
                return;
            }
        }
    }
    snprintf(path, len, "%s/" HS_CUDA_MODULE_NAME, HS_PKGLIBDIR);
    snprintf(where, where_len, "none next to hetseq or in ../lib/hetseq; the install directory");
}

/* Opens the module and finds its two entry points; on failure module.error says why and what to do. */
static void module_load(void) {
    module.tried = 1;
    char *path = module.path, *where = module.where;
    module_path(path, sizeof module.path, where, sizeof module.where);
    /* RTLD_NOW: a CUDA library or a symbol of hetseq the module needs and cannot find is reported here,
     * with its name, not as a crash in the middle of training. RTLD_LOCAL: the module's symbols stay
     * its own (the entry points are found by dlsym on its handle). */
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *err = dlerror();
        snprintf(module.error, sizeof module.error,
                 "the CUDA backend module %.300s (%s) could not be loaded (%.300s). It needs the CUDA libraries this build "
                 "of hetseq was made with (cudart, cuBLASLt, cuDNN, NCCL): load them (module load cuda cudnn "
                 "nccl) or add their directories to LD_LIBRARY_PATH; HETSEQ_CUDA_MODULE=/path/to/" HS_CUDA_MODULE_NAME
                 " names the module when it is elsewhere",
                 path, where, err ? err : "no reason given");
        return;
    }
    /* dlsym on the handle: the module's own definitions, not the loader's of the same names in hetseq */
    static const char *const names[3] = {"hs_backend_cuda_id", "hs_backend_cuda", "hs_backend_cuda_with_precision"};
    void *entry[3] = {NULL, NULL, NULL};
    const char *err = NULL;
    for (int i = 0; i < 3 && !err; i++) {
        dlerror(); /* clear any earlier error, so that the one read below is this lookup's */
        entry[i] = dlsym(handle, names[i]);
        err = dlerror();
        if (!err && !entry[i]) err = "an entry point is NULL";
    }
    if (err) {
        snprintf(module.error, sizeof module.error,
                 "%.300s is not hetseq's CUDA backend module (%.300s); point HETSEQ_CUDA_MODULE at the "
                 HS_CUDA_MODULE_NAME " built with this hetseq",
                 path, err);
        dlclose(handle);
        return;
    }
    /* a module of another build of hetseq would run with another op table: refused, by name */
    char own[64];
    snprintf(own, sizeof own, HS_BACKEND_ID_FORMAT, PACKAGE_VERSION, sizeof(hs_backend));
    const char *id = ((hs_cuda_id_fn)entry[0])();
    if (strcmp(id, own) != 0) {
        snprintf(module.error, sizeof module.error,
                 "%.300s is the CUDA backend module of another build of hetseq (%.63s; this hetseq: %s); point "
                 "HETSEQ_CUDA_MODULE at the " HS_CUDA_MODULE_NAME " built with this hetseq, or install both again",
                 path, id, own);
        dlclose(handle);
        return;
    }
    hs_cuda_make_fn make = (hs_cuda_make_fn)entry[1];
    hs_cuda_precision_fn precision = (hs_cuda_precision_fn)entry[2];
    /* never closed: the backend's tables, kernels and device state live until the process ends */
    module.make = make;
    module.precision = precision;
}

const hs_backend *hs_backend_cuda(int local_rank, char *why, size_t why_len) {
    if (!module.tried) module_load();
    if (!module.make) {
        snprintf(why, why_len, "%s", module.error);
        return NULL;
    }
    const hs_backend *be = module.make(local_rank, why, why_len);
    /* with several installs (modules of other versions, a copied build) the file a job runs is worth a
     * line: rank 0's, after the module's own per-rank device line */
    if (be && !module.logged) {
        module.logged = 1;
        hs_log("| CUDA module: %s (%s)", module.path, module.where);
    }
    return be;
}

/* Only reached with a backend the module made (hs_backend_with_precision passes the CPU's elsewhere). */
const hs_backend *hs_backend_cuda_with_precision(const hs_backend *be, int precision) {
    return module.precision ? module.precision(be, precision) : be;
}
