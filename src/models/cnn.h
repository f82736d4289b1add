/* HetSeq's MNIST CNN (MNISTNet), exactly:
 *   x[B,1,28,28] -> conv1 1->32 3x3 -> ReLU -> conv2 32->64 3x3 -> ReLU -> maxpool 2 -> Dropout2d(0.25)
 *   (channel-wise) -> flatten [B,9216] -> fc1 9216->128 -> ReLU -> dropout(0.5) (element-wise)
 *   -> fc2 128->10 -> log_softmax -> NLL.
 * Parameters (PyTorch names): conv1.weight[32,1,3,3] conv1.bias[32] conv2.weight[64,32,3,3] conv2.bias[64]
 * fc1.weight[128,9216] fc1.bias[128] fc2.weight[10,128] fc2.bias[10]. */
#ifndef HS_MODELS_CNN_H
#define HS_MODELS_CNN_H

#include <stdint.h>

#include "nn/params.h"
#include "nn/step_ctx_stats.h"

typedef struct hs_cnn hs_cnn;

/* Declares the parameters into `params` (before hs_params_allocate) and sizes activations for up to
 * max_batch samples. Dropout probabilities from the config (HetSeq: 0.25, 0.5). */
hs_cnn *hs_cnn_create(hs_params *params, int max_batch, float dropout_conv, float dropout_fc);
/* After hs_params_allocate: activation buffers on the params' backend. */
void hs_cnn_setup(hs_cnn *m);
/* PyTorch default initialisation (kaiming_uniform a=sqrt(5): U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for
 * weights and biases), deterministic from seed. */
void hs_cnn_init_params(hs_cnn *m, uint64_t seed);
/* x[B,1,28,28] normalised input, labels[B] int32 in [0,10) (device). Accumulates ctx->loss_scale[0] *
 * d(sum of NLL)/d(params) into params->grad; adds loss sum, B and correct count into the device stats
 * (float64, hs_stats layout: slots HS_STAT_LOSS_SUM, _SAMPLE_COUNT, _CORRECT). first_sample keys the
 * dropout masks. */
void hs_cnn_forward_backward(hs_cnn *m, const float *x, const int32_t *labels, int batch, int64_t first_sample,
                             const hs_step_ctx *ctx, double *stats);
/* Eval mode (no dropout): adds loss sum, B, correct into the device stats. */
void hs_cnn_evaluate(hs_cnn *m, const float *x, const int32_t *labels, int batch, double *stats);
void hs_cnn_free(hs_cnn *m);

#endif
