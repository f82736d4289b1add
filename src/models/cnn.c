/* HetSeq's MNISTNet (see cnn.h): two 3×3 convolutions, max pooling, two linear layers, composed from
 * the layers in src/nn/. Activations live in buffers sized for max_batch; ReLUs run in place. */
#include "models/cnn.h"

#include <stdlib.h>

#include "math/hs_math.h"
#include "nn/grads_ready.h"
#include "nn/init.h"
#include "nn/layers.h"
#include "util/check.h"

enum {
    CNN_IN_H = 28, CNN_IN_W = 28,
    CNN_C1 = 32, CNN_H1 = 26, CNN_W1 = 26,       /* conv1 output */
    CNN_C2 = 64, CNN_H2 = 24, CNN_W2 = 24,       /* conv2 output */
    CNN_POOL = 2, CNN_HP = 12, CNN_WP = 12,      /* after max pooling */
    CNN_FLAT = CNN_C2 * CNN_HP * CNN_WP,         /* 9216 */
    CNN_HIDDEN = 128, CNN_CLASSES = 10,
};

/* Dropout layer ids: each dropout draws its masks from its own key hs_rng_key(seed, update, id). */
enum { CNN_DROPOUT_CONV_ID = 1, CNN_DROPOUT_FC_ID = 2 };

/* Backward stages, in the order they run (nn/grads_ready.h); the layout is conv1, conv2, fc1, fc2, so
 * each stage makes the gradients from its layer's weight up to the end final. */
enum { CNN_STAGE_FC2, CNN_STAGE_FC1, CNN_STAGE_CONV2, CNN_STAGE_CONV1, CNN_STAGES };

struct hs_cnn {
    hs_params *params;
    const hs_backend *be; /* kept: the params table may be freed before the model */
    int max_batch;
    float dropout_conv, dropout_fc;
    int conv1_w, conv1_b, conv2_w, conv2_b, fc1_w, fc1_b, fc2_w, fc2_b; /* indices in params */

    /* forward activations */
    float *h1;        /* [B,32,26,26] conv1, then ReLU in place */
    float *h2;        /* [B,64,24,24] conv2, then ReLU in place */
    float *pooled;    /* [B,64,12,12] */
    int32_t *argmax;  /* [B,64,12,12] */
    float *dropped1;  /* [B,9216] after channel-wise dropout, read as flat rows */
    float *f1;        /* [B,128] fc1, then ReLU in place */
    float *dropped2;  /* [B,128] after element-wise dropout */
    float *logits;    /* [B,10] */
    float *logprobs;  /* [B,10] */

    /* activation gradients (∂ sum-of-NLL / ∂ activation) */
    float *dlogits;   /* [B,10] */
    float *ddropped2; /* [B,128] */
    float *df1;       /* [B,128] */
    float *ddropped1; /* [B,9216] */
    float *dpooled;   /* [B,64,12,12] */
    float *dh2;       /* [B,64,24,24] */
    float *dh1;       /* [B,32,26,26] */

    hs_workspace conv_ws;
    hs_grads_ready ready; /* which gradients are final after each backward stage */
};

static int declare(hs_params *p, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3,
                   int weight_decay) {
    const int64_t shape[4] = {d0, d1, d2, d3};
    return hs_params_declare(p, name, ndim, shape, weight_decay);
}

hs_cnn *hs_cnn_create(hs_params *params, int max_batch, float dropout_conv, float dropout_fc) {
    if (max_batch < 1) HS_FATAL(NULL, "hs_cnn_create: max_batch %d", max_batch);
    hs_cnn *m;
    HS_ALLOC(m, 1);
    m->params = params;
    m->max_batch = max_batch;
    m->dropout_conv = dropout_conv;
    m->dropout_fc = dropout_fc;
    /* Weight decay flag: weights yes, biases no (used only by optimizers that exclude biases). */
    m->conv1_w = declare(params, "conv1.weight", 4, CNN_C1, 1, 3, 3, 1);
    m->conv1_b = declare(params, "conv1.bias", 1, CNN_C1, 0, 0, 0, 0);
    m->conv2_w = declare(params, "conv2.weight", 4, CNN_C2, CNN_C1, 3, 3, 1);
    m->conv2_b = declare(params, "conv2.bias", 1, CNN_C2, 0, 0, 0, 0);
    m->fc1_w = declare(params, "fc1.weight", 2, CNN_HIDDEN, CNN_FLAT, 0, 0, 1);
    m->fc1_b = declare(params, "fc1.bias", 1, CNN_HIDDEN, 0, 0, 0, 0);
    m->fc2_w = declare(params, "fc2.weight", 2, CNN_CLASSES, CNN_HIDDEN, 0, 0, 1);
    m->fc2_b = declare(params, "fc2.bias", 1, CNN_CLASSES, 0, 0, 0, 0);
    return m;
}

