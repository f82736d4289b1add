#!/bin/sh
# The NCCL stand-in of the emulated CUDA device across 3 ranks (tests/cuda_emu/test_emu_libs --ranks
# under mpirun): all-reduce and broadcast give every rank the same, right values, and a rank that makes
# its own ncclUniqueId instead of receiving rank 0's is caught by ncclCommInitRank on every rank.
builddir=${top_builddir:-.}
prog="$builddir/tests/cuda_emu/test_emu_libs"
[ -x "$prog" ] || { echo "FAIL: $prog not built"; exit 1; }
out=$(timeout -k 5 120 "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe -np 3 \
  --mca btl self,vader --mca rmaps_base_oversubscribe 1 "$prog" --ranks 2>&1)
rc=$?
printf '%s\n' "$out"
[ $rc -eq 0 ] || { echo "FAIL: test_emu_libs --ranks on 3 ranks exited with $rc"; exit 1; }
printf '%s\n' "$out" | grep -q 'hs_cuda_emu: ncclCommInitRank failed on every rank' ||
  { echo "FAIL: no report of the mismatched ncclUniqueId"; exit 1; }
echo "ok   NCCL stand-in on 3 ranks"
