/* The CUDA device object and function table. One device per rank: cudaSetDevice(local_rank % count)
 * (more ranks than GPUs on a node share them; comm.c then keeps NCCL out, docs/gpu.md);
 * three non-blocking streams (compute, copy, comm), the cuBLASLt and cuDNN handles, a GEMM workspace,
 * a grow-only scratch block. Library handles are made by their files (cuda_gemm.c, cuda_conv.c,
 * cuda_nccl.c); this file only wires the table and owns the device choice. */
#include <stdio.h>
#include <string.h>

#include <cuda_profiler_api.h>

#include "build_config.h" /* PACKAGE_VERSION */
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_ops.h"
#include "util/check.h"
#include "util/log.h"

static hs_cuda_device device;

static hs_backend cuda_backend = {
    .name = "cuda",
    .impl = &device,
    .memory_is_host = 0,
    .gemm_fuses_bias = 1,
    /* every op of src/backend/ops.def: .op = hs_cuda_rec_<op> (cuda_record.c: hs_cuda_<op>, or recorded
     * inside a graph region) */
#define HS_OP(ret, name, params) .name = hs_cuda_rec_##name,
#include "backend/ops.def"
};

void hs_cuda_free_later(const hs_backend *be, void *p) {
    hs_cuda_device *d = hs_cuda_dev(be);
    if (!p) return;
    if (d->capturing) {
        if (d->n_deferred == d->cap_deferred) {
            d->cap_deferred = d->cap_deferred ? 2 * d->cap_deferred : 64;
            HS_REALLOC(d->deferred_free, d->cap_deferred);
        }
        d->deferred_free[d->n_deferred++] = p;
        return;
    }
    HS_CUDA_CHECK(cudaFree(p)); /* waits for the work that may still read p */
    hs_ledger_free(p);
}

void hs_cuda_free_deferred(const hs_backend *be) {
    hs_cuda_device *d = hs_cuda_dev(be);
    if (d->capturing) HS_FATAL(NULL, "hs_cuda_free_deferred during a capture");
    for (size_t i = 0; i < d->n_deferred; i++) hs_cuda_free_later(be, d->deferred_free[i]);
    d->n_deferred = 0; /* the array stays for the next capture */
}

void *hs_cuda_scratch(const hs_backend *be, size_t bytes) {
    hs_cuda_device *d = hs_cuda_dev(be);
    if (bytes <= d->scratch_bytes && d->scratch) return d->scratch;
    /* grow: the old block may still be read by enqueued kernels */
    if (d->scratch) {
        hs_cuda_free_later(be, d->scratch);
        hs_cuda_memory_freed(); /* a graph that holds the old block is not replayed (cuda_record.c) */
    }
    size_t grown = d->scratch_bytes * 2 > bytes ? d->scratch_bytes * 2 : bytes;
    grown = (grown + 255) & ~(size_t)255;
    HS_CUDA_CHECK(cudaMalloc(&d->scratch, grown));
    hs_ledger_alloc(d->scratch, grown);
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
    /* which GPU this is, for comm.c's check of ranks that share one (NCCL refuses them) */
    HS_CUDA_CHECK(cudaDeviceGetPCIBusId(cuda_backend.pci_bus_id, (int)sizeof cuda_backend.pci_bus_id,
                                        device.ordinal));
    HS_CUDA_CHECK(cudaStreamCreateWithFlags(&device.compute, cudaStreamNonBlocking));
    HS_CUDA_CHECK(cudaStreamCreateWithFlags(&device.copy, cudaStreamNonBlocking));
    HS_CUDA_CHECK(cudaStreamCreateWithFlags(&device.comm, cudaStreamNonBlocking));
    HS_CUDA_CHECK(cudaEventCreateWithFlags(&device.compute_done, cudaEventDisableTiming));
    HS_CUDA_CHECK(cudaEventCreateWithFlags(&device.copy_done, cudaEventDisableTiming));
    HS_CUDA_CHECK(cudaEventCreateWithFlags(&device.comm_done, cudaEventDisableTiming));
    hs_cuda_gemm_init(&cuda_backend);
    hs_cuda_conv_init(&cuda_backend);
    (void)hs_cuda_flash_kernels_wmma(); /* a bad HETSEQ_FLASH_KERNELS stops the job here, not at the first forward */
    /* every rank says which GPU it took (a mis-bound job shows two ranks on one GPU) */
    printf("| device = cuda: rank %d (local rank %d) uses GPU %d of %d (%s, compute capability %d.%d, %d SMs, "
           "%.1f GiB, PCI %s)\n",
           hs_log_rank(), local_rank, device.ordinal, count, prop.name, prop.major, prop.minor,
           prop.multiProcessorCount, (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0), cuda_backend.pci_bus_id);
    fflush(stdout);
    hs_backend_check(&cuda_backend);
    ready = 1;
    return &cuda_backend;
}

