/* Shared-memory tiles of the fused attention kernels (kernels/flash_attention.cu, BERT;
 * kernels/rel_flash_attention.cu, Transformer-XL): one place loads rows of the token-major q|k|v
 * [B,L,3H] (or ctx, dctx [B,L,H], r [klen,H]) into the zero-padded tiles kernels/tile_mma.cuh's
 * warp_tile_mma reads, carves dynamic shared memory at its 32-byte rule, and opts a kernel into more
 * than 48 KiB of it.
 *
 *   load_rows(dst, rows, dp, src, ld, row0, row_end, d, bias)   dst[rows][dp] (T: float, hs_tile_bf16,
 *       hs_tile_fp16) = rows row0.. of src (row stride ld, columns 0..d-1) + bias[c] (bias may be null),
 *       rounded to T as stored; rows outside [0, row_end) and columns >= d are 0 (padding a product's k
 *       to a multiple of 16 and a partial tile's rows). Block-wide: every thread of the block calls it.
 *   load_rows(dst, rows, dp, src16, bf16, ld, row0, row_end, d, bias)   the same from 16-bit rows (bias
 *       optional, fp32).
 *   load_row_stats(vals, rows, src, row0, row_end)   vals[rows] = src[row0 + a], 0 outside [0, row_end)
 *   smem_carver{base, 0}.take<X>(count)              the next count X of dynamic shared memory
 *   flash_smem_limit(), flash_resident_warps(kernel, warps, bytes)   host: the device's per-block limit
 *       of dynamic shared memory, and the warps a multiprocessor holds with such blocks (a kernel's first
 *       query opts it into more than 48 KiB: cudaFuncAttributeMaxDynamicSharedMemorySize).
 *   flash_row_dot_kernel   the backwards' row dot products D = rowsum(dctx ∘ ctx) and dctx's 16-bit copy. */
#ifndef HS_KERNELS_FLASH_TILES_CUH
#define HS_KERNELS_FLASH_TILES_CUH

#include <stddef.h>

#include "hs_cuda.h"
#include "hs_launch.h"
#include "tile_mma.cuh"
#include "util/lowp.h"

#include "backend/cuda/cuda_check.h"

