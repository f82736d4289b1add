/* The layers BERT adds to src/nn/layers.h, as forward/backward pairs that reach the device only
 * through the backend table (src/backend/backend.h, the "BERT ops" members). Same conventions as
 * layers.h: row-major float32; T = B·L tokens; H hidden; parameter gradients ACCUMULATE (+=) so
 * micro-batches add up; activation gradients are overwritten unless a function says it accumulates.
 * Every reduction (dgamma, dbeta, embedding and bias gradients, loss statistics) is summed in an order
 * fixed by the shapes alone, so results are bit-identical for any OpenMP thread count.
 *
 * How the BERT model composes them (post-LN encoder, NVIDIA/HetSeq BertForPreTraining):
 *   embeddings   h = LN(word[ids] + position[arange(L)] + token_type[segment]) → dropout
 *                  hs_embedding_forward (accumulate 0, then 1), hs_position_embedding_forward,
 *                  hs_layernorm_forward, hs_dropout_forward (layers.h)
 *   layer ×N     ctx = hs_attention_forward(h)                  (Q,K,V projections inside)
 *                a = hs_linear_forward(ctx; attention.output.dense) → dropout
 *                h1 = hs_add_layernorm_forward(a, h)            (LN(a + h), the sum kept for backward)
 *                u = hs_linear_forward(h1; intermediate.dense) without bias, then
 *                g = hs_bias_gelu_forward(u += bias)            (fused bias + exact-erf GELU)
 *                o = hs_linear_forward(g; output.dense) → dropout
 *                h = hs_add_layernorm_forward(o, h1)
 *   pooler       p = tanh(W·h[:,0] + b): hs_gather_rows_forward (rows b·L), hs_linear_forward, hs_tanh_forward
 *   MLM head     hm = hs_gather_rows_forward(h, masked positions) → linear → bias+GELU → LN
 *                logits[Np,V] = hm·Wembᵀ + cls.predictions.bias: the TIED decoder is just
 *                hs_linear_forward(logits, hm, word_embeddings.weight, cls.predictions.bias, Np, H, V),
 *                and hs_linear_backward(.., dw = grad of word_embeddings.weight, ..) adds dlogitsᵀ·hm into
 *                the word-embedding gradient (which the embedding scatter-add also adds into).
 *   losses       hs_softmax_xent_forward on [Np,V] (MLM) and [B,2] (NSP).
 * Backward runs the same list in reverse. Where two paths meet (the residual into an add+LN, the
 * encoder output read by the pooler and the MLM gather), gradients are added: hs_attention_backward
 * can accumulate into dx, hs_gather_rows_backward always accumulates (zero its dx first). */
#ifndef HS_NN_BERT_LAYERS_H
#define HS_NN_BERT_LAYERS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "nn/layers.h"

/* ---- embedding lookup (nn.Embedding, table[V,H], no padding_idx) ------------------------------------ */
/* y[T,H] = table[ids[t],:] (accumulate = 0) or y[T,H] += table[ids[t],:] (accumulate = 1), so the
 * word, position and token-type embeddings are summed in place. ids are device int32; an id outside
 * [0, vocab) never reaches here: ids are checked on the host while the batch is staged. */
void hs_embedding_forward(const hs_backend *be, float *y, const float *table, const int32_t *ids, int tokens,
                          int hidden, int vocab, int accumulate);
/* dtable[V,H] += Σ_{t: ids[t]=v} dy[t,:]  (scatter-add; tokens are added in token order per column) */
void hs_embedding_backward(const hs_backend *be, float *dtable, const float *dy, const int32_t *ids, int tokens,
                           int hidden, int vocab);

/* ---- position embedding (position ids = arange(L) in every sequence) --------------------------------- */
/* y[B,L,H] += table[0:L, H] */
void hs_position_embedding_forward(const hs_backend *be, float *y, const float *table, int batch, int seq_len,
                                   int hidden);
/* dtable[0:L, H] += Σ_b dy[b,L,H] */
void hs_position_embedding_backward(const hs_backend *be, float *dtable, const float *dy, int batch, int seq_len,
                                    int hidden);

/* ---- LayerNorm (TF style, BertLayerNorm: biased variance, eps inside the sqrt; BERT uses 1e-12) ------- */
#define HS_BERT_LAYERNORM_EPS 1e-12f
/* y[R,C] = gamma[C] · (x - mean) · rstd + beta[C],  mean[R] = mean(x), rstd[R] = 1/sqrt(var(x) + eps).
 * mean and rstd are kept for the backward pass (R floats each). y must not alias x. */
void hs_layernorm_forward(const hs_backend *be, float *y, float *mean, float *rstd, const float *x,
                          const float *gamma, const float *beta, int rows, int cols, float eps);
/* Residual add fused into the LayerNorm (post-LN BERT: LN(sublayer_out + residual)):
 * x_sum[R,C] = a + residual (kept: it is the x of hs_layernorm_backward; x_sum may alias a or residual),
 * then y = LayerNorm(x_sum) as above. y must not alias a, residual or x_sum. */
void hs_add_layernorm_forward(const hs_backend *be, float *y, float *x_sum, float *mean, float *rstd,
                              const float *a, const float *residual, const float *gamma, const float *beta,
                              int rows, int cols, float eps);
