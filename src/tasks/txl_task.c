/* The Transformer-XL language-model task: a token stream (data/lm_data.h) walked as NVIDIA's
 * LMOrderedIterator walks it, and NVIDIA's MemTransformerLM (models/txl.h).
 *
 * Batching: a split of N tokens is cut into B contiguous columns of n_step = N / B tokens (column c =
 * tokens [c·n_step, (c+1)·n_step); the N mod B tail is dropped), B = txl.batch_size for training and
 * txl.eval_batch_size for validation/test, GLOBAL. Step k reads segment k of every column: inputs
 * [k·L, k·L + q) and targets one further, L = tgt_len (eval_tgt_len), q = min(L, n_step - 1 - k·L)
 * (the last segment is shorter). Sample index = k·B + column. Rank r of W owns columns
 * [r·B/W, (r+1)·B/W) — its memories stay on it — and splits them into uf micro-batches of B/(W·uf)
 * (NVIDIA's batch_chunk): B must be divisible by W·uf. The loss is the mean NLL over the global batch's
 * predicted tokens (term 0 counts tokens). Validation and test keep their own memories (reset before
 * every pass), so evaluating never disturbs training's, and, as NVIDIA's iterators with a memory, start
 * every column with ceil(eval_mem_len / L) warm-up segments of the text before it (the tail of the
 * previous column; column 0 takes the last one's) that fill the memory and are not scored.
 *
 * Host micro-batch: a txl_batch header, then tokens [count, q + 1] int32. */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/lm_data.h"
#include "math/hs_math.h"
#include "models/txl.h"
#include "tasks/model_flops.h"
#include "tasks/task.h"
#include "util/check.h"
#include "util/log.h"

typedef struct txl_batch {
    int32_t count, qlen, split, warm; /* warm = 0: a memory warm-up segment (not scored) */
    int64_t first;
    int64_t start; /* the segment's first input token within each column */
    /* int32 tokens[count][qlen + 1] follow */
} txl_batch;

/* One split's stream. */
typedef struct txl_stream {
    int64_t tokens;  /* N */
    int64_t n_step;  /* N / B */
    int columns;     /* B (global) */
    int seg_len;     /* tgt_len or eval_tgt_len */
    int clamp_len, same_length;
    int64_t warm_rows;  /* valid/test: the warm-up rows in front of every column (0: none) */
    hs_txl_memory *mem; /* this rank's columns */
    int col_base;       /* first column this rank owns */
    /* varlen (training): the segments' starts and lengths, drawn once from the seed; NULL otherwise */
    int64_t n_var;
    int64_t *var_start;
    int *var_len;
} txl_stream;

typedef struct txl_task {
    hs_lm_data *data;
    hs_txl_config cfg;
    hs_txl *model;
    const hs_backend *be;
    int rank, world;
    int max_qlen;
    double *scratch_stats; /* device [HS_STATS_NDOUBLE]: where warm-up segments' sums go */
    txl_stream stream[HS_NSPLITS];
    hs_input_sets staged; /* the stage hook's sets; data: hs_txl_inputs */
} txl_task;

static const char *const txl_stat_names[] = {"tail_nll_sum", "tail_tokens", "tail_correct", NULL};
static const char *const split_names[HS_NSPLITS] = {"train", "valid", "test"};

static txl_task *impl(hs_task *t) { return t->impl; }

static const char *columns_key(hs_split split) { return split == HS_SPLIT_TRAIN ? "txl.batch_size" : "txl.eval_batch_size"; }

/* Segments of a stream: ceil((rows - 1) / L) over rows = warm-up + n_step (NVIDIA: range(0, rows - 1, bptt)),
 * or the varlen table. */
static int64_t stream_segments(const txl_stream *s) {
    if (s->var_start) return s->n_var;
    const int64_t rows = s->n_step + s->warm_rows;
    if (s->n_step < 2) return 0;
    return (rows - 1 + s->seg_len - 1) / s->seg_len;
}

