/* Log-softmax + negative log-likelihood of one row, shared by the CPU backend and the CUDA kernels.
 *   logprob_c = x_c - m - log(sum_k exp(x_k - m)),  m = max_k x_k   (subtracting m: no overflow)
 *   nll = -logprob_label;  d(nll)/dx_c = softmax_c - 1[c == label] = exp(logprob_c) - 1[c == label]. */
#ifndef HS_KERNELS_MATH_SOFTMAX_NLL_H
#define HS_KERNELS_MATH_SOFTMAX_NLL_H

#include <math.h>

#include "math/hs_math.h"

/* logprob = x - log_norm, rounded once to float: the forward's value, and the backward's when it
 * recomputes it from the logits and the row's log_norm */
HS_HD static inline float hs_logprob(float x, double log_norm) { return (float)((double)x - log_norm); }

/* logits[cols] -> logprobs[cols] (NULL: not written); returns the NLL of `label` (double), sets *argmax to
 * the first maximal logit (PyTorch's argmax on ties) and *log_norm_out (NULL: not) to the row's log_norm.
 * The exponent sum is accumulated in double. */
HS_HD static inline double hs_log_softmax_nll_row(float *logprobs, const float *logits, int cols, int label,
                                                  int *argmax, double *log_norm_out) {
    float m = logits[0];
    int best = 0;
    for (int c = 1; c < cols; c++)
        if (logits[c] > m) {
            m = logits[c];
            best = c;
        }
    double sum = 0.0;
    for (int c = 0; c < cols; c++) sum += exp((double)logits[c] - (double)m);
    const double log_norm = (double)m + log(sum);
    if (logprobs)
        for (int c = 0; c < cols; c++) logprobs[c] = hs_logprob(logits[c], log_norm);
    if (log_norm_out) *log_norm_out = log_norm;
    *argmax = best;
    return log_norm - (double)logits[label];
}

/* d(scale * nll)/d logit_c from the stored log-probability. */
HS_HD static inline float hs_nll_logit_grad(float logprob, int is_label, float scale) {
    return scale * (expf(logprob) - (is_label ? 1.0f : 0.0f));
}

#endif
