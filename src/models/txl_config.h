/* The Transformer-XL model's shape and its segment settings: the `txl` group of the experiment file,
 * with NVIDIA's train.py names and defaults (DeepLearningExamples, Transformer-XL/pytorch), the model
 * being MemTransformerLM with attn_type 0 (relative positional encodings with learnable global biases). */
#ifndef HS_MODELS_TXL_CONFIG_H
#define HS_MODELS_TXL_CONFIG_H

#include "config.h"

/* Most cutoffs an adaptive softmax may have (WikiText-103: 3; One Billion Words: 3). */
#define HS_TXL_MAX_CUTOFFS 8

typedef struct hs_txl_config {
    int n_token;                 /* vocabulary: every token id of the data is below this */
    int n_layer, n_head, d_head; /* decoder layers; attention heads of d_head columns each */
    int d_model, d_inner;        /* hidden width; width of the position-wise feed-forward layer */
    int d_embed;                 /* width of the (cluster 0) embedding; = d_model unless given */
    double dropout, dropatt;     /* residual/embedding dropout; attention-probability dropout */
    int tgt_len, mem_len, ext_len; /* training segment, memory length; ext_len is always 0 */
    int clamp_len;               /* relative distances above this use this one; <= 0 = no clamping */
    int same_length;             /* every query attends to the same number of keys (training) */
    int eval_tgt_len, eval_mem_len, eval_clamp_len, eval_same_length; /* resolved (no -1 left) */
    int pre_lnorm;               /* LayerNorm before each sub-layer instead of after the residual sum */
    int adaptive;                /* adaptive input and softmax with `cutoffs`; 0 = one full softmax */
    int n_cutoffs;               /* cutoffs used (0 when !adaptive) */
    int cutoffs[HS_TXL_MAX_CUTOFFS];
    int div_val;                 /* cluster i embeds in d_embed / div_val^i columns */
    int tie_weight;              /* output weights = the input embedding tables */
    int tie_projs;               /* tail projections of the softmax = the embedding's ([False] + [True]·n) */
    int batch_size, eval_batch_size; /* GLOBAL columns the token stream is cut into */
    int varlen;                  /* NVIDIA's variable-length training segments */
    double init_std, proj_init_std;
    char attention[12];          /* the experiment's `attention`: "auto" ("" too), "fused" or "unfused" */
} hs_txl_config;

/* The experiment file's txl.* keys as given (n_token 0: from the data), eval defaults resolved;
 * n_token_origin[origin_len] gets where txl.n_token was set (for hs_txl_config_resolve's message). */
void hs_txl_config_read(const hs_config *cfg, hs_txl_config *out, char *n_token_origin, int origin_len);
/* Against the data: data_vocab is the vocabulary size of the data (lm.h5's vocab_size); txl.n_token = 0
 * takes it; a different non-zero txl.n_token is an error naming both. Then checks every combination
 * (ext_len 0, cutoffs increasing and below n_token, div_val dividing d_embed, eval lengths); errors end
 * every rank with a message naming the key. */
void hs_txl_config_resolve(hs_txl_config *c, int data_vocab, const char *n_token_origin);
/* Both (the reference drivers, which build a model from a config alone). */
void hs_txl_config_load(const hs_config *cfg, int data_vocab, hs_txl_config *out);

/* The checks alone (tests build configs by hand). */
void hs_txl_config_check(const hs_txl_config *c);

#endif