/* The split must give at least one segment: at least 2 tokens per column. */
static void check_stream(const txl_task *x, hs_split split) {
    const txl_stream *s = &x->stream[split];
    if (s->tokens == 0)
        hs_die_all("the %s split of %s is empty: prepare the data with a non-empty %s split (hetseq prep lm)",
                   split_names[split], hs_lm_path(x->data), split_names[split]);
    if (s->n_step < 2)
        hs_die_all("the %s split of %s has %lld tokens: cut into %s = %d columns that is %lld per column, and a "
                   "column needs at least 2 (an input and its target); use fewer columns or more data",
                   split_names[split], hs_lm_path(x->data), (long long)s->tokens, columns_key(split), s->columns,
                   (long long)s->n_step);
}

static int64_t txl_num_samples(hs_task *t, hs_split split) {
    txl_task *x = impl(t);
    return stream_segments(&x->stream[split]) * x->stream[split].columns;
}

static size_t txl_batch_bytes(hs_task *t, int max_count) {
    txl_task *x = impl(t);
    return sizeof(txl_batch) + (size_t)max_count * (size_t)(x->max_qlen + 1) * sizeof(int32_t);
}

/* Segment k of a stream: input start and length. */
static void segment_of(const txl_stream *s, int64_t k, int64_t *start, int *qlen) {
    if (s->var_start) {
        *start = s->var_start[k];
        *qlen = s->var_len[k];
        return;
    }
    *start = k * s->seg_len;
    const int64_t left = s->n_step + s->warm_rows - 1 - *start;
    *qlen = (int)(left < s->seg_len ? left : s->seg_len);
}

/* Token index in the split of row r of (extended) column c: rows below warm_rows are the warm-up, the
 * previous column's tail (NVIDIA: data.roll((warm_rows, 1), (0, 1))[:warm_rows]); the rest the column. */
static int64_t token_of(const txl_stream *s, int64_t c, int64_t r) {
    if (r >= s->warm_rows) return c * s->n_step + (r - s->warm_rows);
    const int64_t prev = (c + s->columns - 1) % s->columns;
    return prev * s->n_step + (s->n_step - s->warm_rows + r); /* warm_rows <= n_step (checked) */
}

/* Column by column, in at most two contiguous pieces (column 0's warm-up wraps to the last column):
 * two collective reads per column on every rank (one may be empty). */
static void read_warm_columns(txl_task *x, hs_split split, const txl_stream *s, int64_t col, int count, int64_t start,
                              int len, int32_t *dst) {
    for (int i = 0; i < count; i++) {
        const int64_t c = col + i;
        int64_t r = start, end = start + len;
        int32_t *out = dst + (size_t)i * (size_t)len;
        for (int piece = 0; piece < 2; piece++) {
            int64_t n = 0, first = 0;
            if (r < end) {
                first = token_of(s, c, r);
                n = 1;
                while (r + n < end && token_of(s, c, r + n) == first + n) n++;
            }
            hs_lm_read_runs(x->data, (hs_lm_split)split, n ? &first : NULL, n ? 1 : 0, n ? n : 1, out);
            out += n;
            r += n;
        }
        if (r != end) HS_FATAL(NULL, "warm-up read of column %lld needs more than two pieces", (long long)c);
    }
}

static void txl_read_batch(hs_task *t, hs_split split, int64_t first, int count, void *host_buf) {
    txl_task *x = impl(t);
    const txl_stream *s = &x->stream[split];
    txl_batch *b = host_buf;
    int32_t *tokens = (int32_t *)(b + 1);
    memset(b, 0, sizeof *b);
    b->split = (int32_t)split;
    b->first = first;
    if (count == 0) { /* joins the collective reads with empty selections */
        const int calls = s->warm_rows > 0 ? 2 * (int)(s->columns / x->world) : 1;
        for (int i = 0; i < calls; i++) hs_lm_read_runs(x->data, (hs_lm_split)split, NULL, 0, 1, tokens);
        return;
    }
    const int64_t k = first / s->columns, col = first % s->columns;
    if (col + count > s->columns || k >= stream_segments(s))
        HS_FATAL(NULL, "samples [%lld, %lld) are not one segment's columns of the %s stream", (long long)first,
                 (long long)(first + count), split_names[split]);
    int64_t start;
    int qlen;
    segment_of(s, k, &start, &qlen);
    if (s->warm_rows > 0) {
        read_warm_columns(x, split, s, col, count, start, qlen + 1, tokens);
    } else {
        int64_t *starts;
        HS_ALLOC(starts, count);
        for (int i = 0; i < count; i++) starts[i] = (col + i) * s->n_step + start;
        hs_lm_read_runs(x->data, (hs_lm_split)split, starts, count, qlen + 1, tokens);
        free(starts);
    }
    b->count = count;
    b->qlen = qlen;
    b->start = start;
    b->warm = start >= s->warm_rows;
}