/* With x̂ = (x - mean)·rstd and g = dy·gamma:
 *   dx[R,C] = rstd · (g - mean_C(g) - x̂ · mean_C(g·x̂))   (overwritten; dx may alias dy)
 *   dgamma[C] += Σ_R dy·x̂,  dbeta[C] += Σ_R dy
 * x is the LayerNorm input (x_sum of the fused form). For the fused form, dx is the gradient of both
 * a and residual. */
void hs_layernorm_backward(const hs_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy,
                           const float *x, const float *mean, const float *rstd, const float *gamma, int rows,
                           int cols);

/* ---- GELU, exact erf form ---------------------------------------------------------------------------- */
/* gelu(x) = 0.5·x·(1 + erf(x/√2)): NVIDIA's run_pretraining.py trains with torch.nn.functional.gelu
 * (exact erf, 1/√2 in full precision), not modeling.py's x/1.41421 helper. erf is evaluated by a
 * vectorisable formula (kernels/math/fast_exp_erf.h) accurate to 2.5e-7 absolute.
 * y[n] = gelu(x[n]); y must not alias x (the backward needs x). */
void hs_gelu_forward(const hs_backend *be, float *y, const float *x, size_t count);
/* Fused bias + GELU (BertIntermediate's LinearActivation): x[R,C] += bias[C] in place (x becomes the
 * pre-activation the backward needs), y[R,C] = gelu(x). Use after a bias-less GEMM. */
void hs_bias_gelu_forward(const hs_backend *be, float *y, float *x, const float *bias, int rows, int cols);
/* dx[n] = dy · gelu'(x),  gelu'(x) = Φ(x) + x·φ(x); x is the pre-activation; dx may alias dy. For the
 * fused form the bias gradient is then be->bias_grad(be, dbias, dx, rows, cols). */
void hs_gelu_backward(const hs_backend *be, float *dx, const float *dy, const float *x, size_t count);

/* ---- tanh (the pooler's activation) ------------------------------------------------------------------- */
/* y[n] = tanh(x[n]); in place allowed */
void hs_tanh_forward(const hs_backend *be, float *y, const float *x, size_t count);
/* dx[n] = dy · (1 - y²) from the forward OUTPUT y; in place (dx == dy) allowed */
void hs_tanh_backward(const hs_backend *be, float *dx, const float *dy, const float *y, size_t count);

/* ---- gather rows (pooler's token 0, the MLM head's masked positions) ---------------------------------- */
/* y[N,C] = x[row_index[i], :]; row_index is device int32 into x's rows [0, x_rows) (the
 * caller guarantees it: the model builds the row indices itself from staged, checked positions) */
void hs_gather_rows_forward(const hs_backend *be, float *y, const float *x, const int32_t *row_index, int count,
                            int cols, int x_rows);
/* dx[row_index[i], :] += dy[i, :]  (ACCUMULATES into dx[x_rows,C]; repeated indices add up, in index order) */
void hs_gather_rows_backward(const hs_backend *be, float *dx, const float *dy, const int32_t *row_index, int count,
                             int cols, int x_rows);

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
} hs_attention_grads;
/* What the forward pass keeps for the backward pass (model-owned device buffers, sizes below). */
typedef struct hs_attention_saved {
    float *qkv;   /* [B,L,3H]: per token q | k | v, head h at columns h·d..(h+1)·d of each third */
    float *probs; /* [B,heads,L,L]: softmax probabilities BEFORE attention dropout; with dropout on, a
                   * dropped one is stored negated (sign bit set), which is how the backward pass knows
                   * the mask without a mask buffer: use fabsf to read a probability */
} hs_attention_saved;
size_t hs_attention_qkv_floats(const hs_attention_dims *d);   /* B·L·3H */
size_t hs_attention_probs_floats(const hs_attention_dims *d); /* B·heads·L·L */

/* mask_bias[B,L] = (1 - input_mask)·(-10000): BERT's extended attention mask, computed once per batch
 * and shared by every layer. input_mask is device int32 [B,L] (1 = real token, 0 = padding). */
void hs_attention_mask_bias(const hs_backend *be, float *mask_bias, const int32_t *input_mask, int batch,
                            int seq_len);

/* ctx[B,L,H] = merge_heads(dropout(softmax(Q·Kᵀ/√d + mask_bias)) · V),  Q,K,V = x·Wᵀ + b split into heads.
 * x[B,L,H]; mask_bias[B,L] is broadcast over heads and query positions. The attention-probability
 * dropout uses drop->p and drop->key (drop->group is ignored): probability (h,i,j) of sample b is kept
 * iff hs_uniform(key, first_sample + b, (h·L + i)·L + j) >= p and then scaled by 1/(1-p); p = 0 (or
 * drop == NULL) is no dropout. The output projection (attention.output.dense) is NOT included: it is a
 * plain hs_linear_forward on ctx done by the model. ctx must not alias x. */
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
void hs_softmax_xent_forward(const hs_backend *be, float *probs, const float *logits, const int32_t *labels,
                             int rows, int classes, double *stats);
/* dlogits[R,C] = scale · (probs - onehot(label)), 0 for ignored rows: the gradient of scale · Σ NLL
 * (scale = 1/count for the mean). dlogits may alias probs. */
void hs_softmax_xent_backward(const hs_backend *be, float *dlogits, const float *probs, const int32_t *labels,
                              int rows, int classes, float scale);

#endif
