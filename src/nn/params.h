/* The parameter table: every trainable tensor of a model, by its PyTorch state_dict name, lives in one
 * flat device allocation (data) with gradients in a second of the same layout (grad). The table drives
 * allocation, initialisation, checkpoints, the one gradient all-reduce and the optimizers. */
#ifndef HS_NN_PARAMS_H
#define HS_NN_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"

#define HS_MAX_DIMS 4
#define HS_NAME_MAX 128

typedef struct hs_tensor_info {
    char name[HS_NAME_MAX]; /* PyTorch name, e.g. "conv1.weight" */
    int ndim;
    int64_t shape[HS_MAX_DIMS];
    size_t numel;
    size_t offset;     /* in floats, into data/grad; aligned to 16 floats */
    int weight_decay;  /* 1 if weight decay applies (optimizers that exclude bias/LayerNorm use it) */
    int grad_written;  /* 1: an update's first writer of the gradient writes all of it (hs_params_grad_written) */
} hs_tensor_info;

/* Keys a PyTorch state_dict of the model holds besides the table's tensors, written into checkpoints'
 * /model so that load_state_dict(strict=True) reads them; loading ignores them. An alias is a second
 * name of a table tensor (tied weights that PyTorch lists twice); a buffer is a constant (host copy). */
typedef struct hs_param_alias {
    char name[HS_NAME_MAX];
    int target; /* index into tensors */
} hs_param_alias;
typedef struct hs_param_buffer {
    char name[HS_NAME_MAX];
    int ndim;
    int64_t shape[HS_MAX_DIMS];
    size_t numel;
    float *host;
} hs_param_buffer;

typedef struct hs_params {
    hs_tensor_info *tensors;
    int count, capacity;
    size_t total; /* floats in data (and grad), padding included */
    float *data;  /* device */
    float *grad;  /* device */
    hs_tensor_span *table; /* device [count]: offset, numel, decay flag of every tensor, uploaded once by
                            * hs_params_allocate, read by the multi-tensor ops (norms, clipping, optimizers) */
    const hs_backend *be;
    hs_param_alias *aliases;   /* [n_aliases] */
    hs_param_buffer *buffers;  /* [n_buffers] */
    int n_aliases, n_buffers;
    /* hs_params_zero_grad_accumulated's plan, made at its first call: device tables of the tensors whose
     * gradients are added to (zeroed each update) and of those written (grad_written) */
    hs_tensor_span *accumulated_table, *written_table;
    int accumulated_count, written_count;
    int zero_plan_ready;
    int poison_written; /* HETSEQ_CHECK_GRADS_WRITTEN=1: the written gradients are set to NaN instead */
} hs_params;

/* Declare a tensor before hs_params_allocate; returns its index. */
int hs_params_declare(hs_params *p, const char *name, int ndim, const int64_t *shape, int weight_decay);
/* Allocate data and grad (zeroed) on the backend and upload the tensor table. */
void hs_params_allocate(hs_params *p, const hs_backend *be);
void hs_params_free(hs_params *p);
/* A second state_dict name for tensor `target` (checkpoints write it too). */
void hs_params_add_alias(hs_params *p, const char *name, int target);
/* A constant state_dict buffer (values copied). */
void hs_params_add_buffer(hs_params *p, const char *name, int ndim, const int64_t *shape, const float *values);
/* Index of a tensor by name, -1 if absent. */
int hs_params_find(const hs_params *p, const char *name);
static inline float *hs_param_data(const hs_params *p, int i) { return p->data + p->tensors[i].offset; }
static inline float *hs_param_grad(const hs_params *p, int i) { return p->grad + p->tensors[i].offset; }
/* Every gradient to zero (an update none of whose micro-batches runs on this rank, and tests). */
void hs_params_zero_grad(hs_params *p);
/* Gradients written, not zeroed (docs/gpu.md "Gradients written, not zeroed"). A model declares, once
 * before training, each tensor whose gradient the first writer of an update's first non-empty
 * micro-batch (hs_step_ctx.grads_zero = 1) writes whole instead of adding to: a weight gradient product
 * with beta 0 (gemm_wgrad_bgrad's overwrite, gemm's beta), the bias gradient it writes with it. Such a
 * writer must run in every such micro-batch, or the model zeroes the tensor itself when it does not
 * (hs_params_zero_grad_tensor). */
void hs_params_grad_written(hs_params *p, int tensor);
/* At an update's start, when a micro-batch will run: zeroes the gradients of the tensors not declared
 * written, in one multi-tensor op (zero_tensors), and leaves the others as they are (the previous
 * update's values; NaN with HETSEQ_CHECK_GRADS_WRITTEN=1, so that a declaration no writer keeps shows up
 * as a non-finite gradient). The bits of the update are those of zeroing every gradient. */
void hs_params_zero_grad_accumulated(hs_params *p);
/* The tensor whose gradient holds grad (a pointer into p->grad, a row slice of a tied table included);
 * stops the run naming the caller's mistake when grad is outside every tensor. */
int hs_params_tensor_of_grad(const hs_params *p, const float *grad);
/* One tensor's gradient to zero (a declared-written tensor whose writer a micro-batch skips). */
void hs_params_zero_grad_tensor(const hs_params *p, int tensor);
/* Number of trainable values (padding excluded). */
size_t hs_params_numel(const hs_params *p);
/* Elements of the largest tensor (at least 1): the size of a host buffer that holds any one tensor. */
size_t hs_params_max_numel(const hs_params *p);

#endif
