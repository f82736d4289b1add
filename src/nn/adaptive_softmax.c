/* Projected adaptive log-softmax (NVIDIA's ProjectedAdaptiveLogSoftmax), forward and backward
 * (nn/adaptive.h). The head's logits are written as two column blocks of one [n, c_0 + n_clusters]
 * matrix (shortlist words from W_0, cluster logits from cluster_weight), so the tied W_0 and
 * cluster_weight stay separate tensors. Tail clusters see only their rows (gathered). */
#include <string.h>

#include "nn/adaptive.h"
#include "util/check.h"

/* Where the forward pass keeps what the backward pass reads (floats into st->saved): the logits and each
 * row's log_norm (float64, at even offsets), from which the backward recomputes the log-probabilities
 * (log_softmax_nll_backward: the forward's bits), not the log-probabilities themselves. */
typedef struct softmax_layout {
    size_t ph0, logits0, log_norm0;            /* [n, d_0] (with a head projection), [n, hs], [n] float64 */
    size_t hid[HS_ADAPTIVE_MAX_CLUSTERS];      /* tail i: gathered hidden rows [c, d_proj] */
    size_t ph[HS_ADAPTIVE_MAX_CLUSTERS];       /* tail i: projected rows [c, d_i] (with a projection) */
    size_t logits[HS_ADAPTIVE_MAX_CLUSTERS];   /* tail i: [c, size_i] */
    size_t log_norm[HS_ADAPTIVE_MAX_CLUSTERS]; /* tail i: [c] float64 */
    size_t total;
} softmax_layout;

/* n float64 values from float offset o (rounded up to even): their offset; o moves past them */
static size_t place_doubles(size_t *o, size_t n) {
    const size_t at = (*o + 1) & ~(size_t)1;
    *o = at + 2 * n;
    return at;
}

static softmax_layout layout_of(const hs_adaptive_dims *d, const hs_adaptive_plan *plan) {
    softmax_layout L;
    memset(&L, 0, sizeof L);
    const size_t n = (size_t)plan->n, hs = (size_t)(d->ends[1] + d->n_clusters);
    size_t o = 0;
    L.ph0 = o;
    if (hs_adaptive_has_proj(d, 0)) o += n * (size_t)d->d_embed;
    L.logits0 = o;
    o += n * hs;
    L.log_norm0 = place_doubles(&o, n);
    for (int i = 1; i <= d->n_clusters; i++) {
        const size_t c = (size_t)plan->count[i], size = (size_t)hs_adaptive_cluster_size(d, i);
        L.hid[i] = o;
        o += c * (size_t)d->d_proj;
        L.ph[i] = o;
        if (hs_adaptive_has_proj(d, i)) o += c * (size_t)hs_adaptive_cluster_dim(d, i);
        L.logits[i] = o;
        o += c * size;
        L.log_norm[i] = place_doubles(&o, c);
    }
    L.total = o;
    return L;
}

void hs_adaptive_softmax_forward(const hs_backend *be, const hs_adaptive_dims *d, const hs_adaptive_softmax_weights *w,
                                 const hs_adaptive_plan *plan, hs_adaptive_softmax_state *st, const float *hidden,
                                 double *head_stats, double *tail_stats) {
    const int n = plan->n, dp = d->d_proj, c0 = d->ends[1], nc = d->n_clusters, hs = c0 + nc;
    if (n == 0) return;
    const softmax_layout L = layout_of(d, plan);
    hs_workspace_reserve(be, &st->saved, L.total * sizeof(float));
    float *base = st->saved.ptr;

    /* head: h0[n, d_0] = hidden·P_0 (F.linear(hidden, P_0ᵀ)), logits = h0·[W_0; C]ᵀ + [b_0; c_b]: each column
     * block one product with its bias (gemm_bias: the bias in the product's epilogue on CUDA, not a pass
     * over the widest matrix of the update) */
    const int d0 = hs_adaptive_cluster_dim(d, 0);
    const float *h0 = hidden;
    if (hs_adaptive_has_proj(d, 0)) {
        be->gemm(be, 0, 0, n, d0, dp, 1.0f, hidden, dp, w->proj[0], d0, 0.0f, base + L.ph0, d0);
        h0 = base + L.ph0;
    }
    float *logits = base + L.logits0;
    be->gemm_bias(be, logits, hs, h0, w->weight[0], w->bias[0], n, d0, c0);
    if (nc > 0) be->gemm_bias(be, logits + c0, hs, h0, w->cluster_weight, w->cluster_bias, n, d0, nc);
    be->log_softmax_nll_forward(be, NULL, logits, plan->head_labels, n, hs, head_stats, (double *)(base + L.log_norm0));

    /* tails: only the rows whose target falls in cluster i (a padded plan's padding rows: zero hidden rows,
     * label -1, ignored: nn/adaptive.h) */
    for (int i = 1; i <= nc; i++) {
        const int c = plan->count[i], di = hs_adaptive_cluster_dim(d, i), size = hs_adaptive_cluster_size(d, i);
        if (c == 0) continue;
        float *hid = base + L.hid[i];
        be->gather_rows(be, hid, hidden, plan->rows + plan->offset[i], c, dp, n, 0);
        const float *hi = hid;
        if (hs_adaptive_has_proj(d, i)) {
            be->gemm(be, 0, 0, c, di, dp, 1.0f, hid, dp, w->proj[i], di, 0.0f, base + L.ph[i], di);
            hi = base + L.ph[i];
        }
        hs_linear_forward(be, base + L.logits[i], hi, w->weight[i], w->bias[i], c, di, size);
        be->log_softmax_nll_forward(be, NULL, base + L.logits[i], plan->local + plan->offset[i], c, size, tail_stats,
                                    (double *)(base + L.log_norm[i]));
    }
}

