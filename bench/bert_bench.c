/* BERT-mini pre-training throughput on the CPU backend: 4 layers, hidden 256, 4 heads, intermediate
 * 1024, vocabulary 30522 padded to 30528, dropout 0.1; batch 32 sequences of 128 tokens with 20
 * labelled positions each (synthetic, full length, as bench/bert_torch.py). One step = forward +
 * backward + an optimizer step (AdamW as the PyTorch baseline; `lamb` as 4th argument for LAMB).
 *
 * Model FLOPs per step (multiply-add = 2; backward = 2 GEMMs per forward GEMM, so training = 3 x
 * forward; only GEMMs are counted, as in bench/bert_torch.py's "masked" count):
 *   encoder   6 · T · N · (4H² + 2HI)          Q, K, V, output projection; FFN up and down; T = B·L tokens
 *   attention 12 · B · N · L² · H              Q·Kᵀ and P·V (2·2·B·heads·L²·d forward, d = H/heads)
 *   MLM head  6 · Np · (H² + V·H)               transform and tied decoder on the Np = B·P labelled rows
 *   NSP       6 · B · (H² + 2H)                 pooler and classifier
 * The same run measures OpenBLAS SGEMM on [B·L, H] x [H, I] (the FFN-up shape) with the same threads,
 * and reports the model's rate as a fraction of it, and the peak resident memory (getrusage).
 * PRECISION bf16 runs the model on the CPU backend's bf16 table (precision = "bf16": GEMM operands
 * rounded to bf16, fp32 sums; src/backend/cpu/cpu_rounded_gemm.h); the SGEMM reference stays fp32.
 *   usage: bert_bench [BATCH [ITERATIONS [WARMUP [adamw|lamb [fp32|bf16]]]]]   (defaults 32 10 3 adamw fp32) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend/backend.h"
#include "data/bert_shards.h"
#include "math/hs_math.h"
#include "models/bert.h"
#include "models/bert_config.h"
#include "nn/params.h"
#include "optim/optimizer.h"
#include "util/timer.h"

enum { SEQ = 128, PRED = 20 };

/* Full-length rows: ids in [1000, V-8), segment B in the second half, PRED sorted positions in
 * [1, L-2], random NSP labels. */
static void make_batch(hs_bert_batch *b, int vocab) {
    const uint64_t key = hs_rng_key(1234, 0, 0);
    for (int s = 0; s < b->count; s++) {
        for (int t = 0; t < SEQ; t++) {
            const size_t i = (size_t)s * SEQ + (size_t)t;
            b->input_ids[i] = 1000 + (int32_t)(hs_uniform(key, (uint64_t)s, (uint64_t)t) * (float)(vocab - 1008));
            b->segment_ids[i] = t >= SEQ / 2;
            b->input_mask[i] = 1;
        }
        /* PRED distinct positions: every (SEQ-2)/PRED-th position shifted by a random offset */
        const int stride = (SEQ - 2) / PRED, offset = (int)(hs_uniform(key, (uint64_t)s, 1000) * (float)stride);
        for (int k = 0; k < PRED; k++) {
            b->mlm_positions[s * PRED + k] = 1 + k * stride + offset;
            b->mlm_ids[s * PRED + k] = b->input_ids[(size_t)s * SEQ + (size_t)(1 + k * stride + offset)];
        }
        b->num_mlm[s] = PRED;
        b->nsp_labels[s] = hs_uniform(key, (uint64_t)s, 2000) < 0.5f;
    }
}

