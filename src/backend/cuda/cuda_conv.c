/* Convolutions of the CUDA backend through cuDNN (NCHW, fp32 data, cross-correlation as PyTorch's Conv2d).
 * The arithmetic follows be->precision through the descriptor's math type:
 *   fp32  CUDNN_FMA_MATH: FMA (fp32) kernels only. (The default, CUDNN_DEFAULT_MATH, permits TF32 tensor
 *         cores for float data on Ampere and later, so fp32 would silently be tf32 there.)
 *   tf32  CUDNN_DEFAULT_MATH on fp32 data: cuDNN may round the inputs to TF32 (as PyTorch's
 *         allow_tf32 does).
 *   bf16, fp16  the operands (x, w, dy) rounded to bf16/fp16 by a kernel (kernels/lowp.cu, the bits of
 *         src/util/lowp.h) into fp32 copies in the workspace, then the fp32 convolution with
 *         CUDNN_FMA_MATH. The product of two rounded values (at most 11 significant bits each) is exact
 *         in fp32, so this is exactly the arithmetic of a half-precision tensor-core convolution with
 *         fp32 accumulation and fp32 output — exact products, fp32 sums — with fp32 tensors, so every
 *         algorithm the emulated device and real cuDNN offer for float data applies and the result is
 *         the CPU backend's (which rounds the same operands) up to the order of the sums. Real
 *         CUDNN_DATA_HALF / BFLOAT16 tensors would halve the convolution's memory traffic; the CNN's
 *         convolutions are small, so the copies cost little.
 * Per distinct shape the descriptors and the algorithms (forward, backward data, backward filter) are
 * chosen once, on first use: the first DETERMINISTIC algorithm cuDNN's heuristic ranks (so results are
 * the same bits run after run, as world-size invariance and bit-exact resume need), and the workspace
 * the three need is what conv2d_workspace_bytes reports, allocated once by the layer. */
#include <cudnn.h>
#include <string.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_ops.h"

#define HS_CUDNN_CHECK(call)                                                                           \
    do {                                                                                               \
        cudnnStatus_t hs_dnn_rc_ = (call);                                                             \
        if (hs_dnn_rc_ != CUDNN_STATUS_SUCCESS)                                                        \
            hs_fatal_at(__FILE__, __LINE__, #call,                                                     \
                        "a cuDNN call failed: check that cuDNN matches the CUDA toolkit (module list) " \
                        "and that GPU memory is not exhausted",                                        \
                        "%s (status %d)", cudnnGetErrorString(hs_dnn_rc_), (int)hs_dnn_rc_);           \
    } while (0)

#define CONV_CACHE_SIZE 32
#define ALGO_CANDIDATES 8

typedef struct conv_plan {
    hs_conv2d_shape shape;
    int precision; /* hs_precision: the math type, and the rounded copies in the workspace */
    cudnnTensorDescriptor_t x, y, bias;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t algo_bytes;      /* the largest workspace of the three algorithms */
    size_t workspace_bytes; /* algo_bytes, then (bf16/fp16) the rounded x, w and dy, each 256-byte aligned */
} conv_plan;

static conv_plan cache[CONV_CACHE_SIZE];
static int cached;

static cudnnHandle_t handle(const hs_backend *be) { return (cudnnHandle_t)hs_cuda_dev(be)->dnn; }

void hs_cuda_conv_init(const hs_backend *be) {
    cudnnHandle_t h;
    HS_CUDNN_CHECK(cudnnCreate(&h));
    HS_CUDNN_CHECK(cudnnSetStream(h, hs_cuda_stream(be)));
    hs_cuda_dev(be)->dnn = h;
}

static const char *no_algo_hint =
    "cuDNN offers no deterministic algorithm for this convolution: please report it with the model configuration";

static int rounds_operands(int precision) {
    return precision == HS_PRECISION_BF16 || precision == HS_PRECISION_FP16;
}

static size_t align256(size_t bytes) { return (bytes + 255) & ~(size_t)255; }
static size_t x_elems(const hs_conv2d_shape *s) { return (size_t)s->n * (size_t)s->c_in * (size_t)s->h * (size_t)s->w; }
static size_t w_elems(const hs_conv2d_shape *s) { return (size_t)s->c_out * (size_t)s->c_in * (size_t)s->kh * (size_t)s->kw; }
static size_t y_elems(const hs_conv2d_shape *s) { return (size_t)s->n * (size_t)s->c_out * (size_t)s->oh * (size_t)s->ow; }

