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
 * array of these is uploaded once (hs_params_allocate) and every norm, clip and optimizer op walks it. */
typedef struct hs_tensor_span {
    int64_t offset; /* in floats */
    int64_t numel;
    int32_t decay;  /* 1 if weight decay applies (the table's weight_decay flag) */
    int32_t unused;
} hs_tensor_span;

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

/* The arithmetic of the matrix products (the config's `precision`). Only products change: parameters,
 * gradients, optimizer state, LayerNorm, softmax and losses stay fp32 under every precision. */
typedef enum hs_precision {
    HS_PRECISION_FP32 = 0, /* fp32 inputs, fp32 sums (the default of every backend table) */
    HS_PRECISION_BF16 = 1, /* inputs rounded to bfloat16 (nearest, ties to even), products summed in fp32 */
    HS_PRECISION_TF32 = 2, /* inputs rounded to TF32 (10-bit mantissa, fp32 range), products summed in fp32 */
    HS_PRECISION_FP16 = 3  /* inputs rounded to IEEE fp16 (ties to even, subnormals, ±inf beyond 65504),
                            * products summed in fp32; training needs loss scaling (src/train/loss_scaler.h) */
} hs_precision;

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

    /* ---- memory ---------------------------------------------------------------------------------- */
    void *(*alloc)(const hs_backend *be, size_t bytes); /* zero-filled; aborts with a message on failure */
    void (*free)(const hs_backend *be, void *p);
    /* Host -> device, ordered after the ops enqueued before it; src_host may be reused when it returns. */
    void (*upload)(const hs_backend *be, void *dst, const void *src_host, size_t bytes);
    /* Device -> host: waits for the ops enqueued before it (a synchronisation point: the trainer
     * downloads its stats buffer once per update and nothing else in the training step). */
    void (*download)(const hs_backend *be, void *dst_host, const void *src, size_t bytes);
    void (*copy)(const hs_backend *be, void *dst, const void *src, size_t bytes);
    void (*zero)(const hs_backend *be, void *p, size_t bytes);
    void (*synchronize)(const hs_backend *be); /* the host waits until every enqueued op has run */
    /* Host staging memory for the buffers batches are read into and uploaded from: page-locked on
     * CUDA (uploads from it are asynchronous copies on the copy stream), aligned heap memory on the
     * CPU. Zero-filled; aborts with a message on failure. Safe to call from any thread. */
    void *(*host_alloc)(const hs_backend *be, size_t bytes);
    void (*host_free)(const hs_backend *be, void *p);

    /* ---- asynchronous input staging (docs/gpu.md, "Input staging") ------------------------------- */
    /* Input batches are uploaded on the device's COPY stream while the COMPUTE stream works, and the two
     * are ordered by events (opaque handles; `stream` is an hs_stream). The CPU runs every copy at once
     * and its events are always complete, so the same calls are plain copies and no-ops there.
     * An event that was never recorded is complete. */
    void *(*event_create)(const hs_backend *be); /* aborts with a message on failure */
    void (*event_destroy)(const hs_backend *be, void *event);
    /* Host -> device ENQUEUED on the copy stream; returns at once. Ordered after earlier copy-stream
     * work only (not after compute ops: a dst the compute stream may still read needs a
     * stream_wait(HS_STREAM_COPY) on an event recorded after those reads). src_host is staging memory
     * (host_alloc) and must stay unchanged until an event recorded on the copy stream after this call
     * is complete (event_synchronize); the compute stream may use dst only after a
     * stream_wait(HS_STREAM_COMPUTE) on such an event. */
    void (*upload_async)(const hs_backend *be, void *dst, const void *src_host, size_t bytes);
    /* event captures the work enqueued on `stream` so far (a later record replaces the capture). */
    void (*event_record)(const hs_backend *be, void *event, int stream);
    /* Work enqueued on `stream` after this call waits for the event's capture; the host does not wait. */
    void (*stream_wait)(const hs_backend *be, int stream, void *event);
    /* The host waits until the event's capture has run. Safe to call from any thread (the prefetch
     * thread calls it before it overwrites a staging buffer). */
    void (*event_synchronize)(const hs_backend *be, void *event);

    /* ---- collectives on device buffers (NULL where memory_is_host: comm/ then runs MPI on them) -- */
    /* Joins every rank of *(const MPI_Comm *)mpi_comm into the device's collective group, once, before
     * the first collective (a collective call itself): NCCL on CUDA — rank 0 calls ncclGetUniqueId,
     * MPI_Bcast sends the id, every rank calls ncclCommInitRank. */
    void (*collectives_init)(const hs_backend *be, const void *mpi_comm);
    /* buf[bytes] of rank `root` to every rank, in place; enqueued after the ops before it, and the ops
     * after it wait for it. */
    void (*broadcast)(const hs_backend *be, void *buf, size_t bytes, int root);
    /* The overlapped gradient all-reduce (src/comm/grad_buckets.c): buf[n] = Σ over ranks, in place,
     * enqueued on the device's collective stream after the compute work enqueued so far; the compute
     * work enqueued later does NOT wait for it (it may run meanwhile, and must not touch buf). Every rank
     * makes the same calls in the same order. dtype (hs_allreduce_dtype) is the type the values travel
     * and are summed in: 16-bit ones round buf into tmp16[n] (device memory of the caller's, untouched
     * until allreduce_wait), sum there and widen the result back into buf; tmp16 is unused for fp32. */
    void (*allreduce_sum_async)(const hs_backend *be, float *buf, size_t n, int dtype, void *tmp16);
    /* The ops enqueued after this wait for every allreduce_sum_async enqueued before it. */
    void (*allreduce_wait)(const hs_backend *be);

    /* ---- 16-bit storage (activations kept for the backward pass under precision bf16 | fp16) ------ */
    /* dst[n] = the bit patterns of src[n] rounded to the 16-bit type of be->precision: bfloat16 under
     * HS_PRECISION_BF16, IEEE half otherwise; nearest, ties to even, NaN kept, the sign kept (-0.0
     * too), fp16 overflow to ±inf: the roundings of src/util/lowp.h, the same bits on every backend. */
    void (*to_half)(const hs_backend *be, uint16_t *dst, const float *src, size_t n);
    /* dst[n] = src[n] (that 16-bit type) widened to fp32: exact. */
    void (*from_half)(const hs_backend *be, float *dst, const uint16_t *src, size_t n);

    /* ---- dense linear algebra -------------------------------------------------------------------- */
    /* c[m,n] = alpha * op(a)[m,k] · op(b)[k,n] + beta * c[m,n]; op = transpose if trans_* != 0. */
    void (*gemm)(const hs_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);
    /* y[rows,cols] += bias[cols] */
    void (*add_bias)(const hs_backend *be, float *y, const float *bias, int rows, int cols);
    /* dbias[cols] += sum_r dy[r,cols] */
    void (*bias_grad)(const hs_backend *be, float *dbias, const float *dy, int rows, int cols);

    /* ---- element-wise, piecewise linear ---------------------------------------------------------- */
    /* y = (float)x_u8 * scale + shift  (image bytes -> normalised input) */
    void (*u8_to_float)(const hs_backend *be, float *y, const uint8_t *x, size_t n, float scale, float shift);
    void (*relu_forward)(const hs_backend *be, float *y, const float *x, size_t n);
    /* dx = dy * (y > 0); y is the forward output (may alias dx/dy) */
    void (*relu_backward)(const hs_backend *be, float *dx, const float *dy, const float *y, size_t n);
    /* Inverted dropout on x[batch, per_sample]: elements are dropped in groups of `group` consecutive
     * values (group = 1: element-wise; group = h*w: channel-wise Dropout2d). Keep decision of group j of
     * sample i: hs_uniform(key, first_sample + i, j) >= p; kept values are scaled by 1/(1-p).
     * Backward recomputes the same mask from the same key. */
    void (*dropout_forward)(const hs_backend *be, float *y, const float *x, int batch, size_t per_sample, size_t group,
                            float p, uint64_t key, int64_t first_sample);
    void (*dropout_backward)(const hs_backend *be, float *dx, const float *dy, int batch, size_t per_sample,
                             size_t group, float p, uint64_t key, int64_t first_sample);

    /* ---- convolution and pooling ----------------------------------------------------------------- */
    /* workspace: at least conv2d_workspace_bytes(s) bytes of device memory (im2col on the CPU). */
    size_t (*conv2d_workspace_bytes)(const hs_backend *be, const hs_conv2d_shape *s);
    void (*conv2d_forward)(const hs_backend *be, const hs_conv2d_shape *s, float *y, const float *x, const float *w,
                           const float *b, void *workspace);
    /* dx may be NULL (first layer). dw, db accumulate. */
    void (*conv2d_backward)(const hs_backend *be, const hs_conv2d_shape *s, float *dx, float *dw, float *db,
                            const float *dy, const float *x, const float *w, void *workspace);
    /* Max pooling k×k, stride k, on x[n,c,h,w] -> y[n,c,h/k,w/k]; argmax[n,c,h/k,w/k] holds the
     * flat index (within the h*w plane) of the winner, first maximum on ties (as PyTorch). */
    void (*maxpool2d_forward)(const hs_backend *be, float *y, int32_t *argmax, const float *x, int n, int c, int h,
                              int w, int k);
    void (*maxpool2d_backward)(const hs_backend *be, float *dx, const float *dy, const int32_t *argmax, int n, int c,
                               int h, int w, int k);

    /* ---- loss ------------------------------------------------------------------------------------ */
    /* logprobs[rows,cols] = log_softmax(logits); stats[0] += sum_r -logprobs[r,label_r] (NLL sum),
     * stats[1] += rows, stats[2] += number of rows whose argmax == label (first maximum on ties); stats
     * is a device float64 [3]; rows are summed in row order. Every label is in [0, cols) (checked by
     * the caller's staging). */
    void (*log_softmax_nll_forward)(const hs_backend *be, float *logprobs, const float *logits, const int32_t *labels,
                                    int rows, int cols, double *stats);
    /* dlogits = scale * (softmax - onehot(label)) : gradient of scale * sum of NLL. */
    void (*log_softmax_nll_backward)(const hs_backend *be, float *dlogits, const float *logprobs, const int32_t *labels,
                                     int rows, int cols, float scale);

    /* probs = softmax(logits) (may alias); per row with label >= 0: stats[0] += NLL, [1] += 1,
     * [2] += (argmax == label); stats is a device float64 [3]; rows summed in order. Every label is
     * < cols (checked by the caller's staging); label < 0 marks an ignored row. */
    void (*softmax_xent_forward)(const hs_backend *be, float *probs, const float *logits, const int32_t *labels,
                                 int rows, int cols, double *stats);
    /* dlogits = scale·(probs - onehot(label)), 0 on rows with label < 0; dlogits may alias probs. */
    void (*softmax_xent_backward)(const hs_backend *be, float *dlogits, const float *probs, const int32_t *labels,
                                  int rows, int cols, float scale);

    /* ---- multi-tensor ops on flat buffers (norms, clipping, optimizers) -------------------------- */
    /* Every one walks the `count` tensors of `table` (device hs_tensor_span[count]) over flat buffers of
     * the table's layout and touches no padding between tensors. Optimizer state buffers share the
     * layout. Elements are independent; sums are in double in an order fixed by the layout alone. */
    /* sumsq[i] = Σ x² over tensor i (device float64 [count]); *total = Σ_i sumsq[i] in table order
     * (device float64 [1]; overwritten, not added). */
    void (*sumsq_tensors)(const hs_backend *be, double *sumsq, double *total, const float *flat,
                          const hs_tensor_span *table, int count);
    /* x *= a over every tensor of the table (clipping). */
    void (*scale_tensors)(const hs_backend *be, float *flat, float a, const hs_tensor_span *table, int count);
    /* Adam (HetSeq / fairseq): m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; denom = sqrt(v) + eps;
     * if decoupled and wd: p -= wd*lr*p; p -= lr*sqrt(1-b2^t)/(1-b1^t) * m/denom.
     * Not decoupled: classic L2, g += wd*p before the moments. wd is h->weight_decay on every tensor,
     * or only on flagged ones when h->decay_flagged_only. */
    void (*adam_update)(const hs_backend *be, float *p, const float *g, float *m, float *v,
                        const hs_tensor_span *table, int count, const hs_adam_hparams *h);
    /* Adadelta (torch): g += wd p; sq = rho sq + (1-rho) g^2; d = sqrt(acc+eps)/sqrt(sq+eps) g;
     * p -= lr d; acc = rho acc + (1-rho) d^2 (wd on every tensor). */
    void (*adadelta_update)(const hs_backend *be, float *p, const float *g, float *sq, float *acc,
                            const hs_tensor_span *table, int count, double lr, double rho, double eps,
                            double weight_decay);
    /* SGD (torch): g += wd p; if momentum: buf = momentum buf + g (buf = g at the first step); p -= lr*buf.
     * buf may be NULL when momentum == 0. */
    void (*sgd_update)(const hs_backend *be, float *p, const float *g, float *buf, const hs_tensor_span *table,
                       int count, double lr, double momentum, double weight_decay, int first_step);
    /* LAMB (NVLAMB as apex FusedLAMB), all tensors. Per tensor, with wd = h->weight_decay if its decay
     * flag is set, else 0:
     *   stage 1: g' = g/grad_divisor; m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2;
     *            u = (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd p (the wd term only when wd != 0);
     *            norms[2i] = Σ p², norms[2i+1] = Σ u² (double, order fixed by the layout);
     *   step   = lr·||p||/||u|| if (wd != 0 or trust_ratio_on_no_decay) and both norms are non-zero,
     *            else lr (in double);
     *   stage 2: p -= (float)step · u, u recomputed from p, m, v exactly as stage 1 computed it.
     * norms is device float64 [2·count] scratch (its values stay there, e.g. for tests). */
    void (*lamb_update)(const hs_backend *be, float *p, const float *g, float *m, float *v,
                        const hs_tensor_span *table, int count, double *norms, const hs_lamb_hparams *h);

    /* ---- rows: gathers, scatter-adds, bias on a column slice ------------------------------------- */
    /* y[count,cols] (+)= x[index[i], :] (accumulate: +=); index device int32, each in [0, x_rows)
     * (checked by the caller's staging). Embedding lookup and row gathers. */
    void (*gather_rows)(const hs_backend *be, float *y, const float *x, const int32_t *index, int count, int cols,
                        int x_rows, int accumulate);
    /* dx[index[i], :] += dy[i, :] for i in order (deterministic for repeated indices); dx[dx_rows,cols]. */
    void (*scatter_add_rows)(const hs_backend *be, float *dx, const float *dy, const int32_t *index, int count,
                             int cols, int dx_rows);
    /* y[r, 0:cols] += bias[cols] for rows of stride ldy (a column slice of a wider matrix). */
    void (*add_bias_strided)(const hs_backend *be, float *y, int ldy, const float *bias, int rows, int cols);
    /* dbias[cols] += sum_r dy[r, 0:cols], rows of stride ldy; deterministic like bias_grad. */
    void (*bias_grad_strided)(const hs_backend *be, float *dbias, const float *dy, int ldy, int rows, int cols);
    /* ---- normalisation --------------------------------------------------------------------------- */
    /* LayerNorm over the last dim (biased variance, eps inside the sqrt). If residual != NULL the input is
     * x + residual, written to x_sum (may alias x or residual); else x_sum is unused (may be NULL).
     * y = gamma·(in - mean)·rstd + beta; mean[rows], rstd[rows] saved. y aliases no input. */
    void (*layernorm_forward)(const hs_backend *be, float *y, float *x_sum, float *mean, float *rstd, const float *x,
                              const float *residual, const float *gamma, const float *beta, int rows, int cols,
                              float eps);
    /* dx = rstd·(g - mean(g) - x̂·mean(g·x̂)), g = dy·gamma (dx may alias dy); dgamma += Σ dy·x̂,
     * dbeta += Σ dy (summed in an order fixed by rows/cols alone). x is the LayerNorm's input. */
    void (*layernorm_backward)(const hs_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy,
                               const float *x, const float *mean, const float *rstd, const float *gamma, int rows,
                               int cols);
    /* ---- smooth activations ---------------------------------------------------------------------- */
    /* Exact-erf GELU 0.5·x·(1+erf(x/√2)). bias_gelu: x[rows,cols] += bias, y = gelu(x). */
    void (*gelu_forward)(const hs_backend *be, float *y, const float *x, size_t n);
    void (*bias_gelu_forward)(const hs_backend *be, float *y, float *x, const float *bias, int rows, int cols);
    /* dx = dy·gelu'(x) from the pre-activation x; dx may alias dy. */
    void (*gelu_backward)(const hs_backend *be, float *dx, const float *dy, const float *x, size_t n);
    void (*tanh_forward)(const hs_backend *be, float *y, const float *x, size_t n);
    /* dx = dy·(1 - y²) from the output y; any may alias. */
    void (*tanh_backward)(const hs_backend *be, float *dx, const float *dy, const float *y, size_t n);
    /* ---- attention ------------------------------------------------------------------------------- */
    /* Additive attention mask: bias[n] = (1 - mask[n])·(-10000) */
    void (*attention_mask_bias)(const hs_backend *be, float *bias, const int32_t *mask, size_t n);
    /* Scaled dot-product attention on projected qkv[B,L,3H] (per token q|k|v, head h at columns h·d of
     * each third): for each (b,h), P = softmax(Q·Kᵀ/√d + mask_bias[b,:]) -> probs[B,heads,L,L];
     * ctx[B,L,H] (head h at columns h·d) = (P ⊙ keep/(1-p))·V, keep(b,h,i,j) = hs_uniform(key,
     * first_sample + b, (h·L+i)·L+j) >= p (no dropout when p <= 0). A dropped probability is stored in
     * probs with its sign bit set (-P, -0.0 for 0), so the backward pass needs no mask buffer. */
    void (*attention_forward)(const hs_backend *be, float *ctx, float *probs, const float *qkv, const float *mask_bias,
                              int batch, int seq_len, int heads, int head_dim, float p, uint64_t key,
                              int64_t first_sample);
    /* dqkv[B,L,3H] (overwritten) from dctx[B,L,H], the forward's qkv and probs and the same dropout
     * (the CPU reads the keep decisions from the sign bits of probs; key/first_sample let another backend
     * redraw them instead). */
    void (*attention_backward)(const hs_backend *be, float *dqkv, const float *dctx, const float *qkv,
                               const float *probs, int batch, int seq_len, int heads, int head_dim, float p,
                               uint64_t key, int64_t first_sample);
    /* Relative-position multi-head attention with segment memory (Transformer-XL, Dai et al. 2019;
     * NVIDIA's RelPartialLearnableMultiHeadAttn). b sequences (columns), qlen queries, mlen memory
     * steps, klen = mlen + qlen keys; query i sits at key position mlen + i. n heads of d.
     *   qkv[b, klen, 3·n·d]: qkv_net applied to cat(memory, input) per sequence: per key row q|k|v,
     *     head h at columns h·d of each third; the queries are rows mlen..klen-1 (memory rows' q unused).
     *   r[klen, n·d]: r_net of the positional embedding, row t for relative distance klen-1-t (NVIDIA's
     *     pos_seq = arange(klen-1, -1, -1), clamped by the caller).
     *   r_w_bias[n, d], r_r_bias[n, d]: the learnable global biases.
     * score(s,h,i,j) = scale·( (q_i + r_w_bias_h)·k_j + (q_i + r_r_bias_h)·r[klen-1-(mlen+i-j)] )
     * for allowed keys: j <= mlen + i (causal), and, when lower_shift > 0, j > i - lower_shift too
     * (same_length evaluation); masked keys get probability exactly 0 (no key is ever all masked:
     * key j = mlen + i is always allowed, as the caller keeps lower_shift >= 1).
     * P = softmax over j -> probs[b, n, qlen, klen]; dropout on P (dropatt): keep(s,h,i,j) =
     * hs_uniform(key, first_sample + s, (h·qlen + i)·klen + j) >= p, kept values scaled by 1/(1-p), a
     * dropped probability stored with its sign bit set (as attention_forward); no dropout when p <= 0.
     * ctx[b, qlen, n·d] (head h at columns h·d) = P'·V. */
    void (*rel_attention_forward)(const hs_backend *be, float *ctx, float *probs, const float *qkv, const float *r,
                                  const float *r_w_bias, const float *r_r_bias, int batch, int qlen, int mlen,
                                  int heads, int head_dim, int lower_shift, float scale, float p, uint64_t key,
                                  int64_t first_sample);
    /* Gradients of the above from dctx[b, qlen, n·d]: dqkv[b, klen, 3·n·d] OVERWRITTEN (q columns of the
     * memory rows are 0); dr[klen, n·d] OVERWRITTEN (summed over sequences); dr_w_bias[n, d] and
     * dr_r_bias[n, d] ACCUMULATE (parameters). Reductions in an order fixed by the shapes alone. */
    void (*rel_attention_backward)(const hs_backend *be, float *dqkv, float *dr, float *dr_w_bias, float *dr_r_bias,
                                   const float *dctx, const float *qkv, const float *r, const float *r_w_bias,
                                   const float *r_r_bias, const float *probs, int batch, int qlen, int mlen, int heads,
                                   int head_dim, int lower_shift, float scale, float p, uint64_t key,
                                   int64_t first_sample);
};

/* "cpu", "cuda" or "auto". "auto" picks CUDA when a GPU is usable, else the CPU (and says so);
 * "cuda" without a usable GPU is an error. local_rank picks the GPU. The device object lives until
 * the process ends. */
const hs_backend *hs_backend_select(const char *device, int local_rank);
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
 * the reason in why[why_len] (src/backend/cuda/backend_cuda.c; src/backend/no_cuda.c in a build
 * without the CUDA backend). */
const hs_backend *hs_backend_cuda(int local_rank, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
