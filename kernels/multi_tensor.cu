/* Multi-tensor ops of the CUDA backend over the flat parameter/gradient buffers: squared norms, scaling
 * (gradient clipping) and the optimizers (Adam, Adadelta, SGD, LAMB). CPU references:
 * src/backend/cpu/cpu_multi_tensor.c (the same family, the same ops); the per-element
 * formulas and the coefficient computations are kernels/math/optim_math.h, shared with the CPU.
 *
 * The tensor table (hs_tensor_span[count]) lives in device memory and the host never reads it, so no
 * grid depends on a tensor's size: every kernel runs on grid (count, HS_TENSOR_SLICES), block (i, s)
 * handling slice s of tensor i, whose bounds it computes on the device from table[i].numel
 * (kernels/hs_launch.h). Blocks of empty slices return at once.
 *
 * Norms are deterministic and fixed by the layout alone: a thread sums the squares of its elements of
 * the slice in order (double), the block adds its threads' sums by a fixed tree into a per-(tensor,
 * slice) partial in scratch, then one thread per tensor adds its slices' partials in slice order. No
 * float atomics. The order differs from the CPU's (blocks of 16384 elements), far below float
 * precision.
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

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_device.h"
#include "backend/cuda/cuda_internal.h"
#include "backend/cuda/cuda_ops.h"
#include "math/optim_math.h"
#include "util/lowp.h"

namespace {

/* Elements [lo, hi) of a tensor of numel elements that slice s owns (see kernels/hs_launch.h). */
__device__ __forceinline__ void slice_bounds(int64_t numel, int s, int64_t &lo, int64_t &hi) {
  int64_t len = (numel + HS_TENSOR_SLICES - 1) / HS_TENSOR_SLICES;
  if (len < HS_TENSOR_SLICE_MIN) len = HS_TENSOR_SLICE_MIN;
  lo = (int64_t)s * len < numel ? (int64_t)s * len : numel;
  hi = lo + len < numel ? lo + len : numel;
}

/* The 16-bit copy of the parameters an optimizer keeps (h NULL: none): after p[i] is updated,
 * h[i] = round(p[i]) in bfloat16 (bf16 != 0) or IEEE half. */
struct half_copy {
  uint16_t *h;
  int bf16;
  __device__ void put(int64_t i, float x) const {
    if (h) h[i] = bf16 ? hs_bf16_bits(x) : hs_fp16_bits(x);
  }
  /* the bytes it adds per element (the device-op ledger) */
  uint64_t bytes() const { return h ? sizeof(uint16_t) : 0; }
};

/* The copy of the arena p starts (hs_cuda_shadow_target), if the products read one. */
static half_copy half_copy_of(const float *p) {
  half_copy c{nullptr, 0};
  c.h = hs_cuda_shadow_target(p, &c.bf16);
  return c;
}

/* ---- element-wise passes over the table --------------------------------------------------------------- */

/* op(tensor, i) for every flat index i of every tensor; grid (count, HS_TENSOR_SLICES). */
template <class Op> __global__ void __launch_bounds__(HS_BLOCK) for_each_kernel(const hs_tensor_span *table, Op op) {
  op.resolve(); /* the per-update values from their slots (a graph region), once per thread */
  const hs_tensor_span t = table[blockIdx.x];
  int64_t lo, hi;
  slice_bounds(t.numel, blockIdx.y, lo, hi);
  for (int64_t e = lo + threadIdx.x; e < hi; e += HS_BLOCK) op(t, t.offset + e);
}

template <class Op> void launch_for_each(const hs_backend *be, const hs_tensor_span *table, int count, const Op &op) {
  const dim3 grid((unsigned)count, HS_TENSOR_SLICES);
  HS_LAUNCH(grid, HS_BLOCK, 0, hs_cuda_stream(be), for_each_kernel<Op>)(table, op);
}

