/* The bucketed gradient all-reduce (grad_buckets.h).
 *
 * Buckets. Cut once, at tensor boundaries, walking the tensors from the END of the flat buffer: a
 * bucket takes tensors while its size in fp32 bytes (4 per element, whatever the travel dtype, so one
 * cap cuts the same buckets for every dtype) stays within bucket_cap_mb MiB; a tensor larger than the
 * cap is a bucket of its own. The buckets tile [0, total) (padding between tensors is zero and sums to
 * zero). A bucket is also cut every MAX_COUNT elements (a tensor of more than 2^30 floats is split) so
 * that every MPI count and displacement fits an int.
 *
 * CPU ranks (memory_is_host, and the GPU ranks of a mixed job on a host copy). Per bucket of n elements
 * on P ranks, rank r owns the slice [n·r/P, n·(r+1)/P):
 *   1. reduce-scatter: MPI_Ialltoallv sends slice q of every rank to rank q;
 *   2. the owner sums its P contributions in rank order 0..P-1 in fp32: s = ((g_0 + g_1) + g_2) + ...;
 *   3. MPI_Iallgatherv returns every slice's sum to every rank.
 * So every element is the same fp32 expression on every rank, whatever the bucketing: bucketed == one
 * bucket == any cap, bit for bit, for a fixed world size. (MPI_Allreduce cannot promise that: Open MPI
 * picks its algorithm and segment boundaries by message size.) With allreduce_dtype bf16/fp16 each
 * rank's values travel rounded to 16 bits (nearest, ties to even), the owner sums them widened to fp32
 * in rank order, rounds the sum once to 16 bits, and the all-gather carries 16-bit values that are
 * widened back into the fp32 gradient: result = round16(((r(g_0) + r(g_1)) + ...) in fp32), again
 * whatever the bucketing.
 * Order: reduce-scatters are posted in bucket order on one duplicate of the world communicator,
 * all-gathers in bucket order on another, so every rank issues each communicator's collectives in the
 * same order although its own requests complete in its own time. Progress: nonblocking requests, tested
 * at every ready call (Open MPI progresses a nonblocking collective only inside MPI calls) and waited
 * for in finish.
 *
 * CUDA ranks (NCCL). Per bucket one ncclAllReduce on the device's comm stream, which first waits for the
 * compute work enqueued when the bucket was declared ready (backend allreduce_sum_async); finish makes
 * the compute stream wait for the comm stream (allreduce_wait). NCCL's summation order depends on the
 * message size for 3 or more ranks (ring/tree chunks), so there bucketed and unbucketed sums may differ
 * in the last bit; with 2 ranks every element is g_0 + g_1, which is commutative: identical bits. With a
 * 16-bit dtype the bucket is rounded into a 16-bit device buffer, all-reduced as ncclBfloat16 /
 * ncclFloat16 (NCCL adds pairwise, each partial sum rounded to 16 bits: on 2 ranks the same single
 * rounding of g_0 + g_1 as the CPU ranks' algorithm, on more ranks up to P-1 roundings) and widened back,
 * all on the comm stream (kernels/grad_convert.cu). */
#include "comm/grad_buckets.h"

#include <stdlib.h>
#include <string.h>

#include "util/lowp.h"
#include "util/check.h"
#include "util/log.h"

#define MAX_COUNT ((int64_t)1 << 30) /* MPI counts and displacements are int */

/* fp32 <-> the 16-bit travel type (src/util/lowp.h: the CUDA conversion kernels of kernels/lowp.cu use the same) */
static uint16_t to16(int dt, float x) { return dt == HS_ALLREDUCE_BF16 ? hs_bf16_bits(x) : hs_fp16_bits(x); }
static float from16(int dt, uint16_t h) {
    return dt == HS_ALLREDUCE_BF16 ? hs_bf16_to_float(h) : hs_fp16_to_float(h);
}

enum { PATH_NONE, PATH_HOST, PATH_DEVICE, PATH_STAGED };

typedef struct bucket {
    int64_t start, n; /* floats [start, start + n) of the flat buffer */
    int *counts, *displs; /* [P] slice q of the bucket: elements and offset (also the all-gather's layout) */
    int *rcounts, *rdispls; /* [P] what the reduce-scatter receives: my slice from every rank, in rank order */
    void *recv;           /* [P · counts[rank]] of the travel type */
} bucket;

