/* The CUDA backend's operations. Each matches the contract of the same-named member of hs_backend
 * (src/backend/backend.h); all are enqueued on the device's compute stream (hs_cuda_stream(be)) and
 * return at once, except download and synchronize. Defined with C linkage in the files named below
 * (the .cu files under kernels/ hold the kernels and their launchers; the .c files of src/backend/cuda/ the library calls). */
#ifndef HS_BACKEND_CUDA_OPS_H
#define HS_BACKEND_CUDA_OPS_H

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* src/backend/cuda/cuda_memory.c: memory, copies, pinned staging buffers */
void *hs_cuda_alloc(const hs_backend *be, size_t bytes);
void hs_cuda_free(const hs_backend *be, void *p);
void hs_cuda_upload(const hs_backend *be, void *dst, const void *src_host, size_t bytes);
void hs_cuda_download(const hs_backend *be, void *dst_host, const void *src, size_t bytes);
void hs_cuda_copy(const hs_backend *be, void *dst, const void *src, size_t bytes);
void hs_cuda_zero(const hs_backend *be, void *p, size_t bytes);
void hs_cuda_synchronize(const hs_backend *be);
void *hs_cuda_host_alloc(const hs_backend *be, size_t bytes);
void hs_cuda_host_free(const hs_backend *be, void *p);
void *hs_cuda_event_create(const hs_backend *be);
void hs_cuda_event_destroy(const hs_backend *be, void *event);
void hs_cuda_upload_async(const hs_backend *be, void *dst, const void *src_host, size_t bytes);
void hs_cuda_event_record(const hs_backend *be, void *event, int stream);
void hs_cuda_stream_wait(const hs_backend *be, int stream, void *event);
void hs_cuda_event_synchronize(const hs_backend *be, void *event);

