/* The BERT pre-training task: NVIDIA-format HDF5 shards (masked LM + next sentence prediction) and
 * NVIDIA's BertForPreTraining. The loss is the mean MLM cross-entropy over the labelled tokens plus the
 * mean NSP cross-entropy over the sentences, both means taken over the whole update (all ranks and
 * micro-batches): term 0 counts labelled tokens, term 1 sentences.
 * Host micro-batch layout: the hs_bert_batch view of bert_shards.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/bert_shards.h"
#include "models/bert.h"
#include "tasks/model_flops.h"
#include "tasks/task.h"
#include "util/check.h"
#include "util/log.h"

typedef struct bert_task {
    hs_bert_shards *shards[2]; /* [HS_SPLIT_TRAIN], [HS_SPLIT_VALID] */
    hs_bert *model;
    hs_bert_config cfg;
    const hs_backend *be;
    int max_batch, seq_len, max_pred;
    hs_input_sets staged; /* the stage hook's sets; data: hs_bert_inputs */
} bert_task;

/* extra[] (models/bert.h: the NSP term is in loss_sum, sample_count, correct) */
static const char *const bert_stat_names[] = {"mlm_loss_sum", "mlm_count", "mlm_correct", NULL};

static int64_t bert_num_samples(hs_task *t, hs_split split) {
    bert_task *b = t->impl;
    return hs_bert_shards_num_samples(b->shards[split]);
}

static size_t bert_batch_bytes(hs_task *t, int max_count) {
    bert_task *b = t->impl;
    return hs_bert_batch_bytes(max_count, b->seq_len, b->max_pred);
}

/* Token ids are checked against the configured vocabulary (not the padded one): an id the tokenizer
 * cannot produce means the data and model.vocab_size do not belong together. */
static void bert_read_batch(hs_task *t, hs_split split, int64_t first, int count, void *host_buf) {
    bert_task *b = t->impl;
    hs_bert_shards_read(b->shards[split], first, count, b->cfg.vocab_size, host_buf);
}

static const hs_bert_batch *batch_of(const void *host_buf, int count) {
    const hs_bert_batch *batch = host_buf;
    if (batch->count != count)
        HS_FATAL(NULL, "BERT host micro-batch holds %d rows, the caller says %d", batch->count, count);
    return batch;
}

static void bert_batch_norm_counts(hs_task *t, const void *host_buf, int count, double counts[HS_NORM_TERMS]) {
    (void)t;
    const hs_bert_batch *batch = batch_of(host_buf, count);
    double labelled = 0;
    for (int i = 0; i < count; i++) labelled += batch->num_mlm[i];
    counts[0] = labelled; /* MLM: mean over labelled tokens */
    counts[1] = count;    /* NSP: mean over sentences */
}

static void *bert_inputs_create(void *owner) { return hs_bert_inputs_create(((bert_task *)owner)->model); }
static void bert_inputs_destroy(void *owner, void *data) { hs_bert_inputs_free(((bert_task *)owner)->model, data); }

static void bert_stage(hs_task *t, const void *host_buf, int count, int micro_index, int parity) {
    bert_task *b = t->impl;
    hs_input_set *set = hs_input_sets_begin(&b->staged, parity, micro_index);
    hs_bert_stage_batch_async(b->model, batch_of(host_buf, count), set->data);
    hs_input_sets_end(&b->staged, set, host_buf, count);
}

static void bert_forward_backward(hs_task *t, const void *host_buf, int64_t first, int count, const hs_step_ctx *ctx,
                                  double *stats) {
    bert_task *b = t->impl;
    hs_input_set *set = hs_input_sets_take(&b->staged, host_buf, count);
    if (set) {
        hs_bert_take_inputs(b->model, set->data);
        hs_input_sets_done(&b->staged, set);
    } else {
        hs_bert_stage_batch(b->model, batch_of(host_buf, count));
    }
    hs_bert_forward_backward(b->model, first, ctx, stats);
}

