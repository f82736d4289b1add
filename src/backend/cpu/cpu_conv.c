/* Convolution on the CPU (max pooling: cpu_pool.c).
 *
 * 3×3 convolutions with at least 8 input and output channels go to Winograd F(4×4,3×3) (cpu_winograd.c:
 * a quarter of the multiplies). Every other conv2d is im2col + GEMM, one sample at a time per OpenMP
 * thread (the OpenMP build of OpenBLAS runs single-threaded inside a parallel region, so T threads run
 * T independent cache-resident GEMMs — this beats one multi-threaded GEMM over the whole batch, whose
 * column matrix would not fit in cache; a per-sample 64×576×288 GEMM runs at the core's FMA peak, and
 * column blocks of 2 or 4 samples measured no faster):
 *   col[K,P]  with K = c_in*kh*kw, P = oh*ow:  col[(c,i,j), (oy,ox)] = x[c, oy+i, ox+j]
 *   forward   y_b[c_out,P] = W[c_out,K] · col_b + b
 *   backward  dW += Σ_b dy_b · col_bᵀ,  db += Σ_b Σ_p dy_b,  dcol_b = Wᵀ · dy_b,  dx_b = col2im(dcol_b)
 * The weight gradient is a sum over samples; to keep it independent of the thread count, samples are
 * cut into fixed groups of HS_CONV_GROUP, each group sums into its own partial, and the partials are
 * added in group order.
 *
 * Workspace: one column buffer per processor this process may run on (omp_get_num_procs, fixed for the
 * process, so a workspace sized once stays large enough whatever OMP_NUM_THREADS or omp_set_num_threads
 * say later; at most that many threads are used), followed by the per-group partials. */
#include <string.h>

#include "backend/cpu/cpu_rounded_gemm.h"
#include "backend/cpu/cpu_conv_threads.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_winograd.h"
#include "util/check.h"

#define HS_CONV_GROUP 4  /* samples per weight-gradient partial */

typedef struct conv_layout {
    size_t k;          /* c_in*kh*kw: rows of col */
    size_t p;          /* oh*ow: columns of col */
    size_t in_sample;  /* c_in*h*w */
    size_t out_sample; /* c_out*oh*ow */
    size_t col_floats; /* one column buffer, rounded */
    size_t part_floats;/* one partial: dW[c_out,K] then db[c_out], rounded */
    int slots;         /* column buffers (at least the threads used) */
    int groups;        /* weight-gradient partials */
} conv_layout;

static conv_layout layout_of(const hs_conv2d_shape *s) {
    if (s->oh != s->h - s->kh + 1 || s->ow != s->w - s->kw + 1 || s->oh <= 0 || s->ow <= 0)
        HS_FATAL(NULL, "conv2d shape: %dx%d input, %dx%d kernel gives %dx%d, not %dx%d", s->h, s->w, s->kh, s->kw,
                 s->h - s->kh + 1, s->w - s->kw + 1, s->oh, s->ow);
    conv_layout L;
    L.k = (size_t)s->c_in * (size_t)s->kh * (size_t)s->kw;
    L.p = (size_t)s->oh * (size_t)s->ow;
    L.in_sample = (size_t)s->c_in * (size_t)s->h * (size_t)s->w;
    L.out_sample = (size_t)s->c_out * L.p;
    L.col_floats = hs_cpu_conv_round_up(L.k * L.p);
    L.part_floats = hs_cpu_conv_round_up((size_t)s->c_out * L.k + (size_t)s->c_out);
    L.slots = hs_cpu_conv_slots();
    L.groups = (s->n + HS_CONV_GROUP - 1) / HS_CONV_GROUP;
    return L;
}

size_t hs_cpu_conv2d_workspace_bytes(const hs_backend *be, const hs_conv2d_shape *s) {
    (void)be;
    if (hs_cpu_winograd_applies(s)) return hs_cpu_winograd_workspace_bytes(s);
    conv_layout L = layout_of(s);
    return ((size_t)L.slots * L.col_floats + (size_t)L.groups * L.part_floats) * sizeof(float);
}

/* col[K,P] from one sample x[c_in,h,w]: each (c,i,j) row is oh runs of ow contiguous input values
 * (copied with an inlined loop: a memcpy call per 24-float run costs more than the copy). */
