/* The CPU backend's operations (OpenBLAS + OpenMP). Each matches the contract of the same-named member
 * of hs_backend (src/backend/backend.h). */
#ifndef HS_BACKEND_CPU_OPS_H
#define HS_BACKEND_CPU_OPS_H

#include "backend/backend.h"

/* cpu_memory.c */
void *hs_cpu_alloc(const hs_backend *be, size_t bytes);
void hs_cpu_free(const hs_backend *be, void *p);
void hs_cpu_upload(const hs_backend *be, void *dst, const void *src_host, size_t bytes);
void hs_cpu_download(const hs_backend *be, void *dst_host, const void *src, size_t bytes);
void hs_cpu_copy(const hs_backend *be, void *dst, const void *src, size_t bytes);
void hs_cpu_zero(const hs_backend *be, void *p, size_t bytes);
void hs_cpu_synchronize(const hs_backend *be);
void *hs_cpu_host_alloc(const hs_backend *be, size_t bytes);
void hs_cpu_host_free(const hs_backend *be, void *p);
void *hs_cpu_event_create(const hs_backend *be);
void hs_cpu_event_destroy(const hs_backend *be, void *event);
void hs_cpu_upload_async(const hs_backend *be, void *dst, const void *src_host, size_t bytes);
void hs_cpu_event_record(const hs_backend *be, void *event, int stream);
void hs_cpu_stream_wait(const hs_backend *be, int stream, void *event);
void hs_cpu_event_synchronize(const hs_backend *be, void *event);

/* cpu_gemm.c (hs_cpu_sgemm: the same product without the device, for the convolutions) */
void hs_cpu_sgemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                  int ldb, float beta, float *c, int ldc);
void hs_cpu_gemm(const hs_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);
void hs_cpu_add_bias(const hs_backend *be, float *y, const float *bias, int rows, int cols);
void hs_cpu_bias_grad(const hs_backend *be, float *dbias, const float *dy, int rows, int cols);

/* cpu_elementwise.c */
void hs_cpu_u8_to_float(const hs_backend *be, float *y, const uint8_t *x, size_t n, float scale, float shift);
void hs_cpu_relu_forward(const hs_backend *be, float *y, const float *x, size_t n);
void hs_cpu_relu_backward(const hs_backend *be, float *dx, const float *dy, const float *y, size_t n);
void hs_cpu_dropout_forward(const hs_backend *be, float *y, const float *x, int batch, size_t per_sample, size_t group,
                            float p, uint64_t key, int64_t first_sample);
void hs_cpu_dropout_backward(const hs_backend *be, float *dx, const float *dy, int batch, size_t per_sample,
                             size_t group, float p, uint64_t key, int64_t first_sample);
/* activation storage in the 16-bit type of be->precision (src/util/lowp.h) */
void hs_cpu_to_half(const hs_backend *be, uint16_t *dst, const float *src, size_t n);
void hs_cpu_from_half(const hs_backend *be, float *dst, const uint16_t *src, size_t n);
void hs_cpu_sumsq_tensors(const hs_backend *be, double *sumsq, double *total, const float *flat,
                          const hs_tensor_span *table, int count);
void hs_cpu_scale_tensors(const hs_backend *be, float *flat, float a, const hs_tensor_span *table, int count);

/* cpu_conv.c */
size_t hs_cpu_conv2d_workspace_bytes(const hs_backend *be, const hs_conv2d_shape *s);
void hs_cpu_conv2d_forward(const hs_backend *be, const hs_conv2d_shape *s, float *y, const float *x, const float *w,
                           const float *b, void *workspace);
void hs_cpu_conv2d_backward(const hs_backend *be, const hs_conv2d_shape *s, float *dx, float *dw, float *db,
                            const float *dy, const float *x, const float *w, void *workspace);
/* (Winograd, which cpu_conv.c dispatches to: cpu_winograd.h) */
void hs_cpu_maxpool2d_forward(const hs_backend *be, float *y, int32_t *argmax, const float *x, int n, int c, int h,
                              int w, int k);
void hs_cpu_maxpool2d_backward(const hs_backend *be, float *dx, const float *dy, const int32_t *argmax, int n, int c,
                               int h, int w, int k);

/* cpu_loss.c */
void hs_cpu_log_softmax_nll_forward(const hs_backend *be, float *logprobs, const float *logits, const int32_t *labels,
                                    int rows, int cols, double *stats);
void hs_cpu_log_softmax_nll_backward(const hs_backend *be, float *dlogits, const float *logprobs, const int32_t *labels,
                                     int rows, int cols, float scale);

