/* OpenBLAS kernels for CPUs that OpenBLAS misdetects (see blas_autofix.h).
 *
 * Why re-execute: OPENBLAS_CORETYPE is read by OpenBLAS's constructor when the library is loaded, so
 * setting it in main changes nothing; a fresh image of the same program (execv of /proc/self/exe, same
 * pid, same argv, same environment plus the variable) loads OpenBLAS again. Doing it before MPI_Init
 * keeps the launcher's view of the rank intact (mpirun and srun see one process that never started MPI
 * twice), and every rank decides for itself, so each rank of a job, on every node, gets the kernels its
 * own CPU allows.
 *
 * Why probe in children: a CPU whose cpuid claims AVX-512 while the OS does not save its registers, or a
 * hypervisor that masks instructions, would kill hetseq with SIGILL only after the switch. Each probe is
 * this program again (fork + execve in probe mode, no MPI), timing a one-thread SGEMM with the kernels of
 * its environment: once with the detected kernels, once with the candidate. The switch happens only
 * when the candidate's probe exited normally and ran at least HS_AUTOFIX_MIN_GAIN× faster: the true gap
 * is 3-4×, so a loaded machine does not flip the choice from run to run (which would change the GEMMs'
 * summation order between runs compared bit for bit). OPENBLAS_L2_SIZE is not set: the AVX2 and AVX-512
 * kernels' blocking does not depend on it (docs/performance.md measured no change) and 0.3.21 does not
 * read it. */
#include "train/blas_autofix.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "build_config.h"
#include "cli.h"
#include "util/check.h"
#include "util/log.h"
#include "util/timer.h"
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
#include <cblas.h>
#endif

#define HS_AUTOFIX_MARKER "HETSEQ_OPENBLAS_AUTOFIXED" /* "<from> <to> <rate from> <rate to>": set for the re-exec */
#define HS_AUTOFIX_PROBE "--openblas-probe"
#define HS_AUTOFIX_MIN_GAIN 1.25
#define HS_PROBE_N 256          /* one-thread SGEMM: 34 MFLOP, milliseconds with either kernels */
#define HS_PROBE_SECONDS 0.1    /* best product of this long a run (at least 3 products) */
#define HS_PROBE_TIMEOUT_S 60   /* a probe that hangs is killed by its own alarm */

extern char **environ;

enum { HS_REPORT_NONE, HS_REPORT_NOTE, HS_REPORT_WARN };
static int g_report_kind = HS_REPORT_NONE;
static char g_report[768];

