// cuBLASLt stand-in of the emulated CUDA device (tests only; tests/cuda_emu/): see include/cublasLt.h.
// Follows NVIDIA's cuBLAS documentation, "Using the cuBLASLt API":
//   - cublasLtMatmul computes D = alpha * op(A) * op(B) + beta * C, then the epilogue (bias added to
//     every column, bias[i] for row i of D, then ReLU or GELU), column-major with leading dimensions,
//     for every matrix of a strided batch. The bias-gradient epilogues leave D as DEFAULT does and WRITE
//     (never add) a vector into the bias buffer (CUBLASLT_MATMUL_DESC_BIAS_POINTER, one per batch
//     entry BIAS_BATCH_STRIDE apart): BGRADA the sum of op(A) over the GEMM's k, one value per row of D
//     (bias[i] = sum_q op(A)[i,q]); BGRADB the sum of op(B) over k, one value per column of D
//     (bias[j] = sum_q op(B)[q,j]). The bias vector has D's type (CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE
//     -1, or that type set explicitly: the header's rule, whose exceptions, IMMA and fp8, are not computed). The input matrix itself is summed, as stored (16-bit elements
//     widened, fp32 ones not rounded to TF32), unscaled by alpha, in the blocked order of the products. Scale type CUDA_R_32F, alpha and beta host pointers read at
//     the call (CUBLASLT_POINTER_MODE_HOST). The type combinations computed are rows of NVIDIA's table
//     of cublasLtMatmul's supported types:
//       CUBLAS_COMPUTE_32F(_PEDANTIC)  A, B CUDA_R_32F, CUDA_R_16F or CUDA_R_16BF (both the same); C, D
//                                      CUDA_R_32F, or (A, B 16-bit) C, D of A's type. 16-bit elements are
//                                      widened exactly to float; a 16-bit D is the float result (the
//                                      epilogue's bias added) rounded once, nearest, ties to even.
//       CUBLAS_COMPUTE_32F_FAST_TF32   A, B, C, D CUDA_R_32F; every element of A and B rounded to TF32
//                                      (nearest, ties to even: the 13 low significand bits dropped)
//                                      before it is multiplied — the down-conversion the compute type
//                                      allows, done always so a test sees it.
//     Products of the (widened or rounded) inputs are exact in float (at most 2 x 11 significand bits),
//     so every compute type is "exact products, float sums". Other combinations NVIDIA's table lists
//     (FAST_16F, FAST_16BF, a bias gradient of 16-bit D, ...) are CUBLAS_STATUS_NOT_SUPPORTED here; combinations it
//     does not list (A and B of different types, 16-bit inputs under FAST_TF32) are
//     CUBLAS_STATUS_NOT_SUPPORTED as NVIDIA's cublasLtMatmul answers them.
//   - beta == 0: C is not read (the cuBLAS convention "if beta == 0, C does not have to be a valid
//     input"), so NaN in C does not reach D. In place (C == D) needs the same layout for C and D.
//   - Each element is accumulated in float in a blocked order, as a GPU GEMM kernel does, never the
//     plain k order of a CPU loop (so a test that expects the CPU's bits fails here as on a GPU): the k
//     range is split into `splits` contiguous slices (split-K), each slice is summed in chunks of
//     `chunk` products (an MMA tile's k extent: each chunk's products accumulated with fmaf into a
//     chunk sum that starts at 0, then added to the slice's sum), and the slices' sums are combined in
//     slice order. `chunk` (2, 4, 8 or 16) and `splits` (1 to 4, at most one per chunk) are drawn from
//     a hash of HS_CUDA_EMU_SEED and the problem's shape (m, n, k, batch, transposes, types): one shape
//     always gives the same bits under one seed, and other bits (the last ones) under another seed, as
//     the algorithm a GPU's heuristic picks changes with the library version and the GPU.
//   - The GEMM is one work item queued on the stream; it runs when the host synchronises, in the order
//     the stream and its events allow. It first fills the workspace it was given by the heuristic
//     with NaN bytes, so memory shared between the workspace and live data shows up.
//   - cublasLtMatmulAlgoGetHeuristic answers one algorithm: its workspaceSize is m*n*4 bytes rounded
//     up to 256 (a split-k buffer) when that fits CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, else 0;
//     none (success, a count of 0) for a problem with an epilogue under HS_CUDA_EMU_NO_EPILOGUE_ALGO=1.
//     cublasLtMatmul with less workspace than its algorithm needs is CUBLAS_STATUS_INVALID_VALUE;
//     algo == NULL means the heuristic's first answer with default preferences (no workspace).
//   - Statuses: an unknown handle is CUBLAS_STATUS_NOT_INITIALIZED; NULL arguments, attribute buffers
//     of the wrong size, shapes that do not match, leading dimensions below the row count, batch counts
//     that differ and too little workspace are CUBLAS_STATUS_INVALID_VALUE; what NVIDIA's library
//     supports but this stand-in does not (other types, orders, pointer modes, epilogues) is
//     CUBLAS_STATUS_NOT_SUPPORTED; an invalid stream is CUBLAS_STATUS_EXECUTION_FAILED (the launch fails).
//   - Pointer alignment: the heuristic's answer is chosen for the alignment the preference's
//     CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES promise (256 bytes each by default), and
//     cublasLtMatmul answers CUBLAS_STATUS_NOT_SUPPORTED for a matrix pointer less aligned than that
//     (algo == NULL: 256), as cuBLASLt does. A bias vector not 16-byte aligned is reported and the process
//     aborts: the preferences do not cover it, and a GPU's epilogue faults with a misaligned address.
//   - A matrix, bias or workspace that is not inside one device allocation (or pinned host memory) is
//     reported and the process aborts: on a GPU the kernel would fault with an illegal address.
// Test equipment that should not dominate the test run: the GEMM computes several independent outputs
// side by side in AVX registers (each output's sum keeps the blocked order above; same bits).
#pragma GCC optimize("O3")

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>
#if defined(__AVX__) && defined(__FMA__)
#include <immintrin.h>
#endif
#include "cublasLt.h"
#include "memory.h"
#include "state.h"
#include "streams.h"
#include "tf32.h"

