/* The memory-bound kernels of the CUDA backend at BERT-large shapes (micro-batch 64 x 128 tokens,
 * hidden 1024, intermediate 4096, 16 heads, vocabulary 30522, 20 masked positions per sequence, the
 * 336M parameters of BERT-large as its tensors): time per call with cudaEvents on the backend's compute
 * stream, and GB/s from the bytes each call moves, next to the GPU's peak memory bandwidth.
 *
 * The bytes are the device-op ledger's (src/backend/ledger.h): each kernel's HS_CUDA_LAUNCHED gives what
 * it reads and writes from its operands' shapes, so this is also a check of those counts (the embedding
 * gradient's count is an upper bound: every id a distinct row). Peak = 2 x memory clock x bus width
 * (cudaDevAttrMemoryClockRate, cudaDevAttrGlobalMemoryBusWidth), or --peak-gbs.
 *
 * A second table times BERT's fused attention (flash_attention_forward / _backward, one layer's call)
 * at phase-1 (micro-batch 64 x 128) and phase-2 (32 x 512) shapes under bf16 and tf32, with the
 * model FLOPs of its products (forward 4·B·heads·L²·d, backward 8·B·heads·L²·d: the two products each way
 * without the backward's recomputation of S) per second beside the bytes per second: at phase 2 its
 * arithmetic, not its bytes, is the figure to watch (docs/gpu.md, the ledger notes of "What to expect").
 * Under bf16 the rows "(bf16 WMMA)" time the WMMA kernels that the register-fragment ones replace
 * (HETSEQ_FLASH_KERNELS=wmma), side by side.
 *
 *   usage: kernels_bench [--reps N] [--small] [--peak-gbs GB/s]
 *   --small: tiny shapes, for the emulated device (tests/cuda/test_kernels_bench.sh keeps it running);
 *   the figures on the emulator are the emulator's, not a GPU's.
 * Built by `make bench` in a --with-cuda build (bench/gpu/kernels_bench). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/ledger.h"

/* shapes */
static int B = 64, L = 128, H = 1024, I = 4096, HEADS = 16, V = 30522, POS = 512, MASKED = 20, LAYERS = 24;

static const hs_backend *be;
static cudaEvent_t ev0, ev1;
static int reps = 20;
static double peak_gbs;

static void *dev_alloc(size_t bytes) { return be->alloc(be, bytes ? bytes : 1); }

/* n values in [lo, hi) (a fixed LCG: the bench's inputs need no quality) uploaded to the device */
static float *dev_rand(size_t n, float lo, float hi) {
    float *h = malloc(n * sizeof *h);
    if (!h) HS_FATAL("out of memory", "malloc(%zu)", n * sizeof *h);
    uint64_t s = 0x9e3779b97f4a7c15ULL ^ n;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        h[i] = lo + (hi - lo) * (float)((s >> 40) * (1.0 / 16777216.0));
    }
    float *d = dev_alloc(n * sizeof *d);
    be->upload(be, d, h, n * sizeof *d);
    free(h);
    return d;
}

static int32_t *dev_ids(size_t n, int32_t (*id)(size_t i, void *arg), void *arg) {
    int32_t *h = malloc(n * sizeof *h);
    if (!h) HS_FATAL("out of memory", "malloc(%zu)", n * sizeof *h);
    for (size_t i = 0; i < n; i++) h[i] = id(i, arg);
    int32_t *d = dev_alloc(n * sizeof *d);
    be->upload(be, d, h, n * sizeof *d);
    free(h);
    return d;
}

static int32_t id_word(size_t i, void *arg) { /* random words, the sequence's first token [CLS] = 101 */
    const int v = *(const int *)arg;
    return i % (size_t)L == 0 ? 101 % v : (int32_t)((i * 2654435761u) % (size_t)v);
}
static int32_t id_position(size_t i, void *arg) { (void)arg; return (int32_t)(i % (size_t)L); }
static int32_t id_type(size_t i, void *arg) { (void)arg; return i % (size_t)L >= (size_t)L / 2; }
static int32_t id_label(size_t i, void *arg) { return (int32_t)((i * 40503u) % (size_t)*(const int *)arg); }

