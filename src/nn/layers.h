/* Neural-network layers as forward/backward pairs, side by side, named by what they compute (not by the
 * model that first used them). Layers hold no state of their own: the model owns parameters (in the
 * hs_params table) and activations, and passes device pointers. Every layer reaches the device only
 * through the backend (a layer that is one backend op is a static inline here; linear.c and
 * attention.c compose several), so the same layer code runs on the CPU and on GPUs and only enqueues
 * work. Conventions (backend.h): row-major float32; T = B·L tokens of a sequence model, H hidden;
 * parameter gradients ACCUMULATE (+=) so micro-batches add up; activation gradients are overwritten
 * unless a function says it accumulates. Every reduction (bias, dgamma, dbeta, embedding gradients,
 * loss statistics) is summed in an order fixed by the shapes alone, so results are bit-identical for
 * any OpenMP thread count. Indices and labels reach a layer already checked (host staging). */
#ifndef HS_NN_LAYERS_H
#define HS_NN_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "math/hs_math.h"
#include "nn/step_ctx_stats.h"

/* ---- scratch memory ------------------------------------------------------------------------------ */
/* A device scratch buffer that grows on demand (conv2d's im2col columns). Starts zeroed ({0}). */
typedef struct hs_workspace {
    void *ptr;
    size_t bytes;
} hs_workspace;
/* Make ws at least `bytes` large (contents are not kept when it grows). */
void hs_workspace_reserve(const hs_backend *be, hs_workspace *ws, size_t bytes);
void hs_workspace_release(const hs_backend *be, hs_workspace *ws);

/* ---- activation storage -------------------------------------------------------------------------- */
/* 1 if the models keep their large activations for the backward pass in the 16-bit type of the
 * backend's precision (bf16 | fp16; be->to_half / from_half), 0 for fp32 storage (fp32, tf32, or
 * HETSEQ_ACTIVATION_STORAGE=fp32, which exists to compare the two). Any other value of the variable
 * ends every rank with a message. Read when a model sets up its buffers. */
int hs_activations_16bit(const hs_backend *be);
/* The experiment file's `attention` ("auto" | "fused" | "unfused") on backend be: 1 for the fused
 * attention (no L x L tensor kept), 0 for the unfused reference. auto = fused where the backend's memory
 * is not host memory (CUDA), unfused on the CPU. */
int hs_attention_fused(const hs_backend *be, const char *mode);
/* A zeroed device buffer of n floats / n 16-bit values (at least one) for a model's activations; its
 * bytes are added to *bytes, the model's activation count (hs_bert_activation_bytes, ...). */
float *hs_act_floats(const hs_backend *be, size_t *bytes, size_t n);
uint16_t *hs_act_halves(const hs_backend *be, size_t *bytes, size_t n);
/* A tensor a layer keeps for its backward: the fp32 working tensor, its 16-bit copy and its element
 * count for the current micro-batch. */
typedef struct hs_act16 {
    float *f;
    uint16_t *u;
    size_t count;
} hs_act16;
/* t[n]: each working tensor rounded into its 16-bit copy (store, after the forward), or each copy
 * widened back into its working tensor (load, exact, before the backward); one convert_halves op for
 * all of them (n <= HS_HALF_CONVERSIONS_MAX). */
void hs_act16_store(const hs_backend *be, const hs_act16 *t, int n);
void hs_act16_load(const hs_backend *be, const hs_act16 *t, int n);
/* f bound to its 16-bit twin h (be->bind_half), or, with only16 (the 16-bit dataflow: a tensor only
 * products read, on a backend where be->products_read_twins), bound as existing in 16 bits alone
 * (be->bind_half_only: its fp32 values need not be written) */
static inline void hs_bind_twin(const hs_backend *be, const float *f, const uint16_t *h, size_t n, int only16) {
    if (only16)
        be->bind_half_only(be, f, h, n);
    else
        be->bind_half(be, f, h, n);
}

/* ---- linear (PyTorch nn.Linear, W[out,in]) --------------------------------------------------------- */
/* y[B,out] = x[B,in] · W[out,in]ᵀ + b[out] */
void hs_linear_forward(const hs_backend *be, float *y, const float *x, const float *w, const float *b, int batch,
                       int in, int out);
