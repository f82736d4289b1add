/* When a model's gradients become final during its backward pass, for the overlapped gradient
 * all-reduce (hs_step_ctx.grads_ready, nn/step_ctx_stats.h).
 *
 * A model cuts its backward pass into stages 0, 1, ..., n_stages - 1 in the order they run (e.g. the
 * heads, then each layer in reverse, then the embeddings) and tells the plan, once at setup, every
 * stage that writes each tensor's gradient: a tied or shared tensor (a decoder tied to the word
 * embeddings, biases shared by every layer) has several writers and is final only after the last one.
 * Then, after stage s, every gradient at offsets >= ready(s) is final, where
 *   ready(s) = the lowest offset o such that every tensor at offset >= o has its last writer <= s,
 * i.e. the start of the longest suffix of the layout (tensors in offset order, each one's padding
 * included) whose tensors are all final. The plan computes ready(s) once; the model calls
 * hs_grads_ready_after(plan, ctx, s) at the end of stage s, which passes ready(s) on only when it is
 * lower than the previous stage's (the offsets the trainer sees strictly decrease). A tensor written
 * below a still-pending one waits for it: declaring must never cover a pending tensor. */
#ifndef HS_NN_GRADS_READY_H
#define HS_NN_GRADS_READY_H

#include <stdint.h>

#include "nn/params.h"
#include "nn/step_ctx_stats.h"

typedef struct hs_grads_ready {
    int n_stages, n_tensors;
    int *last;      /* [n_tensors] last stage writing the tensor's gradient, -1 while none is known */
    int64_t *ready; /* [n_stages] offset to declare after stage s, or -1 when it adds nothing */
} hs_grads_ready;

/* An empty plan of n_stages stages for the tensors of p (declared, offsets fixed). */
void hs_grads_ready_init(hs_grads_ready *g, const hs_params *p, int n_stages);
/* Stage `stage` writes (accumulates into) the gradient of tensor `tensor` (an index of p; -1 ignored). */
void hs_grads_ready_writes(hs_grads_ready *g, int tensor, int stage);
/* The same by a pointer into p->grad (an allocated table), as a backward pass receives it: the tensor
 * containing it (a tied slice such as a cluster's rows of one table counts for the whole tensor). NULL
 * is ignored. */
void hs_grads_ready_writes_grad(hs_grads_ready *g, const hs_params *p, const float *grad, int stage);
/* Computes ready(s). Every tensor must have a writer (a programming error otherwise: a tensor the plan
 * does not know of could be declared final while backward still writes it). */
void hs_grads_ready_build(hs_grads_ready *g, const hs_params *p);
void hs_grads_ready_free(hs_grads_ready *g);

/* At the end of stage s: tells ctx's callback (if any) that [ready(s), total) is final. */
static inline void hs_grads_ready_after(const hs_grads_ready *g, const hs_step_ctx *ctx, int stage) {
    if (ctx && g->ready && stage >= 0 && stage < g->n_stages && g->ready[stage] >= 0)
        hs_step_grads_ready(ctx, g->ready[stage]);
}

#endif
