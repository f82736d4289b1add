// Stand-in for CUDA's mma.h on the emulated device (tests only; tests/cuda_emu/, docs/gpu-emulation.md):
// the subset of nvcuda::wmma (CUDA C++ Programming Guide, "Warp Matrix Functions") hetseq kernels use.
//
//   fragment<matrix_a | matrix_b, 16, 16, 16, __nv_bfloat16 | __half, row_major | col_major>
//   fragment<matrix_a | matrix_b, 16, 16, 8, precision::tf32, row_major | col_major>, __float_to_tf32
//   fragment<accumulator, 16, 16, 16 | 8, float>
//   fill_fragment, load_matrix_sync, store_matrix_sync (mem_row_major | mem_col_major), mma_sync
//
// As on a GPU, the _sync functions are warp-collective: all 32 lanes of the warp call them together,
// at the same place, with the same arguments. The emulator checks that (runtime/block.cc,
// warp_collective) and reports a lane that is missing (returned, partial warp), lanes that diverge
// (another call site, another warp-level function) or that pass other arguments; it also reports a
// pointer that is not 256-bit (32-byte) aligned and an ldm that is not a multiple of 16 bytes (8
// elements of a 16-bit type, 4 of float) - the Guide's preconditions. Loads and stores do not order
// memory between the lanes (below: a tile that changes while the warp arrives at a load is reported, a
// stored tile reads NaN until the last lane has gone on), as they do not on a GPU.
//
// The fragment's element layout is opaque on a GPU; here lane l holds in x[t] (t < num_elements: 8,
// or 4 for the 16 x 8 and 8 x 16 TF32 operands) the element e = l + 32 t of the matrix in row-major
// order: row e / cols, column e % cols of A [m][k], B [k][n] or C [m][n]. Under
// HS_CUDA_EMU_WMMA_LAYOUT=shuffled it holds element (e·m_f + a_f) mod n instead (n = rows·cols, m_f
// odd: a permutation), with another m_f, a_f for each kind of fragment (A or B, row- or column-major;
// the accumulator), as a GPU's layouts differ between kinds: code that reads a fragment's elements by
// position, or copies one kind of fragment into another element by element, gives other results under
// the two layouts, where code that does not depend on the layout gives the same bits
// (tests/cuda/test_wmma_layout.sh). A fragment starts with all-ones bytes (NaN), like an unwritten
// register, so an accumulator used before fill_fragment or a load gives NaN.
//
// mma_sync computes D = C + A B in fp32: each product of two 16-bit values is exact in fp32 (11 x 11
// significant bits at most; barring fp32 overflow or underflow), each element's 16 products are summed
// pairwise ((p0 + p1) + (p2 + p3)) + ..., p_k = A[m][k] B[k][n], in fp32 with rounding to nearest,
// and the sum is added to C[m][n] last. Tensor cores' order (and internal width) is unspecified;
// this order differs from a plain loop over k on purpose, so tests must compare within bounds.
// TF32 (m16n16k8): the tensor core reads the top 19 bits of each float operand (it drops the 13 low
// bits: truncation), so kernels round the loaded fragments with __float_to_tf32 (round to nearest, ties
// away from zero: PTX cvt.rna.tf32.f32) first; the 8 exact products are summed as above.
#ifndef HS_EMU_MMA_H
#define HS_EMU_MMA_H
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <type_traits>
#include "cuda_bf16.h"
#include "cuda_fp16.h"
#include "hs_emu/device_builtins.h"

