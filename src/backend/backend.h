/* The device seam. Model, layer, optimizer and trainer code reach memory and compute only through a
 * device object (hs_backend): a table of function pointers (like IOR's aiori backends) plus the state
 * the device owns — its stream(s), library handles and scratch memory — so one binary runs on CPU
 * nodes and GPU nodes. The CPU backend (OpenBLAS + OpenMP) is always built; the CUDA backend is added by
 * configure --with-cuda. docs/gpu.md ("The seam") describes the rules every member keeps:
 *   - Every op takes the device object first and is ENQUEUED on the device's compute stream: it may
 *     return before it has run (the CPU runs it at once). Ops on one device run in call order; only
 *     download and synchronize make the host wait. Nothing returns a value computed on the device.
 *   - Results that the host wants (loss sums, counts, accuracies, norms) are ADDED into device float64
 *     slots (`double *stats`, a region of the caller's stats buffer) that the trainer downloads once per
 *     update; an op never hands a number back to the host.
 *   - Ops never validate data: inputs (token ids, positions, labels) are checked on the host while
 *     they are staged, before upload (contracts below say what the caller guarantees).
 *   - Optimizers, norms and clipping are multi-tensor ops over the flat buffers, driven by a tensor
 *     table (hs_tensor_span) that lives in device memory, uploaded once.
 * All pointers are device pointers of the same device unless named *_host. All tensors are row-major,
 * float32 unless stated. Gradient outputs (dw, db, d*) that are parameters ACCUMULATE (+=) so
 * micro-batches add up; activation gradients are overwritten. */
#ifndef HS_BACKEND_H
#define HS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Shape of a 2-d convolution (stride 1, no padding, dilation 1 — what the MNIST CNN uses; later
 * layers may extend this struct). x[n,c_in,h,w] * w[c_out,c_in,kh,kw] + b[c_out] -> y[n,c_out,oh,ow]. */
typedef struct hs_conv2d_shape {
    int n, c_in, h, w;
    int c_out, kh, kw;
    int oh, ow; /* = h-kh+1, w-kw+1 */
} hs_conv2d_shape;

/* Optimizer hyper-parameters arrive in double, as PyTorch keeps them as Python floats; a backend
 * rounds each derived coefficient (1-beta, lr*wd, step size) to float once, as PyTorch does when it
 * passes a scalar to an fp32 kernel. (Rounding beta2 = 0.999 to float first would make 1-beta2 off by
 * 1.3e-5 relative.) */
typedef struct hs_adam_hparams {
    double lr, beta1, beta2, eps, weight_decay;
    int64_t step; /* 1-based step count after increment */
    int decoupled; /* 1: HetSeq/fairseq decoupled decay theta -= wd*lr*theta before the step (also AdamW) */
    int decay_flagged_only; /* 1: weight_decay only on tensors whose decay flag is set (AdamW); 0: all */
} hs_adam_hparams;

/* LAMB (NVLAMB, apex FusedLAMB) for one tensor; see lamb_moments below. */
typedef struct hs_lamb_hparams {
    double lr, beta1, beta2, eps;
    double weight_decay; /* decoupled decay of the tensors whose decay flag is set (others: 0) */
    double grad_divisor; /* global clipping divisor: norm/max_norm if norm > max_norm, else 1 */
    int64_t step;        /* 1-based step count after increment */
    int trust_ratio_on_no_decay; /* 1: the trust ratio applies to tensors without decay too */
} hs_lamb_hparams;

/* One tensor of a flat buffer (the parameter table's layout), as multi-tensor ops read it: a device
 * array of these is uploaded once (hs_params_allocate) and every norm, clip and optimizer op walks it.
 * A table lists its tensors in increasing offset order, disjoint (the CUDA kernels cut the flat buffer
 * into chunks and find a chunk's tensors by a binary search; the CPU backend checks the order). */
typedef struct hs_tensor_span {
    int64_t offset; /* in floats */
    int64_t numel;
    int32_t decay;  /* 1 if weight decay applies (the table's weight_decay flag) */
    int32_t unused;
} hs_tensor_span;

/* One conversion of convert_halves (ops.def): f[n] rounded into h[n] (to_half = 1) or h[n] widened
 * into f[n] (to_half = 0), in the 16-bit type of the backend's precision. */
