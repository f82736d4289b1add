// TF32 rounding of the emulated device's math libraries (tests only; tests/cuda_emu/): what a tensor
// core multiplies when cuBLASLt runs CUBLAS_COMPUTE_32F_FAST_TF32, or cuDNN a float convolution whose
// math type permits tensor cores on compute capability 8.0. TF32 keeps 11 significant bits and fp32's
// exponent range: the value rounded to nearest, ties to even, at 2^-10 of its leading bit (fp32
// subnormals at 2^-136, fp32's quantum with the 13 low bits dropped). Computed from the value (frexp,
// then a rounding addition in double in the default round-to-nearest-even mode), not from the bit
// pattern, so it checks hetseq's own conversion (src/util/lowp.h) independently.
// Ties to even is what NVIDIA's CUTLASS does when it converts a float operand for a TF32 tensor-core MMA
// (include/cutlass/numeric_conversion.h, NumericConverter<tfloat32_t, float, round_to_nearest>: adds
// 2^13 to the bits when the round bit (bit 12) is set and either a sticky bit (bits 0-11) or the kept
// lowest bit (bit 13) is: nearest, ties to even; the tensor core then ignores bits 0-12). A library
// that truncated instead (the mma instruction alone reads only the top 19 bits) would err by up to a
// full TF32 ulp rather than half; the conformance bounds (docs/gpu.md, "How results are compared")
// allow for that.
#ifndef HS_EMU_TF32_H
#define HS_EMU_TF32_H
#include <cmath>
#include <cstddef>
#include <vector>

namespace hs_emu {

// 1.5 * 2^i for i in [kTf32BigLo, kTf32BigHi]: the constant whose ulp in double is the quantum 2^(i - 52)
constexpr int kTf32BigLo = -136 + 52, kTf32BigHi = 117 + 52;
struct Tf32Bigs {
  double v[kTf32BigHi - kTf32BigLo + 1];
  constexpr Tf32Bigs() : v() {
    double p = 1.5;
    for (int i = 0; i < -kTf32BigLo; i++) p /= 2; // exact: powers of two times 1.5
    for (int i = kTf32BigLo; i <= kTf32BigHi; i++, p *= 2) v[i - kTf32BigLo] = p;
  }
};
constexpr Tf32Bigs kTf32Bigs;

// x rounded to a multiple of its quantum 2^lo (lo = e - 11 for x = m 2^e, |m| in [0.5, 1); -136 below
// 2^-126), nearest, ties to even: x + 1.5 * 2^(lo + 52) in double lies in a binade whose ulp is 2^lo, so
// the addition rounds x there (1.5 * 2^52 is even: the tie goes to the even multiple), and subtracting the
// constant again is exact. copysign keeps the sign of a tiny negative value that rounds to zero. (The
// same values as nearbyint(ldexp(m, e - lo)) scaled back by 2^lo, without the libm calls.)
inline float to_tf32(float x) {
  if (!std::isfinite(x) || x == 0.0f) return x;
  int e;
  std::frexp(x, &e);                              // x = m 2^e, |m| in [0.5, 1)
  const int lo = e - 1 >= -126 ? e - 11 : -136;    // below 2^-126 the quantum stays 2^-136
  const double big = kTf32Bigs.v[lo + 52 - kTf32BigLo];
  return std::copysign(static_cast<float>((static_cast<double>(x) + big) - big), x);
}

// p[n] rounded to TF32 in buf; returns buf's data
inline const float *tf32_copy(const float *p, size_t n, std::vector<float> &buf) {
  buf.resize(n);
  for (size_t i = 0; i < n; i++) buf[i] = to_tf32(p[i]);
  return buf.data();
}

} // namespace hs_emu
#endif
