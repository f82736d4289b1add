# Sourced by bench/gpu/ledger_bert.sh and ledger_txl.sh: what both do around their data. A script sets
# `me` (its name for messages), `scratch` (its working directory's prefix) and its defaults (config,
# precision, batches, to, hetseq, keep=0, extra=()), parses its own options and hands every other one to
# ledger_option; then ledger_start, its data in the working directory, ledger_run per batch with its
# own overrides, and ledger_report.

# ledger_option NAME [VALUE]: an option both scripts take; sets `used` to the words it took (0: not one)
ledger_option() {
  used=2
  case $1 in
    --config) config=$(cd "$(dirname "$2")" && pwd)/$(basename "$2") model_json="" ;;
    --precision) precision=$2 ;;
    --batches) batches=$2 ;;
    --to) to=$2 ;;
    --hetseq) hetseq=$2 ;;
    --keep) keep=1 used=1 ;;
    -o) extra+=(-o "$2") ;;
    *) used=0 ;;
  esac
}

# ledger_start: checks the batches and the binary, makes the working directory (removed at exit unless
# --keep) and enters it; sets b1, b2, rows (the larger), python, work
ledger_start() {
  b1=${batches%,*} b2=${batches#*,}
  [[ $b1 =~ ^[0-9]+$ && $b2 =~ ^[0-9]+$ && $b1 != "$b2" && $b1 -ge 1 && $b2 -ge 1 ]] ||
    { echo "$me: --batches takes two different micro-batches, e.g. 1,2" >&2; exit 2; }
  [ -x "$hetseq" ] ||
    { echo "$me: $hetseq is not built (make in a build configured --enable-cuda-emulation, or --hetseq)" >&2; exit 1; }
  python=${PYTHON_TORCH:-python3}
  work=$(mktemp -d "${TMPDIR:-/tmp}/$scratch.XXXXXX")
  [ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT
  cd "$work"
  rows=$((b1 > b2 ? b1 : b2))
}

# ledger_run B OVERRIDE...: 2 updates of the config at batch B with the ledger on, into b$B.log, whose
# table counts the second (HETSEQ_CUDA_LEDGER_WARMUP=1: the first allocates, and zero-fills, the
# workspaces the later ones reuse) (the overrides the script's own: data, batch; then the common ones and
# -o's)
ledger_run() {
  local b=$1
  shift
  echo "micro-batch $b: $hetseq train $(basename "$config") (log in $work/b$b.log)" >&2
  HETSEQ_CUDA_LEDGER=1 HETSEQ_CUDA_LEDGER_WARMUP=1 HS_CUDA_EMU_MEM_MB=${HS_CUDA_EMU_MEM_MB:-16000} "$hetseq" train "$config" "$@" \
    -o device=\"cuda\" -o precision=\"$precision\" -o training.update_freq=1 -o training.max_update=2 \
    -o training.max_epoch=0 -o training.disable_validation=true -o checkpoint.no_save=true \
    -o checkpoint.save_dir=\"ck$b\" -o log.interval=1 "${extra[@]}" > "b$b.log" 2>&1 ||
    { tail -5 "b$b.log" >&2; echo "$me: the micro-batch $b run failed" >&2; exit 1; }
}

# ledger_report: the two runs' ledgers extrapolated to --to (bench/gpu/ledger_scale.py)
ledger_report() {
  "$python" "$here/ledger_scale.py" "b$b1.log" "$b1" "b$b2.log" "$b2" --to "$to" \
    --exclude "to_half_kernel (parameter copy)"
}
