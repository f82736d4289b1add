#include "nn/init.h"

#include <math.h>
#include <stdlib.h>

#include "math/hs_math.h"
#include "util/check.h"

/* The init streams use update = UINT64_MAX, a value no training update reaches, so initial weights
 * never share random numbers with a dropout mask (keyed by (seed, update, layer)). */
#define HS_INIT_UPDATE UINT64_MAX

void hs_init_uniform_host(float *dst, size_t n, float bound, uint64_t seed, uint64_t stream) {
    const uint64_t key = hs_rng_key(seed, HS_INIT_UPDATE, stream);
    for (size_t e = 0; e < n; e++) dst[e] = bound * (2.0f * hs_uniform(key, 0, e) - 1.0f);
}

static void fill_tensor(hs_params *p, int index, float bound, uint64_t seed) {
    const hs_tensor_info *t = &p->tensors[index];
    float *host;
    HS_ALLOC(host, t->numel ? t->numel : 1);
    hs_init_uniform_host(host, t->numel, bound, seed, (uint64_t)index);
    p->be->upload(p->be, hs_param_data(p, index), host, t->numel * sizeof *host);
    free(host);
}

void hs_init_fan_in_uniform(hs_params *p, int weight, int bias, uint64_t seed) {
    if (!p->data) HS_FATAL(NULL, "initialise parameters after hs_params_allocate");
    const hs_tensor_info *w = &p->tensors[weight];
    const size_t fan_in = w->numel / (size_t)w->shape[0];
    const float bound = 1.0f / sqrtf((float)fan_in);
    fill_tensor(p, weight, bound, seed);
    if (bias >= 0) fill_tensor(p, bias, bound, seed);
}
