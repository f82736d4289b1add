/* The experiment-file schema: every key hetseq reads, with its type, default, allowed range or choices
 * and a one-line meaning. Names follow HetSeq's flags (snake_case, grouped) and bert_config.json for
 * the BERT model. docs/configuration.md documents the same table for users; keep the two in step
 * (tests/unit/test_config.c checks that every key and its default appear there).
 *
 * Ranges are inclusive unless `open` marks a bound exclusive; one-sided ranges use +-INFINITY.
 * Defaults are written as libconfig literals and parsed by the same code as `-o` overrides. */
#include "config.h"

#include <math.h>
#include <stddef.h>

#define NO_RANGE 1, 0                /* strings and booleans */
#define AT_LEAST(lo) (lo), INFINITY  /* lo <= value */
#define ANY_FINITE -INFINITY, INFINITY
#define PROB 0.0, 1.0                /* 0 <= p <= 1 */
#define UINT32_MAX_D 4294967295.0

/* clang-format off */
const hs_cfg_key hs_cfg_schema[] = {
    /* ---- top level ---------------------------------------------------------------------------- */
    {"task", HS_CFG_STRING, "\"mnist\"", NO_RANGE, "mnist|bert|txl",
     "what to train: the MNIST CNN, BERT pre-training, or Transformer-XL", 0, 0},
    {"device", HS_CFG_STRING, "\"auto\"", NO_RANGE, "auto|cpu|cuda",
     "where to compute: auto = a GPU when the node has one, else the CPU", 0, 0},
    {"precision", HS_CFG_STRING, "\"fp32\"", NO_RANGE, "fp32|bf16|fp16",
     "arithmetic precision of the model (bf16/fp16 need a GPU)", 0, 0},
    {"seed", HS_CFG_INT, "19940802", 0.0, UINT32_MAX_D, NULL,
     "seed of every random stream (initialisation, shuffling, dropout); seed + epoch must stay below 2^32",
     0, 0},

    /* ---- data --------------------------------------------------------------------------------- */
    {"data.path", HS_CFG_STRING, "\"\"", NO_RANGE, NULL,
     "an HDF5 file or a directory of shards", 0, 0},
    {"data.train_subset", HS_CFG_STRING, "\"train\"", NO_RANGE, NULL,
     "file-name substring that selects the training split", 0, 0},
    {"data.valid_subset", HS_CFG_STRING, "\"valid\"", NO_RANGE, NULL,
     "file-name substring that selects the validation split (mnist: \"valid\" and \"test\" both mean the test split)",
     0, 0},
    {"data.num_file", HS_CFG_INT, "0", 0.0, 1e9, NULL,
     "use only the first num_file files of the split; 0 = all", 0, 0},
    {"data.mean", HS_CFG_FLOAT, "0.2860", ANY_FINITE, NULL,
     "mnist: pixel mean subtracted after scaling to [0,1] (Fashion-MNIST 0.2860; MNIST 0.1307)", 0, 0},
    {"data.std", HS_CFG_FLOAT, "0.3530", 0.0, INFINITY, NULL,
     "mnist: pixel standard deviation divided out (Fashion-MNIST 0.3530; MNIST 0.3081)", HS_CFG_OPEN_MIN, 0},
    {"data.dict", HS_CFG_STRING, "\"\"", NO_RANGE, NULL,
     "bert: WordPiece vocabulary file (optional for training)", 0, 0},

    /* ---- model: BERT (bert_config.json names) --------------------------------------------------- */
    {"model.config_file", HS_CFG_STRING, "\"\"", NO_RANGE, NULL,
     "bert: read the model shape from this bert_config.json instead of the keys below", 0, 0},
    {"model.vocab_size", HS_CFG_INT, "30522", AT_LEAST(1), NULL,
     "bert: number of WordPiece tokens", 0, 0},
    {"model.hidden_size", HS_CFG_INT, "768", AT_LEAST(1), NULL,
     "bert: width of the hidden states", 0, 0},
    {"model.num_hidden_layers", HS_CFG_INT, "12", AT_LEAST(1), NULL,
     "bert: number of transformer layers", 0, 0},
    {"model.num_attention_heads", HS_CFG_INT, "12", AT_LEAST(1), NULL,
     "bert: attention heads per layer (must divide hidden_size)", 0, 0},
    {"model.intermediate_size", HS_CFG_INT, "3072", AT_LEAST(1), NULL,
     "bert: width of the feed-forward layer", 0, 0},
    {"model.hidden_act", HS_CFG_STRING, "\"gelu\"", NO_RANGE, "gelu|relu|swish|tanh",
     "bert: activation of the feed-forward layer", 0, 0},
    {"model.hidden_dropout_prob", HS_CFG_FLOAT, "0.1", PROB, NULL,
     "bert: dropout probability on embeddings and hidden states", HS_CFG_OPEN_MAX, 0},
    {"model.attention_probs_dropout_prob", HS_CFG_FLOAT, "0.1", PROB, NULL,
     "bert: dropout probability on attention weights", HS_CFG_OPEN_MAX, 0},
    {"model.max_position_embeddings", HS_CFG_INT, "512", AT_LEAST(1), NULL,
     "bert: longest sequence the position table covers", 0, 0},
    {"model.type_vocab_size", HS_CFG_INT, "2", AT_LEAST(1), NULL,
     "bert: number of segment (token type) ids", 0, 0},
    {"model.initializer_range", HS_CFG_FLOAT, "0.02", 0.0, INFINITY, NULL,
     "bert: standard deviation of the normal weight initialisation", 0, 0},
    {"model.pad_vocab_to_multiple_of", HS_CFG_INT, "8", AT_LEAST(1), NULL,
     "bert: round the embedding table up to a multiple of this (tensor-core friendly)", 0, 0},

    /* ---- model: MNIST CNN --------------------------------------------------------------------- */
    {"model.conv_dropout", HS_CFG_FLOAT, "0.25", PROB, NULL,
     "mnist: dropout probability after the convolutions", HS_CFG_OPEN_MAX, 0},
    {"model.fc_dropout", HS_CFG_FLOAT, "0.5", PROB, NULL,
     "mnist: dropout probability after the first fully connected layer", HS_CFG_OPEN_MAX, 0},

    /* ---- optimizer ---------------------------------------------------------------------------- */
    {"optimizer.name", HS_CFG_STRING, "\"adadelta\"", NO_RANGE, "adam|adamw|lamb|adadelta|sgd",
     "the update rule", 0, 0},
    {"optimizer.lr", HS_CFG_FLOAT, "1.0", AT_LEAST(0.0), NULL,
     "peak learning rate (the scheduler scales it)", 0, 0},
    {"optimizer.weight_decay", HS_CFG_FLOAT, "0.0", AT_LEAST(0.0), NULL,
     "L2 penalty (adam, adadelta, sgd) or decoupled decay (adamw, lamb)", 0, 0},
    {"optimizer.clip_norm", HS_CFG_FLOAT, "25.0", AT_LEAST(0.0), NULL,
     "clip the global gradient norm to this; 0 = no clipping (lamb: inside the step, as NVIDIA's max_grad_norm)",
     0, 0},
    {"optimizer.adam_betas", HS_CFG_FLOAT_LIST, "[0.9, 0.999]", PROB, NULL,
     "adam/adamw/lamb: decay rates [beta1, beta2] of the moment estimates", HS_CFG_OPEN_MAX, 2},
    {"optimizer.adam_eps", HS_CFG_FLOAT, "1e-8", AT_LEAST(0.0), NULL,
     "adam/adamw/lamb: epsilon added to the denominator", 0, 0},
    {"optimizer.adadelta_rho", HS_CFG_FLOAT, "0.9", PROB, NULL,
     "adadelta: decay rate of the running averages", 0, 0},
    {"optimizer.adadelta_eps", HS_CFG_FLOAT, "1e-6", AT_LEAST(0.0), NULL,
     "adadelta: epsilon inside the square roots", 0, 0},
    {"optimizer.momentum", HS_CFG_FLOAT, "0.0", PROB, NULL,
     "sgd: momentum factor; 0 = plain SGD", 0, 0},
    {"optimizer.lamb_trust_ratio_on_no_decay", HS_CFG_BOOL, "false", NO_RANGE, NULL,
     "lamb: also scale the update of tensors without weight decay (biases, LayerNorm) by the trust ratio",
     0, 0},

    /* ---- lr_scheduler ------------------------------------------------------------------------- */
    {"lr_scheduler.name", HS_CFG_STRING, "\"polynomial_decay\"", NO_RANGE,
     "polynomial_decay|poly_warmup|cosine|inverse_sqrt|constant",
     "how the learning rate changes with the update count", 0, 0},
    {"lr_scheduler.warmup_updates", HS_CFG_INT, "0", AT_LEAST(0), NULL,
     "linear warm-up over this many updates", 0, 0},
    {"lr_scheduler.warmup_proportion", HS_CFG_FLOAT, "0.0", PROB, NULL,
     "poly_warmup: warm-up length as a fraction of total_num_update", 0, 0},
    {"lr_scheduler.total_num_update", HS_CFG_INT, "1000000", AT_LEAST(1), NULL,
     "update count at which the decay reaches end_learning_rate", 0, 0},
    {"lr_scheduler.end_learning_rate", HS_CFG_FLOAT, "0.0", AT_LEAST(0.0), NULL,
     "polynomial_decay: learning rate after total_num_update updates", 0, 0},
    {"lr_scheduler.power", HS_CFG_FLOAT, "1.0", AT_LEAST(0.0), NULL,
     "exponent of the polynomial decay", 0, 0},
    {"lr_scheduler.force_anneal", HS_CFG_INT, "0", AT_LEAST(0), NULL,
     "polynomial_decay: from this epoch on, decay the learning rate per epoch; 0 = off", 0, 0},

    /* ---- training ----------------------------------------------------------------------------- */
    {"training.max_sentences", HS_CFG_INT, "64", AT_LEAST(1), NULL,
     "samples per micro-batch on each rank", 0, 0},
    {"training.update_freq", HS_CFG_INT_LIST, "[1]", AT_LEAST(1), NULL,
     "micro-batches accumulated per update; a list gives one value per epoch (the last repeats)", 0, 0},
    {"training.max_epoch", HS_CFG_INT, "0", AT_LEAST(0), NULL,
     "stop after this many epochs; 0 = no limit", 0, 0},
    {"training.max_update", HS_CFG_INT, "0", AT_LEAST(0), NULL,
     "stop after this many updates; 0 = no limit", 0, 0},
    {"training.validate_interval", HS_CFG_INT, "1", AT_LEAST(0), NULL,
     "validate every this many epochs; 0 = never at epoch ends", 0, 0},
    {"training.validate_interval_updates", HS_CFG_INT, "0", AT_LEAST(0), NULL,
     "also validate every this many updates; 0 = off", 0, 0},
    {"training.disable_validation", HS_CFG_BOOL, "false", NO_RANGE, NULL,
     "never validate", 0, 0},

    /* ---- distributed -------------------------------------------------------------------------- */
    {"distributed.fast_stat_sync", HS_CFG_BOOL, "true", NO_RANGE, NULL,
     "sum the logging statistics in the gradient all-reduce instead of a separate gather", 0, 0},
    {"distributed.bucket_cap_mb", HS_CFG_INT, "25", AT_LEAST(1), NULL,
     "gradient all-reduce bucket size in MiB", 0, 0},
    {"distributed.stall_timeout", HS_CFG_FLOAT, "600.0", AT_LEAST(0), NULL,
     "a rank that waits this many seconds for its peers reports which ranks have not arrived and ends the job; 0 = off",
     0, 0},
    {"distributed.check_replicas_every", HS_CFG_INT, "1000", AT_LEAST(0), NULL,
     "compare a checksum of the parameters across ranks every this many updates; 0 = off", 0, 0},
    {"distributed.weights", HS_CFG_FLOAT_LIST, "[]", 0.0, INFINITY, NULL,
     "share of every global batch per rank, one positive weight per rank (e.g. [2.0, 1.0, 1.0]); [] = HetSeq's equal "
     "micro-batches", HS_CFG_OPEN_MIN | HS_CFG_EMPTY_LIST, 0},
    {"distributed.rank_max_sentences", HS_CFG_INT_LIST, "[]", AT_LEAST(1), NULL,
     "memory cap per rank: a share larger than its cap is read and computed in micro-batches of at most this many "
     "samples; [] = training.max_sentences on every rank",
     HS_CFG_EMPTY_LIST, 0},
    {"distributed.balance", HS_CFG_STRING, "\"off\"", NO_RANGE, "off|auto",
     "auto: time every rank's updates and give each a share of the global batch proportional to its speed", 0, 0},
    {"distributed.balance_warmup", HS_CFG_INT, "3", AT_LEAST(1), NULL,
     "balance = auto: updates timed before the first re-balance (the first update is not timed)", 0, 0},
    {"distributed.rebalance_every", HS_CFG_INT, "0", AT_LEAST(0), NULL,
     "balance = auto: also re-balance every this many updates; 0 = at epoch ends only", 0, 0},

    /* ---- checkpoint --------------------------------------------------------------------------- */
    {"checkpoint.save_dir", HS_CFG_STRING, "\"checkpoints\"", NO_RANGE, NULL,
     "directory for checkpoints (created if missing)", 0, 0},
    {"checkpoint.save_interval", HS_CFG_INT, "1", AT_LEAST(1), NULL,
     "save at the end of every this many epochs", 0, 0},
    {"checkpoint.save_interval_updates", HS_CFG_INT, "0", AT_LEAST(0), NULL,
     "also save every this many updates; 0 = off", 0, 0},
    {"checkpoint.keep_last", HS_CFG_INT, "2", AT_LEAST(-1), NULL,
     "keep this many newest numbered checkpoints; -1 = keep all", 0, 0},
    {"checkpoint.init_checkpoint", HS_CFG_STRING, "\"\"", NO_RANGE, NULL,
     "start from the weights in this checkpoint (when save_dir has no checkpoint_last)", 0, 0},
    {"checkpoint.reset_optimizer", HS_CFG_BOOL, "false", NO_RANGE, NULL,
     "on resume, do not restore the optimizer state", 0, 0},
    {"checkpoint.reset_lr_scheduler", HS_CFG_BOOL, "false", NO_RANGE, NULL,
     "on resume, do not restore the learning-rate scheduler state", 0, 0},
    {"checkpoint.reset_step", HS_CFG_BOOL, "false", NO_RANGE, NULL,
     "on resume, start counting epochs and updates from zero", 0, 0},
    {"checkpoint.reset_dataloader", HS_CFG_BOOL, "false", NO_RANGE, NULL,
     "on resume, accept changed data-order settings (seed, max_sentences, ranks x update_freq, data) and restart "
     "the saved epoch from its first update", 0, 0},
    {"checkpoint.no_save", HS_CFG_BOOL, "false", NO_RANGE, NULL,
     "never write checkpoints", 0, 0},

    /* ---- log ---------------------------------------------------------------------------------- */
    {"log.interval", HS_CFG_INT, "10", AT_LEAST(1), NULL,
     "print progress every this many updates", 0, 0},
    {"log.format", HS_CFG_STRING, "\"simple\"", NO_RANGE, "simple|json|none",
     "progress line format on standard output", 0, 0},
    {"log.metrics_file", HS_CFG_STRING, "\"metrics.jsonl\"", NO_RANGE, NULL,
     "JSON-lines metrics file; a relative path is relative to checkpoint.save_dir; \"\" = none", 0, 0},
};
/* clang-format on */

const int hs_cfg_schema_count = (int)(sizeof hs_cfg_schema / sizeof hs_cfg_schema[0]);
