/* NVIDIA's Transformer-XL language model (MemTransformerLM, attn_type 0: "RelPartialLearnable"),
 * composed from the layers of src/nn (txl.c's top comment gives the data flow), with the segment
 * memories of the columns a rank owns kept on the device (hs_txl_memory).
 *
 * Parameters (PyTorch state_dict names of NVIDIA's MemTransformerLM; n = n_head, d = d_head,
 * D = d_model, I = d_inner, e_i / d_i the clusters of nn/adaptive.h), declared in this order:
 *   word_emb.emb_layers.{i}.weight[size_i, d_i]   (div_val = 1: one, [n_token, d_embed]); also the
 *                                                 softmax's output weights when tie_weight
 *   word_emb.emb_projs.{i}[D, d_i]                (div_val > 1, or d_embed != D: one); NVIDIA's
 *                                                 crit.shared_out_projs.{i} is the same tensor
 *   r_w_bias[n, d]  r_r_bias[n, d]                (shared by all layers)
 *   layers.{l}.dec_attn.qkv_net.weight[3nd, D]  .dec_attn.r_net.weight[nd, D]  .dec_attn.o_net.weight[D, nd]
 *   layers.{l}.dec_attn.layer_norm.{weight,bias}[D]
 *   layers.{l}.pos_ff.CoreNet.0.{weight[I, D], bias[I]}  .pos_ff.CoreNet.3.{weight[D, I], bias[D]}
 *   layers.{l}.pos_ff.layer_norm.{weight,bias}[D]
 *   crit.cluster_weight[n_clusters, d_embed]  crit.cluster_bias[n_clusters]   (with cutoffs)
 *   crit.out_layers_weights.{i}[size_i, d_i]     (only without tie_weight)
 *   crit.out_layers_biases.{i}[size_i]           (div_val = 1: one, [n_token])
 *   crit.out_projs.{i}[D, d_i]                   (where a projection exists and is not tied: i = 0,
 *                                                 and every i without tie_projs)
 * A checkpoint that PyTorch's load_state_dict(strict=True) reads also needs the aliases and buffers
 * listed by hs_txl_state_dict_extras. Weight decay flag 0 for biases and LayerNorm parameters. */
#ifndef HS_MODELS_TXL_H
#define HS_MODELS_TXL_H

#include <stddef.h>
#include <stdint.h>

#include "models/txl_config.h"
#include "nn/params.h"
#include "nn/step_ctx_stats.h"

/* Stats of the tail clusters (the head's NLL is in loss_sum, its rows in sample_count): the NLL of the
 * segment's tokens is loss_sum + extra[HS_TXL_STAT_TAIL_NLL - HS_STAT_EXTRA0]. */
enum {
    HS_TXL_STAT_TAIL_NLL = HS_STAT_EXTRA0, /* Σ tail-cluster NLL (nats) */
    HS_TXL_STAT_TAIL_ROWS,                 /* tokens whose target is in a tail cluster */
    HS_TXL_STAT_TAIL_CORRECT,              /* unused for metrics */
};

typedef struct hs_txl hs_txl;

/* The memories of `ncols` columns (a rank's slice of one split's stream): per layer l a device array
 * [ncols, mem_len, D] of the hidden states that entered layer l during the last mem_len steps of each
 * column (oldest first), and the number of valid steps per column. */
typedef struct hs_txl_memory {
    int n_layer, ncols, mem_len, d_model;
    float **mem;  /* [n_layer] device [ncols, mem_len, D] */
    int *mlen;    /* host [ncols]: valid steps (0 after reset; grows by qlen up to mem_len) */
} hs_txl_memory;
hs_txl_memory *hs_txl_memory_create(const hs_backend *be, int n_layer, int d_model, int ncols, int mem_len);
void hs_txl_memory_reset(hs_txl_memory *mem);
void hs_txl_memory_free(const hs_backend *be, hs_txl_memory *mem);

/* What a segment's pass uses besides the weights: the memory and its first column, how relative
 * distances are clamped (<= 0: not) and whether same_length masks apply. */
typedef struct hs_txl_segment {
    hs_txl_memory *mem; /* may be NULL: no memory (mem_len 0) */
    int col0;           /* first column of the micro-batch inside mem */
    int clamp_len, same_length;
} hs_txl_segment;

/* Declares the parameters (before hs_params_allocate) and sizes buffers for micro-batches of up to
 * max_batch columns of up to max_qlen tokens with up to max_mlen memory steps. */
