/* The TFLOP/s and MFU a user reads in the training log: the model FLOPs per sample of BERT, of the
 * MNIST CNN and per token of Transformer-XL against a count of every matrix product of a tiny model made by hand, the GPU peak table
 * against the datasheet figures it is built from, the CPU peak measurement, and the log fields computed
 * from them (tflops = model FLOPs per second of the job, mfu = tflops ÷ (peak per rank × ranks)). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "backend/backend.h"
#include "tasks/model_flops.h"
#include "train/meters.h"
#include "train/mfu.h"

/* 2·m·n·k for one forward product [m,k]·[k,n] */
static double mm(double m, double n, double k) { return 2.0 * m * n * k; }

/* BERT with L = 2 layers, H = 8, 2 heads of d = 4, I = 32, V = 40, T = 6 tokens, P = 3 labelled.
 * Every product of the forward pass, as the model runs it:
 *   per layer: QKV [6,8]·[8,24] = 2304, output [6,8]·[8,8] = 768, FFN up [6,8]·[8,32] = 3072, FFN down
 *   [6,32]·[32,8] = 3072, per head Q·Kᵀ [6,4]·[4,6] = 288 and P·V [6,6]·[6,4] = 288 (× 2 heads):
 *   10 368 per layer, 20 736 for both;
 *   MLM transform [3,8]·[8,8] = 384, decoder [3,8]·[8,40] = 1 920, pooler [1,8]·[8,8] = 128, NSP
 *   classifier [1,8]·[8,2] = 32.
 * Forward 23 200; training (forward, data gradient, weight gradient of each) 3 × = 69 600. */
static void bert_flops_match_a_hand_count(void **unused) {
    (void)unused;
    const int L = 2, H = 8, heads = 2, d = H / heads, I = 32, V = 40, T = 6, P = 3;
    double layer = mm(T, 3 * H, H) + mm(T, H, H) + mm(T, I, H) + mm(T, H, I);
    for (int h = 0; h < heads; h++) layer += mm(T, T, d) + mm(T, d, T);
    const double forward = L * layer + mm(P, H, H) + mm(P, V, H) + mm(1, H, H) + mm(1, 2, H);
    assert_true(forward == 23200.0); /* the sums written out above */
    assert_true(3.0 * forward == 69600.0);
    assert_true(hs_bert_train_flops_per_sequence(L, H, I, V, T, P) == 69600.0);
    /* docs/gpu.md's 6·N + 12·L·H·T per token for the encoder, N = L·(4H² + 2HI) */
    const double N = L * (4.0 * H * H + 2.0 * H * I);
    const double encoder_only = hs_bert_train_flops_per_sequence(L, H, I, V, T, 0) - 6.0 * (H * H + 2.0 * H);
    assert_true(encoder_only == T * (6.0 * N + 12.0 * L * H * T));
    /* each term moves the count: a layer, a labelled position, a vocabulary row */
    assert_true(hs_bert_train_flops_per_sequence(L + 1, H, I, V, T, P) == 69600.0 + 3.0 * layer);
    assert_true(hs_bert_train_flops_per_sequence(L, H, I, V, T, P + 1) == 69600.0 + 3.0 * (mm(1, H, H) + mm(1, V, H)));
    assert_true(hs_bert_train_flops_per_sequence(L, H, I, V + 1, T, P) == 69600.0 + 3.0 * mm(P, 1, H));
}

/* The CNN per image, each convolution as its im2col product [outputs, c_in·k·k]·[c_in·k·k, c_out]:
 *   conv1 [676,9]·[9,32] = 389 376, trained 2 × (no gradient for the input images) = 778 752
 *   conv2 [576,288]·[288,64] = 21 233 664, 3 × = 63 700 992
 *   fc1 [1,9216]·[9216,128] = 2 359 296, 3 × = 7 077 888;  fc2 [1,128]·[128,10] = 2 560, 3 × = 7 680
 * 71 565 312 in all. */
static void cnn_flops_match_a_hand_count(void **unused) {
    (void)unused;
    const double count = 2 * mm(26 * 26, 32, 1 * 3 * 3) + 3 * mm(24 * 24, 64, 32 * 3 * 3) + 3 * mm(1, 128, 9216) +
                         3 * mm(1, 10, 128);
    assert_true(count == 778752.0 + 63700992.0 + 7077888.0 + 7680.0);
    assert_true(hs_cnn_train_flops_per_image() == 71565312.0);
}

