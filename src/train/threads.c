/* Threads per rank, and OpenBLAS's threads beside hetseq's OpenMP threads.
 *
 * hetseq's own loops (bias, activations, LayerNorm, attention, optimizer) are OpenMP parallel regions;
 * its GEMMs go to OpenBLAS. Debian ships OpenBLAS in two builds behind one soname (libopenblas.so.0,
 * chosen by update-alternatives; the pthread build has the higher priority, so it wins whenever both
 * are installed):
 *   - the OpenMP build runs its GEMM threads as an OpenMP team: the same pool as hetseq's loops, so a
 *     core is never asked for by two spinning threads;
 *   - the pthread build keeps its own pool beside OpenMP's. After a GEMM its workers spin (up to 2^28
 *     cycles, OPENBLAS_THREAD_TIMEOUT) while hetseq's next parallel region runs, and after a region
 *     libgomp's workers spin (GOMP_SPINCOUNT) while the next GEMM runs: with T threads of each on T
 *     cores, 2T-1 threads want the T cores, every barrier waits for a thread the kernel has parked, and
 *     2 threads ran slower than 1.
 * With the pthread build and more than one thread, hetseq runs OpenBLAS on one thread and its own loops
 * on all of them: no pool beside OpenMP's is left to spin, so it is never slower than one thread. The
 * GEMMs the CNN's convolutions and BERT's attention issue from inside parallel regions (one per thread)
 * keep their speed; the large GEMMs called between regions run on one core. Measured on 2 cores
 * (docs/performance.md, "OpenBLAS: which build, ..."): the other splits were slower — GEMMs on 2
 * threads and loops on 1 lost the parallel loops and paid for threading the per-head GEMMs, row blocks
 * of single-threaded GEMMs in a parallel region ran slower still with this build. The warning names
 * the command that gives full speed. Both libraries read their spin and timeout variables when they are
 * loaded, before main, so hetseq cannot change those itself. */
#include <link.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build_config.h"
#include "train/trainer.h"
#include "util/log.h"
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
#include <cblas.h>
#endif

/* openblas_get_parallel(): what the loaded library was built with. */
enum { HS_BLAS_SEQUENTIAL = 0, HS_BLAS_PTHREADS = 1, HS_BLAS_OPENMP = 2, HS_BLAS_NOT_OPENBLAS = -1 };

static int requested_threads(const hs_comm *comm) {
    int threads;
    const char *env = getenv("OMP_NUM_THREADS");
    if (env && *env) {
        threads = atoi(env);
    } else {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = (int)(cores / (comm->local_size > 0 ? comm->local_size : 1));
    }
    return threads < 1 ? 1 : threads;
}

#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
/* The file the GEMM symbol was loaded from, symlinks resolved: which alternative update-alternatives
 * selected (…/openblas-openmp/… or …/openblas-pthread/…), or "".
 * dl_iterate_phdr is in the C library itself (dladdr needs -ldl before glibc 2.34). */
typedef struct blas_lookup {
    uintptr_t addr;
    char file[160];
} blas_lookup;
static int find_object(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    blas_lookup *l = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        const uintptr_t start = (uintptr_t)info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && l->addr >= start && l->addr < start + ph->p_memsz) {
            snprintf(l->file, sizeof l->file, "%s", info->dlpi_name && *info->dlpi_name ? info->dlpi_name : "linked in");
            return 1;
        }
    }
    return 0;
}
static void blas_file(char *buf, size_t n) {
    blas_lookup l = {.addr = (uintptr_t)(void *)cblas_sgemm, .file = ""};
    dl_iterate_phdr(find_object, &l);
    char *real = l.file[0] == '/' ? realpath(l.file, NULL) : NULL; /* through the alternatives' symlinks */
    snprintf(buf, n, "%s", real ? real : l.file);
    free(real);
}
#endif

/* " (OPENBLAS_CORETYPE=..., OPENBLAS_L2_SIZE=...)" for the variables that change OpenBLAS's kernels or
 * blocking, when set: a machine-wide setting of them changes speed (and summation order). */
static void blas_env(char *buf, size_t n) {
    static const char *const names[] = {"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS", NULL};
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; names[i]; i++) {
        const char *v = getenv(names[i]);
        if (!v) continue;
        int len = snprintf(buf + used, n - used, "%s%s=%s", used ? ", " : "; ", names[i], v);
        if (len < 0 || (size_t)len >= n - used) break;
        used += (size_t)len;
    }
}

void hs_setup_threads(const hs_comm *comm) {
    const int threads = requested_threads(comm);
    int blas_threads = threads, parallel = HS_BLAS_NOT_OPENBLAS;
    char blas[512] = "a CBLAS other than OpenBLAS (its own threading)";
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    parallel = openblas_get_parallel();
    char *config = openblas_get_config(); /* e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY SkylakeX MAX_THREADS=64" */
    char file[160];
    blas_file(file, sizeof file);
    snprintf(blas, sizeof blas, "%s (%s build, %s)", config ? config : "OpenBLAS",
             parallel == HS_BLAS_OPENMP ? "OpenMP" : parallel == HS_BLAS_PTHREADS ? "pthread" : "sequential", file);
    if (parallel == HS_BLAS_PTHREADS || parallel == HS_BLAS_SEQUENTIAL) blas_threads = 1; /* see the head of this file */
    openblas_set_num_threads(blas_threads);
#endif
    omp_set_num_threads(threads);
    char env[256];
    blas_env(env, sizeof env);
    hs_log("| %d rank(s), %d on this node, %d thread(s) per rank (OpenMP %d, OpenBLAS %d); BLAS: %s%s", comm->size,
           comm->local_size, threads, threads, blas_threads, blas, env);
    if (comm->local_rank != 0) return; /* one warning per node */
    /* kernels OpenBLAS misdetected: src/train/blas_autofix.c, before MPI started */
    if (threads == 1) return;
    if (parallel == HS_BLAS_PTHREADS)
        hs_warn("the loaded OpenBLAS is its pthread build, whose threads would compete with hetseq's OpenMP threads "
                "for the cores: its GEMMs run on 1 thread of this rank's %d, which costs speed (docs/performance.md). "
                "For full speed select the OpenMP build: on Debian/Ubuntu, as root, `apt-get install "
                "libopenblas0-openmp && update-alternatives --set libopenblas.so.0-x86_64-linux-gnu "
                "/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so.0` (other architectures: their triplet in "
                "place of x86_64-linux-gnu), or run with LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp",
                threads);
    else if (parallel == HS_BLAS_SEQUENTIAL)
        hs_warn("the loaded OpenBLAS is its sequential build: GEMMs run on 1 thread of this rank's %d. For full "
                "speed use the OpenMP build (Debian/Ubuntu: apt-get install libopenblas0-openmp; "
                "docs/performance.md)",
                threads);
}