/* dW[out,in] += dyᵀ·x, db[out] += colsum(dy), dx[B,in] = dy·W (skipped when dx is NULL). overwrite = 1
 * (hs_step_ctx.grads_zero, where this call is the tensors' first writer): dW and db are written, whatever
 * they held (gemm_wgrad_bgrad's overwrite), with the bits of adding to zeros. */
void hs_linear_backward(const hs_backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                        const float *w, int batch, int in, int out, int overwrite);
/* A linear layer whose output an element-wise op reads next, in autocast's recipe: under bf16/fp16 the
 * 16-bit linear layer y = round(x·Wᵀ + round(b)) (gemm_bias_half; b may be NULL), in fp32/tf32
 * x·Wᵀ (+ b). y16 (bf16/fp16 only; NULL: y holds the values): the output in 16 bits only, and y bound to
 * it with bind_half_only (the caller unbinds y once its readers ran). */
void hs_linear_forward_rounded(const hs_backend *be, uint16_t *y16, float *y, const float *x, const float *w,
                               const float *b, int batch, int in, int out);
/* dx[B,in] = dy[B,out]·W[out,in], under bf16/fp16 rounded to 16 bits as autocast's matmul writes it
 * (gemm_half_out). dx16 as hs_linear_forward_rounded's y16: the gradient in 16 bits only, dx bound to it
 * with bind_half_only (the caller unbinds). */
void hs_linear_dx_rounded(const hs_backend *be, uint16_t *dx16, float *dx, const float *dy, const float *w, int batch,
                          int in, int out);

/* ---- conv2d (stride 1, no padding; PyTorch nn.Conv2d, W[c_out,c_in,kh,kw]) ------------------------- */
/* y[n,c_out,oh,ow] = x[n,c_in,h,w] ⋆ W + b[c_out]; ws grows to what the backend asks for. */
static inline void hs_conv2d_forward(const hs_backend *be, const hs_conv2d_shape *s, float *y, const float *x,
                                     const float *w, const float *b, hs_workspace *ws) {
    hs_workspace_reserve(be, ws, be->conv2d_workspace_bytes(be, s));
    be->conv2d_forward(be, s, y, x, w, b, ws->ptr);
}
/* dW += ∂L/∂W, db += ∂L/∂b, dx[n,c_in,h,w] = ∂L/∂x (skipped when dx is NULL, e.g. the first layer) */
static inline void hs_conv2d_backward(const hs_backend *be, const hs_conv2d_shape *s, float *dx, float *dw, float *db,
                                      const float *dy, const float *x, const float *w, hs_workspace *ws) {
    hs_workspace_reserve(be, ws, be->conv2d_workspace_bytes(be, s));
    be->conv2d_backward(be, s, dx, dw, db, dy, x, w, ws->ptr);
}

/* ---- max pooling k×k, stride k --------------------------------------------------------------------- */
/* y[n,c,h/k,w/k] = window max of x[n,c,h,w]; argmax[n,c,h/k,w/k] remembers the winner */
static inline void hs_maxpool2d_forward(const hs_backend *be, float *y, int32_t *argmax, const float *x, int n, int c,
                                        int h, int w, int k) {
    be->maxpool2d_forward(be, y, argmax, x, n, c, h, w, k);
}
/* dx[n,c,h,w] = dy routed to the winners, 0 elsewhere */
static inline void hs_maxpool2d_backward(const hs_backend *be, float *dx, const float *dy, const int32_t *argmax, int n,
                                         int c, int h, int w, int k) {
    be->maxpool2d_backward(be, dx, dy, argmax, n, c, h, w, k);
}

/* ---- ReLU -------------------------------------------------------------------------------------------- */
/* y[count] = max(x, 0); in place (y == x) is allowed */
static inline void hs_relu_forward(const hs_backend *be, float *y, const float *x, size_t count) {
    be->relu_forward(be, y, x, count);
}
/* dx[count] = dy * 1[y > 0] from the forward OUTPUT y; in place (dx == dy) is allowed */
static inline void hs_relu_backward(const hs_backend *be, float *dx, const float *dy, const float *y, size_t count) {
    be->relu_backward(be, dx, dy, y, count);
}

