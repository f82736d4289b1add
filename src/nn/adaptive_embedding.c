/* Adaptive input embedding (NVIDIA's AdaptiveEmbedding), forward and backward (nn/adaptive.h).
 * emb_scale = sqrt(d_proj) is folded into the projection GEMMs (alpha); without a projection it is one
 * scale op on the gathered rows. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ledger.h"
#include "nn/adaptive.h"
#include "util/check.h"

void hs_adaptive_scale(const hs_backend *be, hs_adaptive_emb_state *st, float *x, int rows, int cols, int max_rows,
                       float a) {
    if (rows <= 0) return;
    if (!st->spans) { /* once, in the first (eager) pass: a table for every row count */
        hs_tensor_span *host;
        HS_ALLOC(host, max_rows);
        for (int r = 0; r < max_rows; r++)
            host[r] = (hs_tensor_span){.offset = 0, .numel = (int64_t)(r + 1) * cols, .decay = 0, .unused = 0};
        st->spans = be->alloc(be, (size_t)max_rows * sizeof *st->spans);
        be->upload(be, st->spans, host, (size_t)max_rows * sizeof *host);
        free(host);
        st->span = be->alloc(be, sizeof *st->span);
        st->span_cols = cols;
        st->span_rows = max_rows;
    }
    if (cols != st->span_cols || rows > st->span_rows)
        HS_FATAL(NULL, "hs_adaptive_scale of [%d, %d]; its span table is for [%d, %d]", rows, cols, st->span_rows,
                 st->span_cols);
    const int64_t n = (int64_t)rows * cols;
    if (st->span_numel != n) { /* a device copy: no upload inside a CUDA graph capture */
        be->copy(be, st->span, st->spans + (rows - 1), sizeof *st->span);
        hs_ledger_table(st->span, (uint64_t)n); /* for the device-op ledger */
        st->span_numel = n;
    }
    be->scale_tensors(be, x, a, st->span, 1);
}

/* Floats of the gathered rows of every cluster (the projections' inputs), and where cluster i's start. */
static size_t saved_offset(const hs_adaptive_dims *d, const hs_adaptive_plan *plan, int upto) {
    size_t o = 0;
    for (int i = 0; i < upto; i++) o += (size_t)plan->count[i] * (size_t)hs_adaptive_cluster_dim(d, i);
    return o;
}

void hs_adaptive_embedding_forward(const hs_backend *be, const hs_adaptive_dims *d, const hs_adaptive_emb_weights *w,
                                   const hs_adaptive_plan *plan, hs_adaptive_emb_state *st, float *y) {
    const int n = plan->n, dp = d->d_proj;
    const float scale = sqrtf((float)dp); /* NVIDIA: d_proj ** 0.5, a Python float used by mul_ */
    if (n == 0) return;
    if (d->div_val == 1) {
        const int de = d->d_embed;
        if (!hs_adaptive_has_proj(d, 0)) {
            /* y[n, d_embed] = sqrt(d)·table[ids] */
            be->gather_rows(be, y, w->table[0], plan->ids, n, de, d->n_token, 0);
            hs_adaptive_scale(be, st, y, n, dp, plan->max_tokens, scale);
            return;
        }
        /* e[n, d_embed] = table[ids] (kept); y = sqrt(d)·e·P_0ᵀ */
        hs_workspace_reserve(be, &st->saved, (size_t)n * (size_t)de * sizeof(float));
        float *e = st->saved.ptr;
        be->gather_rows(be, e, w->table[0], plan->ids, n, de, d->n_token, 0);
        be->gemm(be, 0, 1, n, dp, de, scale, e, de, w->proj[0], de, 0.0f, y, dp);
        return;
    }
    /* div_val > 1: every cluster's rows, projected, scattered into their rows of y (a padded plan's padding
     * rows gather zeros, project to zeros and add them to row 0: nn/adaptive.h) */
    const int k = d->n_clusters + 1;
    int max_count = 0;
    for (int i = 0; i < k; i++)
        if (plan->count[i] > max_count) max_count = plan->count[i];
    hs_workspace_reserve(be, &st->saved, saved_offset(d, plan, k) * sizeof(float));
    hs_workspace_reserve(be, &st->scratch, (size_t)max_count * (size_t)dp * sizeof(float));
    be->zero(be, y, (size_t)n * (size_t)dp * sizeof(float));
    for (int i = 0; i < k; i++) {
        const int c = plan->count[i], di = hs_adaptive_cluster_dim(d, i);
        if (c == 0) continue;
        float *e = (float *)st->saved.ptr + saved_offset(d, plan, i); /* [c, d_i] */
        float *out = st->scratch.ptr;                                 /* [c, d_proj] */
        be->gather_rows(be, e, w->table[i], plan->local + plan->offset[i], c, di, hs_adaptive_cluster_size(d, i), 0);
        be->gemm(be, 0, 1, c, dp, di, scale, e, di, w->proj[i], di, 0.0f, out, dp);
        /* every row belongs to exactly one cluster: the scatter-add is a placement */
        be->scatter_add_rows(be, y, out, hs_adaptive_rows_to(plan) + plan->offset[i], c, dp, n);
    }
}

