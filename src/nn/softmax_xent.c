/* Softmax cross-entropy over rows with integer labels (nn.CrossEntropyLoss, ignore_index -1): the MLM
 * loss over the vocabulary and the NSP loss over 2 classes. Summed NLL plus counts; the caller picks
 * the reduction through the backward's scale (1/count for PyTorch's mean). */
#include "nn/bert_layers.h"

/* probs[R,C] = softmax(logits); stats[0] += Σ NLL, stats[1] += labelled rows, stats[2] += correct */
void hs_softmax_xent_forward(const hs_backend *be, float *probs, const float *logits, const int32_t *labels,
                             int rows, int classes, double *stats) {
    be->softmax_xent_forward(be, probs, logits, labels, rows, classes, stats);
}

/* ∂(scale·Σ NLL)/∂logits = scale·(probs - onehot(label)), 0 for ignored rows */
void hs_softmax_xent_backward(const hs_backend *be, float *dlogits, const float *probs, const int32_t *labels,
                              int rows, int classes, float scale) {
    be->softmax_xent_backward(be, dlogits, probs, labels, rows, classes, scale);
}