/* Transformer-XL, L = 2 layers, 2 heads of d = 3 (nd = 6), D = 8, I = 16, q = 4 predicted tokens, m = 2
 * memory steps (k = 6 keys), adaptive softmax head of h = 10 columns in e = 5 embedding columns (so a
 * projection [4,8]·[8,5]). One segment of one column, every product as the model runs it:
 *   qkv_net on cat(memory, segment) [6,8]·[8,18] = 1728: the 4 segment rows trained 3 × (1152 each),
 *     the 2 memory rows 2 × (576 each: detached, no data gradient) -> 3456 + 1152 = 4608;
 *   per head (q_i + r_w_bias)·k_j [4,3]·[3,6] = 144, (q_i + r_r_bias)·r_t [4,3]·[3,6] = 144,
 *     P·V [4,6]·[6,3] = 144, 2 heads, 3 × -> 2592; o_net [4,6]·[6,8] = 384, feed-forward [4,8]·[8,16] +
 *     [4,16]·[16,8] = 2048, 3 × -> 7296; per layer 4608 + 2592 + 7296 = 14 496, two layers 28 992;
 *   softmax projection [4,8]·[8,5] = 320 and head [4,5]·[5,10] = 400, 3 × -> 2160.
 * 31 152 for the segment's 4 tokens: 7788 per token. */
static void txl_flops_match_a_hand_count(void **unused) {
    (void)unused;
    const double q = 4, m = 2, k = q + m, nd = 6, D = 8, I = 16, e = 5, h = 10;
    const double qkv = 3 * mm(q, 3 * nd, D) + 2 * mm(m, 3 * nd, D);
    const double attention = 3 * 2 * (mm(q, k, 3) + mm(q, k, 3) + mm(q, 3, k));
    const double rest = 3 * (mm(q, D, nd) + mm(q, I, D) + mm(q, D, I));
    const double segment = 2 * (qkv + attention + rest) + 3 * (mm(q, e, D) + mm(q, h, e));
    assert_true(segment == 31152.0); /* the sums written out above */
    assert_true(hs_txl_train_flops_per_token(2, 2, 3, 8, 16, 4, 2, 5, 10) == segment / q);
    /* without a projection (e = D) only the head remains of the softmax */
    assert_true(hs_txl_train_flops_per_token(2, 2, 3, 8, 16, 4, 2, 8, 10) ==
                (2 * (qkv + attention + rest) + 3 * mm(q, h, 8)) / q);
    /* no memory: the qkv_net of the memory rows and their keys go */
    assert_true(hs_txl_train_flops_per_token(2, 2, 3, 8, 16, 4, 0, 5, 10) ==
                (2 * (3 * mm(q, 3 * nd, D) + 3 * 2 * 3 * mm(q, q, 3) + rest) + 3 * (mm(q, e, D) + mm(q, h, e))) / q);
}

static void assert_rel(double got, double want, double rel) {
    if (!(fabs(got - want) <= rel * fabs(want))) fail_msg("got %.17g, expected %.17g", got, want);
}

/* Datasheet figures: A100 SXM (8.0, 108 SMs) 19.5 / 156 / 312 / 312 TFLOP/s fp32 / tf32 / bf16 / fp16,
 * A30 (8.0, 56 SMs) scaled from it; V100 (7.0) has no TF32 (fp32 math) and no bf16. */
static void gpu_peaks_come_from_the_table(void **unused) {
    (void)unused;
    char source[128];
    assert_rel(hs_mfu_gpu_peak(8, 0, 108, "fp32", source, sizeof source), 19.5e12, 1e-12);
    assert_rel(hs_mfu_gpu_peak(8, 0, 108, "tf32", NULL, 0), 156e12, 1e-12);
    assert_rel(hs_mfu_gpu_peak(8, 0, 108, "bf16", source, sizeof source), 312e12, 1e-12);
    assert_non_null(strstr(source, "table"));
    assert_rel(hs_mfu_gpu_peak(8, 0, 108, "fp16", NULL, 0), 312e12, 1e-12);
    assert_rel(hs_mfu_gpu_peak(8, 0, 56, "bf16", NULL, 0), 312e12 * 56 / 108, 1e-12);
    assert_rel(hs_mfu_gpu_peak(7, 0, 80, "tf32", source, sizeof source), 15.7e12, 1e-12);
    assert_non_null(strstr(source, "fp32"));
    assert_true(hs_mfu_gpu_peak(7, 0, 80, "bf16", NULL, 0) == 0);
    assert_rel(hs_mfu_gpu_peak(9, 0, 132, "bf16", NULL, 0), 989.4e12, 1e-12);
    assert_true(hs_mfu_gpu_peak(6, 1, 28, "fp32", NULL, 0) == 0); /* not in the table: no MFU */
}

/* The CPU peak is a real product's rate: positive and finite (its size is not a test). */
static void cpu_peak_is_measured(void **unused) {
    (void)unused;
    const double rate = hs_mfu_measure_gemm(hs_backend_cpu(), 64, 0.01);
    assert_true(isfinite(rate) && rate > 0);
}

