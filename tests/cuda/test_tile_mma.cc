// kernels/mma_sync.cuh's register-fragment product (exactly, with small integers: its fragment layout), its
// ldmatrix loads (every register against the documented layout) and kernels/tile_mma.cuh on the emulated CUDA device: warp_tile_mma for float, hs_tile_bf16, hs_tile_fp16
// and hs_tile_tf32 operands (16-bit and TF32 tiles on the emulator's nvcuda::wmma, and on the scalar
// loop, which a GPU without WMMA for the type runs), float with TF32 permitted (m16n16k8), both B
// forms, accumulate on and off, k = 16..128, leading dimensions with and without padding, two warps of
// a block on tiles of their own. Each element is
// compared with a double-precision reference computed from the stored operand values, and every
// product is run again through a tile_acc held over k / 16 products of 16 (a fused kernel's loop),
// then its rows scaled by powers of two (scale_rows): the same bits as the one product, scaled. The
// scalar loop must give each element's fmaf chain in k order, the host's bits.
//
// The bound (Higham, "Accuracy and Stability of Numerical Algorithms", 4.2; tests/cuda/conformance.h):
// every product of two stored operands is exact in fp32 (16-bit products have at most 22 significant
// bits; fp32 ones are exact inside fmaf), so the only errors are the fp32 additions. A sum of n terms
// in any order (k order for the scalar loop, pairwise within each 16-wide step for the emulator's
// WMMA) is within gamma_{n-1} sum |t_i| of the exact sum, gamma_n = n u / (1 - n u), u = 2^-24; the
// terms are the k products and, accumulating, C: n = k + 1, else n = k. The reference's own error
// (double: k u_64 relative) is far below. Prints the worst err/bound per type and path (<= 1 passes).
//
// Source nvcc compiles too (nvcc -x cu, kernels/hs_cuda.h): tests/gpu/test_tile_mma_gpu is the same test on a
// GPU (configure --with-cuda; it exits 77 where no GPU is visible), where it checks the fragment layout the
// emulator assumes against the hardware's.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "mma_sync.cuh"
#include "tile_mma.cuh"
#if defined(HS_CUDA_EMU)
#include "selftest.h" /* expect_death (tests/cuda_emu) */
#endif

