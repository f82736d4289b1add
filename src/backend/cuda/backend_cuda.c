/* The CUDA device object and function table. One device per rank: cudaSetDevice(local_rank % count)
 * (more ranks than GPUs on a node share them; comm.c then keeps NCCL out, docs/gpu.md);
 * three non-blocking streams (compute, copy, comm), the cuBLASLt and cuDNN handles, a GEMM workspace,
 * a grow-only scratch block. Library handles are made by their files (cuda_gemm.c, cuda_conv.c,
 * cuda_nccl.c); this file only wires the table and owns the device choice. */
#include <stdio.h>
#include <string.h>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_ops.h"
#include "util/log.h"

static hs_cuda_device device;

static hs_backend cuda_backend = {
    .name = "cuda",
    .impl = &device,
    .memory_is_host = 0,
    .alloc = hs_cuda_alloc,
    .free = hs_cuda_free,
    .upload = hs_cuda_upload,
    .download = hs_cuda_download,
    .copy = hs_cuda_copy,
    .zero = hs_cuda_zero,
    .synchronize = hs_cuda_synchronize,
    .host_alloc = hs_cuda_host_alloc,
    .host_free = hs_cuda_host_free,
    .event_create = hs_cuda_event_create,
    .event_destroy = hs_cuda_event_destroy,
    .upload_async = hs_cuda_upload_async,
    .event_record = hs_cuda_event_record,
    .stream_wait = hs_cuda_stream_wait,
    .event_synchronize = hs_cuda_event_synchronize,
    .collectives_init = hs_cuda_collectives_init,
    .broadcast = hs_cuda_broadcast,
    .allreduce_sum_async = hs_cuda_allreduce_sum_async,
    .allreduce_wait = hs_cuda_allreduce_wait,
    .gemm = hs_cuda_gemm,
    .add_bias = hs_cuda_add_bias,
    .bias_grad = hs_cuda_bias_grad,
    .u8_to_float = hs_cuda_u8_to_float,
    .relu_forward = hs_cuda_relu_forward,
    .relu_backward = hs_cuda_relu_backward,
    .to_half = hs_cuda_to_half,
    .from_half = hs_cuda_from_half,
    .dropout_forward = hs_cuda_dropout_forward,
    .dropout_backward = hs_cuda_dropout_backward,
    .conv2d_workspace_bytes = hs_cuda_conv2d_workspace_bytes,
    .conv2d_forward = hs_cuda_conv2d_forward,
    .conv2d_backward = hs_cuda_conv2d_backward,
    .maxpool2d_forward = hs_cuda_maxpool2d_forward,
    .maxpool2d_backward = hs_cuda_maxpool2d_backward,
    .log_softmax_nll_forward = hs_cuda_log_softmax_nll_forward,
    .log_softmax_nll_backward = hs_cuda_log_softmax_nll_backward,
    .sumsq_tensors = hs_cuda_sumsq_tensors,
    .scale_tensors = hs_cuda_scale_tensors,
    .adam_update = hs_cuda_adam_update,
    .adadelta_update = hs_cuda_adadelta_update,
    .sgd_update = hs_cuda_sgd_update,
    .lamb_update = hs_cuda_lamb_update,
    .gather_rows = hs_cuda_gather_rows,
    .scatter_add_rows = hs_cuda_scatter_add_rows,
    .add_bias_strided = hs_cuda_add_bias_strided,
    .bias_grad_strided = hs_cuda_bias_grad_strided,
    .layernorm_forward = hs_cuda_layernorm_forward,
    .layernorm_backward = hs_cuda_layernorm_backward,
    .gelu_forward = hs_cuda_gelu_forward,
    .bias_gelu_forward = hs_cuda_bias_gelu_forward,
    .gelu_backward = hs_cuda_gelu_backward,
    .tanh_forward = hs_cuda_tanh_forward,
    .tanh_backward = hs_cuda_tanh_backward,
    .attention_mask_bias = hs_cuda_attention_mask_bias,
    .attention_forward = hs_cuda_attention_forward,
    .attention_backward = hs_cuda_attention_backward,
    .rel_attention_forward = hs_cuda_rel_attention_forward,
    .rel_attention_backward = hs_cuda_rel_attention_backward,
    .softmax_xent_forward = hs_cuda_softmax_xent_forward,
    .softmax_xent_backward = hs_cuda_softmax_xent_backward,
};

void *hs_cuda_scratch(const hs_backend *be, size_t bytes) {
    hs_cuda_device *d = hs_cuda_dev(be);
    if (bytes <= d->scratch_bytes && d->scratch) return d->scratch;
    /* grow: the old block may still be read by enqueued kernels */
    if (d->scratch) {
        HS_CUDA_CHECK(cudaDeviceSynchronize());
        HS_CUDA_CHECK(cudaFree(d->scratch));
    }
    size_t grown = d->scratch_bytes * 2 > bytes ? d->scratch_bytes * 2 : bytes;
    grown = (grown + 255) & ~(size_t)255;
    HS_CUDA_CHECK(cudaMalloc(&d->scratch, grown));
    d->scratch_bytes = grown;
    return d->scratch;
}