/* cpu_optim.c */
void hs_cpu_adam_update(const hs_backend *be, float *p, const float *g, float *m, float *v, const hs_tensor_span *table,
                        int count, const hs_adam_hparams *h);
void hs_cpu_adadelta_update(const hs_backend *be, float *p, const float *g, float *sq, float *acc,
                            const hs_tensor_span *table, int count, double lr, double rho, double eps,
                            double weight_decay);
void hs_cpu_sgd_update(const hs_backend *be, float *p, const float *g, float *buf, const hs_tensor_span *table,
                       int count, double lr, double momentum, double weight_decay, int first_step);
void hs_cpu_lamb_update(const hs_backend *be, float *p, const float *g, float *m, float *v, const hs_tensor_span *table,
                        int count, double *norms, const hs_lamb_hparams *h);

/* cpu_rows.c: row gathers and scatter-adds, bias passes over column slices */
void hs_cpu_gather_rows(const hs_backend *be, float *y, const float *x, const int32_t *index, int count, int cols,
                        int x_rows, int accumulate);
void hs_cpu_scatter_add_rows(const hs_backend *be, float *dx, const float *dy, const int32_t *index, int count,
                             int cols, int dx_rows);
void hs_cpu_add_bias_strided(const hs_backend *be, float *y, int ldy, const float *bias, int rows, int cols);
void hs_cpu_bias_grad_strided(const hs_backend *be, float *dbias, const float *dy, int ldy, int rows, int cols);

/* cpu_layernorm.c */
void hs_cpu_layernorm_forward(const hs_backend *be, float *y, float *x_sum, float *mean, float *rstd, const float *x,
                              const float *residual, const float *gamma, const float *beta, int rows, int cols,
                              float eps);
void hs_cpu_layernorm_backward(const hs_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy,
                               const float *x, const float *mean, const float *rstd, const float *gamma, int rows,
                               int cols);

/* cpu_activations.c: GELU (with the fused bias form) and tanh */
void hs_cpu_gelu_forward(const hs_backend *be, float *y, const float *x, size_t n);
void hs_cpu_bias_gelu_forward(const hs_backend *be, float *y, float *x, const float *bias, int rows, int cols);
void hs_cpu_gelu_backward(const hs_backend *be, float *dx, const float *dy, const float *x, size_t n);
void hs_cpu_tanh_forward(const hs_backend *be, float *y, const float *x, size_t n);
void hs_cpu_tanh_backward(const hs_backend *be, float *dx, const float *dy, const float *y, size_t n);

/* cpu_attention.c: scaled dot-product attention and its additive mask */
void hs_cpu_attention_mask_bias(const hs_backend *be, float *bias, const int32_t *mask, size_t n);
void hs_cpu_attention_forward(const hs_backend *be, float *ctx, float *probs, const float *qkv, const float *mask_bias,
                              int batch, int seq_len, int heads, int head_dim, float p, uint64_t key,
                              int64_t first_sample);
void hs_cpu_attention_backward(const hs_backend *be, float *dqkv, const float *dctx, const float *qkv,
                               const float *probs, int batch, int seq_len, int heads, int head_dim, float p,
                               uint64_t key, int64_t first_sample);

/* cpu_rel_attention.c: relative-position attention with segment memory (Transformer-XL) */
void hs_cpu_rel_attention_forward(const hs_backend *be, float *ctx, float *probs, const float *qkv, const float *r,
                                  const float *r_w_bias, const float *r_r_bias, int batch, int qlen, int mlen,
                                  int heads, int head_dim, int lower_shift, float scale, float p, uint64_t key,
                                  int64_t first_sample);
void hs_cpu_rel_attention_backward(const hs_backend *be, float *dqkv, float *dr, float *dr_w_bias, float *dr_r_bias,
                                   const float *dctx, const float *qkv, const float *r, const float *r_w_bias,
                                   const float *r_r_bias, const float *probs, int batch, int qlen, int mlen, int heads,
                                   int head_dim, int lower_shift, float scale, float p, uint64_t key,
                                   int64_t first_sample);

/* cpu_softmax_xent.c */
void hs_cpu_softmax_xent_forward(const hs_backend *be, float *probs, const float *logits, const int32_t *labels,
                                 int rows, int cols, double *stats);
void hs_cpu_softmax_xent_backward(const hs_backend *be, float *dlogits, const float *probs, const int32_t *labels,
                                  int rows, int cols, float scale);

#endif