/* ---- dropout (inverted) -------------------------------------------------------------------------------- */
/* What one dropout call needs: rate p (0 = off: a plain copy), values per drop decision (1 for
 * element-wise nn.Dropout, h*w for channel-wise nn.Dropout2d), and the mask key and global index of the
 * first sample (masks depend on (key, global sample, group) only). */
typedef struct hs_dropout_mask {
    float p;
    size_t group;
    uint64_t key;
    int64_t first_sample;
} hs_dropout_mask;
/* The element-wise mask of dropout site `site` (a model's own numbering) for this step: keyed by
 * (seed, update, site); off (p = 0) in eval mode, without a step context, or for p = 0. */
static inline hs_dropout_mask hs_dropout_site_mask(const hs_step_ctx *ctx, int64_t first_sample, uint64_t site,
                                                   double p) {
    const int on = ctx && ctx->training && p > 0.0;
    return (hs_dropout_mask){.p = on ? (float)p : 0.0f,
                             .group = 1,
                             .key = on ? hs_rng_key(ctx->seed, ctx->update, site) : 0,
                             .first_sample = first_sample};
}
/* y[B,per_sample] = x · mask / (1-p) */
static inline void hs_dropout_forward(const hs_backend *be, const hs_dropout_mask *m, float *y, const float *x,
                                      int batch, size_t per_sample) {
    be->dropout_forward(be, y, x, batch, per_sample, m->group, m->p, m->key, m->first_sample);
}
/* dx[B,per_sample] = dy · mask / (1-p), the same mask recomputed from the key */
static inline void hs_dropout_backward(const hs_backend *be, const hs_dropout_mask *m, float *dx, const float *dy,
                                       int batch, size_t per_sample) {
    be->dropout_backward(be, dx, dy, batch, per_sample, m->group, m->p, m->key, m->first_sample);
}

/* ---- log_softmax + NLL loss (F.log_softmax then F.nll_loss(reduction='sum')) ----------------------------- */
/* logprobs[B,classes] = log_softmax(logits); stats[0] += Σ NLL, stats[1] += B, stats[2] += correct, where
 * stats is a device float64 [3] (e.g. &hs_stats.loss_sum of a device stats buffer: loss_sum,
 * sample_count, correct). labels: device int32, each in [0, classes) (checked on the host when staged). */
static inline void hs_log_softmax_nll_forward(const hs_backend *be, float *logprobs, const float *logits,
                                              const int32_t *labels, int batch, int classes, double *stats) {
    be->log_softmax_nll_forward(be, logprobs, logits, labels, batch, classes, stats, NULL);
}
/* dlogits[B,classes] = scale · (softmax - onehot(label)): the gradient of scale · Σ NLL */
static inline void hs_log_softmax_nll_backward(const hs_backend *be, float *dlogits, const float *logprobs,
                                               const int32_t *labels, int batch, int classes, float scale) {
    be->log_softmax_nll_backward(be, dlogits, logprobs, NULL, NULL, labels, batch, classes, scale, NULL);
}


/* ---- embedding lookup (nn.Embedding, table[V,H], no padding_idx) ------------------------------------ */
/* y[T,H] = table[ids[t],:] (accumulate = 0) or y[T,H] += table[ids[t],:] (accumulate = 1), so the
 * word, position and token-type embeddings are summed in place. ids are device int32; an id outside
 * [0, vocab) never reaches here: ids are checked on the host while the batch is staged. */
static inline void hs_embedding_forward(const hs_backend *be, float *y, const float *table, const int32_t *ids,
                                        int tokens, int hidden, int vocab, int accumulate) {
    be->gather_rows(be, y, table, ids, tokens, hidden, vocab, accumulate);
}
/* dtable[V,H] += Σ_{t: ids[t]=v} dy[t,:]  (scatter-add; tokens are added in token order per column) */
static inline void hs_embedding_backward(const hs_backend *be, float *dtable, const float *dy, const int32_t *ids,
                                         int tokens, int hidden, int vocab) {
    be->scatter_add_rows(be, dtable, dy, ids, tokens, hidden, vocab);
}

