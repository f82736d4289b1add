/* NVIDIA's BertForPreTraining (the model HetSeq trains): post-LN BERT encoder, tanh pooler, masked-LM
 * head with the decoder tied to the word embeddings, next-sentence head. Composition of the layers in
 * src/nn/layers.h (bert.c's top comment gives the data flow); the MLM head runs only on the labelled
 * positions (same loss as NVIDIA's all-positions head, L/P times less work).
 *
 * Parameters (PyTorch state_dict names of NVIDIA's BertForPreTraining; V = padded vocabulary, H hidden,
 * I intermediate, Lp max_position_embeddings, Tt type_vocab_size), declared in this order:
 *   bert.embeddings.word_embeddings.weight[V,H]      (also the MLM decoder: NVIDIA's
 *                                                     cls.predictions.decoder.weight is this tensor)
 *   bert.embeddings.position_embeddings.weight[Lp,H]  bert.embeddings.token_type_embeddings.weight[Tt,H]
 *   bert.embeddings.LayerNorm.{weight,bias}[H]
 *   for i in 0..N-1, prefix bert.encoder.layer.{i}.:
 *     attention.self.{query,key,value}.weight[H,H]   (the three one after the other: one [3H,H] GEMM)
 *     attention.self.{query,key,value}.bias[H]
 *     attention.output.dense.{weight[H,H],bias[H]}   attention.output.LayerNorm.{weight,bias}[H]
 *     intermediate.dense_act.{weight[I,H],bias[I]}   output.dense.{weight[H,I],bias[H]}
 *     output.LayerNorm.{weight,bias}[H]
 *   bert.pooler.dense_act.{weight[H,H],bias[H]}
 *   cls.predictions.bias[V]
 *   cls.predictions.transform.dense_act.{weight[H,H],bias[H]}  cls.predictions.transform.LayerNorm.{weight,bias}[H]
 *   cls.seq_relationship.{weight[2,H],bias[2]}
 * Weight decay flag 0 for names containing "bias", "LayerNorm", "gamma" or "beta", 1 otherwise. */
#ifndef HS_MODELS_BERT_H
#define HS_MODELS_BERT_H

#include <stddef.h>
#include <stdint.h>

#include "data/bert_shards.h"
#include "models/bert_config.h"
#include "nn/params.h"
#include "nn/step_ctx_stats.h"

/* What forward passes add to the stats (sums over the micro-batch, hs_stats layout): the sentence-level
 * NSP term in the first three slots, the token-level MLM term in extra[]. */
enum {
    HS_BERT_STAT_NSP_LOSS = HS_STAT_LOSS_SUM,      /* Σ NSP NLL over sentences (loss_sum) */
    HS_BERT_STAT_SENTENCES = HS_STAT_SAMPLE_COUNT, /* sentences (sample_count) */
    HS_BERT_STAT_NSP_CORRECT = HS_STAT_CORRECT,    /* sentences whose NSP argmax is the label (correct) */
    HS_BERT_STAT_MLM_LOSS = HS_STAT_EXTRA0,        /* Σ MLM NLL (nats) over labelled tokens (extra[0]) */
    HS_BERT_STAT_MLM_COUNT,                        /* labelled tokens (extra[1]) */
    HS_BERT_STAT_MLM_CORRECT,                      /* labelled tokens whose argmax is the label (extra[2]) */
};

typedef struct hs_bert hs_bert;

/* Declares the parameters into `params` (before hs_params_allocate) and sizes every buffer for
 * micro-batches of up to max_batch sequences of up to max_seq_len tokens (<= max_position_embeddings)
 * with up to max_pred labelled positions each. */
hs_bert *hs_bert_create(hs_params *params, const hs_bert_config *cfg, int max_batch, int max_seq_len, int max_pred);
/* After hs_params_allocate: activation buffers on the params' backend. */
void hs_bert_setup(hs_bert *m);
/* NVIDIA's initialisation, deterministic from seed (one counter-RNG stream per tensor):
 * N(0, initializer_range) for the embeddings and nn.Linear weights (Q, K, V, attention.output.dense,
 * output.dense, cls.seq_relationship), zero biases, LayerNorm 1/0, cls.predictions.bias 0; the three
 * LinearActivation layers (intermediate, pooler, MLM transform) keep PyTorch's default
 * U(±1/sqrt(fan_in)) for weight and bias — and, as NVIDIA deep-copies one encoder layer, every layer's
 * intermediate.dense_act starts from the same values. */
void hs_bert_init_params(hs_bert *m, uint64_t seed);