typedef struct hs_half_conversion {
    float *f;
    uint16_t *h;
    size_t n;
    int to_half;
} hs_half_conversion;
#define HS_HALF_CONVERSIONS_MAX 8

typedef struct hs_backend hs_backend;

/* The device's streams as the input-staging members name them (CUDA: hs_cuda_device's compute and
 * copy streams; the CPU has one, the calling thread). */
typedef enum hs_stream { HS_STREAM_COMPUTE = 0, HS_STREAM_COPY = 1 } hs_stream;

/* The type gradients travel in during the all-reduce (distributed.allreduce_dtype). */
typedef enum hs_allreduce_dtype {
    HS_ALLREDUCE_FP32 = 0,
    HS_ALLREDUCE_BF16 = 1,
    HS_ALLREDUCE_FP16 = 2
} hs_allreduce_dtype;

/* The arithmetic of the matrix products (the config's `precision`). Only products change (and, under
 * bf16/fp16, the outputs of the 16-bit linear layers a model chooses: gemm_bias_half): parameters,
 * gradients, optimizer state, LayerNorm, softmax and losses stay fp32 under every precision. */
typedef enum hs_precision {
    HS_PRECISION_FP32 = 0, /* fp32 inputs, fp32 sums (the default of every backend table) */
    HS_PRECISION_BF16 = 1, /* inputs rounded to bfloat16 (nearest, ties to even), products summed in fp32 */
    HS_PRECISION_TF32 = 2, /* inputs rounded to TF32 (10-bit mantissa, fp32 range), products summed in fp32 */
    HS_PRECISION_FP16 = 3  /* inputs rounded to IEEE fp16 (ties to even, subnormals, ±inf beyond 65504),
                            * products summed in fp32; training needs loss scaling (src/train/loss_scaler.h) */
} hs_precision;

/* bf16 or fp16: the precisions with a 16-bit type (16-bit storage, the 16-bit ops of ops.def) */
static inline int hs_precision_is_16bit(int precision) {
    return precision == HS_PRECISION_BF16 || precision == HS_PRECISION_FP16;
}

struct hs_backend {
    const char *name; /* "cpu" | "cuda" */
    /* The device's own state: streams (a compute stream and a copy stream on CUDA), library handles
     * (cuBLAS, cuDNN, NCCL), scratch memory. Only the backend's own files look inside. */
    void *impl;
    /* 1 if device pointers are host pointers (the CPU): comm/ then moves device buffers with MPI;
     * otherwise with the device's own collectives (NCCL on CUDA). */
    int memory_is_host;
    /* The GPU's compute capability and multiprocessor count, for the peak that MFU is measured against
     * (src/train/mfu.c); set by the CUDA backend when it is selected, 0 on the CPU. */
    int cc_major, cc_minor, sm_count;
    /* The PCI bus id of the GPU this rank uses ("0000:01:00.0", cudaDeviceGetPCIBusId); empty on the CPU.
     * With the host name it tells whether two ranks share a GPU (comm.c: NCCL refuses that). */
    char pci_bus_id[32];
    /* hs_precision of every matrix product the backend computes (gemm, and the products inside
     * convolution and attention). A backend table with another precision comes from
     * hs_backend_with_precision; the trainer takes it before it creates the task. */
    int precision;
    /* 1 when the products read operands bound to 16-bit twins instead of the fp32 tensors (CUDA under
     * bf16/fp16): bind_half_only is then available, and a model may keep a tensor that only products
     * read in 16 bits alone (docs/gpu.md "Mixed precision", the 16-bit dataflow). 0 on the CPU. */
    int products_read_twins;
    /* 1 when gemm_bias adds the bias in the product's epilogue (cuBLASLt on CUDA), so a model saves a pass
     * by giving it the bias; 0 where it is a separate pass after the product (the CPU), so a model that
     * fuses the bias into its next elementwise op (bias_gelu_forward) saves one there. */
    int gemm_fuses_bias;

    /* ---- the operations: src/backend/ops.def lists them, each with its signature and contract --- */
#define HS_OP(ret, name, params) ret(*name) params;
#include "backend/ops.def"
};

/* "cpu", "cuda" or "auto". "auto" picks CUDA when a GPU is usable, else the CPU (and says so);
 * "cuda" without a usable GPU is an error. local_rank picks the GPU. The device object lives until
 * the process ends. */