/* ---- the log fields -------------------------------------------------------------------------------- */

static double fake_flops(hs_task *t) {
    (void)t;
    return 2.5e9;
}

static json_object *last_record(const char *path) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[4096], last[4096] = "";
    while (fgets(line, sizeof line, f)) memcpy(last, line, sizeof line);
    assert_int_equal(fclose(f), 0);
    json_object *o = json_tokener_parse(last);
    assert_non_null(o);
    return o;
}

static double number(json_object *o, const char *key) {
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v)) fail_msg("no \"%s\" in the record", key);
    return json_object_get_double(v);
}

/* 40 sequences of 2.5 GFLOP in 0.5 s on 2 ranks = 0.2 TFLOP/s; against 250 GFLOP/s per rank, MFU 0.4.
 * With the peak unknown, mfu is null and tflops stays. */
static void log_fields_are_flops_over_time_and_peak(void **unused) {
    (void)unused;
    char path[] = "/tmp/hetseq_test_flops_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    hs_task task = {.name = "fake", .flops_per_sample = fake_flops};
    FILE *console = tmpfile();
    assert_non_null(console);
    for (int known = 1; known >= 0; known--) {
        hs_meters m;
        hs_meters_init(&m, &task, path, 0);
        m.console = console;
        m.peak_ready = 1; /* as if measured */
        m.peak_flops = known ? 250e9 : 0;
        hs_train_state st;
        memset(&st, 0, sizeof st);
        st.epoch = 1;
        st.num_updates = 4;
        m.interval.sample_count = 40;
        m.interval_time = 0.5;
        m.interval_updates = 4;
        hs_meters_log_train(&m, &st, 4, 10, 1e-4, 2);
        hs_meters_close(&m);
        json_object *o = last_record(path);
        assert_rel(number(o, "tflops"), 0.2, 1e-6);
        json_object *mfu;
        assert_true(json_object_object_get_ex(o, "mfu", &mfu));
        if (known) assert_rel(json_object_get_double(mfu), 0.4, 1e-6);
        else assert_null(mfu);
        json_object_put(o);
    }
    /* the console line carries the same figures */
    char text[8192] = "";
    rewind(console);
    size_t got = fread(text, 1, sizeof text - 1, console);
    text[got] = 0;
    assert_non_null(strstr(text, ", tflops=0.2, mfu=0.400, "));
    assert_non_null(strstr(text, ", tflops=0.2, ups="));
    assert_int_equal(fclose(console), 0);
    unlink(path);
}

/* A peak below the model's own rate (measured while other work used the cores): no MFU above 1 is
 * logged; without a backend to re-measure on, the model's rate per rank (0.1 TFLOP/s) becomes the peak. */
static void mfu_never_exceeds_one(void **unused) {
    (void)unused;
    char path[] = "/tmp/hetseq_test_flops_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    hs_task task = {.name = "fake", .flops_per_sample = fake_flops};
    FILE *console = tmpfile();
    assert_non_null(console);
    hs_meters m;
    hs_meters_init(&m, &task, path, 0);
    m.console = console;
    m.peak_ready = 1;
    m.peak_flops = 50e9; /* 0.2 TFLOP/s on 2 ranks against 2 × 50 GFLOP/s would read mfu=2 */
    hs_train_state st;
    memset(&st, 0, sizeof st);
    st.epoch = 1;
    st.num_updates = 4;
    m.interval.sample_count = 40;
    m.interval_time = 0.5;
    m.interval_updates = 4;
    hs_meters_log_train(&m, &st, 4, 10, 1e-4, 2);
    hs_meters_close(&m);
    json_object *o = last_record(path);
    assert_rel(number(o, "tflops"), 0.2, 1e-6);
    assert_true(number(o, "mfu") <= 1.0);
    assert_rel(number(o, "mfu"), 1.0, 1e-6);
    json_object_put(o);
    assert_rel(m.peak_flops, 0.1e12, 1e-9);
    char text[8192] = "";
    rewind(console);
    size_t got = fread(text, 1, sizeof text - 1, console);
    text[got] = 0;
    assert_non_null(strstr(text, ", tflops=0.2, mfu=1.000, "));
    assert_int_equal(fclose(console), 0);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bert_flops_match_a_hand_count),
        cmocka_unit_test(cnn_flops_match_a_hand_count),
        cmocka_unit_test(txl_flops_match_a_hand_count),
        cmocka_unit_test(gpu_peaks_come_from_the_table),
        cmocka_unit_test(cpu_peak_is_measured),
        cmocka_unit_test(log_fields_are_flops_over_time_and_peak),
        cmocka_unit_test(mfu_never_exceeds_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