/* ---- position embedding (position ids = arange(L) in every sequence) --------------------------------- */
/* y[B,L,H] += table[0:L, H] */
static inline void hs_position_embedding_forward(const hs_backend *be, float *y, const float *table, int batch,
                                                 int seq_len, int hidden) {
    be->add_bias(be, y, table, batch, seq_len * hidden);
}
/* dtable[0:L, H] += Σ_b dy[b,L,H] */
static inline void hs_position_embedding_backward(const hs_backend *be, float *dtable, const float *dy, int batch,
                                                  int seq_len, int hidden) {
    be->bias_grad(be, dtable, dy, batch, seq_len * hidden);
}

/* ---- LayerNorm (TF style, BertLayerNorm: biased variance, eps inside the sqrt) ----------------------- */
/* y[R,C] = gamma[C] · (x - mean) · rstd + beta[C],  mean[R] = mean(x), rstd[R] = 1/sqrt(var(x) + eps).
 * mean and rstd are kept for the backward pass (R floats each). y must not alias x. */
static inline void hs_layernorm_forward(const hs_backend *be, float *y, float *mean, float *rstd, const float *x,
                                        const float *gamma, const float *beta, int rows, int cols, float eps) {
    be->layernorm_forward(be, y, NULL, mean, rstd, x, NULL, gamma, beta, rows, cols, eps);
}
/* Residual add fused into the LayerNorm (post-LN BERT: LN(sublayer_out + residual)):
 * x_sum[R,C] = a + residual (kept: it is the x of hs_layernorm_backward; x_sum may alias a or residual),
 * then y = LayerNorm(x_sum) as above. y must not alias a, residual or x_sum. */
static inline void hs_add_layernorm_forward(const hs_backend *be, float *y, float *x_sum, float *mean, float *rstd,
                                            const float *a, const float *residual, const float *gamma,
                                            const float *beta, int rows, int cols, float eps) {
    be->layernorm_forward(be, y, x_sum, mean, rstd, a, residual, gamma, beta, rows, cols, eps);
}
/* A post-LN sublayer's end in one op: x_sum[R,C] = dropout(a) + residual (m's mask on a[batch,
 * per_sample]; x_sum may alias a, not residual), y = LayerNorm(x_sum): hs_dropout_forward then
 * hs_add_layernorm_forward, the same values (one kernel on CUDA). */
static inline void hs_dropout_add_layernorm_forward(const hs_backend *be, const hs_dropout_mask *m, float *y,
                                                    float *x_sum, float *mean, float *rstd, const float *a,
                                                    const float *residual, const float *gamma, const float *beta,
                                                    int rows, int cols, float eps, int batch, size_t per_sample,
                                                    uint16_t *y16) {
    be->dropout_add_layernorm_forward(be, y, x_sum, mean, rstd, a, residual, gamma, beta, rows, cols, eps, batch,
                                      per_sample, m->group, m->p, m->key, m->first_sample, y16);
}
/* Its backward: dx = the LayerNorm backward of dy (may alias dy: the residual's gradient), da = the
 * dropout backward of dx (the sublayer output's gradient; aliases neither dx nor dy). */
static inline void hs_layernorm_dropout_backward(const hs_backend *be, const hs_dropout_mask *m, float *dx, float *da,
                                                 float *dgamma, float *dbeta, const float *dy, const float *x,
                                                 const float *mean, const float *rstd, const float *gamma, int rows,
                                                 int cols, int batch, size_t per_sample, uint16_t *da16) {
    be->layernorm_dropout_backward(be, dx, da, dgamma, dbeta, dy, x, mean, rstd, gamma, rows, cols, batch, per_sample,
                                   m->group, m->p, m->key, m->first_sample, da16);
}
/* With x̂ = (x - mean)·rstd and g = dy·gamma:
 *   dx[R,C] = rstd · (g - mean_C(g) - x̂ · mean_C(g·x̂))   (overwritten; dx may alias dy)
 *   dgamma[C] += Σ_R dy·x̂,  dbeta[C] += Σ_R dy
 * x is the LayerNorm input (x_sum of the fused form). For the fused form, dx is the gradient of both
 * a and residual. */