struct hs_grad_buckets {
    const hs_comm *c;
    const hs_backend *be;
    hs_params *p;
    int path, dt;          /* dt: hs_allreduce_dtype */
    size_t esize;          /* bytes of one travelling element */
    MPI_Datatype mtype;
    MPI_Comm scatter_comm, gather_comm;
    int nb;
    bucket *b;             /* [nb], bucket 0 at the end of the buffer */
    MPI_Request *scatter_req, *gather_req; /* [nb] */
    int started;           /* buckets whose all-reduce has been started (the first `started` of b) */
    int gathered;          /* buckets whose all-gather has been posted (CPU algorithm) */
    float *host;           /* the fp32 gradient the CPU algorithm works on: p->grad, or a host copy */
    uint16_t *low;         /* [total] 16-bit travel copy (bf16/fp16), else NULL */
    void *dev16;           /* NCCL path, bf16/fp16: [total] 16-bit device buffer the buckets travel in */
    void *scratch;         /* the buckets' receive buffers */
};

static int cmp_offset_desc(const void *a, const void *b) {
    const size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void add_bucket(hs_grad_buckets *b, int64_t start, int64_t end) {
    HS_REALLOC(b->b, b->nb + 1);
    memset(&b->b[b->nb], 0, sizeof b->b[b->nb]);
    b->b[b->nb].start = start;
    b->b[b->nb].n = end - start;
    b->nb++;
}

/* Buckets from the end of the buffer, at tensor offsets, at most cap_floats each (0 = no cap) unless one
 * tensor is larger, and at most MAX_COUNT each. */
static void cut_buckets(hs_grad_buckets *b, int64_t cap_floats) {
    const hs_params *p = b->p;
    size_t *off;
    HS_ALLOC(off, p->count + 1);
    for (int i = 0; i < p->count; i++) off[i] = p->tensors[i].offset;
    qsort(off, (size_t)p->count, sizeof *off, cmp_offset_desc);
    int64_t end = (int64_t)p->total, start = end;
    for (int i = 0; i <= p->count; i++) {
        const int64_t o = i < p->count ? (int64_t)off[i] : 0; /* the last step takes the buffer's head */
        if (o >= start) continue; /* a second tensor at the same offset (an empty one) */
        if (cap_floats > 0 && start < end && end - o > cap_floats) {
            add_bucket(b, start, end);
            end = start;
        }
        start = o;
        while (end - start > MAX_COUNT) {
            add_bucket(b, end - MAX_COUNT, end);
            end -= MAX_COUNT;
        }
    }
    if (start < end) add_bucket(b, start, end);
    free(off);
}

hs_grad_buckets *hs_grad_buckets_create(const hs_comm *c, const hs_backend *be, hs_params *p, double cap_mb,
                                        const char *dtype) {
    hs_grad_buckets *b;
    HS_ALLOC(b, 1);
    b->c = c;
    b->be = be;
    b->p = p;
    b->dt = strcmp(dtype, "bf16") == 0   ? HS_ALLREDUCE_BF16
            : strcmp(dtype, "fp16") == 0 ? HS_ALLREDUCE_FP16
                                         : HS_ALLREDUCE_FP32;
    if (strcmp(dtype, "fp32") != 0 && b->dt == HS_ALLREDUCE_FP32)
        hs_die_all("distributed.allreduce_dtype = \"%s\": use \"fp32\", \"bf16\" or \"fp16\"", dtype);
    b->scatter_comm = b->gather_comm = MPI_COMM_NULL;
    if (c->size == 1 || p->total == 0) {
        b->path = PATH_NONE; /* nothing to sum; the gradient stays fp32 whatever the dtype */
        return b;
    }
    const int mode = hs_comm_device_mode(c, be); /* collective: every rank agrees (and NCCL starts) */
    b->path = mode == HS_COMM_MOVE_DEVICE ? PATH_DEVICE
              : mode == HS_COMM_MOVE_STAGED && !be->memory_is_host ? PATH_STAGED : PATH_HOST;
    if (b->path == PATH_DEVICE && (!be->allreduce_sum_async || !be->allreduce_wait))
        hs_die_all("internal: the %s device has no asynchronous all-reduce for the gradient buckets", be->name);
    int64_t cap_floats = (int64_t)(cap_mb * 1048576.0 / sizeof(float));
    if (cap_mb > 0 && cap_floats < 1) cap_floats = 1; /* a cap below one float: every tensor its own bucket */
    cut_buckets(b, cap_floats);
    HS_ALLOC(b->scatter_req, b->nb);
    HS_ALLOC(b->gather_req, b->nb);
    for (int k = 0; k < b->nb; k++) b->scatter_req[k] = b->gather_req[k] = MPI_REQUEST_NULL;
    if (c->rank == 0)
        hs_log("| gradient all-reduce: %d bucket(s) of at most %g MiB of fp32, %s values in transit%s", b->nb, cap_mb,
               dtype, b->path == PATH_DEVICE ? " (NCCL)" : " (rank-ordered sums)");
    if (b->path == PATH_DEVICE) {
        if (b->dt != HS_ALLREDUCE_FP32) b->dev16 = be->alloc(be, p->total * sizeof(uint16_t));
        return b;
    }

    /* CPU algorithm: two communicators (reduce-scatters, all-gathers), the slices and receive buffers */
    HS_CHECK_MPI(MPI_Comm_dup(c->world, &b->scatter_comm), "duplicating the communicator for the gradient buckets");
    HS_CHECK_MPI(MPI_Comm_dup(c->world, &b->gather_comm), "duplicating the communicator for the gradient buckets");
    b->esize = b->dt == HS_ALLREDUCE_FP32 ? sizeof(float) : sizeof(uint16_t);
    b->mtype = b->dt == HS_ALLREDUCE_FP32 ? MPI_FLOAT : MPI_UINT16_T;
    const int P = c->size, r = c->rank;
    size_t scratch = 0;
    for (int k = 0; k < b->nb; k++) {
        bucket *bk = &b->b[k];
        HS_ALLOC(bk->counts, P);
        HS_ALLOC(bk->displs, P);
        HS_ALLOC(bk->rcounts, P);
        HS_ALLOC(bk->rdispls, P);
        for (int q = 0; q < P; q++) {
            const int64_t lo = bk->n * q / P, hi = bk->n * (q + 1) / P;
            bk->counts[q] = (int)(hi - lo);
            bk->displs[q] = (int)lo;
        }
        for (int q = 0; q < P; q++) {
            bk->rcounts[q] = bk->counts[r];
            bk->rdispls[q] = q * bk->counts[r]; /* P · (n/P + 1) <= n + P: fits an int */
        }
        scratch += (size_t)P * (size_t)bk->counts[r];
    }
    b->scratch = hs_xcalloc(scratch ? scratch : 1, b->esize, __FILE__, __LINE__);
    char *s = b->scratch;
    for (int k = 0; k < b->nb; k++) {
        b->b[k].recv = s;
        s += (size_t)P * (size_t)b->b[k].counts[r] * b->esize;
    }
    if (b->dt != HS_ALLREDUCE_FP32) HS_ALLOC(b->low, p->total);
    if (b->path == PATH_STAGED) b->host = be->host_alloc(be, p->total * sizeof(float));
    else b->host = p->grad;
    return b;
}

void hs_grad_buckets_start(hs_grad_buckets *b) {
    if (b->started != 0 && b->path != PATH_NONE)
        hs_die("internal: gradient buckets restarted with %d of %d in flight", b->started - b->gathered, b->nb);
    b->started = b->gathered = 0;
}

/* Reduce-scatter of bucket k (CPU algorithm): its values leave in the travel type. */
static void post_scatter(hs_grad_buckets *b, int k) {
    bucket *bk = &b->b[k];
    void *send = b->host + bk->start;
    if (b->low) {
        uint16_t *l = b->low + bk->start;
        const float *g = b->host + bk->start;
        for (int64_t i = 0; i < bk->n; i++) l[i] = to16(b->dt, g[i]);
        send = l;
    }
    HS_CHECK_MPI(MPI_Ialltoallv(send, bk->counts, bk->displs, b->mtype, bk->recv, bk->rcounts, bk->rdispls, b->mtype,
                                b->scatter_comm, &b->scatter_req[k]),
                 "gradient reduce-scatter failed; a rank may have died (see its message above)");
}

/* After bucket k's reduce-scatter: the owner's rank-ordered fp32 sums into its slice, then the all-gather. */
static void post_gather(hs_grad_buckets *b, int k) {
    bucket *bk = &b->b[k];
    const int P = b->c->size, r = b->c->rank, m = bk->counts[r];
    const int64_t mine = bk->start + bk->displs[r];
    void *base;
    if (b->low) {
        const uint16_t *in = bk->recv;
        uint16_t *out = b->low + mine;
        for (int i = 0; i < m; i++) {
            float s = from16(b->dt, in[i]);
            for (int q = 1; q < P; q++) s += from16(b->dt, in[(size_t)q * m + i]);
            out[i] = to16(b->dt, s);
        }
        base = b->low + bk->start;
    } else {
        const float *in = bk->recv;
        float *out = b->host + mine;
        for (int i = 0; i < m; i++) {
            float s = in[i];
            for (int q = 1; q < P; q++) s += in[(size_t)q * m + i];
            out[i] = s;
        }
        base = b->host + bk->start;
    }
    HS_CHECK_MPI(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, base, bk->counts, bk->displs, b->mtype,
                                 b->gather_comm, &b->gather_req[k]),
                 "gradient all-gather failed; a rank may have died (see its message above)");
}

