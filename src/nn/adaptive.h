/* Adaptive input embedding and projected adaptive log-softmax (Baevski & Auli 2019; Grave et al. 2017),
 * as NVIDIA's Transformer-XL has them (AdaptiveEmbedding in mem_transformer.py,
 * ProjectedAdaptiveLogSoftmax in utils/proj_adaptive_softmax.py), as forward/backward pairs composed
 * from backend ops (gather_rows, scatter_add_rows, gemm, biases, log_softmax_nll).
 *
 * The vocabulary [0, n_token) is cut at cutoffs c_0 < c_1 < ... into n_clusters + 1 clusters:
 * cluster i holds ids [e_i, e_{i+1}) (e = [0, c_0, ..., n_token]) and embeds them in
 * d_i = d_embed / div_val^i columns. With div_val = 1 every cluster shares one table [n_token, d_embed]
 * (cluster i = its rows e_i..e_{i+1}); with div_val > 1 cluster i has its own table [size_i, d_i] and a
 * projection proj_i[d_proj, d_i] to the model width d_proj. div_val = 1 has a projection only when
 * d_proj != d_embed (one, proj_0, shared by all clusters).
 *
 * Softmax: the head scores the c_0 shortlist words plus one logit per tail cluster,
 *   head_logit[n, c_0 + n_clusters] = (h·P_0)·[W_0; cluster_weight]ᵀ + [b_0; cluster_bias],
 * and log p(w) = head_logprob[w] for w < c_0; for w in tail cluster i >= 1
 *   log p(w) = head_logprob[c_0 + n_clusters - i] + log_softmax((h·P_i)·W_iᵀ + b_i)[w - e_i]
 * (NVIDIA reads tail cluster i from head column -i: cluster_weight row n_clusters - i). P_i is
 * omitted where there is no projection. n_clusters = 0 is a plain softmax over n_token words.
 *
 * Host staging sorts the tokens of a micro-batch by cluster (hs_adaptive_plan_stage): it CHECKS every
 * id against n_token (a bad id ends the run naming it) and uploads, per cluster, the rows of the
 * tokens and their ids local to the cluster. Parameter gradients ACCUMULATE. */
#ifndef HS_NN_ADAPTIVE_H
#define HS_NN_ADAPTIVE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "nn/layers.h"

#define HS_ADAPTIVE_MAX_CLUSTERS 9 /* head + up to 8 tail clusters */

typedef struct hs_adaptive_dims {
    int n_token, d_embed, d_proj, div_val;
    int n_clusters;                              /* tail clusters (= number of cutoffs) */
    int ends[HS_ADAPTIVE_MAX_CLUSTERS + 1];      /* e_0 = 0, e_1 = c_0, ..., e_{n_clusters+1} = n_token */
} hs_adaptive_dims;
/* From n_token, the cutoffs, d_embed, d_proj and div_val (already checked by the caller). */
hs_adaptive_dims hs_adaptive_dims_make(int n_token, const int *cutoffs, int n_cutoffs, int d_embed, int d_proj,
                                       int div_val);
/* d_i, size_i = e_{i+1} - e_i, and whether cluster i has a projection (div_val > 1 or d_proj != d_embed). */
int hs_adaptive_cluster_dim(const hs_adaptive_dims *d, int i);
int hs_adaptive_cluster_size(const hs_adaptive_dims *d, int i);
int hs_adaptive_has_proj(const hs_adaptive_dims *d, int i);

/* A micro-batch's token ids sorted by cluster (device arrays sized for max_tokens at create).
 *
 * Padded plans (a backend that records graph regions, CUDA: be->graph_begin): each cluster's row count
 * is rounded up to a bucket (hs_adaptive_bucket) so that the GEMM shapes, grids and scratch sizes of
 * the clusters take a few values instead of a new one every micro-batch, and a CUDA graph region
 * holding them repeats its signature. A padding row gathers zeros (index -1 in rows/local), is
 * ignored by the loss (label -1 in local), and adds zeros through the scatter-adds (index 0 in their
 * copy of the indices, hs_adaptive_rows_to / _local_to: zero rows), so losses and gradients are
 * unchanged up to summation order; the true counts reach the kernels only on the device (the loss
 * counts from the labels). The CPU's plans are not padded (count = tokens, the scatters read rows and
 * local themselves): its bits are the PyTorch cross-checks'. */