/* Checks a host micro-batch (bert_shards.h view; count <= max_batch, seq_len <= max_seq_len,
 * max_pred <= the model's; token ids < vocab, segments < type_vocab, positions < L, labels in range:
 * a bad value ends the run with a message naming it) and uploads it into the model's device inputs,
 * with the labelled positions flattened to rows b·L + position in batch order (on a backend that
 * records graph regions, CUDA, padded to count·max_pred rows the loss ignores, so a micro-batch size
 * has one set of shapes: docs/gpu.md, "CUDA graphs"). Returns the number of labelled tokens. */
int hs_bert_stage_batch(hs_bert *m, const hs_bert_batch *batch);

/* Asynchronous staging (tasks/task.h, stage): a second set of device inputs with its own derived host
 * arrays (staging memory). hs_bert_stage_batch_async makes the same checks (and messages) as
 * hs_bert_stage_batch and ENQUEUES the uploads on the copy stream (be->upload_async) into `in`; the
 * caller orders them with events (tasks/input_sets.c) and keeps batch's arrays and in unchanged until
 * they ran. hs_bert_take_inputs ENQUEUES on the compute stream the copies of `in` into the model's inputs
 * (after the caller made it wait for the uploads): afterwards the model computes exactly as after
 * hs_bert_stage_batch, and `in` is read by nothing enqueued later. Returns / takes the labelled-token
 * count like hs_bert_stage_batch. */
typedef struct hs_bert_inputs hs_bert_inputs;
hs_bert_inputs *hs_bert_inputs_create(const hs_bert *m);
void hs_bert_inputs_free(const hs_bert *m, hs_bert_inputs *in);
int hs_bert_stage_batch_async(const hs_bert *m, const hs_bert_batch *batch, hs_bert_inputs *in);
void hs_bert_take_inputs(hs_bert *m, const hs_bert_inputs *in);

/* Forward + backward of the staged micro-batch. Accumulates into params->grad the gradient of
 *   ctx->loss_scale[0] · Σ MLM NLL (labelled tokens) + ctx->loss_scale[1] · Σ NSP NLL (sentences);
 * adds the HS_BERT_STAT_* sums into the device stats (float64, hs_stats layout).
 * Dropout masks are keyed by (ctx->seed, ctx->update, dropout site) and the global sample index
 * first_sample + b, so they do not depend on how samples are spread over ranks; ctx->training = 0
 * turns dropout off. */
void hs_bert_forward_backward(hs_bert *m, int64_t first_sample, const hs_step_ctx *ctx, double *stats);
/* Bytes of the device buffers that hold the activations of a micro-batch of the sizes given to
 * hs_bert_create (what the forward writes and the backward reads, the 16-bit copies and the fp32
 * working set included; not the backward's gradient scratch). Under precision bf16 | fp16 each
 * encoder layer keeps q|k|v [T,3H], the attention probabilities [B,heads,L,L] (unfused attention only), the
 * context [T,H], the FFN pre-activation and GELU output [T,I] in 16 bits and shares one fp32 working set of them;
 * HETSEQ_ACTIVATION_STORAGE=fp32 (read by hs_bert_setup) keeps fp32 storage, as fp32 and tf32 do. */
size_t hs_bert_activation_bytes(const hs_bert *m);
/* 1 if the layers keep those tensors in 16 bits, 0 for fp32 storage. */
int hs_bert_activations_16bit(const hs_bert *m);
/* 1 if the attention is fused (the experiment file's `attention` on this backend, hs_attention_fused):
 * each layer keeps its row log-sum-exp [B,heads,L] (fp32) instead of the probabilities [B,heads,L,L]. */
int hs_bert_attention_fused(const hs_bert *m);
/* For tests: the tensor `which` that layer `layer` kept for its backward pass in the last
 * hs_bert_forward_backward, as fp32 into host[] (the 16-bit copy widened under 16-bit storage); returns
 * the element count (for the staged micro-batch's B, L; 0 for the probabilities when the attention is
 * fused, and for the GELU output under 16-bit storage, which the backward recomputes: none are kept).
 * Waits for the device. */
enum {
    HS_BERT_SAVED_QKV,
    HS_BERT_SAVED_PROBS,
    HS_BERT_SAVED_CTX,
    HS_BERT_SAVED_FFN_PRE,
    HS_BERT_SAVED_FFN_ACT,
    HS_BERT_SAVED_INPUT,   /* the layer's input hidden[i] */
    HS_BERT_SAVED_ATTN_OUT /* h1, the first LayerNorm's output */
};
size_t hs_bert_saved_tensor(const hs_bert *m, int layer, int which, float *host);
/* Forward only, no dropout, into the device stats. */
void hs_bert_evaluate(hs_bert *m, double *stats);
void hs_bert_free(hs_bert *m);

#endif
