/* Log-softmax + NLL on the CPU; the per-row math is kernels/math/softmax_nll.h. Rows run in parallel;
 * their losses land in per-row slots summed in row order (cpu_row_losses.h), so the statistics do not
 * depend on the thread count. Labels are < cols (checked while the batch is staged); label < 0 is an
 * ignored (padding) row. */
#include <string.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_row_losses.h"
#include "math/softmax_nll.h"

/* logprobs[rows,cols] = log_softmax(logits[rows,cols]) and/or log_norm[rows]; stats[0] += Σ NLL, stats[1] +=
 * rows, stats[2] += correct (rows with label < 0 ignored) */
void hs_cpu_log_softmax_nll_forward(const hs_backend *be, float *logprobs, const float *logits, const int32_t *labels,
                                    int rows, int cols, double *stats, double *log_norm) {
    (void)be;
    hs_output_check("log_softmax_nll_forward: logprobs or log_norm", logprobs, log_norm);
    if (rows <= 0) return;
    hs_row_losses slot = hs_row_losses_alloc(rows);
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols > 32768)
    for (int r = 0; r < rows; r++) {
        int argmax;
        /* label < 0: an ignored (padding) row, its log-probabilities written all the same */
        const int label = labels[r] < 0 ? 0 : labels[r];
        slot.nll[r] = hs_log_softmax_nll_row(logprobs ? logprobs + (size_t)r * (size_t)cols : NULL,
                                             logits + (size_t)r * (size_t)cols, cols, label, &argmax,
                                             log_norm ? log_norm + r : NULL);
        slot.correct[r] = argmax == labels[r];
        if (labels[r] < 0) slot.nll[r] = 0.0;
    }
    hs_row_losses_sum(&slot, labels, rows, stats);
}

#define HS_NLL_SPAN 1024 /* columns of a row per pass (a stack buffer when dlogits is not written) */

/* dlogits[rows,cols] = scale * (exp(logprobs) - onehot(labels)), 0 on rows with label < 0; logprobs from the
 * logits and log_norm when NULL (dlogits may alias logits: each element read, then written); dlogits16
 * its rounding, and dlogits NULL (the gradient only in 16 bits) when dlogits16 is not */
void hs_cpu_log_softmax_nll_backward(const hs_backend *be, float *dlogits, const float *logprobs, const float *logits,
                                     const double *log_norm, const int32_t *labels, int rows, int cols, float scale,
                                     uint16_t *dlogits16) {
    if (dlogits16) hs_half_precision_check(be, "log_softmax_nll_backward: dlogits16");
    hs_output_check("log_softmax_nll_backward: dlogits or dlogits16", dlogits, dlogits16);
    hs_log_softmax_nll_backward_check(logprobs, logits, log_norm);
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols > 32768)
    for (int r = 0; r < rows; r++)
        for (int c0 = 0; c0 < cols; c0 += HS_NLL_SPAN) {
            const int len = cols - c0 < HS_NLL_SPAN ? cols - c0 : HS_NLL_SPAN;
            const size_t off = (size_t)r * (size_t)cols + (size_t)c0;
            float span[HS_NLL_SPAN];
            float *d = dlogits ? dlogits + off : span;
            if (labels[r] < 0) /* an ignored row */
                memset(d, 0, (size_t)len * sizeof *d);
            else if (logprobs)
                for (int c = 0; c < len; c++) d[c] = hs_nll_logit_grad(logprobs[off + c], c0 + c == labels[r], scale);
            else
                for (int c = 0; c < len; c++)
                    d[c] = hs_nll_logit_grad(hs_logprob(logits[off + c], log_norm[r]), c0 + c == labels[r], scale);
            if (dlogits16) hs_cpu_to_half(be, dlogits16 + off, d, (size_t)len);
        }
}