static void im2col(float *restrict col, const float *restrict x, const hs_conv2d_shape *s) {
    const size_t p = (size_t)s->oh * (size_t)s->ow;
    for (int c = 0; c < s->c_in; c++)
        for (int i = 0; i < s->kh; i++)
            for (int j = 0; j < s->kw; j++) {
                float *restrict row = col + ((size_t)(c * s->kh + i) * (size_t)s->kw + (size_t)j) * p;
                const float *restrict src = x + ((size_t)c * (size_t)s->h + (size_t)i) * (size_t)s->w + (size_t)j;
                for (int oy = 0; oy < s->oh; oy++) {
                    float *restrict d = row + (size_t)oy * (size_t)s->ow;
                    const float *restrict r = src + (size_t)oy * (size_t)s->w;
#pragma omp simd
                    for (int ox = 0; ox < s->ow; ox++) d[ox] = r[ox];
                }
            }
}

/* dx[c_in,h,w] = col2im(dcol[K,P]): every input value collects the column entries it was copied to. */
static void col2im(float *dx, const float *dcol, const hs_conv2d_shape *s) {
    const size_t p = (size_t)s->oh * (size_t)s->ow;
    memset(dx, 0, (size_t)s->c_in * (size_t)s->h * (size_t)s->w * sizeof *dx);
    for (int c = 0; c < s->c_in; c++)
        for (int i = 0; i < s->kh; i++)
            for (int j = 0; j < s->kw; j++) {
                const float *row = dcol + ((size_t)(c * s->kh + i) * (size_t)s->kw + (size_t)j) * p;
                float *dst = dx + ((size_t)c * (size_t)s->h + (size_t)i) * (size_t)s->w + (size_t)j;
                for (int oy = 0; oy < s->oh; oy++) {
                    float *d = dst + (size_t)oy * (size_t)s->w;
                    const float *r = row + (size_t)oy * (size_t)s->ow;
#pragma omp simd
                    for (int ox = 0; ox < s->ow; ox++) d[ox] += r[ox];
                }
            }
}

/* y[n,c_out,oh,ow] = conv(x[n,c_in,h,w], w[c_out,c_in,kh,kw]) + b[c_out] */
void hs_cpu_conv2d_forward(const hs_backend *be, const hs_conv2d_shape *s, float *y, const float *x, const float *w,
                           const float *b, void *workspace) {
    /* rounded operands (bf16/tf32/fp16), fp32 arithmetic (cpu_rounded_gemm.h); fp32 passes them unchanged */
    x = hs_lowp_rounded_copy(be->precision, 0, x, (size_t)s->n * (size_t)s->c_in * (size_t)s->h * (size_t)s->w);
    w = hs_lowp_rounded_copy(be->precision, 1, w, (size_t)s->c_out * (size_t)s->c_in * (size_t)s->kh * (size_t)s->kw);
    if (hs_cpu_winograd_applies(s)) {
        hs_cpu_winograd_forward(s, y, x, w, b, workspace);
        return;
    }
    const conv_layout L = layout_of(s);
    float *cols = workspace;
#pragma omp parallel num_threads(hs_cpu_conv_threads(L.slots))
    {
        float *col = cols + (size_t)hs_cpu_conv_thread_num() * L.col_floats; /* col[K,P] */
#pragma omp for schedule(static)
        for (int n = 0; n < s->n; n++) {
            float *yn = y + (size_t)n * L.out_sample; /* y_n[c_out,P] */
            im2col(col, x + (size_t)n * L.in_sample, s);
            hs_cpu_blas_sgemm(0, 0, s->c_out, (int)L.p, (int)L.k, 1.0f, w, (int)L.k, col, (int)L.p, 0.0f, yn, (int)L.p);
            for (int co = 0; co < s->c_out; co++) {
                float *yr = yn + (size_t)co * L.p;
                const float bias = b[co];
#pragma omp simd
                for (size_t q = 0; q < L.p; q++) yr[q] += bias;
            }
        }
    }
}

