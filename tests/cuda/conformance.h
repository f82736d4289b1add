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

/* Reduced precisions (tf32, bf16, fp16): the CPU backend in the SAME precision is the reference. Both
 * round a product's operands identically (src/util/lowp.h; the emulated cuBLASLt and cuDNN round TF32
 * to the same nearest-even value), and the products of rounded values are exact in fp32, so a single
 * GEMM or convolution still agrees within the fp32 summation tolerance HS_CONF_TOL: a path that rounds
 * differently, or not at all, fails it. Where a product's fp32 output is rounded again as the operand
 * of a second product (attention: softmax probabilities times V, the backward chain), a 1e-7 difference
 * in the first product can move a value across a rounding midpoint of the type: one ulp, 2u relative
 * (u = the type's unit roundoff: 2^-9 for bf16, 2^-11 for fp16 and tf32). Those outputs are compared
 * with hs_conf_tol_chained: 8u, room for a few such steps adding up (fp32: HS_CONF_TOL). */
typedef struct hs_conf {
    const hs_backend *cpu, *cuda; /* both in `precision` */
    const hs_backend *cpu_fp32;   /* the fp32 CPU backend: a reduced precision's results must differ from it */
    int precision;                /* hs_precision of both */
    uint64_t rng;   /* xorshift state */
    int checks, failures;
    const char *op; /* the op under test (set by hs_conf_op), for reports */
} hs_conf;

/* The tolerances of a reduced precision (see HS_CONF_TOL above). */
double hs_conf_tol_chained(const hs_conf *t);
/* The unit roundoff of a precision (fp32: 2^-24). */
double hs_conf_unit_roundoff(int precision);

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
/* The relative difference (as compare measures it) of CUDA's cuda_dev[n] from the fp32 CPU backend's
 * fp32_dev[n]: under a reduced precision it must exceed HS_CONF_TOL, or the CUDA product was not
 * rounded (counted as a check; `what` names it on failure). */
void hs_conf_check_rounded(hs_conf *t, const char *what, const float *fp32_dev, const float *cuda_dev, size_t n);
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
void hs_conf_group_attention(hs_conf *t); /* BERT attention alone (conformance_k1.c) */
void hs_conf_group_half(hs_conf *t);      /* to_half / from_half under bf16 and fp16 (conformance_half.c) */

#endif