const hs_backend *hs_backend_select(const char *device, int local_rank);
/* The name of the first op of src/backend/ops.def whose member in be is NULL, or NULL when the table is
 * whole (an HS_OPTIONAL_OP may be NULL where be->memory_is_host). */
const char *hs_backend_missing_op(const hs_backend *be);
/* Ends the run (exit status 2) naming the backend and the op when hs_backend_missing_op finds one: a
 * forgotten table entry is a named error, not a call through a NULL pointer. hs_backend_select checks
 * the CPU table it returns, hs_backend_cuda the CUDA table when it makes the device. */
void hs_backend_check(const hs_backend *be);
/* The contract of an op whose fp32 output may be NULL when its 16-bit output is given (ops.def: the
 * 16-bit dataflow's producers): at least one of f and f16. Checked by every backend's implementation;
 * names the op (what, e.g. "bias_gelu_forward: y or y16") when neither is given. */
void hs_output_check(const char *what, const void *f, const void *f16);
/* flash_attention_forward's contract: q|k|v read from its 16-bit copy (qkv16) or that copy written
 * (qkv16_out), not both. */
void hs_flash_qkv16_out_check(const void *qkv16, const void *qkv16_out);
/* log_softmax_nll_backward's contract: the log-probabilities, or the logits with the rows' log_norm. */
void hs_log_softmax_nll_backward_check(const float *logprobs, const float *logits, const double *log_norm);
/* The contract of an op defined under bf16/fp16 only (its 16-bit values have the precision's type):
 * names the op (what) under another precision. */
void hs_half_precision_check(const hs_backend *be, const char *what);
/* gelu_backward's contract on its optional arguments (ops.def), checked by every backend's implementation:
 * dx, dx16 or both; one of x and x16, x16 only under bf16/fp16. */
void hs_gelu_backward_check(const hs_backend *be, const float *dx, const uint16_t *dx16, const float *x,
                            const uint16_t *x16);
/* The CPU device (its "stream" is the calling thread: every op has run when it returns). */
const hs_backend *hs_backend_cpu(void);
/* The same backend computing its products in `precision` (the config's value: "fp32" | "bf16" |
 * "tf32" | "fp16"); every precision runs on both backends. Ends every rank with a message naming what
 * to do when the backend cannot (bf16 on the CPU needs oneDNN, libdnnl-dev) or the value is unknown.
 * Logs (rank 0) the path the products take; tf32 and fp16 on the CPU are emulated roundings for
 * checking a recipe's numerics: correct, not faster. */
const hs_backend *hs_backend_with_precision(const hs_backend *be, const char *precision);
/* The CPU backend with bf16 products, or NULL with why[] saying what to install (no oneDNN). */
const hs_backend *hs_backend_cpu_bf16(char *why, size_t why_len);
/* The CPU backend with products of TF32- or fp16-rounded operands (HS_PRECISION_TF32 / _FP16). */
const hs_backend *hs_backend_cpu_rounded(int precision);
/* The CUDA backend `be` with its products in `precision` (src/backend/cuda/backend_cuda.c); the
 * stub in a build without CUDA is never reached (there is no CUDA backend to pass). */
const hs_backend *hs_backend_cuda_with_precision(const hs_backend *be, int precision);
/* The CUDA device of this rank (GPU local_rank % device count), or NULL when no GPU is usable, with
 * the reason in why[why_len] (src/backend/cuda/backend_cuda.c, reached through the module loader
 * src/backend/cuda_module.c, whose own reason names the module and what to do when it cannot be loaded;
 * src/backend/no_cuda.c in a build without the CUDA backend). */
const hs_backend *hs_backend_cuda(int local_rank, char *why, size_t why_len);
/* The identity of the CUDA backend: the hetseq version and the size of the op table it was built with
 * (HS_BACKEND_ID_FORMAT). The module loader (src/backend/cuda_module.c) uses a module, hetseq_cuda.so,
 * only when its identity is the executable's own: a module of another build is named, not run. */
#define HS_BACKEND_ID_FORMAT "hetseq %s, op table of %zu bytes"
const char *hs_backend_cuda_id(void);

#ifdef __cplusplus
}
#endif

#endif