/* src/backend/cuda/cuda_gemm.c: GEMMs through cuBLASLt */
void hs_cuda_gemm(const hs_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                 int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* kernels/lowp.cu: operands of the bf16/fp16 products (precision = HS_PRECISION_BF16 or _FP16; src/util/lowp.h):
 * y[n] = the 16-bit patterns of x[n] (CUDA_R_16BF / CUDA_R_16F), or x[n] rounded and kept in fp32 (y may alias x) */
void hs_cuda_to_half_bits(const hs_backend *be, int precision, uint16_t *y, const float *x, size_t n);
void hs_cuda_round_floats(const hs_backend *be, int precision, float *y, const float *x, size_t n);
/* the seam's to_half / from_half (activation storage in the 16-bit type of be->precision) */
void hs_cuda_to_half(const hs_backend *be, uint16_t *dst, const float *src, size_t n);
void hs_cuda_from_half(const hs_backend *be, float *dst, const uint16_t *src, size_t n);

/* kernels/bias.cu: bias passes (deterministic column sums: one thread per column, rows in order) */
void hs_cuda_add_bias(const hs_backend *be, float *y, const float *bias, int rows, int cols);
void hs_cuda_bias_grad(const hs_backend *be, float *dbias, const float *dy, int rows, int cols);
void hs_cuda_add_bias_strided(const hs_backend *be, float *y, int ldy, const float *bias, int rows, int cols);
void hs_cuda_bias_grad_strided(const hs_backend *be, float *dbias, const float *dy, int ldy, int rows, int cols);

/* kernels/elementwise.cu: element-wise maps, dropout, activations */
void hs_cuda_u8_to_float(const hs_backend *be, float *y, const uint8_t *x, size_t n, float scale, float shift);
void hs_cuda_relu_forward(const hs_backend *be, float *y, const float *x, size_t n);
void hs_cuda_relu_backward(const hs_backend *be, float *dx, const float *dy, const float *y, size_t n);
void hs_cuda_dropout_forward(const hs_backend *be, float *y, const float *x, int batch, size_t per_sample, size_t group,
                 float p, uint64_t key, int64_t first_sample);
void hs_cuda_dropout_backward(const hs_backend *be, float *dx, const float *dy, int batch, size_t per_sample,
                 size_t group, float p, uint64_t key, int64_t first_sample);
void hs_cuda_gelu_forward(const hs_backend *be, float *y, const float *x, size_t n);
void hs_cuda_bias_gelu_forward(const hs_backend *be, float *y, float *x, const float *bias, int rows, int cols);
void hs_cuda_gelu_backward(const hs_backend *be, float *dx, const float *dy, const float *x, size_t n);
void hs_cuda_tanh_forward(const hs_backend *be, float *y, const float *x, size_t n);
void hs_cuda_tanh_backward(const hs_backend *be, float *dx, const float *dy, const float *y, size_t n);
void hs_cuda_attention_mask_bias(const hs_backend *be, float *bias, const int32_t *mask, size_t n);

/* src/backend/cuda/cuda_conv.c: convolutions through cuDNN */
size_t hs_cuda_conv2d_workspace_bytes(const hs_backend *be, const hs_conv2d_shape *s);
void hs_cuda_conv2d_forward(const hs_backend *be, const hs_conv2d_shape *s, float *y, const float *x, const float *w,
                 const float *b, void *workspace);
void hs_cuda_conv2d_backward(const hs_backend *be, const hs_conv2d_shape *s, float *dx, float *dw, float *db,
                 const float *dy, const float *x, const float *w, void *workspace);

/* kernels/pool.cu: max pooling */
void hs_cuda_maxpool2d_forward(const hs_backend *be, float *y, int32_t *argmax, const float *x, int n, int c, int h,
                 int w, int k);
void hs_cuda_maxpool2d_backward(const hs_backend *be, float *dx, const float *dy, const int32_t *argmax, int n, int c,
                 int h, int w, int k);

/* kernels/rows.cu: row gathers and deterministic scatter-adds */
void hs_cuda_gather_rows(const hs_backend *be, float *y, const float *x, const int32_t *index, int count, int cols,
                 int x_rows, int accumulate);
void hs_cuda_scatter_add_rows(const hs_backend *be, float *dx, const float *dy, const int32_t *index, int count,
                 int cols, int dx_rows);

/* kernels/layernorm.cu */
void hs_cuda_layernorm_forward(const hs_backend *be, float *y, float *x_sum, float *mean, float *rstd, const float *x,
                 const float *residual, const float *gamma, const float *beta, int rows, int cols,
                 float eps);
void hs_cuda_layernorm_backward(const hs_backend *be, float *dx, float *dgamma, float *dbeta, const float *dy,
                 const float *x, const float *mean, const float *rstd, const float *gamma, int rows,
                 int cols);

/* kernels/loss.cu: log-softmax + NLL, softmax + cross-entropy (statistics summed in a fixed order) */
void hs_cuda_log_softmax_nll_forward(const hs_backend *be, float *logprobs, const float *logits, const int32_t *labels,
                 int rows, int cols, double *stats);
void hs_cuda_log_softmax_nll_backward(const hs_backend *be, float *dlogits, const float *logprobs, const int32_t *labels,
                 int rows, int cols, float scale);
void hs_cuda_softmax_xent_forward(const hs_backend *be, float *probs, const float *logits, const int32_t *labels,
                 int rows, int cols, double *stats);
void hs_cuda_softmax_xent_backward(const hs_backend *be, float *dlogits, const float *probs, const int32_t *labels,
                 int rows, int cols, float scale);

/* kernels/multi_tensor.cu: norms, clipping and optimizers over the tensor table */
void hs_cuda_sumsq_tensors(const hs_backend *be, double *sumsq, double *total, const float *flat,
                 const hs_tensor_span *table, int count);
void hs_cuda_scale_tensors(const hs_backend *be, float *flat, float a, const hs_tensor_span *table, int count);
void hs_cuda_adam_update(const hs_backend *be, float *p, const float *g, float *m, float *v, const hs_tensor_span *table,
                 int count, const hs_adam_hparams *h);
void hs_cuda_adadelta_update(const hs_backend *be, float *p, const float *g, float *sq, float *acc,
                 const hs_tensor_span *table, int count, double lr, double rho, double eps,
                 double weight_decay);
void hs_cuda_sgd_update(const hs_backend *be, float *p, const float *g, float *buf, const hs_tensor_span *table,
                 int count, double lr, double momentum, double weight_decay, int first_step);
void hs_cuda_lamb_update(const hs_backend *be, float *p, const float *g, float *m, float *v, const hs_tensor_span *table,
                 int count, double *norms, const hs_lamb_hparams *h);

/* kernels/attention.cu: scaled dot-product attention (strided-batched GEMMs + softmax/dropout kernels) */
void hs_cuda_attention_forward(const hs_backend *be, float *ctx, float *probs, const float *qkv, const float *mask_bias,
                 int batch, int seq_len, int heads, int head_dim, float p, uint64_t key,
                 int64_t first_sample);
void hs_cuda_attention_backward(const hs_backend *be, float *dqkv, const float *dctx, const float *qkv,
                 const float *probs, int batch, int seq_len, int heads, int head_dim, float p,
                 uint64_t key, int64_t first_sample);

/* kernels/rel_attention.cu: relative-position attention with segment memory (Transformer-XL) */
void hs_cuda_rel_attention_forward(const hs_backend *be, float *ctx, float *probs, const float *qkv, const float *r,
                 const float *r_w_bias, const float *r_r_bias, int batch, int qlen, int mlen, int heads,
                 int head_dim, int lower_shift, float scale, float p, uint64_t key, int64_t first_sample);
void hs_cuda_rel_attention_backward(const hs_backend *be, float *dqkv, float *dr, float *dr_w_bias, float *dr_r_bias,
                 const float *dctx, const float *qkv, const float *r, const float *r_w_bias,
                 const float *r_r_bias, const float *probs, int batch, int qlen, int mlen, int heads,
                 int head_dim, int lower_shift, float scale, float p, uint64_t key, int64_t first_sample);

#ifdef __cplusplus
}
#endif
#endif