/* One row of the table: `call` once with the ledger counting (launches, bytes), once more to warm
 * up, then `reps` calls between two events. */
#define BENCH(label, shape, call)                                                                          \
    do {                                                                                                   \
        hs_ledger_reset();                                                                                 \
        hs_ledger_counting(1);                                                                             \
        call;                                                                                              \
        hs_ledger_counting(0);                                                                             \
        const uint64_t ops_ = hs_ledger_state.ops, bytes_ = hs_ledger_state.bytes;                        \
        call;                                                                                              \
        HS_CUDA_CHECK(cudaEventRecord(ev0, stream));                                                       \
        for (int r_ = 0; r_ < reps; r_++) call;                                                            \
        HS_CUDA_CHECK(cudaEventRecord(ev1, stream));                                                       \
        HS_CUDA_CHECK(cudaEventSynchronize(ev1));                                                          \
        float ms_ = 0;                                                                                     \
        HS_CUDA_CHECK(cudaEventElapsedTime(&ms_, ev0, ev1));                                               \
        report(label, shape, ops_, bytes_, ms_ / reps);                                                    \
    } while (0)

static double bench_flops; /* the model FLOPs of one call, for the attention table's TFLOP/s; 0: none */

static void report(const char *label, const char *shape, uint64_t ops, uint64_t bytes, double ms) {
    const double gbs = ms > 0 ? (double)bytes / (ms * 1e-3) * 1e-9 : 0;
    printf("| %-34s | %-22s | %8llu | %10.2f | %10.1f | %8.1f |", label, shape, (unsigned long long)ops,
           (double)bytes / 1e6, ms * 1e3, gbs);
    if (peak_gbs > 0)
        printf(" %5.0f%% |", 100.0 * gbs / peak_gbs);
    else
        printf("     ? |");
    if (bench_flops > 0) printf(" %8.1f |", ms > 0 ? bench_flops / (ms * 1e-3) * 1e-12 : 0.0);
    printf("\n");
}

/* BERT's fused attention, one layer's forward and backward at micro-batch b x l tokens, under `precision`
 * (the products' operands: bf16 reads q|k|v from the 16-bit copy a model keeps, as BERT does), dropout
 * 0.1 on the probabilities as BERT's attention_probs_dropout_prob. */
