#include "nn/params.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "backend/ledger.h"
#include "util/check.h"

#define HS_PARAM_ALIGN 16 /* floats: 64-byte alignment of every tensor for vector loads */

int hs_params_declare(hs_params *p, const char *name, int ndim, const int64_t *shape, int weight_decay) {
    if (p->data) HS_FATAL("declare every tensor before hs_params_allocate", "tensor %s declared late", name);
    if (ndim < 1 || ndim > HS_MAX_DIMS) HS_FATAL(NULL, "tensor %s: %d dimensions", name, ndim);
    if (strlen(name) >= HS_NAME_MAX) HS_FATAL(NULL, "tensor name too long: %s", name);
    if (hs_params_find(p, name) >= 0) HS_FATAL(NULL, "tensor %s declared twice", name);
    if (p->count == p->capacity) {
        p->capacity = p->capacity ? 2 * p->capacity : 16;
        HS_REALLOC(p->tensors, p->capacity);
    }
    hs_tensor_info *t = &p->tensors[p->count];
    memset(t, 0, sizeof *t);
    strcpy(t->name, name);
    t->ndim = ndim;
    t->numel = 1;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        t->numel *= (size_t)shape[d];
    }
    t->offset = p->total;
    t->weight_decay = weight_decay;
    p->total += (t->numel + HS_PARAM_ALIGN - 1) / HS_PARAM_ALIGN * HS_PARAM_ALIGN;
    return p->count++;
}

void hs_params_allocate(hs_params *p, const hs_backend *be) {
    p->be = be;
    p->data = be->alloc(be, p->total * sizeof(float));
    p->grad = be->alloc(be, p->total * sizeof(float));
    hs_tensor_span *host;
    HS_ALLOC(host, p->count ? p->count : 1);
    for (int i = 0; i < p->count; i++)
        host[i] = (hs_tensor_span){.offset = (int64_t)p->tensors[i].offset, .numel = (int64_t)p->tensors[i].numel,
                                   .decay = p->tensors[i].weight_decay ? 1 : 0};
    p->table = be->alloc(be, (p->count ? (size_t)p->count : 1) * sizeof *host);
    be->upload(be, p->table, host, (size_t)p->count * sizeof *host);
    /* what the multi-tensor ops on this table move, for the device-op ledger */
    uint64_t elements = 0;
    for (int i = 0; i < p->count; i++) elements += (uint64_t)p->tensors[i].numel;
    hs_ledger_table(p->table, elements);
    free(host);
}

void hs_params_free(hs_params *p) {
    if (p->be) {
        p->be->free(p->be, p->data);
        p->be->free(p->be, p->grad);
        p->be->free(p->be, p->table);
    }
    free(p->tensors);
    for (int i = 0; i < p->n_buffers; i++) free(p->buffers[i].host);
    free(p->buffers);
    free(p->aliases);
    memset(p, 0, sizeof *p);
}

void hs_params_add_alias(hs_params *p, const char *name, int target) {
    if (target < 0 || target >= p->count || strlen(name) >= HS_NAME_MAX)
        HS_FATAL(NULL, "alias '%s' of tensor %d (table of %d)", name, target, p->count);
    HS_REALLOC(p->aliases, p->n_aliases + 1);
    hs_param_alias *a = &p->aliases[p->n_aliases++];
    snprintf(a->name, sizeof a->name, "%s", name);
    a->target = target;
}

void hs_params_add_buffer(hs_params *p, const char *name, int ndim, const int64_t *shape, const float *values) {
    if (ndim < 1 || ndim > HS_MAX_DIMS || strlen(name) >= HS_NAME_MAX)
        HS_FATAL(NULL, "buffer '%s' with %d dimensions", name, ndim);
    HS_REALLOC(p->buffers, p->n_buffers + 1);
    hs_param_buffer *b = &p->buffers[p->n_buffers++];
    memset(b, 0, sizeof *b);
    snprintf(b->name, sizeof b->name, "%s", name);
    b->ndim = ndim;
    b->numel = 1;
    for (int d = 0; d < ndim; d++) b->numel *= (size_t)(b->shape[d] = shape[d]);
    HS_ALLOC(b->host, b->numel ? b->numel : 1);
    memcpy(b->host, values, b->numel * sizeof(float));
}

int hs_params_find(const hs_params *p, const char *name) {
    for (int i = 0; i < p->count; i++)
        if (strcmp(p->tensors[i].name, name) == 0) return i;
    return -1;
}

void hs_params_zero_grad(hs_params *p) { p->be->zero(p->be, p->grad, p->total * sizeof(float)); }

size_t hs_params_numel(const hs_params *p) {
    size_t n = 0;
    for (int i = 0; i < p->count; i++) n += p->tensors[i].numel;
    return n;
}

size_t hs_params_max_numel(const hs_params *p) {
    size_t n = 1;
    for (int i = 0; i < p->count; i++)
        if (p->tensors[i].numel > n) n = p->tensors[i].numel;
    return n;
}