static void bert_evaluate(hs_task *t, const void *host_buf, int64_t first, int count, double *stats) {
    (void)first;
    bert_task *b = t->impl;
    hs_bert_stage_batch(b->model, batch_of(host_buf, count));
    hs_bert_evaluate(b->model, stats);
}

static void bert_init_params(hs_task *t, uint64_t seed) {
    bert_task *b = t->impl;
    hs_bert_init_params(b->model, seed);
}

/* The BERT statistics of models/bert.h by name. */
typedef struct bert_sums {
    double mlm_loss, mlm_count, mlm_correct, nsp_loss, sentences, nsp_correct;
} bert_sums;

static bert_sums sums_of(const hs_stats *s) {
    double v[HS_STATS_NDOUBLE];
    memcpy(v, s, sizeof v);
    return (bert_sums){.mlm_loss = v[HS_BERT_STAT_MLM_LOSS], .mlm_count = v[HS_BERT_STAT_MLM_COUNT],
                       .mlm_correct = v[HS_BERT_STAT_MLM_CORRECT], .nsp_loss = v[HS_BERT_STAT_NSP_LOSS],
                       .sentences = v[HS_BERT_STAT_SENTENCES], .nsp_correct = v[HS_BERT_STAT_NSP_CORRECT]};
}

/* loss = mean MLM NLL over labelled tokens + mean NSP NLL over sentences (nats) */
static double bert_loss_from_stats(const hs_stats *s) {
    const bert_sums b = sums_of(s);
    const double mlm = b.mlm_count > 0 ? b.mlm_loss / b.mlm_count : 0.0;
    const double nsp = b.sentences > 0 ? b.nsp_loss / b.sentences : 0.0;
    return mlm + nsp;
}

static void bert_format_stats(const hs_stats *s, int json, char *buf, size_t n) {
    const bert_sums b = sums_of(s);
    const double mlm_loss = b.mlm_count > 0 ? b.mlm_loss / b.mlm_count : 0.0;
    const double mlm_acc = b.mlm_count > 0 ? b.mlm_correct / b.mlm_count : 0.0;
    const double nsp_loss = b.sentences > 0 ? b.nsp_loss / b.sentences : 0.0;
    const double nsp_acc = b.sentences > 0 ? b.nsp_correct / b.sentences : 0.0;
    if (json)
        snprintf(buf, n, ", \"mlm_loss\": %.6f, \"nsp_loss\": %.6f, \"mlm_acc\": %.6f, \"nsp_acc\": %.6f", mlm_loss,
                 nsp_loss, mlm_acc, nsp_acc);
    else
        snprintf(buf, n, ", mlm_loss=%.4f, nsp_loss=%.4f, mlm_acc=%.4f, nsp_acc=%.4f", mlm_loss, nsp_loss, mlm_acc,
                 nsp_acc);
}

static double bert_flops_per_sample(hs_task *t) {
    const bert_task *b = t->impl;
    return hs_bert_train_flops_per_sequence(b->cfg.num_hidden_layers, b->cfg.hidden_size, b->cfg.intermediate_size,
                                            b->cfg.padded_vocab_size, b->seq_len, b->max_pred);
}

static void bert_destroy(hs_task *t) {
    bert_task *b = t->impl;
    hs_input_sets_free(&b->staged);
    hs_bert_free(b->model);
    hs_params_free(&t->params);
    hs_bert_shards_close(b->shards[HS_SPLIT_TRAIN]);
    hs_bert_shards_close(b->shards[HS_SPLIT_VALID]);
    free(b);
    free(t);
}