static inline void hs_layernorm_backward(const hs_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy,
                                         const float *x, const float *mean, const float *rstd, const float *gamma,
                                         int rows, int cols) {
    be->layernorm_backward(be, dx, dgamma, dbeta, dy, x, mean, rstd, gamma, rows, cols);
}

/* ---- GELU, exact erf form ---------------------------------------------------------------------------- */
/* gelu(x) = 0.5·x·(1 + erf(x/√2)): NVIDIA's run_pretraining.py trains with torch.nn.functional.gelu
 * (exact erf, 1/√2 in full precision), not modeling.py's x/1.41421 helper. erf is evaluated by a
 * vectorisable formula (kernels/math/fast_exp_erf.h) accurate to 2.5e-7 absolute.
 * y[n] = gelu(x[n]); y must not alias x (the backward needs x). */
static inline void hs_gelu_forward(const hs_backend *be, float *y, const float *x, size_t count) {
    be->gelu_forward(be, y, x, count);
}
/* Fused bias + GELU (BertIntermediate's LinearActivation): x[R,C] += bias[C] in place (x becomes the
 * pre-activation the backward needs), y[R,C] = gelu(x). Use after a bias-less GEMM. With x16 the
 * pre-activation is written rounded into x16 only (x unchanged), y16: y's rounding. */
static inline void hs_bias_gelu_forward(const hs_backend *be, float *y, float *x, const float *bias, int rows,
                                        int cols, uint16_t *x16, uint16_t *y16) {
    be->bias_gelu_forward(be, y, x, bias, rows, cols, x16, y16);
}
/* dx[n] = dy · gelu'(x),  gelu'(x) = Φ(x) + x·φ(x); x is the pre-activation; dx may alias dy. For the
 * fused form the bias gradient is then be->bias_grad(be, dbias, dx, rows, cols). */
static inline void hs_gelu_backward(const hs_backend *be, float *dx, const float *dy, const float *x, size_t count,
                                    uint16_t *dx16) {
    be->gelu_backward(be, dx, dy, x, NULL, count, dx16, NULL, NULL);
}
/* The same from the pre-activation's 16-bit copy x16 (bf16/fp16: read and widened in the same pass, not
 * widened into memory first), and y[n] = gelu(x) recomputed (with its rounding y16, or NULL), for a model
 * that kept the pre-activation in 16 bits and not the GELU output; y must not alias dx or dy. */
static inline void hs_gelu_backward_recompute(const hs_backend *be, float *dx, const float *dy, const uint16_t *x16,
                                              size_t count, uint16_t *dx16, float *y, uint16_t *y16) {
    be->gelu_backward(be, dx, dy, NULL, x16, count, dx16, y, y16);
}

/* ---- tanh (e.g. BERT's pooler) ----------------------------------------------------------------------- */
/* y[n] = tanh(x[n]); in place allowed */
static inline void hs_tanh_forward(const hs_backend *be, float *y, const float *x, size_t count) {
    be->tanh_forward(be, y, x, count);
}
/* dx[n] = dy · (1 - y²) from the forward OUTPUT y; in place (dx == dy) allowed */
static inline void hs_tanh_backward(const hs_backend *be, float *dx, const float *dy, const float *y, size_t count) {
    be->tanh_backward(be, dx, dy, y, count);
}

/* ---- gather rows (e.g. BERT's pooler token and masked positions) -------------------------------------- */
/* y[N,C] = x[row_index[i], :]; row_index is device int32 into x's rows [0, x_rows) (the
 * caller guarantees it: the model builds the row indices itself from staged, checked positions) */
static inline void hs_gather_rows_forward(const hs_backend *be, float *y, const float *x, const int32_t *row_index,
                                          int count, int cols, int x_rows) {
    be->gather_rows(be, y, x, row_index, count, cols, x_rows, 0);
}
/* dx[row_index[i], :] += dy[i, :]  (ACCUMULATES into dx[x_rows,C]; repeated indices add up, in index order) */
static inline void hs_gather_rows_backward(const hs_backend *be, float *dx, const float *dy, const int32_t *row_index,
                                           int count, int cols, int x_rows) {
    be->scatter_add_rows(be, dx, dy, row_index, count, cols, x_rows);
}