/* The backward pass on operands already rounded (below). */
static void conv2d_backward(const hs_conv2d_shape *s, float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, void *workspace) {
    if (hs_cpu_winograd_applies(s)) {
        hs_cpu_winograd_backward(s, dx, dw, db, dy, x, w, workspace);
        return;
    }
    const conv_layout L = layout_of(s);
    float *cols = workspace;
    float *partials = cols + (size_t)L.slots * L.col_floats; /* partials[groups][c_out*K + c_out] */
    const size_t dw_len = (size_t)s->c_out * L.k;
#pragma omp parallel num_threads(hs_cpu_conv_threads(L.slots))
    {
        float *col = cols + (size_t)hs_cpu_conv_thread_num() * L.col_floats; /* col[K,P], then dcol[K,P] */
#pragma omp for schedule(static)
        for (int g = 0; g < L.groups; g++) {
            float *part_dw = partials + (size_t)g * L.part_floats; /* [c_out,K] */
            float *part_db = part_dw + dw_len;                     /* [c_out] */
            const int n_end = (g + 1) * HS_CONV_GROUP < s->n ? (g + 1) * HS_CONV_GROUP : s->n;
            for (int n = g * HS_CONV_GROUP; n < n_end; n++) {
                const int first = n == g * HS_CONV_GROUP;
                const float *dyn = dy + (size_t)n * L.out_sample; /* dy_n[c_out,P] */
                im2col(col, x + (size_t)n * L.in_sample, s);
                hs_cpu_blas_sgemm(0, 1, s->c_out, (int)L.k, (int)L.p, 1.0f, dyn, (int)L.p, col, (int)L.p,
                                  first ? 0.0f : 1.0f, part_dw, (int)L.k);
                for (int co = 0; co < s->c_out; co++) {
                    const float *dr = dyn + (size_t)co * L.p;
                    double sum = 0.0;
                    for (size_t q = 0; q < L.p; q++) sum += (double)dr[q];
                    part_db[co] = first ? (float)sum : part_db[co] + (float)sum;
                }
                if (dx) {
                    hs_cpu_blas_sgemm(1, 0, (int)L.k, (int)L.p, s->c_out, 1.0f, w, (int)L.k, dyn, (int)L.p, 0.0f, col,
                                      (int)L.p);
                    col2im(dx + (size_t)n * L.in_sample, col, s);
                }
            }
        }
        /* dw, db += partials summed in group order (each element independently: parallel and fixed). */
#pragma omp for schedule(static)
        for (size_t e = 0; e < dw_len + (size_t)s->c_out; e++) {
            double sum = 0.0;
            for (int g = 0; g < L.groups; g++) sum += (double)partials[(size_t)g * L.part_floats + e];
            if (e < dw_len)
                dw[e] += (float)sum;
            else
                db[e - dw_len] += (float)sum;
        }
    }
}

/* dw[c_out,c_in,kh,kw] += Σ dy·colᵀ, db[c_out] += Σ dy, dx[n,c_in,h,w] = col2im(Wᵀ·dy) (dx may be NULL).
 * The products' operands are rounded as in the forward pass (unchanged under fp32). db is a sum, not a
 * product: under bf16/fp16 it sums the rounded dy (the 16-bit gradient a mixed-precision layer
 * receives), under tf32 the fp32 dy (TF32 is only the tensor cores' rounding of a product's inputs:
 * cuDNN's bias gradient under TF32 sums fp32 values). */
void hs_cpu_conv2d_backward(const hs_backend *be, const hs_conv2d_shape *s, float *dx, float *dw, float *db,
                            const float *dy, const float *x, const float *w, void *workspace) {
    const size_t ny = (size_t)s->n * (size_t)s->c_out * (size_t)s->oh * (size_t)s->ow;
    const float *dy_fp32 = dy;
    x = hs_lowp_rounded_copy(be->precision, 0, x, (size_t)s->n * (size_t)s->c_in * (size_t)s->h * (size_t)s->w);
    w = hs_lowp_rounded_copy(be->precision, 1, w, (size_t)s->c_out * (size_t)s->c_in * (size_t)s->kh * (size_t)s->kw);
    dy = hs_lowp_rounded_copy(be->precision, 2, dy, ny);
    if (be->precision != HS_PRECISION_TF32) {
        conv2d_backward(s, dx, dw, db, dy, x, w, workspace);
        return;
    }
    static _Thread_local float *db_discard; /* the rounded dy's bias sums, not used */
    static _Thread_local int db_len;
    if (s->c_out > db_len) {
        HS_REALLOC(db_discard, (size_t)s->c_out);
        db_len = s->c_out;
    }
    conv2d_backward(s, dx, dw, db_discard, dy, x, w, workspace);
    const size_t plane = (size_t)s->oh * (size_t)s->ow;
#pragma omp parallel for schedule(static) if (ny > 65536)
    for (int co = 0; co < s->c_out; co++) { /* db[co] += Σ_{n,y,x} dy, in double, samples in order */
        double sum = 0.0;
        for (int n = 0; n < s->n; n++) {
            const float *d = dy_fp32 + ((size_t)n * (size_t)s->c_out + (size_t)co) * plane;
            for (size_t q = 0; q < plane; q++) sum += (double)d[q];
        }
        db[co] += (float)sum;
    }
}
