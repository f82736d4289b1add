#include "nn/grads_ready.h"

#include <stdlib.h>

#include "util/check.h"

void hs_grads_ready_init(hs_grads_ready *g, const hs_params *p, int n_stages) {
    if (n_stages < 1) HS_FATAL(NULL, "hs_grads_ready_init: %d stages", n_stages);
    g->n_stages = n_stages;
    g->n_tensors = p->count;
    HS_ALLOC(g->last, p->count > 0 ? p->count : 1);
    for (int i = 0; i < p->count; i++) g->last[i] = -1;
    g->ready = NULL;
}

void hs_grads_ready_writes(hs_grads_ready *g, int tensor, int stage) {
    if (tensor < 0) return;
    if (tensor >= g->n_tensors || stage < 0 || stage >= g->n_stages)
        HS_FATAL(NULL, "hs_grads_ready_writes: tensor %d of %d, stage %d of %d", tensor, g->n_tensors, stage,
                 g->n_stages);
    if (stage > g->last[tensor]) g->last[tensor] = stage;
}

void hs_grads_ready_writes_grad(hs_grads_ready *g, const hs_params *p, const float *grad, int stage) {
    if (grad) hs_grads_ready_writes(g, hs_params_tensor_of_grad(p, grad), stage);
}

void hs_grads_ready_build(hs_grads_ready *g, const hs_params *p) {
    if (g->n_tensors != p->count) HS_FATAL(NULL, "hs_grads_ready_build: the table changed since init");
    for (int i = 0; i < p->count; i++) {
        if (g->last[i] < 0) HS_FATAL(NULL, "hs_grads_ready_build: no backward stage writes %s", p->tensors[i].name);
        /* hs_params_declare lays tensors out in declaration order: the suffix walk below relies on it */
        if (i > 0 && p->tensors[i].offset <= p->tensors[i - 1].offset)
            HS_FATAL(NULL, "hs_grads_ready_build: tensor %s not above its predecessor", p->tensors[i].name);
    }
    free(g->ready);
    HS_ALLOC(g->ready, g->n_stages);
    /* ready(s) is non-increasing in s: walk the suffix down from the top, one stage at a time */
    int first_final = p->count; /* tensors [first_final, count) are final */
    int64_t previous = (int64_t)p->total;
    for (int s = 0; s < g->n_stages; s++) {
        while (first_final > 0 && g->last[first_final - 1] <= s) first_final--;
        const int64_t offset = first_final < p->count ? (int64_t)p->tensors[first_final].offset : (int64_t)p->total;
        g->ready[s] = offset < previous ? offset : -1;
        if (offset < previous) previous = offset;
    }
}

void hs_grads_ready_free(hs_grads_ready *g) {
    free(g->last);
    free(g->ready);
    g->last = NULL;
    g->ready = NULL;
    g->n_stages = g->n_tensors = 0;
}
