#!/bin/sh
# The emulator's self-test kernels (tests/cuda_emu/selftest_kernels.cu, the same file the emulated
# device runs) compile with nvcc too, through kernels/hs_cuda.h: HS_LAUNCH becomes <<<>>>, HS_SHARED
# and HS_DYNAMIC_SHARED become __shared__, and the qualifiers and runtime are NVIDIA's. Skipped (77)
# where there is no nvcc. HS_NVCC names the compiler (default /usr/local/cuda/bin/nvcc).
nvcc=${HS_NVCC:-/usr/local/cuda/bin/nvcc}
if [ ! -x "$nvcc" ]; then
  echo "SKIP: no nvcc at $nvcc"
  exit 77
fi
src=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
out=$(mktemp -d) || exit 1
trap 'rm -rf "$out"' EXIT

# The emulator's headers must not be on the path: nvcc gets only NVIDIA's cuda_runtime.h.
"$nvcc" -c -arch=sm_80 -std=c++17 -Werror all-warnings -I"$src/kernels" -I"$src/tests/cuda_emu" \
  "$src/tests/cuda_emu/selftest_kernels.cu" -o "$out/selftest_kernels.o" || {
  echo "FAIL: nvcc does not compile tests/cuda_emu/selftest_kernels.cu"
  exit 1
}
# Device code for sm_80 was built, and the launches go through CUDA's <<<>>> machinery.
if ! objdump -h "$out/selftest_kernels.o" | grep -q '\.nv_fatbin'; then
  echo "FAIL: no device code (.nv_fatbin) in the object"
  exit 1
fi
if ! nm "$out/selftest_kernels.o" | grep -q ' U __cudaPushCallConfiguration'; then
  echo "FAIL: HS_LAUNCH did not become a <<<>>> launch (no __cudaPushCallConfiguration)"
  exit 1
fi
echo "ok   nvcc -arch=sm_80 -Werror all-warnings compiles selftest_kernels.cu through kernels/hs_cuda.h"
