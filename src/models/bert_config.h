/* The BERT model's shape: Google's bert_config.json (the 11 keys NVIDIA's BertConfig reads) or the
 * same keys under `model.` in the experiment file, plus hetseq's vocabulary padding. */
#ifndef HS_MODELS_BERT_CONFIG_H
#define HS_MODELS_BERT_CONFIG_H

#include "config.h"

#define HS_BERT_ACT_MAX 16

typedef struct hs_bert_config {
    int vocab_size;        /* WordPiece tokens: every token id of the data is below this */
    int padded_vocab_size; /* rows of the word embedding and the tied decoder: vocab_size rounded up to
                            * model.pad_vocab_to_multiple_of (NVIDIA: 30522 -> 30528); the extra rows are
                            * ordinary parameters whose logits take part in the MLM softmax */
    int hidden_size, num_hidden_layers, num_attention_heads, intermediate_size;
    int max_position_embeddings, type_vocab_size;
    double hidden_dropout_prob, attention_probs_dropout_prob, initializer_range;
    char hidden_act[HS_BERT_ACT_MAX]; /* "gelu" (the only activation hetseq implements) */
    int from_file;         /* hs_bert_config_load: 1 if the shape came from model.config_file (for messages) */
    char attention[HS_BERT_ACT_MAX]; /* the experiment file's `attention`: "auto" | "fused" | "unfused"
                                      * (hs_attention_fused decides per backend) */
} hs_bert_config;

/* NVIDIA's BertConfig defaults (BERT-base with Google's uncased vocabulary). */
void hs_bert_config_defaults(hs_bert_config *c);

/* From the experiment file: model.config_file when it is set (a bert_config.json, read with json-c),
 * else the model.* keys; then model.pad_vocab_to_multiple_of. Checks the result. Every rank reads the
 * same file, so an error ends every rank with one message naming the file or key. */
void hs_bert_config_load(const hs_config *cfg, hs_bert_config *out);

/* A bert_config.json: a JSON object; the 11 keys override the defaults, keys it lacks keep them,
 * unknown keys are accepted (NVIDIA's from_dict copies every key). A key of the wrong JSON type or a
 * file that is not JSON is an error naming the file and key. Does not pad or check. */
void hs_bert_config_read_json(const char *path, hs_bert_config *out);

/* vocab rounded up to a multiple of `multiple` (0 or 1: unchanged). */
int hs_bert_padded_vocab(int vocab, int multiple);

/* The consistency checks (hidden_size % num_attention_heads == 0, positive sizes, dropout in [0,1),
 * hidden_act "gelu"); `where` prefixes the message ("bert_config.json x: " or "") and `key_prefix`
 * names the keys ("" or "model."). */
void hs_bert_config_check(const hs_bert_config *c, const char *where, const char *key_prefix);

#endif