namespace nvcuda {
namespace wmma {

namespace precision {
struct tf32 {}; // float storage, 11 significant bits in the product
} // namespace precision

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void> class fragment {
  static constexpr bool kHalf = K == 16 && (std::is_same<T, __half>::value || std::is_same<T, __nv_bfloat16>::value);
  static constexpr bool kTf32 = K == 8 && std::is_same<T, precision::tf32>::value;
  static_assert(M == 16 && N == 16 && (K == 16 || K == 8),
                "the emulated nvcuda::wmma has the m16n16k16 and (TF32) m16n16k8 shapes only");
  static_assert(std::is_same<Use, accumulator>::value
                    ? std::is_same<T, float>::value && std::is_void<Layout>::value
                    : (std::is_same<Use, matrix_a>::value || std::is_same<Use, matrix_b>::value) && (kHalf || kTf32) &&
                          (std::is_same<Layout, row_major>::value || std::is_same<Layout, col_major>::value),
                "the emulated nvcuda::wmma has matrix_a / matrix_b of __half or __nv_bfloat16 (k 16) or "
                "precision::tf32 (k 8), row_major or col_major, and float accumulators (no layout)");

public:
  // which layout the emulator gives this fragment (emu::element): A row/col 0/1, B row/col 2/3, C 4
  static constexpr int kind = std::is_same<Use, accumulator>::value ? 4
                              : (std::is_same<Use, matrix_b>::value ? 2 : 0) + (std::is_same<Layout, col_major>::value ? 1 : 0);
  using element_type = typename std::conditional<std::is_same<T, precision::tf32>::value, float, T>::type;
  // the matrix this fragment holds: A M x K, B K x N, C M x N
  static constexpr int rows = std::is_same<Use, matrix_b>::value ? K : M;
  static constexpr int cols = std::is_same<Use, matrix_a>::value ? K : N;
  enum { num_elements = rows * cols / 32 };
  element_type x[num_elements];
  fragment() { memset(x, 0xff, sizeof x); }
};

// Rounds a float to TF32 as cvt.rna.tf32.f32: to nearest at 2^-10 of the leading bit, ties away from
// zero, the 13 low bits cleared (NaN and infinities unchanged).
inline float __float_to_tf32(float in) {
  uint32_t b;
  memcpy(&b, &in, 4);
  if ((b & 0x7f800000u) != 0x7f800000u) b = (b + 0x1000u) & ~0x1fffu;
  float out;
  memcpy(&out, &b, 4);
  return out;
}

namespace emu {

constexpr int kLanes = 32;

// HS_CUDA_EMU_WMMA_LAYOUT: "rowmajor" (the default) or "shuffled" (above), read once; another value stops
// the process with a message
bool wmma_layout_shuffled();

// The matrix element (row-major index, < n = 128 or 256) that x[t] of lane l holds in a fragment of kind
// `kind` (fragment::kind)
inline int element(int kind, int l, int t, int n) {
  const int e = l + kLanes * t;
  if (!wmma_layout_shuffled()) return e;
  static constexpr int mul[5] = {77, 45, 109, 21, 37}, add[5] = {5, 29, 100, 62, 11}; // odd multipliers
  return (e * mul[kind] + add[kind]) & (n - 1);
}

template <int K> using Acc = fragment<accumulator, 16, 16, K, float>;

inline float value(float v) { return v; }
inline float tf32_operand(float v) { // what the tensor core multiplies: the top 19 bits
  uint32_t b;
  memcpy(&b, &v, 4);
  if ((b & 0x7f800000u) != 0x7f800000u) b &= ~0x1fffu;
  float out;
  memcpy(&out, &b, 4);
  return out;
}
inline float value(__half v) { return __half2float(v); }
inline float value(__nv_bfloat16 v) { return __bfloat162float(v); }
inline void assign(float &d, float v) { d = v; }
inline void assign(__half &d, float v) { d = __float2half(v); } // exact: v was read from a __half
inline void assign(__nv_bfloat16 &d, float v) { d = __float2bfloat16(v); }

inline char *message() {
  static thread_local char buf[512];
  return buf;
}

// The element (r, c) of a 16 x 16 matrix at p: row-major p[r ldm + c], column-major p[c ldm + r].
// Memory is read and written with memcpy: the caller's pointer may alias storage of another type.
inline size_t offset(int r, int c, unsigned ldm, bool col) {
  return col ? static_cast<size_t>(c) * ldm + r : static_cast<size_t>(r) * ldm + c;
}

// One lane's arguments to a load or store (its own fragment, the shared pointer and stride).
struct PendingStore;
struct MemArgs {
  void *frag;
  const void *ptr;
  unsigned ldm;
  int layout;            // 0 row-major, 1 column-major
  bool hashed;           // a load: this lane arrived first, and noted
  uint64_t hash;         // the tile's hash then (load_own)
  PendingStore *pending; // a store: the tile to write when the last lane goes on (store_resume)
};

template <class T> const char *check_mem(void *const *args, const char *what) {
  const MemArgs &a0 = *static_cast<const MemArgs *>(args[0]);
  for (int l = 1; l < kLanes; l++) {
    const MemArgs &a = *static_cast<const MemArgs *>(args[l]);
    if (a.ptr != a0.ptr || a.ldm != a0.ldm || a.layout != a0.layout) {
      snprintf(message(), 512,
               "lane %d passes (%p, ldm %u, %s) but lane 0 (%p, ldm %u, %s): every lane of the warp must pass "
               "the same arguments (it is warp-collective)",
               l, a.ptr, a.ldm, a.layout ? "col-major" : "row-major", a0.ptr, a0.ldm,
               a0.layout ? "col-major" : "row-major");
      return message();
    }
  }
  if (reinterpret_cast<uintptr_t>(a0.ptr) % 32 != 0) {
    snprintf(message(), 512, "%s pointer %p is not 256-bit (32-byte) aligned (CUDA Programming Guide, \"Warp "
             "Matrix Functions\": mptr must be a 256-bit aligned pointer)", what, a0.ptr);
    return message();
  }
  const unsigned mult = 16 / sizeof(T);
  if (a0.ldm % mult != 0) {
    snprintf(message(), 512, "ldm %u is not a multiple of %u elements (16 bytes) of the %zu-byte element type "
             "(CUDA Programming Guide, \"Warp Matrix Functions\")", a0.ldm, mult, sizeof(T));
    return message();
  }
  return nullptr;
}

// The lane of the warp the calling emulated thread is (threads in linear order, 32 a warp).
inline int lane_index() {
  const ::hs_emu::ThreadCoords &c = ::hs_emu::coords("nvcuda::wmma");
  return static_cast<int>((c.tid.x + c.bdim.x * (c.tid.y + c.bdim.y * c.tid.z)) % kLanes);
}

// The byte offset of x[t] of lane l's fragment F in the 16 x 16 (or 16 x 8, 8 x 16) matrix at ldm.
template <class F> size_t element_offset(int l, int t, unsigned ldm, int layout) {
  const int e = element(F::kind, l, t, F::rows * F::cols);
  return offset(e / F::cols, e % F::cols, ldm, layout != 0) * sizeof(typename F::element_type);
}

// On a GPU a WMMA load or store does not order memory between the lanes of the warp, and the fragments'
// layout is opaque: any lane may load any element of the tile, and hold any element of a stored one.
// So a tile the lanes wrote needs __syncwarp() before the load (__syncthreads() where other warps wrote
// it), and the lanes need __syncwarp() after a store before they read the stored tile
// (kernels/tile_mma.cuh's rules). Here, where lanes run one at a time in a seeded order:
// - a lane loads its elements as it arrives, and the first lane to arrive notes a hash of the whole
//   tile; when the last lane has arrived, a tile that changed since is reported (complete_load);
// - a store writes NaN (all-ones bytes) over the whole tile, and the tile's values only when the last
//   lane of the warp goes on after it (complete_store, store_resume): a lane that reads the tile
//   before a __syncwarp() reads NaN.

// The tile's hash: a column-major tile is the row-major cols x rows matrix at the same ldm.
template <class F> uint64_t tile_hash_of(const MemArgs &a) {
  return ::hs_emu::matrix_hash(0x9E3779B97F4A7C15ull, a.ptr, a.layout ? F::cols : F::rows, a.layout ? F::rows : F::cols,
                               a.ldm, sizeof(typename F::element_type));
}

template <class F> void load_own(MemArgs &a, int l) {
  using T = typename F::element_type;
  T *x = static_cast<T *>(a.frag);
  const unsigned char *p = static_cast<const unsigned char *>(a.ptr);
  for (int t = 0; t < F::num_elements; t++) memcpy(&x[t], p + element_offset<F>(l, t, a.ldm, a.layout), sizeof(T));
  a.hashed = ::hs_emu::collective_arrived() == 0; // the first lane: a write after it is a write after any
  if (a.hashed) a.hash = tile_hash_of<F>(a);
}

// F: the fragment type (its rows, cols, element type). Every lane loaded its elements as it arrived,
// the first one hashed the tile (load_own): the tile must be what it was then.
template <class F> const char *complete_load(void *const *args) {
  using T = typename F::element_type;
  if (const char *err = check_mem<T>(args, "the source")) return err;
  const uint64_t now = tile_hash_of<F>(*static_cast<const MemArgs *>(args[0]));
  for (int l = 0; l < kLanes; l++) {
    const MemArgs &a = *static_cast<const MemArgs *>(args[l]);
    if (a.hashed && a.hash != now) {
      snprintf(message(), 512,
               "the %d x %d tile at %p (ldm %u, %s) changed after lane %d arrived and before the whole warp had: "
               "a thread wrote it without __syncwarp() (or __syncthreads() where other warps wrote it) between "
               "its writes and this load; on a GPU the load does not order memory between lanes, and any lane "
               "may load any element (kernels/tile_mma.cuh's rules)",
               F::rows, F::cols, a.ptr, a.ldm, a.layout ? "col-major" : "row-major", l);
      return message();
    }
  }
  return nullptr;
}

// A stored tile, written when the last lane of the warp goes on (store_resume).
struct PendingStore {
  void *ptr;
  unsigned ldm;
  int layout;
  int waiting; // lanes still to go on
  float values[256];
};

// Checks the arguments, gathers the tile from every lane's fragment and writes NaN (all-ones bytes)
// over it in memory.
template <class F> const char *complete_store(void *const *args) {
  if (const char *err = check_mem<float>(args, "the destination")) return err;
  const MemArgs &a0 = *static_cast<const MemArgs *>(args[0]);
  PendingStore *ps = new PendingStore{const_cast<void *>(a0.ptr), a0.ldm, a0.layout, kLanes, {}};
  for (int l = 0; l < kLanes; l++) {
    MemArgs &a = *static_cast<MemArgs *>(args[l]);
    const float *x = static_cast<const float *>(a.frag);
    for (int t = 0; t < F::num_elements; t++) {
      const int e = element(F::kind, l, t, F::rows * F::cols);
      ps->values[(e / F::cols) * 16 + e % F::cols] = x[t];
    }
    a.pending = ps;
  }
  unsigned char *p = static_cast<unsigned char *>(ps->ptr);
  for (int r = 0; r < F::rows; r++)
    for (int c = 0; c < F::cols; c++) memset(p + offset(r, c, ps->ldm, ps->layout != 0) * sizeof(float), 0xff, sizeof(float));
  return nullptr;
}

// A lane goes on after a store; the last one writes the tile.
template <class F> void store_resume(MemArgs &a) {
  PendingStore *ps = a.pending;
  if (ps == nullptr || --ps->waiting > 0) return;
  unsigned char *p = static_cast<unsigned char *>(ps->ptr);
  for (int r = 0; r < F::rows; r++)
    for (int c = 0; c < F::cols; c++)
      memcpy(p + offset(r, c, ps->ldm, ps->layout != 0) * sizeof(float), &ps->values[r * 16 + c], sizeof(float));
  delete ps;
}

struct MmaArgs {
  void *d;
  const void *a, *b, *c;
};

// D = C + A B for the warp: gathers A, B, C from all lanes' fragments first (a lane's d may be its c).
// T: the operands' element type (float for TF32, whose operands the tensor core truncates), K: 16 or 8,
// KA and KB: the kinds of the A and B fragments (fragment::kind).
template <class T, int K, int KA, int KB> const char *complete_mma(void *const *args) {
  float A[16][K], B[K][16], C[16][16];
  constexpr bool tf32 = std::is_same<T, float>::value;
  for (int l = 0; l < kLanes; l++) {
    const MmaArgs &m = *static_cast<const MmaArgs *>(args[l]);
    for (int t = 0; t < 16 * K / kLanes; t++) {
      const int ea = element(KA, l, t, 16 * K), eb = element(KB, l, t, 16 * K);
      const float a = value(static_cast<const T *>(m.a)[t]), b = value(static_cast<const T *>(m.b)[t]);
      A[ea / K][ea % K] = tf32 ? tf32_operand(a) : a;
      B[eb / 16][eb % 16] = tf32 ? tf32_operand(b) : b;
    }
    for (int t = 0; t < 256 / kLanes; t++) {
      const int e = element(4, l, t, 256);
      C[e / 16][e % 16] = static_cast<const float *>(m.c)[t];
    }
  }
  float D[16][16];
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 16; j++) {
      float s[K];
      for (int k = 0; k < K; k++) s[k] = A[i][k] * B[k][j]; // exact in fp32
      for (int w = 1; w < K; w *= 2)                         // pairwise: ((p0 + p1) + (p2 + p3)) + ...
        for (int k = 0; k < K; k += 2 * w) s[k] = s[k] + s[k + w];
      D[i][j] = C[i][j] + s[0];
    }
  for (int l = 0; l < kLanes; l++) {
    float *d = static_cast<float *>(static_cast<const MmaArgs *>(args[l])->d);
    for (int t = 0; t < 256 / kLanes; t++) {
      const int e = element(4, l, t, 256);
      d[t] = D[e / 16][e % 16];
    }
  }
  return nullptr;
}

template <class L> constexpr int layout_of() { return std::is_same<L, col_major>::value ? 1 : 0; }

} // namespace emu

// Sets every element this lane holds (not warp-collective on the emulator; call it from every lane
// with the same value, as the Guide says one ordinarily does).
template <class Use, int M, int N, int K, class T, class L, class V>
inline void fill_fragment(fragment<Use, M, N, K, T, L> &f, const V &v) {
  for (int t = 0; t < f.num_elements; t++) emu::assign(f.x[t], static_cast<float>(v));
}

template <class Use, int K, class T, class L>
inline void load_matrix_sync(fragment<Use, 16, 16, K, T, L> &f,
                             const typename fragment<Use, 16, 16, K, T, L>::element_type *mptr, unsigned ldm,
                             const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  static_assert(!std::is_same<Use, accumulator>::value, "an accumulator load takes a layout_t");
  emu::MemArgs args{f.x, mptr, ldm, emu::layout_of<L>(), false, 0, nullptr};
  emu::load_own<fragment<Use, 16, 16, K, T, L>>(args, emu::lane_index());
  ::hs_emu::warp_collective("nvcuda::wmma::load_matrix_sync", emu::complete_load<fragment<Use, 16, 16, K, T, L>>, &args,
                            file, line);
}

template <int K>
inline void load_matrix_sync(emu::Acc<K> &f, const float *mptr, unsigned ldm, layout_t layout,
                             const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  emu::MemArgs args{f.x, mptr, ldm, layout == mem_col_major ? 1 : 0, false, 0, nullptr};
  emu::load_own<emu::Acc<K>>(args, emu::lane_index());
  ::hs_emu::warp_collective("nvcuda::wmma::load_matrix_sync", emu::complete_load<emu::Acc<K>>, &args, file, line);
}

template <int K>
inline void store_matrix_sync(float *mptr, const emu::Acc<K> &f, unsigned ldm, layout_t layout,
                              const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  emu::MemArgs args{const_cast<float *>(f.x), mptr, ldm, layout == mem_col_major ? 1 : 0, false, 0, nullptr};
  ::hs_emu::warp_collective("nvcuda::wmma::store_matrix_sync", emu::complete_store<emu::Acc<K>>, &args, file, line);
  emu::store_resume<emu::Acc<K>>(args);
}

template <int K, class T, class LA, class LB>
inline void mma_sync(emu::Acc<K> &d, const fragment<matrix_a, 16, 16, K, T, LA> &a,
                     const fragment<matrix_b, 16, 16, K, T, LB> &b, const emu::Acc<K> &c,
                     const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
  using FA = fragment<matrix_a, 16, 16, K, T, LA>;
  using FB = fragment<matrix_b, 16, 16, K, T, LB>;
  emu::MmaArgs args{d.x, a.x, b.x, c.x};
  ::hs_emu::warp_collective("nvcuda::wmma::mma_sync", emu::complete_mma<typename FA::element_type, K, FA::kind, FB::kind>,
                            &args, file, line);
}

} // namespace wmma
} // namespace nvcuda

#endif