typedef struct hs_adaptive_plan {
    int n;                                   /* tokens */
    int count[HS_ADAPTIVE_MAX_CLUSTERS];     /* rows of cluster i in rows/local (padded: its bucket) */
    int offset[HS_ADAPTIVE_MAX_CLUSTERS];    /* start of cluster i in rows/local */
    int max_tokens;
    int pad;              /* counts padded to buckets (above) */
    int cap;              /* entries of rows/local: max_tokens, padded 2·hs_adaptive_plan_cap(max_tokens) */
    int total;            /* entries in use: Σ count (unpadded: n) */
    int32_t *ids;         /* device [n]: the ids in row order */
    int32_t *head_labels; /* device [n]: the head column of each row: id (< c_0) or c_0 + n_clusters - i */
    int32_t *rows;        /* device [total]: rows of cluster 0, then of cluster 1, ... (row order inside);
                           * gathers read it (padding -1: zeros); padded, the scatters' copy follows */
    int32_t *local;       /* device [total]: id - e_i, in the order of rows (padding -1: zeros, ignored
                           * label); padded, the scatters' copy follows */
    int32_t *host;        /* host staging [max_tokens + 2·cap] */
} hs_adaptive_plan;
/* The scatter-adds' targets: rows / local, or a padded plan's copies with padding row 0. */
static inline const int32_t *hs_adaptive_rows_to(const hs_adaptive_plan *p) {
    return p->pad ? p->rows + p->total : p->rows;
}
static inline const int32_t *hs_adaptive_local_to(const hs_adaptive_plan *p) {
    return p->pad ? p->local + p->total : p->local;
}
/* The rows of a cluster of c tokens (of n) in a padded plan: the smallest power of two >= c, at least
 * HS_ADAPTIVE_MIN_BUCKET (c = 0 too: an empty cluster keeps its ops) and at most n. */
#define HS_ADAPTIVE_MIN_BUCKET 16
int hs_adaptive_bucket(int c, int n);
/* Entries of rows/local a padded plan of max_tokens needs (the scatters' copy aside): a cluster's rows
 * are under twice its count or the minimum bucket. */
int hs_adaptive_plan_cap(int max_tokens);
void hs_adaptive_plan_init(const hs_backend *be, hs_adaptive_plan *p, int max_tokens);
void hs_adaptive_plan_free(const hs_backend *be, hs_adaptive_plan *p);
/* Checks ids_host[n] against [0, n_token) — an id outside ends the run with a message naming the id,
 * its row (row / per_row, row % per_row) and `what` — then sorts and uploads. */
void hs_adaptive_plan_stage(const hs_backend *be, const hs_adaptive_dims *d, hs_adaptive_plan *p,
                            const int32_t *ids_host, int n, int per_row, const char *what);

/* ---- adaptive input embedding (AdaptiveEmbedding) ----------------------------------------------- */
typedef struct hs_adaptive_emb_weights {
    const float *table[HS_ADAPTIVE_MAX_CLUSTERS]; /* [size_i, d_i] (div_val = 1: only [0], [n_token, d_embed]) */
    const float *proj[HS_ADAPTIVE_MAX_CLUSTERS];  /* [d_proj, d_i] or NULL (no projection) */
} hs_adaptive_emb_weights;
typedef struct hs_adaptive_emb_grads {
    float *table[HS_ADAPTIVE_MAX_CLUSTERS];
    float *proj[HS_ADAPTIVE_MAX_CLUSTERS];
} hs_adaptive_emb_grads;
/* Saved activations and scratch of one embedding (zero-initialise; grows on demand). */
typedef struct hs_adaptive_emb_state {
    hs_workspace saved;   /* gathered embedding rows (the projections' input) */
    hs_workspace scratch; /* per-cluster projected rows / gradients */
    hs_tensor_span *span;  /* device [1]: the scale op's tensor table */
    int64_t span_numel;    /* the element count span holds */
    hs_tensor_span *spans; /* device [span_rows]: {0, r·span_cols} for r = 1..span_rows, copied into span */
    int span_rows, span_cols;
} hs_adaptive_emb_state;
/* y[n, d_proj] = sqrt(d_proj) · emb(ids): row r = table_i[id - e_i]·proj_iᵀ for the cluster i of id
 * (no projection: the table row itself). */
