/* HETSEQ_PROFILE_UPDATES: the backend's profiler range around chosen updates (profile_range.h). */
#include "train/profile_range.h"

#include <stdio.h>
#include <stdlib.h>

#include "util/check.h"
#include "util/log.h"

#define HS_PROFILE_ENV "HETSEQ_PROFILE_UPDATES"

void hs_profile_range_init(hs_profile_range *r, const hs_backend *be) {
    *r = (hs_profile_range){0};
    const char *v = getenv(HS_PROFILE_ENV);
    if (!v || !*v) return;
    long long first = 0, last = 0;
    int used = 0;
    if (sscanf(v, "%lld-%lld%n", &first, &last, &used) == 2 && v[used] == '\0') {
        /* FIRST-LAST */
    } else if (used = 0, sscanf(v, "%lld%n", &first, &used) == 1 && v[used] == '\0') {
        last = first;
    } else {
        first = last = 0;
    }
    if (first < 1 || last < first)
        hs_die(HS_PROFILE_ENV "=\"%s\" is not an update or a range of updates: write N or FIRST-LAST with "
               "1 <= FIRST <= LAST, counted from 1 as the log counts them (e.g. " HS_PROFILE_ENV "=20-22)",
               v);
    if (!be->profiler_range) {
        hs_log("| " HS_PROFILE_ENV "=%s: the %s backend has no profiler range; ignored (it marks updates for "
               "CUDA profilers: nsys --capture-range=cudaProfilerApi, ncu --profile-from-start off)",
               v, be->name);
        return;
    }
    r->be = be;
    r->first = first;
    r->last = last;
    hs_log("| " HS_PROFILE_ENV ": the profiler range holds updates %lld to %lld (cudaProfilerStart before, "
           "cudaProfilerStop after)", first, last);
}

void hs_profile_range_update_begin(hs_profile_range *r, int64_t update) {
    if (!r->be || r->on || update < r->first || update > r->last) return;
    r->be->profiler_range(r->be, 1);
    r->on = 1;
    hs_log("| profiler range started before update %lld", (long long)update);
}

void hs_profile_range_update_end(hs_profile_range *r, int64_t update) {
    if (!r->on || update < r->last) return;
    r->be->profiler_range(r->be, 0);
    r->on = 0;
    hs_log("| profiler range ended after update %lld", (long long)update);
}

void hs_profile_range_finish(hs_profile_range *r) {
    if (!r->on) return;
    r->be->profiler_range(r->be, 0);
    r->on = 0;
    hs_log("| profiler range ended with the training (before update %lld)", (long long)r->last);
}
