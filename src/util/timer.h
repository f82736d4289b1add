#ifndef HS_UTIL_TIMER_H
#define HS_UTIL_TIMER_H
#include <time.h>
/* Monotonic wall clock in seconds. */
static inline double hs_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#endif