namespace {

/* min and max of two ints, and a / b rounded up: on the host, on the device and in constant expressions
 * (the kernels' shared-memory sizes and register tile counts) */
__host__ __device__ constexpr int imin(int a, int b) { return a < b ? a : b; }
__host__ __device__ constexpr int imax(int a, int b) { return a > b ? a : b; }
__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

/* Dynamic shared memory, carved in order: take<X>(count) is the next count X, every region 32-byte
 * aligned (tile_mma's rule; the dynamic window itself starts aligned). The same carving code runs on
 * the host with no base, where only the byte count (off) is wanted: a kernel's layout and the bytes its
 * launch asks for cannot disagree. */
struct smem_carver {
  unsigned char *base; /* null on the host */
  size_t off;
  template <class X>
  __host__ __device__ X *take(int count) {
    X *p = base ? reinterpret_cast<X *>(base + off) : nullptr;
    off += ((size_t)count * sizeof(X) + 31) / 32 * 32;
    return p;
  }
};

/* dst[rows][dp] = src rows row0..row0+rows-1 (row stride ld) + bias, rounded to T; rows outside
 * [0, row_end) and columns >= d are 0. Consecutive threads read consecutive columns of a row. */
template <class T>
__device__ __forceinline__ void load_rows(T *dst, int rows, int dp, const float *src, size_t ld, int row0,
                                          int row_end, int d, const float *bias) {
  for (int e = threadIdx.x; e < rows * dp; e += blockDim.x) {
    const int rr = e / dp, c = e % dp, row = row0 + rr;
    float v = 0.0f;
    if (c < d && row >= 0 && row < row_end) {
      v = src[(size_t)row * ld + c];
      if (bias) v += bias[c];
    }
    tile_store(dst[e], v);
  }
}

/* The same from 16-bit rows (bf16: bfloat16 bits, else IEEE half): each value widened (exact), the bias
 * added in fp32 (when given), then rounded to T as stored — the bits load_rows stores from fp32 rows
 * holding the widened values (without a bias and T of that 16-bit type: src's bits). */
template <class T>
__device__ __forceinline__ void load_rows(T *dst, int rows, int dp, const uint16_t *src, int bf16, size_t ld,
                                          int row0, int row_end, int d, const float *bias = nullptr) {
  for (int e = threadIdx.x; e < rows * dp; e += blockDim.x) {
    const int rr = e / dp, c = e % dp, row = row0 + rr;
    float v = 0.0f;
    if (c < d && row >= 0 && row < row_end) {
      const uint16_t u = src[(size_t)row * ld + c];
      v = bf16 ? hs_bf16_to_float(u) : hs_fp16_to_float(u);
      if (bias) v += bias[c];
    }
    tile_store(dst[e], v);
  }
}

/* vals[rows] = src[row0 + a] for rows inside [0, row_end), else 0 (lse, D of a query tile) */
__device__ __forceinline__ void load_row_stats(float *vals, int rows, const float *src, int row0, int row_end) {
  for (int a = threadIdx.x; a < rows; a += blockDim.x) {
    const int i = row0 + a;
    vals[a] = i >= 0 && i < row_end ? src[i] : 0.0f;
  }
}

/* Host: the dynamic shared memory a block of the current device may opt into (64 KiB on sm_75, 163 KiB
 * on sm_80, 227 KiB on sm_90), asked once (a process drives one device). */
inline size_t flash_smem_limit() {
  static size_t limit;
  if (!limit) {
    int ordinal = 0, bytes = 0;
    HS_CUDA_CHECK(cudaGetDevice(&ordinal));
    HS_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, ordinal));
    limit = (size_t)bytes;
  }
  return limit;
}

/* Host: warps of `kernel` resident on one multiprocessor in blocks of `warps` warps that take `bytes` of
 * dynamic shared memory; 0 if a block does not fit at all. The runtime's occupancy calculator answers:
 * it counts the kernel's registers (with their outputs in registers the kernels can be register bound)
 * and static shared memory besides the block's threads and dynamic shared memory (the emulated device:
 * threads and shared memory only, docs/gpu-emulation.md). A kernel's first query also opts it into
 * flash_smem_limit() bytes of dynamic shared memory (cudaFuncAttributeMaxDynamicSharedMemorySize: above
 * 48 KiB a launch without it fails with cudaErrorInvalidValue, and the calculator holds the bytes to the
 * opted-in limit). Asked once per (kernel, warps, bytes), as every update's eager launches pick again; a
 * shape's first update runs eagerly (docs/gpu.md, "CUDA graphs"), so no capture sees these calls. */
template <class K>
inline int flash_resident_warps(K *kernel, int warps, size_t bytes) {
  struct answer {
    const void *kernel;
    int warps;
    size_t bytes;
    int resident;
  };
  static answer known[256];
  static int n_known;
  bool kernel_seen = false;
  for (int i = 0; i < n_known; i++) {
    if (known[i].kernel != (const void *)kernel) continue;
    if (known[i].warps == warps && known[i].bytes == bytes) return known[i].resident;
    kernel_seen = true;
  }
  if (!kernel_seen)
    HS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)flash_smem_limit()));
  int blocks = 0;
  if (bytes <= flash_smem_limit())
    HS_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, warps * HS_WARP, bytes));
  if (n_known < 256) known[n_known++] = answer{(const void *)kernel, warps, bytes, blocks * warps};
  return blocks * warps;
}

