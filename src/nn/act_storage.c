/* How the models store the activations they keep for the backward pass (nn/layers.h): fp32 or the
 * 16-bit type of the precision, and the counting allocator of their activation buffers. */
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"
#include "util/check.h"

float *hs_act_floats(const hs_backend *be, size_t *bytes, size_t n) {
    *bytes += n * sizeof(float);
    return be->alloc(be, (n ? n : 1) * sizeof(float));
}

uint16_t *hs_act_halves(const hs_backend *be, size_t *bytes, size_t n) {
    *bytes += n * sizeof(uint16_t);
    return be->alloc(be, (n ? n : 1) * sizeof(uint16_t));
}

/* t[n] as convert_halves' conversions, each one way; count 0: not kept (fused attention's probs) */
static void act16_convert(const hs_backend *be, const hs_act16 *t, int n, int to_half) {
    if (n > HS_HALF_CONVERSIONS_MAX) HS_FATAL(NULL, "%d stored activations, at most %d", n, HS_HALF_CONVERSIONS_MAX);
    hs_half_conversion c[HS_HALF_CONVERSIONS_MAX];
    int live = 0;
    for (int k = 0; k < n; k++)
        if (t[k].count) c[live++] = (hs_half_conversion){t[k].f, t[k].u, t[k].count, to_half};
    if (live) be->convert_halves(be, c, live);
}

void hs_act16_store(const hs_backend *be, const hs_act16 *t, int n) { act16_convert(be, t, n, 1); }

void hs_act16_load(const hs_backend *be, const hs_act16 *t, int n) { act16_convert(be, t, n, 0); }

int hs_activations_16bit(const hs_backend *be) {
    const char *env = getenv("HETSEQ_ACTIVATION_STORAGE");
    if (env && *env && strcmp(env, "auto") != 0 && strcmp(env, "fp32") != 0)
        hs_die_all("HETSEQ_ACTIVATION_STORAGE = \"%s\": use \"auto\" (the default: 16 bits under precision bf16 "
                   "and fp16) or \"fp32\"",
                   env);
    const int reduced = be->precision == HS_PRECISION_BF16 || be->precision == HS_PRECISION_FP16;
    return reduced && !(env && strcmp(env, "fp32") == 0);
}

int hs_attention_fused(const hs_backend *be, const char *mode) {
    if (!mode || strcmp(mode, "auto") == 0) return !be->memory_is_host;
    return strcmp(mode, "fused") == 0;
}
