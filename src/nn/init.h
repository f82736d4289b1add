/* Parameter initialisation, deterministic from (seed, tensor index) through the counter RNG: the same
 * seed gives the same model on every rank, thread count and device. Values are drawn on the host and
 * uploaded, so CPU and GPU runs start from identical bits. */
#ifndef HS_NN_INIT_H
#define HS_NN_INIT_H

#include <stddef.h>
#include <stdint.h>

#include "nn/params.h"

/* dst[n] ~ U(-bound, bound) (host memory); value e is a pure function of (seed, stream, e). */
void hs_init_uniform_host(float *dst, size_t n, float bound, uint64_t seed, uint64_t stream);

/* dst[n] ~ N(mean, std²) (host memory): Box-Muller on pairs of counter-RNG uniforms (samples 1 and 2 of
 * the stream; the uniforms above use sample 0), both outputs used; value e is a pure function of
 * (seed, stream, e). Each value is mean + std·r·cos θ rounded once to float, so mean = -0.0 gives the
 * N(0, std²) values to the bit (x + -0.0 = x for every x, signed zeros included). */
void hs_init_normal_host(float *dst, size_t n, double mean, double std, uint64_t seed, uint64_t stream);

/* Tensor `index` of p (-1: none) filled with N(mean, std²) keyed by its table index, or with `value`. */
void hs_init_normal(hs_params *p, int index, double mean, double std, uint64_t seed);
void hs_init_constant(hs_params *p, int index, float value);

/* PyTorch's default for nn.Linear / nn.Conv2d: kaiming_uniform_(a=sqrt(5)) on the weight and the bias
 * rule both reduce to U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = weight numel / shape[0]
 * (in_features, or c_in*kh*kw). Fills tensor `weight` and tensor `bias` (-1: none) of p, each keyed by
 * its own table index. */
void hs_init_fan_in_uniform(hs_params *p, int weight, int bias, uint64_t seed);

#endif
