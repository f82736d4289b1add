# A user profiles training updates on a GPU node with Nsight Compute and reads where the GPU time goes:
# bench/gpu/ncu_summary.py turns ncu's CSV (both of its pages, with the log and ncu's ==PROF== lines
# around it, values with thousands separators, time and byte units as the file gives them) into one line
# per kernel: launches and milliseconds per update, share, mean time per launch, DRAM bandwidth and its
# fraction of the GPU's peak; the figures of two hand-made files are checked to the digit. A file that is
# not ncu's CSV, or a unit it does not know, ends with a message naming the file (and line). Then the GPU
# benchmark's --ncu option, with a stand-in for ncu: the profiled run is a separate run of the updates
# after the warm-up, with HETSEQ_PROFILE_UPDATES set to them and ncu told to record inside that range
# only, and its table lands in the directory given; --no-pytorch leaves PyTorch out, and says so.
. "${top_srcdir:-.}/tests/lib.sh"
py=${PYTHON_TORCH:-$(command -v python3 || true)}
[ -n "$py" ] || skip "no python3"
S="$top_srcdir/bench/gpu/ncu_summary.py"
F="$top_srcdir/tests/fixtures/ncu"

# row FILE KERNEL: the table's line of KERNEL, its cells separated by single spaces
row() { grep -F "| $2 |" "$1" | sed 's/ *| */|/g; s/^|//; s/|$//' | tr '|' ' '; }
expect_row() {
  local got; got=$(row "$1" "$2")
  [ "$got" = "$2 $3" ] || { cat "$1"; fail "$1: the line of $2 is '$got', expected '$2 $3'"; }
}

"$py" "$S" "$F/details.csv" --updates 2 --peak-gbs 4800 --out details.md > details.out || fail "details.csv not read"
cmp -s details.md details.out || fail "--out differs from what was printed"
grep -qx '3 kernel launches, 1.212 ms of GPU time per update (2 updates profiled); 3 kernels by name.' details.md ||
  { cat details.md; fail "details.csv: the totals line"; }
# the GEMM: 2 x 1.2 ms (ns with separators, ms), 83.88 MB each: 69.9 GB/s, 1.5 % of 4800
expect_row details.md sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas \
  "1 1.200 99.0 1200.0 70 1"
# LayerNorm: 8.39 us + 9.61 usecond, 2 x 25.17 MB: 2797 GB/s, 58 %
expect_row details.md layernorm_fwd_kernel "1 0.009 0.7 9.0 2797 58"
# to_half_kernel<bf16> and <half> as one kernel; only the first has bytes (6291456 B in 2.5 us: 2517 GB/s)
expect_row details.md to_half_kernel "1 0.003 0.2 3.0 2517 52"
[ "$(grep -c '^| ' details.md)" = 4 ] || { cat details.md; fail "details.csv: not 3 kernels and the header"; }
"$py" "$S" "$F/details.csv" --templates --top 2 > top.md || fail "--templates --top 2"
expect_row top.md "(the other 2 kernels)" "2 0.006 0.2 3.0 2517"
grep -q "4 kernels by name" top.md || { cat top.md; fail "--templates: to_half_kernel's two instances not apart"; }

"$py" "$S" "$F/raw.csv" > raw.md || fail "raw.csv (ncu --page raw) not read"
expect_row raw.md dropout_kernel "2 0.010 50.0 5.0 3355"
expect_row raw.md bias_grad_kernel "1 0.010 50.0 10.0 n/a"
grep -q "in the file" raw.md || { cat raw.md; fail "raw.csv without --updates: not totals of the file"; }
echo "ok: both CSV pages read; per-update milliseconds, shares and bandwidths as computed by hand"

printf 'hello\n' > notcsv.csv
out=$("$py" "$S" notcsv.csv 2>&1) && fail "a file that is not ncu's CSV was accepted"
printf '%s\n' "$out" | grep -q 'notcsv.csv: no ncu CSV table' || fail "not-a-CSV message: $out"
sed 's/"Mbyte","16.78"/"Pbyte","16.78"/' "$F/details.csv" > badunit.csv
out=$("$py" "$S" badunit.csv 2>&1) && fail "an unknown unit was accepted"
printf '%s\n' "$out" | grep -q "badunit.csv line 5: unit 'Pbyte' of dram__bytes_read.sum not understood" ||
  fail "unknown-unit message: $out"
