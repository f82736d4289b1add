/* Multi-tensor ops of the CUDA backend over the flat parameter/gradient buffers: squared norms, scaling
 * (gradient clipping) and the optimizers (Adam, Adadelta, SGD, LAMB). CPU references:
 * src/backend/cpu/cpu_multi_tensor.c (the same family, the same ops); the per-element
 * formulas and the coefficient computations are kernels/math/optim_math.h, shared with the CPU.
 *
 * The tensor table (hs_tensor_span[count], sorted by offset, tensors disjoint) lives in device memory
 * and the host never reads it, so no grid depends on a tensor's size: every kernel runs on a fixed grid
 * of HS_TENSOR_GRID blocks (kernels/hs_launch.h). The flat buffer is cut into chunks of
 * HS_TENSOR_CHUNK floats; block b takes chunks b, b + HS_TENSOR_GRID, ... and in each the pieces of
 * the tensors that overlap it (walk_pieces; a binary search of the table finds the first). Every block
 * gets the same work within one chunk whatever the tensors' sizes: one block per slice of a tensor, as
 * before, left BERT-large's 31M-element word embedding to 64 blocks that ran long after the others
 * (on an H200, LAMB took about 4x its memory time). A thread moves four values per step, with 16-byte loads
 * where the pointers are aligned (the parameter arena's tensors start at multiples of 16 floats).
 *
 * Norms are deterministic and fixed by the layout alone: a thread sums the squares of its elements of
 * its pieces of a tensor in order (double), the block adds its threads' sums by a fixed tree into a
 * per-(tensor, block) partial in scratch, then one thread per tensor adds its blocks' partials in the
 * order of the tensor's chunks (tensor_sum). No float atomics. The grid and the chunk are constants, not
 * properties of the GPU, so GPUs of different kinds in one job add in the same order. The order differs
 * from the CPU's (blocks of 16384 elements), far below float precision.
 *
 * Coefficients that depend on the hyper-parameters alone (1-beta, lr·wd, step sizes) are computed once
 * on the host with the same hs_*_make_coefs the CPU calls, once for tensors that take weight decay and
 * once for those that do not; each block picks its tensor's by the table's decay flag. LAMB's
 * per-tensor step depends on the tensor's norms, so it is computed on the device (hs_lamb_step) by the
 * stage-2 kernel: stage 1, the norms and stage 2 are all enqueued, with no host round trip.
 *
 * The optimizers also keep the parameter arena's 16-bit copy (src/backend/cuda/cuda_shadow.c, the one
 * the bf16/fp16 products read): where p has one, the kernel that writes p[i] writes round(p[i]) into it
 * too, with the rounding of src/util/lowp.h that a conversion before the product would apply, so the
 * products see the same bits and no weight is converted per GEMM. */
#include "hs_cuda.h"
#include "hs_launch.h"
#include "warp.cuh"
#include "slots.cuh"
#include "quads.cuh"

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_ops.h"
#include "math/optim_math.h"
#include "util/lowp.h"

