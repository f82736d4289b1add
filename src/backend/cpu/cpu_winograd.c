/* 3×3 stride-1 convolution by Winograd F(4×4, 3×3) (kernels/math/winograd.h) on the CPU: a 4×4 block
 * of outputs costs 36 multiplies per (c_in, c_out) pair instead of 144, so the three GEMM-heavy passes
 * of a training step (forward, data gradient, filter gradient) each do a quarter of im2col's FLOPs.
 *
 * Per sample, with T = tiles_y·tiles_x tiles (tile t covers outputs [4ty,4ty+4)×[4tx,4tx+4) and reads
 * the 6×6 input patch at (4ty,4tx); tiles past the output edge read zeros and their outputs are
 * dropped) and ξ one of the 36 transform points:
 *   U_ξ[c,k]  = (G w[k,c] Gᵀ)_ξ                         filters, once per call
 *   V_ξ[t,c]  = (Bᵀ x_tile(t,c) B)_ξ                     input tiles
 *   forward   M_ξ[t,k] = V_ξ · U_ξ                       36 GEMMs [T×C]·[C×K],   y_tile = Aᵀ M A + b
 *   backward  M'_ξ[t,k] = (A dy_tile(t,k) Aᵀ)_ξ          the adjoint of the output transform
 *             dU_ξ[c,k] += V_ξᵀ · M'_ξ                   36 GEMMs,  dw[k,c] = Gᵀ dU[c,k] G
 *             dV_ξ[t,c] = M'_ξ · U_ξᵀ                    36 GEMMs,  dx_tile = B dV Bᵀ, added over the
 *                                                        overlapping tiles (neighbours share 2 rows/cols)
 * The data gradient is the adjoint of the forward map, so it reuses the forward's tiling exactly (no
 * padded "full" convolution, no wasted edge tiles).
 *
 * Layout: the transforms run across channels (the vector lanes), so each sample is first moved to
 * channels-last (xT[y][x][c]) and outputs come back from yT[y][x][k]; every transform loop is then a
 * contiguous `omp simd` loop over channels. On x86-64 the transforms are compiled for AVX-512, AVX2
 * and the baseline, picked at load time (the build targets the baseline; with -ffp-contract=off, the
 * C11 default, every version rounds identically), and the layout changes use 8×8 AVX register
 * transposes when the processor has AVX.
 *
 * Threads and determinism as in cpu_conv.c: samples are split over threads; the filter gradient is
 * summed per fixed group of HS_WINO_GROUP samples into its own partial, and the partials are added in
 * group order, so results do not depend on the thread count.
 *
 * Workspace: one slot of per-sample buffers (xT, V, M, yT, dU: 1 MB for the MNIST conv2, about one
 * core's L2, so a sample's pipeline stays cache-resident) per processor, then U, Ut, wT and the
 * partials, shared. */
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "backend/cpu/cpu_conv_threads.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_winograd.h"
#include "math/winograd.h"
#include "util/check.h"

#define HS_WINO_POINTS 36 /* 6×6 transform points */
#define HS_WINO_GROUP 4   /* samples per filter-gradient partial */
#define HS_WINO_LANES 64  /* channels transformed together (stack scratch of 36·64 floats) */

/* Vectorised loops get a version per x86 vector width (GCC's function multi-versioning). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define HS_WINO_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef HS_WINO_CLONES
#define HS_WINO_CLONES
#endif

int hs_cpu_winograd_applies(const hs_conv2d_shape *s) {
    /* Below ~8 channels the GEMMs are too thin for the transforms to pay off. */
    return s->kh == 3 && s->kw == 3 && s->c_in >= 8 && s->c_out >= 8;
}

typedef struct wino_layout {
    int tiles_y, tiles_x, tiles; /* 4×4 output tiles per sample */
    int ph, pw;                  /* input extent the tiles read: 4·tiles + 2 (>= h, w) */
    int yh, yw;                  /* output extent the tiles write: 4·tiles (>= oh, ow) */
    size_t xt;    /* xT[ph][pw][c_in]; in backward reused as dxT */
    size_t v;     /* V[36][T][c_in]; in backward reused as dV */
    size_t m;     /* M[36][T][c_out] (M' in backward) */
    size_t yt;    /* yT[yh][yw][c_out] (dyT in backward) */
    size_t du;    /* dU[36][c_in][c_out] */
    size_t slot;  /* one thread's buffers */
    size_t u;     /* U[36][c_in][c_out] (shared), and as many for Ut[36][c_out][c_in] */
    size_t wt;    /* wT[c_in·9][c_out] (shared) */
    size_t part;  /* one filter-gradient partial: dw[c_in][9][c_out] then db[c_out] */
    int slots, groups;
} wino_layout;