/* Moves every started bucket as far as it can go without waiting (wait = 0) or to the end (wait = 1). */
static void drive(hs_grad_buckets *b, int wait) {
    while (b->gathered < b->started) {
        int done = 1;
        if (wait)
            HS_CHECK_MPI(MPI_Wait(&b->scatter_req[b->gathered], MPI_STATUS_IGNORE),
                         "gradient reduce-scatter failed; a rank may have died (see its message above)");
        else
            HS_CHECK_MPI(MPI_Test(&b->scatter_req[b->gathered], &done, MPI_STATUS_IGNORE),
                         "gradient reduce-scatter failed; a rank may have died (see its message above)");
        if (!done) break;
        post_gather(b, b->gathered++);
    }
    if (b->gathered > 0) {
        int all = 0;
        if (wait)
            HS_CHECK_MPI(MPI_Waitall(b->gathered, b->gather_req, MPI_STATUSES_IGNORE),
                         "gradient all-gather failed; a rank may have died (see its message above)");
        else
            HS_CHECK_MPI(MPI_Testall(b->gathered, b->gather_req, &all, MPI_STATUSES_IGNORE),
                         "gradient all-gather failed; a rank may have died (see its message above)");
    }
}

static void start_bucket(hs_grad_buckets *b, int k) {
    bucket *bk = &b->b[k];
    if (b->path == PATH_DEVICE)
        b->be->allreduce_sum_async(b->be, b->p->grad + bk->start, (size_t)bk->n, b->dt,
                                   b->dev16 ? (uint16_t *)b->dev16 + bk->start : NULL);
    else post_scatter(b, k);
}