static void make_plan(const hs_backend *be, conv_plan *p, const hs_conv2d_shape *s) {
    cudnnHandle_t h = handle(be);
    p->shape = *s;
    p->precision = be->precision;
    HS_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->x));
    HS_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s->n, s->c_in, s->h, s->w));
    HS_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->y));
    HS_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s->n, s->c_out, s->oh, s->ow));
    HS_CUDNN_CHECK(cudnnCreateTensorDescriptor(&p->bias));
    HS_CUDNN_CHECK(cudnnSetTensor4dDescriptor(p->bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, s->c_out, 1, 1));
    HS_CUDNN_CHECK(cudnnCreateFilterDescriptor(&p->w));
    HS_CUDNN_CHECK(cudnnSetFilter4dDescriptor(p->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s->c_out, s->c_in, s->kh, s->kw));
    HS_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&p->conv));
    HS_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(p->conv, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    /* set before the algorithms are chosen: the heuristics rank for the math type */
    HS_CUDNN_CHECK(cudnnSetConvolutionMathType(p->conv, be->precision == HS_PRECISION_TF32 ? CUDNN_DEFAULT_MATH
                                                                                           : CUDNN_FMA_MATH));
    int on, oc, oh, ow;
    HS_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(p->conv, p->x, p->w, &on, &oc, &oh, &ow));
    if (on != s->n || oc != s->c_out || oh != s->oh || ow != s->ow)
        HS_FATAL("internal: the layer's output shape disagrees with cuDNN's", "cuDNN %dx%dx%dx%d, layer %dx%dx%dx%d",
                 on, oc, oh, ow, s->n, s->c_out, s->oh, s->ow);

    int found = 0, i;
    size_t bytes = 0, most = 0;
    cudnnConvolutionFwdAlgoPerf_t fwd[ALGO_CANDIDATES];
    HS_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, p->x, p->w, p->conv, p->y, ALGO_CANDIDATES, &found, fwd));
    for (i = 0; i < found; i++)
        if (fwd[i].status == CUDNN_STATUS_SUCCESS && fwd[i].determinism == CUDNN_DETERMINISTIC) break;
    if (i == found) HS_FATAL(no_algo_hint, "forward convolution %dx%dx%dx%d", s->n, s->c_in, s->h, s->w);
    p->fwd = fwd[i].algo;
    HS_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, p->x, p->w, p->conv, p->y, p->fwd, &bytes));
    most = bytes;

    cudnnConvolutionBwdDataAlgoPerf_t bd[ALGO_CANDIDATES];
    HS_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p->w, p->y, p->conv, p->x, ALGO_CANDIDATES, &found, bd));
    for (i = 0; i < found; i++)
        if (bd[i].status == CUDNN_STATUS_SUCCESS && bd[i].determinism == CUDNN_DETERMINISTIC) break;
    if (i == found) HS_FATAL(no_algo_hint, "backward-data convolution %dx%dx%dx%d", s->n, s->c_in, s->h, s->w);
    p->bwd_data = bd[i].algo;
    HS_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, p->w, p->y, p->conv, p->x, p->bwd_data, &bytes));
    if (bytes > most) most = bytes;

    cudnnConvolutionBwdFilterAlgoPerf_t bf[ALGO_CANDIDATES];
    HS_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p->x, p->y, p->conv, p->w, ALGO_CANDIDATES, &found, bf));
    for (i = 0; i < found; i++)
        if (bf[i].status == CUDNN_STATUS_SUCCESS && bf[i].determinism == CUDNN_DETERMINISTIC) break;
    if (i == found) HS_FATAL(no_algo_hint, "backward-filter convolution %dx%dx%dx%d", s->n, s->c_in, s->h, s->w);
    p->bwd_filter = bf[i].algo;
    HS_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p->x, p->y, p->conv, p->w, p->bwd_filter, &bytes));
    if (bytes > most) most = bytes;
    p->algo_bytes = align256(most);
    p->workspace_bytes = p->algo_bytes;
    if (rounds_operands(p->precision))
        p->workspace_bytes += align256(x_elems(s) * sizeof(float)) + align256(w_elems(s) * sizeof(float)) +
                              align256(y_elems(s) * sizeof(float));
}

