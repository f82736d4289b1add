/* Row lookups: nn.Embedding (word, position, token type) and gathering rows of an activation (the
 * pooler's first token, the MLM head's masked positions). Forward copies or adds rows, backward
 * scatter-adds them back; the backend adds repeated rows in a fixed order (deterministic). */
#include "nn/bert_layers.h"

/* y[T,H] (+)= table[ids[t], :] */
void hs_embedding_forward(const hs_backend *be, float *y, const float *table, const int32_t *ids, int tokens,
                          int hidden, int vocab, int accumulate) {
    be->gather_rows(be, y, table, ids, tokens, hidden, vocab, accumulate);
}

/* ∂L/∂table[v,:] += Σ_{t: ids[t] = v} ∂L/∂y[t,:] */
void hs_embedding_backward(const hs_backend *be, float *dtable, const float *dy, const int32_t *ids, int tokens,
                           int hidden, int vocab) {
    be->scatter_add_rows(be, dtable, dy, ids, tokens, hidden, vocab);
}

/* Position ids are arange(L) in every sequence, so the lookup is a broadcast of table[0:L,H] over the
 * batch: the same add as a bias of L·H values per sample. */
void hs_position_embedding_forward(const hs_backend *be, float *y, const float *table, int batch, int seq_len,
                                   int hidden) {
    be->add_bias(be, y, table, batch, seq_len * hidden);
}

/* ∂L/∂table[0:L,H] += Σ_b ∂L/∂y[b,L,H] (the bias gradient of the same broadcast) */
void hs_position_embedding_backward(const hs_backend *be, float *dtable, const float *dy, int batch, int seq_len,
                                    int hidden) {
    be->bias_grad(be, dtable, dy, batch, seq_len * hidden);
}

/* y[N,C] = x[row_index[i], :] */
void hs_gather_rows_forward(const hs_backend *be, float *y, const float *x, const int32_t *row_index, int count,
                            int cols, int x_rows) {
    be->gather_rows(be, y, x, row_index, count, cols, x_rows, 0);
}

/* ∂L/∂x[row_index[i], :] += ∂L/∂y[i, :] */
void hs_gather_rows_backward(const hs_backend *be, float *dx, const float *dy, const int32_t *row_index, int count,
                             int cols, int x_rows) {
    be->scatter_add_rows(be, dx, dy, row_index, count, cols, x_rows);
}