void hs_adaptive_embedding_backward(const hs_backend *be, const hs_adaptive_dims *d, const hs_adaptive_emb_weights *w,
                                    const hs_adaptive_emb_grads *g, const hs_adaptive_plan *plan,
                                    hs_adaptive_emb_state *st, const float *dy) {
    const int n = plan->n, dp = d->d_proj;
    const float scale = sqrtf((float)dp);
    if (n == 0) return;
    if (d->div_val == 1) {
        const int de = d->d_embed;
        hs_workspace_reserve(be, &st->scratch, (size_t)n * (size_t)de * sizeof(float));
        float *de_rows = st->scratch.ptr; /* [n, d_embed] = ∂/∂table[ids] */
        if (!hs_adaptive_has_proj(d, 0)) {
            be->copy(be, de_rows, dy, (size_t)n * (size_t)de * sizeof(float));
            hs_adaptive_scale(be, st, de_rows, n, de, plan->max_tokens, scale);
        } else {
            /* ∂P_0[d_proj, d_embed] += s·dyᵀ·e;  ∂e = s·dy·P_0 */
            be->gemm(be, 1, 0, dp, de, n, scale, dy, dp, st->saved.ptr, de, 1.0f, g->proj[0], de);
            be->gemm(be, 0, 0, n, de, dp, scale, dy, dp, w->proj[0], de, 0.0f, de_rows, de);
        }
        be->scatter_add_rows(be, g->table[0], de_rows, plan->ids, n, de, d->n_token);
        return;
    }
    const int k = d->n_clusters + 1;
    int max_count = 0;
    for (int i = 0; i < k; i++)
        if (plan->count[i] > max_count) max_count = plan->count[i];
    /* scratch: gathered dy rows [c, d_proj] then ∂e [c, d_i] */
    hs_workspace_reserve(be, &st->scratch, (size_t)max_count * (size_t)(dp + d->d_embed) * sizeof(float));
    for (int i = 0; i < k; i++) {
        const int c = plan->count[i], di = hs_adaptive_cluster_dim(d, i);
        if (c == 0) continue;
        const float *e = (const float *)st->saved.ptr + saved_offset(d, plan, i);
        float *gy = st->scratch.ptr, *ge = (float *)st->scratch.ptr + (size_t)max_count * (size_t)dp;
        be->gather_rows(be, gy, dy, plan->rows + plan->offset[i], c, dp, n, 0);
        be->gemm(be, 1, 0, dp, di, c, scale, gy, dp, e, di, 1.0f, g->proj[i], di);
        be->gemm(be, 0, 0, c, di, dp, scale, gy, dp, w->proj[i], di, 0.0f, ge, di);
        be->scatter_add_rows(be, g->table[i], ge, hs_adaptive_local_to(plan) + plan->offset[i], c, di,
                             hs_adaptive_cluster_size(d, i));
    }
}

void hs_adaptive_emb_state_free(const hs_backend *be, hs_adaptive_emb_state *st) {
    hs_workspace_release(be, &st->saved);
    hs_workspace_release(be, &st->scratch);
    if (st->span) be->free(be, st->span);
    if (st->spans) be->free(be, st->spans);
    memset(st, 0, sizeof *st);
}
