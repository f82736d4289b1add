/* The cluster layout of an adaptive vocabulary and the host staging that sorts a micro-batch's ids by
 * cluster (nn/adaptive.h). */
#include <stdio.h>
#include <string.h>

#include "nn/adaptive.h"
#include "util/check.h"

hs_adaptive_dims hs_adaptive_dims_make(int n_token, const int *cutoffs, int n_cutoffs, int d_embed, int d_proj,
                                       int div_val) {
    if (n_cutoffs < 0 || n_cutoffs + 1 > HS_ADAPTIVE_MAX_CLUSTERS)
        HS_FATAL(NULL, "adaptive softmax with %d cutoffs (at most %d)", n_cutoffs, HS_ADAPTIVE_MAX_CLUSTERS - 1);
    hs_adaptive_dims d = {.n_token = n_token, .d_embed = d_embed, .d_proj = d_proj, .div_val = div_val,
                          .n_clusters = n_cutoffs};
    d.ends[0] = 0;
    for (int i = 0; i < n_cutoffs; i++) d.ends[i + 1] = cutoffs[i];
    d.ends[n_cutoffs + 1] = n_token;
    return d;
}

int hs_adaptive_cluster_dim(const hs_adaptive_dims *d, int i) {
    int e = d->d_embed;
    for (int k = 0; k < i; k++) e /= d->div_val;
    return e;
}

int hs_adaptive_cluster_size(const hs_adaptive_dims *d, int i) { return d->ends[i + 1] - d->ends[i]; }

int hs_adaptive_has_proj(const hs_adaptive_dims *d, int i) {
    (void)i;
    return d->div_val > 1 || d->d_proj != d->d_embed;
}

int hs_adaptive_bucket(int c, int n) {
    int b = HS_ADAPTIVE_MIN_BUCKET;
    while (b < c) b *= 2;
    return b < n ? b : n;
}

int hs_adaptive_plan_cap(int max_tokens) { return 2 * max_tokens + HS_ADAPTIVE_MIN_BUCKET * HS_ADAPTIVE_MAX_CLUSTERS; }

void hs_adaptive_plan_init(const hs_backend *be, hs_adaptive_plan *p, int max_tokens) {
    memset(p, 0, sizeof *p);
    p->max_tokens = max_tokens;
    p->pad = be->graph_begin != NULL; /* a backend that records graph regions (nn/adaptive.h) */
    p->cap = p->pad ? 2 * hs_adaptive_plan_cap(max_tokens) : max_tokens; /* padded: the scatters' copy too */
    const size_t bytes = (size_t)max_tokens * sizeof(int32_t), cap_bytes = (size_t)p->cap * sizeof(int32_t);
    p->ids = be->alloc(be, bytes);
    p->head_labels = be->alloc(be, bytes);
    p->rows = be->alloc(be, cap_bytes);
    p->local = be->alloc(be, cap_bytes);
    p->host = be->host_alloc(be, bytes + 2 * cap_bytes);
}

void hs_adaptive_plan_free(const hs_backend *be, hs_adaptive_plan *p) {
    if (!p->ids) return;
    be->free(be, p->ids);
    be->free(be, p->head_labels);
    be->free(be, p->rows);
    be->free(be, p->local);
    be->host_free(be, p->host);
    memset(p, 0, sizeof *p);
}

/* The cluster of an id: the i with e_i <= id < e_{i+1}. */
static int cluster_of(const hs_adaptive_dims *d, int32_t id) {
    int i = 0;
    while (id >= d->ends[i + 1]) i++;
    return i;
}

void hs_adaptive_plan_stage(const hs_backend *be, const hs_adaptive_dims *d, hs_adaptive_plan *p,
                            const int32_t *ids_host, int n, int per_row, const char *what) {
    if (n < 0 || n > p->max_tokens) HS_FATAL(NULL, "adaptive plan of %d tokens (sized for %d)", n, p->max_tokens);
    if (per_row < 1) per_row = 1;
    for (int r = 0; r < n; r++)
        if (ids_host[r] < 0 || ids_host[r] >= d->n_token)
            hs_die("%s %d (sequence %d of the micro-batch, position %d) is outside the vocabulary [0, %d): the data "
                   "does not match the model; prepare the data and the model with the same vocabulary",
                   what, (int)ids_host[r], r / per_row, r % per_row, d->n_token);
    /* host: head [max_tokens], rows [cap], local [cap] */
    int32_t *head = p->host, *rows = p->host + p->max_tokens, *local = rows + p->cap;
    const int k = d->n_clusters + 1, c0 = d->ends[1];
    int tokens[HS_ADAPTIVE_MAX_CLUSTERS] = {0};
    for (int r = 0; r < n; r++) tokens[cluster_of(d, ids_host[r])]++;
    int fill[HS_ADAPTIVE_MAX_CLUSTERS];
    int o = 0;
    for (int i = 0; i < k; i++) {
        p->count[i] = p->pad && n > 0 ? hs_adaptive_bucket(tokens[i], n) : tokens[i];
        p->offset[i] = fill[i] = o;
        o += p->count[i];
    }
    p->total = o;
    for (int r = 0; r < n; r++) {
        const int i = cluster_of(d, ids_host[r]);
        head[r] = i == 0 ? ids_host[r] : c0 + d->n_clusters - i;
        rows[fill[i]] = r;
        local[fill[i]] = ids_host[r] - d->ends[i];
        fill[i]++;
    }
    p->n = n;
    if (n == 0) return;
    const size_t bytes = (size_t)n * sizeof(int32_t);
    be->upload(be, p->ids, ids_host, bytes);
    be->upload(be, p->head_labels, head, bytes);
    if (!p->pad) {
        be->upload(be, p->rows, rows, bytes);
        be->upload(be, p->local, local, bytes);
        return;
    }
    /* padding rows: gather zeros, ignored labels (-1); the scatters' copy [total, 2·total) adds their
     * zero rows to row 0 */
    for (int i = 0; i < k; i++)
        for (int j = p->offset[i] + tokens[i]; j < p->offset[i] + p->count[i]; j++) rows[j] = local[j] = -1;
    for (int j = 0; j < o; j++) {
        rows[o + j] = rows[j] < 0 ? 0 : rows[j];
        local[o + j] = local[j] < 0 ? 0 : local[j];
    }
    be->upload(be, p->rows, rows, 2 * (size_t)o * sizeof(int32_t));
    be->upload(be, p->local, local, 2 * (size_t)o * sizeof(int32_t));
}
