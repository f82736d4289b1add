/* On/off switches read from the environment (test knobs, tracing, checking modes). */
#ifndef HS_UTIL_ENV_FLAG_H
#define HS_UTIL_ENV_FLAG_H

#include <stdlib.h>
#include <string.h>

/* 1 when the environment variable `name` is set, non-empty and not "0"; read once into *cache (-1:
 * not read yet), so a call on a hot path costs a compare. Threads that race on the first read store the
 * same value. */
static inline int hs_env_flag(const char *name, int *cache) {
    if (*cache < 0) {
        const char *v = getenv(name);
        *cache = v && *v && strcmp(v, "0") != 0;
    }
    return *cache;
}

#endif
