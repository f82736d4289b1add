/* Fault injection from HETSEQ_FAULT (see fault.h). Parsed once on the main thread before any other
 * thread starts; afterwards only read (the `fired` flags are touched by the thread that fires them). */
#include "util/fault.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/check.h"

#define MAX_FAULTS 8

typedef struct fault {
    hs_fault_kind kind;
    int rank;
    int64_t update;
    double seconds; /* stall: < 0 = for ever */
    char file[256];
    int fired;
} fault;

static fault faults[MAX_FAULTS];
static int n_faults = 0;
static int my_rank = 0;

static const char *const kind_names[HS_FAULT_KINDS] = {"die", "stall", "ckpt_die", "enospc", "unreadable", "nan",
                                                       "corrupt", "overflow"};

static void parse_one(char *spec) {
    char *save = NULL;
    char *tok = strtok_r(spec, ":", &save);
    if (!tok) return;
    if (n_faults == MAX_FAULTS) hs_die("HETSEQ_FAULT: at most %d faults", MAX_FAULTS);
    fault *f = &faults[n_faults];
    memset(f, 0, sizeof *f);
    f->kind = HS_FAULT_KINDS;
    for (int k = 0; k < HS_FAULT_KINDS; k++)
        if (!strcmp(tok, kind_names[k])) f->kind = (hs_fault_kind)k;
    if (f->kind == HS_FAULT_KINDS)
        hs_die("HETSEQ_FAULT: unknown fault '%s' (die, stall, ckpt_die, enospc, unreadable, nan, corrupt, overflow; see "
               "docs/reliability.md)", tok);
    f->update = 1;
    f->seconds = -1;
    while ((tok = strtok_r(NULL, ":", &save)) != NULL) {
        char *eq = strchr(tok, '=');
        if (!eq) hs_die("HETSEQ_FAULT: '%s' is not key=value", tok);
        *eq = 0;
        const char *v = eq + 1;
        char *end = NULL;
        errno = 0;
        if (!strcmp(tok, "rank")) {
            f->rank = (int)strtol(v, &end, 10);
        } else if (!strcmp(tok, "update")) {
            f->update = strtoll(v, &end, 10);
        } else if (!strcmp(tok, "seconds")) {
            f->seconds = strtod(v, &end);
        } else if (!strcmp(tok, "file")) {
            snprintf(f->file, sizeof f->file, "%s", v);
            end = (char *)v + strlen(v);
        } else {
            hs_die("HETSEQ_FAULT: unknown key '%s' (rank, update, seconds, file)", tok);
        }
        if (errno || !end || *end) hs_die("HETSEQ_FAULT: bad value '%s' for %s", v, tok);
    }
    if (f->kind == HS_FAULT_UNREADABLE && !f->file[0]) hs_die("HETSEQ_FAULT: unreadable needs file=SUBSTRING");
    n_faults++;
}

void hs_fault_init(int rank) {
    my_rank = rank;
    n_faults = 0;
    const char *env = getenv("HETSEQ_FAULT");
    if (!env || !*env) return;
    char *copy = HS_STRDUP(env), *save = NULL;
    for (char *spec = strtok_r(copy, ";", &save); spec; spec = strtok_r(NULL, ";", &save)) parse_one(spec);
    free(copy);
    for (int i = 0; i < n_faults; i++)
        if (faults[i].rank == my_rank) {
            fprintf(stderr, "hetseq [rank %d]: fault injection armed: %s at update %lld (HETSEQ_FAULT)\n", my_rank,
                    kind_names[faults[i].kind], (long long)faults[i].update);
            fflush(stderr);
        }
}

int hs_fault_fires(hs_fault_kind kind, int64_t update) {
    for (int i = 0; i < n_faults; i++) {
        fault *f = &faults[i];
        if (f->kind == kind && f->rank == my_rank && f->update == update && !f->fired) {
            f->fired = 1;
            fprintf(stderr, "hetseq [rank %d]: fault injection: %s at update %lld (HETSEQ_FAULT)\n", my_rank,
                    kind_names[kind], (long long)update);
            fflush(stderr);
            return 1;
        }
    }
    return 0;
}

void hs_fault_update_start(int64_t update) {
    if (hs_fault_fires(HS_FAULT_DIE, update)) raise(SIGKILL);
    for (int i = 0; i < n_faults; i++) {
        fault *f = &faults[i];
        if (f->kind == HS_FAULT_STALL && f->rank == my_rank && f->update == update && !f->fired) {
            double s = f->seconds;
            (void)hs_fault_fires(HS_FAULT_STALL, update);
            if (s < 0)
                for (;;) pause();
            /* Signals interrupt a sleep: sleep again for what is left. */
            struct timespec left = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
            while (nanosleep(&left, &left) != 0 && errno == EINTR) {
            }
        }
    }
}

int hs_fault_access(const char *path, int mode) {
    for (int i = 0; i < n_faults; i++)
        if (faults[i].kind == HS_FAULT_UNREADABLE && faults[i].rank == my_rank && strstr(path, faults[i].file)) {
            errno = EACCES;
            return -1;
        }
    return access(path, mode);
}
