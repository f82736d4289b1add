/* Conformance cases of the seam's 16-bit storage conversions (to_half, from_half: kernels/lowp.cu
 * against src/backend/cpu/cpu_lowp.c) under bf16 and fp16: the CUDA results must equal the CPU's
 * BIT FOR BIT (both use src/util/lowp.h), on random values of every magnitude and on the edge cases of
 * the roundings (±0, ties, fp16 subnormals and overflow, infinities, NaN), for the element-wise sizes;
 * from_half on every one of the 65 536 bit patterns. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "util/check.h"

/* bytes of the CPU's and CUDA's results, equal or a failure naming the first differing element */
static void same_bits(hs_conf *t, const char *what, const void *cpu_dev, const void *cuda_dev, size_t n, size_t elem) {
    unsigned char *a = hs_conf_fetch(t->cpu, cpu_dev, n * elem), *b = hs_conf_fetch(t->cuda, cuda_dev, n * elem);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(a + i * elem, b + i * elem, elem) && !bad++) first = i;
    t->checks++;
    if (bad) {
        t->failures++;
        uint32_t x = 0, y = 0;
        memcpy(&x, a + first * elem, elem);
        memcpy(&y, b + first * elem, elem);
        printf("FAIL %s: %s: %zu of %zu values differ; first at [%zu]: cpu 0x%x cuda 0x%x\n", t->op, what, bad, n,
               first, (unsigned)x, (unsigned)y);
    }
    free(a), free(b);
}

/* Values that exercise the roundings: both signs of zero, ties of bf16 and fp16, the fp16 overflow
 * threshold 65520 and the subnormal range, infinities and NaN; the rest random over many magnitudes. */
static float *edge_values(hs_conf *t, size_t n) {
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x3f808000u, 0x3f818000u, 0x3f800001u, 0x3f807fffu,
                                       0x477fe000u, 0x477ff000u, 0x477fefffu, 0xc77ff000u, 0x33000000u, 0x33000001u,
                                       0x33800000u, 0x387fc000u, 0x38800000u, 0x00000001u, 0x7f7fffffu, 0xff7fffffu,
                                       0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u};
    float *x = hs_conf_rand(t, n, -1, 1);
    float *e = hs_conf_rand(t, n, -40, 40);
    for (size_t i = 0; i < n; i++) x[i] = ldexpf(x[i], (int)e[i]); /* 2^-40 .. 2^40 */
    for (size_t i = 0; i < n && i < sizeof special / sizeof special[0]; i++) memcpy(&x[i], &special[i], 4);
    free(e);
    return x;
}

static void half_cases(hs_conf *t) {
    char what[96];
    hs_conf_op(t, t->precision == HS_PRECISION_BF16 ? "to_half/from_half (bf16)" : "to_half/from_half (fp16)");
    for (int s = 0; s < hs_conf_nsizes; s++) {
        const size_t n = hs_conf_sizes[s];
        float *x = edge_values(t, n);
        void *x0, *x1, *h0, *h1, *y0, *y1;
        hs_conf_both(t, x, n * sizeof(float), &x0, &x1);
        hs_conf_both(t, NULL, n * sizeof(uint16_t), &h0, &h1);
        hs_conf_both(t, NULL, n * sizeof(float), &y0, &y1);
        t->cpu->to_half(t->cpu, h0, x0, n);
        t->cuda->to_half(t->cuda, h1, x1, n);
        snprintf(what, sizeof what, "to_half n=%zu", n);
        same_bits(t, what, h0, h1, n, sizeof(uint16_t));
        /* widening the CPU's 16-bit values on both devices */
        uint16_t *hh = hs_conf_fetch(t->cpu, h0, n * sizeof(uint16_t));
        t->cuda->upload(t->cuda, h1, hh, n * sizeof(uint16_t));
        t->cpu->from_half(t->cpu, y0, h0, n);
        t->cuda->from_half(t->cuda, y1, h1, n);
        snprintf(what, sizeof what, "from_half(to_half(x)) n=%zu", n);
        same_bits(t, what, y0, y1, n, sizeof(float));
        if (n > 1) { /* one element in: pointers off the 16-byte steps of the vector path */
            t->cpu->to_half(t->cpu, (uint16_t *)h0 + 1, (const float *)x0 + 1, n - 1);
            t->cuda->to_half(t->cuda, (uint16_t *)h1 + 1, (const float *)x1 + 1, n - 1);
            t->cpu->from_half(t->cpu, (float *)y0 + 1, (const uint16_t *)h0 + 1, n - 1);
            t->cuda->from_half(t->cuda, (float *)y1 + 1, (const uint16_t *)h1 + 1, n - 1);
            snprintf(what, sizeof what, "to_half, from_half unaligned n=%zu", n - 1);
            same_bits(t, what, y0, y1, n, sizeof(float));
            same_bits(t, what, h0, h1, n, sizeof(uint16_t));
        }
        free(hh), free(x);
        hs_conf_free_both(t, x0, x1), hs_conf_free_both(t, h0, h1), hs_conf_free_both(t, y0, y1);
    }
    /* every 16-bit pattern, NaN payloads included */
    const size_t n = 65536;
    uint16_t *all;
    HS_ALLOC(all, n);
    for (size_t i = 0; i < n; i++) all[i] = (uint16_t)i;
    void *h0, *h1, *y0, *y1;
    hs_conf_both(t, all, n * sizeof(uint16_t), &h0, &h1);
    hs_conf_both(t, NULL, n * sizeof(float), &y0, &y1);
    t->cpu->from_half(t->cpu, y0, h0, n);
    t->cuda->from_half(t->cuda, y1, h1, n);
    same_bits(t, "from_half of every 16-bit pattern", y0, y1, n, sizeof(float));
    hs_conf_free_both(t, h0, h1), hs_conf_free_both(t, y0, y1);
    free(all);
}

void hs_conf_group_half(hs_conf *t) {
    if (t->precision == HS_PRECISION_BF16 || t->precision == HS_PRECISION_FP16) half_cases(t);
}
