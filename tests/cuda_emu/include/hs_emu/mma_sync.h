// PTX mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32 and ldmatrix (below) on the emulated device (tests only;
// docs/gpu-emulation.md, "Register-fragment products"). kernels/mma_sync.cuh calls it where nvcc emits the
// instruction.
//
// The instruction is warp-collective and its fragments' layouts are documented (PTX ISA, "Matrix
// Fragments for mma.m16n8k16 with floating point type"), unlike nvcuda::wmma's: with g = lane / 4 and
// t = lane % 4, lane l holds
//   A [16 x 16] in 4 registers of two 16-bit values (low half first):
//       a[0] = A[g][2t, 2t+1]   a[1] = A[g+8][2t, 2t+1]   a[2] = A[g][2t+8, 2t+9]   a[3] = A[g+8][2t+8, 2t+9]
//   B [16 x 8] in 2 registers:  b[0] = B[2t, 2t+1][g]      b[1] = B[2t+8, 2t+9][g]
//   C, D [16 x 8] fp32:         c[0], c[1] = C[g][2t, 2t+1]   c[2], c[3] = C[g+8][2t, 2t+1]
// so kernels compute with the elements they hold (a row's softmax over the lanes of a quad, D of one
// product reused as A of the next). The emulator gathers every lane's registers by this layout, computes
// D = C + A·B as its WMMA does (each of the 16 products exact in fp32, summed pairwise
// ((p0 + p1) + (p2 + p3)) + ..., the sum added to C last; a GPU's order is unspecified: tests compare
// within bounds) and gives each lane its D registers back. All 32 lanes must call it at one call site
// (runtime/block.cc's warp_collective reports a missing or diverging lane).
#ifndef HS_EMU_MMA_SYNC_H
#define HS_EMU_MMA_SYNC_H
#include <cstdint>
#include <cstdio>
#include <cstring>
#include "device_builtins.h"

namespace hs_emu {

struct MmaSyncArgs {
  float *d;
  const uint32_t *a, *b;
  const float *c;
  bool bf16;
};

inline float mma_sync_half_value(uint32_t reg, int hi, bool bf16) {
  const uint32_t h = hi ? reg >> 16 : reg & 0xffffu;
  if (bf16) {
    const uint32_t bits = h << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
  // IEEE binary16 -> float, exactly (subnormals included)
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  float v;
  if (exp == 0)
    v = ldexpf(static_cast<float>(man), -24);
  else if (exp == 31)
    v = man ? NAN : INFINITY;
  else
    v = ldexpf(static_cast<float>(man | 0x400u), static_cast<int>(exp) - 25);
  return sign ? -v : v;
}

inline const char *mma_sync_complete(void *const *args) {
  float A[16][16], B[16][8], C[16][8];
  const bool bf16 = static_cast<const MmaSyncArgs *>(args[0])->bf16;
  for (int l = 0; l < 32; l++) {
    const MmaSyncArgs &m = *static_cast<const MmaSyncArgs *>(args[l]);
    if (m.bf16 != bf16) return "lanes pass different operand types to mma.sync m16n8k16";
    const int g = l / 4, t = l % 4;
    for (int r = 0; r < 4; r++)
      for (int hi = 0; hi < 2; hi++) {
        const int row = g + (r & 1) * 8, col = 2 * t + hi + (r >> 1) * 8;
        A[row][col] = mma_sync_half_value(m.a[r], hi, bf16);
      }
    for (int r = 0; r < 2; r++)
      for (int hi = 0; hi < 2; hi++) B[2 * t + hi + r * 8][g] = mma_sync_half_value(m.b[r], hi, bf16);
    for (int e = 0; e < 4; e++) C[g + (e >> 1) * 8][2 * t + (e & 1)] = m.c[e];
  }
  float D[16][8];
  for (int i = 0; i < 16; i++)
    for (int j = 0; j < 8; j++) {
      float s[16];
      for (int k = 0; k < 16; k++) s[k] = A[i][k] * B[k][j]; // exact in fp32
      for (int w = 1; w < 16; w *= 2)
        for (int k = 0; k < 16; k += 2 * w) s[k] = s[k] + s[k + w];
      D[i][j] = C[i][j] + s[0];
    }
  for (int l = 0; l < 32; l++) {
    float *d = static_cast<const MmaSyncArgs *>(args[l])->d;
    const int g = l / 4, t = l % 4;
    for (int e = 0; e < 4; e++) d[e] = D[g + (e >> 1) * 8][2 * t + (e & 1)];
  }
  return nullptr;
}

// d = c + a·b for the warp (d may be c)
inline void mma_m16n8k16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4], bool bf16,
                         const char *file, int line) {
  float cin[4] = {c[0], c[1], c[2], c[3]};
  MmaSyncArgs args{d, a, b, cin, bf16};
  warp_collective("mma.sync.m16n8k16", mma_sync_complete, &args, file, line);
}

