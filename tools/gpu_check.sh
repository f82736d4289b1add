#!/usr/bin/env bash
# One command for a user's first run on a GPU node (docs/gpu.md, "First run on a GPU"):
#   bash tools/gpu_check.sh BUILD_DIR        (a build configured --with-cuda; on a GPU machine without
#   bash .dev/on_gpu.sh bash tools/gpu_check.sh build      hetseq's libraries: through on_gpu.sh)
# Runs, on this node's GPU: the tile products and mma.sync's and ldmatrix's fragment layouts
# (BUILD_DIR/tests/gpu/test_tile_mma_gpu, if built), the op conformance of the CUDA backend against the CPU
# backend (BUILD_DIR/tests/gpu/test_op_conformance_gpu, if built), the training trajectories of
# tests/gpu/test_gpu_training.sh, the memory-bound kernels' bandwidth (BUILD_DIR/bench/gpu/kernels_bench,
# if built: `make bench`), and a short throughput figure (the MNIST CNN, and a BERT-base-shaped
# model in bf16 when a Python with h5py is at hand to write its shards). Prints one line per check
# (check, result, seconds, detail) and a verdict. Exit: 0 every check passed, 1 one failed, 77 no GPU
# is visible. The bandwidth and throughput figures are reported, never judged (GPU_CHECK_SPEED_UPDATES updates each,
# default 30). Logs stay in GPU_CHECK_DIR (default: a new directory under /tmp), named in the output.
# GPU_CHECK_SANITIZER=1 adds compute-sanitizer runs of the fused attention's and then every op's
# conformance (racecheck, synccheck, memcheck, initcheck: what the emulated device cannot show,
# docs/gpu-emulation.md), each within GPU_CHECK_SANITIZER_TIMEOUT seconds (default 240);
# GPU_CHECK_SANITIZER=only runs the conformance and those alone.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$top/build}" 2>/dev/null && pwd) ||
  { echo "gpu_check: build directory ${1:-$top/build} not found (usage: $0 BUILD_DIR)" >&2; exit 1; }
HETSEQ=$build/hetseq
[ -x "$HETSEQ" ] || { echo "gpu_check: $HETSEQ is not built" >&2; exit 1; }
MPIRUN=${MPIRUN:-mpirun}
PY=${PYTHON_TORCH:-${HS_PY:-python3}}
UPDATES=${GPU_CHECK_SPEED_UPDATES:-30}

if command -v nvidia-smi > /dev/null 2>&1; then
  gpus=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null)
  [ -n "$gpus" ] || { echo "gpu_check: no GPU visible (nvidia-smi lists none)"; exit 77; }
else
  ls /dev/nvidia[0-9]* > /dev/null 2>&1 || { echo "gpu_check: no GPU visible (no nvidia-smi, no /dev/nvidia0)"; exit 77; }
  gpus="(nvidia-smi not installed)"
fi
dir=${GPU_CHECK_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")}
mkdir -p "$dir" || exit 1
echo "gpu_check of $build on $(hostname): $(printf '%s\n' "$gpus" | wc -l) GPU(s): $(printf '%s\n' "$gpus" | head -1)"
echo "logs in $dir"

rows="" failed=""
# row CHECK RESULT SECONDS DETAIL
row() { rows="$rows$(printf '%-40s %-6s %6s  %s' "$1" "$2" "$3" "$4")"$'\n'; [ "$2" = FAIL ] && failed="$failed${failed:+, }$1"; }
now() { date +%s; }

# ---- tile products and the mma.sync and ldmatrix fragment layouts -------------------------------------
# tests/gpu/test_tile_mma_gpu: the exact products of kernels/mma_sync.cuh by the layout the emulated device
# assumes (a wrong layout fails here first, and the fused attention's register kernels in the conformance)
tiles=$build/tests/gpu/test_tile_mma_gpu
if [ -x "$tiles" ]; then
  t0=$(now); (cd "$dir" && "$tiles") > "$dir/tile_mma.log" 2>&1; rc=$?; t1=$(now)
  detail="$(grep -c '^mma.sync.*: ok' "$dir/tile_mma.log") of 2 mma.sync layouts, $(grep -c '^ldmatrix.*: ok' "$dir/tile_mma.log") of 1 ldmatrix exact (tile_mma.log)"
  case $rc in 0) row "tile products, mma/ldmatrix layouts" pass $((t1 - t0)) "$detail" ;;
    77) row "tile products, mma/ldmatrix layouts" skip $((t1 - t0)) "$(grep -m1 SKIP "$dir/tile_mma.log")" ;;
    *) row "tile products, mma/ldmatrix layouts" FAIL $((t1 - t0)) "$(grep -m1 FAIL "$dir/tile_mma.log") (exit $rc; tile_mma.log)" ;; esac
else
  row "tile products, mma/ldmatrix layouts" skip 0 "not built (make tests/gpu/test_tile_mma_gpu)"
fi