static void bench_attention(const hs_backend *with_precision, const char *precision, int b, int l) {
    const hs_backend *cuda = be;
    be = with_precision;
    cudaStream_t stream = hs_cuda_stream(be);
    const int d = H / HEADS, half = hs_precision_is_16bit(be->precision);
    const size_t n_qkv = (size_t)b * l * 3 * H, n_ctx = (size_t)b * l * H, n_lse = (size_t)b * HEADS * l;
    float *qkv = dev_rand(n_qkv, -1, 1), *dctx = dev_rand(n_ctx, -1e-3f, 1e-3f), *ctx = dev_alloc(n_ctx * 4);
    float *lse = dev_alloc(n_lse * 4), *dqkv = dev_alloc(n_qkv * 4), *mask_bias = dev_alloc((size_t)b * l * 4);
    be->zero(be, mask_bias, (size_t)b * l * 4); /* every key a real token */
    uint16_t *qkv16 = NULL;
    if (half) {
        qkv16 = dev_alloc(n_qkv * 2);
        be->to_half(be, qkv16, qkv, n_qkv);
    }
    char label[64], shape[64];
    const double per = (double)b * HEADS * (double)l * l * d;
    snprintf(shape, sizeof shape, "%d x %d, %d heads of %d", b, l, HEADS, d);
    /* under bf16 (16-bit tiles) a second round on the WMMA kernels the register-fragment ones replace
     * (HETSEQ_FLASH_KERNELS=wmma), side by side */
    const char *was = getenv("HETSEQ_FLASH_KERNELS");
    char *saved = was ? strdup(was) : NULL;
    for (int wmma = 0; wmma <= half; wmma++) {
        if (wmma) setenv("HETSEQ_FLASH_KERNELS", "wmma", 1);
        const char *kernels = wmma ? " WMMA" : "";
        bench_flops = 4.0 * per;
        snprintf(label, sizeof label, "flash_attention_forward (%s%s)", precision, kernels);
        BENCH(label, shape,
              be->flash_attention_forward(be, ctx, lse, qkv, qkv16, mask_bias, b, l, HEADS, d, 0.1f, 11, 0, NULL, NULL));
        bench_flops = 8.0 * per;
        snprintf(label, sizeof label, "flash_attention_backward (%s%s)", precision, kernels);
        BENCH(label, shape,
              be->flash_attention_backward(be, dqkv, dctx, qkv, qkv16, mask_bias, ctx, lse, b, l, HEADS, d, 0.1f, 11, 0,
                                           NULL));
    }
    if (saved)
        setenv("HETSEQ_FLASH_KERNELS", saved, 1), free(saved);
    else
        unsetenv("HETSEQ_FLASH_KERNELS");
    bench_flops = 0;
    be->free(be, qkv), be->free(be, dctx), be->free(be, ctx), be->free(be, lse), be->free(be, dqkv);
    be->free(be, mask_bias);
    if (qkv16) be->free(be, qkv16);
    be = cuda;
}

/* BERT-large's parameter tensors (numel), as src/tasks' BERT lays them out: embeddings, LAYERS
 * encoder layers, pooler, MLM head, NSP head. Returns the count; spans filled when non-NULL. */
static int bert_tensors(hs_tensor_span *spans, int64_t *total) {
    int64_t sizes[64 * 16 + 32];
    int n = 0;
    sizes[n++] = (int64_t)V * H, sizes[n++] = (int64_t)POS * H, sizes[n++] = 2 * (int64_t)H, sizes[n++] = H,
    sizes[n++] = H;
    for (int l = 0; l < LAYERS; l++) {
        for (int k = 0; k < 3; k++) sizes[n++] = (int64_t)H * H, sizes[n++] = H; /* q, k, v */
        sizes[n++] = (int64_t)H * H, sizes[n++] = H, sizes[n++] = H, sizes[n++] = H; /* o, LayerNorm */
        sizes[n++] = (int64_t)I * H, sizes[n++] = I, sizes[n++] = (int64_t)H * I, sizes[n++] = H;
        sizes[n++] = H, sizes[n++] = H;
    }
    sizes[n++] = (int64_t)H * H, sizes[n++] = H;                                  /* pooler */
    sizes[n++] = (int64_t)H * H, sizes[n++] = H, sizes[n++] = H, sizes[n++] = H; /* MLM transform */
    sizes[n++] = V, sizes[n++] = 2 * (int64_t)H, sizes[n++] = 2;                  /* decoder bias, NSP */
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        if (spans) {
            spans[i].offset = off;
            spans[i].numel = sizes[i];
            spans[i].decay = 1;
            spans[i].unused = 0;
        }
        off += (sizes[i] + 15) / 16 * 16; /* 64-byte aligned tensors, as the parameter table pads them */
    }
    *total = off;
    return n;
}

