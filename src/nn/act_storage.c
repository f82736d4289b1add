/* Which storage the models use for the activations they keep for the backward pass (nn/layers.h). */
#include <stdlib.h>
#include <string.h>

#include "nn/layers.h"
#include "util/check.h"

int hs_activations_16bit(const hs_backend *be) {
    const char *env = getenv("HETSEQ_ACTIVATION_STORAGE");
    if (env && *env && strcmp(env, "auto") != 0 && strcmp(env, "fp32") != 0)
        hs_die_all("HETSEQ_ACTIVATION_STORAGE = \"%s\": use \"auto\" (the default: 16 bits under precision bf16 "
                   "and fp16) or \"fp32\"",
                   env);
    const int reduced = be->precision == HS_PRECISION_BF16 || be->precision == HS_PRECISION_FP16;
    return reduced && !(env && strcmp(env, "fp32") == 0);
}