/* The gradient regions this backward pass has written so far under overwrite (by their first pointer:
 * distinct tensors, or disjoint row slices of one tied table; a shared projection is one pointer) */
typedef struct first_writes {
    const float *done[3 * HS_ADAPTIVE_MAX_CLUSTERS + 2];
    int n, overwrite;
} first_writes;

/* 1 when overwrite is on and `grad` is not written yet (it is marked written): its writer writes, not adds */
static int first_write(first_writes *f, const float *grad) {
    if (!f->overwrite || !grad) return 0;
    for (int k = 0; k < f->n; k++)
        if (f->done[k] == grad) return 0;
    f->done[f->n++] = grad;
    return 1;
}

/* first_write of a weight and its bias, which one product writes together (gemm_wgrad_bgrad's overwrite
 * covers both): a weight written before its bias, or the reverse, would leave one region added to
 * while the other holds anything */
static int first_write_pair(first_writes *f, const float *weight, const float *bias) {
    const int w = first_write(f, weight), b = first_write(f, bias);
    if (w != b) HS_FATAL(NULL, "adaptive softmax backward: a weight and its bias written apart");
    return w;
}

/* Under overwrite: zeroes cluster i's regions (its weight and bias; its projection; for i = 0 the cluster
 * block too) that no writer has written yet, where no row reaches them */
static void zero_unwritten(const hs_backend *be, const hs_adaptive_dims *d, const hs_adaptive_softmax_grads *g,
                           first_writes *f, int i) {
    const size_t di = (size_t)hs_adaptive_cluster_dim(d, i), size = (size_t)hs_adaptive_cluster_size(d, i);
    if (first_write(f, g->weight[i])) be->zero(be, g->weight[i], size * di * sizeof(float));
    if (first_write(f, g->bias[i])) be->zero(be, g->bias[i], size * sizeof(float));
    if (hs_adaptive_has_proj(d, i) && first_write(f, g->proj[i]))
        be->zero(be, g->proj[i], (size_t)d->d_proj * di * sizeof(float));
    if (i == 0 && d->n_clusters > 0) {
        if (first_write(f, g->cluster_weight))
            be->zero(be, g->cluster_weight, (size_t)d->n_clusters * di * sizeof(float));
        if (first_write(f, g->cluster_bias)) be->zero(be, g->cluster_bias, (size_t)d->n_clusters * sizeof(float));
    }
}

