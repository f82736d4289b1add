/* The device seam. Model, layer, optimizer and trainer code reach memory and compute only through
 * this table of function pointers (like IOR's aiori backends), so one binary runs on CPU nodes and GPU
 * nodes. The CPU backend (OpenBLAS + OpenMP) is always built; the CUDA backend is added by configure
 * --with-cuda. All pointers passed to these functions are device pointers of the same backend unless
 * named *_host. All tensors are row-major, float32 unless stated. Gradient outputs (dw, db, d*) that
 * are parameters ACCUMULATE (+=) so micro-batches add up; activation gradients are overwritten. */
#ifndef HS_BACKEND_H
#define HS_BACKEND_H

#include <stddef.h>
#include <stdint.h>

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
} hs_adam_hparams;

/* LAMB (NVLAMB, apex FusedLAMB) for one tensor; see lamb_moments below. */
typedef struct hs_lamb_hparams {
    double beta1, beta2, eps;
    double weight_decay; /* this tensor's decoupled decay (0 for biases and LayerNorm) */
    double grad_divisor; /* global clipping divisor: norm/max_norm if norm > max_norm, else 1 */
    int64_t step;        /* 1-based step count after increment */
} hs_lamb_hparams;

typedef struct hs_backend {
    const char *name; /* "cpu" | "cuda" */

    /* ---- memory ---------------------------------------------------------------------------- */
    void *(*alloc)(size_t bytes); /* zero-filled; aborts with a message on failure */
    void (*free)(void *p);
    void (*upload)(void *dst, const void *src_host, size_t bytes);
    void (*download)(void *dst_host, const void *src, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes);
    void (*zero)(void *p, size_t bytes);
    void (*synchronize)(void);

    /* ---- dense linear algebra -------------------------------------------------------------- */
    /* c[m,n] = alpha * op(a)[m,k] · op(b)[k,n] + beta * c[m,n]; op = transpose if trans_* != 0. */
    void (*gemm)(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc);
    /* y[rows,cols] += bias[cols] */
    void (*add_bias)(float *y, const float *bias, int rows, int cols);
    /* dbias[cols] += sum_r dy[r,cols] */
    void (*bias_grad)(float *dbias, const float *dy, int rows, int cols);

    /* ---- element-wise ---------------------------------------------------------------------- */
    /* y = (float)x_u8 * scale + shift  (image bytes -> normalised input) */
    void (*u8_to_float)(float *y, const uint8_t *x, size_t n, float scale, float shift);
    void (*relu_forward)(float *y, const float *x, size_t n);
    /* dx = dy * (y > 0); y is the forward output (may alias dx/dy) */
    void (*relu_backward)(float *dx, const float *dy, const float *y, size_t n);
    /* Inverted dropout on x[batch, per_sample]: elements are dropped in groups of `group` consecutive
     * values (group = 1: element-wise; group = h*w: channel-wise Dropout2d). Keep decision of group j of
     * sample i: hs_uniform(key, first_sample + i, j) >= p; kept values are scaled by 1/(1-p).
     * Backward recomputes the same mask from the same key. */
    void (*dropout_forward)(float *y, const float *x, int batch, size_t per_sample, size_t group,
                            float p, uint64_t key, int64_t first_sample);
    void (*dropout_backward)(float *dx, const float *dy, int batch, size_t per_sample, size_t group,
                             float p, uint64_t key, int64_t first_sample);

    /* ---- convolution and pooling ------------------------------------------------------------ */
    /* workspace: at least conv2d_workspace_bytes(s) bytes of device memory (im2col on the CPU). */
    size_t (*conv2d_workspace_bytes)(const hs_conv2d_shape *s);
    void (*conv2d_forward)(const hs_conv2d_shape *s, float *y, const float *x, const float *w,
                           const float *b, void *workspace);
    /* dx may be NULL (first layer). dw, db accumulate. */
    void (*conv2d_backward)(const hs_conv2d_shape *s, float *dx, float *dw, float *db, const float *dy,
                            const float *x, const float *w, void *workspace);
    /* Max pooling k×k, stride k, on x[n,c,h,w] -> y[n,c,h/k,w/k]; argmax[n,c,h/k,w/k] holds the
     * flat index (within the h*w plane) of the winner, first maximum on ties (as PyTorch). */
    void (*maxpool2d_forward)(float *y, int32_t *argmax, const float *x, int n, int c, int h, int w, int k);
    void (*maxpool2d_backward)(float *dx, const float *dy, const int32_t *argmax, int n, int c, int h,
                               int w, int k);

    /* ---- loss -------------------------------------------------------------------------------- */
    /* logprobs[rows,cols] = log_softmax(logits); stats_host[0] += sum_r -logprobs[r,label_r] (NLL sum),
     * stats_host[1] += number of rows whose argmax == label (first maximum on ties). labels are device
     * int32; a label outside [0,cols) is a fatal data error. */
    void (*log_softmax_nll_forward)(float *logprobs, const float *logits, const int32_t *labels, int rows,
                                    int cols, double stats_host[2]);
    /* dlogits = scale * (softmax - onehot(label)) : gradient of scale * sum of NLL. */
    void (*log_softmax_nll_backward)(float *dlogits, const float *logprobs, const int32_t *labels, int rows,
                                     int cols, float scale);

    /* ---- reductions and optimizer updates on flat buffers ------------------------------------ */
    /* sum of squares in double, in a fixed order (deterministic for a given n). */
    double (*sumsq)(const float *x, size_t n);
    void (*scale)(float *x, float a, size_t n);
    /* Adam (HetSeq / fairseq): m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; denom = sqrt(v) + eps;
     * if decoupled and wd: p -= wd*lr*p; p -= lr*sqrt(1-b2^t)/(1-b1^t) * m/denom.
     * Not decoupled: classic L2, g += wd*p before the moments. */
    void (*adam_update)(float *p, const float *g, float *m, float *v, size_t n, const hs_adam_hparams *h);
    /* Adadelta (torch): g += wd p; sq = rho sq + (1-rho) g^2; d = sqrt(acc+eps)/sqrt(sq+eps) g;
     * p -= lr d; acc = rho acc + (1-rho) d^2. */
    void (*adadelta_update)(float *p, const float *g, float *sq, float *acc, size_t n, double lr, double rho,
                            double eps, double weight_decay);
    /* SGD (torch): g += wd p; if momentum: buf = momentum buf + g (buf = g at the first step); p -= lr*buf.
     * buf may be NULL when momentum == 0. */
    void (*sgd_update)(float *p, const float *g, float *buf, size_t n, double lr, double momentum,
                       double weight_decay, int first_step);
    /* LAMB stage 1: g' = g/grad_divisor; m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2;
     * u = (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps) + wd p (the wd term only when wd != 0). Updates m, v;
     * p and g are unchanged. sums_host[0] = sum p^2, sums_host[1] = sum u^2, in double in a fixed order
     * (independent of the thread count). */
    void (*lamb_moments)(const float *p, const float *g, float *m, float *v, size_t n, const hs_lamb_hparams *h,
                         double sums_host[2]);
    /* LAMB stage 2: p -= step * u, with u recomputed from p, m, v exactly as stage 1 computed it. */
    void (*lamb_apply)(float *p, const float *m, const float *v, size_t n, const hs_lamb_hparams *h, double step);

    /* ---- BERT ops (src/nn/bert_layers.h composes them) ------------------------------------------ */
    /* y[count,cols] (+)= x[index[i], :] (accumulate: +=); index device int32, each in [0, x_rows) or a
     * fatal data error. Embedding lookup and row gathers. */
    void (*gather_rows)(float *y, const float *x, const int32_t *index, int count, int cols, int x_rows,
                        int accumulate);
    /* dx[index[i], :] += dy[i, :] for i in order (deterministic for repeated indices); dx[dx_rows,cols]. */
    void (*scatter_add_rows)(float *dx, const float *dy, const int32_t *index, int count, int cols, int dx_rows);
    /* y[r, 0:cols] += bias[cols] for rows of stride ldy (a column slice of a wider matrix). */
    void (*add_bias_strided)(float *y, int ldy, const float *bias, int rows, int cols);
    /* dbias[cols] += sum_r dy[r, 0:cols], rows of stride ldy; deterministic like bias_grad. */
    void (*bias_grad_strided)(float *dbias, const float *dy, int ldy, int rows, int cols);
    /* LayerNorm over the last dim (biased variance, eps inside the sqrt). If residual != NULL the input is
     * x + residual, written to x_sum (may alias x or residual); else x_sum is unused (may be NULL).
     * y = gamma·(in - mean)·rstd + beta; mean[rows], rstd[rows] saved. y aliases no input. */
    void (*layernorm_forward)(float *y, float *x_sum, float *mean, float *rstd, const float *x,
                              const float *residual, const float *gamma, const float *beta, int rows, int cols,
                              float eps);
    /* dx = rstd·(g - mean(g) - x̂·mean(g·x̂)), g = dy·gamma (dx may alias dy); dgamma += Σ dy·x̂,
     * dbeta += Σ dy (summed in an order fixed by rows/cols alone). x is the LayerNorm's input. */
    void (*layernorm_backward)(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x,
                               const float *mean, const float *rstd, const float *gamma, int rows, int cols);
    /* Exact-erf GELU 0.5·x·(1+erf(x/√2)). bias_gelu: x[rows,cols] += bias, y = gelu(x). */
    void (*gelu_forward)(float *y, const float *x, size_t n);
    void (*bias_gelu_forward)(float *y, float *x, const float *bias, int rows, int cols);
    /* dx = dy·gelu'(x) from the pre-activation x; dx may alias dy. */
    void (*gelu_backward)(float *dx, const float *dy, const float *x, size_t n);
    void (*tanh_forward)(float *y, const float *x, size_t n);
    /* dx = dy·(1 - y²) from the output y; any may alias. */
    void (*tanh_backward)(float *dx, const float *dy, const float *y, size_t n);
    /* bias[n] = (1 - mask[n])·(-10000) */
    void (*attention_mask_bias)(float *bias, const int32_t *mask, size_t n);
    /* Scaled dot-product attention on projected qkv[B,L,3H] (per token q|k|v, head h at columns h·d of
     * each third): for each (b,h), P = softmax(Q·Kᵀ/√d + mask_bias[b,:]) -> probs[B,heads,L,L];
     * ctx[B,L,H] (head h at columns h·d) = (P ⊙ keep/(1-p))·V, keep(b,h,i,j) = hs_uniform(key,
     * first_sample + b, (h·L+i)·L+j) >= p (no dropout when p <= 0). A dropped probability is stored in
     * probs with its sign bit set (-P, -0.0 for 0), so the backward pass needs no mask buffer. */
    void (*attention_forward)(float *ctx, float *probs, const float *qkv, const float *mask_bias, int batch,
                              int seq_len, int heads, int head_dim, float p, uint64_t key, int64_t first_sample);
    /* dqkv[B,L,3H] (overwritten) from dctx[B,L,H], the forward's qkv and probs and the same dropout
     * (the CPU reads the keep decisions from the sign bits of probs; key/first_sample let another backend
     * redraw them instead). */
    void (*attention_backward)(float *dqkv, const float *dctx, const float *qkv, const float *probs, int batch,
                               int seq_len, int heads, int head_dim, float p, uint64_t key, int64_t first_sample);
    /* probs = softmax(logits) (may alias); per row with label >= 0: stats_host[0] += NLL, [1] += 1,
     * [2] += (argmax == label); rows summed in order. label >= cols: fatal data error. */
    void (*softmax_xent_forward)(float *probs, const float *logits, const int32_t *labels, int rows, int cols,
                                 double stats_host[3]);
    /* dlogits = scale·(probs - onehot(label)), 0 on rows with label < 0; dlogits may alias probs. */
    void (*softmax_xent_backward)(float *dlogits, const float *probs, const int32_t *labels, int rows, int cols,
                                  float scale);
} hs_backend;

/* "cpu", "cuda" or "auto". "auto" picks CUDA when a GPU is usable, else the CPU (and says so);
 * "cuda" without a usable GPU is an error. local_rank picks the GPU. */
const hs_backend *hs_backend_select(const char *device, int local_rank);
const hs_backend *hs_backend_cpu(void);

#endif
