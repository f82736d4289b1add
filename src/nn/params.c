#include "nn/params.h"

#include <math.h>
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
    be->register_params(be, p->data, p->total); /* bf16/fp16 products read a 16-bit copy (ops.def) */
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
        if (p->accumulated_table) p->be->free(p->be, p->accumulated_table);
        if (p->written_table) p->be->free(p->be, p->written_table);
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

void hs_params_grad_written(hs_params *p, int tensor) {
    if (tensor < 0 || tensor >= p->count) HS_FATAL(NULL, "hs_params_grad_written: tensor %d of %d", tensor, p->count);
    if (p->tensors[tensor].grad_written) return;
    if (p->zero_plan_ready)
        HS_FATAL("declare the written gradients before the first update", "tensor %s declared late",
                 p->tensors[tensor].name);
    p->tensors[tensor].grad_written = 1;
}

int hs_params_tensor_of_grad(const hs_params *p, const float *grad) {
    if (!grad || !p->grad || grad < p->grad || grad >= p->grad + p->total)
        HS_FATAL(NULL, "hs_params_tensor_of_grad: pointer outside the gradient buffer");
    const size_t at = (size_t)(grad - p->grad);
    for (int i = 0; i < p->count; i++)
        if (at >= p->tensors[i].offset && at < p->tensors[i].offset + p->tensors[i].numel) return i;
    HS_FATAL(NULL, "hs_params_tensor_of_grad: offset %zu is padding, not a tensor", at);
}

void hs_params_zero_grad_tensor(const hs_params *p, int tensor) {
    p->be->zero(p->be, hs_param_grad(p, tensor), p->tensors[tensor].numel * sizeof(float));
}

/* The device table of the tensors whose grad_written equals `written` (offset order, as declared);
 * NULL when there are none. */
static hs_tensor_span *upload_spans(hs_params *p, int written, int *count) {
    *count = 0;
    for (int i = 0; i < p->count; i++) *count += p->tensors[i].grad_written == written;
    if (*count == 0) return NULL;
    hs_tensor_span *host;
    HS_ALLOC(host, *count);
    uint64_t elements = 0;
    int n = 0;
    for (int i = 0; i < p->count; i++)
        if (p->tensors[i].grad_written == written) {
            host[n++] = (hs_tensor_span){.offset = (int64_t)p->tensors[i].offset,
                                         .numel = (int64_t)p->tensors[i].numel,
                                         .decay = p->tensors[i].weight_decay ? 1 : 0};
            elements += (uint64_t)p->tensors[i].numel;
        }
    hs_tensor_span *table = p->be->alloc(p->be, (size_t)n * sizeof *host);
    p->be->upload(p->be, table, host, (size_t)n * sizeof *host);
    hs_ledger_table(table, elements);
    free(host);
    return table;
}

void hs_params_zero_grad_accumulated(hs_params *p) {
    if (!p->zero_plan_ready) {
        p->accumulated_table = upload_spans(p, 0, &p->accumulated_count);
        p->written_table = upload_spans(p, 1, &p->written_count);
        const char *check = getenv("HETSEQ_CHECK_GRADS_WRITTEN");
        p->poison_written = check && strcmp(check, "1") == 0;
        p->zero_plan_ready = 1;
    }
    if (!p->written_table) { /* nothing declared: one fill of the whole buffer, padding included */
        hs_params_zero_grad(p);
        return;
    }
    if (p->accumulated_table) p->be->zero_tensors(p->be, p->grad, p->accumulated_table, p->accumulated_count);
    if (p->poison_written) p->be->scale_tensors(p->be, p->grad, NAN, p->written_table, p->written_count);
}

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
