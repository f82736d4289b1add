// TF32 rounding of the emulated device's math libraries (tests only; tests/cuda_emu/): what a tensor
// core multiplies when cuBLASLt runs CUBLAS_COMPUTE_32F_FAST_TF32, or cuDNN a float convolution whose
// math type permits tensor cores on compute capability 8.0. TF32 keeps 11 significant bits and fp32's
// exponent range: the value rounded to nearest, ties to even, at 2^-10 of its leading bit (fp32
// subnormals at 2^-136, fp32's quantum with the 13 low bits dropped). Computed from the value (frexp,
// then nearbyint in the default round-to-nearest-even mode), not from the bit pattern, so it checks
// hetseq's own conversion (src/util/lowp.h) independently.
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

inline float to_tf32(float x) {
  if (!std::isfinite(x) || x == 0.0f) return x;
  int e;
  const double m = std::frexp(static_cast<double>(x), &e); // x = m 2^e, |m| in [0.5, 1)
  const int bits = e - 1 >= -126 ? 11 : e + 136;           // below 2^-126 the quantum stays 2^-136
  return static_cast<float>(std::ldexp(std::nearbyint(std::ldexp(m, bits)), e - bits));
}

// p[n] rounded to TF32 in buf; returns buf's data
inline const float *tf32_copy(const float *p, size_t n, std::vector<float> &buf) {
  buf.resize(n);
  for (size_t i = 0; i < n; i++) buf[i] = to_tf32(p[i]);
  return buf.data();
}

} // namespace hs_emu
#endif