# ---- op conformance ----------------------------------------------------------------------------------
conf=$build/tests/gpu/test_op_conformance_gpu
if [ -x "$conf" ]; then
  t0=$(now); (cd "$dir" && "$conf") > "$dir/conformance.log" 2>&1; rc=$?; t1=$(now)
  summary=$(tail -1 "$dir/conformance.log"); [ -n "$summary" ] || summary="(no output)"
  case $rc in 0) row "op conformance (GPU vs CPU)" pass $((t1 - t0)) "$summary" ;;
    77) row "op conformance (GPU vs CPU)" skip $((t1 - t0)) "$summary" ;;
    *) row "op conformance (GPU vs CPU)" FAIL $((t1 - t0)) "$summary (exit $rc; conformance.log)" ;; esac
else
  row "op conformance (GPU vs CPU)" skip 0 "not built (make tests/gpu/test_op_conformance_gpu)"
fi

# ---- compute-sanitizer (opt-in) -------------------------------------------------------------------------
# Shared-memory races and barrier misuse (the fused attention's tiles: bf16 takes WMMA, fp32 the scalar
# loop), then out-of-bounds and uninitialised accesses of every op. A sanitizer run is 10-100x slower;
# one past its time limit is reported as skipped, not failed.
SAN=${GPU_CHECK_SANITIZER:-0}
SAN_TIMEOUT=${GPU_CHECK_SANITIZER_TIMEOUT:-240}
if [ "$SAN" != 0 ]; then
  cs=$(command -v compute-sanitizer 2> /dev/null || ls /usr/local/cuda/bin/compute-sanitizer 2> /dev/null)
  if [ -z "$cs" ] || [ ! -x "$conf" ]; then
    row "compute-sanitizer" skip 0 "no compute-sanitizer on PATH, or the conformance test is not built"
  else
    for spec in "racecheck flash_attention bf16" "racecheck rel_attention bf16" "racecheck flash_attention fp32" \
        "synccheck flash_attention bf16" "synccheck rel_attention bf16" "memcheck all bf16" "initcheck all bf16"; do
      set -- $spec
      log=sanitizer_$1_$2_$3.log
      t0=$(now)
      (cd "$dir" && timeout -k 5 "$SAN_TIMEOUT" "$cs" --tool "$1" --error-exitcode 3 "$conf" "$2" "$3") > "$dir/$log" 2>&1
      rc=$?; t1=$(now)
      case $rc in
        0) row "sanitizer $1 $2 $3" pass $((t1 - t0)) "$(grep -m1 'ERROR SUMMARY\|RACECHECK SUMMARY' "$dir/$log") ($log)" ;;
        124 | 137) row "sanitizer $1 $2 $3" skip $((t1 - t0)) "over GPU_CHECK_SANITIZER_TIMEOUT=${SAN_TIMEOUT}s ($log)" ;;
        *) row "sanitizer $1 $2 $3" FAIL $((t1 - t0)) "exit $rc: $(grep -m1 'Error\|Race\|hazard\|SUMMARY' "$dir/$log") ($log)" ;;
      esac
    done
  fi
fi

if [ "$SAN" != only ]; then # the rest of the checks (GPU_CHECK_SANITIZER=only skips them)
# ---- training trajectories -----------------------------------------------------------------------------
t0=$(now)
(cd "$dir" && MPIRUN=$MPIRUN bash "$top/tests/gpu/test_gpu_training.sh" "$build") > "$dir/training.log" 2>&1; rc=$?
t1=$(now)
oks=$(grep -c '^ok:' "$dir/training.log")
case $rc in 0) row "GPU training (CPU vs GPU)" pass $((t1 - t0)) "$oks groups of checks (training.log)" ;;
  77) row "GPU training (CPU vs GPU)" skip $((t1 - t0)) "$(grep -m1 SKIP "$dir/training.log")" ;;
  *) row "GPU training (CPU vs GPU)" FAIL $((t1 - t0)) "$(grep -m1 '^FAIL' "$dir/training.log") (training.log)" ;; esac

# ---- memory-bound kernels (figures, not a judgement) ---------------------------------------------------
# bench/gpu/kernels_bench (make bench): each memory-bound kernel at BERT-large shapes, its GB/s against
# the GPU's peak; the row names how many reach issue 21's 70 % and the slowest
kb=$build/bench/gpu/kernels_bench
if [ -x "$kb" ]; then
  t0=$(now); (cd "$dir" && "$kb") > "$dir/kernels.log" 2>&1; rc=$?; t1=$(now)
  if [ $rc -eq 0 ]; then
    row "memory-bound kernels" ok $((t1 - t0)) "$(awk -F'|' '$8 ~ /%/ && $2 !~ /flash_attention/ { p = $8; gsub(/[ %]/, "", p); k = $2; gsub(/^ +| +$/, "", k)
        n++; if (p + 0 >= 70) ok++; if (n == 1 || p + 0 < min) { min = p + 0; slow = k } }
        END { if (n) printf "%d of %d at >= 70%% of peak bandwidth, slowest %s at %d%% (kernels.log)", ok, n, slow, min
              else printf "no bandwidth figures (kernels.log)" }' "$dir/kernels.log")"
    # the fused attention's second table: model TFLOP/s, forward/backward, per precision and shape
    row "fused attention" ok 0 "$(awk -F'|' '$2 ~ /flash_attention_/ && $9 ~ /[0-9]/ {
        k = $2; gsub(/^ +| +$/, "", k); prec = k; sub(/.*\(/, "", prec); sub(/\).*/, "", prec)
        s = $3; sub(/,.*/, "", s); gsub(/ /, "", s); t = $9; gsub(/ /, "", t)
        if (k ~ /forward/) fwd[prec " " s] = t; else { key[n++] = prec " " s; bwd[prec " " s] = t } }
        END { if (!n) { printf "no figures (kernels.log)"; exit }
              printf "TFLOP/s forward/backward:"
              for (i = 0; i < n; i++) printf "%s %s %s/%s", i ? "," : "", key[i], fwd[key[i]], bwd[key[i]]
              printf " (kernels.log)" }' "$dir/kernels.log")"
  else
    row "memory-bound kernels" FAIL $((t1 - t0)) "kernels_bench exited $rc (kernels.log)"
  fi
