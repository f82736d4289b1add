/* Speed of BERT's layers on the CPU backend at BERT-mini sizes (batch 32, seq 128, hidden 256, 4 heads,
 * intermediate 1024, vocab 30522, 20 predictions per sequence), next to the SGEMM of one FFN
 * projection for scale: milliseconds per call (best of the repetitions) with OMP_NUM_THREADS threads.
 *   usage: bert_kernels_bench [REPETITIONS] */
#include <stdio.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend/backend.h"
#include "math/hs_math.h"
#include "nn/layers.h"
#include "util/timer.h"

enum { B = 32, L = 128, H = 256, HEADS = 4, I = 1024, V = 30522, NP = 640 };

static const hs_backend *be;
static int reps;

static float *randbuf(size_t n, float lo, float hi, uint64_t stream) {
    float *v = be->alloc(be, n * sizeof *v);
    const uint64_t key = hs_rng_key(3, 3, stream);
    for (size_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * hs_uniform(key, 0, i);
    return v;
}

#define TIME(label, work, flops)                                                                              \
    do {                                                                                                      \
        double best = 1e30;                                                                                   \
        for (int rep_ = 0; rep_ < reps; rep_++) {                                                             \
            const double t0_ = hs_now();                                                                      \
            work;                                                                                             \
            const double dt_ = hs_now() - t0_;                                                                \
            if (dt_ < best) best = dt_;                                                                       \
        }                                                                                                     \
        if ((flops) > 0)                                                                                      \
            printf("%-40s %8.3f ms  %7.1f GFLOP/s\n", label, best * 1e3, (double)(flops) / best * 1e-9);    \
        else                                                                                                  \
            printf("%-40s %8.3f ms\n", label, best * 1e3);                                                    \
    } while (0)

int main(int argc, char **argv) {
    reps = argc > 1 ? atoi(argv[1]) : 10;
    if (reps < 1) reps = 1;
    be = hs_backend_cpu();
    const int T = B * L;
#ifdef _OPENMP
    printf("threads %d, BERT-mini shapes: B %d L %d H %d heads %d I %d V %d predictions %d\n", omp_get_max_threads(),
           B, L, H, HEADS, I, V, NP);
#endif
    float *x = randbuf((size_t)T * H, -1, 1, 1), *x2 = randbuf((size_t)T * H, -1, 1, 2);
    float *w1 = randbuf((size_t)I * H, -0.05f, 0.05f, 3), *u = randbuf((size_t)T * I, -3, 3, 4);
    float *g = be->alloc(be, (size_t)T * I * sizeof(float)), *du = randbuf((size_t)T * I, -1, 1, 5);
    float *bias = randbuf(I, -0.1f, 0.1f, 6), *gamma = randbuf(H, 0.5f, 1.5f, 7), *beta = randbuf(H, -1, 1, 8);
    float *y = be->alloc(be, (size_t)T * H * sizeof(float)), *sum = be->alloc(be, (size_t)T * H * sizeof(float));
    float *mean = be->alloc(be, (size_t)T * sizeof(float)), *rstd = be->alloc(be, (size_t)T * sizeof(float));
    float *dgamma = be->alloc(be, H * sizeof(float)), *dbeta = be->alloc(be, H * sizeof(float));

    TIME("SGEMM FFN up [4096x256]x[256x1024]", be->gemm(be, 0, 1, T, I, H, 1.0f, x, H, w1, H, 0.0f, g, I),
         2.0 * T * I * H);
    TIME("bias+GELU forward [4096,1024]", be->bias_gelu_forward(be, g, u, bias, T, I, NULL, NULL), 0);
    TIME("GELU backward [4096,1024]", be->gelu_backward(be, g, du, u, NULL, (size_t)T * I, NULL, NULL, NULL), 0);
    TIME("add+LayerNorm forward [4096,256]",
         be->layernorm_forward(be, y, sum, mean, rstd, x, x2, gamma, beta, T, H, 1e-12f), 0);
    TIME("LayerNorm backward [4096,256]",
         be->layernorm_backward(be, sum, dgamma, dbeta, x2, x, mean, rstd, gamma, T, H), 0);

    /* attention: qkv [B,L,3H] */
    float *qkv = randbuf((size_t)T * 3 * H, -1, 1, 9), *ctx = be->alloc(be, (size_t)T * H * sizeof(float));
    float *probs = be->alloc(be, (size_t)B * HEADS * L * L * sizeof(float)), *dqkv = be->alloc(be, (size_t)T * 3 * H * sizeof(float));
    float *mask_bias = be->alloc(be, (size_t)B * L * sizeof(float));
    const double att_flops = 2.0 * 2.0 * B * HEADS * (double)L * L * (H / HEADS);
    TIME("attention core forward, no dropout",
         be->attention_forward(be, ctx, probs, qkv, mask_bias, B, L, HEADS, H / HEADS, 0.0f, 1, 0), att_flops);
    TIME("attention core forward, dropout 0.1",
         be->attention_forward(be, ctx, probs, qkv, mask_bias, B, L, HEADS, H / HEADS, 0.1f, 1, 0), att_flops);
    TIME("attention core backward, dropout 0.1",
         be->attention_backward(be, dqkv, x, qkv, probs, B, L, HEADS, H / HEADS, 0.1f, 1, 0), 2 * att_flops);

    /* whole attention layer with Q/K/V projections */
    hs_attention_dims dims = {B, L, H, HEADS};
    float *wqkv = randbuf((size_t)3 * H * H, -0.05f, 0.05f, 10), *bqkv = randbuf((size_t)3 * H, -0.1f, 0.1f, 11);
    float *gw = be->alloc(be, (size_t)3 * H * H * sizeof(float)), *gb = be->alloc(be, (size_t)3 * H * sizeof(float));
    hs_attention_params ap = {wqkv, bqkv, wqkv + H * H, bqkv + H, wqkv + 2 * H * H, bqkv + 2 * H};
    hs_attention_grads ag = {.query_w = gw, .query_b = gb, .key_w = gw + H * H, .key_b = gb + H,
                             .value_w = gw + 2 * H * H, .value_b = gb + 2 * H};
    hs_attention_saved saved = {.qkv = qkv, .probs = probs}; /* unfused (lse NULL): the CPU's reference path */
    hs_dropout_mask drop = {.p = 0.1f, .group = 1, .key = 5, .first_sample = 0};
    hs_workspace ws = {0};
    const double proj_flops = 2.0 * T * 3.0 * H * H;
    TIME("attention layer forward (QKV + core)", hs_attention_forward(be, &dims, &ap, mask_bias, &drop, x, &saved, ctx),
         proj_flops + att_flops);
    TIME("attention layer backward", hs_attention_backward(be, &dims, &ap, &ag, &drop, x, &saved, x2, y, 0, &ws),
         2 * proj_flops + 2 * att_flops);

    /* MLM loss over the vocabulary */
    float *logits = randbuf((size_t)NP * V, -5, 5, 12);
    int32_t *labels = be->alloc(be, NP * sizeof(int32_t));
    for (int i = 0; i < NP; i++) labels[i] = (i * 977) % V;
    double stats[3] = {0};
    TIME("softmax xent forward [640,30522]", be->softmax_xent_forward(be, logits, logits, labels, NP, V, stats), 0);
    TIME("softmax xent backward [640,30522]", be->softmax_xent_backward(be, logits, logits, labels, NP, V, 1.0f / NP), 0);

    /* embeddings */
    float *table = randbuf((size_t)V * H, -0.1f, 0.1f, 13);
    int32_t *ids = be->alloc(be, (size_t)T * sizeof(int32_t));
    for (int t = 0; t < T; t++) ids[t] = (t * 7919) % V;
    TIME("embedding forward [4096,256]", be->gather_rows(be, y, table, ids, T, H, V, 0), 0);
    TIME("embedding backward (scatter-add)", be->scatter_add_rows(be, table, x, ids, T, H, V), 0);
    hs_workspace_release(be, &ws);
    return 0;
}
