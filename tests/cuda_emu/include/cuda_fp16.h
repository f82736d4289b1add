/* Stand-in for CUDA's cuda_fp16.h on the emulated device (tests only; tests/cuda_emu/): __half as a
 * 16-bit IEEE binary16 storage type and the conversions hetseq kernels use, not the arithmetic.
 * Conversions from float round to nearest, ties to even, as __float2half does on a GPU (CUDA Math
 * API, "Half Precision Conversion and Data Movement"). */
#ifndef HS_EMU_CUDA_FP16_H
#define HS_EMU_CUDA_FP16_H
#include <math.h>
#include <stdint.h>
#include <string.h>

struct __half {
  unsigned short __x; /* the bit pattern */
};

inline unsigned short hs_emu_float_to_half_bits(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const unsigned short sign = static_cast<unsigned short>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u); /* NaN (quiet), Inf */
  if (ax >= 0x477ff000u) return sign | 0x7c00u; /* >= 65520 = 65504 + half an ulp: rounds to Inf */
  if (ax < 0x38800000u) {                       /* below 2^-14: a subnormal half, units of 2^-24 */
    float a;
    memcpy(&a, &ax, 4);
    return sign | static_cast<unsigned short>(nearbyintf(a * 0x1p24f)); /* exact scaling, then RNE */
  }
  const uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u); /* round the 13 dropped bits to nearest even */
  return sign | static_cast<unsigned short>((r - 0x38000000u) >> 13); /* rebias 127 -> 15 */
}

inline float hs_emu_half_bits_to_float(unsigned short h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = static_cast<float>(m) * 0x1p-24f; /* zero or subnormal, exact */
    return sign ? -v : v;
  }
  const uint32_t bits = sign | (e == 31 ? 0x7f800000u | (m << 13) : ((e + 112u) << 23) | (m << 13));
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

inline __half __float2half(float f) { return __half{hs_emu_float_to_half_bits(f)}; }
inline __half __float2half_rn(float f) { return __half{hs_emu_float_to_half_bits(f)}; }
inline float __half2float(__half h) { return hs_emu_half_bits_to_float(h.__x); }
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __ushort_as_half(unsigned short u) { return __half{u}; }

#endif
