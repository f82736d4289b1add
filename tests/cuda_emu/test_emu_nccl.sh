#!/bin/sh
# The NCCL stand-in of the emulated CUDA device across 3 ranks (tests/cuda_emu/test_emu_libs --ranks
# under mpirun): all-reduce and broadcast give every rank the same, right values, and a rank that makes
# its own ncclUniqueId instead of receiving rank 0's is caught by ncclCommInitRank on every rank, and so
# are ranks that share one GPU (ncclInvalidUsage and NCCL's "Duplicate GPU detected" warning, as NCCL 2.28
# answers). The emulated node has one GPU per rank (HS_CUDA_EMU_DEVICES=3); the test puts all on GPU 0 first.
builddir=${top_builddir:-.}
prog="$builddir/tests/cuda_emu/test_emu_libs"
[ -x "$prog" ] || { echo "FAIL: $prog not built"; exit 1; }
# A session-directory base of its own, as in tests/lib.sh (concurrent jobs race on /tmp/ompi.HOST.UID).
OMPI_MCA_orte_tmpdir_base=$(mktemp -d /tmp/hs-ompi.XXXXXX) || exit 99
export OMPI_MCA_orte_tmpdir_base
trap 'rm -rf "$OMPI_MCA_orte_tmpdir_base"' EXIT
out=$(HS_CUDA_EMU_DEVICES=3 NCCL_DEBUG=WARN timeout -k 5 120 "${MPIRUN:-mpirun}" --allow-run-as-root --oversubscribe -np 3 \
  --mca btl self,vader --mca rmaps_base_oversubscribe 1 "$prog" --ranks 2>&1)
rc=$?
printf '%s\n' "$out"
[ $rc -eq 0 ] || { echo "FAIL: test_emu_libs --ranks on 3 ranks exited with $rc"; exit 1; }
printf '%s\n' "$out" | grep -q 'hs_cuda_emu: ncclCommInitRank failed on every rank' ||
  { echo "FAIL: no report of the mismatched ncclUniqueId"; exit 1; }
for r in 0 1 2; do
  printf '%s\n' "$out" | grep -q "\[0\] init.cc:[0-9]* NCCL WARN Duplicate GPU detected : rank $r and rank [0-9] both on CUDA device 1000" ||
    { echo "FAIL: rank $r did not warn about the duplicate GPU (NCCL_DEBUG=WARN)"; exit 1; }
done
echo "ok   NCCL stand-in on 3 ranks"
