/* Log-softmax + NLL on the CPU; the per-row math is kernels/math/softmax_nll.h. Rows run in parallel;
 * their losses land in a per-row array that is then summed in row order, so the statistics do not
 * depend on the thread count. */
#include <stdlib.h>

#include "backend/cpu/cpu_ops.h"
#include "math/softmax_nll.h"
#include "util/check.h"

static void check_labels(const int32_t *labels, int rows, int cols) {
    for (int r = 0; r < rows; r++)
        if (labels[r] < 0 || labels[r] >= cols)
            hs_die("label %d of sample %d in this batch is outside [0, %d): the data file's labels do not "
                   "match the model's %d classes; check the dataset (re-run `hetseq prep`)",
                   (int)labels[r], r, cols, cols);
}

/* logprobs[rows,cols] = log_softmax(logits[rows,cols]); stats[0] += sum of NLL, stats[1] += correct */
void hs_cpu_log_softmax_nll_forward(float *logprobs, const float *logits, const int32_t *labels, int rows,
                                    int cols, double stats_host[2]) {
    if (rows <= 0) return;
    check_labels(labels, rows, cols);
    double *row_nll;
    unsigned char *row_correct;
    HS_ALLOC(row_nll, rows);
    HS_ALLOC(row_correct, rows);
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols > 32768)
    for (int r = 0; r < rows; r++) {
        int argmax;
        row_nll[r] = hs_log_softmax_nll_row(logprobs + (size_t)r * (size_t)cols, logits + (size_t)r * (size_t)cols,
                                            cols, labels[r], &argmax);
        row_correct[r] = argmax == labels[r];
    }
    double nll = 0.0, correct = 0.0;
    for (int r = 0; r < rows; r++) {
        nll += row_nll[r];
        correct += row_correct[r];
    }
    stats_host[0] += nll;
    stats_host[1] += correct;
    free(row_nll);
    free(row_correct);
}

/* dlogits[rows,cols] = scale * (exp(logprobs) - onehot(labels)) */
void hs_cpu_log_softmax_nll_backward(float *dlogits, const float *logprobs, const int32_t *labels, int rows,
                                     int cols, float scale) {
    check_labels(labels, rows, cols);
#pragma omp parallel for schedule(static) if ((size_t)rows * (size_t)cols > 32768)
    for (int r = 0; r < rows; r++) {
        const size_t off = (size_t)r * (size_t)cols;
        for (int c = 0; c < cols; c++) dlogits[off + c] = hs_nll_logit_grad(logprobs[off + c], c == labels[r], scale);
    }
}