namespace {

constexpr int kMaxK = 128, kPad = 8, kWarps = 2;
constexpr int kMaxA = kTile * (kMaxK + kPad);                                   // A [16][lda], lda <= k + 8
constexpr int kMaxB = kMaxK * (kTile + kPad) > kMaxA ? kMaxK * (kTile + kPad) : kMaxA; // B [k][ldb] or Bᵀ [16][ldb]
constexpr int kMaxC = kTile * (kTile + kPad);                                   // C [16][ldc]

struct Shape {
  int k, lda, ldb, ldc;
  bool b_transposed, accumulate;
};

// The factor test rows are scaled by after a tile_acc's products: 1/2, 1, 2, 1/2, ... (exact)
__host__ __device__ inline float row_factor(int r) { return (float)(1 << (r % 3)) * 0.5f; }

// The path's register accumulator: the scalar loop's, or the one warp_tile_mma takes for (T, TF32)
template <class T, bool SCALAR, bool TF32> struct Acc { typedef tile_acc<T, TF32> type; };
template <class T, bool TF32> struct Acc<T, true, TF32> { typedef tile_acc_scalar<T> type; };

// Warp w of the block: C_w (+)= A_w · B_w from shared memory, operands copied from global memory
// (a: [warps][kMaxA], b: [warps][kMaxB], c: [warps][kMaxC] at the same offsets). by_pieces: through a
// tile_acc held in registers over k / 16 products of k = 16 each, as a kernel's loop sums its tiles
// (the same steps in the same order as one product over k: the same bits); else one call.
template <class T, bool SCALAR, bool TF32>
__global__ void tile_mma_kernel(const T *a, const T *b, float *c, Shape s, int by_pieces) {
  // each warp's tiles 32-byte aligned: the arrays are, and every row of them is a multiple of 32 bytes
  HS_SHARED_ALIGNED(32, T[kWarps][kMaxA], sa);
  HS_SHARED_ALIGNED(32, T[kWarps][kMaxB], sb);
  HS_SHARED_ALIGNED(32, float[kWarps][kMaxC], sc);
  for (int i = threadIdx.x; i < kWarps * kMaxA; i += blockDim.x) sa[i / kMaxA][i % kMaxA] = a[i];
  for (int i = threadIdx.x; i < kWarps * kMaxB; i += blockDim.x) sb[i / kMaxB][i % kMaxB] = b[i];
  for (int i = threadIdx.x; i < kWarps * kMaxC; i += blockDim.x) sc[i / kMaxC][i % kMaxC] = c[i];
  __syncthreads();
  const int w = threadIdx.x / HS_WARP;
  if (by_pieces || SCALAR) {
    typename Acc<T, SCALAR, TF32>::type acc;
    if (s.accumulate) {
      acc.load(sc[w], s.ldc);
    } else {
      acc.zero();
    }
    const int piece = by_pieces ? kTile : s.k;
    for (int kk = 0; kk < s.k; kk += piece)
      acc.mma(sa[w] + kk, s.lda, s.b_transposed ? sb[w] + kk : sb[w] + kk * s.ldb, s.ldb, piece, s.b_transposed);
    if (by_pieces) { // and row r scaled by row_factor(r), a power of two (exact)
      HS_SHARED_ALIGNED(32, float[kWarps][kTile * kTile], scratch);
      HS_SHARED(float[kTile], factor);
      if (threadIdx.x < kTile) factor[threadIdx.x] = row_factor(threadIdx.x);
      __syncthreads();
      typename decltype(acc)::rows_t rows;
      rows.init(scratch[w]);
      acc.scale_rows(factor, rows);
    }
    acc.store(sc[w], s.ldc);
  } else {
    warp_tile_mma<T, TF32>(sc[w], s.ldc, sa[w], s.lda, sb[w], s.ldb, s.k, s.b_transposed, s.accumulate);
  }
  __syncwarp();
  for (int i = threadIdx.x % HS_WARP; i < kMaxC; i += HS_WARP) c[w * kMaxC + i] = sc[w][i];
}

#if defined(HS_CUDA_EMU)
// The caller rules, which the emulated device checks on every path (here float's scalar loop), by
// mode: 0 kept; 1 k = 24; 2 lda = 20; 3 a 16 bytes off alignment; 4 lanes disagree on b_transposed;
// 5 no __syncwarp() between the lanes' writes of A and B and the product.
__global__ void tile_rules_kernel(float *out, int mode) {
  HS_SHARED_ALIGNED(32, float[kTile * 32], a);
  HS_SHARED_ALIGNED(32, float[kTile * 32], b);
  HS_SHARED_ALIGNED(32, float[kTile * kTile], c);
  for (int i = threadIdx.x; i < kTile * 32; i += HS_WARP) a[i] = b[i] = 1.0f;
  if (mode != 5) __syncwarp();
  const int lane = threadIdx.x % HS_WARP;
  warp_tile_mma(c, kTile, mode == 3 ? a + 4 : a, mode == 2 ? 20 : 32, b, 32, mode == 1 ? 24 : 32,
                mode == 4 ? lane < 8 : true, false);
  __syncwarp();
  for (int i = lane; i < kTile * kTile; i += HS_WARP) out[i] = c[i];
}
#else
#define CUDA_OK(call)                                                                                   \
  do {                                                                                                  \
    const cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                            \
      fprintf(stderr, "%s:%d: %s returned %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));    \
      exit(1);                                                                                          \
    }                                                                                                   \
  } while (0)
#endif

uint64_t g_rng = 0x9e3779b97f4a7c15ull;
double uniform() { // [-1, 1)
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return static_cast<double>(g_rng >> 11) * 0x1p-52 - 1.0;
}

template <class T> T stored(float v);
template <> float stored(float v) { return v; }
template <> hs_tile_bf16 stored(float v) { return hs_tile_bf16{hs_bf16_bits(v)}; }
template <> hs_tile_fp16 stored(float v) { return hs_tile_fp16{hs_fp16_bits(v)}; }
template <> hs_tile_tf32 stored(float v) { return hs_tile_tf32{hs_tf32_round(v)}; }
double value(float v) { return v; }
double value(hs_tile_bf16 v) { return hs_bf16_to_float(v.bits); }
double value(hs_tile_fp16 v) { return hs_fp16_to_float(v.bits); }
double value(hs_tile_tf32 v) { return v.v; }

double gamma(int n) { return n * 0x1p-24 / (1.0 - n * 0x1p-24); }

// Runs every shape for operand type T on one path; returns the worst err/bound (fails past 1).
// TF32: the operands are rounded to 11 significant bits first (u_op = 2^-11 each), so the bound gains
// (2 u_op + u_op^2) sum |a b| (as tests/cuda/conformance.h's), and some element must exceed the fp32
// bound (the rounding happened).
template <class T, bool SCALAR, bool TF32 = false> double run_all(const char *name, int *failures) {
  std::vector<T> a(kWarps * kMaxA), b(kWarps * kMaxB);
  std::vector<float> c0(kWarps * kMaxC), c(kWarps * kMaxC), c_pieces(kWarps * kMaxC);
  T *da = nullptr, *db = nullptr;
  float *dc = nullptr;
  CUDA_OK(cudaMalloc(&da, a.size() * sizeof(T)));
  CUDA_OK(cudaMalloc(&db, b.size() * sizeof(T)));
  CUDA_OK(cudaMalloc(&dc, c.size() * sizeof(float)));
  double worst = 0.0, worst_fp32 = 0.0;
  int cases = 0;
  const double u_op = TF32 ? 0x1p-11 : 0.0;
  for (int k = kTile; k <= kMaxK; k += kTile)
    for (int tr = 0; tr < 2; tr++)
      for (int acc = 0; acc < 2; acc++)
        for (int pad = 0; pad <= kPad; pad += kPad) {
          const Shape s{k, k + pad, tr ? k + pad : kTile + pad, pad ? kTile + 4 : kTile, tr != 0, acc != 0};
          for (T &x : a) x = stored<T>(static_cast<float>(uniform()));
          for (T &x : b) x = stored<T>(static_cast<float>(uniform()));
          for (float &x : c0) x = static_cast<float>(uniform());
          CUDA_OK(cudaMemcpy(da, a.data(), a.size() * sizeof(T), cudaMemcpyHostToDevice));
          CUDA_OK(cudaMemcpy(db, b.data(), b.size() * sizeof(T), cudaMemcpyHostToDevice));
          CUDA_OK(cudaMemcpy(dc, c0.data(), c0.size() * sizeof(float), cudaMemcpyHostToDevice));
          HS_LAUNCH(1, kWarps * HS_WARP, 0, 0, tile_mma_kernel<T, SCALAR, TF32>)(da, db, dc, s, 0);
          CUDA_OK(cudaGetLastError());
          CUDA_OK(cudaMemcpy(c.data(), dc, c.size() * sizeof(float), cudaMemcpyDeviceToHost));
          // the same product summed by a register accumulator over k / 16 pieces: the same bits
          CUDA_OK(cudaMemcpy(dc, c0.data(), c0.size() * sizeof(float), cudaMemcpyHostToDevice));
          HS_LAUNCH(1, kWarps * HS_WARP, 0, 0, tile_mma_kernel<T, SCALAR, TF32>)(da, db, dc, s, 1);
          CUDA_OK(cudaGetLastError());
          CUDA_OK(cudaMemcpy(c_pieces.data(), dc, c.size() * sizeof(float), cudaMemcpyDeviceToHost));
          bool same = true;
          for (int w = 0; w < kWarps; w++)
            for (int i = 0; i < kTile; i++)
              for (int j = 0; j < kTile; j++) {
                const size_t e = (size_t)w * kMaxC + (size_t)i * s.ldc + j;
                same = same && c_pieces[e] == c[e] * row_factor(i);
              }
          if (!same) {
            if (*failures < 10)
              fprintf(stderr, "FAIL %s k=%d b_transposed=%d accumulate=%d pad=%d: tile_acc over %d pieces differs "
                              "from one product (rows scaled)\n", name, k, tr, acc, pad, k / kTile);
            (*failures)++;
          }
          for (int w = 0; w < kWarps; w++)
            for (int i = 0; i < kTile; i++)
              for (int j = 0; j < kTile; j++) {
                const float c_in = c0[w * kMaxC + i * s.ldc + j];
                double ref = acc ? c_in : 0.0, mag = acc ? fabs(c_in) : 0.0, prod_mag = 0.0;
                for (int kk = 0; kk < k; kk++) {
                  const double bv = tr ? value(b[w * kMaxB + j * s.ldb + kk]) : value(b[w * kMaxB + kk * s.ldb + j]);
                  const double p = value(a[w * kMaxA + i * s.lda + kk]) * bv;
                  ref += p;
                  mag += fabs(p);
                  prod_mag += fabs(p);
                }
                // the scalar loop: each element one chain of fmaf in k order, the host's bit for bit
                if (SCALAR || !tile_on_tensor_cores<T, TF32>) {
                  float chain = acc ? c_in : 0.0f;
                  for (int kk = 0; kk < k; kk++) {
                    const T bt = tr ? b[w * kMaxB + j * s.ldb + kk] : b[w * kMaxB + kk * s.ldb + j];
                    chain = fmaf(static_cast<float>(value(a[w * kMaxA + i * s.lda + kk])), static_cast<float>(value(bt)),
                                 chain);
                  }
                  if (c[w * kMaxC + i * s.ldc + j] != chain) {
                    if (*failures < 10)
                      fprintf(stderr, "FAIL %s k=%d b_transposed=%d accumulate=%d pad=%d warp %d C[%d][%d] = %.9g, "
                                      "not the fmaf chain in k order %.9g\n",
                              name, k, tr, acc, pad, w, i, j, c[w * kMaxC + i * s.ldc + j], chain);
                    (*failures)++;
                  }
                }
                const double g = gamma(acc ? k : k - 1), op = 2 * u_op + u_op * u_op;
                const double bound = g * mag + (op + g * op) * prod_mag;
                const double err = fabs(c[w * kMaxC + i * s.ldc + j] - ref);
                if (g * mag > 0.0 && err / (g * mag) > worst_fp32) worst_fp32 = err / (g * mag);
                const double ratio = bound > 0.0 ? err / bound : (err > 0.0 ? INFINITY : 0.0);
                if (!(ratio <= 1.0)) {
                  if (*failures < 10)
                    fprintf(stderr, "FAIL %s k=%d b_transposed=%d accumulate=%d pad=%d warp %d C[%d][%d] = %.9g, "
                                    "reference %.9g, err %.3g > bound %.3g\n",
                            name, k, tr, acc, pad, w, i, j, c[w * kMaxC + i * s.ldc + j], ref, err, bound);
                  (*failures)++;
                }
                if (ratio > worst || ratio != ratio) worst = ratio;
              }
          cases++;
        }
  CUDA_OK(cudaFree(da));
  CUDA_OK(cudaFree(db));
  CUDA_OK(cudaFree(dc));
  printf("%s %-28s %3d shapes x %d warps: worst err/bound %.3f", worst <= 1.0 ? "ok  " : "FAIL", name, cases, kWarps,
         worst);
  if (TF32) {
    printf(" (against the fp32 bound: %.1f, %s)", worst_fp32, worst_fp32 > 1.0 ? "rounded" : "FAIL: not rounded");
    if (!(worst_fp32 > 1.0)) (*failures)++;
  }
  printf("\n");
  return worst;
}

// kernels/mma_sync.cuh: D = A·B + A·B' through two hs_mma_16816 calls, every lane building its registers
// from A [16][16], B and B' [16][8] (16-bit bits, row-major, global memory) by the PTX ISA's layout and
// writing its four floats of D [16][8] where that layout says they are; and P = hs_mma_pack2 of lane
// values. With small integers as operands every product and sum is exact, so D must be A·(B + B') exactly:
// a wrong place in the layout (the emulator's model, or the kernel's view of it) moves values.
template <bool BF16>
__global__ void mma_sync_kernel(const uint16_t *a, const uint16_t *b, float *d, const float *x, uint32_t *packed) {
  const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
  auto word = [](const uint16_t *m, int ld, int r, int c) { return (uint32_t)m[r * ld + c] | (uint32_t)m[r * ld + c + 1] << 16; };
  const uint32_t af[4] = {word(a, 16, g, 2 * t), word(a, 16, g + 8, 2 * t), word(a, 16, g, 2 * t + 8),
                          word(a, 16, g + 8, 2 * t + 8)};
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int which = 0; which < 2; which++) {
    const uint16_t *bm = b + which * 128; /* B [16][8], k rows: a B register holds k rows 2t, 2t + 1 of column g */
    const uint32_t bf[2] = {(uint32_t)bm[(2 * t) * 8 + g] | (uint32_t)bm[(2 * t + 1) * 8 + g] << 16,
                            (uint32_t)bm[(2 * t + 8) * 8 + g] | (uint32_t)bm[(2 * t + 9) * 8 + g] << 16};
    hs_mma_16816<BF16>(acc, af, bf);
  }
  for (int e = 0; e < 4; e++) d[(g + 8 * (e >> 1)) * 8 + 2 * t + (e & 1)] = acc[e];
  packed[lane] = hs_mma_pack2<BF16>(x[2 * lane], x[2 * lane + 1]);
}

template <bool BF16> void mma_sync_exact(int *failures) {
  const char *name = BF16 ? "bf16" : "fp16";
  std::vector<uint16_t> ha(256), hb(256);
  std::vector<float> fa(256), fb(256), hx(64);
  for (int i = 0; i < 256; i++) {
    /* -4 .. 4 and -3 .. 3 from a multiplicative hash of the index: no period that a swap of rows or
     * columns could leave unchanged */
    fa[i] = (float)((int)(((uint32_t)i * 2654435761u) >> 20) % 9 - 4);
    fb[i] = (float)((int)(((uint32_t)(i + 1000) * 2246822519u) >> 20) % 7 - 3);
    ha[i] = BF16 ? hs_bf16_bits(fa[i]) : hs_fp16_bits(fa[i]);
    hb[i] = BF16 ? hs_bf16_bits(fb[i]) : hs_fp16_bits(fb[i]);
  }
  for (int i = 0; i < 64; i++) hx[i] = (float)(i - 32) * 1.0001f + 1.0f / (float)(i + 3); /* values that round */
  uint16_t *a, *b;
  float *d, *x;
  uint32_t *packed;
  CUDA_OK(cudaMalloc(&a, 512));
  CUDA_OK(cudaMalloc(&b, 512));
  CUDA_OK(cudaMalloc(&d, 512));
  CUDA_OK(cudaMalloc(&x, 256));
  CUDA_OK(cudaMalloc(&packed, 128));
  CUDA_OK(cudaMemcpy(a, ha.data(), 512, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(b, hb.data(), 512, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(x, hx.data(), 256, cudaMemcpyHostToDevice));
  HS_LAUNCH(1, HS_WARP, 0, 0, mma_sync_kernel<BF16>)(a, b, d, x, packed);
  std::vector<float> hd(128);
  std::vector<uint32_t> hp(32);
  CUDA_OK(cudaMemcpy(hd.data(), d, 512, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(hp.data(), packed, 128, cudaMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 8; j++) {
      float want = 0.0f;
      for (int k = 0; k < 16; k++) want += fa[i * 16 + k] * (fb[k * 8 + j] + fb[128 + k * 8 + j]);
      if (hd[i * 8 + j] != want && !bad++)
        printf("FAIL mma.sync m16n8k16 %s: D[%d][%d] = %g, A·(B + B') = %g\n", name, i, j, hd[i * 8 + j], want);
    }
  for (int l = 0; l < 32; l++) {
    const uint32_t want = BF16 ? (uint32_t)hs_bf16_bits(hx[2 * l]) | (uint32_t)hs_bf16_bits(hx[2 * l + 1]) << 16
                               : (uint32_t)hs_fp16_bits(hx[2 * l]) | (uint32_t)hs_fp16_bits(hx[2 * l + 1]) << 16;
    if (hp[l] != want && !bad++) printf("FAIL hs_mma_pack2 %s: lane %d: %08x, want %08x\n", name, l, hp[l], want);
  }
  printf("mma.sync m16n8k16 %s: %s (128 elements of D exact, 32 packed pairs)\n", name, bad ? "FAIL" : "ok");
  *failures += bad != 0;
  for (void *p : {(void *)a, (void *)b, (void *)d, (void *)x, (void *)packed}) CUDA_OK(cudaFree(p));
}

// kernels/mma_sync.cuh's ldmatrix (x4, x4.trans, x2): lane l names a row of a shared tile of distinct 16-bit
// values, rows chosen by a permutation and column blocks by the lane (any row anywhere may be named), and
// writes the registers it receives; the host checks every register against the PTX ISA's layout. mode 1: a
// row 8 bytes off alignment; mode 2: the lanes write the tile without __syncwarp before the load.
constexpr int kLdmRows = 32, kLdmStride = 24; // 48-byte rows: three 16-byte column blocks
struct ldmatrix_smem {
  alignas(16) uint16_t tile[kLdmRows * kLdmStride];
};
__host__ __device__ inline uint16_t ldm_value(int e) { return (uint16_t)(e * 37 + 11); } // distinct (37 odd)
__host__ __device__ inline int ldm_row_of_lane(int l) { return ((l * 5 + 3) % kLdmRows) * kLdmStride + (l % 3) * 8; }

__global__ void ldmatrix_kernel(uint32_t *out, int mode) {
  HS_SHARED(ldmatrix_smem, sm);
  const int lane = threadIdx.x;
  for (int e = lane; e < kLdmRows * kLdmStride; e += HS_WARP) sm.tile[e] = ldm_value(e);
  if (mode != 2) __syncwarp();
  const uint16_t *row = sm.tile + ldm_row_of_lane(lane) + (mode == 1 ? 4 : 0);
  uint32_t r[4], r2[2];
  hs_ldmatrix_x4<false>(r, row);
  for (int m = 0; m < 4; m++) out[lane * 4 + m] = r[m];
  hs_ldmatrix_x4<true>(r, row);
  for (int m = 0; m < 4; m++) out[128 + lane * 4 + m] = r[m];
  hs_ldmatrix_x2(r2, row);
  for (int m = 0; m < 2; m++) out[256 + lane * 2 + m] = r2[m];
}

void ldmatrix_exact(int *failures) {
  uint32_t *out;
  CUDA_OK(cudaMalloc(&out, 320 * sizeof(uint32_t)));
  HS_LAUNCH(1, HS_WARP, 0, 0, ldmatrix_kernel)(out, 0);
  std::vector<uint32_t> h(320);
  CUDA_OK(cudaMemcpy(h.data(), out, h.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  auto at = [](int lane, int col) { return (uint32_t)ldm_value(ldm_row_of_lane(lane) + col); }; // lane's row, column col
  int bad = 0;
  for (int l = 0; l < 32; l++) {
    const int g = l / 4, t = l % 4;
    for (int m = 0; m < 4; m++) {
      const uint32_t plain = at(8 * m + g, 2 * t) | at(8 * m + g, 2 * t + 1) << 16;
      const uint32_t trans = at(8 * m + 2 * t, g) | at(8 * m + 2 * t + 1, g) << 16;
      const uint32_t got[3] = {h[l * 4 + m], h[128 + l * 4 + m], m < 2 ? h[256 + l * 2 + m] : plain};
      const uint32_t want[3] = {plain, trans, plain};
      const char *what[3] = {"x4", "x4.trans", "x2"};
      for (int k = 0; k < 3; k++)
        if (got[k] != want[k] && !bad++)
          printf("FAIL ldmatrix %s: lane %d register %d = %08x, want %08x\n", what[k], l, m, got[k], want[k]);
    }
  }
  printf("ldmatrix m8n8 x4, x4.trans, x2: %s (320 registers exact)\n", bad ? "FAIL" : "ok");
  *failures += bad != 0;
  CUDA_OK(cudaFree(out));
}

#if defined(HS_CUDA_EMU)
void ldmatrix_rules_reported() {
  uint32_t *out = nullptr;
  CUDA_OK(cudaMalloc(&out, 320 * sizeof(uint32_t)));
  auto dies = [out](const char *name, int mode, const char *needle) {
    expect_death(name, [out, mode] {
      HS_LAUNCH(1, HS_WARP, 0, 0, ldmatrix_kernel)(out, mode);
      cudaDeviceSynchronize();
    }, SIGABRT, {"error in kernel ldmatrix_kernel", "ldmatrix", needle});
  };
  dies("ldmatrix on a row 8 bytes off alignment", 1, "misaligned address");
  dies("ldmatrix on rows the lanes wrote, without __syncwarp", 2, "changed while the warp's lanes arrived");
  CUDA_OK(cudaFree(out));
}

void rules_reported() {
  float *out = nullptr;
  CUDA_OK(cudaMalloc(&out, kTile * kTile * sizeof(float)));
  HS_LAUNCH(1, HS_WARP, 0, 0, tile_rules_kernel)(out, 0);
  std::vector<float> h(kTile * kTile);
  CUDA_OK(cudaMemcpy(h.data(), out, h.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (float v : h) CHECK(v == 32.0f);
  auto dies = [out](const char *name, int mode, const char *needle) {
    expect_death(name, [out, mode] {
      HS_LAUNCH(1, HS_WARP, 0, 0, tile_rules_kernel)(out, mode);
      cudaDeviceSynchronize();
    }, SIGABRT, {"error in kernel tile_rules_kernel", "warp_tile_mma", needle});
  };
  dies("warp_tile_mma with k = 24", 1, "k = 24 is not a positive multiple of 16");
  dies("warp_tile_mma with lda = 20", 2, "lda and ldb must be multiples of 8 elements");
  dies("warp_tile_mma on a misaligned tile", 3, "every tile must start 32-byte aligned");
  dies("warp_tile_mma with lanes disagreeing", 4, "passes other arguments than lane 0");
  dies("warp_tile_mma on tiles the lanes wrote, without __syncwarp", 5, "changed after lane");
  CUDA_OK(cudaFree(out));
}
#endif

} // namespace

int main() {
  int failures = 0;
#if defined(HS_CUDA_EMU)
  rules_reported();
  ldmatrix_rules_reported();
#else
  /* nvcc's build (tests/gpu/test_tile_mma_gpu): skipped where no GPU is visible */
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("SKIP: no CUDA device visible (%s)\n", cudaGetErrorString(cudaGetLastError()));
    return 77;
  }
#endif
  mma_sync_exact<true>(&failures);
  mma_sync_exact<false>(&failures);
  ldmatrix_exact(&failures);
  run_all<float, false>("float (scalar)", &failures);
  run_all<float, false, true>("float TF32 (warp_tile_mma)", &failures);
  run_all<hs_tile_bf16, false>("bf16 (warp_tile_mma)", &failures);
  run_all<hs_tile_bf16, true>("bf16 (scalar loop)", &failures);
  run_all<hs_tile_fp16, false>("fp16 (warp_tile_mma)", &failures);
  run_all<hs_tile_fp16, true>("fp16 (scalar loop)", &failures);
  // TF32 values stored (precision tf32's tiles): the products exact, the fp32 bound
  run_all<hs_tile_tf32, false>("tf32 tiles (warp_tile_mma)", &failures);
  run_all<hs_tile_tf32, true>("tf32 tiles (scalar loop)", &failures);
  return failures == 0 ? 0 : 1;
}
