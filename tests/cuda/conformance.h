/* Op conformance of the CUDA backend against the CPU backend (the reference): every op of the seam is
 * run on both devices with the same random inputs and the results compared.
 *
 * The relative difference of an output is max_i |cuda_i - cpu_i| / max_i |cpu_i|: the largest error
 * measured against the tensor's scale (as tests/tools/h5compare measures checkpoints). A per-element
 * ratio would be meaningless for values that come out of cancellation (a LayerNorm input gradient, an
 * attention context): two correct fp32 summation orders differ there by ~1e-7 of the terms' scale,
 * which can be any multiple of the small result. NaN or Inf where the CPU has a finite value fails.
 * The tolerance is 1e-5 for fp32 unless a case says why it needs more. */
#ifndef HS_TESTS_CUDA_CONFORMANCE_H
#define HS_TESTS_CUDA_CONFORMANCE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

#define HS_CONF_TOL 1e-5

typedef struct hs_conf {
    const hs_backend *cpu, *cuda;
    uint64_t rng;   /* xorshift state */
    int checks, failures;
    const char *op; /* the op under test (set by hs_conf_op), for reports */
} hs_conf;

/* Names the op the following checks belong to (printed with its worst error at the next call / end). */
void hs_conf_op(hs_conf *t, const char *op);

/* Host arrays (free with free()): uniform floats in [lo, hi), ints in [lo, hi_excl). */
float *hs_conf_rand(hs_conf *t, size_t n, float lo, float hi);
int32_t *hs_conf_rand_int(hs_conf *t, size_t n, int32_t lo, int32_t hi_excl);
uint8_t *hs_conf_rand_u8(hs_conf *t, size_t n);

/* A device buffer of `be` holding a copy of host[bytes] (bytes may be 0: a 1-byte allocation). */
void *hs_conf_dev(const hs_backend *be, const void *host, size_t bytes);
/* The same host data on both devices: *cpu_dev and *cuda_dev. */
void hs_conf_both(hs_conf *t, const void *host, size_t bytes, void **cpu_dev, void **cuda_dev);
void hs_conf_free_both(hs_conf *t, void *cpu_dev, void *cuda_dev);

/* Compare n values of a device buffer on each backend (downloads both; the CUDA download
 * synchronises). `what` names the output, printed with the sizes the caller put in it on failure. */
void hs_conf_check_f32(hs_conf *t, const char *what, const float *cpu_dev, const float *cuda_dev, size_t n,
                       double tol);
void hs_conf_check_f64(hs_conf *t, const char *what, const double *cpu_dev, const double *cuda_dev, size_t n,
                       double tol);
/* exact equality (indices, argmax) */
void hs_conf_check_i32(hs_conf *t, const char *what, const int32_t *cpu_dev, const int32_t *cuda_dev, size_t n);

/* The sizes every element-wise op is tried on: 1, 31, 33, 127, 256, 1000, 4097 (block multiples and not). */
extern const size_t hs_conf_sizes[];
extern const int hs_conf_nsizes;

/* Prints the last op's summary (call once at the end). */
void hs_conf_finish(hs_conf *t);

/* One function per group file (tests/cuda/conformance_*.c). */
void hs_conf_group_blas_conv(hs_conf *t); /* gemm, strided-batched gemm, conv2d (test_op_conformance.c) */
void hs_conf_group_k1(hs_conf *t);        /* bias, element-wise, pooling, rows, attention */
void hs_conf_group_k2(hs_conf *t);        /* layernorm, losses, multi-tensor norms and optimizers */
void hs_conf_group_k3(hs_conf *t);        /* Transformer-XL relative-position attention */

#endif