int main(int argc, char **argv) {
    double peak_arg = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--reps") && a + 1 < argc) {
            reps = atoi(argv[++a]);
        } else if (!strcmp(argv[a], "--small")) {
            B = 2, L = 16, H = 64, I = 256, HEADS = 2, V = 1000, POS = 32, MASKED = 3, LAYERS = 2;
        } else if (!strcmp(argv[a], "--peak-gbs") && a + 1 < argc) {
            peak_arg = atof(argv[++a]);
        } else {
            fprintf(stderr, "usage: %s [--reps N] [--small] [--peak-gbs GB/s]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) reps = 1;
    char why[256];
    be = hs_backend_cuda(0, why, sizeof why);
    if (!be) {
        printf("SKIP: no CUDA device: %s\n", why);
        return 77;
    }
    cudaStream_t stream = hs_cuda_stream(be);
    HS_CUDA_CHECK(cudaEventCreate(&ev0));
    HS_CUDA_CHECK(cudaEventCreate(&ev1));
    int dev = 0, clock_khz = 0, bus_bits = 0;
    HS_CUDA_CHECK(cudaGetDevice(&dev));
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev) != cudaSuccess)
        clock_khz = bus_bits = 0, (void)cudaGetLastError();
    peak_gbs = peak_arg > 0 ? peak_arg : 2.0 * clock_khz * 1e3 * bus_bits / 8 * 1e-9; /* DDR: 2 per clock */

    const int T = B * L, P = B * MASKED;
    int64_t nparams = 0;
    const int ntensors = bert_tensors(NULL, &nparams);
    printf("memory-bound kernels, BERT-%s shapes: %d x %d tokens, hidden %d, intermediate %d, heads %d, vocab %d, "
           "%d masked rows, %d tensors of %.1fM parameters; %d calls each\n",
           H == 1024 ? "large" : "small", B, L, H, I, HEADS, V, P, ntensors, (double)nparams / 1e6, reps);
    if (peak_arg > 0)
        printf("peak memory bandwidth %.0f GB/s (--peak-gbs)\n", peak_gbs);
    else if (peak_gbs > 0)
        printf("peak memory bandwidth %.0f GB/s (memory clock %d MHz x %d-bit bus x 2)\n", peak_gbs, clock_khz / 1000,
               bus_bits);
    else
        printf("peak memory bandwidth unknown (the device does not say; give --peak-gbs)\n");
    printf("\n| %-34s | %-22s | %8s | %10s | %10s | %8s | %6s |\n", "kernel (seam op)", "shape", "launches",
           "MB / call", "us / call", "GB/s", "peak");
    printf("|%s|%s|%s|%s|%s|%s|%s|\n", "------------------------------------", "------------------------",
           "---------:", "-----------:", "-----------:", "---------:", "-------:");

    char shape[64];
    const size_t TH = (size_t)T * H, TI = (size_t)T * I, PV = (size_t)P * V;
    float *x = dev_rand(TH, -1, 1), *res = dev_rand(TH, -1, 1), *y = dev_alloc(TH * 4), *xs = dev_alloc(TH * 4);
    float *dy = dev_rand(TH, -1, 1), *dx = dev_alloc(TH * 4);
    float *gamma = dev_rand((size_t)H, 0.5f, 1.5f), *beta = dev_rand((size_t)H, -1, 1);
    float *dgamma = dev_alloc((size_t)H * 4), *dbeta = dev_alloc((size_t)H * 4);
    float *mean = dev_alloc((size_t)T * 4), *rstd = dev_alloc((size_t)T * 4);
    be->zero(be, dgamma, (size_t)H * 4), be->zero(be, dbeta, (size_t)H * 4);

    snprintf(shape, sizeof shape, "%d x %d", T, H);
    BENCH("layernorm_forward", shape, be->layernorm_forward(be, y, NULL, mean, rstd, x, NULL, gamma, beta, T, H, 1e-12f));
    BENCH("layernorm_forward (+ residual)", shape,
          be->layernorm_forward(be, y, xs, mean, rstd, x, res, gamma, beta, T, H, 1e-12f));
    BENCH("layernorm_backward", shape, be->layernorm_backward(be, dx, dgamma, dbeta, dy, x, mean, rstd, gamma, T, H));
    BENCH("dropout_forward (hidden)", shape, be->dropout_forward(be, y, x, B, (size_t)L * H, 1, 0.1f, 7, 0));

    float *u = dev_rand(TI, -3, 3), *g = dev_alloc(TI * 4), *bias_i = dev_rand((size_t)I, -0.1f, 0.1f);
    snprintf(shape, sizeof shape, "%d x %d", T, I);
    BENCH("bias_gelu_forward", shape, be->bias_gelu_forward(be, g, u, bias_i, T, I, NULL, NULL));
    BENCH("gelu_backward", shape, be->gelu_backward(be, g, g, u, NULL, TI, NULL, NULL, NULL));
    be->free(be, g), be->free(be, bias_i);

    const size_t TP = (size_t)B * HEADS * L * L; /* attention probabilities */
    float *probs = dev_rand(TP, 0, 1);
    snprintf(shape, sizeof shape, "%d x %d x %d x %d", B, HEADS, L, L);
    BENCH("dropout_forward (attention probs)", shape,
          be->dropout_forward(be, probs, probs, B, (size_t)HEADS * L * L, 1, 0.1f, 8, 0));
    be->free(be, probs);

    /* the MLM loss over the masked rows */
    float *logits = dev_rand(PV, -4, 4), *logp = dev_alloc(PV * 4);
    int32_t *labels = dev_ids((size_t)P, id_label, &V);
    double *stats = dev_alloc(3 * sizeof(double));
    be->zero(be, stats, 3 * sizeof(double));
    snprintf(shape, sizeof shape, "%d x %d", P, V);
    BENCH("log_softmax_nll_forward", shape, be->log_softmax_nll_forward(be, logp, logits, labels, P, V, stats, NULL));
    BENCH("log_softmax_nll_backward", shape, be->log_softmax_nll_backward(be, logits, logp, NULL, NULL, labels, P, V, 1.0f / P, NULL));
    be->free(be, logits), be->free(be, logp), be->free(be, labels), be->free(be, stats);

    /* embeddings: the lookup and its gradient (word, position, token-type tables) */
    float *word = dev_rand((size_t)V * H, -0.05f, 0.05f), *pos = dev_rand((size_t)POS * H, -0.05f, 0.05f);
    float *type = dev_rand(2 * (size_t)H, -0.05f, 0.05f);
    int32_t *wid = dev_ids((size_t)T, id_word, &V), *pid = dev_ids((size_t)T, id_position, NULL);
    int32_t *tid = dev_ids((size_t)T, id_type, NULL);
    snprintf(shape, sizeof shape, "%d of %d x %d", T, V, H);
    BENCH("gather_rows (word embedding)", shape, be->gather_rows(be, y, word, wid, T, H, V, 0));
    BENCH("scatter_add_rows (word gradient)", shape, be->scatter_add_rows(be, word, dy, wid, T, H, V));
    snprintf(shape, sizeof shape, "%d of %d x %d", T, POS, H);
    BENCH("scatter_add_rows (position)", shape, be->scatter_add_rows(be, pos, dy, pid, T, H, POS));
    snprintf(shape, sizeof shape, "%d of 2 x %d", T, H);
    BENCH("scatter_add_rows (token type)", shape, be->scatter_add_rows(be, type, dy, tid, T, H, 2));
    be->free(be, word), be->free(be, pos), be->free(be, type);
    be->free(be, wid), be->free(be, pid), be->free(be, tid);
    be->free(be, x), be->free(be, res), be->free(be, y), be->free(be, xs), be->free(be, dy), be->free(be, dx);
    be->free(be, gamma), be->free(be, beta), be->free(be, dgamma), be->free(be, dbeta), be->free(be, mean);
    be->free(be, rstd), be->free(be, u);

    /* the optimizer over BERT-large's tensors, and the 16-bit copies of the weights */
    hs_tensor_span *spans = malloc((size_t)ntensors * sizeof *spans);
    if (!spans) HS_FATAL("out of memory", "malloc(%d spans)", ntensors);
    bert_tensors(spans, &nparams);
    int64_t covered = 0;
    for (int i = 0; i < ntensors; i++) covered += spans[i].numel;
    hs_tensor_span *table = dev_alloc((size_t)ntensors * sizeof *table);
    be->upload(be, table, spans, (size_t)ntensors * sizeof *table);
    hs_ledger_table(table, (uint64_t)covered);
    const size_t np = (size_t)nparams;
    float *p = dev_rand(np, -0.05f, 0.05f), *gr = dev_rand(np, -1e-3f, 1e-3f);
    float *m = dev_alloc(np * 4), *v = dev_alloc(np * 4);
    be->zero(be, m, np * 4), be->zero(be, v, np * 4);
    double *norms = dev_alloc((size_t)ntensors * 2 * sizeof(double)), *sumsq = dev_alloc((size_t)ntensors * 8);
    double *total = dev_alloc(sizeof(double));
    const hs_lamb_hparams lamb = {.lr = 1e-4, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-6, .weight_decay = 0.01,
                                  .grad_divisor = 1.0, .step = 1, .trust_ratio_on_no_decay = 0};
    snprintf(shape, sizeof shape, "%d tensors, %.1fM", ntensors, (double)covered / 1e6);
    BENCH("sumsq_tensors (gradient norm)", shape, be->sumsq_tensors(be, sumsq, total, gr, table, ntensors));
    BENCH("lamb_update", shape, be->lamb_update(be, p, gr, m, v, table, ntensors, norms, &lamb));
    be->free(be, gr), be->free(be, m), be->free(be, v);
    uint16_t *p16 = dev_alloc(np * 2);
    snprintf(shape, sizeof shape, "%.1fM", (double)np / 1e6);
    BENCH("to_half (fp32 -> 16 bits)", shape, be->to_half(be, p16, p, np));
    BENCH("from_half (16 bits -> fp32)", shape, be->from_half(be, p, p16, np));
    be->free(be, p16), be->free(be, p), be->free(be, norms), be->free(be, sumsq), be->free(be, total);
    be->free(be, table), free(spans);

    /* the fused attention: phase 1 and phase 2 (the phase-2 micro-batch is half phase 1's); the backends
     * of the two precisions made first (each logs its products' types) */
    const char *attention_precisions[] = {"bf16", "tf32"};
    const hs_backend *attention_be[2];
    for (int k = 0; k < 2; k++) attention_be[k] = hs_backend_with_precision(be, attention_precisions[k]);
    printf("\nBERT's fused attention, one layer: model TFLOP/s of its products (forward 4, backward 8 x "
           "B·heads·L²·d)\n\n| %-34s | %-22s | %8s | %10s | %10s | %8s | %6s | %8s |\n", "kernel (seam op)", "shape",
           "launches", "MB / call", "us / call", "GB/s", "peak", "TFLOP/s");
    printf("|%s|%s|%s|%s|%s|%s|%s|%s|\n", "------------------------------------", "------------------------",
           "---------:", "-----------:", "-----------:", "---------:", "-------:", "---------:");
    for (int k = 0; k < 2; k++) {
        bench_attention(attention_be[k], attention_precisions[k], B, L);
        bench_attention(attention_be[k], attention_precisions[k], B / 2 > 0 ? B / 2 : 1, 4 * L <= POS ? 4 * L : POS);
    }

    HS_CUDA_CHECK(cudaEventDestroy(ev0));
    HS_CUDA_CHECK(cudaEventDestroy(ev1));
    printf("\nbytes: what each call reads and writes in device memory, by the ledger's count from the shapes "
           "(scatter_add_rows: at most; every id a distinct row; the fused attention's tiles reread per block, "
           "which a GPU's L2 cache mostly serves)\n");
    return 0;
}
