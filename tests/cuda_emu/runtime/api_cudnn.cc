// cuDNN 9 stand-in of the emulated CUDA device (tests only; tests/cuda_emu/): see include/cudnn.h.
// Follows NVIDIA's cuDNN 9 API reference (cudnn_graph, cudnn_ops and cudnn_cnn libraries):
//   - Tensors are 4-D NCHW float, filters K x C x R x S NCHW float, convolutions 2-D with one group and
//     float compute. CUDNN_CONVOLUTION flips the filter, CUDNN_CROSS_CORRELATION does not. The output size
//     is 1 + (in + 2 pad - ((filter - 1) dilation + 1)) / stride, as cudnnGetConvolution2dForwardOutputDim
//     documents.
//   - Math types (cudnnSetConvolutionMathType; CUDNN_DEFAULT_MATH when a descriptor is created): the
//     emulated device has compute capability 8.0, where every math type but CUDNN_FMA_MATH permits
//     TF32 tensor cores for float data, so the forward, backward-data and backward-filter computations
//     round their inputs to TF32 (tf32.h) unless the descriptor says CUDNN_FMA_MATH; products of TF32
//     values are exact in float, the sums stay float. The heuristics report the descriptor's math type.
//   - Every computation blends: out = alpha * result + beta * out, alpha and beta host floats read at
//     the call; beta == 0 does not read out (cuDNN's "Scaling Parameters": NaN there does not reach the
//     result).
//   - Each computation is one work item queued on the handle's stream (cudnnSetStream; the legacy
//     default stream until then); it runs when the host synchronises, in the order streams and events
//     allow. Sums run in a fixed order (forward: over c, r, s; backward data: over k, r, s; backward
//     filter and bias: over n, h, w), so the same call gives the same bits, except for the algorithms
//     cuDNN marks non-deterministic (BWD_DATA_ALGO_0, BWD_FILTER_ALGO_0), which sum over k or n in an
//     order drawn from the emulator's seed, so results that depend on them change in the last bits
//     between seeds, as run to run on a GPU.
//   - The heuristics (cudnnGetConvolution*Algorithm_v7) answer, best first:
//       forward:         IMPLICIT_GEMM (workspace 0, deterministic), GEMM (workspace C*R*S*OH*OW*4 bytes,
//                        deterministic), FFT (status CUDNN_STATUS_NOT_SUPPORTED);
//       backward data:   ALGO_1 (workspace 0, deterministic), ALGO_0 (workspace 0, non-deterministic),
//                        FFT (CUDNN_STATUS_NOT_SUPPORTED);
//       backward filter: ALGO_1 (workspace K*C*R*S*4 bytes, deterministic: the sums are made in the
//                        workspace, then blended into dw), ALGO_0 (workspace 0, non-deterministic), FFT
//                        (CUDNN_STATUS_NOT_SUPPORTED).
//     The other algorithms are CUDNN_STATUS_NOT_SUPPORTED. An algorithm with a workspace first fills it
//     with NaN bytes (FWD GEMM) or sums into it (BWD_FILTER_ALGO_1), so a workspace that overlaps live
//     data gives wrong numbers.
//   - Statuses: NULL arguments, descriptors never created or set, dimensions below 1, negative padding,
//     strides or dilations below 1, invalid enumerants, channel counts that do not match, a filter
//     larger than the padded input, a bias tensor that is not 1 x C x 1 x 1, and a workspace smaller
//     than the algorithm's (or NULL when it needs one) are CUDNN_STATUS_BAD_PARAM; an output whose
//     spatial size is not the forward output size is CUDNN_STATUS_NOT_SUPPORTED for
//     cudnnConvolutionForward and CUDNN_STATUS_BAD_PARAM for the backward calls, as their references
//     list; what cuDNN supports but this stand-in does not (other layouts and types, more than 2^31-1
//     elements) is CUDNN_STATUS_NOT_SUPPORTED; a handle whose stream was destroyed is
//     CUDNN_STATUS_EXECUTION_FAILED (the launch fails).
//   - A tensor, filter or workspace that is not inside one device allocation (or pinned host memory)
//     is reported and the process aborts: on a GPU the kernel would fault with an illegal address.
// Test equipment that should not dominate the test run: vectorise the convolution loops (their sums keep
// the fixed orders stated above; no reassociation flags).
#pragma GCC optimize("O3")

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <vector>
#if defined(__AVX__)
#include <immintrin.h>
#endif
#include "cudnn.h"
#include "memory.h"
#include "state.h"
#include "streams.h"
#include "tf32.h"

struct cudnnContext {
  cudaStream_t stream;
};
struct cudnnTensorStruct {
  int unused;
};
struct cudnnFilterStruct {
  int unused;
};
struct cudnnConvolutionStruct {
  int unused;
};

namespace {

using namespace hs_emu;

struct Tensor {
  bool set;
  int n, c, h, w;
};
struct Filter {
  bool set;
  int k, c, r, s;
};
struct Conv {
  bool set;
  int ph, pw, u, v, dh, dw;
  bool flip; // CUDNN_CONVOLUTION
  int math;  // cudnnMathType_t (cudnnSetConvolutionMathType), CUDNN_DEFAULT_MATH when created
};

// On compute capability 8.0 (the emulated device) every math type but CUDNN_FMA_MATH permits tensor
// cores for float data, i.e. TF32 (cuDNN's cudnnMathType_t: DEFAULT_MATH permits TF32 on Ampere; the
// TENSOR_OP types permit tensor cores). The stand-in then always rounds the convolution's inputs (x, w
// and dy) to TF32, the worst a GPU may do, so code that needs fp32 and forgot CUDNN_FMA_MATH is seen.
bool tf32_math(const Conv &cv) { return cv.math != CUDNN_FMA_MATH; }

struct Registry {
  std::map<const void *, cudnnContext *> handles;
  std::map<const void *, Tensor> tensors;
  std::map<const void *, Filter> filters;
  std::map<const void *, Conv> convs;
};

Registry &reg() {
  static Registry *r = new Registry; // never freed
  return *r;
}

#define DNN_ENTER std::lock_guard<std::recursive_mutex> hs_emu_lock(::hs_emu::device_mutex())

cudnnContext *handle_of(cudnnHandle_t h) {
  auto it = reg().handles.find(h);
  return it == reg().handles.end() ? nullptr : it->second;
}
const Tensor *tensor_of(cudnnTensorDescriptor_t t) {
  auto it = reg().tensors.find(t);
  return it == reg().tensors.end() || !it->second.set ? nullptr : &it->second;
}
const Filter *filter_of(cudnnFilterDescriptor_t f) {
  auto it = reg().filters.find(f);
  return it == reg().filters.end() || !it->second.set ? nullptr : &it->second;
}
const Conv *conv_of(cudnnConvolutionDescriptor_t c) {
  auto it = reg().convs.find(c);
  return it == reg().convs.end() || !it->second.set ? nullptr : &it->second;
}

bool known_type(int t) { return t >= CUDNN_DATA_FLOAT && t <= 21; }
bool known_format(int f) { return f >= CUDNN_TENSOR_NCHW && f <= CUDNN_TENSOR_NCHW_VECT_C; }

// Checks the 4-D shape arguments of a tensor or filter descriptor.
cudnnStatus_t check_4d(int format, int type, int a, int b, int c, int d) {
  if (!known_format(format) || !known_type(type) || a < 1 || b < 1 || c < 1 || d < 1) return CUDNN_STATUS_BAD_PARAM;
  if (format != CUDNN_TENSOR_NCHW || type != CUDNN_DATA_FLOAT) return CUDNN_STATUS_NOT_SUPPORTED;
  if (static_cast<int64_t>(a) * b * c * d > INT32_MAX) return CUDNN_STATUS_NOT_SUPPORTED;
  return CUDNN_STATUS_SUCCESS;
}

size_t elems(const Tensor &t) { return static_cast<size_t>(t.n) * t.c * t.h * t.w; }
size_t elems(const Filter &f) { return static_cast<size_t>(f.k) * f.c * f.r * f.s; }

// The geometry of one convolution, checked.
struct Geom {
  int n, c, h, w;  // input
  int k, r, s;     // filter
  int oh, ow;      // output
  Conv conv;
};

int out_dim(int in, int pad, int filter, int dil, int stride) {
  return 1 + (in + 2 * pad - ((filter - 1) * dil + 1)) / stride;
}

// x, w, conv -> the forward geometry (cudnnGetConvolution2dForwardOutputDim's checks)
cudnnStatus_t forward_geom(const Tensor *x, const Filter *f, const Conv *cv, Geom *g) {
  if (x == nullptr || f == nullptr || cv == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (x->c != f->c) return CUDNN_STATUS_BAD_PARAM; // input feature maps of x and w differ
  if (x->h + 2 * cv->ph < (f->r - 1) * cv->dh + 1 || x->w + 2 * cv->pw < (f->s - 1) * cv->dw + 1)
    return CUDNN_STATUS_BAD_PARAM; // the filter is larger than the padded input
  *g = Geom{x->n, x->c, x->h, x->w, f->k, f->r, f->s, out_dim(x->h, cv->ph, f->r, cv->dh, cv->u),
            out_dim(x->w, cv->pw, f->s, cv->dw, cv->v), *cv};
  return CUDNN_STATUS_SUCCESS;
}

// + the output tensor y (forward: spatial mismatch is NOT_SUPPORTED; backward: BAD_PARAM)
cudnnStatus_t full_geom(const Tensor *x, const Filter *f, const Conv *cv, const Tensor *y, bool forward, Geom *g) {
  const cudnnStatus_t st = forward_geom(x, f, cv, g);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  if (y == nullptr || y->n != g->n || y->c != g->k) return CUDNN_STATUS_BAD_PARAM;
  if (y->h != g->oh || y->w != g->ow) return forward ? CUDNN_STATUS_NOT_SUPPORTED : CUDNN_STATUS_BAD_PARAM;
  return CUDNN_STATUS_SUCCESS;
}

// ---- algorithms -----------------------------------------------------------------------------------
enum class Op { Fwd, BwdData, BwdFilter };

struct AlgoInfo {
  int algo;
  bool supported, deterministic;
};
const AlgoInfo kFwdAlgos[] = {{CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, true, true},
                              {CUDNN_CONVOLUTION_FWD_ALGO_GEMM, true, true},
                              {CUDNN_CONVOLUTION_FWD_ALGO_FFT, false, true}};
const AlgoInfo kBwdDataAlgos[] = {{CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, true, true},
                                  {CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, true, false},
                                  {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, false, true}};
const AlgoInfo kBwdFilterAlgos[] = {{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, true, true},
                                    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, true, false},
                                    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, false, true}};