const hs_backend *hs_backend_cuda(int local_rank, char *why, size_t why_len) {
    static int ready;
    if (ready) return &cuda_backend;
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess || count == 0) {
        snprintf(why, why_len, "no usable GPU on this node (%s)",
                 rc == cudaErrorInsufficientDriver ? "no NVIDIA driver, or one older than this build's CUDA runtime"
                 : rc != cudaSuccess               ? cudaGetErrorString(rc)
                                                   : "cudaGetDeviceCount found none");
        cudaGetLastError(); /* clear the sticky status of the failed query */
        return NULL;
    }
    device.ordinal = (local_rank < 0 ? 0 : local_rank) % count;
    HS_CUDA_CHECK(cudaSetDevice(device.ordinal));
    struct cudaDeviceProp prop;
    HS_CUDA_CHECK(cudaGetDeviceProperties(&prop, device.ordinal));
    device.sm_count = prop.multiProcessorCount;
    /* what the MFU figure needs: the peak of this device (src/train/mfu.c) */
    cuda_backend.cc_major = prop.major;
    cuda_backend.cc_minor = prop.minor;
    cuda_backend.sm_count = prop.multiProcessorCount;
    HS_CUDA_CHECK(cudaDeviceGetPCIBusId(cuda_backend.pci_bus_id, (int)sizeof cuda_backend.pci_bus_id, device.ordinal));
    HS_CUDA_CHECK(cudaStreamCreateWithFlags(&device.compute, cudaStreamNonBlocking));
    HS_CUDA_CHECK(cudaStreamCreateWithFlags(&device.copy, cudaStreamNonBlocking));
    HS_CUDA_CHECK(cudaStreamCreateWithFlags(&device.comm, cudaStreamNonBlocking));
    HS_CUDA_CHECK(cudaEventCreateWithFlags(&device.compute_done, cudaEventDisableTiming));
    HS_CUDA_CHECK(cudaEventCreateWithFlags(&device.copy_done, cudaEventDisableTiming));
    HS_CUDA_CHECK(cudaEventCreateWithFlags(&device.comm_done, cudaEventDisableTiming));
    hs_cuda_gemm_init(&cuda_backend);
    hs_cuda_conv_init(&cuda_backend);
    /* every rank says which GPU it took (a mis-bound job shows two ranks on one GPU) */
    printf("| device = cuda: rank %d (local rank %d) uses GPU %d of %d (%s, compute capability %d.%d, %d SMs, %.1f GiB, "
           "PCI %s)\n",
           hs_log_rank(), local_rank, device.ordinal, count, prop.name, prop.major, prop.minor,
           prop.multiProcessorCount, (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), cuda_backend.pci_bus_id);
    fflush(stdout);
    ready = 1;
    return &cuda_backend;
}

/* One table per precision, copies of the fp32 table with `precision` set: cuda_gemm.c (every product,
 * attention's included, goes through hs_cuda_gemm_strided_batched) and cuda_conv.c read it. */
const hs_backend *hs_backend_cuda_with_precision(const hs_backend *be, int precision) {
    static hs_backend tables[4];
    static const char *const path[4] = {
        [HS_PRECISION_TF32] = "cuBLASLt CUBLAS_COMPUTE_32F_FAST_TF32 on fp32 data (tensor cores round the inputs "
                              "to tf32, sums in fp32); cuDNN convolutions with CUDNN_DEFAULT_MATH (TF32 permitted) on fp32 data",
        [HS_PRECISION_BF16] = "cuBLASLt A and B converted to CUDA_R_16BF (nearest, ties to even), C and D fp32, "
                              "CUBLAS_COMPUTE_32F; cuDNN convolutions on bf16-rounded fp32 operands, FMA math",
        [HS_PRECISION_FP16] = "cuBLASLt A and B converted to CUDA_R_16F (nearest, ties to even), C and D fp32, "
                              "CUBLAS_COMPUTE_32F; cuDNN convolutions on fp16-rounded fp32 operands, FMA math",
    };
    static const char *const names[4] = {"fp32", "bf16", "tf32", "fp16"};
    if (precision == HS_PRECISION_FP32 || be != &cuda_backend) return be;
    if (precision < 0 || precision > 3)
        HS_FATAL("internal: unknown precision", "hs_backend_cuda_with_precision(%d)", precision);
    hs_backend *t = &tables[precision];
    if (!t->name) {
        *t = cuda_backend;
        t->precision = precision;
        hs_log("| precision %s on CUDA: %s; parameters, gradients, optimizer state, LayerNorm, softmax and losses "
               "stay fp32",
               names[precision], path[precision]);
    }
    return t;
}
