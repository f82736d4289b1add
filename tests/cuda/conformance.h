/* Op conformance of the CUDA backend against the CPU backend (the reference): every op of the seam is
 * run on both devices with the same random inputs and the results compared.
 *
 * How results are compared (docs/gpu.md, "How results are compared"): each output element i must
 * satisfy |cuda_i - cpu_i| <= bound_i, where bound_i is derived from the arithmetic of the op, the same
 * rule on the emulated device and on a real GPU. Both backends are correct implementations whose
 * errors from the exact result obey the textbook bound of the op (Higham, "Accuracy and Stability of
 * Numerical Algorithms", ch. 3-4); their difference is at most the sum of the two, so every bound is
 * HS_CONF_C = 2 times the single-implementation bound. u32 = 2^-24 is fp32's unit roundoff,
 * gamma_n = n u / (1 - n u):
 *   - dot products (GEMM, convolution with K = Cin kh kw, attention scores): per element
 *     c (2 u_op + u_op^2 + gamma_K) sum_k |a_ik b_kj| (+ the |beta c| or bias term), u_op the rounding
 *     of each operand to the product precision (0 for fp32, hs_conf_operand_roundoff), fp32 sums;
 *   - reductions (norms, loss sums): c (term error + gamma_n) sum |x|, in the accumulation's precision;
 *   - element-wise ops: 32 u32 |cpu_i| plus an absolute floor of 32 u32 times the magnitude of the
 *     inputs (results that cancel to ~0);
 *   - LayerNorm forward/backward: the error of mean and variance propagated through 1/sigma
 *     (conformance_norm_loss_optim.c): a near-constant row, or cols = 1 or 2 with eps 1e-12, gets a bound scaled by
 *     1/sigma times the row's input magnitude, never an element-wise relative one;
 *   - attention: the score bound propagated through softmax, |dp| <= p (|ds| + sum_j p_j |ds_j|), then
 *     through P V and the backward products as dot products (conformance_elementwise_attention.c, conformance_rel_attention.c).
 * NaN or Inf where the CPU has a finite value fails. The test prints, per op and precision, the worst
 * err/bound ratio seen (<= 1 passes). */
#ifndef HS_TESTS_CUDA_CONFORMANCE_H
#define HS_TESTS_CUDA_CONFORMANCE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

/* hs_conf_check_rounded's threshold: a product under a reduced precision must differ from the fp32
 * product by more than this (relative to the tensor's scale). Rounding the operands moves the result
 * by about u_op >= 2^-11 ~ 5e-4 of its terms; two fp32 summation orders of these sizes differ by under
 * 1e-6 (the fp32 gemm's worst err/bound is about 0.3 of 2 gamma_K). */
#define HS_CONF_ROUNDED_MIN 1e-5
/* The multiple of a single implementation's error bound two implementations may differ by. */
#define HS_CONF_C 2.0
/* fp32's unit roundoff, and the element-wise rule's number of them. */
#define HS_CONF_U32 0x1p-24
#define HS_CONF_EW_ULPS 32.0

/* Reduced precisions (tf32, bf16, fp16): the CPU backend in the SAME precision is the reference; the
 * bounds carry the operand rounding term 2 u_op of each product (conformance.c), so a GPU library that
 * rounds (or truncates) the operands otherwise than the CPU still passes, while a path that does not
 * round at all fails hs_conf_check_rounded. */
typedef struct hs_conf {
    const hs_backend *cpu, *cuda; /* both in `precision` */
    const hs_backend *cpu_fp32;   /* the fp32 CPU backend: a reduced precision's results must differ from it */
    int precision;                /* hs_precision of both */
    uint64_t rng;   /* xorshift state */
    int checks, failures;
    const char *op; /* the op under test (set by hs_conf_op), for reports */
} hs_conf;

/* gamma_n = n u / (1 - n u) for unit roundoff u (n u < 1). */
double hs_conf_gamma(double n, double u);
/* The rounding of a product's operand to the precision's type, relative (u = 2^-p for p significant
 * bits): 0 for fp32, bf16 2^-8, fp16 2^-11, tf32 2^-10: a full TF32 ulp, because a library may
 * truncate the 13 low bits (the mma instruction alone reads only the top 19) instead of rounding to
 * nearest. */