bool algo_known(Op op, int algo) {
  const int count = op == Op::Fwd       ? static_cast<int>(CUDNN_CONVOLUTION_FWD_ALGO_COUNT)
                    : op == Op::BwdData ? static_cast<int>(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT)
                                        : static_cast<int>(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
  return algo >= 0 && algo < count;
}

bool algo_supported(Op op, int algo) {
  switch (op) {
  case Op::Fwd: return algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM || algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM;
  case Op::BwdData: return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  case Op::BwdFilter:
    return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 || algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
  }
  return false;
}

size_t workspace_bytes(Op op, int algo, const Geom &g) {
  if (op == Op::Fwd && algo == CUDNN_CONVOLUTION_FWD_ALGO_GEMM)
    return static_cast<size_t>(g.c) * g.r * g.s * g.oh * g.ow * sizeof(float); // im2col of one image
  if (op == Op::BwdFilter && algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1)
    return static_cast<size_t>(g.k) * g.c * g.r * g.s * sizeof(float); // the filter-gradient sums
  return 0;
}

template <typename Perf>
cudnnStatus_t answer_heuristic(Op op, const AlgoInfo *table, int table_len, const Geom &g, int requested,
                               int *returned, Perf *perf) {
  const int count = std::min(requested, table_len);
  for (int i = 0; i < count; i++) {
    Perf &p = perf[i];
    memset(&p, 0, sizeof p);
    p.algo = static_cast<decltype(p.algo)>(table[i].algo);
    p.status = table[i].supported ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_NOT_SUPPORTED;
    p.time = table[i].supported ? static_cast<float>(i + 1) : -1.0f;
    p.memory = table[i].supported ? workspace_bytes(op, table[i].algo, g) : 0;
    p.determinism = table[i].deterministic ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC;
    p.mathType = static_cast<cudnnMathType_t>(g.conv.math); // the descriptor's
  }
  *returned = count;
  return CUDNN_STATUS_SUCCESS;
}

// ---- checks at the call ---------------------------------------------------------------------------
void check_memory(const char *call, const char *what, const void *p, size_t bytes) {
  if (bytes == 0) return;
  const MemKind k = classify(p);
  if (k != MemKind::Pageable && range_valid(k, p, bytes)) return;
  fatal("%s: %s at %p (%zu bytes) is %s; on a GPU the kernel would fault with an illegal address", call, what, p,
        bytes, k == MemKind::Pageable ? "host memory, not device memory" : "not inside one live device allocation");
}

// The stream of the handle, or nullptr with *st set.
CUstream_st *stream_of(cudnnContext *h, cudnnStatus_t *st) {
  cudaError_t err;
  CUstream_st *s = resolve_stream(h->stream, &err);
  *st = s == nullptr ? CUDNN_STATUS_EXECUTION_FAILED : CUDNN_STATUS_SUCCESS;
  return s;
}

float host_scalar(const void *p) {
  float v;
  memcpy(&v, p, sizeof v);
  return v;
}

inline float blend(float alpha, float result, float beta, const float *out) {
  return beta == 0.0f ? alpha * result : alpha * result + beta * *out;
}

// a permutation of 0..n-1: identity, or drawn from the emulator's seed (non-deterministic algorithms)
std::vector<int> order(int n, bool shuffled) {
  std::vector<int> o(static_cast<size_t>(n));
  std::iota(o.begin(), o.end(), 0);
  if (shuffled)
    for (int i = n - 1; i > 0; i--) std::swap(o[static_cast<size_t>(i)], o[random_below(static_cast<uint64_t>(i) + 1)]);
  return o;
}

// ---- the computations (run as work items) ------------------------------------------------------------
// Each output element is summed in a fixed order (forward: c, r, s; backward data: k, r, s; backward
// filter: n, oh, then ow — in 8 lanes added in order when there is no padding and unit stride); the
// loops are arranged so that the inner ones run over independent elements.

// The outputs o in [*lo, *hi) of out for which o * stride - pad + off is inside [0, in).
void valid_range(int pad, int off, int stride, int in, int out, int *lo, int *hi) {
  const int a = pad - off, b = in - 1 + pad - off;
  *lo = a <= 0 ? 0 : (a + stride - 1) / stride;
  *hi = b < 0 ? 0 : std::min(out, b / stride + 1);
  if (*hi < *lo) *hi = *lo;
}

// ---- vectorised paths for the common geometry --------------------------------------------------------
// Without padding and with unit strides (what the tests' CNN runs), several independent outputs are
// computed side by side in AVX registers: 8 output (or input) channels x 8 columns for the forward and
// backward-data sums, 8 filter elements for the backward-filter sums. Each output still gets exactly the
// operations of the loops below in their order: a product (rounded), then added (rounded) to its sum.
// Other geometries, and hosts without AVX, take the loops below.
#if defined(__AVX__)
constexpr bool kVector = true;

constexpr int kBlock = 8; // channels per pass (forward, backward data)
inline __m256 mul_add(__m256 acc, __m256 a, __m256 b) { return _mm256_add_ps(acc, _mm256_mul_ps(a, b)); }

// forward, output channels k0..k0+kBlock-1 (kb of them real) of image n, into acc (kBlock planes of oh x ow):
// acc[(j, oh, ow)] = sum over c, r, s in that order of x[n, c, oh + r dh, ow + s dw] * w[k0 + j, c, r', s']
// wk: the block's filters packed as wk[((c * r + r') * s + s') * kBlock + j] = w[k0 + j, c, r', s'] (the
// channels past kb repeat the last one; their sums are not stored).
void forward_block(const Geom &g, const float *x, const float *wk, int n, int kb, float *acc) {
  const Conv &cv = g.conv;
  const size_t plane = static_cast<size_t>(g.oh) * g.ow;
  for (int oh = 0; oh < g.oh; oh++)
    for (int ow0 = 0; ow0 < g.ow; ow0 += 8) {
      const int ow = std::min(ow0, g.ow - 8); // the last block may overlap the one before: same values
      __m256 a[kBlock];
      for (int j = 0; j < kBlock; j++) a[j] = _mm256_setzero_ps();
      for (int c = 0; c < g.c; c++)
        for (int r = 0; r < g.r; r++) {
          const float *xrow = x + ((static_cast<size_t>(n) * g.c + c) * g.h + oh + r * cv.dh) * g.w + ow;
          const int fr = cv.flip ? g.r - 1 - r : r;
          for (int s = 0; s < g.s; s++) {
            const __m256 xv = _mm256_loadu_ps(xrow + s * cv.dw);
            const int fs = cv.flip ? g.s - 1 - s : s;
            const float *wp = wk + ((static_cast<size_t>(c) * g.r + fr) * g.s + fs) * kBlock;
            for (int j = 0; j < kBlock; j++) a[j] = mul_add(a[j], xv, _mm256_set1_ps(wp[j]));
          }
        }
      for (int j = 0; j < kb; j++) _mm256_storeu_ps(acc + j * plane + static_cast<size_t>(oh) * g.ow + ow, a[j]);
    }
}

// backward data, input channels c0..c0+kBlock-1 (cb real) of image n, into acc (kBlock planes of h x w):
// acc[(j, ih, iw)] = sum over k (in the order ks), r, s of dy[n, k, ih - r dh, iw - s dw] * w[k, c0 + j,
// r', s'], the terms whose dy position is inside dy only. dyp: image n's dy, rows padded by pad = (s - 1) dw
// zeros on both sides (row length ow + 2 pad), so every lane's load is inside the buffer; the lanes
// whose term does not exist keep their sum (blend), as the loops below skip them.
// wc: the block's filters packed as wc[((k * r + r') * s + s') * kBlock + j] = w[k, c0 + j, r', s'] (the
// channels past cb repeat the last one; their sums are not stored).
void backward_data_block(const Geom &g, const float *wc, const float *dyp, int pad, const std::vector<int> &ks, int cb,
                         float *acc) {
  const Conv &cv = g.conv;
  const size_t plane = static_cast<size_t>(g.h) * g.w;
  const int row = g.ow + 2 * pad;
  std::vector<float> mask(static_cast<size_t>(g.s) * 8); // per s, 8 lanes
  std::vector<char> full(static_cast<size_t>(g.s));
  for (int ih = 0; ih < g.h; ih++)
    for (int iw0 = 0; iw0 < g.w; iw0 += 8) {
      const int iw = std::min(iw0, g.w - 8); // the last block may overlap the one before: same values
      for (int s = 0; s < g.s; s++) { // lane t has a term for s when its dy column is inside dy
        float *m = mask.data() + static_cast<size_t>(s) * 8;
        bool all = true;
        for (int t = 0; t < 8; t++) {
          const int ow = iw + t - s * cv.dw;
          const bool in = ow >= 0 && ow < g.ow;
          m[t] = in ? -1.0f : 1.0f; // the sign bit selects (blendv)
          all = all && in;
        }
        full[static_cast<size_t>(s)] = all;
      }
      __m256 a[kBlock];
      for (int j = 0; j < kBlock; j++) a[j] = _mm256_setzero_ps();
      for (int k : ks)
        for (int r = 0; r < g.r; r++) {
          const int oh = ih - r * cv.dh;
          if (oh < 0 || oh >= g.oh) continue;
          const float *drow = dyp + (static_cast<size_t>(k) * g.oh + oh) * row + pad + iw;
          const int fr = cv.flip ? g.r - 1 - r : r;
          for (int s = 0; s < g.s; s++) {
            const __m256 dv = _mm256_loadu_ps(drow - s * cv.dw);
            const int fs = cv.flip ? g.s - 1 - s : s;
            const float *wp = wc + ((static_cast<size_t>(k) * g.r + fr) * g.s + fs) * kBlock;
            if (full[static_cast<size_t>(s)]) {
              for (int j = 0; j < kBlock; j++) a[j] = mul_add(a[j], dv, _mm256_set1_ps(wp[j]));
            } else {
              const __m256 ms = _mm256_loadu_ps(mask.data() + static_cast<size_t>(s) * 8);
              for (int j = 0; j < kBlock; j++)
                a[j] = _mm256_blendv_ps(a[j], mul_add(a[j], dv, _mm256_set1_ps(wp[j])), ms);
            }
          }
        }
      for (int j = 0; j < cb; j++) _mm256_storeu_ps(acc + j * plane + static_cast<size_t>(ih) * g.w + iw, a[j]);
    }
}

// 8 x 8 transpose: v[i][j] -> v[j][i]
void transpose8(__m256 v[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
  const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
  const __m256 t4 = _mm256_unpacklo_ps(v[4], v[5]), t5 = _mm256_unpackhi_ps(v[4], v[5]);
  const __m256 t6 = _mm256_unpacklo_ps(v[6], v[7]), t7 = _mm256_unpackhi_ps(v[6], v[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
  v[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  v[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  v[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  v[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  v[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  v[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  v[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  v[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// backward filter, one dy row (dyrow, ow long) against the x rows xs[0..8) (each read at [0, ow)) for 8
// filter elements at once: per element the 8-lane scheme of the loops below (lane j sums the products
// of the columns ow = j mod 8 of the whole blocks, the lanes then added in order to a row sum that
// starts at 0, then the tail's products one by one), the 8 row sums returned in out.
void filter_rows8(const float *dyrow, int ow, const float *const xs[8], float out[8]) {
  __m256 lane[8];
  const int full = ow / 8 * 8;
  for (int o = 0; o < 8; o++) lane[o] = _mm256_setzero_ps();
  for (int b = 0; b < full; b += 8) {
    const __m256 dv = _mm256_loadu_ps(dyrow + b);
    for (int o = 0; o < 8; o++) lane[o] = mul_add(lane[o], dv, _mm256_loadu_ps(xs[o] + b));
  }
  transpose8(lane); // lane[j]: lane j of the 8 elements
  __m256 row = _mm256_setzero_ps();
  for (int j = 0; j < 8; j++) row = _mm256_add_ps(row, lane[j]);
  for (int i = full; i < ow; i++) {
    const __m256 xv = _mm256_setr_ps(xs[0][i], xs[1][i], xs[2][i], xs[3][i], xs[4][i], xs[5][i], xs[6][i], xs[7][i]);
    row = mul_add(row, _mm256_set1_ps(dyrow[i]), xv);
  }
  _mm256_storeu_ps(out, row);
}
#else // never called: kVector sends every call to the loops below
constexpr bool kVector = false;
constexpr int kBlock = 8;
void forward_block(const Geom &, const float *, const float *, int, int, float *) {}
void backward_data_block(const Geom &, const float *, const float *, int, const std::vector<int> &, int, float *) {}
void filter_rows8(const float *, int, const float *const[8], float[8]) {}
#endif

void run_forward(const Geom &g, float alpha, const float *x, const float *w, float beta, float *y, void *ws,
                 size_t ws_bytes) {
  if (ws_bytes != 0) memset(ws, kFillByte, ws_bytes); // the GEMM algorithm's im2col buffer
  const Conv &cv = g.conv;
  const size_t plane = static_cast<size_t>(g.oh) * g.ow;
  if (kVector && cv.ph == 0 && cv.pw == 0 && cv.u == 1 && cv.v == 1 && g.ow >= 8) {
    const size_t per_k = static_cast<size_t>(g.c) * g.r * g.s;
    const int blocks = (g.k + kBlock - 1) / kBlock;
    std::vector<float> acc(kBlock * plane), wk(static_cast<size_t>(blocks) * per_k * kBlock);
    for (int b = 0; b < blocks; b++) // forward_block's packing
      for (size_t i = 0; i < per_k; i++)
        for (int j = 0; j < kBlock; j++)
          wk[(b * per_k + i) * kBlock + j] = w[static_cast<size_t>(std::min(b * kBlock + j, g.k - 1)) * per_k + i];
    for (int n = 0; n < g.n; n++)
      for (int k0 = 0; k0 < g.k; k0 += kBlock) {
        const int kb = std::min(kBlock, g.k - k0);
        forward_block(g, x, wk.data() + static_cast<size_t>(k0) * per_k, n, kb, acc.data());
        float *out = y + (static_cast<size_t>(n) * g.k + k0) * plane;
        for (size_t i = 0; i < kb * plane; i++) out[i] = blend(alpha, acc[i], beta, &out[i]);
      }
    return;
  }
  std::vector<float> acc(plane);
  for (int n = 0; n < g.n; n++)
    for (int k = 0; k < g.k; k++) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int c = 0; c < g.c; c++)
        for (int r = 0; r < g.r; r++) {
          int oh0, oh1;
          valid_range(cv.ph, r * cv.dh, cv.u, g.h, g.oh, &oh0, &oh1);
          const int fr = cv.flip ? g.r - 1 - r : r;
          for (int s = 0; s < g.s; s++) {
            int ow0, ow1;
            valid_range(cv.pw, s * cv.dw, cv.v, g.w, g.ow, &ow0, &ow1);
            const int fs = cv.flip ? g.s - 1 - s : s;
            const float wv = w[((static_cast<size_t>(k) * g.c + c) * g.r + fr) * g.s + fs];
            for (int oh = oh0; oh < oh1; oh++) {
              const int ih = oh * cv.u - cv.ph + r * cv.dh;
              const float *xrow = x + ((static_cast<size_t>(n) * g.c + c) * g.h + ih) * g.w;
              float *arow = acc.data() + static_cast<size_t>(oh) * g.ow;
              const int off = s * cv.dw - cv.pw;
              if (cv.v == 1) { // the common case, written so the compiler vectorises it
                float *__restrict a = arow;
                const float *__restrict xs = xrow + off;
                for (int ow = ow0; ow < ow1; ow++) a[ow] += xs[ow] * wv;
              } else {
                for (int ow = ow0; ow < ow1; ow++) arow[ow] += xrow[ow * cv.v + off] * wv;
              }
            }
          }
        }
      float *out = y + (static_cast<size_t>(n) * g.k + k) * g.oh * g.ow;
      for (size_t i = 0; i < acc.size(); i++) out[i] = blend(alpha, acc[i], beta, &out[i]);
    }
}

void run_backward_data(const Geom &g, float alpha, const float *w, const float *dy, float beta, float *dx,
                       bool shuffled) {
  const Conv &cv = g.conv;
  const std::vector<int> ks = order(g.k, shuffled);
  const size_t plane = static_cast<size_t>(g.h) * g.w;
  if (kVector && cv.ph == 0 && cv.pw == 0 && cv.u == 1 && cv.v == 1 && g.w >= 8) {
    const int pad = (g.s - 1) * cv.dw, row = g.ow + 2 * pad;
    const size_t per_c = static_cast<size_t>(g.r) * g.s, per_k = per_c * g.c;
    const int blocks = (g.c + kBlock - 1) / kBlock;
    std::vector<float> acc(kBlock * plane), dyp(static_cast<size_t>(g.k) * g.oh * row, 0.0f);
    std::vector<float> wc(static_cast<size_t>(blocks) * g.k * per_c * kBlock);
    for (int b = 0; b < blocks; b++) // backward_data_block's packing
      for (int k = 0; k < g.k; k++)
        for (size_t i = 0; i < per_c; i++)
          for (int j = 0; j < kBlock; j++)
            wc[((static_cast<size_t>(b) * g.k + k) * per_c + i) * kBlock + j] =
                w[k * per_k + static_cast<size_t>(std::min(b * kBlock + j, g.c - 1)) * per_c + i];
    for (int n = 0; n < g.n; n++) {
      for (int k = 0; k < g.k; k++) // image n's dy, each row between pad zeros
        for (int oh = 0; oh < g.oh; oh++)
          memcpy(dyp.data() + (static_cast<size_t>(k) * g.oh + oh) * row + pad,
                 dy + ((static_cast<size_t>(n) * g.k + k) * g.oh + oh) * g.ow, sizeof(float) * g.ow);
      for (int c0 = 0; c0 < g.c; c0 += kBlock) {
        const int cb = std::min(kBlock, g.c - c0);
        backward_data_block(g, wc.data() + static_cast<size_t>(c0) * g.k * per_c, dyp.data(), pad, ks, cb, acc.data());
        float *out = dx + (static_cast<size_t>(n) * g.c + c0) * plane;
        for (size_t i = 0; i < cb * plane; i++) out[i] = blend(alpha, acc[i], beta, &out[i]);
      }
    }
    return;
  }
  std::vector<float> acc(plane);
  for (int n = 0; n < g.n; n++)
    for (int c = 0; c < g.c; c++) {
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int k : ks)
        for (int r = 0; r < g.r; r++) {
          int oh0, oh1;
          valid_range(cv.ph, r * cv.dh, cv.u, g.h, g.oh, &oh0, &oh1);
          const int fr = cv.flip ? g.r - 1 - r : r;
          for (int s = 0; s < g.s; s++) {
            int ow0, ow1;
            valid_range(cv.pw, s * cv.dw, cv.v, g.w, g.ow, &ow0, &ow1);
            const int fs = cv.flip ? g.s - 1 - s : s;
            const float wv = w[((static_cast<size_t>(k) * g.c + c) * g.r + fr) * g.s + fs];
            for (int oh = oh0; oh < oh1; oh++) {
              const int ih = oh * cv.u - cv.ph + r * cv.dh;
              const float *dyrow = dy + ((static_cast<size_t>(n) * g.k + k) * g.oh + oh) * g.ow;
              float *arow = acc.data() + static_cast<size_t>(ih) * g.w;
              const int off = s * cv.dw - cv.pw;
              if (cv.v == 1) { // the common case, written so the compiler vectorises it
                float *__restrict a = arow + off;
                const float *__restrict d = dyrow;
                for (int ow = ow0; ow < ow1; ow++) a[ow] += d[ow] * wv;
              } else {
                for (int ow = ow0; ow < ow1; ow++) arow[ow * cv.v + off] += dyrow[ow] * wv;
              }
            }
          }
        }
      float *out = dx + (static_cast<size_t>(n) * g.c + c) * g.h * g.w;
      for (size_t i = 0; i < acc.size(); i++) out[i] = blend(alpha, acc[i], beta, &out[i]);
    }
}

void run_backward_filter(const Geom &g, float alpha, const float *x, const float *dy, float beta, float *dw,
                         float *ws, bool shuffled) {
  const Conv &cv = g.conv;
  const std::vector<int> ns = order(g.n, shuffled);
  const size_t per_k = static_cast<size_t>(g.c) * g.r * g.s, count = per_k * g.k;
  std::vector<float> local(ws == nullptr ? count : 0);
  float *sums = ws != nullptr ? ws : local.data(); // ALGO_1 sums in the workspace
  std::vector<int> s_lo(static_cast<size_t>(g.ow)), s_hi(static_cast<size_t>(g.ow)), rs;
  for (int ow = 0; ow < g.ow; ow++) { // filter columns s whose input column is inside the image
    int lo = g.s, hi = 0;
    for (int s = 0; s < g.s; s++) {
      const int iw = ow * cv.v - cv.pw + s * cv.dw;
      if (iw >= 0 && iw < g.w) lo = std::min(lo, s), hi = s + 1;
    }
    s_lo[static_cast<size_t>(ow)] = lo;
    s_hi[static_cast<size_t>(ow)] = std::max(lo, hi);
  }
  std::vector<float> acc(per_k);
  // the vectorised 8-lane scheme: per output row oh, the filter elements (c, r, s) whose input row is
  // inside the image, each with its x row's offset from image n's row oh * u - ph
  const bool fast = kVector && cv.v == 1 && cv.pw == 0;
  struct Item {
    size_t at;    // in acc
    int64_t x;    // x row (c, oh * u - ph + r * dh), column s * dw, from that of (0, oh * u - ph)
  };
  std::vector<std::vector<Item>> row_items(fast ? static_cast<size_t>(g.oh) : 0);
  for (size_t oh = 0; oh < row_items.size(); oh++)
    for (int c = 0; c < g.c; c++)
      for (int r = 0; r < g.r; r++) {
        const int ih = static_cast<int>(oh) * cv.u - cv.ph + r * cv.dh;
        if (ih < 0 || ih >= g.h) continue;
        for (int s = 0; s < g.s; s++)
          row_items[oh].push_back(Item{(static_cast<size_t>(c) * g.r + r) * g.s + s,
                                       (static_cast<int64_t>(c) * g.h + r * cv.dh) * g.w + s * cv.dw});
      }
  for (int k = 0; k < g.k; k++) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int n : ns)
      for (int oh = 0; oh < g.oh; oh++) {
        rs.clear(); // filter rows r whose input row is inside the image
        for (int r = 0; r < g.r; r++) {
          const int ih = oh * cv.u - cv.ph + r * cv.dh;
          if (ih >= 0 && ih < g.h) rs.push_back(r);
        }
        const float *dyrow = dy + ((static_cast<size_t>(n) * g.k + k) * g.oh + oh) * g.ow;
        if (fast) { // the 8-lane scheme below, for 8 filter elements at once
          const std::vector<Item> &items = row_items[static_cast<size_t>(oh)];
          const int64_t base = (static_cast<int64_t>(n) * g.c * g.h + oh * cv.u - cv.ph) * g.w;
          for (size_t i0 = 0; i0 < items.size(); i0 += 8) {
            const size_t m = std::min<size_t>(8, items.size() - i0);
            const float *xs[8];
            for (size_t o = 0; o < 8; o++) xs[o] = x + (base + items[i0 + std::min(o, m - 1)].x); // past m: dropped
            float row[8];
            filter_rows8(dyrow, g.ow, xs, row);
            for (size_t o = 0; o < m; o++) acc[items[i0 + o].at] += row[o];
          }
          continue;
        }
        for (int c = 0; c < g.c; c++) {
          const float *xplane = x + (static_cast<size_t>(n) * g.c + c) * g.h * g.w;
          float *ac = acc.data() + static_cast<size_t>(c) * g.r * g.s;
          for (int r : rs) {
            const float *xrow = xplane + static_cast<size_t>(oh * cv.u - cv.ph + r * cv.dh) * g.w;
            float *ar = ac + static_cast<size_t>(r) * g.s;
            if (cv.v == 1 && cv.pw == 0) { // no padding, unit stride: every ow is inside the image
              // per filter column s, the row's products in 8 lanes (ow mod 8), the lanes then added
              // in order: a fixed order, and one the compiler vectorises
              for (int s = 0; s < g.s; s++) {
                const float *__restrict xs = xrow + s * cv.dw;
                float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                int ow = 0;
                for (; ow + 8 <= g.ow; ow += 8)
                  for (int j = 0; j < 8; j++) lane[j] += dyrow[ow + j] * xs[ow + j];
                float row = 0.0f;
                for (int j = 0; j < 8; j++) row += lane[j];
                for (; ow < g.ow; ow++) row += dyrow[ow] * xs[ow];
                ar[s] += row;
              }
            } else {
              for (int ow = 0; ow < g.ow; ow++) {
                const float gv = dyrow[ow];
                const float *xp = xrow + ow * cv.v - cv.pw;
                for (int s = s_lo[static_cast<size_t>(ow)], s1 = s_hi[static_cast<size_t>(ow)]; s < s1; s++)
                  ar[s] += gv * xp[s * cv.dw];
              }
            }
          }
        }
      }
    for (int c = 0; c < g.c; c++)
      for (int r = 0; r < g.r; r++)
        for (int s = 0; s < g.s; s++) {
          const int fr = cv.flip ? g.r - 1 - r : r, fs = cv.flip ? g.s - 1 - s : s;
          sums[static_cast<size_t>(k) * per_k + (static_cast<size_t>(c) * g.r + fr) * g.s + fs] =
              acc[(static_cast<size_t>(c) * g.r + r) * g.s + s];
        }
  }
  for (size_t i = 0; i < count; i++) dw[i] = blend(alpha, sums[i], beta, &dw[i]);
}

} // namespace

// ---- handle and errors ------------------------------------------------------------------------------

extern "C" size_t cudnnGetVersion(void) { return CUDNN_VERSION; }

extern "C" const char *cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
  case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
  case CUDNN_STATUS_NOT_INITIALIZED: return "CUDNN_STATUS_NOT_INITIALIZED";
  case CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH: return "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH";
  case CUDNN_STATUS_DEPRECATED: return "CUDNN_STATUS_DEPRECATED";
  case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
  case CUDNN_STATUS_BAD_PARAM_NULL_POINTER: return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
  case CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER: return "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER";
  case CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND: return "CUDNN_STATUS_BAD_PARAM_OUT_OF_BOUND";
  case CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT: return "CUDNN_STATUS_BAD_PARAM_SIZE_INSUFFICIENT";
  case CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_STREAM_MISMATCH";
  case CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH: return "CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH";
  case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
  case CUDNN_STATUS_NOT_SUPPORTED_SHAPE: return "CUDNN_STATUS_NOT_SUPPORTED_SHAPE";
  case CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE: return "CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE";
  case CUDNN_STATUS_NOT_SUPPORTED_LAYOUT: return "CUDNN_STATUS_NOT_SUPPORTED_LAYOUT";
  case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
  case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
  }
  return "CUDNN_UNKNOWN_STATUS_FOUND";
}

extern "C" cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
  DNN_ENTER;
  if (handle == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (config().devices == 0) return CUDNN_STATUS_NOT_INITIALIZED; // no CUDA device
  cudnnContext *h = new cudnnContext{nullptr};
  reg().handles[h] = h;
  *handle = h;
  return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  DNN_ENTER;
  cudnnContext *h = handle_of(handle);
  if (h == nullptr) return CUDNN_STATUS_BAD_PARAM;
  reg().handles.erase(handle); // queued work does not use the handle
  delete h;
  return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t streamId) {
  DNN_ENTER;
  cudnnContext *h = handle_of(handle);
  if (h == nullptr) return CUDNN_STATUS_BAD_PARAM;
  cudaError_t err;
  if (resolve_stream(streamId, &err) == nullptr) return CUDNN_STATUS_BAD_PARAM;
  h->stream = streamId;
  return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnGetStream(cudnnHandle_t handle, cudaStream_t *streamId) {
  DNN_ENTER;
  cudnnContext *h = handle_of(handle);
  if (h == nullptr || streamId == nullptr) return CUDNN_STATUS_BAD_PARAM;
  *streamId = h->stream;
  return CUDNN_STATUS_SUCCESS;
}

// ---- descriptors ------------------------------------------------------------------------------------

extern "C" cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *tensorDesc) {
  DNN_ENTER;
  if (tensorDesc == nullptr) return CUDNN_STATUS_BAD_PARAM;
  cudnnTensorDescriptor_t t = new cudnnTensorStruct{0};
  reg().tensors[t] = Tensor{false, 0, 0, 0, 0};
  *tensorDesc = t;
  return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t tensorDesc, cudnnTensorFormat_t format,
                                                    cudnnDataType_t dataType, int n, int c, int h, int w) {
  DNN_ENTER;
  auto it = reg().tensors.find(tensorDesc);
  if (it == reg().tensors.end()) return CUDNN_STATUS_BAD_PARAM;
  const cudnnStatus_t st = check_4d(format, dataType, n, c, h, w);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  it->second = Tensor{true, n, c, h, w};
  return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t tensorDesc) {
  DNN_ENTER;
  if (tensorDesc == nullptr) return CUDNN_STATUS_SUCCESS;
  if (reg().tensors.erase(tensorDesc) == 0) return CUDNN_STATUS_BAD_PARAM;
  delete tensorDesc;
  return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *filterDesc) {
  DNN_ENTER;
  if (filterDesc == nullptr) return CUDNN_STATUS_BAD_PARAM;
  cudnnFilterDescriptor_t f = new cudnnFilterStruct{0};
  reg().filters[f] = Filter{false, 0, 0, 0, 0};
  *filterDesc = f;
  return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t filterDesc, cudnnDataType_t dataType,
                                                    cudnnTensorFormat_t format, int k, int c, int h, int w) {
  DNN_ENTER;
  auto it = reg().filters.find(filterDesc);
  if (it == reg().filters.end()) return CUDNN_STATUS_BAD_PARAM;
  const cudnnStatus_t st = check_4d(format, dataType, k, c, h, w);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  it->second = Filter{true, k, c, h, w};
  return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t filterDesc) {
  DNN_ENTER;
  if (filterDesc == nullptr) return CUDNN_STATUS_SUCCESS;
  if (reg().filters.erase(filterDesc) == 0) return CUDNN_STATUS_BAD_PARAM;
  delete filterDesc;
  return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *convDesc) {
  DNN_ENTER;
  if (convDesc == nullptr) return CUDNN_STATUS_BAD_PARAM;
  cudnnConvolutionDescriptor_t c = new cudnnConvolutionStruct{0};
  reg().convs[c] = Conv{false, 0, 0, 1, 1, 1, 1, false, CUDNN_DEFAULT_MATH};
  *convDesc = c;
  return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t convDesc) {
  DNN_ENTER;
  if (convDesc == nullptr) return CUDNN_STATUS_SUCCESS;
  if (reg().convs.erase(convDesc) == 0) return CUDNN_STATUS_BAD_PARAM;
  delete convDesc;
  return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t convDesc, int pad_h, int pad_w,
                                                         int u, int v, int dilation_h, int dilation_w,
                                                         cudnnConvolutionMode_t mode, cudnnDataType_t computeType) {
  DNN_ENTER;
  auto it = reg().convs.find(convDesc);
  if (it == reg().convs.end()) return CUDNN_STATUS_BAD_PARAM;
  if (pad_h < 0 || pad_w < 0 || u < 1 || v < 1 || dilation_h < 1 || dilation_w < 1 ||
      (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION) || !known_type(computeType))
    return CUDNN_STATUS_BAD_PARAM;
  if (computeType != CUDNN_DATA_FLOAT) return CUDNN_STATUS_NOT_SUPPORTED;
  it->second = Conv{true, pad_h, pad_w, u, v, dilation_h, dilation_w, mode == CUDNN_CONVOLUTION, it->second.math};
  return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t mathType) {
  DNN_ENTER;
  auto it = reg().convs.find(convDesc);
  if (it == reg().convs.end() || mathType < CUDNN_DEFAULT_MATH || mathType > CUDNN_FMA_MATH)
    return CUDNN_STATUS_BAD_PARAM;
  it->second.math = mathType;
  return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnGetConvolutionMathType(cudnnConvolutionDescriptor_t convDesc, cudnnMathType_t *mathType) {
  DNN_ENTER;
  auto it = reg().convs.find(convDesc);
  if (it == reg().convs.end() || mathType == nullptr) return CUDNN_STATUS_BAD_PARAM;
  *mathType = static_cast<cudnnMathType_t>(it->second.math);
  return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t convDesc,
                                                               const cudnnTensorDescriptor_t inputTensorDesc,
                                                               const cudnnFilterDescriptor_t filterDesc, int *n,
                                                               int *c, int *h, int *w) {
  DNN_ENTER;
  if (n == nullptr || c == nullptr || h == nullptr || w == nullptr) return CUDNN_STATUS_BAD_PARAM;
  Geom g;
  const cudnnStatus_t st = forward_geom(tensor_of(inputTensorDesc), filter_of(filterDesc), conv_of(convDesc), &g);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  *n = g.n;
  *c = g.k;
  *h = g.oh;
  *w = g.ow;
  return CUDNN_STATUS_SUCCESS;
}

// ---- heuristics and workspace sizes -----------------------------------------------------------------

extern "C" cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc,
                                                                const cudnnFilterDescriptor_t filterDesc,
                                                                const cudnnConvolutionDescriptor_t convDesc,
                                                                const cudnnTensorDescriptor_t destDesc,
                                                                const int requestedAlgoCount, int *returnedAlgoCount,
                                                                cudnnConvolutionFwdAlgoPerf_t *perfResults) {
  DNN_ENTER;
  if (handle_of(handle) == nullptr || returnedAlgoCount == nullptr || perfResults == nullptr || requestedAlgoCount < 1)
    return CUDNN_STATUS_BAD_PARAM;
  Geom g;
  const cudnnStatus_t st =
      full_geom(tensor_of(srcDesc), filter_of(filterDesc), conv_of(convDesc), tensor_of(destDesc), true, &g);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  return answer_heuristic(Op::Fwd, kFwdAlgos, 3, g, requestedAlgoCount, returnedAlgoCount, perfResults);
}

extern "C" cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t handle,
                                                                     const cudnnFilterDescriptor_t filterDesc,
                                                                     const cudnnTensorDescriptor_t diffDesc,
                                                                     const cudnnConvolutionDescriptor_t convDesc,
                                                                     const cudnnTensorDescriptor_t gradDesc,
                                                                     const int requestedAlgoCount,
                                                                     int *returnedAlgoCount,
                                                                     cudnnConvolutionBwdDataAlgoPerf_t *perfResults) {
  DNN_ENTER;
  if (handle_of(handle) == nullptr || returnedAlgoCount == nullptr || perfResults == nullptr || requestedAlgoCount < 1)
    return CUDNN_STATUS_BAD_PARAM;
  Geom g;
  const cudnnStatus_t st =
      full_geom(tensor_of(gradDesc), filter_of(filterDesc), conv_of(convDesc), tensor_of(diffDesc), false, &g);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  return answer_heuristic(Op::BwdData, kBwdDataAlgos, 3, g, requestedAlgoCount, returnedAlgoCount, perfResults);
}

extern "C" cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t srcDesc, const cudnnTensorDescriptor_t diffDesc,
    const cudnnConvolutionDescriptor_t convDesc, const cudnnFilterDescriptor_t gradDesc, const int requestedAlgoCount,
    int *returnedAlgoCount, cudnnConvolutionBwdFilterAlgoPerf_t *perfResults) {
  DNN_ENTER;
  if (handle_of(handle) == nullptr || returnedAlgoCount == nullptr || perfResults == nullptr || requestedAlgoCount < 1)
    return CUDNN_STATUS_BAD_PARAM;
  Geom g;
  const cudnnStatus_t st =
      full_geom(tensor_of(srcDesc), filter_of(gradDesc), conv_of(convDesc), tensor_of(diffDesc), false, &g);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  return answer_heuristic(Op::BwdFilter, kBwdFilterAlgos, 3, g, requestedAlgoCount, returnedAlgoCount, perfResults);
}

namespace {
cudnnStatus_t workspace_size(Op op, cudnnHandle_t handle, const Tensor *x, const Filter *f, const Conv *cv,
                             const Tensor *y, int algo, size_t *sizeInBytes) {
  if (handle_of(handle) == nullptr || sizeInBytes == nullptr || !algo_known(op, algo)) return CUDNN_STATUS_BAD_PARAM;
  Geom g;
  const cudnnStatus_t st = full_geom(x, f, cv, y, op == Op::Fwd, &g);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  if (!algo_supported(op, algo)) return CUDNN_STATUS_NOT_SUPPORTED;
  *sizeInBytes = workspace_bytes(op, algo, g);
  return CUDNN_STATUS_SUCCESS;
}
} // namespace

extern "C" cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t handle, const cudnnTensorDescriptor_t xDesc,
                                                                 const cudnnFilterDescriptor_t wDesc,
                                                                 const cudnnConvolutionDescriptor_t convDesc,
                                                                 const cudnnTensorDescriptor_t yDesc,
                                                                 cudnnConvolutionFwdAlgo_t algo, size_t *sizeInBytes) {
  DNN_ENTER;
  return workspace_size(Op::Fwd, handle, tensor_of(xDesc), filter_of(wDesc), conv_of(convDesc), tensor_of(yDesc), algo,
                        sizeInBytes);
}

extern "C" cudnnStatus_t cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t handle,
                                                                      const cudnnFilterDescriptor_t wDesc,
                                                                      const cudnnTensorDescriptor_t dyDesc,
                                                                      const cudnnConvolutionDescriptor_t convDesc,
                                                                      const cudnnTensorDescriptor_t dxDesc,
                                                                      cudnnConvolutionBwdDataAlgo_t algo,
                                                                      size_t *sizeInBytes) {
  DNN_ENTER;
  return workspace_size(Op::BwdData, handle, tensor_of(dxDesc), filter_of(wDesc), conv_of(convDesc), tensor_of(dyDesc),
                        algo, sizeInBytes);
}

extern "C" cudnnStatus_t cudnnGetConvolutionBackwardFilterWorkspaceSize(cudnnHandle_t handle,
                                                                        const cudnnTensorDescriptor_t xDesc,
                                                                        const cudnnTensorDescriptor_t dyDesc,
                                                                        const cudnnConvolutionDescriptor_t convDesc,
                                                                        const cudnnFilterDescriptor_t gradDesc,
                                                                        cudnnConvolutionBwdFilterAlgo_t algo,
                                                                        size_t *sizeInBytes) {
  DNN_ENTER;
  return workspace_size(Op::BwdFilter, handle, tensor_of(xDesc), filter_of(gradDesc), conv_of(convDesc),
                        tensor_of(dyDesc), algo, sizeInBytes);
}

// ---- convolutions ----------------------------------------------------------------------------------

namespace {
// The checks every convolution makes at the call; on success *s, *g and *ws_bytes are set.
cudnnStatus_t prepare(Op op, const char *call, cudnnHandle_t handle, const void *alpha, const void *beta,
                      const Tensor *x, const Filter *f, const Conv *cv, const Tensor *y, const void *p_in1,
                      const void *p_in2, const void *p_out, int algo, const void *ws, size_t ws_given,
                      CUstream_st **s, Geom *g, size_t *ws_bytes) {
  cudnnContext *h = handle_of(handle);
  if (h == nullptr || alpha == nullptr || beta == nullptr || p_in1 == nullptr || p_in2 == nullptr || p_out == nullptr)
    return CUDNN_STATUS_BAD_PARAM;
  cudnnStatus_t st = full_geom(x, f, cv, y, op == Op::Fwd, g);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  if (!algo_known(op, algo)) return CUDNN_STATUS_BAD_PARAM;
  if (!algo_supported(op, algo)) return CUDNN_STATUS_NOT_SUPPORTED;
  *ws_bytes = workspace_bytes(op, algo, *g);
  if (ws_given < *ws_bytes || (*ws_bytes != 0 && ws == nullptr)) return CUDNN_STATUS_BAD_PARAM; // too little workspace
  *s = stream_of(h, &st);
  if (*s == nullptr) return st;
  check_memory(call, "the workspace", ws, *ws_bytes);
  return CUDNN_STATUS_SUCCESS;
}

size_t elems_x(const Geom &g) { return static_cast<size_t>(g.n) * g.c * g.h * g.w; }
size_t elems_w(const Geom &g) { return static_cast<size_t>(g.k) * g.c * g.r * g.s; }
size_t elems_y(const Geom &g) { return static_cast<size_t>(g.n) * g.k * g.oh * g.ow; }

std::string conv_label(const char *call, const Geom &g) {
  char label[192];
  snprintf(label, sizeof label, "%s x %dx%dx%dx%d w %dx%dx%dx%d pad %d,%d stride %d,%d dilation %d,%d", call, g.n, g.c,
           g.h, g.w, g.k, g.c, g.r, g.s, g.conv.ph, g.conv.pw, g.conv.u, g.conv.v, g.conv.dh, g.conv.dw);
  return label;
}
} // namespace

extern "C" cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                                 const cudnnTensorDescriptor_t xDesc, const void *x,
                                                 const cudnnFilterDescriptor_t wDesc, const void *w,
                                                 const cudnnConvolutionDescriptor_t convDesc,
                                                 cudnnConvolutionFwdAlgo_t algo, void *workSpace,
                                                 size_t workSpaceSizeInBytes, const void *beta,
                                                 const cudnnTensorDescriptor_t yDesc, void *y) {
  DNN_ENTER;
  const char *call = "cudnnConvolutionForward";
  CUstream_st *s;
  Geom g;
  size_t ws_bytes;
  const Tensor *xt = tensor_of(xDesc), *yt = tensor_of(yDesc);
  const Filter *ft = filter_of(wDesc);
  const cudnnStatus_t st = prepare(Op::Fwd, call, handle, alpha, beta, xt, ft, conv_of(convDesc), yt, x, w, y, algo,
                                   workSpace, workSpaceSizeInBytes, &s, &g, &ws_bytes);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  check_memory(call, "x", x, elems(*xt) * sizeof(float));
  check_memory(call, "w", w, elems(*ft) * sizeof(float));
  check_memory(call, "y", y, elems(*yt) * sizeof(float));
  const float a = host_scalar(alpha), b = host_scalar(beta);
  const float *xp = static_cast<const float *>(x), *wp = static_cast<const float *>(w);
  float *yp = static_cast<float *>(y);
  enqueue(s, conv_label(call, g), [g, a, xp, wp, b, yp, workSpace, ws_bytes] {
    std::vector<float> xr, wr;
    const bool t = tf32_math(g.conv);
    run_forward(g, a, t ? tf32_copy(xp, elems_x(g), xr) : xp, t ? tf32_copy(wp, elems_w(g), wr) : wp, b, yp,
                workSpace, ws_bytes);
  });
  return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void *alpha,
                                                      const cudnnFilterDescriptor_t wDesc, const void *w,
                                                      const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                                      const cudnnConvolutionDescriptor_t convDesc,
                                                      cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
                                                      size_t workSpaceSizeInBytes, const void *beta,
                                                      const cudnnTensorDescriptor_t dxDesc, void *dx) {
  DNN_ENTER;
  const char *call = "cudnnConvolutionBackwardData";
  CUstream_st *s;
  Geom g;
  size_t ws_bytes;
  const Tensor *dxt = tensor_of(dxDesc), *dyt = tensor_of(dyDesc);
  const Filter *ft = filter_of(wDesc);
  const cudnnStatus_t st = prepare(Op::BwdData, call, handle, alpha, beta, dxt, ft, conv_of(convDesc), dyt, w, dy, dx,
                                   algo, workSpace, workSpaceSizeInBytes, &s, &g, &ws_bytes);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  check_memory(call, "w", w, elems(*ft) * sizeof(float));
  check_memory(call, "dy", dy, elems(*dyt) * sizeof(float));
  check_memory(call, "dx", dx, elems(*dxt) * sizeof(float));
  const float a = host_scalar(alpha), b = host_scalar(beta);
  const float *wp = static_cast<const float *>(w), *dyp = static_cast<const float *>(dy);
  float *dxp = static_cast<float *>(dx);
  const bool shuffled = algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
  enqueue(s, conv_label(call, g), [g, a, wp, dyp, b, dxp, shuffled] {
    std::vector<float> wr, dyr;
    const bool t = tf32_math(g.conv);
    run_backward_data(g, a, t ? tf32_copy(wp, elems_w(g), wr) : wp, t ? tf32_copy(dyp, elems_y(g), dyr) : dyp, b,
                      dxp, shuffled);
  });
  return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void *alpha,
                                                        const cudnnTensorDescriptor_t xDesc, const void *x,
                                                        const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                                        const cudnnConvolutionDescriptor_t convDesc,
                                                        cudnnConvolutionBwdFilterAlgo_t algo, void *workSpace,
                                                        size_t workSpaceSizeInBytes, const void *beta,
                                                        const cudnnFilterDescriptor_t dwDesc, void *dw) {
  DNN_ENTER;
  const char *call = "cudnnConvolutionBackwardFilter";
  CUstream_st *s;
  Geom g;
  size_t ws_bytes;
  const Tensor *xt = tensor_of(xDesc), *dyt = tensor_of(dyDesc);
  const Filter *ft = filter_of(dwDesc);
  const cudnnStatus_t st = prepare(Op::BwdFilter, call, handle, alpha, beta, xt, ft, conv_of(convDesc), dyt, x, dy, dw,
                                   algo, workSpace, workSpaceSizeInBytes, &s, &g, &ws_bytes);
  if (st != CUDNN_STATUS_SUCCESS) return st;
  check_memory(call, "x", x, elems(*xt) * sizeof(float));
  check_memory(call, "dy", dy, elems(*dyt) * sizeof(float));
  check_memory(call, "dw", dw, elems(*ft) * sizeof(float));
  const float a = host_scalar(alpha), b = host_scalar(beta);
  const float *xp = static_cast<const float *>(x), *dyp = static_cast<const float *>(dy);
  float *dwp = static_cast<float *>(dw);
  float *ws = ws_bytes != 0 ? static_cast<float *>(workSpace) : nullptr;
  const bool shuffled = algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
  enqueue(s, conv_label(call, g), [g, a, xp, dyp, b, dwp, ws, shuffled] {
    std::vector<float> xr, dyr;
    const bool t = tf32_math(g.conv);
    run_backward_filter(g, a, t ? tf32_copy(xp, elems_x(g), xr) : xp, t ? tf32_copy(dyp, elems_y(g), dyr) : dyp, b,
                        dwp, ws, shuffled);
  });
  return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnConvolutionBackwardBias(cudnnHandle_t handle, const void *alpha,
                                                      const cudnnTensorDescriptor_t dyDesc, const void *dy,
                                                      const void *beta, const cudnnTensorDescriptor_t dbDesc, void *db) {
  DNN_ENTER;
  const char *call = "cudnnConvolutionBackwardBias";
  cudnnContext *h = handle_of(handle);
  const Tensor *dyt = tensor_of(dyDesc), *dbt = tensor_of(dbDesc);
  if (h == nullptr || alpha == nullptr || beta == nullptr || dy == nullptr || db == nullptr || dyt == nullptr ||
      dbt == nullptr)
    return CUDNN_STATUS_BAD_PARAM;
  if (dbt->n != 1 || dbt->h != 1 || dbt->w != 1 || dbt->c != dyt->c) return CUDNN_STATUS_BAD_PARAM;
  cudnnStatus_t st;
  CUstream_st *s = stream_of(h, &st);
  if (s == nullptr) return st;
  check_memory(call, "dy", dy, elems(*dyt) * sizeof(float));
  check_memory(call, "db", db, elems(*dbt) * sizeof(float));
  const float a = host_scalar(alpha), b = host_scalar(beta);
  const Tensor t = *dyt;
  const float *dyp = static_cast<const float *>(dy);
  float *dbp = static_cast<float *>(db);
  char label[96];
  snprintf(label, sizeof label, "%s dy %dx%dx%dx%d", call, t.n, t.c, t.h, t.w);
  enqueue(s, label, [t, a, dyp, b, dbp] {
    const size_t plane = static_cast<size_t>(t.h) * t.w;
    for (int c = 0; c < t.c; c++) {
      float acc = 0.0f;
      for (int n = 0; n < t.n; n++) {
        const float *p = dyp + (static_cast<size_t>(n) * t.c + c) * plane;
        for (size_t i = 0; i < plane; i++) acc += p[i];
      }
      dbp[c] = blend(a, acc, b, &dbp[c]);
    }
  });
  return CUDNN_STATUS_SUCCESS;
}

extern "C" cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t aDesc,
                                        const void *A, const void *beta, const cudnnTensorDescriptor_t cDesc, void *C) {
  DNN_ENTER;
  const char *call = "cudnnAddTensor";
  cudnnContext *h = handle_of(handle);
  const Tensor *at = tensor_of(aDesc), *ct = tensor_of(cDesc);
  if (h == nullptr || alpha == nullptr || beta == nullptr || A == nullptr || C == nullptr || at == nullptr ||
      ct == nullptr)
    return CUDNN_STATUS_BAD_PARAM;
  // each dimension of A is C's or 1 (broadcast)
  if ((at->n != ct->n && at->n != 1) || (at->c != ct->c && at->c != 1) || (at->h != ct->h && at->h != 1) ||
      (at->w != ct->w && at->w != 1))
    return CUDNN_STATUS_BAD_PARAM;
  cudnnStatus_t st;
  CUstream_st *s = stream_of(h, &st);
  if (s == nullptr) return st;
  check_memory(call, "A", A, elems(*at) * sizeof(float));
  check_memory(call, "C", C, elems(*ct) * sizeof(float));
  const float a = host_scalar(alpha), b = host_scalar(beta);
  const Tensor ta = *at, tc = *ct;
  const float *ap = static_cast<const float *>(A);
  float *cp = static_cast<float *>(C);
  char label[128];
  snprintf(label, sizeof label, "%s A %dx%dx%dx%d C %dx%dx%dx%d", call, ta.n, ta.c, ta.h, ta.w, tc.n, tc.c, tc.h, tc.w);
  enqueue(s, label, [ta, tc, a, ap, b, cp] {
    for (int n = 0; n < tc.n; n++)
      for (int c = 0; c < tc.c; c++)
        for (int y = 0; y < tc.h; y++)
          for (int x = 0; x < tc.w; x++) {
            const size_t ia = ((static_cast<size_t>(ta.n == 1 ? 0 : n) * ta.c + (ta.c == 1 ? 0 : c)) * ta.h +
                               (ta.h == 1 ? 0 : y)) * ta.w + (ta.w == 1 ? 0 : x);
            float *out = &cp[((static_cast<size_t>(n) * tc.c + c) * tc.h + y) * tc.w + x];
            *out = blend(a, ap[ia], b, out);
          }
  });
  return CUDNN_STATUS_SUCCESS;
}