hs_task *hs_bert_task_create(const hs_task_settings *s, const hs_comm *comm, const hs_backend *be) {
    const char *path = s->data_path;
    if (!*path)
        hs_die_all("data.path is empty: set it to a directory of NVIDIA BERT shards (*.hdf5 from "
                   "create_pretraining_data.py) or to one shard file");
    const char *train_subset = s->train_subset, *valid_subset = s->valid_subset;
    const int num_file = s->num_file;

    hs_task *t;
    bert_task *b;
    HS_ALLOC(t, 1);
    HS_ALLOC(b, 1);
    t->name = "bert";
    t->impl = b;
    b->be = be;
    b->max_batch = s->max_sentences;
    b->cfg = s->bert;

    b->shards[HS_SPLIT_TRAIN] = hs_bert_shards_open(path, train_subset, num_file, comm->io);
    b->shards[HS_SPLIT_VALID] = hs_bert_shards_open(path, valid_subset, num_file, comm->io);
    b->seq_len = hs_bert_shards_seq_len(b->shards[HS_SPLIT_TRAIN]);
    b->max_pred = hs_bert_shards_max_pred(b->shards[HS_SPLIT_TRAIN]);
    const int valid_len = hs_bert_shards_seq_len(b->shards[HS_SPLIT_VALID]);
    const int valid_pred = hs_bert_shards_max_pred(b->shards[HS_SPLIT_VALID]);
    if (valid_len != b->seq_len || valid_pred != b->max_pred)
        hs_die_all("the training shards (data.train_subset = \"%s\", e.g. %s) have max_seq_length %d and "
                   "max_predictions_per_seq %d but the validation shards (data.valid_subset = \"%s\", e.g. %s) have %d "
                   "and %d: validate on shards made with the same settings",
                   train_subset, hs_bert_shards_file_path(b->shards[HS_SPLIT_TRAIN], 0), b->seq_len, b->max_pred,
                   valid_subset, hs_bert_shards_file_path(b->shards[HS_SPLIT_VALID], 0), valid_len, valid_pred);
    if (b->seq_len > b->cfg.max_position_embeddings)
        hs_die_all("the shards in %s hold sequences of %d tokens but the model has max_position_embeddings = %d: "
                   "use a model with max_position_embeddings >= %d (%s)",
                   path, b->seq_len, b->cfg.max_position_embeddings, b->seq_len,
                   b->cfg.from_file ? "in model.config_file" : "model.max_position_embeddings");

    b->model = hs_bert_create(&t->params, &b->cfg, b->max_batch, b->seq_len, b->max_pred);
    hs_params_allocate(&t->params, be);
    hs_bert_setup(b->model);
    const int fused = hs_bert_attention_fused(b->model);
    hs_log("| activations: %.1f MB for a micro-batch of %d x %d tokens, %s; attention %s",
           hs_bert_activation_bytes(b->model) / 1e6, b->max_batch, b->seq_len,
           hs_bert_activations_16bit(b->model)
               ? (fused ? "q|k|v, context, FFN pre-activation, layer input and h1 kept in 16 bits, GELU output "
                          "recomputed (docs/gpu.md)"
                        : "q|k|v, attention probabilities, context, FFN pre-activation, layer input and h1 kept in "
                          "16 bits, GELU output recomputed (docs/gpu.md)")
               : "kept in fp32",
           fused ? "fused (row log-sum-exp kept, no L x L probabilities)" : "unfused (L x L probabilities kept)");

    t->num_samples = bert_num_samples;
    t->batch_bytes = bert_batch_bytes;
    t->read_batch = bert_read_batch;
    t->batch_norm_counts = bert_batch_norm_counts;
    t->forward_backward = bert_forward_backward;
    t->stage = bert_stage;
    b->staged = (hs_input_sets){.be = be, .owner = b, .create = bert_inputs_create, .destroy = bert_inputs_destroy};
    t->evaluate = bert_evaluate;
    t->init_params = bert_init_params;
    t->extra_stat_names = bert_stat_names;
    t->loss_from_stats = bert_loss_from_stats;
    t->format_stats = bert_format_stats;
    t->tokens_per_sample = b->seq_len;
    t->has_test_split = 0; /* one validation set: data.valid_subset (point it at test shards to test) */
    t->flops_per_sample = bert_flops_per_sample;
    t->destroy = bert_destroy;
    return t;
}