namespace {

/* ---- the walk over the table ------------------------------------------------------------------------- */

/* The first tensor of table[count] (sorted by offset, disjoint) that ends after flat position pos:
 * ends are non-decreasing, so a binary search. count if none. */
__device__ __forceinline__ int first_ending_after(const hs_tensor_span *table, int count, int64_t pos) {
  int lo = 0, hi = count;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (table[mid].offset + table[mid].numel > pos) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/* f(i, t, lo, hi) for every piece of this block's chunks: chunk c (flat positions [c·HS_TENSOR_CHUNK,
 * (c+1)·HS_TENSOR_CHUNK)) belongs to block c mod gridDim.x; its pieces are the parts [lo, hi) (flat) of
 * the tensors that overlap it, in table order. A block's pieces come in flat order. Uniform across the
 * block (every thread walks the same pieces), so f may synchronise the block. */
template <class F> __device__ __forceinline__ void walk_pieces(const hs_tensor_span *table, int count, F &&f) {
  if (count <= 0) return;
  const int64_t end = table[count - 1].offset + table[count - 1].numel;
  for (int64_t c = blockIdx.x; c * HS_TENSOR_CHUNK < end; c += gridDim.x) {
    const int64_t c_lo = c * HS_TENSOR_CHUNK, c_hi = c_lo + HS_TENSOR_CHUNK;
    for (int i = first_ending_after(table, count, c_lo); i < count && table[i].offset < c_hi; i++) {
      const hs_tensor_span t = table[i];
      const int64_t lo = t.offset > c_lo ? t.offset : c_lo;
      const int64_t hi = t.offset + t.numel < c_hi ? t.offset + t.numel : c_hi;
      if (lo < hi) f(i, t, lo, hi);
    }
  }
}

/* The elements of a piece [lo, hi) by quads: thread x takes the quads lo + 4x, lo + 4x + 4·HS_BLOCK, ...
 * (the last one possibly short): q(first index, elements, vector) with `vector` true where the quad is
 * whole and 16-byte aligned (vec: the host found every base pointer aligned; lo a multiple of 4). Which
 * thread owns an element, and the order it takes them in, do not depend on `vector`. */
template <class Q> __device__ __forceinline__ void piece_quads(int64_t lo, int64_t hi, bool vec, Q &&q) {
  const bool v4 = vec && lo % HS_VEC == 0;
  for (int64_t i = lo + (int64_t)threadIdx.x * HS_VEC; i < hi; i += (int64_t)HS_BLOCK * HS_VEC) {
    const int n = hi - i < HS_VEC ? (int)(hi - i) : HS_VEC;
    q(i, n, v4 && n == HS_VEC);
  }
}

/* The 16-bit copy of the parameters an optimizer keeps (h NULL: none): after p[i] is updated,
 * h[i] = round(p[i]) in bfloat16 (bf16 != 0) or IEEE half. */
struct half_copy {
  uint16_t *h;
  int bf16;
  /* h[i..i+n) = round(p[0..n)): one 8-byte store where `vector` */
  __device__ void put4(int64_t i, const float (&p)[HS_VEC], int n, bool vector) const {
    if (h) store4_half(h, (size_t)i, p, n, vector, bf16);
  }
  /* the bytes it adds per element (the device-op ledger) */
  uint64_t bytes() const { return h ? sizeof(uint16_t) : 0; }
  bool aligned() const { return !h || hs_aligned(h, 8); }
};

/* The copy of the arena p starts (hs_cuda_shadow_target), if the products read one. */
static half_copy half_copy_of(const float *p) {
  half_copy c{nullptr, 0};
  c.h = hs_cuda_shadow_target(p, &c.bf16);
  return c;
}

/* ---- element-wise passes over the table --------------------------------------------------------------- */

/* op(t, i, n, vector) for every quad of every tensor; grid HS_TENSOR_GRID. */
template <class Op>
__global__ void __launch_bounds__(HS_BLOCK) for_each_kernel(const hs_tensor_span *table, int count, bool vec, Op op) {
  op.resolve(); /* the per-update values from their slots (a graph region), once per thread */
  walk_pieces(table, count, [&](int, const hs_tensor_span &t, int64_t lo, int64_t hi) {
    piece_quads(lo, hi, vec, [&](int64_t i, int n, bool vector) { op(t, i, n, vector); });
  });
}

/* vec: every pointer the op reads or writes 16-byte aligned (its 16-bit copy 8-byte) */
template <class Op>
void launch_for_each(const hs_backend *be, const hs_tensor_span *table, int count, bool vec, const Op &op) {
  HS_LAUNCH(HS_TENSOR_GRID, HS_BLOCK, 0, hs_cuda_stream(be), for_each_kernel<Op>)(table, count, vec, op);
}

/* x *= a (clipping) */
struct scale_op {
  float *flat;
  float a;
  const float *a_slot; /* a in device memory (a graph region), or NULL */
  __device__ void resolve() { a = hs_slot(a_slot, a), a_slot = nullptr; }
  __device__ void operator()(const hs_tensor_span &, int64_t i, int n, bool vector) const {
    float x[HS_VEC];
    load4(x, flat, i, n, vector);
    for (int j = 0; j < HS_VEC; j++) x[j] *= a;
    store4(flat, i, x, n, vector);
  }
};

/* x = 0, whatever x held (stores only) */
struct zero_op {
  float *flat;
  __device__ void resolve() {}
  __device__ void operator()(const hs_tensor_span &, int64_t i, int n, bool vector) const {
    float x[HS_VEC];
    for (int j = 0; j < HS_VEC; j++) x[j] = 0.0f;
    store4(flat, i, x, n, vector);
  }
};

/* Adam: coefficients of the tensors whose decay flag is set / not set (the same when the decay applies
 * to every tensor). */
struct adam_op {
  float *p;
  const float *g;
  float *m, *v;
  hs_adam_coefs flagged, unflagged;
  const hs_adam_coefs *slot; /* {flagged, unflagged} in device memory (a graph region), or NULL */
  __device__ void resolve() {
    if (slot) flagged = slot[0], unflagged = slot[1], slot = nullptr;
  }
  half_copy half;
  __device__ void operator()(const hs_tensor_span &t, int64_t i, int n, bool vector) const {
    float P[HS_VEC], G[HS_VEC], M[HS_VEC], V[HS_VEC];
    load4(P, p, i, n, vector), load4(G, g, i, n, vector), load4(M, m, i, n, vector), load4(V, v, i, n, vector);
    const hs_adam_coefs *c = t.decay ? &flagged : &unflagged;
    for (int j = 0; j < HS_VEC; j++) hs_adam_elem(&P[j], G[j], &M[j], &V[j], c);
    store4(p, i, P, n, vector), store4(m, i, M, n, vector), store4(v, i, V, n, vector);
    half.put4(i, P, n, vector);
  }
};

/* Adadelta: weight decay on every tensor */
struct adadelta_op {
  float *p;
  const float *g;
  float *sq, *acc;
  hs_adadelta_coefs c;
  const hs_adadelta_coefs *slot; /* c in device memory (a graph region), or NULL */
  __device__ void resolve() {
    if (slot) c = *slot, slot = nullptr;
  }
  half_copy half;
  __device__ void operator()(const hs_tensor_span &, int64_t i, int n, bool vector) const {
    float P[HS_VEC], G[HS_VEC], S[HS_VEC], A[HS_VEC];
    load4(P, p, i, n, vector), load4(G, g, i, n, vector), load4(S, sq, i, n, vector), load4(A, acc, i, n, vector);
    for (int j = 0; j < HS_VEC; j++) hs_adadelta_elem(&P[j], G[j], &S[j], &A[j], &c);
    store4(p, i, P, n, vector), store4(sq, i, S, n, vector), store4(acc, i, A, n, vector);
    half.put4(i, P, n, vector);
  }
};

/* SGD: buf may be NULL (no momentum buffer) */
struct sgd_op {
  float *p;
  const float *g;
  float *buf;
  float lr, momentum, weight_decay;
  int first_step;
  const float *lr_slot; /* lr in device memory (a graph region), or NULL */
  __device__ void resolve() { lr = hs_slot(lr_slot, lr), lr_slot = nullptr; }
  half_copy half;
  __device__ void operator()(const hs_tensor_span &, int64_t i, int n, bool vector) const {
    float P[HS_VEC], G[HS_VEC], B[HS_VEC];
    load4(P, p, i, n, vector), load4(G, g, i, n, vector);
    if (buf) load4(B, buf, i, n, vector);
    for (int j = 0; j < HS_VEC; j++)
      hs_sgd_elem(&P[j], G[j], buf ? &B[j] : nullptr, lr, momentum, weight_decay, first_step);
    store4(p, i, P, n, vector);
    if (buf) store4(buf, i, B, n, vector);
    half.put4(i, P, n, vector);
  }
};

/* ---- per-tensor sums ---------------------------------------------------------------------------------- */

/* A reduction's partial sums: block b's sum over its pieces of tensor i goes to
 * partial[(i·HS_TENSOR_GRID + b)·W + w] (W sums per tensor, w < W). A block's pieces come in flat order, so
 * its pieces of one tensor are consecutive: the sum is written when the next tensor starts and at the
 * end. Slots of blocks that hold no piece of a tensor are neither written nor read. */
template <int W> struct tensor_partials {
  double *partial;
  int cur = -1; /* the tensor being summed (uniform across the block) */
  double s[W] = {};
  __device__ void begin(int i) {
    if (i == cur) return;
    flush();
    cur = i;
    for (int w = 0; w < W; w++) s[w] = 0.0;
  }
  __device__ void flush() {
    if (cur < 0) return;
    for (int w = 0; w < W; w++) {
      const double b = block_sum(s[w]);
      if (threadIdx.x == 0) partial[((size_t)cur * HS_TENSOR_GRID + blockIdx.x) * W + w] = b;
    }
  }
};

/* Σ of tensor t's partials (slot w of W): over the blocks that hold its chunks c0, c0+1, ..., in chunk
 * order, block (c0 + k) mod HS_TENSOR_GRID for k < min(chunks, HS_TENSOR_GRID). Fixed by the layout alone. */
template <int W>
__device__ double tensor_sum(const double *partial, int i, const hs_tensor_span &t, int w) {
  if (t.numel <= 0) return 0.0;
  const int64_t c0 = t.offset / HS_TENSOR_CHUNK, chunks = (t.offset + t.numel - 1) / HS_TENSOR_CHUNK - c0 + 1;
  const int64_t blocks = chunks < HS_TENSOR_GRID ? chunks : HS_TENSOR_GRID;
  double s = 0.0;
  for (int64_t k = 0; k < blocks; k++) s += partial[((size_t)i * HS_TENSOR_GRID + (size_t)((c0 + k) % HS_TENSOR_GRID)) * W + w];
  return s;
}

/* ---- squared norms ------------------------------------------------------------------------------------ */

/* The partials of Σ x² per tensor (double; tensor_partials<1>). Grid HS_TENSOR_GRID. */
__global__ void __launch_bounds__(HS_BLOCK)
    sumsq_partials_kernel(double *partial, const float *flat, const hs_tensor_span *table, int count, bool vec) {
  tensor_partials<1> sums{partial};
  walk_pieces(table, count, [&](int i, const hs_tensor_span &, int64_t lo, int64_t hi) {
    sums.begin(i);
    piece_quads(lo, hi, vec, [&](int64_t e, int n, bool vector) {
      float x[HS_VEC];
      load4(x, flat, e, n, vector);
      for (int j = 0; j < n; j++) sums.s[0] += (double)x[j] * (double)x[j];
    });
  });
  sums.flush();
}

/* sumsq[i] = Σ of tensor i's partials (tensor_sum), then *total = Σ_i sumsq[i] in table order (one
 * thread). One block. */
__global__ void __launch_bounds__(HS_BLOCK)
    sumsq_finish_kernel(double *sumsq, double *total, const double *partial, const hs_tensor_span *table, int count) {
  for (int i = threadIdx.x; i < count; i += HS_BLOCK) sumsq[i] = tensor_sum<1>(partial, i, table[i], 0);
  __syncthreads(); /* the block's writes of sumsq are visible to thread 0 */
  if (threadIdx.x == 0) {
    double s = 0.0;
    for (int i = 0; i < count; i++) s += sumsq[i];
    *total = s;
  }
}

/* ---- LAMB --------------------------------------------------------------------------------------------- */

/* LAMB's per-update values in device memory (a graph region): the coefficients (step count, gradient
 * divisor) and the learning rate */
struct lamb_slot {
  hs_lamb_coefs decayed, undecayed;
  double lr;
};

/* Stage 1: m, v updated; the partials of Σ p² (w = 0) and Σ u² (w = 1) per tensor (double;
 * tensor_partials<2>). Grid HS_TENSOR_GRID. */
__global__ void __launch_bounds__(HS_BLOCK)
    lamb_moments_kernel(double *partial, const float *p, const float *g, float *m, float *v,
                        const hs_tensor_span *table, int count, bool vec, hs_lamb_coefs decayed,
                        hs_lamb_coefs undecayed, const lamb_slot *slot) {
  if (slot) decayed = slot->decayed, undecayed = slot->undecayed;
  tensor_partials<2> sums{partial};
  walk_pieces(table, count, [&](int i, const hs_tensor_span &t, int64_t lo, int64_t hi) {
    sums.begin(i);
    const hs_lamb_coefs *c = t.decay ? &decayed : &undecayed;
    piece_quads(lo, hi, vec, [&](int64_t e, int n, bool vector) {
      float P[HS_VEC], G[HS_VEC], M[HS_VEC], V[HS_VEC];
      load4(P, p, e, n, vector), load4(G, g, e, n, vector), load4(M, m, e, n, vector), load4(V, v, e, n, vector);
      for (int j = 0; j < n; j++) {
        const float u = hs_lamb_moments_elem(P[j], G[j], &M[j], &V[j], c);
        sums.s[0] += (double)P[j] * (double)P[j];
        sums.s[1] += (double)u * (double)u;
      }
      store4(m, e, M, n, vector), store4(v, e, V, n, vector);
    });
  });
  sums.flush();
}

/* norms[2i] = Σ p², norms[2i+1] = Σ u² of tensor i (tensor_sum). One block. */
__global__ void __launch_bounds__(HS_BLOCK)
    lamb_norms_kernel(double *norms, const double *partial, const hs_tensor_span *table, int count) {
  for (int i = threadIdx.x; i < count; i += HS_BLOCK) {
    const hs_tensor_span t = table[i];
    norms[2 * (size_t)i] = tensor_sum<2>(partial, i, t, 0);
    norms[2 * (size_t)i + 1] = tensor_sum<2>(partial, i, t, 1);
  }
}

/* Stage 2: p -= (float)step · u, the tensor's step from its norms: lr·||p||/||u|| when it takes the trust
 * ratio (wd != 0 or trust_ratio_on_no_decay) and both norms are non-zero, else lr; in double, computed
 * by every thread of the blocks that hold a piece of the tensor, from the same two values. Grid
 * HS_TENSOR_GRID. */
__global__ void __launch_bounds__(HS_BLOCK)
    lamb_apply_kernel(float *p, const float *m, const float *v, const hs_tensor_span *table, int count, bool vec,
                      const double *norms, hs_lamb_coefs decayed, hs_lamb_coefs undecayed, double lr,
                      double weight_decay, int trust_ratio_on_no_decay, half_copy half, const lamb_slot *slot) {
  if (slot) decayed = slot->decayed, undecayed = slot->undecayed, lr = slot->lr;
  walk_pieces(table, count, [&](int i, const hs_tensor_span &t, int64_t lo, int64_t hi) {
    const double wd = t.decay ? weight_decay : 0.0;
    const float step = (float)hs_lamb_step(lr, norms[2 * (size_t)i], norms[2 * (size_t)i + 1],
                                           wd != 0.0 || trust_ratio_on_no_decay);
    const hs_lamb_coefs *c = t.decay ? &decayed : &undecayed;
    piece_quads(lo, hi, vec, [&](int64_t e, int n, bool vector) {
      float P[HS_VEC], M[HS_VEC], V[HS_VEC];
      load4(P, p, e, n, vector), load4(M, m, e, n, vector), load4(V, v, e, n, vector);
      for (int j = 0; j < HS_VEC; j++) hs_lamb_apply_elem(&P[j], M[j], V[j], step, c);
      store4(p, e, P, n, vector);
      half.put4(e, P, n, vector);
    });
  });
}

} // namespace

/* The device scratch of a reduction's partials: W doubles per (tensor, block). */
static double *partials_scratch(const hs_backend *be, int count, int w) {
  return static_cast<double *>(hs_cuda_scratch(be, ((size_t)count * HS_TENSOR_GRID * (size_t)w + 1) * sizeof(double)));
}

/* The bytes of a reduction's partials (written by its partials kernel, read by its finishing one), for
 * the device-op ledger: one set of W doubles per chunk and tensor piece at most, about
 * elements / HS_TENSOR_CHUNK + count. */
static uint64_t partials_bytes(const hs_tensor_span *table, int count, int w) {
  const uint64_t elements = hs_ledger_table_bytes(table, 1, 0);
  if (elements == HS_LEDGER_UNSIZED) return 0; /* the kernel's own row is unsized then */
  return (elements / HS_TENSOR_CHUNK + (uint64_t)count) * (uint64_t)w * sizeof(double);
}

/* sumsq[i] = Σ x² of tensor i; *total = Σ_i sumsq[i] in table order (overwritten) */
extern "C" void hs_cuda_sumsq_tensors(const hs_backend *be, double *sumsq, double *total, const float *flat,
                                      const hs_tensor_span *table, int count) {
  if (count < 0) count = 0;
  const cudaStream_t stream = hs_cuda_stream(be);
  double *partial = partials_scratch(be, count, 1);
  if (count > 0) {
    HS_LAUNCH(HS_TENSOR_GRID, HS_BLOCK, 0, stream, sumsq_partials_kernel)(partial, flat, table, count,
                                                                          hs_quads_aligned({flat}));
    HS_CUDA_LAUNCHED("sumsq_partials_kernel", /* x; the partials */
                     hs_ledger_table_bytes(table, sizeof(float), partials_bytes(table, count, 1)));
  }
  /* also with count = 0: *total = 0, as the CPU writes it */
  HS_LAUNCH(1, HS_BLOCK, 0, stream, sumsq_finish_kernel)(sumsq, total, partial, table, count);
  HS_CUDA_LAUNCHED("sumsq_finish_kernel", partials_bytes(table, count, 1) +
                                              (uint64_t)count * (sizeof(hs_tensor_span) + 2 * sizeof(double)) +
                                              sizeof(double));
}

/* x *= a over every tensor of the table */
extern "C" void hs_cuda_scale_tensors(const hs_backend *be, float *flat, float a, const hs_tensor_span *table,
                                      int count) {
  if (count <= 0) return;
  const float *a_slot = hs_cuda_slot_f32(be, a);
  if (hs_cuda_slots_only(be)) return; /* recorded: the slots only (cuda_slots.h) */
  /* not an optimizer: a parameter arena's 16-bit copy (if flat is one) is reconverted before it is read */
  hs_cuda_shadow_written(flat, 1);
  launch_for_each(be, table, count, hs_quads_aligned({flat}), scale_op{flat, a, a_slot});
  HS_CUDA_LAUNCHED("for_each_kernel<scale_op>", hs_ledger_table_bytes(table, 2 * sizeof(float), 0));
}

/* x = 0 over every tensor of the table (NaN included) */
extern "C" void hs_cuda_zero_tensors(const hs_backend *be, float *flat, const hs_tensor_span *table, int count) {
  if (count <= 0) return;
  hs_cuda_shadow_written(flat, 1); /* as scale_tensors: a parameter arena's 16-bit copy is reconverted */
  launch_for_each(be, table, count, hs_quads_aligned({flat}), zero_op{flat});
  HS_CUDA_LAUNCHED("for_each_kernel<zero_op>", hs_ledger_table_bytes(table, sizeof(float), 0));
}

/* Adam (HetSeq / fairseq), decoupled or L2 decay, on every tensor or the flagged ones */
extern "C" void hs_cuda_adam_update(const hs_backend *be, float *p, const float *g, float *m, float *v,
                                    const hs_tensor_span *table, int count, const hs_adam_hparams *h) {
  if (count <= 0) return;
  /* the CPU's per-tensor wd: h->weight_decay, or 0 on unflagged tensors when decay_flagged_only */
  const hs_adam_coefs flagged =
      hs_adam_make_coefs(h->lr, h->beta1, h->beta2, h->eps, h->weight_decay, h->step, h->decoupled);
  const hs_adam_coefs unflagged = h->decay_flagged_only
                                      ? hs_adam_make_coefs(h->lr, h->beta1, h->beta2, h->eps, 0.0, h->step, h->decoupled)
                                      : flagged;
  const hs_adam_coefs both[2] = {flagged, unflagged};
  const hs_adam_coefs *slot = (const hs_adam_coefs *)hs_cuda_slots(be, both, sizeof both);
  if (hs_cuda_slots_only(be)) return; /* recorded: the slots only (cuda_slots.h) */
  const half_copy half = half_copy_of(p);
  launch_for_each(be, table, count, hs_quads_aligned({p, g, m, v}) && half.aligned(),
                  adam_op{p, g, m, v, flagged, unflagged, slot, half});
  /* p, m, v read and written, g read (and the parameters' 16-bit copy written) */
  HS_CUDA_LAUNCHED("for_each_kernel<adam_op>", hs_ledger_table_bytes(table, 7 * sizeof(float) + half.bytes(), 0));
}

/* Adadelta (torch), weight decay on every tensor */
extern "C" void hs_cuda_adadelta_update(const hs_backend *be, float *p, const float *g, float *sq, float *acc,
                                        const hs_tensor_span *table, int count, double lr, double rho, double eps,
                                        double weight_decay) {
  if (count <= 0) return;
  const half_copy half = half_copy_of(p);
  const hs_adadelta_coefs c = hs_adadelta_make_coefs(lr, rho, eps, weight_decay);
  const hs_adadelta_coefs *slot = (const hs_adadelta_coefs *)hs_cuda_slots(be, &c, sizeof c);
  if (hs_cuda_slots_only(be)) return; /* recorded: the slots only (cuda_slots.h) */
  launch_for_each(be, table, count, hs_quads_aligned({p, g, sq, acc}) && half.aligned(),
                  adadelta_op{p, g, sq, acc, c, slot, half});
  /* p, sq, acc read and written, g read (and the parameters' 16-bit copy written) */
  HS_CUDA_LAUNCHED("for_each_kernel<adadelta_op>", hs_ledger_table_bytes(table, 7 * sizeof(float) + half.bytes(), 0));
}

/* SGD (torch) with optional momentum buffer */
extern "C" void hs_cuda_sgd_update(const hs_backend *be, float *p, const float *g, float *buf,
                                   const hs_tensor_span *table, int count, double lr, double momentum,
                                   double weight_decay, int first_step) {
  if (count <= 0) return;
  const float *lr_slot = hs_cuda_slot_f32(be, (float)lr);
  if (hs_cuda_slots_only(be)) return; /* recorded: the slots only (cuda_slots.h) */
  const half_copy half = half_copy_of(p);
  launch_for_each(be, table, count, hs_quads_aligned({p, g, buf}) && half.aligned(),
                  sgd_op{p, g, buf, (float)lr, (float)momentum, (float)weight_decay, first_step, lr_slot, half});
  /* p read and written, g read (and the momentum buffer read and written, the parameters' 16-bit copy written) */
  HS_CUDA_LAUNCHED("for_each_kernel<sgd_op>",
                   hs_ledger_table_bytes(table, (momentum != 0.0 ? 5 : 3) * sizeof(float) + half.bytes(), 0));
}

/* LAMB (NVLAMB): stage 1 (moments and the per-tensor partials of Σp², Σu²), per-tensor norms into
 * norms[2·count], stage 2 with the per-tensor step computed on the device */
extern "C" void hs_cuda_lamb_update(const hs_backend *be, float *p, const float *g, float *m, float *v,
                                    const hs_tensor_span *table, int count, double *norms,
                                    const hs_lamb_hparams *h) {
  if (count <= 0) return;
  const cudaStream_t stream = hs_cuda_stream(be);
  const hs_lamb_coefs decayed = hs_lamb_make_coefs(h->beta1, h->beta2, h->eps, h->weight_decay, h->grad_divisor, h->step);
  const hs_lamb_coefs undecayed = hs_lamb_make_coefs(h->beta1, h->beta2, h->eps, 0.0, h->grad_divisor, h->step);
  const lamb_slot values = {decayed, undecayed, h->lr};
  const lamb_slot *slot = (const lamb_slot *)hs_cuda_slots(be, &values, sizeof values);
  if (hs_cuda_slots_only(be)) return; /* recorded: the slots only (cuda_slots.h) */
  double *partial = partials_scratch(be, count, 2);
  const half_copy half = half_copy_of(p);
  const bool vec = hs_quads_aligned({p, g, m, v}) && half.aligned();
  HS_LAUNCH(HS_TENSOR_GRID, HS_BLOCK, 0, stream, lamb_moments_kernel)(partial, p, g, m, v, table, count, vec,
                                                                        decayed, undecayed, slot);
  /* p, g read, m, v read and written; the partials */
  HS_CUDA_LAUNCHED("lamb_moments_kernel", hs_ledger_table_bytes(table, 6 * sizeof(float), partials_bytes(table, count, 2)));
  HS_LAUNCH(1, HS_BLOCK, 0, stream, lamb_norms_kernel)(norms, partial, table, count);
  HS_CUDA_LAUNCHED("lamb_norms_kernel", partials_bytes(table, count, 2) +
                                            (uint64_t)count * (sizeof(hs_tensor_span) + 2 * sizeof(double)));
  HS_LAUNCH(HS_TENSOR_GRID, HS_BLOCK, 0, stream, lamb_apply_kernel)(p, m, v, table, count, vec, norms, decayed,
                                                                      undecayed, h->lr, h->weight_decay,
                                                                      h->trust_ratio_on_no_decay, half, slot);
  /* p read and written, m, v read (and the parameters' 16-bit copy written); the norms */
  HS_CUDA_LAUNCHED("lamb_apply_kernel", hs_ledger_table_bytes(table, 4 * sizeof(float) + half.bytes(),
                                                              (uint64_t)count * 2 * sizeof(double)));
}
