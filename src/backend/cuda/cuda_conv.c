/* Convolutions of the CUDA backend through cuDNN (NCHW, fp32, cross-correlation as PyTorch's Conv2d).
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
    cudnnTensorDescriptor_t x, y, bias;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t workspace_bytes; /* the largest of the three */
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

static void make_plan(const hs_backend *be, conv_plan *p, const hs_conv2d_shape *s) {
    cudnnHandle_t h = handle(be);
    p->shape = *s;
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
    p->workspace_bytes = most;
}

static const conv_plan *plan_for(const hs_backend *be, const hs_conv2d_shape *s) {
    for (int i = 0; i < cached; i++)
        if (memcmp(&cache[i].shape, s, sizeof *s) == 0) return &cache[i];
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
    HS_CUDNN_CHECK(cudnnConvolutionForward(handle(be), &one, p->x, x, p->w, w, p->conv, p->fwd, workspace,
                                           p->workspace_bytes, &zero, p->y, y));
    HS_CUDNN_CHECK(cudnnAddTensor(handle(be), &one, p->bias, b, &one, p->y, y));
}

/* dx = dy ⋆ᵀ w (overwritten; skipped when NULL), dw += dy ⋆ x, db += Σ_{n,h,w} dy */
void hs_cuda_conv2d_backward(const hs_backend *be, const hs_conv2d_shape *s, float *dx, float *dw, float *db,
                             const float *dy, const float *x, const float *w, void *workspace) {
    const conv_plan *p = plan_for(be, s);
    const float one = 1.0f, zero = 0.0f;
    if (dx)
        HS_CUDNN_CHECK(cudnnConvolutionBackwardData(handle(be), &one, p->w, w, p->y, dy, p->conv, p->bwd_data, workspace,
                                                    p->workspace_bytes, &zero, p->x, dx));
    HS_CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle(be), &one, p->x, x, p->y, dy, p->conv, p->bwd_filter, workspace,
                                                  p->workspace_bytes, &one, p->w, dw));
    HS_CUDNN_CHECK(cudnnConvolutionBackwardBias(handle(be), &one, p->y, dy, &one, p->bias, db));
}