/* ---- self-attention (BertSelfAttention: query/key/value projections → scaled dot-product → context) --- */
typedef struct hs_attention_dims {
    int batch, seq_len, hidden, heads; /* head_dim = hidden / heads */
} hs_attention_dims;
/* PyTorch nn.Linear layout: *_w[H,H] (out,in), *_b[H]. When query_w, key_w, value_w happen to be
 * adjacent in memory (key_w == query_w + H·H, value_w == key_w + H·H: the model declared them one after
 * the other and H·H is a multiple of the table's 16-float alignment) the three projections run as one
 * [3H,H] GEMM; otherwise as three GEMMs into the same buffer. Results are identical either way up to
 * GEMM blocking; no layout is required. */
typedef struct hs_attention_params {
    const float *query_w, *query_b, *key_w, *key_b, *value_w, *value_b;
} hs_attention_params;
typedef struct hs_attention_grads {
    float *query_w, *query_b, *key_w, *key_b, *value_w, *value_b; /* accumulate (+=) */
    int overwrite; /* 1: the six are written instead (hs_step_ctx.grads_zero; see hs_linear_backward) */
    uint16_t *dqkv16; /* NULL, or [B,L,3H] scratch for dqkv's 16-bit twin (16-bit storage): written with dqkv
                       * and bound to it (be->bind_half) for the weight- and data-gradient products, which
                       * then convert nothing; unbound before returning */
} hs_attention_grads;
/* What the forward pass keeps for the backward pass (model-owned device buffers, sizes below). Unfused
 * (the reference): probs. Fused (lse != NULL: flash_attention_forward/backward, no L×L tensor): lse,
 * and the backward reads the forward's context and mask bias (ctx, mask_bias) to recompute P. */
typedef struct hs_attention_saved {
    float *qkv;   /* [B,L,3H]: per token q | k | v, head h at columns h·d..(h+1)·d of each third */
    float *probs; /* [B,heads,L,L] (unfused): softmax probabilities BEFORE attention dropout; with dropout
                   * on, a dropped one is stored negated (sign bit set), which is how the backward pass
                   * knows the mask without a mask buffer: use fabsf to read a probability */
    float *lse;   /* [B,heads,L] (fused): each row's log-sum-exp of its masked scaled scores */
    const float *ctx, *mask_bias; /* fused: the forward's ctx output [B,L,H] and mask_bias [B,L] */
    uint16_t *ctx16; /* NULL, or [B,L,H]: the forward writes round(ctx) (to_half's bits) here too (fused: in
                      * the same kernel; unfused: converted after it) */
    const uint16_t *qkv16; /* fused only: NULL, or [B,L,3H] holding round(qkv) (to_half's bits), which the fused
                            * ops read instead of qkv (the same results under bf16/fp16): a model keeping
                            * q|k|v in 16 bits need not widen it for the backward pass. Unfused: ignored. */
    uint16_t *qkv16_out; /* fused forward only (bf16/fp16): NULL, or [B,L,3H] receiving q|k|v in 16 bits, the copy
                          * the backward reads as qkv16, with no conversion of its own. Where the q, k, v
                          * weights form one [3H,H] matrix and their biases one [3H] vector (the parameter
                          * arena's layout when H is a multiple of 16), the projection (gemm_bias_half:
                          * round(x·Wᵀ + round(b)), under bf16/fp16 whatever the storage) writes it alone
                          * (qkv is scratch) and the attention reads it; else the attention kernel writes
                          * round(qkv) as it reads the fp32 q|k|v.
                          * Unfused: ignored. */
} hs_attention_saved;
size_t hs_attention_qkv_floats(const hs_attention_dims *d);   /* B·L·3H */
size_t hs_attention_probs_floats(const hs_attention_dims *d); /* B·heads·L·L */
size_t hs_attention_lse_floats(const hs_attention_dims *d);   /* B·heads·L */

