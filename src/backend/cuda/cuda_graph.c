/* CUDA graphs of the update's device work (ops.def, "CUDA graphs"; docs/gpu.md, "CUDA graphs"); the
 * trainer decides what is captured (src/train/update_graphs.c).
 *
 * graph_begin puts the compute stream in capture mode (relaxed: a grow-only buffer that grows inside a
 * capture may cudaMalloc its new block; its old block is freed after the launch, hs_cuda_free_later;
 * nothing in a capture waits for the device); every op enqueued until graph_end_launch becomes a node: kernels,
 * cuBLASLt and cuDNN calls, async copies and memsets, and the NCCL all-reduces, whose comm stream joins
 * the capture through the compute_done event and leaves it through comm_done (cuda_nccl.c). The seam's
 * own events (input staging) cross the capture boundary: while capturing, event_record and stream_wait
 * pass cudaEventRecordExternal / cudaEventWaitExternal (cuda_memory.c), so each launch records and
 * waits for them then.
 *
 * Kernel arguments are host values baked into the captured nodes (loss scales, dropout keys, sample
 * offsets, lr and step counts change every update), so every update is captured afresh and the
 * executable graph of the same shape is updated in place (cudaGraphExecUpdate: same nodes, new
 * arguments) before it is launched as one unit; a capture whose nodes differ instantiates a new one. */
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_slots.h"

void hs_cuda_graph_begin(const hs_backend *be) {
    hs_cuda_device *d = hs_cuda_dev(be);
    hs_cuda_slots_begin(be); /* before the capture: it may wait for a mirror's last copy */
    HS_CUDA_CHECK(cudaStreamBeginCapture(d->compute, cudaStreamCaptureModeRelaxed));
    d->capturing = 1;
}

int hs_cuda_graph_end_launch(const hs_backend *be, void **exec) {
    hs_cuda_device *d = hs_cuda_dev(be);
    cudaGraph_t graph = NULL;
    d->capturing = 0;
    HS_CUDA_CHECK(cudaStreamEndCapture(d->compute, &graph));
    hs_cuda_slots_end(be);
    cudaGraphExec_t x = (cudaGraphExec_t)*exec;
    int reused = 0;
    if (x) {
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(x, graph, &info) == cudaSuccess) {
            reused = 1;
        } else { /* other nodes: a new executable graph (the failed update is not an error) */
            (void)cudaGetLastError();
            HS_CUDA_CHECK(cudaGraphExecDestroy(x));
            x = NULL;
        }
    }
    if (!x) HS_CUDA_CHECK(cudaGraphInstantiate(&x, graph, 0));
    HS_CUDA_CHECK(cudaGraphDestroy(graph));
    hs_cuda_slots_upload(be); /* this update's scalars, read by the graph's kernels */
    HS_CUDA_CHECK(cudaGraphLaunch(x, d->compute));
    *exec = x;
    /* buffers replaced during the capture: the graph's earlier nodes read them, so only now (cudaFree
     * waits for the device: a growing buffer costs that update its overlap, once) */
    hs_cuda_free_deferred(be);
    return reused;
}

void hs_cuda_graph_destroy(const hs_backend *be, void *exec) {
    (void)be;
    if (exec) HS_CUDA_CHECK(cudaGraphExecDestroy((cudaGraphExec_t)exec));
}
