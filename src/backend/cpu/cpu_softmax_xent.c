/* Softmax cross-entropy on the CPU, built for the MLM head's wide rows (30k classes): one pass finds
 * the maximum and the first argmax, one pass stores e^{x - max} with the vectorisable exponential and
 * sums it in double, one pass scales by 1/sum. The probabilities overwrite the logits when the caller
 * wants (probs == logits), and the backward pass turns them into the gradient in place, so the [rows,V]
 * logits buffer is the only one the head needs. NLL = max + log(sum) - x_label in double. Rows run in
 * parallel into per-row slots summed in row order (cpu_row_losses.h): the statistics do not depend on
 * the thread count. */
/* Floating-point exceptions are never trapped here, so let GCC turn the selects inside the
 * kernels/math formulas into vector blends (with trapping math it keeps them as branches and the
 * exp/erf loops stay scalar). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <math.h>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_row_losses.h"
#include "backend/cpu/cpu_simd.h"
#include "math/fast_exp_erf.h"

/* One row: pr[cols] = softmax(x) (pr may alias x); returns the NLL of label (0 when label < 0) and
 * sets *correct. argmax = the first index holding the maximum (torch.argmax's tie rule). */
static HS_SIMD_CLONES double softmax_xent_row(float *pr, const float *x, int cols, int label, unsigned char *correct) {
    float m = x[0];
#pragma omp simd reduction(max : m)
    for (int c = 0; c < cols; c++) m = x[c] > m ? x[c] : m;
    int best = cols;
#pragma omp simd reduction(min : best)
    for (int c = 0; c < cols; c++) best = x[c] == m && c < best ? c : best;
    const float x_label = label >= 0 ? x[label] : 0.0f; /* read before x is overwritten */
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < cols; c++) {
        const float e = hs_exp_fast(x[c] - m);
        pr[c] = e;
        sum += (double)e;
    }
    const float inv = (float)(1.0 / sum);
#pragma omp simd
    for (int c = 0; c < cols; c++) pr[c] *= inv;
    *correct = label >= 0 && best == label;
    return label >= 0 ? (double)m + log(sum) - (double)x_label : 0.0;
}

void hs_cpu_softmax_xent_forward(const hs_backend *be, float *probs, const float *logits, const int32_t *labels,
                                 int rows, int cols, double *stats) {
    (void)be;
    if (rows <= 0) return;
    hs_row_losses slot = hs_row_losses_alloc(rows);
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols > 32768)
    for (int r = 0; r < rows; r++) {
        const size_t off = (size_t)r * (size_t)cols;
        slot.nll[r] = softmax_xent_row(probs + off, logits + off, cols, labels[r], &slot.correct[r]);
    }
    hs_row_losses_sum(&slot, labels, rows, stats);
}

void hs_cpu_softmax_xent_backward(const hs_backend *be, float *dlogits, const float *probs, const int32_t *labels,
                                  int rows, int cols, float scale) {
    (void)be;
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols > 32768)
    for (int r = 0; r < rows; r++) {
        const size_t off = (size_t)r * (size_t)cols;
        float *g = dlogits + off;
        const float *pr = probs + off; /* may alias g */
        const int label = labels[r];
        if (label < 0) {
            for (int c = 0; c < cols; c++) g[c] = 0.0f;
            continue;
        }
#pragma omp simd
        for (int c = 0; c < cols; c++) g[c] = scale * pr[c];
        g[label] -= scale;
    }
}
