"""A user who trains with precision = "bf16" | "fp16" | "tf32" relies on hetseq rounding every product's
operands exactly as PyTorch (and the GPU's cvt.rn conversions) do: to nearest, ties to even, with fp16's
subnormals (multiples of 2^-24), overflow to +-inf from 65520 up (65504 plus half its ulp, a tie that
rounds to the even neighbour 2^16), and NaN staying NaN. This compares src/util/lowp.h bit for bit
(through the tests/unit/lowp_dump filter) with torch's and numpy's float32 -> float16 / bfloat16
conversions on:
  - every bf16 and every fp16 value, the midpoint between each pair of neighbours (the ties) and the
    fp32 values just above and below each midpoint: dense coverage of both types' rounding boundaries,
    subnormals, the smallest subnormal's tie with 0, and the overflow threshold;
  - 2^22 random fp32 bit patterns (every exponent, both signs, NaNs and infinities included).
TF32 has no torch dtype: its reference is computed independently in float64 (frexp, then np.rint — round
half to even — of the significand scaled to 11 bits; fp32 subnormals to multiples of 2^-136, fp32's
subnormal quantum 2^-149 with the 13 low bits dropped). fp16 -> fp32 is checked for all 65536 patterns."""
import os
import subprocess
import sys

import numpy as np
import torch

DUMP = os.path.join(os.environ.get("top_builddir", "."), "tests", "unit", "lowp_dump")
rng = np.random.default_rng(20261124)


def neighbours_and_ties(values_f32):
    """values, midpoints of sorted neighbours (exact in fp32: 12-bit significands for fp16, 9 for bf16),
    and the fp32 values one ulp either side of each midpoint"""
    v = np.unique(values_f32[np.isfinite(values_f32)].astype(np.float64))
    mid = ((v[:-1] + v[1:]) / 2).astype(np.float32)
    assert np.all(mid.astype(np.float64) == (v[:-1] + v[1:]) / 2), "a midpoint is not exact in fp32"
    up = np.nextafter(mid, np.float32(np.inf))
    down = np.nextafter(mid, np.float32(-np.inf))
    return np.concatenate([v.astype(np.float32), mid, up, down])


all16 = np.arange(65536, dtype=np.uint32).astype(np.uint16)
fp16_values = all16.view(np.float16).astype(np.float32)
bf16_values = (all16.astype(np.uint32) << 16).view(np.float32)
special = np.array([0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0x7F7FFFFF, 0xFF7FFFFF, 0x00000001,
                    0x80000001, 0x007FFFFF, 0x00800000, 0x477FF000, 0x477FEFFF, 0x33000000, 0x33000001,
                    0x337FFFFF, 0x33800000, 0x38800000, 0x387FFFFF], dtype=np.uint32).view(np.float32)
x = np.concatenate([neighbours_and_ties(fp16_values), neighbours_and_ties(bf16_values), special,
                    np.float32([65504, 65519.996, 65520, 65536, 1e6, -65520, 2.0**-24, 2.0**-25, 3 * 2.0**-26]),
                    rng.integers(0, 2**32, size=1 << 22, dtype=np.uint64).astype(np.uint32).view(np.float32)])
x = x.astype(np.float32)
n = x.size

out = subprocess.run([DUMP, "f"], input=x.view(np.uint32).tobytes(), stdout=subprocess.PIPE, check=True).stdout
rec = np.frombuffer(out, dtype=np.dtype([("h", "<u2"), ("b", "<u2"), ("t", "<u4")]))
assert rec.size == n, f"lowp_dump returned {rec.size} records for {n} inputs"
nan = np.isnan(x)
failures = 0


def compare(name, got, want, got_is_nan, want_is_nan):
    global failures
    bad = np.flatnonzero(((got != want) & ~(want_is_nan & got_is_nan)) | (got_is_nan != want_is_nan))
    print(f"{name}: {n - bad.size} of {n} agree")
    for i in bad[:8]:
        print(f"  x = {x[i]!r} (0x{x.view(np.uint32)[i]:08x}): hetseq 0x{int(got[i]):x}, reference 0x{int(want[i]):x}")
    failures += bad.size


with np.errstate(over="ignore", invalid="ignore"):
    # fp16: torch and numpy both
    t16 = torch.from_numpy(x).to(torch.float16).view(torch.int16).numpy().view(np.uint16)
    n16 = x.astype(np.float16).view(np.uint16)
    h_nan = (rec["h"] & 0x7C00) == 0x7C00
    h_nan &= (rec["h"] & 0x03FF) != 0
    compare("fp16 vs torch.float16", rec["h"], t16, h_nan, nan)
    compare("fp16 vs numpy.float16", rec["h"], n16, h_nan, nan)
    # bf16: torch
    tb = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    b_nan = ((rec["b"] & 0x7F80) == 0x7F80) & ((rec["b"] & 0x007F) != 0)
    compare("bf16 vs torch.bfloat16", rec["b"], tb, b_nan, nan)
    # tf32: float64 reference
    x64 = x.astype(np.float64)
    m, e = np.frexp(x64)
    normal = np.abs(x64) >= 2.0**-126
    ref = np.where(normal, np.ldexp(np.rint(m * 2.0**11), e - 11), np.rint(x64 * 2.0**136) * 2.0**-136)
    ref = np.where(np.isfinite(x64), ref, x64).astype(np.float32)  # beyond FLT_MAX: +-inf
    t_bits = rec["t"]
    t_nan = np.isnan(t_bits.view(np.float32))
    compare("tf32 vs float64 reference", t_bits, ref.view(np.uint32), t_nan, nan)
    low = (t_bits & 0x1FFF) != 0
    if np.any(low):
        print(f"tf32: {np.count_nonzero(low)} results keep bits below the 10-bit mantissa")
        failures += np.count_nonzero(low)

# fp16 -> fp32 for every pattern
back = np.frombuffer(subprocess.run([DUMP, "h"], input=all16.tobytes(), stdout=subprocess.PIPE, check=True).stdout,
                     dtype="<u4")
want = fp16_values.view(np.uint32)
bad = np.flatnonzero((back != want) & ~(np.isnan(fp16_values) & np.isnan(back.view(np.float32))))
print(f"fp16 -> fp32: {65536 - bad.size} of 65536 agree with numpy")
for i in bad[:8]:
    print(f"  0x{i:04x}: hetseq 0x{int(back[i]):08x}, numpy 0x{int(want[i]):08x}")
failures += bad.size

# the documented boundaries, spelled out
h = lambda v: int(np.frombuffer(subprocess.run([DUMP, "f"], input=np.float32([v]).tobytes(),
                                               stdout=subprocess.PIPE, check=True).stdout[:2], "<u2")[0])
for v, want_bits, what in [(65504.0, 0x7BFF, "largest fp16"), (65519.996, 0x7BFF, "below the overflow tie"),
                           (65520.0, 0x7C00, "overflow tie -> inf"), (2.0**-25, 0x0000, "tie with 0 -> +0"),
                           (3 * 2.0**-26, 0x0001, "above the tie -> smallest subnormal"),
                           (1 + 2.0**-11, 0x3C00, "tie, even below"), (1 + 3 * 2.0**-11, 0x3C02, "tie, odd below")]:
    got = h(v)
    if got != want_bits:
        print(f"fp16({v!r}) = 0x{got:04x}, expected 0x{want_bits:04x} ({what})")
        failures += 1

if failures:
    print(f"FAIL: {failures} mismatches")
    sys.exit(1)
print("PASS")