static wino_layout layout_of(const hs_conv2d_shape *s) {
    if (s->oh != s->h - 2 || s->ow != s->w - 2 || s->oh <= 0 || s->ow <= 0)
        HS_FATAL(NULL, "conv2d shape: %dx%d input, 3x3 kernel gives %dx%d, not %dx%d", s->h, s->w, s->h - 2,
                 s->w - 2, s->oh, s->ow);
    wino_layout L;
    const size_t c = (size_t)s->c_in, k = (size_t)s->c_out;
    L.tiles_y = (s->oh + 3) / 4, L.tiles_x = (s->ow + 3) / 4, L.tiles = L.tiles_y * L.tiles_x;
    L.ph = 4 * L.tiles_y + 2, L.pw = 4 * L.tiles_x + 2;
    L.yh = 4 * L.tiles_y, L.yw = 4 * L.tiles_x;
    L.xt = hs_cpu_conv_round_up((size_t)L.ph * (size_t)L.pw * c);
    L.v = hs_cpu_conv_round_up(HS_WINO_POINTS * (size_t)L.tiles * c);
    L.m = hs_cpu_conv_round_up(HS_WINO_POINTS * (size_t)L.tiles * k);
    L.yt = hs_cpu_conv_round_up((size_t)L.yh * (size_t)L.yw * k);
    L.du = hs_cpu_conv_round_up(HS_WINO_POINTS * c * k);
    L.slot = L.xt + L.v + L.m + L.yt + L.du;
    L.u = hs_cpu_conv_round_up(HS_WINO_POINTS * c * k);
    L.wt = hs_cpu_conv_round_up(c * 9 * k);
    L.part = hs_cpu_conv_round_up(c * 9 * k + k);
    L.slots = hs_cpu_conv_slots();
    L.groups = (s->n + HS_WINO_GROUP - 1) / HS_WINO_GROUP;
    return L;
}

size_t hs_cpu_winograd_workspace_bytes(const hs_conv2d_shape *s) {
    const wino_layout L = layout_of(s);
    return ((size_t)L.slots * L.slot + 2 * L.u + L.wt + (size_t)L.groups * L.part) * sizeof(float);
}

/* One thread's buffers, carved from its slot. */
typedef struct wino_slot {
    float *xt, *v, *m, *yt, *du;
} wino_slot;

static wino_slot slot_of(float *workspace, const wino_layout *L, int slot) {
    float *p = workspace + (size_t)slot * L->slot;
    wino_slot b;
    b.xt = p, b.v = b.xt + L->xt, b.m = b.v + L->v, b.yt = b.m + L->m, b.du = b.yt + L->yt;
    return b;
}

/* ---- layout changes between NCHW and channels-last ---------------------------------------------------- */

/* dst[j][i] = src[i][j] (+ bias[j]) for i0 <= i < rows, j0 <= j < cols: the plain loop, for what the
 * register blocks leave over */