void hs_grad_buckets_ready(void *arg, int64_t offset) {
    hs_grad_buckets *b = arg;
    /* A GPU rank of a mixed job reduces a host copy, downloaded once in finish: a download here would
     * stall its device in the middle of backward. */
    if (b->path == PATH_NONE || b->path == PATH_STAGED) return;
    while (b->started < b->nb && b->b[b->started].start >= offset) start_bucket(b, b->started++);
    if (b->path == PATH_HOST) drive(b, 0);
}

void hs_grad_buckets_finish(hs_grad_buckets *b) {
    if (b->path == PATH_NONE) return;
    const size_t bytes = b->p->total * sizeof(float);
    if (b->path == PATH_STAGED) b->be->download(b->be, b->host, b->p->grad, bytes); /* waits for backward */
    while (b->started < b->nb) start_bucket(b, b->started++);
    if (b->path == PATH_DEVICE) {
        b->be->allreduce_wait(b->be);
    } else {
        drive(b, 1);
        if (b->low)
            for (size_t i = 0; i < b->p->total; i++) b->host[i] = from16(b->dt, b->low[i]);
        if (b->path == PATH_STAGED) b->be->upload(b->be, b->p->grad, b->host, bytes);
    }
    b->started = b->gathered = 0;
}

int hs_grad_buckets_capturable(const hs_grad_buckets *b) { return b->path == PATH_NONE || b->path == PATH_DEVICE; }

void hs_grad_buckets_free(hs_grad_buckets *b) {
    if (!b) return;
    for (int k = 0; k < b->nb; k++) {
        free(b->b[k].counts);
        free(b->b[k].displs);
        free(b->b[k].rcounts);
        free(b->b[k].rdispls);
    }
    if (b->scatter_comm != MPI_COMM_NULL) MPI_Comm_free(&b->scatter_comm);
    if (b->gather_comm != MPI_COMM_NULL) MPI_Comm_free(&b->gather_comm);
    if (b->path == PATH_STAGED) b->be->host_free(b->be, b->host);
    if (b->dev16) b->be->free(b->be, b->dev16);
    free(b->scratch);
    free(b->low);
    free(b->scatter_req);
    free(b->gather_req);
    free(b->b);
    free(b);
}