void hs_adaptive_softmax_backward(const hs_backend *be, const hs_adaptive_dims *d, const hs_adaptive_softmax_weights *w,
                                  const hs_adaptive_softmax_grads *g, const hs_adaptive_plan *plan,
                                  hs_adaptive_softmax_state *st, const float *hidden, float scale, float *dhidden,
                                  int overwrite) {
    const int n = plan->n, dp = d->d_proj, c0 = d->ends[1], nc = d->n_clusters, hs = c0 + nc;
    first_writes fw = {.n = 0, .overwrite = overwrite};
    if (n == 0) {
        for (int i = 0; i <= nc; i++) zero_unwritten(be, d, g, &fw, i);
        return;
    }
    const softmax_layout L = layout_of(d, plan);
    float *base = st->saved.ptr;
    const int d0 = hs_adaptive_cluster_dim(d, 0);
    int max_count = 0;
    size_t max_logits = (size_t)n * (size_t)hs; /* the largest dlogits: the head's or a tail's */
    for (int i = 1; i <= nc; i++) {
        if (plan->count[i] > max_count) max_count = plan->count[i];
        const size_t tail = (size_t)plan->count[i] * (size_t)hs_adaptive_cluster_size(d, i);
        if (tail > max_logits) max_logits = tail;
    }
    /* a backend whose products read 16-bit twins (CUDA under bf16/fp16): each dlogits only as its twin,
     * written by the loss's backward (bind_half_only), which the products read instead of converting it
     * (two products each, over the widest matrices of the update), and the bias gradients too (the
     * weight-gradient products' BGRADB epilogue sums the 16-bit operand) */
    const int twins = be->products_read_twins;
    const size_t scratch_bytes = ((size_t)n * (size_t)d0 + (size_t)max_count * (size_t)(d->d_embed + dp)) * sizeof(float);
    const size_t twin_at = (scratch_bytes + 255) & ~(size_t)255; /* the twin 256-byte aligned, as a product's operand */
    hs_workspace_reserve(be, &st->grad, twins ? twin_at + max_logits * sizeof(uint16_t) : scratch_bytes);
    float *scratch = st->grad.ptr;
    uint16_t *dlogits16 = twins ? (uint16_t *)((char *)st->grad.ptr + twin_at) : NULL;

    /* head: dlogits (over the logits, in place) = scale·(softmax - onehot), softmax from the logits and log_norm */
    float *dlogits = base + L.logits0;
    be->log_softmax_nll_backward(be, twins ? NULL : dlogits, NULL, dlogits, (const double *)(base + L.log_norm0),
                                 plan->head_labels, n, hs, scale, dlogits16);
    if (twins) be->bind_half_only(be, dlogits, dlogits16, (size_t)n * (size_t)hs);
    const int proj0 = hs_adaptive_has_proj(d, 0);
    const float *h0 = proj0 ? base + L.ph0 : hidden;
    /* ∂W_0[c0, d0] += dlogits[:, :c0]ᵀ·h0, ∂b_0 += Σ (one op: gemm_wgrad_bgrad); the same for the cluster block */
    be->gemm_wgrad_bgrad(be, g->weight[0], g->bias[0], dlogits, hs, h0, n, d0, c0,
                         first_write_pair(&fw, g->weight[0], g->bias[0]));
    /* ∂h0[n, d0] = dlogits[:, :c0]·W_0 + dlogits[:, c0:]·C */
    float *dh0 = proj0 ? scratch : dhidden;
    be->gemm(be, 0, 0, n, d0, c0, 1.0f, dlogits, hs, w->weight[0], d0, 0.0f, dh0, d0);
    if (nc > 0) {
        be->gemm_wgrad_bgrad(be, g->cluster_weight, g->cluster_bias, dlogits + c0, hs, h0, n, d0, nc,
                             first_write_pair(&fw, g->cluster_weight, g->cluster_bias));
        be->gemm(be, 0, 0, n, d0, nc, 1.0f, dlogits + c0, hs, w->cluster_weight, d0, 1.0f, dh0, d0);
    }
    if (twins) be->unbind_half(be, dlogits);
    if (proj0) {
        /* h0 = hidden·P_0: ∂P_0[dp, d0] += hiddenᵀ·∂h0, ∂hidden = ∂h0·P_0ᵀ */
        be->gemm(be, 1, 0, dp, d0, n, 1.0f, hidden, dp, dh0, d0, first_write(&fw, g->proj[0]) ? 0.0f : 1.0f,
                 g->proj[0], d0);
        be->gemm(be, 0, 1, n, dp, d0, 1.0f, dh0, d0, w->proj[0], d0, 0.0f, dhidden, dp);
    }

    for (int i = 1; i <= nc; i++) {
        const int c = plan->count[i], di = hs_adaptive_cluster_dim(d, i), size = hs_adaptive_cluster_size(d, i);
        if (c == 0) {
            zero_unwritten(be, d, g, &fw, i);
            continue;
        }
        const int proj = hs_adaptive_has_proj(d, i);
        float *dl = base + L.logits[i];
        be->log_softmax_nll_backward(be, twins ? NULL : dl, NULL, dl, (const double *)(base + L.log_norm[i]),
                                     plan->local + plan->offset[i], c, size, scale, dlogits16);
        if (twins) be->bind_half_only(be, dl, dlogits16, (size_t)c * (size_t)size);
        const float *hid = base + L.hid[i], *hi = proj ? base + L.ph[i] : hid;
        float *dhi = scratch;                                       /* [c, d_i] */
        float *dhid = scratch + (size_t)max_count * (size_t)d->d_embed; /* [c, d_proj] */
        hs_linear_backward(be, dhi, g->weight[i], g->bias[i], dl, hi, w->weight[i], c, di, size,
                           first_write_pair(&fw, g->weight[i], g->bias[i]));
        if (twins) be->unbind_half(be, dl);
        const float *rows_grad = dhi;
        if (proj) {
            be->gemm(be, 1, 0, dp, di, c, 1.0f, hid, dp, dhi, di, first_write(&fw, g->proj[i]) ? 0.0f : 1.0f,
                     g->proj[i], di);
            be->gemm(be, 0, 1, c, dp, di, 1.0f, dhi, di, w->proj[i], di, 0.0f, dhid, dp);
            rows_grad = dhid;
        }
        be->scatter_add_rows(be, dhidden, rows_grad, hs_adaptive_rows_to(plan) + plan->offset[i], c, dp, n);
    }
}

void hs_adaptive_softmax_state_free(const hs_backend *be, hs_adaptive_softmax_state *st) {
    hs_workspace_release(be, &st->saved);
    hs_workspace_release(be, &st->grad);
}
