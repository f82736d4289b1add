/* Stand-in for CUDA's cuda_bf16.h on the emulated device (tests only; tests/cuda_emu/): __nv_bfloat16
 * as a 16-bit bfloat16 storage type (the top half of an fp32) and the conversions hetseq kernels use,
 * not the arithmetic. Conversions from float round to nearest, ties to even, as __float2bfloat16 does
 * on a GPU (CUDA Math API, "Bfloat16 Precision Conversion and Data Movement"). */
#ifndef HS_EMU_CUDA_BF16_H
#define HS_EMU_CUDA_BF16_H
#include <stdint.h>
#include <string.h>

struct __nv_bfloat16 {
  unsigned short __x; /* the bit pattern */
};

inline unsigned short hs_emu_float_to_bf16_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<unsigned short>((x >> 16) | 0x40u); /* quiet NaN */
  return static_cast<unsigned short>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

inline float hs_emu_bf16_bits_to_float(unsigned short b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16{hs_emu_float_to_bf16_bits(f)}; }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16{hs_emu_float_to_bf16_bits(f)}; }
inline float __bfloat162float(__nv_bfloat16 b) { return hs_emu_bf16_bits_to_float(b.__x); }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16{u}; }

#endif