double hs_conf_operand_roundoff(const hs_conf *t);
/* The relative factor of a K-term dot product: HS_CONF_C (2 u_op + u_op^2 + gamma_K(u32)). */
double hs_conf_dot_factor(const hs_conf *t, double k);


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
/* The same as one value: a buffer's copy on each device. */
typedef struct hs_conf_pair {
    void *cpu, *cuda;
} hs_conf_pair;
hs_conf_pair hs_conf_pair_of(hs_conf *t, const void *host, size_t bytes);
void hs_conf_pair_free(hs_conf *t, hs_conf_pair p);
/* A host copy (free with free()) of bytes of a device buffer of `be`. */
void *hs_conf_fetch(const hs_backend *be, const void *dev, size_t bytes);
/* Counts one failed check (the caller prints what failed). */
void hs_conf_fail(hs_conf *t);
/* Two buffers of one backend hold the same bytes (two ways to one result), or a failure naming what. */
void hs_conf_same_on(hs_conf *t, const hs_backend *be, const char *what, const void *a_dev, const void *b_dev,
                     size_t bytes);
/* Two CUDA results of the same op on the same inputs must be bit-identical (determinism). */
void hs_conf_same_bits(hs_conf *t, const char *what, const void *a_dev, const void *b_dev, size_t bytes);
/* The sign bits of n floats (dropout marks), CPU against CUDA. */
void hs_conf_same_signs(hs_conf *t, const char *what, const float *cpu_dev, const float *cuda_dev, size_t n);

/* The checks below download n values of a device buffer on each backend (the CUDA download
 * synchronises). `what` names the output, printed with the sizes the caller put in it on failure. */
/* Each element against its own bound: |cuda_i - cpu_i| <= bound[i] (a host array of n). The worst
 * err/bound ratio is reported per op. */
void hs_conf_check_bound(hs_conf *t, const char *what, const float *cpu_dev, const float *cuda_dev, size_t n,
                         const double *bound);
void hs_conf_check_bound_f64(hs_conf *t, const char *what, const double *cpu_dev, const double *cuda_dev, size_t n,
                             const double *bound);
/* Dot products: bound_i = hs_conf_dot_factor(k) * absdot[i], absdot[i] = sum |a b| (+ |other terms|). */
void hs_conf_check_dot(hs_conf *t, const char *what, const float *cpu_dev, const float *cuda_dev, size_t n,
                       const double *absdot, double k);
/* Element-wise ops: bound_i = 32 u32 (|cpu_i| + in_scale), in_scale the magnitude of the op's inputs
 * (<= 0: the largest |cpu_j| of the output stands for it). */
void hs_conf_check_ew(hs_conf *t, const char *what, const float *cpu_dev, const float *cuda_dev, size_t n,
                      double in_scale);
/* Reductions of n_terms terms each: bound_i = HS_CONF_C (term_err + gamma_n(acc_u)) |cpu_i| when the
 * terms are non-negative (sums of squares, abssum == NULL), else times abssum[i]. */
void hs_conf_check_sum_f64(hs_conf *t, const char *what, const double *cpu_dev, const double *cuda_dev, size_t n,
                           const double *abssum, double n_terms, double term_err, double acc_u);
/* fp32 sums (acc_u = u32) whose Σ|x| the caller bounds by abssum_scale (e.g. rows times the largest
 * |x|): bound_i = HS_CONF_C (term_err + gamma_n(u32)) (abssum_scale + |cpu_i|). */
void hs_conf_check_sum_f32(hs_conf *t, const char *what, const float *cpu_dev, const float *cuda_dev, size_t n,
                           double abssum_scale, double n_terms, double term_err);
/* Host copies of device buffers (free with free()). */
float *hs_conf_download_f32(const hs_backend *be, const void *dev, size_t n);

/* The relative difference (as compare measures it) of CUDA's cuda_dev[n] from the fp32 CPU backend's
 * fp32_dev[n]: under a reduced precision it must exceed HS_CONF_ROUNDED_MIN, or the CUDA product was not
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
void hs_conf_group_blas_conv(hs_conf *t);             /* gemm, strided-batched gemm, conv2d (test_op_conformance.c) */
void hs_conf_group_elementwise_attention(hs_conf *t); /* bias, element-wise, pooling, rows, attention */
void hs_conf_group_norm_loss_optim(hs_conf *t);       /* layernorm, losses, multi-tensor norms and optimizers */
void hs_conf_group_rel_attention(hs_conf *t);         /* Transformer-XL relative-position attention */
void hs_conf_group_attention(hs_conf *t);             /* BERT attention alone (conformance_elementwise_attention.c) */
void hs_conf_group_flash_attention(hs_conf *t);       /* the fused attention (in elementwise_attention's, too) */
void hs_conf_group_gelu(hs_conf *t);                  /* gelu, bias_gelu_forward (in elementwise_attention's) */
void hs_conf_group_half(hs_conf *t);                  /* to_half / from_half under bf16 and fp16 (conformance_half.c) */

#endif