/* The profiler's capture range (HETSEQ_PROFILE_UPDATES). The device finishes the work enqueued before
 * either call, so the range holds the chosen updates' device work and nothing of the ones around them
 * (Nsight Systems records until cudaProfilerStop; Nsight Compute's range is the kernels launched). */
void hs_cuda_profiler_range(const hs_backend *be, int on) {
    hs_cuda_synchronize(be);
    if (on) HS_CUDA_CHECK(cudaProfilerStart());
    else HS_CUDA_CHECK(cudaProfilerStop());
}

const char *hs_backend_cuda_id(void) {
    static char id[64];
    if (!id[0]) snprintf(id, sizeof id, HS_BACKEND_ID_FORMAT, PACKAGE_VERSION, sizeof(hs_backend));
    return id;
}

/* One table per precision, copies of the fp32 table with `precision` set: cuda_gemm.c (every product,
 * attention's included, goes through hs_cuda_gemm_strided_batched) and cuda_conv.c read it. */
const hs_backend *hs_backend_cuda_with_precision(const hs_backend *be, int precision) {
    static hs_backend tables[4];
    static const char *const path[4] = {
        [HS_PRECISION_TF32] = "cuBLASLt CUBLAS_COMPUTE_32F_FAST_TF32 on fp32 data (tensor cores round the inputs "
                              "to tf32, sums in fp32); cuDNN convolutions with CUDNN_DEFAULT_MATH (TF32 permitted) on fp32 data",
        [HS_PRECISION_BF16] = "cuBLASLt A and B in CUDA_R_16BF (nearest, ties to even: weights from a 16-bit copy the "
                              "optimizer writes, other operands converted), C and D fp32 (the 16-bit linear layers: "
                              "C, D and bias CUDA_R_16BF), CUBLAS_COMPUTE_32F; cuDNN convolutions on bf16-rounded fp32 "
                              "operands, FMA math",
        [HS_PRECISION_FP16] = "cuBLASLt A and B in CUDA_R_16F (nearest, ties to even: weights from a 16-bit copy the "
                              "optimizer writes, other operands converted), C and D fp32 (the 16-bit linear layers: "
                              "C, D and bias CUDA_R_16F), CUBLAS_COMPUTE_32F; cuDNN convolutions on fp16-rounded fp32 "
                              "operands, FMA math",
    };
    static const char *const names[4] = {"fp32", "bf16", "tf32", "fp16"};
    if (precision == HS_PRECISION_FP32 || be != &cuda_backend) return be;
    if (precision < 0 || precision > 3)
        HS_FATAL("internal: unknown precision", "hs_backend_cuda_with_precision(%d)", precision);
    hs_backend *t = &tables[precision];
    if (!t->name) {
        *t = cuda_backend;
        t->precision = precision;
        t->products_read_twins = precision == HS_PRECISION_BF16 || precision == HS_PRECISION_FP16;
        hs_log("| precision %s on CUDA: %s; parameters, gradients, optimizer state, LayerNorm, softmax and losses "
               "stay fp32",
               names[precision], path[precision]);
    }
    return t;
}