/* The rounded copies of x, w and dy in the workspace after the algorithms' part (bf16/fp16). */
static float *x_copy(const conv_plan *p, void *ws) { return (float *)((char *)ws + p->algo_bytes); }
static float *w_copy(const conv_plan *p, void *ws) {
    return (float *)((char *)x_copy(p, ws) + align256(x_elems(&p->shape) * sizeof(float)));
}
static float *dy_copy(const conv_plan *p, void *ws) {
    return (float *)((char *)w_copy(p, ws) + align256(w_elems(&p->shape) * sizeof(float)));
}

static const conv_plan *plan_for(const hs_backend *be, const hs_conv2d_shape *s) {
    for (int i = 0; i < cached; i++)
        if (memcmp(&cache[i].shape, s, sizeof *s) == 0 && cache[i].precision == be->precision) return &cache[i];
    if (cached == CONV_CACHE_SIZE)
        HS_FATAL("internal: more distinct convolution shapes than the plan cache holds (raise CONV_CACHE_SIZE)",
                 "%d shapes", cached);
    make_plan(be, &cache[cached], s);
    return &cache[cached++];
}

size_t hs_cuda_conv2d_workspace_bytes(const hs_backend *be, const hs_conv2d_shape *s) {
    return plan_for(be, s)->workspace_bytes;
}

/* y = x ⋆ w + b (cross-correlation), then the bias broadcast over n, h, w */
void hs_cuda_conv2d_forward(const hs_backend *be, const hs_conv2d_shape *s, float *y, const float *x, const float *w,
                            const float *b, void *workspace) {
    const conv_plan *p = plan_for(be, s);
    const float one = 1.0f, zero = 0.0f;
    if (rounds_operands(p->precision)) {
        hs_cuda_round_floats(be, p->precision, x_copy(p, workspace), x, x_elems(s));
        hs_cuda_round_floats(be, p->precision, w_copy(p, workspace), w, w_elems(s));
        x = x_copy(p, workspace);
        w = w_copy(p, workspace);
    }
    HS_CUDNN_CHECK(cudnnConvolutionForward(handle(be), &one, p->x, x, p->w, w, p->conv, p->fwd, workspace,
                                           p->algo_bytes, &zero, p->y, y));
    HS_CUDA_LIBRARY_OP("cudnnConvolutionForward");
    HS_CUDNN_CHECK(cudnnAddTensor(handle(be), &one, p->bias, b, &one, p->y, y));
    HS_CUDA_LIBRARY_OP("cudnnAddTensor");
}

/* dx = dy ⋆ᵀ w (overwritten; skipped when NULL), dw += dy ⋆ x, db += Σ_{n,h,w} dy */
void hs_cuda_conv2d_backward(const hs_backend *be, const hs_conv2d_shape *s, float *dx, float *dw, float *db,
                             const float *dy, const float *x, const float *w, void *workspace) {
    const conv_plan *p = plan_for(be, s);
    const float one = 1.0f, zero = 0.0f;
    if (rounds_operands(p->precision)) { /* the products' operands rounded as in the forward pass (and db from
                                          * the rounded dy, as the CPU backend computes it) */
        hs_cuda_round_floats(be, p->precision, x_copy(p, workspace), x, x_elems(s));
        hs_cuda_round_floats(be, p->precision, w_copy(p, workspace), w, w_elems(s));
        hs_cuda_round_floats(be, p->precision, dy_copy(p, workspace), dy, y_elems(s));
        x = x_copy(p, workspace);
        w = w_copy(p, workspace);
        dy = dy_copy(p, workspace);
    }
    if (dx) {
        HS_CUDNN_CHECK(cudnnConvolutionBackwardData(handle(be), &one, p->w, w, p->y, dy, p->conv, p->bwd_data, workspace,
                                                    p->algo_bytes, &zero, p->x, dx));
        HS_CUDA_LIBRARY_OP("cudnnConvolutionBackwardData");
    }
    HS_CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle(be), &one, p->x, x, p->y, dy, p->conv, p->bwd_filter, workspace,
                                                  p->algo_bytes, &one, p->w, dw));
    HS_CUDA_LIBRARY_OP("cudnnConvolutionBackwardFilter");
    HS_CUDNN_CHECK(cudnnConvolutionBackwardBias(handle(be), &one, p->y, dy, &one, p->bias, db));
    HS_CUDA_LIBRARY_OP("cudnnConvolutionBackwardBias");
}
