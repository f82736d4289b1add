/* A profiler's capture range around chosen updates: HETSEQ_PROFILE_UPDATES=FIRST-LAST (or one update N)
 * in the environment starts the backend's range before update FIRST and ends it after update LAST
 * (1-based, as logged), so `nsys profile --capture-range=cudaProfilerApi` or `ncu --profile-from-start
 * off` record the steady state, not start-up (docs/gpu.md, "Profiling chosen updates"). */
#ifndef HS_TRAIN_PROFILE_RANGE_H
#define HS_TRAIN_PROFILE_RANGE_H

#include <stdint.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hs_profile_range {
    const hs_backend *be; /* NULL: no range (unset, or a backend without a profiler) */
    int64_t first, last;  /* updates, 1-based, inclusive */
    int on;               /* the range is open */
} hs_profile_range;

/* Reads HETSEQ_PROFILE_UPDATES; a value that is not N or FIRST-LAST (1 <= FIRST <= LAST) ends the run
 * naming it. On a backend without a profiler range (the CPU) it says so once and does nothing. */
void hs_profile_range_init(hs_profile_range *r, const hs_backend *be);
/* Before and after update `update` (1-based). */
void hs_profile_range_update_begin(hs_profile_range *r, int64_t update);
void hs_profile_range_update_end(hs_profile_range *r, int64_t update);
/* The end of training: a range still open (a run stopped before LAST) ends here. */
void hs_profile_range_finish(hs_profile_range *r);

#ifdef __cplusplus
}
#endif
#endif
