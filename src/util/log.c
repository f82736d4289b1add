#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>

static int g_log_rank = 0, g_log_local_rank = 0;

void hs_log_set_rank(int rank) { g_log_rank = rank; }
int hs_log_rank(void) { return g_log_rank; }
void hs_log_set_local_rank(int local_rank) { g_log_local_rank = local_rank; }

void hs_log(const char *fmt, ...) {
    if (g_log_rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
}

static void vwarn(const char *fmt, va_list ap) {
    fprintf(stderr, "hetseq: warning: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    fflush(stderr);
}

void hs_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vwarn(fmt, ap);
    va_end(ap);
}

void hs_warn_node(const char *fmt, ...) {
    if (g_log_local_rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vwarn(fmt, ap);
    va_end(ap);
}

void hs_note_node(const char *fmt, ...) {
    if (g_log_local_rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "hetseq: ");
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
}