void hs_cnn_setup(hs_cnn *m) {
    const hs_backend *be = m->params->be;
    if (!be) HS_FATAL(NULL, "hs_cnn_setup before hs_params_allocate");
    m->be = be;
    const size_t b = (size_t)m->max_batch, f = sizeof(float);
    m->h1 = be->alloc(be, b * CNN_C1 * CNN_H1 * CNN_W1 * f);
    m->h2 = be->alloc(be, b * CNN_C2 * CNN_H2 * CNN_W2 * f);
    m->pooled = be->alloc(be, b * CNN_FLAT * f);
    m->argmax = be->alloc(be, b * CNN_FLAT * sizeof(int32_t));
    m->dropped1 = be->alloc(be, b * CNN_FLAT * f);
    m->f1 = be->alloc(be, b * CNN_HIDDEN * f);
    m->dropped2 = be->alloc(be, b * CNN_HIDDEN * f);
    m->logits = be->alloc(be, b * CNN_CLASSES * f);
    m->logprobs = be->alloc(be, b * CNN_CLASSES * f);
    m->dlogits = be->alloc(be, b * CNN_CLASSES * f);
    m->ddropped2 = be->alloc(be, b * CNN_HIDDEN * f);
    m->df1 = be->alloc(be, b * CNN_HIDDEN * f);
    m->ddropped1 = be->alloc(be, b * CNN_FLAT * f);
    m->dpooled = be->alloc(be, b * CNN_FLAT * f);
    m->dh2 = be->alloc(be, b * CNN_C2 * CNN_H2 * CNN_W2 * f);
    m->dh1 = be->alloc(be, b * CNN_C1 * CNN_H1 * CNN_W1 * f);

    hs_grads_ready_init(&m->ready, m->params, CNN_STAGES);
    const int stage_of[][3] = {{m->fc2_w, m->fc2_b, CNN_STAGE_FC2},
                               {m->fc1_w, m->fc1_b, CNN_STAGE_FC1},
                               {m->conv2_w, m->conv2_b, CNN_STAGE_CONV2},
                               {m->conv1_w, m->conv1_b, CNN_STAGE_CONV1}};
    for (size_t i = 0; i < sizeof stage_of / sizeof stage_of[0]; i++) {
        hs_grads_ready_writes(&m->ready, stage_of[i][0], stage_of[i][2]);
        hs_grads_ready_writes(&m->ready, stage_of[i][1], stage_of[i][2]);
    }
    hs_grads_ready_build(&m->ready, m->params);
    /* the fully connected layers' gradients are written by an update's first micro-batch (their
     * hs_linear_backward with grads_zero), not zeroed and added to; the convolutions' are added to */
    const int written[] = {m->fc2_w, m->fc2_b, m->fc1_w, m->fc1_b};
    for (size_t i = 0; i < sizeof written / sizeof written[0]; i++) hs_params_grad_written(m->params, written[i]);
}

void hs_cnn_init_params(hs_cnn *m, uint64_t seed) {
    hs_init_fan_in_uniform(m->params, m->conv1_w, m->conv1_b, seed);
    hs_init_fan_in_uniform(m->params, m->conv2_w, m->conv2_b, seed);
    hs_init_fan_in_uniform(m->params, m->fc1_w, m->fc1_b, seed);
    hs_init_fan_in_uniform(m->params, m->fc2_w, m->fc2_b, seed);
}