static const txl_batch *batch_of(const void *host_buf, int count) {
    const txl_batch *b = host_buf;
    if (b->count != count)
        HS_FATAL(NULL, "Transformer-XL host micro-batch holds %d columns, the caller says %d", b->count, count);
    return b;
}

static void txl_batch_norm_counts(hs_task *t, const void *host_buf, int count, double counts[HS_NORM_TERMS]) {
    (void)t;
    const txl_batch *b = batch_of(host_buf, count);
    counts[0] = b->warm ? (double)count * (double)b->qlen : 0.0; /* mean NLL over scored tokens */
    counts[1] = 0;
}

/* Tokens the micro-batch predicts: count columns of qlen (the evaluation's tokens/s sums these). */
static int64_t txl_batch_tokens(hs_task *t, const void *host_buf, int count) {
    (void)t;
    return (int64_t)count * ((const txl_batch *)host_buf)->qlen;
}

/* The memory columns of a micro-batch of the stream. */
static hs_txl_segment segment_for(txl_task *x, const txl_batch *b) {
    txl_stream *s = &x->stream[b->split];
    const int col = (int)(b->first % s->columns);
    const int col0 = col - s->col_base;
    if (s->mem && (col0 < 0 || col0 + b->count > s->mem->ncols))
        HS_FATAL(NULL, "columns [%d, %d) of the %s stream are not this rank's [%d, %d)", col, col + b->count,
                 split_names[b->split], s->col_base, s->col_base + s->mem->ncols);
    return (hs_txl_segment){.mem = s->mem, .col0 = col0, .clamp_len = s->clamp_len, .same_length = s->same_length};
}

/* Every token id of the micro-batch within the model's vocabulary, else the run ends naming the id and
 * where it sits in the split (the model's staging checks again; this message can say where). */
static void check_ids(const txl_task *x, const txl_batch *b) {
    const txl_stream *s = &x->stream[b->split];
    const int32_t *tok = (const int32_t *)(b + 1);
    const int64_t col0 = b->first % s->columns;
    for (int c = 0; c < b->count; c++)
        for (int t = 0; t <= b->qlen; t++) {
            const int32_t id = tok[(size_t)c * (size_t)(b->qlen + 1) + (size_t)t];
            if (id < 0 || id >= x->cfg.n_token)
                hs_die("token id %d at position %lld of the %s split of %s is outside the model's vocabulary [0, %d): "
                       "the data does not match the model (txl.n_token) or the file is damaged; prepare it again with "
                       "`hetseq prep lm`",
                       (int)id, (long long)token_of(s, col0 + c, b->start + t), split_names[b->split],
                       hs_lm_path(x->data), x->cfg.n_token);
        }
}

static void *txl_inputs_create(void *owner) { return hs_txl_inputs_create(((txl_task *)owner)->model); }
static void txl_inputs_destroy(void *owner, void *data) { hs_txl_inputs_free(((txl_task *)owner)->model, data); }

/* The stage hook: forward_backward's checks, the uploads on the copy stream. The segment's memory
 * layout (segment_for) is read from host_buf when the micro-batch is computed, as before. */
static void txl_stage(hs_task *t, const void *host_buf, int count, int micro_index, int parity) {
    txl_task *x = impl(t);
    const txl_batch *b = batch_of(host_buf, count);
    check_ids(x, b);
    hs_input_set *set = hs_input_sets_begin(&x->staged, parity, micro_index);
    hs_txl_stage_batch_async(x->model, (const int32_t *)(b + 1), count, b->qlen, set->data);
    hs_input_sets_end(&x->staged, set, host_buf, count);
}