// PTX ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16 (and .x2: two matrices, lanes 0-15 name their rows,
// the other lanes' addresses are not read): lane l names row l % 8 of matrix l / 8 (8 consecutive 16-bit
// values, 16-byte aligned); lane (g, t) receives r[m] = matrix m's row g, columns 2t and 2t + 1 (low half
// first), or with .trans its rows 2t and 2t + 1 of column g. Each lane reads its row as it
// arrives, as a GPU's lanes may read at any time before the warp goes on; a row that changes before the
// last lane arrives (a write not ordered before the load by __syncwarp or __syncthreads) is reported, as a
// misaligned row is (a GPU stops the kernel: cudaErrorMisalignedAddress).
struct LdmatrixArgs {
  uint32_t *r;
  const uint16_t *row;
  uint16_t seen[8]; // the row at this lane's arrival
  bool trans;
  int count; // matrices: 4 or 2
};

inline const char *ldmatrix_complete(void *const *args) {
  static thread_local char msg[160];
  const bool trans = static_cast<const LdmatrixArgs *>(args[0])->trans;
  const int count = static_cast<const LdmatrixArgs *>(args[0])->count;
  for (int l = 0; l < 32; l++) {
    const LdmatrixArgs &m = *static_cast<const LdmatrixArgs *>(args[l]);
    if (m.trans != trans || m.count != count) return "lanes differ in .trans or the number of matrices";
    if (l < 8 * count && std::memcmp(m.seen, m.row, sizeof m.seen) != 0) {
      std::snprintf(msg, sizeof msg,
                    "the row lane %d names (%p) changed while the warp's lanes arrived: its writes need "
                    "__syncwarp or __syncthreads before the load",
                    l, static_cast<const void *>(m.row));
      return msg;
    }
  }
  uint32_t out[32][4];
  for (int l = 0; l < 32; l++) {
    const int g = l / 4, t = l % 4;
    for (int mat = 0; mat < count; mat++) {
      auto row = [&](int i) { return static_cast<const LdmatrixArgs *>(args[8 * mat + i])->seen; }; // matrix row i
      uint16_t lo, hi;
      if (trans)
        lo = row(2 * t)[g], hi = row(2 * t + 1)[g];
      else
        lo = row(g)[2 * t], hi = row(g)[2 * t + 1];
      out[l][mat] = static_cast<uint32_t>(lo) | static_cast<uint32_t>(hi) << 16;
    }
  }
  for (int l = 0; l < 32; l++)
    std::memcpy(static_cast<const LdmatrixArgs *>(args[l])->r, out[l], sizeof(uint32_t) * static_cast<size_t>(count));
  return nullptr;
}

// lane_reads: whether this lane's row is read (every lane for 4 matrices, lanes 0-15 for 2)
inline void ldmatrix_arrive(LdmatrixArgs &args, bool lane_reads, const char *name, const char *file, int line) {
  if (lane_reads) {
    if (reinterpret_cast<uintptr_t>(args.row) % 16 != 0) misaligned_vector(args.row, 16, "ldmatrix row", file, line);
    std::memcpy(args.seen, args.row, sizeof args.seen);
  }
  warp_collective(name, ldmatrix_complete, &args, file, line);
}
inline void ldmatrix_x4(uint32_t r[4], const uint16_t *row, bool trans, const char *file, int line) {
  LdmatrixArgs args{r, row, {}, trans, 4};
  ldmatrix_arrive(args, true, "ldmatrix.sync.m8n8.x4", file, line);
}
inline void ldmatrix_x2(uint32_t r[2], const uint16_t *row, const char *file, int line) {
  LdmatrixArgs args{r, row, {}, false, 2};
  const ThreadCoords &c = coords("ldmatrix");
  const unsigned lane = (c.tid.x + c.bdim.x * (c.tid.y + c.bdim.y * c.tid.z)) % 32;
  ldmatrix_arrive(args, lane < 16, "ldmatrix.sync.m8n8.x2", file, line);
}

} // namespace hs_emu

#endif