/* OpenBLAS SGEMM GFLOP/s on c[m,n] = a[m,k]·b[k,n] */
static double sgemm_gflops(const hs_backend *be, int m, int k, int n, int reps) {
    float *a = be->alloc(be, (size_t)m * (size_t)k * sizeof(float)), *b = be->alloc(be, (size_t)k * (size_t)n * sizeof(float));
    float *c = be->alloc(be, (size_t)m * (size_t)n * sizeof(float));
    for (int i = 0; i < 3; i++) be->gemm(be, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
    const double t0 = hs_now();
    for (int i = 0; i < reps; i++) be->gemm(be, 0, 0, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n);
    const double seconds = hs_now() - t0;
    be->free(be, a), be->free(be, b), be->free(be, c);
    return 2.0 * m * k * n * reps / seconds / 1e9;
}

int main(int argc, char **argv) {
    const int batch = argc > 1 ? atoi(argv[1]) : 32;
    const int iterations = argc > 2 ? atoi(argv[2]) : 10;
    const int warmup = argc > 3 ? atoi(argv[3]) : 3;
    const char *optim = argc > 4 ? argv[4] : "adamw";
    const char *precision = argc > 5 ? argv[5] : "fp32";
    if (batch < 1 || iterations < 1 || warmup < 0 || (strcmp(optim, "adamw") && strcmp(optim, "lamb")) ||
        (strcmp(precision, "fp32") && strcmp(precision, "bf16"))) {
        fprintf(stderr, "usage: %s [BATCH [ITERATIONS [WARMUP [adamw|lamb [fp32|bf16]]]]]\n", argv[0]);
        return 2;
    }
    hs_bert_config cfg;
    hs_bert_config_defaults(&cfg);
    cfg.hidden_size = 256;
    cfg.num_hidden_layers = 4;
    cfg.num_attention_heads = 4;
    cfg.intermediate_size = 1024;
    cfg.padded_vocab_size = hs_bert_padded_vocab(cfg.vocab_size, 8);
    const hs_backend *fp32 = hs_backend_cpu(), *be = fp32;
    if (!strcmp(precision, "bf16")) {
        char why[256] = "";
        be = hs_backend_cpu_bf16(why, sizeof why);
        if (!be) {
            fprintf(stderr, "%s: precision bf16: %s\n", argv[0], why);
            return 1;
        }
    }
    hs_params params = {0};
    hs_bert *model = hs_bert_create(&params, &cfg, batch, SEQ, PRED);
    hs_params_allocate(&params, be);
    hs_bert_setup(model);
    hs_bert_init_params(model, 1);
    hs_optimizer *opt = hs_optimizer_create_named(optim, &params, 0.9, 0.999, 1e-6, 0.01, 0.0, 0.0);
    if (!strcmp(optim, "lamb")) opt->max_grad_norm = 1.0;

    void *buf = malloc(hs_bert_batch_bytes(batch, SEQ, PRED));
    if (!buf) return 1;
    hs_bert_batch *host = hs_bert_batch_view(buf, batch, SEQ, PRED);
    make_batch(host, cfg.vocab_size);

    double t0 = 0.0, fwd_bwd = 0.0, loss = 0.0;
    double *stats_dev = be->alloc(be, HS_STATS_NDOUBLE * sizeof(double)); /* device stats */
    for (int it = 0; it < warmup + iterations; it++) {
        if (it == warmup) {
            be->synchronize(be);
            t0 = hs_now();
            fwd_bwd = 0.0;
        }
        const double ts = hs_now();
        hs_params_zero_grad(&params);
        const int labelled = hs_bert_stage_batch(model, host);
        const hs_step_ctx ctx = {.seed = 1, .update = (uint64_t)it, .training = 1,
                                 .loss_scale = {1.0 / labelled, 1.0 / batch}};
        be->zero(be, stats_dev, HS_STATS_NDOUBLE * sizeof(double));
        hs_bert_forward_backward(model, (int64_t)it * batch, &ctx, stats_dev);
        be->synchronize(be);
        fwd_bwd += hs_now() - ts;
        hs_optimizer_step(opt, 1e-4);
        double s[HS_STATS_NDOUBLE];
        be->download(be, s, stats_dev, sizeof s); /* once per step, as the trainer does */
        loss = s[HS_BERT_STAT_MLM_LOSS] / s[HS_BERT_STAT_MLM_COUNT] + s[HS_BERT_STAT_NSP_LOSS] / s[HS_BERT_STAT_SENTENCES];
    }
    be->synchronize(be);
    const double seconds = hs_now() - t0;
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    const double B = batch, L = SEQ, H = cfg.hidden_size, I = cfg.intermediate_size, N = cfg.num_hidden_layers;
    const double V = cfg.padded_vocab_size, Np = (double)batch * PRED;
    const double flops = 6.0 * B * L * N * (4 * H * H + 2 * H * I) + 12.0 * B * N * L * L * H +
                         6.0 * Np * (H * H + V * H) + 6.0 * B * (H * H + 2 * H);
    const double seq_per_s = B * iterations / seconds, gflops = flops * iterations / seconds / 1e9;
    const double sgemm = sgemm_gflops(fp32, batch * SEQ, (int)H, (int)I, 20);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("hetseq BERT-mini training (%zu parameters; batch %d x seq %d, %d predictions per sequence, dropout 0.1, "
           "%s, %s; %d threads, %d warm-up + %d timed steps)\n",
           hs_params_numel(&params), batch, SEQ, PRED, optim, precision, threads, warmup, iterations);
    printf("  %7.1f seq/s  %7.1f ms/step (fwd+bwd %6.1f)  %5.2f GFLOP/seq  %6.1f GFLOP/s  SGEMM %6.1f GFLOP/s  "
           "ratio %4.0f%%  peak RSS %6.0f MiB  loss %.3f\n",
           seq_per_s, 1e3 * seconds / iterations, 1e3 * fwd_bwd / iterations, flops / B / 1e9, gflops, sgemm,
           100.0 * gflops / sgemm, ru.ru_maxrss / 1024.0, loss);
    printf("  activations %.1f MiB (%s storage; HETSEQ_ACTIVATION_STORAGE=fp32 keeps fp32 under bf16)\n",
           hs_bert_activation_bytes(model) / 1048576.0, hs_bert_activations_16bit(model) ? "16-bit" : "fp32");
    hs_optimizer_free(opt);
    hs_bert_free(model);
    hs_params_free(&params);
    free(buf);
    return 0;
}