/* x *= a (clipping) */
struct scale_op {
  float *flat;
  float a;
  const float *a_slot; /* a in device memory (a graph region), or NULL */
  __device__ void resolve() { a = hs_slot(a_slot, a), a_slot = nullptr; }
  __device__ void operator()(const hs_tensor_span &, int64_t i) const { flat[i] *= hs_slot(a_slot, a); }
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
  __device__ void operator()(const hs_tensor_span &t, int64_t i) const {
    hs_adam_elem(&p[i], g[i], &m[i], &v[i], slot ? &slot[t.decay ? 0 : 1] : t.decay ? &flagged : &unflagged);
    half.put(i, p[i]);
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
  __device__ void operator()(const hs_tensor_span &, int64_t i) const {
    hs_adadelta_elem(&p[i], g[i], &sq[i], &acc[i], slot ? slot : &c);
    half.put(i, p[i]);
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
  __device__ void operator()(const hs_tensor_span &, int64_t i) const {
    hs_sgd_elem(&p[i], g[i], buf ? &buf[i] : nullptr, hs_slot(lr_slot, lr), momentum, weight_decay, first_step);
    half.put(i, p[i]);
  }
};

/* ---- squared norms ------------------------------------------------------------------------------------ */

/* partial[i·HS_TENSOR_SLICES + s] = Σ x² over slice s of tensor i (double); grid (count, HS_TENSOR_SLICES). */
__global__ void __launch_bounds__(HS_BLOCK)
    sumsq_partials_kernel(double *partial, const float *flat, const hs_tensor_span *table) {
  const hs_tensor_span t = table[blockIdx.x];
  double *out = partial + (size_t)blockIdx.x * HS_TENSOR_SLICES + blockIdx.y;
  int64_t lo, hi;
  slice_bounds(t.numel, blockIdx.y, lo, hi);
  if (lo >= hi) { /* uniform across the block */
    if (threadIdx.x == 0) *out = 0.0;
    return;
  }
  double s = 0.0;
  for (int64_t e = lo + threadIdx.x; e < hi; e += HS_BLOCK) {
    const double x = (double)flat[t.offset + e];
    s += x * x;
  }
  s = block_sum(s);
  if (threadIdx.x == 0) *out = s;
}

/* sumsq[i] = Σ_s partial[i][s] in slice order, then *total = Σ_i sumsq[i] in table order (one thread).
 * One block. */
__global__ void __launch_bounds__(HS_BLOCK)
    sumsq_finish_kernel(double *sumsq, double *total, const double *partial, int count) {
  for (int i = threadIdx.x; i < count; i += HS_BLOCK) {
    double s = 0.0;
    for (int k = 0; k < HS_TENSOR_SLICES; k++) s += partial[(size_t)i * HS_TENSOR_SLICES + k];
    sumsq[i] = s;
  }
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

/* Stage 1 on slice s of tensor i: m, v updated; partial[(i·HS_TENSOR_SLICES + s)·2 + 0] = Σ p²,
 * [.. + 1] = Σ u² (double). Grid (count, HS_TENSOR_SLICES). */
__global__ void __launch_bounds__(HS_BLOCK)
    lamb_moments_kernel(double *partial, const float *p, const float *g, float *m, float *v,
                        const hs_tensor_span *table, hs_lamb_coefs decayed, hs_lamb_coefs undecayed,
                        const lamb_slot *slot) {
  if (slot) decayed = slot->decayed, undecayed = slot->undecayed;
  const hs_tensor_span t = table[blockIdx.x];
  double *out = partial + ((size_t)blockIdx.x * HS_TENSOR_SLICES + blockIdx.y) * 2;
  int64_t lo, hi;
  slice_bounds(t.numel, blockIdx.y, lo, hi);
  if (lo >= hi) { /* uniform across the block */
    if (threadIdx.x == 0) out[0] = out[1] = 0.0;
    return;
  }
  const hs_lamb_coefs *c = t.decay ? &decayed : &undecayed;
  double sp = 0.0, su = 0.0;
  for (int64_t e = lo + threadIdx.x; e < hi; e += HS_BLOCK) {
    const int64_t i = t.offset + e;
    const float u = hs_lamb_moments_elem(p[i], g[i], &m[i], &v[i], c);
    sp += (double)p[i] * (double)p[i];
    su += (double)u * (double)u;
  }
  sp = block_sum(sp);
  su = block_sum(su);
  if (threadIdx.x == 0) {
    out[0] = sp;
    out[1] = su;
  }
}

/* norms[2i] = Σ p², norms[2i+1] = Σ u² of tensor i: its slices' partials in slice order. One block. */
__global__ void __launch_bounds__(HS_BLOCK) lamb_norms_kernel(double *norms, const double *partial, int count) {
  for (int i = threadIdx.x; i < count; i += HS_BLOCK) {
    double sp = 0.0, su = 0.0;
    for (int k = 0; k < HS_TENSOR_SLICES; k++) {
      sp += partial[((size_t)i * HS_TENSOR_SLICES + k) * 2];
      su += partial[((size_t)i * HS_TENSOR_SLICES + k) * 2 + 1];
    }
    norms[2 * (size_t)i] = sp;
    norms[2 * (size_t)i + 1] = su;
  }
}

/* Stage 2: p -= (float)step · u, the tensor's step from its norms: lr·||p||/||u|| when it takes the trust
 * ratio (wd != 0 or trust_ratio_on_no_decay) and both norms are non-zero, else lr; in double, computed
 * by every thread of the tensor's blocks from the same two values. Grid (count, HS_TENSOR_SLICES). */
__global__ void __launch_bounds__(HS_BLOCK)
    lamb_apply_kernel(float *p, const float *m, const float *v, const hs_tensor_span *table, const double *norms,
                      hs_lamb_coefs decayed, hs_lamb_coefs undecayed, double lr, double weight_decay,
                      int trust_ratio_on_no_decay, half_copy half, const lamb_slot *slot) {
  if (slot) decayed = slot->decayed, undecayed = slot->undecayed, lr = slot->lr;
  const hs_tensor_span t = table[blockIdx.x];
  int64_t lo, hi;
  slice_bounds(t.numel, blockIdx.y, lo, hi);
  if (lo >= hi) return;
  const double wd = t.decay ? weight_decay : 0.0;
  const double step =
      hs_lamb_step(lr, norms[2 * (size_t)blockIdx.x], norms[2 * (size_t)blockIdx.x + 1], wd != 0.0 || trust_ratio_on_no_decay);
  const float step_f = (float)step;
  const hs_lamb_coefs *c = t.decay ? &decayed : &undecayed;
  for (int64_t e = lo + threadIdx.x; e < hi; e += HS_BLOCK) {
    const int64_t i = t.offset + e;
    hs_lamb_apply_elem(&p[i], m[i], v[i], step_f, c);
    half.put(i, p[i]);
  }
}

} // namespace

/* sumsq[i] = Σ x² of tensor i; *total = Σ_i sumsq[i] in table order (overwritten) */
extern "C" void hs_cuda_sumsq_tensors(const hs_backend *be, double *sumsq, double *total, const float *flat,
                                      const hs_tensor_span *table, int count) {
  if (count < 0) count = 0;
  const cudaStream_t stream = hs_cuda_stream(be);
  /* scratch: partial[count][HS_TENSOR_SLICES] doubles */
  double *partial =
      static_cast<double *>(hs_cuda_scratch(be, ((size_t)count * HS_TENSOR_SLICES + 1) * sizeof(double)));
  if (count > 0) {
    const dim3 grid((unsigned)count, HS_TENSOR_SLICES);
    HS_LAUNCH(grid, HS_BLOCK, 0, stream, sumsq_partials_kernel)(partial, flat, table);
    HS_CUDA_LAUNCHED("sumsq_partials_kernel", /* x; the partials */
                     hs_ledger_table_bytes(table, sizeof(float), (uint64_t)count * HS_TENSOR_SLICES * sizeof(double)));
  }
  /* also with count = 0: *total = 0, as the CPU writes it */
  HS_LAUNCH(1, HS_BLOCK, 0, stream, sumsq_finish_kernel)(sumsq, total, partial, count);
  HS_CUDA_LAUNCHED("sumsq_finish_kernel", ((size_t)count * (HS_TENSOR_SLICES + 1) + 1) * sizeof(double));
}

/* x *= a over every tensor of the table */
extern "C" void hs_cuda_scale_tensors(const hs_backend *be, float *flat, float a, const hs_tensor_span *table,
                                      int count) {
  if (count <= 0) return;
  const float *a_slot = hs_cuda_slot_f32(be, a);
  if (hs_cuda_slots_only(be)) return; /* recorded: the slots only (cuda_slots.h) */
  /* not an optimizer: a parameter arena's 16-bit copy (if flat is one) is reconverted before it is read */
  hs_cuda_shadow_written(flat, 1);
  launch_for_each(be, table, count, scale_op{flat, a, a_slot});
  HS_CUDA_LAUNCHED("for_each_kernel<scale_op>", hs_ledger_table_bytes(table, 2 * sizeof(float), 0));
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
  launch_for_each(be, table, count, adam_op{p, g, m, v, flagged, unflagged, slot, half});
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
  launch_for_each(be, table, count, adadelta_op{p, g, sq, acc, c, slot, half});
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
  launch_for_each(be, table, count,
                  sgd_op{p, g, buf, (float)lr, (float)momentum, (float)weight_decay, first_step, lr_slot, half});
  /* p read and written, g read (and the momentum buffer read and written, the parameters' 16-bit copy written) */
  HS_CUDA_LAUNCHED("for_each_kernel<sgd_op>",
                   hs_ledger_table_bytes(table, (momentum != 0.0 ? 5 : 3) * sizeof(float) + half.bytes(), 0));
}

/* LAMB (NVLAMB): stage 1 (moments and per-slice Σp², Σu²), per-tensor norms into norms[2·count], stage 2
 * with the per-tensor step computed on the device */
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
  /* scratch: partial[count][HS_TENSOR_SLICES][2] doubles */
  double *partial =
      static_cast<double *>(hs_cuda_scratch(be, (size_t)count * HS_TENSOR_SLICES * 2 * sizeof(double)));
  const dim3 grid((unsigned)count, HS_TENSOR_SLICES);
  const half_copy half = half_copy_of(p);
  HS_LAUNCH(grid, HS_BLOCK, 0, stream, lamb_moments_kernel)(partial, p, g, m, v, table, decayed, undecayed, slot);
  /* p, g read, m, v read and written; the partials */
  HS_CUDA_LAUNCHED("lamb_moments_kernel", hs_ledger_table_bytes(table, 6 * sizeof(float),
                                                                (uint64_t)count * HS_TENSOR_SLICES * 2 * sizeof(double)));
  HS_LAUNCH(1, HS_BLOCK, 0, stream, lamb_norms_kernel)(norms, partial, count);
  HS_CUDA_LAUNCHED("lamb_norms_kernel", (size_t)count * (HS_TENSOR_SLICES * 2 + 2) * sizeof(double));
  HS_LAUNCH(grid, HS_BLOCK, 0, stream, lamb_apply_kernel)(p, m, v, table, norms, decayed, undecayed, h->lr,
                                                          h->weight_decay, h->trust_ratio_on_no_decay, half, slot);
  /* p read and written, m, v read (and the parameters' 16-bit copy written); the norms */
  HS_CUDA_LAUNCHED("lamb_apply_kernel", hs_ledger_table_bytes(table, 4 * sizeof(float) + half.bytes(),
                                                              (uint64_t)count * 2 * sizeof(double)));
}