static void txl_forward_backward(hs_task *t, const void *host_buf, int64_t first, int count, const hs_step_ctx *ctx,
                                 double *stats) {
    txl_task *x = impl(t);
    const txl_batch *b = batch_of(host_buf, count);
    hs_input_set *set = hs_input_sets_take(&x->staged, host_buf, count);
    if (set) {
        hs_txl_take_inputs(x->model, set->data);
        hs_input_sets_done(&x->staged, set);
    } else {
        check_ids(x, b);
        hs_txl_stage_batch(x->model, (const int32_t *)(b + 1), count, b->qlen);
    }
    const hs_txl_segment seg = segment_for(x, b);
    hs_txl_forward_backward(x->model, &seg, first, ctx, stats);
}

static void txl_evaluate(hs_task *t, const void *host_buf, int64_t first, int count, double *stats) {
    (void)first;
    txl_task *x = impl(t);
    const txl_batch *b = batch_of(host_buf, count);
    check_ids(x, b);
    hs_txl_stage_batch(x->model, (const int32_t *)(b + 1), count, b->qlen);
    const hs_txl_segment seg = segment_for(x, b);
    if (!b->warm) { /* a warm-up segment only fills the memory */
        x->be->zero(x->be, x->scratch_stats, HS_STATS_NDOUBLE * sizeof(double));
        stats = x->scratch_stats;
    }
    hs_txl_evaluate(x->model, &seg, stats);
}

static void txl_init_params(hs_task *t, uint64_t seed) { hs_txl_init_params(impl(t)->model, seed); }

/* loss = (head NLL + tail NLL) / tokens; ppl = exp(loss) */
static double txl_loss_from_stats(const hs_stats *s) {
    return s->sample_count > 0 ? (s->loss_sum + s->extra[HS_TXL_STAT_TAIL_NLL - HS_STAT_EXTRA0]) / s->sample_count
                               : 0.0;
}

static void txl_format_stats(const hs_stats *s, int json, char *buf, size_t n) {
    const double loss = txl_loss_from_stats(s);
    const double ppl = loss < 700.0 ? exp(loss) : INFINITY;
    /* the log line already shows ppl; the metrics file gets it here, with the tokens it averages over */
    if (json)
        snprintf(buf, n, ", \"ppl\": %.6g, \"tokens\": %.0f", ppl, s->sample_count);
    else if (n > 0)
        buf[0] = '\0';
}

/* ---- ordered streams ------------------------------------------------------------------------------ */

static int64_t txl_stream_steps(hs_task *t, hs_split split, int uf, int world) {
    txl_task *x = impl(t);
    const txl_stream *s = &x->stream[split];
    if (uf < 1) uf = 1;
    if (s->columns % (world * uf) != 0)
        hs_die_all("%s = %d columns cannot be split over %d ranks x %d micro-batches (training.update_freq): "
                   "make %s a multiple of %d",
                   columns_key(split), s->columns, world, uf, columns_key(split), world * uf);
    if (world != x->world)
        HS_FATAL(NULL, "stream of %d ranks asked for on %d ranks", x->world, world);
    check_stream(x, split);
    return stream_segments(s);
}

static int txl_stream_step_ranges(hs_task *t, hs_split split, int64_t epoch, int64_t k, int uf, int rank, int world,
                                  hs_range *out) {
    (void)epoch;
    txl_task *x = impl(t);
    const txl_stream *s = &x->stream[split];
    if (uf < 1) uf = 1;
    const int per = s->columns / world / uf;
    for (int c = 0; c < uf; c++) {
        out[c].first = k * s->columns + (int64_t)rank * (s->columns / world) + (int64_t)c * per;
        out[c].count = per;
    }
    return uf;
}

static void txl_stream_reset(hs_task *t, hs_split split) { hs_txl_memory_reset(impl(t)->stream[split].mem); }

/* ---- carried state: training memories in global column order -------------------------------------- */