else
  row "memory-bound kernels" skip 0 "not built (make bench)"
fi

# ---- throughput (a figure, not a judgement) ------------------------------------------------------------
# median of a field over the train records after the first 5 (start-up, cuDNN/cuBLASLt choices; all
# of them in a shorter run)
median() {
  grep '"type": "train"' "$1" > "$1.train"
  [ "$(wc -l < "$1.train")" -gt 5 ] && sed -i 1,5d "$1.train"
  sed "s/.*\"$2\": \([^,}]*\).*/\1/" "$1.train" | sort -g |
    awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)]; else print "?" }'
}
# throughput NAME DIR RANKS ARGS...
throughput() {
  local name=$1 d=$2 t0 t1; shift 2
  t0=$(now)
  mkdir -p "$dir/$d"
  if (cd "$dir" && timeout -k 5 600 "$MPIRUN" --allow-run-as-root -np 1 "$HETSEQ" train "$@" -o device=\"cuda\" \
      -o checkpoint.no_save=true -o training.disable_validation=true -o checkpoint.save_dir=\"$d\" -o log.interval=1) \
      > "$dir/$d.log" 2>&1; then
    t1=$(now)
    row "$name" ok $((t1 - t0)) "$(median "$dir/$d/metrics.jsonl" samples_per_sec) samples/s, $(median "$dir/$d/metrics.jsonl" tflops) TFLOP/s, MFU $(median "$dir/$d/metrics.jsonl" mfu) (median over the updates after the 5th)"
  else
    t1=$(now)
    row "$name" FAIL $((t1 - t0)) "the run failed ($d.log)"
  fi
}
if (cd "$dir" && "$HETSEQ" prep mnist --in "${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}" --limit-train 10000 \
    --limit-test 100 --out mnist.h5) > "$dir/prep.log" 2>&1; then
  throughput "throughput: MNIST CNN fp32" cnn_speed "$top/tests/e2e/small.cfg" -o data.path=\"mnist.h5\" \
    -o training.max_sentences=256 -o training.max_update=$UPDATES -o training.max_epoch=0
else
  row "throughput: MNIST CNN fp32" skip 0 "no Fashion-MNIST (FASHION_MNIST_DIR; prep.log)"
fi
if "$PY" -c 'import h5py, numpy' > /dev/null 2>&1; then
  # BERT-base shape (12 x 768, 12 heads, FFN 3072, vocabulary 30522), 128 tokens, 32 sequences an update
  (cd "$dir" && "$PY" "$top/tests/ref/make_bert_shards.py" shards --prefix wiki --split training --rows 640,640 \
     --seq-len 128 --max-pred 20 --vocab 30522 --seed 3 &&
   "$PY" "$top/tests/ref/make_bert_shards.py" shards --prefix wiki --split test --rows 32 --seq-len 128 \
     --max-pred 20 --vocab 30522 --seed 4) > "$dir/shards.log" 2>&1
  throughput "throughput: BERT-base bf16" bert_speed "$top/tests/e2e/bert_small.cfg" -o precision=\"bf16\" \
    -o model.vocab_size=30522 -o model.hidden_size=768 -o model.num_hidden_layers=12 -o model.num_attention_heads=12 \
    -o model.intermediate_size=3072 -o model.max_position_embeddings=512 -o training.max_sentences=32 \
    -o training.max_update=$UPDATES -o lr_scheduler.total_num_update=1000
else
  row "throughput: BERT-base bf16" skip 0 "no Python with h5py for the shards (PYTHON_TORCH or HS_PY)"
fi
fi # GPU_CHECK_SANITIZER != only

echo
printf '%-40s %-6s %6s  %s\n' check result time detail
printf '%s' "$rows"
if [ -n "$failed" ]; then
  echo "verdict: FAIL ($failed): see the logs in $dir"
  exit 1
fi
echo "verdict: PASS: hetseq trains on this node's GPU as on its CPU ($(printf '%s\n' "$gpus" | head -1))"
exit 0
