/* log_softmax followed by the negative log-likelihood of the label, summed over the batch. */
#include "nn/layers.h"

/* logprobs[B,C] = logits - logsumexp(logits); stats[0] += Σ_B -logprobs[b,label_b], stats[1] += B,
 * stats[2] += correct (stats: device float64 [3]) */
void hs_log_softmax_nll_forward(const hs_backend *be, float *logprobs, const float *logits, const int32_t *labels,
                                int batch, int classes, double *stats) {
    be->log_softmax_nll_forward(be, logprobs, logits, labels, batch, classes, stats);
}

/* ∂(scale·Σ NLL)/∂logits[B,C] = scale · (exp(logprobs) - onehot(label)) */
void hs_log_softmax_nll_backward(const hs_backend *be, float *dlogits, const float *logprobs,
                                 const int32_t *labels, int batch, int classes, float scale) {
    be->log_softmax_nll_backward(be, dlogits, logprobs, labels, batch, classes, scale);
}