/* Arrays: train_mems float [n_layer, B, mem_len, D] and train_mlen int64 [B]. */
static void txl_gather_state(hs_task *t, const hs_comm *comm, hs_task_state *out) {
    txl_task *x = impl(t);
    const txl_stream *s = &x->stream[HS_SPLIT_TRAIN];
    memset(out, 0, sizeof *out);
    const hs_txl_memory *mem = s->mem;
    if (!mem || mem->mem_len == 0) return;
    const int L = mem->n_layer, ncols = mem->ncols, B = s->columns;
    const size_t col_floats = (size_t)mem->mem_len * (size_t)mem->d_model, local = (size_t)ncols * col_floats;
    if (local > (size_t)2147483647) hs_die("the Transformer-XL memories of one rank are too large to gather");
    float *mine;
    HS_ALLOC(mine, local);
    float *all = NULL;
    int *mlen_all = NULL;
    if (comm->rank == 0) {
        HS_ALLOC(all, (size_t)L * (size_t)B * col_floats);
        HS_ALLOC(mlen_all, B);
    }
    for (int l = 0; l < L; l++) {
        x->be->download(x->be, mine, mem->mem[l], local * sizeof(float));
        HS_CHECK_MPI(MPI_Gather(mine, (int)local, MPI_FLOAT, all ? all + (size_t)l * (size_t)B * col_floats : NULL,
                                (int)local, MPI_FLOAT, 0, comm->world),
                     "gathering the Transformer-XL memories");
    }
    HS_CHECK_MPI(MPI_Gather(mem->mlen, ncols, MPI_INT, mlen_all, ncols, MPI_INT, 0, comm->world),
                 "gathering the Transformer-XL memory lengths");
    free(mine);
    if (comm->rank != 0) return;
    hs_task_state_array *a = &out->arrays[0];
    snprintf(a->name, sizeof a->name, "train_mems");
    a->is_int64 = 0;
    a->ndim = 4;
    a->dims[0] = L, a->dims[1] = B, a->dims[2] = mem->mem_len, a->dims[3] = mem->d_model;
    a->data = all;
    hs_task_state_array *b = &out->arrays[1];
    snprintf(b->name, sizeof b->name, "train_mlen");
    b->is_int64 = 1;
    b->ndim = 1;
    b->dims[0] = B;
    int64_t *ml;
    HS_ALLOC(ml, B);
    for (int c = 0; c < B; c++) ml[c] = mlen_all[c];
    free(mlen_all);
    b->data = ml;
    out->count = 2;
}

static const hs_task_state_array *find_array(const hs_task_state *in, const char *name) {
    for (int i = 0; i < in->count; i++)
        if (strcmp(in->arrays[i].name, name) == 0) return &in->arrays[i];
    return NULL;
}

static void txl_scatter_state(hs_task *t, const hs_comm *comm, const hs_task_state *in) {
    txl_task *x = impl(t);
    txl_stream *s = &x->stream[HS_SPLIT_TRAIN];
    hs_txl_memory *mem = s->mem;
    /* rank 0 decides: 0 = start fresh, 1 = install, 2 = the saved state does not fit this model */
    int verdict = 0;
    char why[512] = "";
    const hs_task_state_array *ma = NULL, *la = NULL;
    if (comm->rank == 0 && in && in->count > 0) {
        ma = find_array(in, "train_mems");
        la = find_array(in, "train_mlen");
        if (!mem || mem->mem_len == 0) {
            verdict = 0; /* this model keeps no memory: nothing to install */
        } else if (!ma || !la || ma->is_int64 || !la->is_int64 || ma->ndim != 4 || la->ndim != 1) {
            verdict = 2;
            snprintf(why, sizeof why, "the checkpoint's task state has no Transformer-XL memories (train_mems, train_mlen)");
        } else if (ma->dims[0] != mem->n_layer || ma->dims[1] != s->columns || ma->dims[2] != mem->mem_len ||
                   ma->dims[3] != mem->d_model || la->dims[0] != s->columns) {
            verdict = 2;
            snprintf(why, sizeof why,
                     "the checkpoint's memories are [%lld layers, %lld columns, %lld steps, %lld] but this run has "
                     "[txl.n_layer %d, txl.batch_size %d, txl.mem_len %d, txl.d_model %d]",
                     (long long)ma->dims[0], (long long)ma->dims[1], (long long)ma->dims[2], (long long)ma->dims[3],
                     mem->n_layer, s->columns, mem->mem_len, mem->d_model);
        } else {
            verdict = 1;
        }
    }
    HS_CHECK_MPI(MPI_Bcast(&verdict, 1, MPI_INT, 0, comm->world), "sharing the Transformer-XL state verdict");
    if (verdict == 2) {
        HS_CHECK_MPI(MPI_Bcast(why, (int)sizeof why, MPI_CHAR, 0, comm->world), "sharing the state error");
        hs_die_all("cannot resume: %s; resume with the settings of the checkpoint (or reset the data loader: "
                   "checkpoint.reset_dataloader = true starts the epoch again)",
                   why);
    }
    if (verdict == 0) {
        hs_txl_memory_reset(mem);
        return;
    }
    const int L = mem->n_layer, ncols = mem->ncols, B = s->columns;
    const size_t col_floats = (size_t)mem->mem_len * (size_t)mem->d_model, local = (size_t)ncols * col_floats;
    float *mine;
    HS_ALLOC(mine, local);
    for (int l = 0; l < L; l++) {
        const float *src = comm->rank == 0 ? (const float *)ma->data + (size_t)l * (size_t)B * col_floats : NULL;
        HS_CHECK_MPI(MPI_Scatter(src, (int)local, MPI_FLOAT, mine, (int)local, MPI_FLOAT, 0, comm->world),
                     "sending the Transformer-XL memories");
        x->be->upload(x->be, mem->mem[l], mine, local * sizeof(float));
    }
    x->be->synchronize(x->be);
    free(mine);
    int *ml_all = NULL;
    if (comm->rank == 0) {
        HS_ALLOC(ml_all, B);
        for (int c = 0; c < B; c++) {
            const int64_t v = ((const int64_t *)la->data)[c];
            ml_all[c] = v < 0 ? 0 : (v > mem->mem_len ? mem->mem_len : (int)v);
        }
    }
    HS_CHECK_MPI(MPI_Scatter(ml_all, ncols, MPI_INT, mem->mlen, ncols, MPI_INT, 0, comm->world),
                 "sending the Transformer-XL memory lengths");
    free(ml_all);
}

