/* Gradient readiness during backward (hs_step_ctx.grads_ready), for every model: the promises the
 * overlapped gradient all-reduce relies on, checked on a real forward/backward of a small MNIST CNN,
 * BERT and Transformer-XL (tied adaptive softmax, untied full softmax, pre-LN with div_val 2), the way
 * a user would check a model before training it on several ranks. At every call the callback downloads
 * the gradient region it was told is final, [offset, total); after backward returns it requires
 *   (a) the offsets STRICTLY decrease (the engine starts each bucket once; a repeat would be a no-op, so
 *       a model passes an offset only when it adds something), each inside [0, total);
 *   (b) every region declared final equals the final gradient bit for bit: no later writer (a tied
 *       decoder, a shared bias, the embedding) changed it after it was declared;
 *   (c) the last call is offset 0: the whole gradient is declared by the model itself (the engine's
 *       finish would reduce any rest, but these models know when everything is final);
 *   (d) the same with two micro-batches of one update, the callback on the last only (the gradients
 *       accumulate; Transformer-XL's second segment also attends to the first one's memory), and the
 *       final gradient with the callback is the same bits as without it;
 *   (e) the number of calls is one per backward stage the model has (heads, each layer's feed-forward
 *       and attention halves, embeddings): a model that only declared everything at the end would
 *       satisfy (a)-(d) while overlapping nothing;
 *   (f) gradients written, not zeroed (hs_params_grad_written): with every gradient NaN, then
 *       hs_params_zero_grad_accumulated (the trainer's start of an update) and the first micro-batch run
 *       with grads_zero = 1, the two micro-batches give the bits of (d) without the callback: each
 *       tensor the model declared written is written whole by its first writer, and no writer adds to
 *       one first. The model declares some (else (f) checks nothing), and the same run with
 *       grads_zero = 0 leaves NaN (the check can fail). BERT also starts from a micro-batch without
 *       masked positions, whose MLM head writes nothing, and Transformer-XL from one whose targets all
 *       fall in the head cluster, whose tail clusters get no rows.
 * Each region between consecutive offsets must hold a non-zero gradient, so (b) compares something.
 * Built twice: for the CPU backend and for the CUDA backend on the emulated device
 * (GRADS_READY_DEVICE "cuda"), where the ops are enqueued and the download waits for them. */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "comm/comm.h"
#include "data/bert_shards.h"
#include "math/hs_math.h"
#include "models/bert.h"
#include "models/bert_config.h"
#include "models/cnn.h"
#include "models/txl.h"
#include "models/txl_config.h"
#include "nn/params.h"
#include "nn/step_ctx_stats.h"
#include "util/check.h"

#ifndef GRADS_READY_DEVICE
#define GRADS_READY_DEVICE "cpu"
#endif

#define SEED 20261124ULL
#define MAX_CALLS 256

static const hs_backend *be;
static int failures;

