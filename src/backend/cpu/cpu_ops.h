/* The CPU backend's operations (OpenBLAS + OpenMP). Each matches the contract of the same-named member
 * of hs_backend (src/backend/backend.h). */
#ifndef HS_BACKEND_CPU_OPS_H
#define HS_BACKEND_CPU_OPS_H

#include "backend/backend.h"

/* cpu_memory.c */
void *hs_cpu_alloc(size_t bytes);
void hs_cpu_free(void *p);
void hs_cpu_upload(void *dst, const void *src_host, size_t bytes);
void hs_cpu_download(void *dst_host, const void *src, size_t bytes);
void hs_cpu_copy(void *dst, const void *src, size_t bytes);
void hs_cpu_zero(void *p, size_t bytes);
void hs_cpu_synchronize(void);

/* cpu_gemm.c */
void hs_cpu_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc);
void hs_cpu_add_bias(float *y, const float *bias, int rows, int cols);
void hs_cpu_bias_grad(float *dbias, const float *dy, int rows, int cols);

/* cpu_elementwise.c */
void hs_cpu_u8_to_float(float *y, const uint8_t *x, size_t n, float scale, float shift);
void hs_cpu_relu_forward(float *y, const float *x, size_t n);
void hs_cpu_relu_backward(float *dx, const float *dy, const float *y, size_t n);
void hs_cpu_dropout_forward(float *y, const float *x, int batch, size_t per_sample, size_t group, float p,
                            uint64_t key, int64_t first_sample);
void hs_cpu_dropout_backward(float *dx, const float *dy, int batch, size_t per_sample, size_t group, float p,
                             uint64_t key, int64_t first_sample);
double hs_cpu_sumsq(const float *x, size_t n);
void hs_cpu_scale(float *x, float a, size_t n);

/* cpu_conv.c */
size_t hs_cpu_conv2d_workspace_bytes(const hs_conv2d_shape *s);
void hs_cpu_conv2d_forward(const hs_conv2d_shape *s, float *y, const float *x, const float *w, const float *b,
                           void *workspace);
void hs_cpu_conv2d_backward(const hs_conv2d_shape *s, float *dx, float *dw, float *db, const float *dy,
                            const float *x, const float *w, void *workspace);
void hs_cpu_maxpool2d_forward(float *y, int32_t *argmax, const float *x, int n, int c, int h, int w, int k);
void hs_cpu_maxpool2d_backward(float *dx, const float *dy, const int32_t *argmax, int n, int c, int h, int w,
                               int k);

/* cpu_loss.c */
void hs_cpu_log_softmax_nll_forward(float *logprobs, const float *logits, const int32_t *labels, int rows,
                                    int cols, double stats_host[2]);
void hs_cpu_log_softmax_nll_backward(float *dlogits, const float *logprobs, const int32_t *labels, int rows,
                                     int cols, float scale);

/* cpu_optim.c */
void hs_cpu_adam_update(float *p, const float *g, float *m, float *v, size_t n, const hs_adam_hparams *h);
void hs_cpu_adadelta_update(float *p, const float *g, float *sq, float *acc, size_t n, double lr, double rho,
                            double eps, double weight_decay);
void hs_cpu_sgd_update(float *p, const float *g, float *buf, size_t n, double lr, double momentum,
                       double weight_decay, int first_step);

#endif
