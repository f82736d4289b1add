/* Per-row loss slots shared by the CPU losses (cpu_loss.c, cpu_softmax_xent.c): rows run in parallel
 * and write their NLL and hit into slot r; the slots are then summed in row order, so the statistics do
 * not depend on the thread count. */
#ifndef HS_BACKEND_CPU_ROW_LOSSES_H
#define HS_BACKEND_CPU_ROW_LOSSES_H

#include <stdint.h>
#include <stdlib.h>

#include "util/check.h"

typedef struct hs_row_losses {
    double *nll;            /* [rows] NLL of row r (0 for an unlabelled row) */
    unsigned char *correct; /* [rows] 1 when row r's argmax is its label */
} hs_row_losses;

static inline hs_row_losses hs_row_losses_alloc(int rows) {
    hs_row_losses s;
    HS_ALLOC(s.nll, rows);
    HS_ALLOC(s.correct, rows);
    return s;
}

/* stats[0] += Σ nll, stats[1] += labelled rows (labels[r] >= 0; labels NULL: every row), stats[2] += Σ
 * correct, each summed in row order; frees the slots. */
static inline void hs_row_losses_sum(hs_row_losses *s, const int32_t *labels, int rows, double *stats) {
    double nll = 0.0, count = 0.0, correct = 0.0;
    for (int r = 0; r < rows; r++) {
        nll += s->nll[r];
        count += labels ? labels[r] >= 0 : 1;
        correct += s->correct[r];
    }
    stats[0] += nll;
    stats[1] += count;
    stats[2] += correct;
    free(s->nll);
    free(s->correct);
}

#endif