/* The backward's row dot products of both fused attentions: D[unit·L + i] = Σ_c dctx[o + c]·ctx[o + c],
 * c = 0..d-1 in order (one thread's sum, the order the CPU backend sums in), o = (b·L + i)·H + h·d for
 * unit = b·heads + h, H = heads·d; ctx from its 16-bit twin ctx16 (widened, exact) when ctx16 is not null
 * (bind_half_only), dctx likewise from dctx_in16; dctx16 (null, or like dctx) receives round(dctx) (bf16:
 * bfloat16, else IEEE half), the copy the tile kernels load dC from (null where dctx_in16 is that copy).
 * A row is d contiguous values H apart from the next, so a thread per row reading its own row makes every
 * load of a warp touch 32 sectors for 32 values. Here a block stages kRowDotRows rows at a time in shared
 * memory, each row read (and dctx16 written) by consecutive threads, then a thread per row sums from
 * shared memory: the same sums, coalesced global traffic. Row pitch d + 1 (odd): the summing threads'
 * column c falls in 32 different banks. d <= kRowDotMaxD. */
constexpr int kRowDotRows = 32, kRowDotMaxD = 128;

__global__ void __launch_bounds__(HS_BLOCK)
    flash_row_dot_kernel(float *D, uint16_t *dctx16, const float *dctx, const uint16_t *dctx_in16, const float *ctx,
                         const uint16_t *ctx16, int bf16, int batch, int L, int heads, int d) {
  HS_SHARED(float[kRowDotRows * (kRowDotMaxD + 1)], dc);
  HS_SHARED(float[kRowDotRows * (kRowDotMaxD + 1)], cx);
  const size_t rows = (size_t)batch * heads * L, H = (size_t)heads * d;
  const int pitch = d + 1;
  const size_t tiles = (rows + kRowDotRows - 1) / kRowDotRows;
  for (size_t t = blockIdx.x; t < tiles; t += gridDim.x) { /* uniform across the block */
    const size_t r0 = t * kRowDotRows;
    for (int k = threadIdx.x; k < kRowDotRows * d; k += blockDim.x) {
      const int a = k / d, c = k % d;
      const size_t r = r0 + (size_t)a;
      if (r >= rows) continue;
      const size_t unit = r / (size_t)L, i = r % (size_t)L, b = unit / (size_t)heads, h = unit % (size_t)heads;
      const size_t o = (b * (size_t)L + i) * H + h * (size_t)d + (size_t)c;
      const float g = dctx_in16 ? (bf16 ? hs_bf16_to_float(dctx_in16[o]) : hs_fp16_to_float(dctx_in16[o])) : dctx[o];
      dc[a * pitch + c] = g;
      cx[a * pitch + c] = ctx16 ? (bf16 ? hs_bf16_to_float(ctx16[o]) : hs_fp16_to_float(ctx16[o])) : ctx[o];
      if (dctx16) dctx16[o] = bf16 ? hs_bf16_bits(g) : hs_fp16_bits(g);
    }
    __syncthreads();
    if (threadIdx.x < kRowDotRows && r0 + threadIdx.x < rows) {
      const float *x = dc + threadIdx.x * pitch, *y = cx + threadIdx.x * pitch;
      float s = 0.0f;
      for (int c = 0; c < d; c++) s += x[c] * y[c];
      D[r0 + threadIdx.x] = s;
    }
    __syncthreads();
  }
}

/* Host: the bytes flash_row_dot_kernel moves over elems = rows·d values (the device-op ledger): dctx and
 * ctx read, each in fp32 or from 16 bits (dctx_only16, ctx16 given), D written, and dctx16 where written */
static inline size_t flash_row_dot_bytes(size_t elems, size_t rows, const void *dctx_only16, const void *ctx16,
                                         const void *dctx16) {
  return elems * ((dctx_only16 ? 2 : 4) + (ctx16 ? 2 : 4) + (dctx16 ? 2 : 0)) + rows * sizeof(float);
}

/* Host: flash_row_dot_kernel's grid for rows rows (a block per kRowDotRows rows, capped as hs_grid_for) */
static inline unsigned flash_row_dot_grid(size_t rows) {
  return hs_grid_for((rows + kRowDotRows - 1) / kRowDotRows * (size_t)HS_BLOCK);
}

} // namespace

#endif