static hs_conv2d_shape conv1_shape(int batch) {
    return (hs_conv2d_shape){.n = batch, .c_in = 1, .h = CNN_IN_H, .w = CNN_IN_W, .c_out = CNN_C1, .kh = 3,
                             .kw = 3, .oh = CNN_H1, .ow = CNN_W1};
}

static hs_conv2d_shape conv2_shape(int batch) {
    return (hs_conv2d_shape){.n = batch, .c_in = CNN_C1, .h = CNN_H1, .w = CNN_W1, .c_out = CNN_C2, .kh = 3,
                             .kw = 3, .oh = CNN_H2, .ow = CNN_W2};
}

/* Dropout masks of this micro-batch: p = 0 (a copy) in eval mode. */
static void dropout_masks(const hs_cnn *m, const hs_step_ctx *ctx, int64_t first_sample, hs_dropout_mask *conv,
                          hs_dropout_mask *fc) {
    const int on = ctx && ctx->training;
    *conv = (hs_dropout_mask){.p = on ? m->dropout_conv : 0.0f,
                              .group = CNN_HP * CNN_WP, /* Dropout2d: one decision per channel plane */
                              .key = on ? hs_rng_key(ctx->seed, ctx->update, CNN_DROPOUT_CONV_ID) : 0,
                              .first_sample = first_sample};
    *fc = (hs_dropout_mask){.p = on ? m->dropout_fc : 0.0f,
                            .group = 1, /* element-wise */
                            .key = on ? hs_rng_key(ctx->seed, ctx->update, CNN_DROPOUT_FC_ID) : 0,
                            .first_sample = first_sample};
}

static void check_batch(const hs_cnn *m, int batch) {
    if (batch < 1 || batch > m->max_batch)
        HS_FATAL(NULL, "CNN micro-batch of %d samples, model sized for 1..%d", batch, m->max_batch);
}

/* x[B,1,28,28] -> logprobs[B,10]; adds loss sum, B and correct count into the device stats. */
static void forward(hs_cnn *m, const float *x, const int32_t *labels, int batch, const hs_dropout_mask *drop_conv,
                    const hs_dropout_mask *drop_fc, double *stats) {
    const hs_backend *be = m->params->be;
    const hs_params *p = m->params;
    const size_t b = (size_t)batch;
    const hs_conv2d_shape s1 = conv1_shape(batch), s2 = conv2_shape(batch);

    hs_conv2d_forward(be, &s1, m->h1, x, hs_param_data(p, m->conv1_w), hs_param_data(p, m->conv1_b), &m->conv_ws);
    hs_relu_forward(be, m->h1, m->h1, b * CNN_C1 * CNN_H1 * CNN_W1);
    hs_conv2d_forward(be, &s2, m->h2, m->h1, hs_param_data(p, m->conv2_w), hs_param_data(p, m->conv2_b),
                      &m->conv_ws);
    hs_relu_forward(be, m->h2, m->h2, b * CNN_C2 * CNN_H2 * CNN_W2);
    hs_maxpool2d_forward(be, m->pooled, m->argmax, m->h2, batch, CNN_C2, CNN_H2, CNN_W2, CNN_POOL);
    hs_dropout_forward(be, drop_conv, m->dropped1, m->pooled, batch, CNN_FLAT);
    hs_linear_forward(be, m->f1, m->dropped1, hs_param_data(p, m->fc1_w), hs_param_data(p, m->fc1_b), batch,
                      CNN_FLAT, CNN_HIDDEN);
    hs_relu_forward(be, m->f1, m->f1, b * CNN_HIDDEN);
    hs_dropout_forward(be, drop_fc, m->dropped2, m->f1, batch, CNN_HIDDEN);
    hs_linear_forward(be, m->logits, m->dropped2, hs_param_data(p, m->fc2_w), hs_param_data(p, m->fc2_b), batch,
                      CNN_HIDDEN, CNN_CLASSES);
    /* stats[loss_sum, sample_count, correct] += (Σ NLL, B, correct) */
    hs_log_softmax_nll_forward(be, m->logprobs, m->logits, labels, batch, CNN_CLASSES, stats + HS_STAT_LOSS_SUM);
}