struct cublasLtContext {
  int unused;
};

namespace {

using namespace hs_emu;

struct Layout {
  cudaDataType type;
  int32_t order;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch;
  int64_t stride;
};

struct MatmulDesc {
  int32_t compute, scale, pointer_mode, transa, transb, transc;
  uint32_t epilogue;
  const void *bias;
  int64_t bias_stride;
  int32_t bias_type; // -1: the type of D (the documented default)
};

struct Pref {
  uint64_t max_workspace;
  uint32_t search_mode;
  uint32_t min_align[4]; // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES: 256 unless set
};

// The pointer alignment (bytes) an algorithm was chosen for, A, B, C, D, packed into its data[2] as
// 16-bit fields (the preference's values, at most 65535)
uint64_t pack_alignments(const uint32_t a[4]) {
  uint64_t packed = 0;
  for (int i = 0; i < 4; i++) packed |= static_cast<uint64_t>(std::min<uint32_t>(a[i], 0xFFFF)) << (16 * i);
  return packed;
}
uint32_t alignment_of(uint64_t packed, int i) { return static_cast<uint32_t>(packed >> (16 * i)) & 0xFFFF; }

constexpr uint64_t kAlgoMagic = 0x68734c74416c676full; // "hsLtAlgo"

struct Registry {
  std::set<const void *> handles;
  std::map<const void *, Layout> layouts;
  std::map<const void *, MatmulDesc> descs;
  std::map<const void *, Pref> prefs;
};

Registry &reg() {
  static Registry *r = new Registry; // never freed: handles may be destroyed during static destruction
  return *r;
}

#define LT_ENTER std::lock_guard<std::recursive_mutex> hs_emu_lock(::hs_emu::device_mutex())

bool handle_ok(cublasLtHandle_t h) { return h != nullptr && reg().handles.count(h) != 0; }

Layout *layout_of(cublasLtMatrixLayout_t l) {
  auto it = reg().layouts.find(l);
  return it == reg().layouts.end() ? nullptr : &it->second;
}
MatmulDesc *desc_of(cublasLtMatmulDesc_t d) {
  auto it = reg().descs.find(d);
  return it == reg().descs.end() ? nullptr : &it->second;
}
Pref *pref_of(cublasLtMatmulPreference_t p) {
  auto it = reg().prefs.find(p);
  return it == reg().prefs.end() ? nullptr : &it->second;
}

template <typename T> bool read_attr(const void *buf, size_t size, T *out) {
  if (buf == nullptr || size != sizeof(T)) return false;
  memcpy(out, buf, sizeof(T));
  return true;
}

bool known_data_type(int32_t t) {
  switch (t) {
  case CUDA_R_16F: case CUDA_R_16BF: case CUDA_R_32F: case CUDA_R_64F: case CUDA_R_8I: case CUDA_R_8U:
  case CUDA_R_32I: case CUDA_R_32U: case CUDA_R_64I: case CUDA_R_64U:
    return true;
  default:
    return t >= 0 && t <= 33; // the complex and narrow types of CUDA 13's enum: valid, not computed here
  }
}

bool fp32_compute(int32_t c) { return c == CUBLAS_COMPUTE_32F || c == CUBLAS_COMPUTE_32F_PEDANTIC; }
// the compute types the stand-in computes
bool computed(int32_t c) { return fp32_compute(c) || c == CUBLAS_COMPUTE_32F_FAST_TF32; }
// the matrix types it reads or writes
bool stored_type(int32_t t) { return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF; }
size_t elem_size(cudaDataType t) { return t == CUDA_R_32F ? 4 : 2; }

// fp16 bits -> float, exactly (every fp16 value is a float): sign, 5-bit exponent, 10-bit fraction
float half_to_float(uint16_t h) {
  const int e = (h >> 10) & 0x1f, f = h & 0x3ff;
  float v;
  if (e == 0x1f) v = f ? NAN : INFINITY;
  else if (e == 0) v = std::ldexp(static_cast<float>(f), -24);
  else v = std::ldexp(static_cast<float>(f | 0x400), e - 25);
  return (h & 0x8000) ? -v : v;
}
float bf16_to_float(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float v;
  memcpy(&v, &u, sizeof v);
  return v;
}
// float -> bf16 bits: nearest, ties to even; NaN stays NaN (quiet), infinities and the sign kept
uint16_t float_to_bf16(float v) {
  uint32_t u;
  memcpy(&u, &v, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
// float -> fp16 bits: the compiler's conversion (IEEE nearest, ties to even; overflow to infinity)
uint16_t float_to_half(float v) {
  const _Float16 h = static_cast<_Float16>(v);
  uint16_t bits;
  memcpy(&bits, &h, sizeof bits);
  return bits;
}
bool known_compute(int32_t c) { return (c >= 64 && c <= 75) || c == 77 || c == 78 || c == 79; }

enum : uint32_t { kEpiRelu = 2, kEpiBias = 4, kEpiGelu = 32, kEpiBgradA = 256, kEpiBgradB = 512 };
bool epilogue_supported(uint32_t e) {
  return e == CUBLASLT_EPILOGUE_DEFAULT || e == CUBLASLT_EPILOGUE_BIAS || e == CUBLASLT_EPILOGUE_RELU ||
         e == CUBLASLT_EPILOGUE_RELU_BIAS || e == CUBLASLT_EPILOGUE_GELU || e == CUBLASLT_EPILOGUE_GELU_BIAS ||
         e == CUBLASLT_EPILOGUE_BGRADA || e == CUBLASLT_EPILOGUE_BGRADB;
}
// The epilogue uses the bias buffer: reads it (BIAS) or writes it (BGRADA, BGRADB).
bool uses_bias(uint32_t e) { return (e & (kEpiBias | kEpiBgradA | kEpiBgradB)) != 0; }
bool epilogue_known(uint32_t e) {
  switch (e) {
  case CUBLASLT_EPILOGUE_RELU_AUX: case CUBLASLT_EPILOGUE_RELU_AUX_BIAS: case CUBLASLT_EPILOGUE_DRELU:
  case CUBLASLT_EPILOGUE_DRELU_BGRAD: case CUBLASLT_EPILOGUE_GELU_AUX: case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
  case CUBLASLT_EPILOGUE_DGELU: case CUBLASLT_EPILOGUE_DGELU_BGRAD: case CUBLASLT_EPILOGUE_BGRADA:
  case CUBLASLT_EPILOGUE_BGRADB:
    return true;
  default:
    return epilogue_supported(e);
  }
}

// The checked problem: everything the work item needs.
struct Problem {
  int64_t m, n, k, batch;
  bool ta, tb;
  Layout a, b, c, d;
  uint32_t epilogue;
  const void *bias;      // of D's type
  int64_t bias_stride;
  size_t workspace_needed; // by the heuristic's algorithm for this shape
  bool tf32;               // CUBLAS_COMPUTE_32F_FAST_TF32: A and B rounded to TF32
};

size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

size_t split_k_workspace(const Problem &p, uint64_t max_workspace) {
  const size_t want = round_up(static_cast<size_t>(p.m * p.n) * sizeof(float), 256);
  return want <= max_workspace ? want : 0;
}

cublasStatus_t check_problem(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                             cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc, Problem *p) {
  const MatmulDesc *md = desc_of(desc);
  const Layout *a = layout_of(Adesc), *b = layout_of(Bdesc), *c = layout_of(Cdesc), *d = layout_of(Ddesc);
  if (md == nullptr || a == nullptr || b == nullptr || c == nullptr || d == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  // what this stand-in computes (NVIDIA's library does more)
  if (!computed(md->compute) || md->scale != CUDA_R_32F || md->pointer_mode != CUBLASLT_POINTER_MODE_HOST ||
      md->transc != CUBLAS_OP_N || !epilogue_supported(md->epilogue) ||
      (md->bias_type != -1 && md->bias_type != d->type))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  for (const Layout *l : {a, b, c, d})
    if (l->order != CUBLASLT_ORDER_COL) return CUBLAS_STATUS_NOT_SUPPORTED;
  // the type table: A and B of one type; 16-bit inputs only under COMPUTE_32F(_PEDANTIC); C = D, fp32 or
  // (16-bit inputs) A's type; a bias gradient only into fp32 (the stand-in's choice)
  if (c->type != d->type || a->type != b->type) return CUBLAS_STATUS_NOT_SUPPORTED;
  if (d->type != CUDA_R_32F && (d->type != a->type || (md->epilogue & (kEpiBgradA | kEpiBgradB)) != 0))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  if (a->type != CUDA_R_32F && !fp32_compute(md->compute)) return CUBLAS_STATUS_NOT_SUPPORTED;
  p->tf32 = md->compute == CUBLAS_COMPUTE_32F_FAST_TF32;
  for (const Layout *l : {a, b, c, d})
    if (l->rows > INT32_MAX || l->cols > INT32_MAX) return CUBLAS_STATUS_NOT_SUPPORTED;
  p->ta = md->transa != CUBLAS_OP_N;
  p->tb = md->transb != CUBLAS_OP_N;
  p->m = static_cast<int64_t>(d->rows);
  p->n = static_cast<int64_t>(d->cols);
  const int64_t am = static_cast<int64_t>(p->ta ? a->cols : a->rows), ak = static_cast<int64_t>(p->ta ? a->rows : a->cols);
  const int64_t bk = static_cast<int64_t>(p->tb ? b->cols : b->rows), bn = static_cast<int64_t>(p->tb ? b->rows : b->cols);
  if (am != p->m || bn != p->n || ak != bk) return CUBLAS_STATUS_INVALID_VALUE;
  p->k = ak;
  // C must match D (rows, columns, batch, type, order); its leading dimension may differ (0 broadcasts)
  if (c->rows != d->rows || c->cols != d->cols || c->batch != d->batch) return CUBLAS_STATUS_INVALID_VALUE;
  if (a->batch != d->batch || b->batch != d->batch || d->batch < 1) return CUBLAS_STATUS_INVALID_VALUE;
  for (const Layout *l : {a, b, d})
    if (l->ld < 1 || static_cast<uint64_t>(l->ld) < l->rows) return CUBLAS_STATUS_INVALID_VALUE;
  if (c->ld < 0 || (c->ld != 0 && static_cast<uint64_t>(c->ld) < c->rows)) return CUBLAS_STATUS_INVALID_VALUE;
  p->batch = d->batch;
  p->a = *a;
  p->b = *b;
  p->c = *c;
  p->d = *d;
  p->epilogue = md->epilogue;
  p->bias = md->bias;
  p->bias_stride = md->bias_stride;
  if (uses_bias(md->epilogue) && md->bias == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  return CUBLAS_STATUS_SUCCESS;
}

// Elements spanned by a strided batch of column-major matrices, from the lowest offset.
struct Span {
  int64_t lo, hi; // [lo, hi) in elements relative to the pointer
};
Span span_of(const Layout &l, int64_t batch) {
  if (l.rows == 0 || l.cols == 0) return Span{0, 0};
  const int64_t one = static_cast<int64_t>(l.cols - 1) * l.ld + static_cast<int64_t>(l.rows);
  const int64_t last = (batch - 1) * l.stride;
  return Span{std::min<int64_t>(0, last), std::max<int64_t>(0, last) + one};
}

void check_memory(const char *what, const void *p, Span s, size_t elem) {
  if (s.hi <= s.lo) return;
  const char *lo = static_cast<const char *>(p) + s.lo * static_cast<int64_t>(elem);
  const size_t bytes = static_cast<size_t>(s.hi - s.lo) * elem;
  const MemKind k = classify(lo);
  if (k != MemKind::Pageable && range_valid(k, lo, bytes)) return;
  fatal("cublasLtMatmul: %s at %p (%zu bytes from %p) is %s; on a GPU the GEMM kernel would fault with an "
        "illegal address",
        what, p, bytes, static_cast<const void *>(lo),
        k == MemKind::Pageable ? "host memory, not device memory" : "not inside one live device allocation");
}

float gelu_tanh(float x) { // the tanh approximation of GELU, as cuBLASLt's epilogue computes it
  const float k = 0.7978845608028654f; // sqrt(2 / pi)
  return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

// The summation order of one problem (see the header comment): a hash of the seed and the shape.
struct SumOrder {
  int64_t chunk, splits;
};

uint64_t mix64(uint64_t z) { // splitmix64's finaliser: every input bit moves every output bit
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

SumOrder sum_order(const Problem &p) {
  uint64_t h = mix64(current_seed() ^ 0x6873436861696e73ull);
  for (uint64_t v : {static_cast<uint64_t>(p.m), static_cast<uint64_t>(p.n), static_cast<uint64_t>(p.k),
                     static_cast<uint64_t>(p.batch), static_cast<uint64_t>(p.ta) * 2 + p.tb,
                     static_cast<uint64_t>(p.a.type) * 2 + p.tf32})
    h = mix64(h ^ v);
  SumOrder o;
  o.chunk = int64_t{2} << (h & 3);                  // 2, 4, 8 or 16 products per chunk
  o.splits = 1 + static_cast<int64_t>((h >> 2) & 3); // 1 to 4 slices of k
  const int64_t chunks = (p.k + o.chunk - 1) / o.chunk;
  if (o.splits > chunks) o.splits = chunks < 1 ? 1 : chunks;
  return o;
}

// The blocked dot product x[0..k) . y[0..k) in the order o (see the header comment) is, for one output:
//   total = 0; per slice [s0, s1) of per_split: slice = 0; per chunk [c0, c1) of o.chunk in the slice:
//   part = 0, part = fmaf(x[q], y[q], part) for q = c0..c1-1, slice += part; then total += slice.
// blocked_dots runs it for R rows of op(A) against kLanes columns of op(B) at once, both packed so that
// one q's values are adjacent: pa[q * R + r] = op(A)[i0 + r, q], pb[q * kLanes + t] = op(B)[q, j0 + t].
// Every (row, lane) pair does exactly those operations in that order; only independent dot products
// run side by side, in vector registers (a lane's fused multiply-add is fmaf's single rounding).
constexpr int kLanes = 8;
#if defined(__AVX__) && defined(__FMA__)
// kLanes floats in one AVX register; fma is one fused multiply-add per lane (fmaf's single rounding)
struct Lanes {
  __m256 v;
};
inline Lanes lanes_zero() { return Lanes{_mm256_setzero_ps()}; }
inline Lanes lanes_load(const float *p) { return Lanes{_mm256_loadu_ps(p)}; }
inline void lanes_store(float *p, Lanes a) { _mm256_storeu_ps(p, a.v); }
inline Lanes lanes_fma(float x, Lanes y, Lanes acc) { return Lanes{_mm256_fmadd_ps(_mm256_set1_ps(x), y.v, acc.v)}; }
inline Lanes lanes_fma(Lanes x, float y, Lanes acc) { return Lanes{_mm256_fmadd_ps(x.v, _mm256_set1_ps(y), acc.v)}; }
inline Lanes lanes_add(Lanes a, Lanes b) { return Lanes{_mm256_add_ps(a.v, b.v)}; }
#else
struct Lanes {
  float v[kLanes];
};
inline Lanes lanes_zero() { return Lanes{}; }
inline Lanes lanes_load(const float *p) {
  Lanes r;
  memcpy(r.v, p, sizeof r.v);
  return r;
}
inline void lanes_store(float *p, Lanes a) { memcpy(p, a.v, sizeof a.v); }
inline Lanes lanes_fma(float x, Lanes y, Lanes acc) {
  for (int t = 0; t < kLanes; t++) acc.v[t] = std::fmaf(x, y.v[t], acc.v[t]);
  return acc;
}
inline Lanes lanes_fma(Lanes x, float y, Lanes acc) {
  for (int t = 0; t < kLanes; t++) acc.v[t] = std::fmaf(x.v[t], y, acc.v[t]);
  return acc;
}
inline Lanes lanes_add(Lanes a, Lanes b) {
  for (int t = 0; t < kLanes; t++) a.v[t] += b.v[t];
  return a;
}
#endif

template <int R>
void blocked_dots(const float *pa, int64_t k, const float *pb, SumOrder o, float out[][kLanes]) {
  const int64_t per_split = (k + o.splits - 1) / o.splits;
  Lanes total[R];
  for (int r = 0; r < R; r++) total[r] = lanes_zero();
  for (int64_t s0 = 0; s0 < k; s0 += per_split) {
    const int64_t s1 = std::min(k, s0 + per_split);
    Lanes slice[R];
    for (int r = 0; r < R; r++) slice[r] = lanes_zero();
    for (int64_t c0 = s0; c0 < s1; c0 += o.chunk) {
      const int64_t c1 = std::min(s1, c0 + o.chunk);
      Lanes part[R];
      for (int r = 0; r < R; r++) part[r] = lanes_zero();
      for (int64_t q = c0; q < c1; q++) {
        const Lanes y = lanes_load(pb + q * kLanes);
        for (int r = 0; r < R; r++) part[r] = lanes_fma(pa[q * R + r], y, part[r]); // fmaf(x[q], y[q], part)
      }
      for (int r = 0; r < R; r++) slice[r] = lanes_add(slice[r], part[r]);
    }
    for (int r = 0; r < R; r++) total[r] = lanes_add(total[r], slice[r]);
  }
  for (int r = 0; r < R; r++) lanes_store(out[r], total[r]);
}

// The bias gradient's blocked sums of kLanes vectors at once (lane t of pv: pv[q * kLanes + t]): the
// blocked dot product of v and ones per lane, part = fmaf(v[q], 1, part) (1 * v is exact: a blocked sum).
void blocked_sums(int64_t k, const float *pv, SumOrder o, float out[kLanes]) {
  const int64_t per_split = (k + o.splits - 1) / o.splits;
  Lanes total = lanes_zero();
  for (int64_t s0 = 0; s0 < k; s0 += per_split) {
    const int64_t s1 = std::min(k, s0 + per_split);
    Lanes slice = lanes_zero();
    for (int64_t c0 = s0; c0 < s1; c0 += o.chunk) {
      const int64_t c1 = std::min(s1, c0 + o.chunk);
      Lanes part = lanes_zero();
      for (int64_t q = c0; q < c1; q++) part = lanes_fma(lanes_load(pv + q * kLanes), 1.0f, part);
      slice = lanes_add(slice, part);
    }
    total = lanes_add(total, slice);
  }
  lanes_store(out, total);
}

// fp16 bits -> float through a table of all 65536 values (half_to_float's bits, NaN included)
const float *half_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; h++) t[h] = half_to_float(static_cast<uint16_t>(h));
    return t;
  }();
  return table.data();
}

// Columns [0, cols) of a k-row operand of type t (fp32, fp16 or bf16), element (q, j) at base[start +
// q * qstep + j * jstep], as the floats the GEMM multiplies (16-bit ones widened exactly, fp32 ones
// rounded to TF32 when tf32), packed W columns to a block: out[(j / W) * k * W + q * W + j % W], zero
// past cols (the padding's products are computed and dropped). The type is dispatched once per call.
void pack(const void *base, cudaDataType t, int64_t start, int64_t qstep, int64_t jstep, int64_t k, int64_t cols,
          int64_t W, bool tf32, std::vector<float> &out) {
  const int64_t blocks = (cols + W - 1) / W;
  out.resize(static_cast<size_t>(blocks * k * W));
  auto run = [&](auto get) {
    float *o = out.data();
    for (int64_t b = 0; b < blocks; b++)
      for (int64_t q = 0; q < k; q++)
        for (int64_t j = b * W; j < b * W + W; j++) *o++ = j < cols ? get(start + q * qstep + j * jstep) : 0.0f;
  };
  if (t == CUDA_R_16F) {
    const float *table = half_table();
    const uint16_t *p = static_cast<const uint16_t *>(base);
    run([=](int64_t i) { return table[p[i]]; });
  } else if (t == CUDA_R_16BF) {
    const uint16_t *p = static_cast<const uint16_t *>(base);
    run([=](int64_t i) { return bf16_to_float(p[i]); });
  } else {
    const float *p = static_cast<const float *>(base);
    if (tf32)
      run([=](int64_t i) { return to_tf32(p[i]); });
    else
      run([=](int64_t i) { return p[i]; });
  }
}

// Element i of a matrix or vector of type t (fp32, fp16 or bf16) as a float (widened exactly), and a float
// stored into one (16-bit: rounded once, nearest, ties to even).
float load_as_float(const void *base, cudaDataType t, int64_t i) {
  if (t == CUDA_R_32F) return static_cast<const float *>(base)[i];
  const uint16_t h = static_cast<const uint16_t *>(base)[i];
  return t == CUDA_R_16BF ? bf16_to_float(h) : half_to_float(h);
}
void store_float(void *base, cudaDataType t, int64_t i, float v) {
  if (t == CUDA_R_32F) static_cast<float *>(base)[i] = v;
  else static_cast<uint16_t *>(base)[i] = t == CUDA_R_16BF ? float_to_bf16(v) : float_to_half(v);
}

void run_gemm(const Problem &p, float alpha, float beta, const void *A, const void *B, const void *C, void *D,
              void *workspace) {
  const SumOrder order = sum_order(p);
  if (p.workspace_needed != 0) memset(workspace, kFillByte, p.workspace_needed); // the algorithm's scratch
  const int64_t m = p.m, n = p.n, k = p.k;
  constexpr int kRows = 4; // rows of op(A) per pass
  // op(A) in blocks of kRows rows, op(B) in blocks of kLanes columns (see blocked_dots); the bias
  // gradient's vectors in blocks of kLanes
  std::vector<float> pa, pb, pv;
  for (int64_t bi = 0; bi < p.batch; bi++) {
    const int64_t c0 = bi * p.c.stride, d0 = bi * p.d.stride; // C null when beta == 0: not read
    const int64_t a0 = bi * p.a.stride, b0 = bi * p.b.stride;
    // op(A)[i, q] = A[i, q] or A[q, i]: row i is column i of op(A)^T; op(B)[q, j] = B[q, j] or B[j, q]
    const int64_t a_q = p.ta ? 1 : p.a.ld, a_i = p.ta ? p.a.ld : 1;
    const int64_t b_q = p.tb ? p.b.ld : 1, b_j = p.tb ? 1 : p.b.ld;
    pack(A, p.a.type, a0, a_q, a_i, k, m, kRows, p.tf32, pa);
    pack(B, p.b.type, b0, b_q, b_j, k, n, kLanes, p.tf32, pb);
    const int64_t bias0 = bi * p.bias_stride;
    if (p.epilogue & (kEpiBgradA | kEpiBgradB)) { // the bias gradient (fp32 D): op(A)'s rows or op(B)'s columns
      const bool a_side = (p.epilogue & kEpiBgradA) != 0;
      const int64_t len = a_side ? m : n;
      float *grad = static_cast<float *>(const_cast<void *>(p.bias)) + bias0;
      if (a_side) // lanes: rows i of op(A), as stored (no TF32 rounding)
        pack(A, p.a.type, a0, a_q, a_i, k, m, kLanes, false, pv);
      else // lanes: columns j of op(B), as stored
        pack(B, p.b.type, b0, b_q, b_j, k, n, kLanes, false, pv);
      for (int64_t i0 = 0; i0 < len; i0 += kLanes) {
        float sums[kLanes];
        blocked_sums(k, pv.data() + (i0 / kLanes) * k * kLanes, order, sums);
        for (int64_t t = 0; t < kLanes && i0 + t < len; t++) grad[i0 + t] = sums[t];
      }
    }
    for (int64_t j0 = 0; j0 < n; j0 += kLanes) {
      const int64_t lanes = std::min<int64_t>(kLanes, n - j0);
      for (int64_t i0 = 0; i0 < m; i0 += kRows) {
        float acc[kRows][kLanes];
        const float *pai = pa.data() + (i0 / kRows) * k * kRows, *pbj = pb.data() + (j0 / kLanes) * k * kLanes;
        blocked_dots<kRows>(pai, k, pbj, order, acc);
        const int64_t rows = std::min<int64_t>(kRows, m - i0);
        for (int64_t t = 0; t < lanes; t++) {
          const int64_t j = j0 + t;
          for (int64_t r = 0; r < rows; r++) {
            const int64_t i = i0 + r;
            float v = alpha * acc[r][t];
            if (beta != 0.0f) v += beta * load_as_float(C, p.c.type, c0 + i + j * p.c.ld);
            if (p.epilogue & kEpiBias) v += load_as_float(p.bias, p.d.type, bias0 + i);
            if (p.epilogue & kEpiRelu) v = v > 0.0f ? v : 0.0f;
            if (p.epilogue & kEpiGelu) v = gelu_tanh(v);
            store_float(D, p.d.type, d0 + i + j * p.d.ld, v);
          }
        }
      }
    }
  }
}

} // namespace

// ---- handle -------------------------------------------------------------------------------------

extern "C" cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle) {
  LT_ENTER;
  if (lightHandle == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (config().devices == 0) return CUBLAS_STATUS_NOT_INITIALIZED; // no CUDA device
  cublasLtHandle_t h = new cublasLtContext{0};
  reg().handles.insert(h);
  *lightHandle = h;
  return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  LT_ENTER;
  if (!handle_ok(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  // queued GEMMs do not use the handle: they keep running after it is destroyed
  reg().handles.erase(lightHandle);
  delete lightHandle;
  return CUBLAS_STATUS_SUCCESS;
}

extern "C" const char *cublasLtGetStatusName(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

extern "C" const char *cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS: return "success";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
  case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
  case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "an absent device architectural feature is required";
  case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
  case CUBLAS_STATUS_LICENSE_ERROR: return "error detected trying to check the license";
  }
  return "unknown error";
}

// ---- matrix layouts -----------------------------------------------------------------------------

extern "C" cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type,
                                                     uint64_t rows, uint64_t cols, int64_t ld) {
  LT_ENTER;
  if (matLayout == nullptr || !known_data_type(type)) return CUBLAS_STATUS_INVALID_VALUE;
  if (!stored_type(type)) return CUBLAS_STATUS_NOT_SUPPORTED; // fp32, fp16 and bf16 only
  cublasLtMatrixLayout_t l = new cublasLtMatrixLayoutOpaque_t();
  reg().layouts[l] = Layout{type, CUBLASLT_ORDER_COL, rows, cols, ld, 1, 0};
  *matLayout = l;
  return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  LT_ENTER;
  if (matLayout == nullptr) return CUBLAS_STATUS_SUCCESS;
  if (reg().layouts.erase(matLayout) == 0) return CUBLAS_STATUS_INVALID_VALUE;
  delete matLayout;
  return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                           cublasLtMatrixLayoutAttribute_t attr, const void *buf,
                                                           size_t sizeInBytes) {
  LT_ENTER;
  Layout *l = layout_of(matLayout);
  if (l == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
  case CUBLASLT_MATRIX_LAYOUT_TYPE: {
    uint32_t v;
    if (!read_attr(buf, sizeInBytes, &v) || !known_data_type(static_cast<int32_t>(v))) return CUBLAS_STATUS_INVALID_VALUE;
    if (!stored_type(static_cast<int32_t>(v))) return CUBLAS_STATUS_NOT_SUPPORTED;
    l->type = static_cast<cudaDataType>(v);
    return CUBLAS_STATUS_SUCCESS;
  }
  case CUBLASLT_MATRIX_LAYOUT_ORDER: {
    int32_t v;
    if (!read_attr(buf, sizeInBytes, &v) || v < 0 || v > 4) return CUBLAS_STATUS_INVALID_VALUE;
    if (v != CUBLASLT_ORDER_COL) return CUBLAS_STATUS_NOT_SUPPORTED;
    l->order = v;
    return CUBLAS_STATUS_SUCCESS;
  }
  case CUBLASLT_MATRIX_LAYOUT_ROWS:
    return read_attr(buf, sizeInBytes, &l->rows) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
  case CUBLASLT_MATRIX_LAYOUT_COLS:
    return read_attr(buf, sizeInBytes, &l->cols) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
  case CUBLASLT_MATRIX_LAYOUT_LD:
    return read_attr(buf, sizeInBytes, &l->ld) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
  case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
    return read_attr(buf, sizeInBytes, &l->batch) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
  case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
    return read_attr(buf, sizeInBytes, &l->stride) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
  case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET: {
    int64_t v;
    if (!read_attr(buf, sizeInBytes, &v)) return CUBLAS_STATUS_INVALID_VALUE;
    return v == 0 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED; // planar complex
  }
  case CUBLASLT_MATRIX_LAYOUT_BATCH_MODE: {
    uint32_t v;
    if (!read_attr(buf, sizeInBytes, &v)) return CUBLAS_STATUS_INVALID_VALUE;
    return v == 0 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED; // pointer-array batches
  }
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

// ---- matmul descriptors -------------------------------------------------------------------------

extern "C" cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc, cublasComputeType_t computeType,
                                                   cudaDataType_t scaleType) {
  LT_ENTER;
  if (matmulDesc == nullptr || !known_compute(computeType) || !known_data_type(scaleType))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!computed(computeType) || scaleType != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  cublasLtMatmulDesc_t d = new cublasLtMatmulDescOpaque_t();
  reg().descs[d] = MatmulDesc{computeType, scaleType,      CUBLASLT_POINTER_MODE_HOST, CUBLAS_OP_N, CUBLAS_OP_N,
                              CUBLAS_OP_N, CUBLASLT_EPILOGUE_DEFAULT, nullptr, 0, -1};
  *matmulDesc = d;
  return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  LT_ENTER;
  if (matmulDesc == nullptr) return CUBLAS_STATUS_SUCCESS;
  if (reg().descs.erase(matmulDesc) == 0) return CUBLAS_STATUS_INVALID_VALUE;
  delete matmulDesc;
  return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                                         cublasLtMatmulDescAttributes_t attr, const void *buf,
                                                         size_t sizeInBytes) {
  LT_ENTER;
  MatmulDesc *d = desc_of(matmulDesc);
  if (d == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  int32_t i32;
  switch (attr) {
  case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE:
    if (!read_attr(buf, sizeInBytes, &i32) || !known_compute(i32)) return CUBLAS_STATUS_INVALID_VALUE;
    if (!computed(i32)) return CUBLAS_STATUS_NOT_SUPPORTED;
    d->compute = i32;
    return CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_MATMUL_DESC_SCALE_TYPE:
    if (!read_attr(buf, sizeInBytes, &i32) || !known_data_type(i32)) return CUBLAS_STATUS_INVALID_VALUE;
    if (i32 != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    d->scale = i32;
    return CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_MATMUL_DESC_POINTER_MODE:
    if (!read_attr(buf, sizeInBytes, &i32) || i32 < 0 || i32 > 4) return CUBLAS_STATUS_INVALID_VALUE;
    if (i32 != CUBLASLT_POINTER_MODE_HOST) return CUBLAS_STATUS_NOT_SUPPORTED;
    d->pointer_mode = i32;
    return CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_MATMUL_DESC_TRANSA:
  case CUBLASLT_MATMUL_DESC_TRANSB:
    // for real types CUBLAS_OP_C is CUBLAS_OP_T
    if (!read_attr(buf, sizeInBytes, &i32) || i32 < CUBLAS_OP_N || i32 > CUBLAS_OP_C) return CUBLAS_STATUS_INVALID_VALUE;
    (attr == CUBLASLT_MATMUL_DESC_TRANSA ? d->transa : d->transb) = i32;
    return CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_MATMUL_DESC_TRANSC:
    if (!read_attr(buf, sizeInBytes, &i32) || i32 < CUBLAS_OP_N || i32 > CUBLAS_OP_C) return CUBLAS_STATUS_INVALID_VALUE;
    if (i32 != CUBLAS_OP_N) return CUBLAS_STATUS_NOT_SUPPORTED; // documented: only CUBLAS_OP_N
    d->transc = i32;
    return CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_MATMUL_DESC_EPILOGUE: {
    uint32_t e;
    if (!read_attr(buf, sizeInBytes, &e) || !epilogue_known(e)) return CUBLAS_STATUS_INVALID_VALUE;
    if (!epilogue_supported(e)) return CUBLAS_STATUS_NOT_SUPPORTED;
    d->epilogue = e;
    return CUBLAS_STATUS_SUCCESS;
  }
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
    return read_attr(buf, sizeInBytes, &d->bias) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
  case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
    return read_attr(buf, sizeInBytes, &d->bias_stride) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
  case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    if (!read_attr(buf, sizeInBytes, &i32) || !known_data_type(i32)) return CUBLAS_STATUS_INVALID_VALUE;
    if (!stored_type(i32)) return CUBLAS_STATUS_NOT_SUPPORTED; // D's type is checked at the matmul
    d->bias_type = i32;
    return CUBLAS_STATUS_SUCCESS;
  case CUBLASLT_MATMUL_DESC_FILL_MODE:
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER:
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
    return CUBLAS_STATUS_NOT_SUPPORTED; // valid attributes the stand-in does not implement
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

// ---- heuristic preferences ----------------------------------------------------------------------

extern "C" cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  LT_ENTER;
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  cublasLtMatmulPreference_t p = new cublasLtMatmulPreferenceOpaque_t();
  reg().prefs[p] = Pref{0, CUBLASLT_SEARCH_BEST_FIT, {256, 256, 256, 256}};
  *pref = p;
  return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  LT_ENTER;
  if (pref == nullptr) return CUBLAS_STATUS_SUCCESS;
  if (reg().prefs.erase(pref) == 0) return CUBLAS_STATUS_INVALID_VALUE;
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                               cublasLtMatmulPreferenceAttributes_t attr,
                                                               const void *buf, size_t sizeInBytes) {
  LT_ENTER;
  Pref *p = pref_of(pref);
  if (p == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
  case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
    return read_attr(buf, sizeInBytes, &p->max_workspace) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
  case CUBLASLT_MATMUL_PREF_SEARCH_MODE: {
    uint32_t v;
    if (!read_attr(buf, sizeInBytes, &v) || v > 9) return CUBLAS_STATUS_INVALID_VALUE;
    if (v != CUBLASLT_SEARCH_BEST_FIT) return CUBLAS_STATUS_NOT_SUPPORTED;
    p->search_mode = v;
    return CUBLAS_STATUS_SUCCESS;
  }
  case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK: {
    uint32_t v; // filters the heuristic's answers; the one algorithm here satisfies any of them
    return read_attr(buf, sizeInBytes, &v) ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
  }
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
  case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: {
    // the alignment the caller's pointers are guaranteed: the answer is an algorithm that needs no more,
    // and cublasLtMatmul refuses pointers less aligned than its algorithm was chosen for
    uint32_t v;
    if (!read_attr(buf, sizeInBytes, &v)) return CUBLAS_STATUS_INVALID_VALUE;
    p->min_align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = v == 0 ? 1 : v;
    return CUBLAS_STATUS_SUCCESS;
  }
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

// ---- heuristic and matmul -----------------------------------------------------------------------

extern "C" cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle,
                                                         cublasLtMatmulDesc_t operationDesc,
                                                         cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                                         cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                                         cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                                         cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                                         int *returnAlgoCount) {
  LT_ENTER;
  if (!handle_ok(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  const Pref *pref = pref_of(preference);
  if (requestedAlgoCount <= 0 || heuristicResultsArray == nullptr || returnAlgoCount == nullptr || pref == nullptr)
    return CUBLAS_STATUS_INVALID_VALUE;
  Problem p;
  const cublasStatus_t st = check_problem(operationDesc, Adesc, Bdesc, Cdesc, Ddesc, &p);
  if (st != CUBLAS_STATUS_SUCCESS) {
    *returnAlgoCount = 0;
    return st;
  }
  // HS_CUDA_EMU_NO_EPILOGUE_ALGO=1 (read at each call): no algorithm for a problem with an epilogue,
  // as the real heuristic may answer for some shapes, so that a caller's fallback path runs in a test
  const char *no_epi = getenv("HS_CUDA_EMU_NO_EPILOGUE_ALGO");
  if (no_epi && strcmp(no_epi, "1") == 0 && p.epilogue != CUBLASLT_EPILOGUE_DEFAULT) {
    *returnAlgoCount = 0;
    return CUBLAS_STATUS_SUCCESS;
  }
  cublasLtMatmulHeuristicResult_t &r = heuristicResultsArray[0];
  memset(&r, 0, sizeof r);
  r.workspaceSize = split_k_workspace(p, pref->max_workspace);
  r.algo.data[0] = kAlgoMagic;
  r.algo.data[1] = r.workspaceSize;
  r.algo.data[2] = pack_alignments(pref->min_align);
  r.state = CUBLAS_STATUS_SUCCESS;
  r.wavesCount = 1.0f;
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

extern "C" cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                                         const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
                                         const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
                                         const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                                         cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
                                         void *workspace, size_t workspaceSizeInBytes, cudaStream_t stream) {
  LT_ENTER;
  if (!handle_ok(lightHandle)) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (alpha == nullptr || beta == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  Problem p;
  const cublasStatus_t st = check_problem(computeDesc, Adesc, Bdesc, Cdesc, Ddesc, &p);
  if (st != CUBLAS_STATUS_SUCCESS) return st;
  float a_scale, b_scale; // host pointer mode: the scalars are read now
  memcpy(&a_scale, alpha, sizeof a_scale);
  memcpy(&b_scale, beta, sizeof b_scale);
  const bool empty = p.m == 0 || p.n == 0;
  const bool read_ab = !empty && p.k != 0;
  const bool read_c = !empty && b_scale != 0.0f;
  if ((read_ab && (A == nullptr || B == nullptr)) || (!empty && D == nullptr) || (read_c && C == nullptr))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (C == D && read_c && (p.c.ld != p.d.ld || p.c.stride != p.d.stride)) return CUBLAS_STATUS_INVALID_VALUE;
  static const uint32_t kDefaultAlign[4] = {256, 256, 256, 256};
  uint64_t aligns = pack_alignments(kDefaultAlign);
  if (algo == nullptr) {
    p.workspace_needed = 0; // the implicit heuristic query with default preferences: no workspace
  } else {
    if (algo->data[0] != kAlgoMagic) return CUBLAS_STATUS_INVALID_VALUE; // not from the heuristic
    p.workspace_needed = static_cast<size_t>(algo->data[1]);
    aligns = algo->data[2];
  }
  if (workspaceSizeInBytes < p.workspace_needed) return CUBLAS_STATUS_INVALID_VALUE;
  if (p.workspace_needed != 0 && (workspace == nullptr || reinterpret_cast<uintptr_t>(workspace) % 256 != 0))
    return CUBLAS_STATUS_INVALID_VALUE; // the workspace must be 256-byte aligned
  cudaError_t err;
  CUstream_st *s = resolve_stream(stream, &err);
  if (s == nullptr) return CUBLAS_STATUS_EXECUTION_FAILED;
  if (empty) return CUBLAS_STATUS_SUCCESS;
  if (read_ab) {
    check_memory("A", A, span_of(p.a, p.batch), elem_size(p.a.type));
    check_memory("B", B, span_of(p.b, p.batch), elem_size(p.b.type));
  }
  if (read_c) check_memory("C", C, span_of(p.c, p.batch), elem_size(p.c.type)); // ld 0: one column, broadcast
  check_memory("D", D, span_of(p.d, p.batch), elem_size(p.d.type));
  if (uses_bias(p.epilogue)) { // BGRADB's vector has one value per column of D, the others one per row
    const uint64_t len = static_cast<uint64_t>(p.epilogue & kEpiBgradB ? p.n : p.m);
    const Layout bias{p.d.type, 0, len, 1, static_cast<int64_t>(len), static_cast<int32_t>(p.batch), p.bias_stride};
    if (reinterpret_cast<uintptr_t>(p.bias) % 16 != 0)
      fatal("cublasLtMatmul: the bias vector (CUBLASLT_MATMUL_DESC_BIAS_POINTER) at %p is not 16-byte aligned; "
            "on a GPU the epilogue's vector loads would fault with a misaligned address (the MIN_ALIGNMENT "
            "preferences do not cover the bias)",
            p.bias);
    check_memory("the bias vector (CUBLASLT_MATMUL_DESC_BIAS_POINTER)", p.bias, span_of(bias, p.batch),
                 elem_size(p.d.type));
  }
  // A pointer less aligned than the algorithm was chosen for (the preference's MIN_ALIGNMENT, 256 bytes
  // by default): NOT_SUPPORTED, as cuBLASLt answers it; the caller must tell the heuristic its pointers'
  // alignment. (After the memory checks, which report a pointer a GPU would fault on.)
  const void *mats[4] = {read_ab ? A : nullptr, read_ab ? B : nullptr, read_c ? C : nullptr, empty ? nullptr : D};
  for (int i = 0; i < 4; i++)
    if (mats[i] != nullptr && reinterpret_cast<uintptr_t>(mats[i]) % alignment_of(aligns, i) != 0)
      return CUBLAS_STATUS_NOT_SUPPORTED;
  if (p.workspace_needed != 0)
    check_memory("the workspace", workspace, Span{0, static_cast<int64_t>(p.workspace_needed)}, 1);
  char label[160];
  snprintf(label, sizeof label, "cublasLtMatmul m=%" PRId64 " n=%" PRId64 " k=%" PRId64 " batch=%" PRId64 "%s%s%s", p.m,
           p.n, p.k, p.batch, p.ta ? " A^T" : "", p.tb ? " B^T" : "",
           p.a.type == CUDA_R_16F ? " fp16" : p.a.type == CUDA_R_16BF ? " bf16" : p.tf32 ? " tf32" : "");
  const void *a = A, *b = B, *c = read_c ? C : nullptr;
  void *d = D;
  if (!read_ab) p.k = 0;
  enqueue(s, label, [p, a_scale, b_scale, a, b, c, d, workspace] { run_gemm(p, a_scale, b_scale, a, b, c, d, workspace); });
  return CUBLAS_STATUS_SUCCESS;
}