static void transpose_scalar(float *restrict dst, size_t ld_dst, const float *restrict src, size_t ld_src, int i0,
                             int rows, int j0, int cols, const float *bias) {
    for (int i = i0; i < rows; i++)
        for (int j = j0; j < cols; j++) {
            const float v = src[(size_t)i * ld_src + (size_t)j];
            dst[(size_t)j * ld_dst + (size_t)i] = bias ? v + bias[j] : v;
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
/* 4×4 blocks in SSE registers (every x86-64 processor) */
static void transpose_sse(float *restrict dst, size_t ld_dst, const float *restrict src, size_t ld_src, int rows,
                          int cols, const float *bias) {
    const int rows4 = rows / 4 * 4, cols4 = cols / 4 * 4;
    for (int i0 = 0; i0 < rows4; i0 += 4) {
        for (int j0 = 0; j0 < cols4; j0 += 4) {
            const float *sp = src + (size_t)i0 * ld_src + (size_t)j0;
            __m128 r0 = _mm_loadu_ps(sp), r1 = _mm_loadu_ps(sp + ld_src);
            __m128 r2 = _mm_loadu_ps(sp + 2 * ld_src), r3 = _mm_loadu_ps(sp + 3 * ld_src);
            _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
            if (bias) {
                r0 = _mm_add_ps(r0, _mm_set1_ps(bias[j0])), r1 = _mm_add_ps(r1, _mm_set1_ps(bias[j0 + 1]));
                r2 = _mm_add_ps(r2, _mm_set1_ps(bias[j0 + 2])), r3 = _mm_add_ps(r3, _mm_set1_ps(bias[j0 + 3]));
            }
            float *dp = dst + (size_t)j0 * ld_dst + (size_t)i0;
            _mm_storeu_ps(dp, r0), _mm_storeu_ps(dp + ld_dst, r1);
            _mm_storeu_ps(dp + 2 * ld_dst, r2), _mm_storeu_ps(dp + 3 * ld_dst, r3);
        }
    }
    transpose_scalar(dst, ld_dst, src, ld_src, 0, rows4, cols4, cols, bias);
    transpose_scalar(dst, ld_dst, src, ld_src, rows4, rows, 0, cols, bias);
}

/* 8×8 blocks in AVX registers: unpack pairs of rows, shuffle pairs of pairs, swap 128-bit halves */
__attribute__((target("avx"))) static void transpose_avx(float *restrict dst, size_t ld_dst,
                                                         const float *restrict src, size_t ld_src, int rows,
                                                         int cols, const float *bias) {
    const int rows8 = rows / 8 * 8, cols8 = cols / 8 * 8;
    for (int i0 = 0; i0 < rows8; i0 += 8) {
        for (int j0 = 0; j0 < cols8; j0 += 8) {
            const float *sp = src + (size_t)i0 * ld_src + (size_t)j0;
            const __m256 r0 = _mm256_loadu_ps(sp), r1 = _mm256_loadu_ps(sp + ld_src);
            const __m256 r2 = _mm256_loadu_ps(sp + 2 * ld_src), r3 = _mm256_loadu_ps(sp + 3 * ld_src);
            const __m256 r4 = _mm256_loadu_ps(sp + 4 * ld_src), r5 = _mm256_loadu_ps(sp + 5 * ld_src);
            const __m256 r6 = _mm256_loadu_ps(sp + 6 * ld_src), r7 = _mm256_loadu_ps(sp + 7 * ld_src);
            const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
            const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
            const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
            const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
            const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
            const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
            const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
            const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
            const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
            const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
            const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
            const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
            __m256 c0 = _mm256_permute2f128_ps(u0, u4, 0x20), c4 = _mm256_permute2f128_ps(u0, u4, 0x31);
            __m256 c1 = _mm256_permute2f128_ps(u1, u5, 0x20), c5 = _mm256_permute2f128_ps(u1, u5, 0x31);
            __m256 c2 = _mm256_permute2f128_ps(u2, u6, 0x20), c6 = _mm256_permute2f128_ps(u2, u6, 0x31);
            __m256 c3 = _mm256_permute2f128_ps(u3, u7, 0x20), c7 = _mm256_permute2f128_ps(u3, u7, 0x31);
            if (bias) {
                const float *bj = bias + j0;
                c0 = _mm256_add_ps(c0, _mm256_set1_ps(bj[0])), c1 = _mm256_add_ps(c1, _mm256_set1_ps(bj[1]));
                c2 = _mm256_add_ps(c2, _mm256_set1_ps(bj[2])), c3 = _mm256_add_ps(c3, _mm256_set1_ps(bj[3]));
                c4 = _mm256_add_ps(c4, _mm256_set1_ps(bj[4])), c5 = _mm256_add_ps(c5, _mm256_set1_ps(bj[5]));
                c6 = _mm256_add_ps(c6, _mm256_set1_ps(bj[6])), c7 = _mm256_add_ps(c7, _mm256_set1_ps(bj[7]));
            }
            float *dp = dst + (size_t)j0 * ld_dst + (size_t)i0;
            _mm256_storeu_ps(dp, c0), _mm256_storeu_ps(dp + ld_dst, c1);
            _mm256_storeu_ps(dp + 2 * ld_dst, c2), _mm256_storeu_ps(dp + 3 * ld_dst, c3);
            _mm256_storeu_ps(dp + 4 * ld_dst, c4), _mm256_storeu_ps(dp + 5 * ld_dst, c5);
            _mm256_storeu_ps(dp + 6 * ld_dst, c6), _mm256_storeu_ps(dp + 7 * ld_dst, c7);
        }
    }
    transpose_scalar(dst, ld_dst, src, ld_src, 0, rows8, cols8, cols, bias);
    transpose_scalar(dst, ld_dst, src, ld_src, rows8, rows, 0, cols, bias);
}
#endif

/* dst[j][i] = src[i][j] (+ bias[j]) for i < rows, j < cols */
static void transpose(float *restrict dst, size_t ld_dst, const float *restrict src, size_t ld_src, int rows,
                      int cols, const float *bias) {
#if defined(__x86_64__) && defined(__GNUC__)
    if (rows >= 8 && cols >= 8 && __builtin_cpu_supports("avx"))
        transpose_avx(dst, ld_dst, src, ld_src, rows, cols, bias);
    else
        transpose_sse(dst, ld_dst, src, ld_src, rows, cols, bias);
#else
    transpose_scalar(dst, ld_dst, src, ld_src, 0, rows, 0, cols, bias);
#endif
}

/* dst[y][x][c] (row pitch dst_w) = src[c][y][x] for y < h, x < w: one [nc × h·w] transpose when the
 * rows are not padded (measured ~2× faster than row by row), else one per row. */
static void to_channels_last(float *restrict dst, const float *restrict src, int nc, int h, int w, int dst_w) {
    const size_t plane = (size_t)h * (size_t)w;
    if (dst_w == w) {
        transpose(dst, (size_t)nc, src, plane, nc, (int)plane, NULL);
        return;
    }
    for (int y = 0; y < h; y++)
        transpose(dst + (size_t)y * (size_t)dst_w * (size_t)nc, (size_t)nc, src + (size_t)y * (size_t)w, plane, nc, w,
                  NULL);
}

/* dst[c][y][x] = src[y][x][c] (row pitch src_w) + (bias ? bias[c] : 0) for y < h, x < w (as above) */
static void from_channels_last(float *restrict dst, const float *restrict src, const float *bias, int nc, int h,
                               int w, int src_w) {
    const size_t plane = (size_t)h * (size_t)w;
    if (src_w == w) {
        transpose(dst, plane, src, (size_t)nc, (int)plane, nc, bias);
        return;
    }
    for (int y = 0; y < h; y++)
        transpose(dst + (size_t)y * (size_t)w, plane, src + (size_t)y * (size_t)src_w * (size_t)nc, (size_t)nc, w, nc,
                  bias);
}

/* ---- filter transform and its adjoint ----------------------------------------------------------------- */

/* U[36][c_in][c_out] = G w[k,c] Gᵀ for every filter w[c_out,c_in,3,3], and the same points transposed,
 * Ut[36][c_out][c_in], so both GEMMs that read U run without a transposed operand. Via wT[c_in·9][c_out]
 * (w with the output channel last) the transform runs across output channels. Each thread of the
 * calling parallel region does a fixed range of input channels start to finish, so one barrier (the
 * caller's) suffices. */
HS_WINO_CLONES
static void transform_filters(float *restrict u, float *restrict ut, float *restrict wt, const float *restrict w,
                              const hs_conv2d_shape *s, int thread, int threads) {
    const int nc = s->c_in, nk = s->c_out;
    const size_t ck = (size_t)nc * (size_t)nk;
    const int c_begin = nc * thread / threads, c_end = nc * (thread + 1) / threads, c_count = c_end - c_begin;
    if (c_count <= 0) return;
    /* wT rows [9·c_begin, 9·c_end) = columns of w[c_out][c_in·9] */
    transpose(wt + (size_t)c_begin * 9 * (size_t)nk, (size_t)nk, w + (size_t)c_begin * 9, (size_t)nc * 9, nk,
              9 * c_count, NULL);
    for (int c = c_begin; c < c_end; c++)
        for (int k0 = 0; k0 < nk; k0 += HS_WINO_LANES) {
            const int lanes = nk - k0 < HS_WINO_LANES ? nk - k0 : HS_WINO_LANES;
            const float *g = wt + (size_t)c * 9 * (size_t)nk + (size_t)k0; /* tap (i,j) at g[(3i+j)·nk] */
            float cols[6][3][HS_WINO_LANES];                               /* G·g: cols[a][j][k] */
            for (int j = 0; j < 3; j++) {
#pragma omp simd
                for (int k = 0; k < lanes; k++)
                    hs_wino_filter_1d(g + (size_t)j * (size_t)nk + k, 3 * (size_t)nk, &cols[0][j][k],
                                      3 * HS_WINO_LANES);
            }
            for (int a = 0; a < 6; a++) { /* (G·g)·Gᵀ: point (a,b) at U_{6a+b}[c][k] */
                float *ua = u + (size_t)(6 * a) * ck + (size_t)c * (size_t)nk + (size_t)k0;
#pragma omp simd
                for (int k = 0; k < lanes; k++) hs_wino_filter_1d(&cols[a][0][k], HS_WINO_LANES, ua + k, ck);
            }
        }
    for (int xi = 0; xi < HS_WINO_POINTS; xi++) /* Ut_ξ columns [c_begin, c_end) = U_ξ rows */
        transpose(ut + (size_t)xi * ck + (size_t)c_begin, (size_t)nc,
                  u + (size_t)xi * ck + (size_t)c_begin * (size_t)nk, (size_t)nk, c_count, nk, NULL);
}

/* part_dw[c][9][k] = Gᵀ dU[c,k] G (this group's filter gradient, brought back to 3×3 taps) */
HS_WINO_CLONES
static void filter_grad_taps(float *restrict part_dw, const float *restrict du, const hs_conv2d_shape *s) {
    const int nk = s->c_out;
    const size_t ck = (size_t)s->c_in * (size_t)nk;
    for (int c = 0; c < s->c_in; c++)
        for (int k0 = 0; k0 < nk; k0 += HS_WINO_LANES) {
            const int lanes = nk - k0 < HS_WINO_LANES ? nk - k0 : HS_WINO_LANES;
            const float *duc = du + (size_t)c * (size_t)nk + (size_t)k0; /* dU_{0,0}[c][k0] */
            float *pc = part_dw + (size_t)c * 9 * (size_t)nk + (size_t)k0;
            float rows[6][3][HS_WINO_LANES]; /* dU·G: rows[a][j][k] */
            for (int a = 0; a < 6; a++) {
#pragma omp simd
                for (int k = 0; k < lanes; k++)
                    hs_wino_filter_1d_t(duc + (size_t)(a * 6) * ck + k, ck, &rows[a][0][k], HS_WINO_LANES);
            }
            for (int j = 0; j < 3; j++) { /* Gᵀ·(dU·G): tap (i,j) lands at pc[(3i+j)·nk] */
#pragma omp simd
                for (int k = 0; k < lanes; k++)
                    hs_wino_filter_1d_t(&rows[0][j][k], 3 * HS_WINO_LANES, pc + (size_t)j * (size_t)nk + k,
                                        3 * (size_t)nk);
            }
        }
}

/* part_db[k] (+)= Σ_{y,x} dyT[y][x][k] over the oh×ow valid outputs, in double, lanes across channels */
HS_WINO_CLONES
static void channel_sums(float *restrict part_db, const float *restrict dyt, const wino_layout *L, int nk, int oh,
                         int ow, int first) {
    for (int k0 = 0; k0 < nk; k0 += HS_WINO_LANES) {
        const int lanes = nk - k0 < HS_WINO_LANES ? nk - k0 : HS_WINO_LANES;
        double acc[HS_WINO_LANES] = {0};
        for (int y = 0; y < oh; y++)
            for (int x = 0; x < ow; x++) {
                const float *d = dyt + ((size_t)y * (size_t)L->yw + (size_t)x) * (size_t)nk + (size_t)k0;
#pragma omp simd
                for (int k = 0; k < lanes; k++) acc[k] += (double)d[k];
            }
        for (int k = 0; k < lanes; k++) part_db[k0 + k] = first ? (float)acc[k] : part_db[k0 + k] + (float)acc[k];
    }
}

/* ---- tile transforms, vectorised across channels ---------------------------------------------------- */

/* V[36][T][nc] = Bᵀ d B for every 6×6 patch d of xT[ph][pw][nc] */
HS_WINO_CLONES
static void transform_inputs(float *restrict v, const float *restrict xt, const wino_layout *L, int nc) {
    const size_t T = (size_t)L->tiles, row = (size_t)L->pw * (size_t)nc, point = T * (size_t)nc;
    for (int ty = 0; ty < L->tiles_y; ty++)
        for (int tx = 0; tx < L->tiles_x; tx++) {
            const size_t t = (size_t)ty * (size_t)L->tiles_x + (size_t)tx;
            const float *patch = xt + (size_t)(4 * ty) * row + (size_t)(4 * tx) * (size_t)nc;
            for (int c0 = 0; c0 < nc; c0 += HS_WINO_LANES) {
                const int lanes = nc - c0 < HS_WINO_LANES ? nc - c0 : HS_WINO_LANES;
                float cols[6][6][HS_WINO_LANES]; /* Bᵀ d: cols[a][j][c] */
                for (int j = 0; j < 6; j++) {
                    const float *pj = patch + (size_t)j * (size_t)nc + (size_t)c0; /* column j, row 0 */
#pragma omp simd
                    for (int c = 0; c < lanes; c++) hs_wino_input_1d(pj + c, row, &cols[0][j][c], 6 * HS_WINO_LANES);
                }
                for (int a = 0; a < 6; a++) {
                    float *va = v + (size_t)(a * 6) * point + t * (size_t)nc + (size_t)c0; /* V_{a,0}[t][c0] */
#pragma omp simd
                    for (int c = 0; c < lanes; c++) hs_wino_input_1d(&cols[a][0][c], HS_WINO_LANES, va + c, point);
                }
            }
        }
}

/* dxT[ph][pw][nc] = Σ_tiles B dV Bᵀ (dxT zeroed here; neighbouring tiles overlap, added in tile order) */
HS_WINO_CLONES
static void transform_inputs_adjoint(float *restrict dxt, const float *restrict dv, const wino_layout *L, int nc) {
    const size_t T = (size_t)L->tiles, row = (size_t)L->pw * (size_t)nc, point = T * (size_t)nc;
    memset(dxt, 0, (size_t)L->ph * row * sizeof *dxt);
    for (int ty = 0; ty < L->tiles_y; ty++)
        for (int tx = 0; tx < L->tiles_x; tx++) {
            const size_t t = (size_t)ty * (size_t)L->tiles_x + (size_t)tx;
            float *patch = dxt + (size_t)(4 * ty) * row + (size_t)(4 * tx) * (size_t)nc;
            for (int c0 = 0; c0 < nc; c0 += HS_WINO_LANES) {
                const int lanes = nc - c0 < HS_WINO_LANES ? nc - c0 : HS_WINO_LANES;
                float rows[6][6][HS_WINO_LANES]; /* dV B: rows[a][j][c] */
                for (int a = 0; a < 6; a++) {
                    const float *va = dv + (size_t)(a * 6) * point + t * (size_t)nc + (size_t)c0;
#pragma omp simd
                    for (int c = 0; c < lanes; c++) hs_wino_input_1d_t(va + c, point, &rows[a][0][c], HS_WINO_LANES);
                }
                for (int j = 0; j < 6; j++) {
                    float *pj = patch + (size_t)j * (size_t)nc + (size_t)c0;
#pragma omp simd
                    for (int c = 0; c < lanes; c++) {
                        float o[6];
                        hs_wino_input_1d_t(&rows[0][j][c], 6 * HS_WINO_LANES, o, 1);
                        pj[c] += o[0];
                        pj[row + c] += o[1];
                        pj[2 * row + c] += o[2];
                        pj[3 * row + c] += o[3];
                        pj[4 * row + c] += o[4];
                        pj[5 * row + c] += o[5];
                    }
                }
            }
        }
}

/* yT[yh][yw][nk] = Aᵀ M A for every tile */
HS_WINO_CLONES
static void transform_outputs(float *restrict yt, const float *restrict m, const wino_layout *L, int nk) {
    const size_t T = (size_t)L->tiles, row = (size_t)L->yw * (size_t)nk, point = T * (size_t)nk;
    for (int ty = 0; ty < L->tiles_y; ty++)
        for (int tx = 0; tx < L->tiles_x; tx++) {
            const size_t t = (size_t)ty * (size_t)L->tiles_x + (size_t)tx;
            float *block = yt + (size_t)(4 * ty) * row + (size_t)(4 * tx) * (size_t)nk;
            for (int k0 = 0; k0 < nk; k0 += HS_WINO_LANES) {
                const int lanes = nk - k0 < HS_WINO_LANES ? nk - k0 : HS_WINO_LANES;
                float rows[6][4][HS_WINO_LANES]; /* M A: rows[a][j][k] */
                for (int a = 0; a < 6; a++) {
                    const float *ma = m + (size_t)(a * 6) * point + t * (size_t)nk + (size_t)k0;
#pragma omp simd
                    for (int k = 0; k < lanes; k++) hs_wino_output_1d(ma + k, point, &rows[a][0][k], HS_WINO_LANES);
                }
                for (int j = 0; j < 4; j++) {
                    float *bj = block + (size_t)j * (size_t)nk + (size_t)k0;
#pragma omp simd
                    for (int k = 0; k < lanes; k++) hs_wino_output_1d(&rows[0][j][k], 4 * HS_WINO_LANES, bj + k, row);
                }
            }
        }
}

/* M'[36][T][nk] = A dy Aᵀ for every 4×4 block of dyT[yh][yw][nk] */
HS_WINO_CLONES
static void transform_outputs_adjoint(float *restrict m, const float *restrict dyt, const wino_layout *L, int nk) {
    const size_t T = (size_t)L->tiles, row = (size_t)L->yw * (size_t)nk, point = T * (size_t)nk;
    for (int ty = 0; ty < L->tiles_y; ty++)
        for (int tx = 0; tx < L->tiles_x; tx++) {
            const size_t t = (size_t)ty * (size_t)L->tiles_x + (size_t)tx;
            const float *block = dyt + (size_t)(4 * ty) * row + (size_t)(4 * tx) * (size_t)nk;
            for (int k0 = 0; k0 < nk; k0 += HS_WINO_LANES) {
                const int lanes = nk - k0 < HS_WINO_LANES ? nk - k0 : HS_WINO_LANES;
                float cols[6][4][HS_WINO_LANES]; /* A dy: cols[a][j][k] */
                for (int j = 0; j < 4; j++) {
                    const float *bj = block + (size_t)j * (size_t)nk + (size_t)k0;
#pragma omp simd
                    for (int k = 0; k < lanes; k++) hs_wino_output_1d_t(bj + k, row, &cols[0][j][k], 4 * HS_WINO_LANES);
                }
                for (int a = 0; a < 6; a++) {
                    float *ma = m + (size_t)(a * 6) * point + t * (size_t)nk + (size_t)k0;
#pragma omp simd
                    for (int k = 0; k < lanes; k++) hs_wino_output_1d_t(&cols[a][0][k], HS_WINO_LANES, ma + k, point);
                }
            }
        }
}

/* ---- the three passes ---------------------------------------------------------------------------------- */

/* y[n,c_out,oh,ow] = conv(x[n,c_in,h,w], w[c_out,c_in,3,3]) + b[c_out] */
void hs_cpu_winograd_forward(const hs_conv2d_shape *s, float *y, const float *x, const float *w, const float *b,
                             void *workspace) {
    const wino_layout L = layout_of(s);
    float *u = (float *)workspace + (size_t)L.slots * L.slot; /* U[36][c_in][c_out] */
    float *ut = u + L.u;                                      /* Ut[36][c_out][c_in] */
    float *wt = ut + L.u;                                     /* wT[c_in·9][c_out] */
    const size_t T = (size_t)L.tiles, C = (size_t)s->c_in, K = (size_t)s->c_out;
    const size_t in_sample = C * (size_t)s->h * (size_t)s->w, out_sample = K * (size_t)s->oh * (size_t)s->ow;
#pragma omp parallel num_threads(hs_cpu_conv_threads(L.slots))
    {
        const wino_slot B = slot_of(workspace, &L, hs_cpu_conv_thread_num());
        if (L.ph > s->h || L.pw > s->w) memset(B.xt, 0, L.xt * sizeof *B.xt); /* zero border, never written */
        transform_filters(u, ut, wt, w, s, hs_cpu_conv_thread_num(), hs_cpu_conv_team_size());
#pragma omp barrier
#pragma omp for schedule(static)
        for (int n = 0; n < s->n; n++) {
            to_channels_last(B.xt, x + (size_t)n * in_sample, s->c_in, s->h, s->w, L.pw);
            transform_inputs(B.v, B.xt, &L, s->c_in);
            for (int xi = 0; xi < HS_WINO_POINTS; xi++) /* M_ξ[T,K] = V_ξ[T,C] · U_ξ[C,K] */
                hs_cpu_blas_sgemm(0, 0, (int)T, (int)K, (int)C, 1.0f, B.v + (size_t)xi * T * C, (int)C,
                                  u + (size_t)xi * C * K, (int)K, 0.0f, B.m + (size_t)xi * T * K, (int)K);
            transform_outputs(B.yt, B.m, &L, s->c_out);
            from_channels_last(y + (size_t)n * out_sample, B.yt, b, s->c_out, s->oh, s->ow, L.yw);
        }
    }
}

/* dw[c_out,c_in,3,3] += Σ_n x ⋆ dy, db[c_out] += Σ dy, dx[n,c_in,h,w] = dy ⋆ rot180(w) (dx may be NULL) */
void hs_cpu_winograd_backward(const hs_conv2d_shape *s, float *dx, float *dw, float *db, const float *dy,
                              const float *x, const float *w, void *workspace) {
    const wino_layout L = layout_of(s);
    float *u = (float *)workspace + (size_t)L.slots * L.slot; /* U[36][c_in][c_out] */
    float *ut = u + L.u;                                      /* Ut[36][c_out][c_in] */
    float *wt = ut + L.u;                                     /* wT[c_in·9][c_out] */
    float *partials = wt + L.wt;                              /* partials[groups]: dw[c][9][k], db[k] */
    const size_t T = (size_t)L.tiles, C = (size_t)s->c_in, K = (size_t)s->c_out;
    const size_t in_sample = C * (size_t)s->h * (size_t)s->w, out_sample = K * (size_t)s->oh * (size_t)s->ow;
    const size_t dw_len = C * 9 * K;
#pragma omp parallel num_threads(hs_cpu_conv_threads(L.slots))
    {
        const wino_slot B = slot_of(workspace, &L, hs_cpu_conv_thread_num());
        if (L.ph > s->h || L.pw > s->w) memset(B.xt, 0, L.xt * sizeof *B.xt);
        if (L.yh > s->oh || L.yw > s->ow) memset(B.yt, 0, L.yt * sizeof *B.yt);
        if (dx) {
            transform_filters(u, ut, wt, w, s, hs_cpu_conv_thread_num(), hs_cpu_conv_team_size());
#pragma omp barrier
        }
#pragma omp for schedule(static)
        for (int g = 0; g < L.groups; g++) {
            float *part_dw = partials + (size_t)g * L.part; /* [c_in][9][c_out] */
            float *part_db = part_dw + dw_len;              /* [c_out] */
            const int n_end = (g + 1) * HS_WINO_GROUP < s->n ? (g + 1) * HS_WINO_GROUP : s->n;
            for (int n = g * HS_WINO_GROUP; n < n_end; n++) {
                const int first = n == g * HS_WINO_GROUP;
                const float *dyn = dy + (size_t)n * out_sample; /* dy_n[c_out,oh,ow] */
                to_channels_last(B.xt, x + (size_t)n * in_sample, s->c_in, s->h, s->w, L.pw);
                transform_inputs(B.v, B.xt, &L, s->c_in);
                to_channels_last(B.yt, dyn, s->c_out, s->oh, s->ow, L.yw);
                channel_sums(part_db, B.yt, &L, s->c_out, s->oh, s->ow, first);
                transform_outputs_adjoint(B.m, B.yt, &L, s->c_out);
                for (int xi = 0; xi < HS_WINO_POINTS; xi++) /* dU_ξ[C,K] += V_ξ[T,C]ᵀ · M'_ξ[T,K] */
                    hs_cpu_blas_sgemm(1, 0, (int)C, (int)K, (int)T, 1.0f, B.v + (size_t)xi * T * C, (int)C,
                                      B.m + (size_t)xi * T * K, (int)K, first ? 0.0f : 1.0f, B.du + (size_t)xi * C * K,
                                      (int)K);
                if (dx) {
                    for (int xi = 0; xi < HS_WINO_POINTS; xi++) /* dV_ξ[T,C] = M'_ξ[T,K] · Ut_ξ[K,C] */
                        hs_cpu_blas_sgemm(0, 0, (int)T, (int)C, (int)K, 1.0f, B.m + (size_t)xi * T * K, (int)K,
                                          ut + (size_t)xi * C * K, (int)C, 0.0f, B.v + (size_t)xi * T * C, (int)C);
                    transform_inputs_adjoint(B.xt, B.v, &L, s->c_in); /* dxT in the xT buffer */
                    from_channels_last(dx + (size_t)n * in_sample, B.xt, NULL, s->c_in, s->h, s->w, L.pw);
                    if (L.ph > s->h || L.pw > s->w) memset(B.xt, 0, L.xt * sizeof *B.xt); /* border back to 0 */
                }
            }
            filter_grad_taps(part_dw, B.du, s);
        }
        /* dw, db += partials summed in group order (each element independently: parallel and fixed). */
#pragma omp for schedule(static)
        for (size_t e = 0; e < dw_len + K; e++) {
            double sum = 0.0;
            for (int g = 0; g < L.groups; g++) sum += (double)partials[(size_t)g * L.part + e];
            if (e < dw_len) { /* partial layout [c][i·3+j][k] -> dw[k][c][i][j] */
                const size_t c = e / (9 * K), tap = e / K % 9, k = e % K;
                dw[(k * C + c) * 9 + tap] += (float)sum;
            } else {
                db[e - dw_len] += (float)sum;
            }
        }
    }
}