/* mask_bias[B,L] = (1 - input_mask)·(-10000): BERT's extended attention mask, computed once per batch
 * and shared by every layer. input_mask is device int32 [B,L] (1 = real token, 0 = padding). */
void hs_attention_mask_bias(const hs_backend *be, float *mask_bias, const int32_t *input_mask, int batch,
                            int seq_len);

/* ctx[B,L,H] = merge_heads(dropout(softmax(Q·Kᵀ/√d + mask_bias)) · V),  Q,K,V = x·Wᵀ + b split into heads.
 * x[B,L,H]; mask_bias[B,L] is broadcast over heads and query positions. The attention-probability
 * dropout uses drop->p and drop->key (drop->group is ignored): probability (h,i,j) of sample b is kept
 * iff the attention stream's uniform of (key, first_sample + b, row h·L + i, column j) is >= p
 * (hs_attention_uniform, kernels/math/dropout.h) and then scaled by 1/(1-p); p = 0 (or
 * drop == NULL) is no dropout. The output projection (attention.output.dense) is NOT included: it is a
 * plain hs_linear_forward on ctx done by the model. ctx must not alias x; it may be NULL under the fused
 * attention with saved->ctx16 (the context only in 16 bits: be->bind_half_only). */
void hs_attention_forward(const hs_backend *be, const hs_attention_dims *d, const hs_attention_params *w,
                          const float *mask_bias, const hs_dropout_mask *drop, const float *x,
                          const hs_attention_saved *saved, float *ctx);
/* From dctx[B,L,H]: parameter gradients += (g), and dx[B,L,H] = ∂L/∂x (accumulate_dx = 0) or
 * dx += ∂L/∂x (accumulate_dx = 1: adds onto the residual-path gradient already in dx). x and saved are
 * the forward's; the same drop (key, first_sample, p) must be passed. dx may be NULL (no input
 * gradient). ws grows to hold dqkv[B,L,3H]. */
void hs_attention_backward(const hs_backend *be, const hs_attention_dims *d, const hs_attention_params *w,
                           const hs_attention_grads *g, const hs_dropout_mask *drop, const float *x,
                           const hs_attention_saved *saved, const float *dctx, float *dx, int accumulate_dx,
                           hs_workspace *ws);

/* ---- softmax cross-entropy (nn.CrossEntropyLoss(ignore_index=-1), reduction chosen by the caller) ------ */
/* probs[R,C] = softmax(logits) (probs may alias logits: computed in place). For each row with a label
 * >= 0: stats[0] += -log softmax[label] (NLL, from a double log-sum-exp), stats[1] += 1 (counted rows),
 * stats[2] += 1 if argmax == label (first maximum on ties, as torch.argmax). Rows with label < 0 are
 * ignored. Rows are summed in row order (deterministic). stats is a device float64 [3] (a region of a
 * device stats buffer). labels are device int32, each < C (checked on the host when staged). */
static inline void hs_softmax_xent_forward(const hs_backend *be, float *probs, const float *logits,
                                           const int32_t *labels, int rows, int classes, double *stats) {
    be->softmax_xent_forward(be, probs, logits, labels, rows, classes, stats);
}
/* dlogits[R,C] = scale · (probs - onehot(label)), 0 for ignored rows: the gradient of scale · Σ NLL
 * (scale = 1/count for the mean). dlogits may alias probs. */
static inline void hs_softmax_xent_backward(const hs_backend *be, float *dlogits, const float *probs,
                                            const int32_t *labels, int rows, int classes, float scale) {
    be->softmax_xent_backward(be, dlogits, probs, labels, rows, classes, scale);
}

/* ---- relative-position attention (Transformer-XL's RelPartialLearnableMultiHeadAttn core) ---------- */
/* The attention core between qkv_net/r_net and o_net; the contract (shapes, masks, dropout counters)
 * is rel_attention_forward in backend.h. b sequences of qlen queries after mlen memory steps,
 * klen = mlen + qlen: qkv[b,klen,3·n·d] (per key row q|k|v; the queries are rows mlen..klen-1),
 * r[klen,n·d] (row t for relative distance klen-1-t), r_w_bias/r_r_bias[n,d];
 * ctx[b,qlen,n·d] = dropatt(softmax(scale·(AC + shifted BD), causal (+ same_length) mask))·V;
 * probs[b,n,qlen,klen] is kept for the backward pass (a dropped probability stored negated). Keys
 * j <= mlen + i are allowed, and with lower_shift > 0 (same_length) only j > i - lower_shift.
 * Dropout keeps (s,h,i,j) iff the attention stream's uniform of (key, first_sample + s, row h·qlen + i,
 * column j) is >= p (hs_attention_uniform, kernels/math/dropout.h). */