/* ---- variable-length segments (NVIDIA's LMOrderedIterator.get_varlen_iter) ------------------------ */

/* NVIDIA: bptt = L with probability 0.95, else L/2; length = int(normal(bptt, 5)) kept in [5, L + 3·5],
 * cut at the column's end; walk until fewer than 2 tokens are left. The draws come from the counter RNG
 * keyed by the seed (NVIDIA: numpy's global stream), so every rank and every resume sees the same
 * segments; they are the same in every epoch (the stream hooks are not told the epoch when they count
 * steps). */
#define VARLEN_STD 5.0
#define VARLEN_MIN 5
#define VARLEN_MAX_DEVIATION 3
#define VARLEN_TAG 0x7661726c656eULL /* "varlen": a key no dropout site or initialisation uses */

static int varlen_max(int L) { return L + (int)(VARLEN_MAX_DEVIATION * VARLEN_STD); }

static void build_varlen(txl_stream *s, uint64_t seed) {
    const int L = s->seg_len;
    const double max_len = L + VARLEN_MAX_DEVIATION * VARLEN_STD;
    const uint64_t key = hs_rng_key(seed, VARLEN_TAG, 0);
    int64_t cap = 16, n = 0, i = 0;
    HS_ALLOC(s->var_start, cap);
    HS_ALLOC(s->var_len, cap);
    for (uint64_t k = 0;; k++) { /* NVIDIA: yield, then stop once i >= n_step - 2 */
        const double bptt = hs_uniform(key, 0, k) < 0.95f ? (double)L : L / 2.0;
        const double r = sqrt(-2.0 * log(1.0 - (double)hs_uniform(key, 1, k)));
        const double z = r * cos(6.283185307179586 * (double)hs_uniform(key, 2, k));
        double len = (double)(int64_t)(bptt + VARLEN_STD * z); /* Python's int(): toward zero */
        if (len < VARLEN_MIN) len = VARLEN_MIN;
        if (len > max_len) len = max_len;
        int64_t q = (int64_t)len;
        if (q > s->n_step - 1 - i) q = s->n_step - 1 - i;
        if (n == cap) {
            cap *= 2;
            HS_REALLOC(s->var_start, cap);
            HS_REALLOC(s->var_len, cap);
        }
        s->var_start[n] = i;
        s->var_len[n] = (int)q;
        n++;
        i += q;
        if (i >= s->n_step - 2) break;
    }
    s->n_var = n;
}

