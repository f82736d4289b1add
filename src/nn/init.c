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

/* 1 - u lies in (0, 1], so the logarithm is finite (24-bit uniforms reach 5.8 standard deviations). */
void hs_init_normal_host(float *dst, size_t n, double mean, double std, uint64_t seed, uint64_t stream) {
    const uint64_t key = hs_rng_key(seed, HS_INIT_UPDATE, stream);
    const double two_pi = 6.283185307179586;
    for (size_t j = 0; 2 * j < n; j++) {
        const double r = sqrt(-2.0 * log(1.0 - (double)hs_uniform(key, 1, j)));
        const double theta = two_pi * (double)hs_uniform(key, 2, j);
        dst[2 * j] = (float)(mean + std * r * cos(theta));
        if (2 * j + 1 < n) dst[2 * j + 1] = (float)(mean + std * r * sin(theta));
    }
}

void hs_init_normal(hs_params *p, int index, double mean, double std, uint64_t seed) {
    if (index < 0) return;
    const hs_tensor_info *t = &p->tensors[index];
    float *host;
    HS_ALLOC(host, t->numel ? t->numel : 1);
    hs_init_normal_host(host, t->numel, mean, std, seed, (uint64_t)index);
    p->be->upload(p->be, hs_param_data(p, index), host, t->numel * sizeof *host);
    free(host);
}

void hs_init_constant(hs_params *p, int index, float value) {
    if (index < 0) return;
    const hs_tensor_info *t = &p->tensors[index];
    float *host;
    HS_ALLOC(host, t->numel ? t->numel : 1);
    for (size_t e = 0; e < t->numel; e++) host[e] = value;
    p->be->upload(p->be, hs_param_data(p, index), host, t->numel * sizeof *host);
    free(host);
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