static inline void hs_rel_attention_forward(const hs_backend *be, float *ctx, float *probs, const float *qkv,
                                            const float *r, const float *r_w_bias, const float *r_r_bias, int batch,
                                            int qlen, int mlen, int heads, int head_dim, int lower_shift, float scale,
                                            float p, uint64_t key, int64_t first_sample) {
    be->rel_attention_forward(be, ctx, probs, qkv, r, r_w_bias, r_r_bias, batch, qlen, mlen, heads, head_dim,
                              lower_shift, scale, p, key, first_sample);
}
/* From dctx[b,qlen,n·d] and the forward's inputs, probs and dropout (same key, first_sample, p):
 * dqkv[b,klen,3·n·d] and dr[klen,n·d] OVERWRITTEN (dr summed over the sequences; the memory rows' q
 * columns of dqkv are 0); dr_w_bias, dr_r_bias[n,d] ACCUMULATE. */
static inline void hs_rel_attention_backward(const hs_backend *be, float *dqkv, float *dr, float *dr_w_bias,
                                             float *dr_r_bias, const float *dctx, const float *qkv, const float *r,
                                             const float *r_w_bias, const float *r_r_bias, const float *probs,
                                             int batch, int qlen, int mlen, int heads, int head_dim, int lower_shift,
                                             float scale, float p, uint64_t key, int64_t first_sample) {
    be->rel_attention_backward(be, dqkv, dr, dr_w_bias, dr_r_bias, dctx, qkv, r, r_w_bias, r_r_bias, probs, batch,
                               qlen, mlen, heads, head_dim, lower_shift, scale, p, key, first_sample);
}
/* The same attention fused (attention = "fused"): the forward keeps lse[b,n,qlen] (each query row's
 * log-sum-exp) instead of probs, the backward recomputes the probabilities from it and the context
 * (rel_flash_attention_forward/backward in ops.def). Same outputs and gradients up to rounding. ctx16,
 * dqkv16, dr16: NULL, or the 16-bit roundings of ctx, dqkv, dr written in the same pass (twins). */
static inline void hs_rel_flash_attention_forward(const hs_backend *be, float *ctx, float *lse, const float *qkv,
                                                  const float *r, const float *r_w_bias, const float *r_r_bias,
                                                  int batch, int qlen, int mlen, int heads, int head_dim,
                                                  int lower_shift, float scale, float p, uint64_t key,
                                                  int64_t first_sample, uint16_t *ctx16) {
    be->rel_flash_attention_forward(be, ctx, lse, qkv, r, r_w_bias, r_r_bias, batch, qlen, mlen, heads, head_dim,
                                    lower_shift, scale, p, key, first_sample, ctx16);
}
static inline void hs_rel_flash_attention_backward(const hs_backend *be, float *dqkv, float *dr, float *dr_w_bias,
                                                   float *dr_r_bias, const float *dctx, const float *qkv,
                                                   const float *r, const float *r_w_bias, const float *r_r_bias,
                                                   const float *ctx, const float *lse, int batch, int qlen, int mlen,
                                                   int heads, int head_dim, int lower_shift, float scale, float p,
                                                   uint64_t key, int64_t first_sample, uint16_t *dqkv16,
                                                   uint16_t *dr16) {
    be->rel_flash_attention_backward(be, dqkv, dr, dr_w_bias, dr_r_bias, dctx, qkv, r, r_w_bias, r_r_bias, ctx, lse,
                                     batch, qlen, mlen, heads, head_dim, lower_shift, scale, p, key, first_sample,
                                     dqkv16, dr16);
}

#endif