/* ---- construction ----------------------------------------------------------------------------------- */

static void txl_destroy(hs_task *t) {
    txl_task *x = impl(t);
    hs_input_sets_free(&x->staged);
    hs_txl_memory_free(x->be, x->stream[HS_SPLIT_TRAIN].mem);
    hs_txl_memory_free(x->be, x->stream[HS_SPLIT_VALID].mem); /* shared with test */
    if (x->scratch_stats) x->be->free(x->be, x->scratch_stats);
    free(x->stream[HS_SPLIT_TRAIN].var_start);
    free(x->stream[HS_SPLIT_TRAIN].var_len);
    hs_txl_free(x->model);
    hs_params_free(&t->params);
    hs_lm_close(x->data);
    free(x);
    free(t);
}

/* Model FLOPs per predicted token (a counted "sample" of this task), for the TFLOP/s and MFU log fields. */
static double txl_flops_per_token(hs_task *t) {
    const hs_txl_config *c = &((txl_task *)t->impl)->cfg;
    const int head_cols = c->n_cutoffs > 0 ? c->cutoffs[0] + c->n_cutoffs : c->n_token;
    return hs_txl_train_flops_per_token(c->n_layer, c->n_head, c->d_head, c->d_model, c->d_inner, c->tgt_len,
                                        c->mem_len, c->d_embed, head_cols);
}