void hs_adaptive_embedding_forward(const hs_backend *be, const hs_adaptive_dims *d, const hs_adaptive_emb_weights *w,
                                   const hs_adaptive_plan *plan, hs_adaptive_emb_state *st, float *y);
/* From dy[n, d_proj]: table and projection gradients += (no input gradient: ids are discrete). */
void hs_adaptive_embedding_backward(const hs_backend *be, const hs_adaptive_dims *d, const hs_adaptive_emb_weights *w,
                                    const hs_adaptive_emb_grads *g, const hs_adaptive_plan *plan,
                                    hs_adaptive_emb_state *st, const float *dy);
/* x[rows, cols] *= a (a one-tensor scale through the backend's multi-tensor op; st holds its table).
 * rows <= max_rows; the first call uploads a table for every row count (cols fixed), later ones copy
 * their entry on the device: no upload, so the op can be captured into a CUDA graph. */
void hs_adaptive_scale(const hs_backend *be, hs_adaptive_emb_state *st, float *x, int rows, int cols, int max_rows,
                       float a);

/* ---- projected adaptive log-softmax (ProjectedAdaptiveLogSoftmax) ------------------------------- */
typedef struct hs_adaptive_softmax_weights {
    const float *weight[HS_ADAPTIVE_MAX_CLUSTERS]; /* W_i [size_i, d_i] (div_val = 1: row slices of one table) */
    const float *bias[HS_ADAPTIVE_MAX_CLUSTERS];   /* b_i [size_i] */
    const float *proj[HS_ADAPTIVE_MAX_CLUSTERS];   /* P_i [d_proj, d_i] or NULL */
    const float *cluster_weight;                   /* [n_clusters, d_embed] (NULL when n_clusters = 0) */
    const float *cluster_bias;                     /* [n_clusters] */
} hs_adaptive_softmax_weights;
typedef struct hs_adaptive_softmax_grads {
    float *weight[HS_ADAPTIVE_MAX_CLUSTERS], *bias[HS_ADAPTIVE_MAX_CLUSTERS], *proj[HS_ADAPTIVE_MAX_CLUSTERS];
    float *cluster_weight, *cluster_bias;
} hs_adaptive_softmax_grads;
typedef struct hs_adaptive_softmax_state {
    hs_workspace saved; /* projected hidden rows, logits and the rows' log_norm of every cluster */
    hs_workspace grad;  /* backward scratch */
} hs_adaptive_softmax_state;
/* NLL of every target (plan staged from the targets) given hidden[n, d_proj]:
 *   head_stats[0] += Σ_rows -head_logprob[head label], head_stats[1] += n, head_stats[2] += correct head;
 *   tail_stats[0] += Σ over tail rows -tail_logprob[local id], tail_stats[1] += tail rows, [2] correct.
 * The total NLL is head_stats[0] + tail_stats[0] (device float64 [3] each; tail_stats may equal
 * head_stats only when n_clusters = 0). */
void hs_adaptive_softmax_forward(const hs_backend *be, const hs_adaptive_dims *d, const hs_adaptive_softmax_weights *w,
                                 const hs_adaptive_plan *plan, hs_adaptive_softmax_state *st, const float *hidden,
                                 double *head_stats, double *tail_stats);
/* Gradients of scale · Σ NLL: parameters +=, dhidden[n, d_proj] overwritten. overwrite = 1 (an update's
 * first micro-batch, hs_step_ctx.grads_zero): every parameter gradient region g points to is written
 * instead, whatever it held: by its first writer here (a product with beta 0), or zeroed where no row
 * reaches it (a tail cluster without rows, or no rows at all); a region several clusters share (one
 * projection) is added to after its first writer. */
void hs_adaptive_softmax_backward(const hs_backend *be, const hs_adaptive_dims *d, const hs_adaptive_softmax_weights *w,
                                  const hs_adaptive_softmax_grads *g, const hs_adaptive_plan *plan,
                                  hs_adaptive_softmax_state *st, const float *hidden, float scale, float *dhidden,
                                  int overwrite);
void hs_adaptive_softmax_state_free(const hs_backend *be, hs_adaptive_softmax_state *st);
void hs_adaptive_emb_state_free(const hs_backend *be, hs_adaptive_emb_state *st);

#endif
