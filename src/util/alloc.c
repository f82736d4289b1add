/* Allocation that never returns NULL (check.h: HS_ALLOC, HS_REALLOC, HS_STRDUP). Its own file so that
 * test harnesses that replace the fatal-error paths (tests/fuzz/check_stub.c) link the same code. */
#include <stdlib.h>
#include <string.h>

#include "util/check.h"

void *hs_xcalloc(size_t count, size_t size, const char *file, int line) {
    if (count == 0 || size == 0) count = size = 1;
    void *p = calloc(count, size);
    if (!p)
        hs_fatal_at(file, line, "calloc", "the node is out of memory: lower training.max_sentences or use more ranks",
                    "cannot allocate %zu x %zu bytes", count, size);
    return p;
}

void *hs_xrealloc(void *p, size_t bytes, const char *file, int line) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q)
        hs_fatal_at(file, line, "realloc", "the node is out of memory", "cannot allocate %zu bytes", bytes);
    return q;
}

char *hs_xstrdup(const char *s, const char *file, int line) {
    size_t n = strlen(s) + 1;
    char *d = hs_xcalloc(n, 1, file, line);
    memcpy(d, s, n);
    return d;
}