static void fail(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(const char *what, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL %s: ", what);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    failures++;
}

/* ---- the recording callback ------------------------------------------------------------------------ */

typedef struct recorder {
    const hs_params *p;
    int n;
    int64_t offset[MAX_CALLS];
    float *snapshot[MAX_CALLS]; /* host copy of grad[offset, total) at the call */
} recorder;

static void record(void *arg, int64_t offset) {
    recorder *r = arg;
    if (r->n == MAX_CALLS) {
        fail("recorder", "more than %d calls", MAX_CALLS);
        return;
    }
    r->offset[r->n] = offset;
    float *snap = NULL;
    if (offset >= 0 && offset < (int64_t)r->p->total) {
        const size_t n = r->p->total - (size_t)offset;
        HS_ALLOC(snap, n);
        be->download(be, snap, r->p->grad + offset, n * sizeof(float));
    }
    r->snapshot[r->n] = snap;
    r->n++;
}

static void recorder_clear(recorder *r) {
    for (int k = 0; k < r->n; k++) free(r->snapshot[k]);
    r->n = 0;
}

static float *download_grad(const hs_params *p) {
    float *g;
    HS_ALLOC(g, p->total);
    be->download(be, g, p->grad, p->total * sizeof(float));
    return g;
}

/* (a), (b), (c), (e) on the recorded calls against the gradient after backward. */
static void check_calls(const char *what, const recorder *r, const hs_params *p, int expected_calls) {
    const int64_t total = (int64_t)p->total;
    if (r->n != expected_calls) fail(what, "%d calls, expected one per backward stage: %d", r->n, expected_calls);
    if (r->n == 0) return;
    for (int k = 0; k < r->n; k++) {
        if (r->offset[k] < 0 || r->offset[k] >= total)
            fail(what, "call %d: offset %lld outside [0, %lld)", k, (long long)r->offset[k], (long long)total);
        if (k > 0 && r->offset[k] >= r->offset[k - 1])
            fail(what, "call %d: offset %lld does not decrease (previous %lld)", k, (long long)r->offset[k],
                 (long long)r->offset[k - 1]);
    }
    if (r->offset[r->n - 1] != 0)
        fail(what, "the last call declares offset %lld, not 0", (long long)r->offset[r->n - 1]);
    float *final = download_grad(p);
    for (int k = 0; k < r->n; k++) {
        if (!r->snapshot[k]) continue;
        const size_t lo = (size_t)r->offset[k];
        for (size_t i = lo; i < p->total; i++)
            if (memcmp(&r->snapshot[k][i - lo], &final[i], sizeof(float)) != 0) {
                int t = 0;
                while (t + 1 < p->count && p->tensors[t + 1].offset <= i) t++;
                fail(what, "call %d declared offset %zu final, but %s[%zu] changed after it (%.9g -> %.9g)", k, lo,
                     p->tensors[t].name, i - p->tensors[t].offset, (double)r->snapshot[k][i - lo], (double)final[i]);
                break;
            }
        /* the region this call added holds a gradient: the comparison above is not of zeros */
        const size_t hi = k > 0 && r->offset[k - 1] > r->offset[k] ? (size_t)r->offset[k - 1] : p->total;
        int nonzero = 0;
        for (size_t i = lo; i < hi && !nonzero; i++) nonzero = final[i] != 0.0f;
        if (!nonzero) fail(what, "call %d: the region [%zu, %zu) it declared holds no gradient", k, lo, hi);
    }
    free(final);
}

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

/* A model under test: runs micro-batch `mb` (0 or 1) of one update forward and backward with ctx. */
typedef struct model_case {
    const char *name;
    hs_params *p;
    int stages;
    int other_first; /* > 1: a micro-batch (f) also starts the update with, or 0 */
    void (*run)(void *model, int mb, const hs_step_ctx *ctx);
    void (*reset)(void *model); /* before replaying the update (Transformer-XL's memory), or NULL */
    void *model;
} model_case;

static hs_step_ctx step_ctx(recorder *r) {
    hs_step_ctx ctx = {.seed = SEED, .update = 3, .training = 1, .loss_scale = {1.0 / 7.0, 1.0 / 3.0}};
    if (r) {
        ctx.grads_ready = record;
        ctx.grads_ready_arg = r;
    }
    return ctx;
}

static void check_model(const model_case *c) {
    char what[160];
    recorder r = {.p = c->p};
    const hs_step_ctx plain = step_ctx(NULL), hooked = step_ctx(&r);

    /* one micro-batch */
    snprintf(what, sizeof what, "%s, one micro-batch", c->name);
    if (c->reset) c->reset(c->model);
    hs_params_zero_grad(c->p);
    c->run(c->model, 0, &hooked);
    check_calls(what, &r, c->p, c->stages);
    int64_t single[MAX_CALLS];
    const int n_single = r.n;
    memcpy(single, r.offset, sizeof single);
    recorder_clear(&r);

    /* two micro-batches, the callback on the last only */
    snprintf(what, sizeof what, "%s, two micro-batches", c->name);
    if (c->reset) c->reset(c->model);
    hs_params_zero_grad(c->p);
    c->run(c->model, 0, &plain);
    if (r.n != 0) fail(what, "the callback was called without being set");
    c->run(c->model, 1, &hooked);
    check_calls(what, &r, c->p, c->stages);
    if (r.n != n_single || memcmp(single, r.offset, (size_t)r.n * sizeof single[0]) != 0)
        fail(what, "the offsets differ from those of one micro-batch");
    float *with = download_grad(c->p);
    recorder_clear(&r);

    /* the same update without any callback: the same bits */
    if (c->reset) c->reset(c->model);
    hs_params_zero_grad(c->p);
    c->run(c->model, 0, &plain);
    c->run(c->model, 1, &plain);
    float *without = download_grad(c->p);
    if (!same_bits(with, without, c->p->total)) fail(what, "the gradient differs with and without the callback");
    free(with);

    /* (f) over NaN, the written gradients' first writers writing */
    int declared = 0;
    for (int i = 0; i < c->p->count; i++) declared += c->p->tensors[i].grad_written;
    if (!declared) fail(c->name, "no tensor's gradient is declared written (hs_params_grad_written)");
    float *nan_grad; /* NaN in every tensor; the padding between them stays 0, as nothing writes it */
    HS_ALLOC(nan_grad, c->p->total);
    memset(nan_grad, 0, c->p->total * sizeof(float));
    for (int t = 0; t < c->p->count; t++)
        for (size_t i = 0; i < c->p->tensors[t].numel; i++) nan_grad[c->p->tensors[t].offset + i] = NAN;
    const int firsts[2] = {0, c->other_first};
    for (int f = 0; f < (c->other_first > 1 ? 2 : 1); f++)
        for (int first_writes = 1; first_writes >= 0; first_writes--) {
            snprintf(what, sizeof what, "%s, gradients written from micro-batch %d%s", c->name, firsts[f],
                     first_writes ? "" : " (grads_zero = 0)");
            if (c->reset) c->reset(c->model);
            hs_params_zero_grad(c->p);
            c->run(c->model, firsts[f], &plain);
            c->run(c->model, 1, &plain);
            float *zeroed = f ? download_grad(c->p) : NULL;
            if (c->reset) c->reset(c->model);
            be->upload(be, c->p->grad, nan_grad, c->p->total * sizeof(float));
            hs_params_zero_grad_accumulated(c->p);
            hs_step_ctx first = plain;
            first.grads_zero = first_writes;
            c->run(c->model, firsts[f], &first);
            c->run(c->model, 1, &plain);
            float *written = download_grad(c->p);
            size_t nan = 0;
            for (size_t i = 0; i < c->p->total; i++) nan += written[i] != written[i];
            if (first_writes && !same_bits(written, f ? zeroed : without, c->p->total)) {
                size_t i = 0;
                while (memcmp(&written[i], f ? &zeroed[i] : &without[i], sizeof(float)) == 0) i++;
                int t = 0;
                while (t + 1 < c->p->count && c->p->tensors[t + 1].offset <= i) t++;
                fail(what, "differs from zeroing every gradient first: %s[%zu] %.9g (%zu NaN)", c->p->tensors[t].name,
                     i - c->p->tensors[t].offset, (double)written[i], nan);
            }
            if (!first_writes && nan == 0) fail(what, "no NaN left: the check cannot tell a writer that adds");
            free(written);
            free(zeroed);
        }
    free(nan_grad);
    free(without);
    printf("%-48s %d calls, first offset %lld of %zu\n", c->name, n_single, n_single ? (long long)single[0] : -1LL,
           c->p->total);
}

/* ---- MNIST CNN -------------------------------------------------------------------------------------- */

enum { CNN_B = 3 };
typedef struct cnn_model {
    hs_cnn *cnn;
    float *x[2];
    int32_t *labels[2];
    double *stats;
} cnn_model;

static void cnn_run(void *model, int mb, const hs_step_ctx *ctx) {
    cnn_model *m = model;
    hs_cnn_forward_backward(m->cnn, m->x[mb], m->labels[mb], CNN_B, (int64_t)mb * CNN_B, ctx, m->stats);
}

static void test_cnn(void) {
    hs_params p = {0};
    cnn_model m = {0};
    m.cnn = hs_cnn_create(&p, CNN_B, 0.25f, 0.5f);
    hs_params_allocate(&p, be);
    hs_cnn_setup(m.cnn);
    hs_cnn_init_params(m.cnn, SEED);
    const size_t n = (size_t)CNN_B * 28 * 28;
    float *host;
    HS_ALLOC(host, n);
    for (int mb = 0; mb < 2; mb++) {
        const uint64_t key = hs_rng_key(SEED, 7, (uint64_t)mb);
        for (size_t i = 0; i < n; i++) host[i] = 2.0f * hs_uniform(key, 0, i) - 1.0f;
        m.x[mb] = be->alloc(be, n * sizeof(float));
        be->upload(be, m.x[mb], host, n * sizeof(float));
        const int32_t labels[CNN_B] = {mb + 1, 7, 3 * mb};
        m.labels[mb] = be->alloc(be, sizeof labels);
        be->upload(be, m.labels[mb], labels, sizeof labels);
    }
    free(host);
    m.stats = be->alloc(be, HS_STATS_NDOUBLE * sizeof(double));
    const model_case c = {.name = "MNIST CNN", .p = &p, .stages = 4, .run = cnn_run, .model = &m};
    check_model(&c);
    for (int mb = 0; mb < 2; mb++) {
        be->free(be, m.x[mb]);
        be->free(be, m.labels[mb]);
    }
    be->free(be, m.stats);
    hs_cnn_free(m.cnn);
    hs_params_free(&p);
}

/* ---- BERT ------------------------------------------------------------------------------------------- */

enum { BERT_B = 2, BERT_L = 12, BERT_P = 3, BERT_LAYERS = 2 };
typedef struct bert_model {
    hs_bert *bert;
    void *buf[3]; /* micro-batches 0 and 1; 2: no masked position */
    double *stats;
} bert_model;

static void bert_run(void *model, int mb, const hs_step_ctx *ctx) {
    bert_model *m = model;
    hs_bert_stage_batch(m->bert, m->buf[mb]);
    hs_bert_forward_backward(m->bert, (int64_t)mb * BERT_B, ctx, m->stats);
}

/* Micro-batch mb: random ids, two segments, the second row padded, 2..3 labelled positions per row. */
static void bert_fill(void *buf, int mb, int vocab) {
    hs_bert_batch *b = hs_bert_batch_view(buf, BERT_B, BERT_L, BERT_P);
    const uint64_t key = hs_rng_key(SEED, 9, (uint64_t)mb);
    for (int s = 0; s < BERT_B; s++) {
        const int len = s == 0 ? BERT_L : BERT_L - 3;
        for (int t = 0; t < BERT_L; t++) {
            const size_t i = (size_t)s * BERT_L + (size_t)t;
            b->input_ids[i] = t < len ? 1 + (int32_t)(hs_uniform(key, 0, i) * (float)(vocab - 1)) % (vocab - 1) : 0;
            b->segment_ids[i] = t >= len / 2 && t < len;
            b->input_mask[i] = t < len;
        }
        const int count = mb == 2 ? 0 : 2 + (s + mb) % 2;
        for (int k = 0; k < BERT_P; k++) {
            const size_t i = (size_t)s * BERT_P + (size_t)k;
            b->mlm_positions[i] = k < count ? 1 + 3 * k + s : -1;
            b->mlm_ids[i] = k < count ? 1 + (int32_t)(hs_uniform(key, 1, i) * (float)(vocab - 1)) % (vocab - 1) : -1;
        }
        b->num_mlm[s] = count;
        b->nsp_labels[s] = (s + mb) % 2;
    }
}

static void test_bert(void) {
    hs_bert_config cfg;
    hs_bert_config_defaults(&cfg);
    cfg.vocab_size = 61;
    cfg.padded_vocab_size = hs_bert_padded_vocab(cfg.vocab_size, 8);
    cfg.hidden_size = 32;
    cfg.num_hidden_layers = BERT_LAYERS;
    cfg.num_attention_heads = 2;
    cfg.intermediate_size = 48;
    cfg.max_position_embeddings = 16;
    cfg.initializer_range = 0.05;
    hs_params p = {0};
    bert_model m = {0};
    m.bert = hs_bert_create(&p, &cfg, BERT_B, BERT_L, BERT_P);
    hs_params_allocate(&p, be);
    hs_bert_setup(m.bert);
    hs_bert_init_params(m.bert, SEED);
    for (int mb = 0; mb < 3; mb++) {
        m.buf[mb] = malloc(hs_bert_batch_bytes(BERT_B, BERT_L, BERT_P));
        if (!m.buf[mb]) HS_FATAL(NULL, "out of memory");
        bert_fill(m.buf[mb], mb, cfg.vocab_size);
    }
    m.stats = be->alloc(be, HS_STATS_NDOUBLE * sizeof(double));
    /* heads, a feed-forward and an attention stage per layer, embeddings */
    const model_case c = {.name = "BERT (tied MLM decoder)", .p = &p, .stages = 2 * BERT_LAYERS + 2, .run = bert_run,
                          .model = &m, .other_first = 2};
    check_model(&c);
    for (int mb = 0; mb < 3; mb++) free(m.buf[mb]);
    be->free(be, m.stats);
    hs_bert_free(m.bert);
    hs_params_free(&p);
}

/* ---- Transformer-XL --------------------------------------------------------------------------------- */

enum { TXL_B = 2, TXL_Q = 5, TXL_MEM = 4, TXL_TOKENS = 60 };
typedef struct txl_model {
    hs_txl *txl;
    hs_txl_memory *mem;
    int32_t tokens[3][TXL_B * (TXL_Q + 1)]; /* micro-batches 0 and 1; 2: every token in the head cluster */
    double *stats;
} txl_model;

static void txl_run(void *model, int mb, const hs_step_ctx *ctx) {
    txl_model *m = model;
    const hs_txl_config *c = hs_txl_get_config(m->txl);
    const hs_txl_segment seg = {.mem = m->mem, .col0 = 0, .clamp_len = c->clamp_len, .same_length = c->same_length};
    hs_txl_stage_batch(m->txl, m->tokens[mb], TXL_B, TXL_Q);
    hs_txl_forward_backward(m->txl, &seg, (int64_t)mb * TXL_B, ctx, m->stats);
}

static void txl_reset(void *model) { hs_txl_memory_reset(((txl_model *)model)->mem); }

static void test_txl(const char *name, int adaptive, int div_val, int d_embed, int tie, int pre_lnorm) {
    hs_txl_config c;
    memset(&c, 0, sizeof c);
    c.n_token = TXL_TOKENS;
    c.n_layer = 2;
    c.n_head = 2;
    c.d_head = 8;
    c.d_model = 16;
    c.d_inner = 24;
    c.d_embed = d_embed;
    c.dropout = 0.1;
    c.dropatt = 0.1;
    c.tgt_len = c.eval_tgt_len = TXL_Q;
    c.mem_len = c.eval_mem_len = TXL_MEM;
    c.pre_lnorm = pre_lnorm;
    c.adaptive = adaptive;
    if (adaptive) {
        c.n_cutoffs = 2;
        c.cutoffs[0] = 20;
        c.cutoffs[1] = 40;
    }
    c.div_val = div_val;
    c.tie_weight = tie;
    c.tie_projs = tie;
    c.batch_size = c.eval_batch_size = TXL_B;
    c.init_std = 0.05;
    c.proj_init_std = 0.05;
    hs_params p = {0};
    txl_model m = {0};
    m.txl = hs_txl_create(&p, &c, TXL_B, TXL_Q, TXL_MEM);
    hs_params_allocate(&p, be);
    hs_txl_setup(m.txl);
    hs_txl_init_params(m.txl, SEED);
    m.mem = hs_txl_memory_create(be, c.n_layer, c.d_model, TXL_B, TXL_MEM);
    /* token ids in every cluster (the tails too) */
    for (int mb = 0; mb < 2; mb++)
        for (int i = 0; i < TXL_B * (TXL_Q + 1); i++) m.tokens[mb][i] = (int32_t)((7 * i + 13 * mb + 3) % TXL_TOKENS);
    /* no target in a tail cluster: the adaptive softmax's tails get no rows (their gradients zeroed, not
     * written by a product, under (f)) */
    for (int i = 0; i < TXL_B * (TXL_Q + 1); i++) m.tokens[2][i] = (int32_t)((7 * i + 3) % 20);
    m.stats = be->alloc(be, HS_STATS_NDOUBLE * sizeof(double));
    const model_case mc = {.name = name, .p = &p, .stages = 2 * c.n_layer + 2, .run = txl_run, .reset = txl_reset,
                           .model = &m, .other_first = 2};
    check_model(&mc);
    be->free(be, m.stats);
    hs_txl_memory_free(be, m.mem);
    hs_txl_free(m.txl);
    hs_params_free(&p);
}

int main(int argc, char **argv) {
    hs_comm comm;
    hs_comm_init(&comm, &argc, &argv);
    be = hs_backend_select(GRADS_READY_DEVICE, 0);
    test_cnn();
    test_bert();
    /* NVIDIA's WikiText-103 shape: adaptive, div_val 1, tied weights; d_embed != d_model gives the
     * one projection the softmax's tail clusters share with the embedding */
    test_txl("Transformer-XL adaptive, div_val 1, tied", 1, 1, 24, 1, 0);
    test_txl("Transformer-XL adaptive, div_val 2, tied, pre-LN", 1, 2, 16, 1, 1);
    test_txl("Transformer-XL full softmax, untied", 0, 1, 16, 0, 0);
    hs_comm_finalize(&comm);
    if (failures) {
        fprintf(stderr, "%d failure(s) on the %s backend\n", failures, GRADS_READY_DEVICE);
        return 1;
    }
    printf("grads_ready: every model declares only final gradients (%s backend)\n", GRADS_READY_DEVICE);
    return 0;
}