hs_txl *hs_txl_create(hs_params *params, const hs_txl_config *cfg, int max_batch, int max_qlen, int max_mlen);
/* After hs_params_allocate: activation buffers. */
void hs_txl_setup(hs_txl *m);
/* NVIDIA's train.py weights_init (init 'normal'): Linear weights, embeddings, cluster_weight, r_w_bias,
 * r_r_bias ~ N(0, init_std); projections ~ N(0, proj_init_std); LayerNorm weight ~ N(1, init_std);
 * biases 0; untied output weights N(0, init_std). Deterministic from seed (one stream per tensor). */
void hs_txl_init_params(hs_txl *m, uint64_t seed);
const hs_txl_config *hs_txl_get_config(const hs_txl *m);

/* Checks a host micro-batch tokens[b, qlen + 1] (column s: the segment's inputs tokens[s, 0..qlen) and
 * targets tokens[s, 1..qlen]; every id in [0, n_token), else the run ends naming it) and uploads it. */
void hs_txl_stage_batch(hs_txl *m, const int32_t *tokens, int b, int qlen);
/* Asynchronous staging (tasks/task.h, stage), as hs_bert_inputs (models/bert.h): a second set of inputs;
 * hs_txl_stage_batch_async makes hs_txl_stage_batch's checks and ENQUEUES the uploads on the copy stream;
 * hs_txl_take_inputs ENQUEUES their copies into the model's inputs on the compute stream (after the
 * caller's wait), which leaves the model as hs_txl_stage_batch would. */
typedef struct hs_txl_inputs hs_txl_inputs;
hs_txl_inputs *hs_txl_inputs_create(const hs_txl *m);
void hs_txl_inputs_free(const hs_txl *m, hs_txl_inputs *in);
void hs_txl_stage_batch_async(const hs_txl *m, const int32_t *tokens, int b, int qlen, hs_txl_inputs *in);
void hs_txl_take_inputs(hs_txl *m, const hs_txl_inputs *in);

/* Forward + backward of the staged micro-batch after the memory of seg->mem's columns
 * [col0, col0 + b): accumulates the gradient of ctx->loss_scale[0] · Σ NLL into params->grad, adds the
 * NLL sums into the device stats (hs_stats layout; see HS_TXL_STAT_*), then moves the memory on
 * (the last mem_len of cat(memory, layer inputs), no gradient through it). Dropout masks are keyed by
 * (ctx->seed, ctx->update, site) and the global sample index first_sample + s (the positional
 * embedding's mask by the site alone: it is shared by the columns). */
void hs_txl_forward_backward(hs_txl *m, const hs_txl_segment *seg, int64_t first_sample, const hs_step_ctx *ctx,
                             double *stats);
/* Forward only, no dropout, into the stats; moves the memory on. */
void hs_txl_evaluate(hs_txl *m, const hs_txl_segment *seg, double *stats);
/* Bytes of the device buffers that hold a micro-batch's activations at the sizes given to hs_txl_create
 * (the embedding, hidden states, positions, every layer's kept tensors, the 16-bit copies and the fp32
 * working set; not the adaptive embedding/softmax states or the backward's gradient scratch). Under
 * precision bf16 | fp16 each layer keeps q|k|v, r, the attention probabilities, the context and the
 * FFN activation in 16 bits and shares one fp32 working set of them; HETSEQ_ACTIVATION_STORAGE=fp32
 * (read by hs_txl_setup) keeps fp32 storage, as fp32 and tf32 do. */
size_t hs_txl_activation_bytes(const hs_txl *m);
/* 1 if the layers keep those tensors in 16 bits, 0 for fp32 storage. */
int hs_txl_activations_16bit(const hs_txl *m);
/* 1 when the attention is the fused op (rel_flash_attention_*: each layer keeps the rows' log-sum-exp
 * [b, n, qlen] instead of the probabilities [b, n, qlen, klen]); from the experiment's `attention`. */
int hs_txl_attention_fused(const hs_txl *m);
void hs_txl_free(hs_txl *m);

/* What a PyTorch state_dict of this model holds besides the parameter table: alias[k] names a second
 * key for the table's tensor target[k] (crit.shared_out_projs.{i} -> word_emb.emb_projs.{i}); the
 * buffer pos_emb.inv_freq[D/2] (float32, values from hs_txl_inv_freq). Returns the alias count (at most
 * max); names point into static or model-owned storage. */
int hs_txl_state_dict_aliases(hs_txl *m, const char **alias, const char **target, int max);
/* inv_freq[D/2] = 1 / 10000^(2k/D) in float32, as NVIDIA's PositionalEmbedding. */
void hs_txl_inv_freq(int d_model, float *inv_freq);

#endif
