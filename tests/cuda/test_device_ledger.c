/* The device-operation ledger counts exactly (docs/gpu.md, "The device-operation ledger"): a known
 * sequence of seam ops on the CUDA backend (the emulated device in `make check`) gives the launches,
 * library calls and copies each op is documented to make, with the bytes of its operands' shapes:
 *   gemm fp32                      1 cublasLtMatmul, no conversion
 *   gemm bf16                      + 2 to_half_kernel (GEMM operand) launches of (m·k + k·n)·(4 + 2) bytes
 *   layernorm_forward (no residual) 1 launch of rows·cols·2·4 + rows·2·4 + cols·2·4 bytes
 *   layernorm_backward             3 launches (partials, their sum, dx)
 *   zero, copy                     1 cudaMemsetAsync (n bytes), 1 device->device copy (2n bytes)
 *   scale_tensors                  1 launch of 2·4 bytes per element of a recorded table; without a
 *                                  record, unsized (the table's "+?")
 * Nothing is counted while counting is off; the peak follows allocations; update_end counts updates. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/ledger.h"

static int failures;
#define EXPECT_EQ(got, want, what)                                                                         \
    do {                                                                                                   \
        unsigned long long g_ = (unsigned long long)(got), w_ = (unsigned long long)(want);                \
        if (g_ != w_) {                                                                                    \
            fprintf(stderr, "FAIL %s:%d: %s: %llu, expected %llu\n", __FILE__, __LINE__, (what), g_, w_);  \
            failures++;                                                                                    \
        }                                                                                                  \
    } while (0)

static uint64_t calls(const char *name) {
    const hs_ledger_row *r = hs_ledger_find(name);
    return r ? r->calls : 0;
}
static uint64_t bytes(const char *name) {
    const hs_ledger_row *r = hs_ledger_find(name);
    return r ? r->bytes : 0;
}
static uint64_t unsized(const char *name) {
    const hs_ledger_row *r = hs_ledger_find(name);
    return r ? r->unsized : 0;
}

int main(void) {
    char why[256];
    const hs_backend *cuda = hs_backend_cuda(0, why, sizeof why);
    if (!cuda) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    const hs_backend *bf16 = hs_backend_with_precision(cuda, "bf16");
    enum { M = 24, N = 16, K = 40, ROWS = 10, COLS = 24, ELEMS = 300 };
    /* operands: a[M,K], b[K,N], c[M,N]; LayerNorm x, y, dy [ROWS,COLS], mean, rstd [ROWS], gamma, beta,
     * dgamma, dbeta [COLS]; flat[ELEMS] with a one-tensor table */
    float *a = cuda->alloc(cuda, M * K * sizeof(float)), *b = cuda->alloc(cuda, K * N * sizeof(float));
    float *c = cuda->alloc(cuda, M * N * sizeof(float));
    float *x = cuda->alloc(cuda, ROWS * COLS * sizeof(float)), *y = cuda->alloc(cuda, ROWS * COLS * sizeof(float));
    float *dy = cuda->alloc(cuda, ROWS * COLS * sizeof(float));
    float *mean = cuda->alloc(cuda, ROWS * sizeof(float)), *rstd = cuda->alloc(cuda, ROWS * sizeof(float));
    float *gamma = cuda->alloc(cuda, COLS * sizeof(float)), *beta = cuda->alloc(cuda, COLS * sizeof(float));
    float *dgamma = cuda->alloc(cuda, COLS * sizeof(float)), *dbeta = cuda->alloc(cuda, COLS * sizeof(float));
    float *flat = cuda->alloc(cuda, ELEMS * sizeof(float));
    const hs_tensor_span span = {.offset = 0, .numel = ELEMS, .decay = 0, .unused = 0};
    hs_tensor_span *table = cuda->alloc(cuda, sizeof span), *unrecorded = cuda->alloc(cuda, sizeof span);
    cuda->upload(cuda, table, &span, sizeof span);
    cuda->upload(cuda, unrecorded, &span, sizeof span);
    hs_ledger_table(table, ELEMS);
    float ones[COLS];
    for (int i = 0; i < COLS; i++) ones[i] = 1.0f;
    cuda->upload(cuda, gamma, ones, sizeof ones);
    cuda->upload(cuda, x, ones, sizeof ones); /* the first row; the rest are zeros */

    /* ---- off: nothing counted ---- */
    hs_ledger_reset();
    EXPECT_EQ(hs_ledger_state.counting, 0, "counting is off until asked");
    cuda->gemm(cuda, 0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
    EXPECT_EQ(hs_ledger_state.ops, 0, "ops counted while counting is off");

    /* ---- on: the known sequence ---- */
    hs_ledger_update_begin();
    cuda->gemm(cuda, 0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
    EXPECT_EQ(calls("cublasLtMatmul"), 1, "cublasLtMatmul calls after one fp32 gemm");
    EXPECT_EQ(calls("to_half_kernel (GEMM operand)"), 0, "conversions of an fp32 gemm");
    bf16->gemm(bf16, 0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
    EXPECT_EQ(calls("cublasLtMatmul"), 2, "cublasLtMatmul calls after a bf16 gemm");
    EXPECT_EQ(calls("to_half_kernel (GEMM operand)"), 2, "operand conversions of a bf16 gemm");
    EXPECT_EQ(bytes("to_half_kernel (GEMM operand)"), (uint64_t)(M * K + K * N) * 6, "bytes of the conversions");
    EXPECT_EQ(bytes("cublasLtMatmul"), 0, "a library call's bytes (not counted)");

    cuda->layernorm_forward(cuda, y, NULL, mean, rstd, x, NULL, gamma, beta, ROWS, COLS, 1e-5f);
    EXPECT_EQ(calls("layernorm_forward_kernel"), 1, "layernorm_forward launches");
    EXPECT_EQ(bytes("layernorm_forward_kernel"), (uint64_t)ROWS * COLS * 2 * 4 + ROWS * 2 * 4 + COLS * 2 * 4,
              "layernorm_forward bytes");
    cuda->layernorm_backward(cuda, dy, dgamma, dbeta, dy, x, mean, rstd, gamma, ROWS, COLS);
    EXPECT_EQ(calls("layernorm_backward_dx_kernel") + calls("layernorm_param_sum_kernel"), 2,
              "layernorm_backward launches (the parameter gradients' partial sums in the dx kernel)");

    cuda->zero(cuda, c, 100);
    cuda->copy(cuda, y, x, 64);
    EXPECT_EQ(calls("cudaMemsetAsync"), 1, "memsets");
    EXPECT_EQ(bytes("cudaMemsetAsync"), 100, "memset bytes");
    EXPECT_EQ(calls("cudaMemcpyAsync device->device"), 1, "device copies");
    EXPECT_EQ(bytes("cudaMemcpyAsync device->device"), 128, "device copy bytes (read + write)");

    cuda->scale_tensors(cuda, flat, 0.5f, table, 1);
    EXPECT_EQ(calls("for_each_kernel<scale_op>"), 1, "scale_tensors launches");
    EXPECT_EQ(bytes("for_each_kernel<scale_op>"), (uint64_t)ELEMS * 2 * 4, "scale_tensors bytes");
    EXPECT_EQ(unsized("for_each_kernel<scale_op>"), 0, "unsized launches on a recorded table");
    cuda->scale_tensors(cuda, flat, 0.5f, unrecorded, 1);
    EXPECT_EQ(unsized("for_each_kernel<scale_op>"), 1, "unsized launches on a table nobody recorded");
    hs_ledger_update_end();

    /* 2 gemm + 2 conversions + 1 + 2 LayerNorm + 1 memset + 1 copy + 2 scale */
    EXPECT_EQ(hs_ledger_state.ops, 11, "device ops of the sequence");
    EXPECT_EQ(hs_ledger_state.updates, 1, "updates counted");
    cuda->zero(cuda, c, 100);
    EXPECT_EQ(hs_ledger_state.ops, 11, "ops counted after the update ended");

    /* ---- peak device memory ---- */
    const uint64_t live = hs_ledger_state.live_bytes;
    EXPECT_EQ(hs_ledger_state.peak_bytes >= live && live > 0, 1, "peak >= live > 0");
    hs_ledger_reset();
    EXPECT_EQ(hs_ledger_state.peak_bytes, live, "the peak after a reset is the memory allocated now");
    void *big = cuda->alloc(cuda, 1 << 20);
    EXPECT_EQ(hs_ledger_state.live_bytes, live + (1 << 20), "live bytes after an alloc");
    cuda->free(cuda, big);
    EXPECT_EQ(hs_ledger_state.live_bytes, live, "live bytes after its free");
    EXPECT_EQ(hs_ledger_state.peak_bytes, live + (1 << 20), "the peak keeps the freed block");

    /* ---- the table ---- */
    FILE *out = tmpfile();
    if (!out) {
        perror("tmpfile");
        return 2;
    }
    hs_ledger_reset();
    hs_ledger_update_begin();
    bf16->gemm(bf16, 0, 0, M, N, K, 1.0f, a, K, b, N, 0.0f, c, N);
    cuda->scale_tensors(cuda, flat, 0.5f, unrecorded, 1);
    hs_ledger_update_end();
    hs_ledger_print(out, 1);
    rewind(out);
    char text[8192];
    size_t got = fread(text, 1, sizeof text - 1, out);
    text[got] = 0;
    fclose(out);
    fputs(text, stdout);
    EXPECT_EQ(strstr(text, "to_half_kernel (GEMM operand)") != NULL, 1, "the table names the conversions");
    EXPECT_EQ(strstr(text, "4 device ops (4.0 per update)") != NULL, 1, "the table's total");
    EXPECT_EQ(strstr(text, "launched without a byte count") != NULL, 1, "the table flags unsized launches");

    /* ---- the table after a warm-up (HETSEQ_CUDA_LEDGER_WARMUP): the updates before the mark left out ---- */
    hs_ledger_reset();
    for (int u = 0; u < 3; u++) { /* a first update of 3 memsets, then two of 1 */
        hs_ledger_update_begin();
        for (int k = 0; k < (u == 0 ? 3 : 1); k++) cuda->zero(cuda, c, 100);
        hs_ledger_update_end();
        if (u == 0) hs_ledger_mark();
    }
    out = tmpfile();
    if (!out) {
        perror("tmpfile");
        return 2;
    }
    hs_ledger_print_since_mark(out);
    rewind(out);
    got = fread(text, 1, sizeof text - 1, out);
    text[got] = 0;
    fclose(out);
    fputs(text, stdout);
    EXPECT_EQ(strstr(text, "over 2 update(s) after the first 1: 2 device ops (1.0 per update), 2e-07 GB") != NULL, 1,
              "the table since the mark: 2 updates of 1 memset of 100 bytes");
    EXPECT_EQ(hs_ledger_state.ops, 5, "the ledger itself keeps every update's ops");

    cuda->synchronize(cuda);
    printf("%s\n", failures ? "FAIL" : "PASS: the device-op ledger counts the known sequence exactly");
    return failures ? 1 : 0;
}