hs_task *hs_txl_task_create(const hs_task_settings *s, const hs_comm *comm, const hs_backend *be) {
    const char *path = s->data_path;
    if (!*path)
        hs_die_all("data.path is empty: set it to the directory holding lm.h5 (made by `hetseq prep lm`)");
    hs_task *t;
    txl_task *x;
    HS_ALLOC(t, 1);
    HS_ALLOC(x, 1);
    t->name = "txl";
    t->impl = x;
    x->be = be;
    x->rank = comm->rank;
    x->world = comm->size;
    x->data = hs_lm_open(path, comm->io);
    x->cfg = s->txl;
    hs_txl_config_resolve(&x->cfg, hs_lm_vocab_size(x->data), s->txl_n_token_origin);
    const hs_txl_config *c = &x->cfg;
    const int W = comm->size;
    for (int k = 0; k < 2; k++) {
        const char *key = k == 0 ? "txl.batch_size" : "txl.eval_batch_size";
        const int B = k == 0 ? c->batch_size : c->eval_batch_size;
        if (B % W != 0)
            hs_die_all("%s = %d columns cannot be split over %d ranks: make it a multiple of %d (each rank keeps the "
                       "memories of its own columns)",
                       key, B, W, W);
    }
    for (int sp = 0; sp < HS_NSPLITS; sp++) {
        txl_stream *s = &x->stream[sp];
        const int train = sp == HS_SPLIT_TRAIN;
        s->tokens = hs_lm_split_tokens(x->data, (hs_lm_split)sp);
        s->columns = train ? c->batch_size : c->eval_batch_size;
        s->n_step = s->tokens / s->columns;
        s->seg_len = train ? c->tgt_len : c->eval_tgt_len;
        s->clamp_len = train ? c->clamp_len : c->eval_clamp_len;
        s->same_length = train ? c->same_length : c->eval_same_length;
        s->col_base = comm->rank * (s->columns / W);
        /* NVIDIA's valid/test iterators are built with the eval memory length: ceil(mem/L) warm-up segments */
        if (!train && c->eval_mem_len > 0 && s->tokens > 0) {
            s->warm_rows = (int64_t)((c->eval_mem_len + s->seg_len - 1) / s->seg_len) * s->seg_len;
            if (s->warm_rows > s->n_step)
                hs_die_all("the %s split of %s has %lld tokens per column (txl.eval_batch_size = %d columns) but the "
                           "evaluation memory warm-up needs %lld (txl.eval_mem_len = %d rounded up to txl.eval_tgt_len "
                           "= %d): use fewer evaluation columns or a shorter eval_mem_len",
                           split_names[sp], hs_lm_path(x->data), (long long)s->n_step, s->columns,
                           (long long)s->warm_rows, c->eval_mem_len, s->seg_len);
        }
    }
    check_stream(x, HS_SPLIT_TRAIN);
    const int train_qlen = c->varlen ? varlen_max(c->tgt_len) : c->tgt_len;
    if (c->varlen) build_varlen(&x->stream[HS_SPLIT_TRAIN], s->seed);
    x->max_qlen = train_qlen > c->eval_tgt_len ? train_qlen : c->eval_tgt_len;
    const int max_mlen = c->mem_len > c->eval_mem_len ? c->mem_len : c->eval_mem_len;
    const int train_cols = c->batch_size / W, eval_cols = c->eval_batch_size / W;
    const int max_batch = train_cols > eval_cols ? train_cols : eval_cols;

    x->model = hs_txl_create(&t->params, c, max_batch, x->max_qlen, max_mlen);
    hs_params_allocate(&t->params, be);
    hs_txl_setup(x->model);
    hs_log("| activations: %.2f MB for a micro-batch of %d columns x %d tokens (+ %d memory), %s",
           hs_txl_activation_bytes(x->model) / 1e6, max_batch, x->max_qlen, max_mlen,
           hs_txl_activations_16bit(x->model)
               ? (hs_txl_attention_fused(x->model)
                      ? "q|k|v, r, context and FFN activation kept in 16 bits, fused attention (row log-sum-exps, "
                        "no probabilities) (docs/gpu.md)"
                      : "q|k|v, r, attention probabilities, context and FFN activation kept in 16 bits (docs/gpu.md)")
               : (hs_txl_attention_fused(x->model) ? "kept in fp32, fused attention (row log-sum-exps, no probabilities)"
                                                   : "kept in fp32"));
    /* Checkpoints carry the state_dict keys PyTorch lists besides the table (tied tail projections under
     * their crit.* name, pos_emb.inv_freq), so MemTransformerLM.load_state_dict(strict=True) reads /model. */
    {
        const char *alias[64], *target[64];
        int n = hs_txl_state_dict_aliases(x->model, alias, target, 64);
        for (int i = 0; i < n; i++) hs_params_add_alias(&t->params, alias[i], hs_params_find(&t->params, target[i]));
        float *inv;
        HS_ALLOC(inv, c->d_model / 2);
        hs_txl_inv_freq(c->d_model, inv);
        const int64_t half = c->d_model / 2;
        hs_params_add_buffer(&t->params, "pos_emb.inv_freq", 1, &half, inv);
        free(inv);
    }
    x->stream[HS_SPLIT_TRAIN].mem = hs_txl_memory_create(be, c->n_layer, c->d_model, train_cols, c->mem_len);
    x->stream[HS_SPLIT_VALID].mem = hs_txl_memory_create(be, c->n_layer, c->d_model, eval_cols, c->eval_mem_len);
    x->stream[HS_SPLIT_TEST].mem = x->stream[HS_SPLIT_VALID].mem; /* both reset before every pass */
    x->scratch_stats = be->alloc(be, HS_STATS_NDOUBLE * sizeof(double));

    t->num_samples = txl_num_samples;
    t->batch_bytes = txl_batch_bytes;
    t->read_batch = txl_read_batch;
    t->batch_norm_counts = txl_batch_norm_counts;
    t->forward_backward = txl_forward_backward;
    t->stage = txl_stage;
    x->staged = (hs_input_sets){.be = be, .owner = x, .create = txl_inputs_create, .destroy = txl_inputs_destroy};
    t->evaluate = txl_evaluate;
    t->init_params = txl_init_params;
    t->extra_stat_names = txl_stat_names;
    t->loss_from_stats = txl_loss_from_stats;
    t->format_stats = txl_format_stats;
    /* the stats count tokens (sample_count = predicted tokens), so a counted "sample" is one token */
    t->tokens_per_sample = 1;
    t->has_test_split = 1;
    t->stream_steps = txl_stream_steps;
    t->stream_step_ranges = txl_stream_step_ranges;
    t->stream_reset = txl_stream_reset;
    t->batch_tokens = txl_batch_tokens;
    t->flops_per_sample = txl_flops_per_token;
    t->gather_state = txl_gather_state;
    t->scatter_state = txl_scatter_state;
    t->destroy = txl_destroy;
    return t;
}