void hs_cnn_forward_backward(hs_cnn *m, const float *x, const int32_t *labels, int batch, int64_t first_sample,
                             const hs_step_ctx *ctx, double *stats) {
    check_batch(m, batch);
    const hs_backend *be = m->params->be;
    const hs_params *p = m->params;
    const size_t b = (size_t)batch;
    const hs_conv2d_shape s1 = conv1_shape(batch), s2 = conv2_shape(batch);
    hs_dropout_mask drop_conv, drop_fc;
    dropout_masks(m, ctx, first_sample, &drop_conv, &drop_fc);

    forward(m, x, labels, batch, &drop_conv, &drop_fc, stats);

    /* Loss = mean NLL over the update's global samples: d(sum)/d(logits) * loss_scale[0]. */
    hs_log_softmax_nll_backward(be, m->dlogits, m->logprobs, labels, batch, CNN_CLASSES, (float)ctx->loss_scale[0]);
    hs_linear_backward(be, m->ddropped2, hs_param_grad(p, m->fc2_w), hs_param_grad(p, m->fc2_b), m->dlogits,
                       m->dropped2, hs_param_data(p, m->fc2_w), batch, CNN_HIDDEN, CNN_CLASSES, ctx->grads_zero);
    hs_grads_ready_after(&m->ready, ctx, CNN_STAGE_FC2);
    hs_dropout_backward(be, &drop_fc, m->df1, m->ddropped2, batch, CNN_HIDDEN);
    hs_relu_backward(be, m->df1, m->df1, m->f1, b * CNN_HIDDEN);
    hs_linear_backward(be, m->ddropped1, hs_param_grad(p, m->fc1_w), hs_param_grad(p, m->fc1_b), m->df1,
                       m->dropped1, hs_param_data(p, m->fc1_w), batch, CNN_FLAT, CNN_HIDDEN, ctx->grads_zero);
    hs_grads_ready_after(&m->ready, ctx, CNN_STAGE_FC1);
    hs_dropout_backward(be, &drop_conv, m->dpooled, m->ddropped1, batch, CNN_FLAT);
    hs_maxpool2d_backward(be, m->dh2, m->dpooled, m->argmax, batch, CNN_C2, CNN_H2, CNN_W2, CNN_POOL);
    hs_relu_backward(be, m->dh2, m->dh2, m->h2, b * CNN_C2 * CNN_H2 * CNN_W2);
    hs_conv2d_backward(be, &s2, m->dh1, hs_param_grad(p, m->conv2_w), hs_param_grad(p, m->conv2_b), m->dh2, m->h1,
                       hs_param_data(p, m->conv2_w), &m->conv_ws);
    hs_grads_ready_after(&m->ready, ctx, CNN_STAGE_CONV2);
    hs_relu_backward(be, m->dh1, m->dh1, m->h1, b * CNN_C1 * CNN_H1 * CNN_W1);
    hs_conv2d_backward(be, &s1, NULL, hs_param_grad(p, m->conv1_w), hs_param_grad(p, m->conv1_b), m->dh1, x,
                       hs_param_data(p, m->conv1_w), &m->conv_ws);
    hs_grads_ready_after(&m->ready, ctx, CNN_STAGE_CONV1);
}

void hs_cnn_evaluate(hs_cnn *m, const float *x, const int32_t *labels, int batch, double *stats) {
    check_batch(m, batch);
    hs_dropout_mask drop_conv, drop_fc;
    dropout_masks(m, NULL, 0, &drop_conv, &drop_fc);
    forward(m, x, labels, batch, &drop_conv, &drop_fc, stats);
}

void hs_cnn_free(hs_cnn *m) {
    if (!m) return;
    const hs_backend *be = m->be;
    if (be) {
        float *bufs[] = {m->h1,       m->h2,      m->pooled, m->dropped1, m->f1,        m->dropped2,
                         m->logits,   m->logprobs, m->dlogits, m->ddropped2, m->df1,      m->ddropped1,
                         m->dpooled,  m->dh2,     m->dh1};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
            if (bufs[i]) be->free(be, bufs[i]);
        if (m->argmax) be->free(be, m->argmax);
        hs_workspace_release(be, &m->conv_ws);
    }
    hs_grads_ready_free(&m->ready);
    free(m);
}