grep -v gpu__time_duration "$F/details.csv" > notime.csv
out=$("$py" "$S" notime.csv 2>&1) && fail "a file without durations was accepted"
printf '%s\n' "$out" | grep -q 'notime.csv: no kernel with gpu__time_duration.sum' || fail "no-duration message: $out"
echo "ok: not a CSV, an unknown unit, no durations: each ends with a message naming the file"

# ---- bench/gpu/run.sh --ncu, with a stand-in for ncu ---------------------------------------------------
need_python torch h5py numpy
mkdir -p fakebin
cat > fakebin/ncu <<'NCU'
#!/bin/bash
# Nsight Compute's stand-in: checks its options, runs the program, writes 3 kernels per profiled update.
log="" from="" metrics=""
while [ $# -gt 0 ]; do
  case $1 in
    --target-processes) shift 2 ;;
    --profile-from-start) from=$2; shift 2 ;;
    --metrics) metrics=$2; shift 2 ;;
    --log-file) log=$2; shift 2 ;;
    --csv) shift ;;
    -*) echo "fake ncu: unexpected option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
[ "$from" = off ] || { echo "fake ncu: --profile-from-start is '$from', not off" >&2; exit 2; }
case $metrics in *gpu__time_duration.sum*) ;; *) echo "fake ncu: no duration metric" >&2; exit 2 ;; esac
[ -n "$log" ] && [ -n "${HETSEQ_PROFILE_UPDATES:-}" ] || { echo "fake ncu: no --log-file or no HETSEQ_PROFILE_UPDATES" >&2; exit 2; }
echo "fake ncu: HETSEQ_PROFILE_UPDATES=$HETSEQ_PROFILE_UPDATES; $*"
"$@" || exit
first=${HETSEQ_PROFILE_UPDATES%-*} last=${HETSEQ_PROFILE_UPDATES#*-}
{ echo '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
  id=0
  for ((u = first; u <= last; u++)); do
    for k in conv_kernel conv_kernel pool_kernel; do
      echo "\"$id\",\"1\",\"hetseq\",\"h\",\"$k\",\"1\",\"13\",\"(1, 1, 1)\",\"(1, 1, 1)\",\"0\",\"9.0\",\"m\",\"gpu__time_duration.sum\",\"ns\",\"1,000\""
      id=$((id + 1))
    done
  done; } > "$log"
NCU
chmod +x fakebin/ncu
NCU="$PWD/fakebin/ncu" timeout -k 5 300 bash "$top_srcdir/bench/gpu/run.sh" "$top_builddir" --device cpu --quick \
  --threads 1 --only cnn --warmup 2 --steps 2 --ncu-updates 3 --ncu prof --no-pytorch --out cnn.md --keep > cnn.log 2>&1 ||
  { cat cnn.log; fail "bench/gpu/run.sh --ncu failed"; }
scratch=$(sed -n 's/^scratch directory \(.*\) (kept)$/\1/p' cnn.log)
[ -d "$scratch" ] || { cat cnn.log; fail "no scratch directory named"; }
cat "$scratch"/*.out > runs.out; rm -rf "$scratch"
grep -q 'fake ncu: HETSEQ_PROFILE_UPDATES=3-5; .*hetseq train .*-o training.max_update=5$' runs.out ||
  { cat runs.out; fail "--warmup 2 --ncu-updates 3: not updates 3-5 of a 5-update run under ncu"; }
[ "$(grep -c 'fake ncu:' runs.out)" = 1 ] || { cat runs.out; fail "not one profiled run"; }
[ -s prof/cnn_fp32.csv ] || fail "no prof/cnn_fp32.csv"
grep -qx '3 kernel launches, 0.003 ms of GPU time per update (3 updates profiled); 2 kernels by name.' prof/cnn_fp32.md ||
  { cat prof/cnn_fp32.md; fail "prof/cnn_fp32.md: not 3 launches per update over 3 updates"; }
expect_row prof/cnn_fp32.md conv_kernel "2 0.002 66.7 1.0"
grep -q '^| CNN (MNISTNet) | fp32 | images/s | [0-9]' cnn.md || { cat cnn.md; fail "the timed figure is gone with --ncu"; }
grep -q '^\[[0-9]*\] not run: --no-pytorch$' cnn.md || { cat cnn.md; fail "--no-pytorch: no note says PyTorch did not run"; }
grep -q '^  pytorch ' cnn.log && { cat cnn.log; fail "--no-pytorch ran PyTorch"; }
echo "ok: --ncu profiles updates 3-5 (warm-up 2) in a separate run; its table is in prof/cnn_fp32.md; --no-pytorch runs hetseq only"
pass