static int test_hook(const char *word) {
    const char *hooks = getenv("HETSEQ_OPENBLAS_AUTOFIX_TEST");
    if (!hooks) return 0;
    const size_t n = strlen(word);
    for (const char *p = hooks; (p = strstr(p, word)) != NULL; p += n)
        if ((p == hooks || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return 1;
    return 0;
}

const char *hs_blas_better_coretype(const char *core) {
#if defined(__x86_64__) && defined(__GNUC__)
    /* the kernels that use AVX2 and FMA (or more): nothing to gain from switching away from these */
    static const char *const fma_cores[] = {"haswell",  "zen",        "skylakex",       "cooperlake",
                                            "excavator", "steamroller", "sapphirerapids", NULL};
    __builtin_cpu_init(); /* libgcc's checks include the OS's XCR0: the registers are saved */
    if (!core || !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return NULL;
    for (int i = 0; fma_cores[i]; i++)
        if (!strcasecmp(core, fma_cores[i])) return NULL;
    const int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    return avx512 ? "SkylakeX" : "Haswell";
#else
    (void)core;
    return NULL;
#endif
}

#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
static const char *features(const char *want) { return !strcmp(want, "SkylakeX") ? "AVX-512" : "AVX2 and FMA"; }

/* Probe mode: the one-thread SGEMM rate of the kernels OpenBLAS loaded with, in GFLOP/s, on stdout. */
static void probe_main(const char *which) {
    alarm(HS_PROBE_TIMEOUT_S);
    const int candidate = which && !strcmp(which, "candidate");
    if (candidate && test_hook("sigill")) raise(SIGILL); /* as on a CPU without the kernels' instructions */
    openblas_set_num_threads(1);
    const int n = HS_PROBE_N;
    float *a, *b, *c;
    HS_ALLOC(a, (size_t)n * n);
    HS_ALLOC(b, (size_t)n * n);
    HS_ALLOC(c, (size_t)n * n);
    for (size_t i = 0; i < (size_t)n * n; i++) a[i] = b[i] = (float)(i % 7) * 0.125f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n); /* warm-up */
    double best = 0;
    const double start = hs_now();
    for (int timed = 0; timed < 3 || hs_now() - start < HS_PROBE_SECONDS; timed++) {
        const double t = hs_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        const double rate = 2.0 * n * n * (double)n / (hs_now() - t) / 1e9;
        if (rate > best) best = rate;
    }
    printf("%.6g\n", best);
    free(a);
    free(b);
    free(c);
    exit(fflush(stdout) == 0 ? 0 : 1);
}

/* environ with OPENBLAS_CORETYPE=coretype in place of any earlier one (built before fork: the child
 * only calls execve). */
static char **env_with_coretype(const char *coretype, char *entry, size_t entry_size) {
    size_t count = 0;
    while (environ[count]) count++;
    char **env;
    HS_ALLOC(env, count + 2);
    size_t k = 0;
    for (size_t i = 0; i < count; i++)
        if (strncmp(environ[i], "OPENBLAS_CORETYPE=", 18) != 0) env[k++] = environ[i];
    snprintf(entry, entry_size, "OPENBLAS_CORETYPE=%s", coretype);
    env[k++] = entry;
    env[k] = NULL;
    return env;
}

/* Runs this program in probe mode with `coretype` (NULL: the environment as it is). Returns the rate
 * in GFLOP/s, or 0 with `why` saying what went wrong. */
static double probe(const char *coretype, const char *which, char *why, size_t why_size) {
    char entry[128];
    char **env = coretype ? env_with_coretype(coretype, entry, sizeof entry) : environ;
    char *const args[] = {"hetseq", HS_AUTOFIX_PROBE, (char *)which, NULL};
    int fds[2];
    double rate = 0;
    why[0] = 0;
    if (pipe(fds) != 0) {
        snprintf(why, why_size, "could not start a probe (pipe: %s)", strerror(errno));
        goto out;
    }
    fflush(NULL); /* nothing buffered is written twice */
    const pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, why_size, "could not start a probe (fork: %s)", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        goto out;
    }
    if (pid == 0) {
        close(fds[0]);
        if (dup2(fds[1], STDOUT_FILENO) < 0) _exit(126);
        execve("/proc/self/exe", args, env);
        _exit(127);
    }
    close(fds[1]);
    char buf[64] = "";
    size_t used = 0;
    ssize_t got;
    while ((got = read(fds[0], buf + used, sizeof buf - 1 - used)) > 0 || (got < 0 && errno == EINTR))
        if (got > 0) used += (size_t)got;
    buf[used] = 0;
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (WIFSIGNALED(status))
        snprintf(why, why_size, "its probe was killed by %s", strsignal(WTERMSIG(status)));
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        snprintf(why, why_size, "its probe failed (exit status %d)", WEXITSTATUS(status));
    else if (sscanf(buf, "%lf", &rate) != 1 || !(rate > 0)) {
        rate = 0;
        snprintf(why, why_size, "its probe printed no rate");
    }
out:
    if (env != environ) free(env);
    return rate;
}

/* The re-executed image: what the first one did, for the report. */
static void report_switch(const char *marker) {
    char from[32], to[32];
    double r_from = 0, r_to = 0;
    if (sscanf(marker, "%31s %31s %lf %lf", from, to, &r_from, &r_to) != 4) return;
    const char *core = openblas_get_corename();
    if (core && strcasecmp(core, to) != 0) {
        g_report_kind = HS_REPORT_WARN;
        snprintf(g_report, sizeof g_report,
                 "hetseq re-executed itself with OPENBLAS_CORETYPE=%s, but OpenBLAS runs its %s kernels", to, core);
        return;
    }
    g_report_kind = HS_REPORT_NOTE;
    snprintf(g_report, sizeof g_report,
             "OpenBLAS misdetected this CPU as %s: using its %s kernels (one-thread SGEMM %.1f GFLOP/s against "
             "%.1f; a user's OPENBLAS_CORETYPE is kept, HETSEQ_OPENBLAS_AUTOFIX=0 turns this off)",
             from, to, r_to, r_from);
}
#endif

void hs_blas_autofix(int argc, char **argv) {
#ifdef HAVE_OPENBLAS_SET_NUM_THREADS
    if (argc >= 2 && !strcmp(argv[1], HS_AUTOFIX_PROBE)) probe_main(argc >= 3 ? argv[2] : NULL);
    const char *marker = getenv(HS_AUTOFIX_MARKER);
    if (marker) { /* the re-executed image: never again (no exec loop) */
        report_switch(marker);
        return;
    }
    /* --help and --version compute nothing: no probe (two SGEMM timings) before they print */
    if (hs_cli_computes_nothing(argc, argv)) return;
    /* valgrind virtualises cpuid (no AVX-512), and an exec'd image would leave it */
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload")) return;
    const char *core = openblas_get_corename(), *want = hs_blas_better_coretype(core);
    if (!want) return; /* the kernels in use already use what the CPU has, or it has neither AVX2 nor FMA */
    char user_value[64] = "";
    const char *user = getenv("OPENBLAS_CORETYPE");
    if (user) user = strncpy(user_value, user, sizeof user_value - 1); /* setenv below may replace it */
    if (user && !test_hook("detected")) {
        g_report_kind = HS_REPORT_WARN;
        snprintf(g_report, sizeof g_report,
                 "OPENBLAS_CORETYPE=%s in the environment (kept as set) runs OpenBLAS's %s kernels on this CPU, which "
                 "has %s: its GEMMs are several times slower than with OPENBLAS_CORETYPE=%s (docs/performance.md)",
                 user, core, features(want), want);
        return;
    }
    const char *onoff = getenv("HETSEQ_OPENBLAS_AUTOFIX");
    if (onoff && !strcmp(onoff, "0")) {
        g_report_kind = HS_REPORT_WARN;
        snprintf(g_report, sizeof g_report,
                 "OpenBLAS runs its %s kernels on this CPU, which has %s: its GEMMs are several times slower than "
                 "they can be, and HETSEQ_OPENBLAS_AUTOFIX=0 keeps hetseq from switching. Set OPENBLAS_CORETYPE=%s in "
                 "the job's environment (for mpirun: -x OPENBLAS_CORETYPE=%s; docs/performance.md)",
                 core, features(want), want, want);
        return;
    }
    char why[160];
    const double r_core = probe(NULL, "detected", why, sizeof why);
    double r_want = r_core > 0 ? probe(want, "candidate", why, sizeof why) : 0;
    /* test hooks: the outcome of the timing made certain (a test may not depend on how fast this
     * machine's kernels are, or on its load: a probe descheduled on a busy machine can time either kernels
     * many times slower): "slower" the candidate at a tenth of the detected kernels' rate, "faster" at 10x */
    if (r_core > 0 && r_want > 0 && test_hook("slower")) r_want = r_core / 10;
    if (r_core > 0 && r_want > 0 && test_hook("faster")) r_want = r_core * 10;
    const char *stay = NULL;
    char reason[320];
    if (r_core <= 0) {
        snprintf(reason, sizeof reason, "its %s kernels could not be timed: %s", core, why);
        stay = reason;
    } else if (r_want <= 0) {
        snprintf(reason, sizeof reason, "its %s kernels did not run here: %s", want, why);
        stay = reason;
    } else if (r_want < HS_AUTOFIX_MIN_GAIN * r_core) {
        snprintf(reason, sizeof reason,
                 "its %s kernels were not faster here (one-thread SGEMM %.1f GFLOP/s against %.1f; %.2f× needed)",
                 want, r_want, r_core, HS_AUTOFIX_MIN_GAIN);
        stay = reason;
    } else {
        char value[160];
        snprintf(value, sizeof value, "%s %s %.6g %.6g", core, want, r_core, r_want);
        if (setenv("OPENBLAS_CORETYPE", want, 1) == 0 && setenv(HS_AUTOFIX_MARKER, value, 1) == 0) {
            fflush(NULL);
            execv("/proc/self/exe", argv);
        }
        snprintf(reason, sizeof reason, "hetseq could not re-execute itself with OPENBLAS_CORETYPE=%s (%s)", want,
                 strerror(errno));
        stay = reason;
        if (user) setenv("OPENBLAS_CORETYPE", user, 1);
        else unsetenv("OPENBLAS_CORETYPE");
        unsetenv(HS_AUTOFIX_MARKER);
    }
    g_report_kind = HS_REPORT_WARN;
    snprintf(g_report, sizeof g_report,
             "OpenBLAS misdetected this CPU (it has %s) as %s, but hetseq stays on the %s kernels: %s. Their GEMMs may "
             "be several times slower than the CPU allows; to choose yourself set OPENBLAS_CORETYPE "
             "(docs/performance.md)",
             features(want), core, core, stay);
#else
    (void)argc;
    (void)argv;
#endif
}

void hs_blas_autofix_report(void) {
    if (g_report_kind == HS_REPORT_NOTE) hs_note_node("%s", g_report);
    else if (g_report_kind == HS_REPORT_WARN) hs_warn_node("%s", g_report);
}
