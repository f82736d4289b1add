#!/bin/bash
# Error-exit latency: how long a job that a user error ends (a bad experiment file, a missing data file,
# weights for the wrong number of ranks) takes from start to every rank gone, against a job that does
# nothing (`hetseq --version`) on the same number of ranks, started the same way just before it. The
# difference is what the error path itself costs (reading the file, agreeing on the error, ending every
# rank); the no-op is what starting and ending a job costs on this machine now. The bad-input tests
# bound the failing job by 3 x the no-op + 5 s (tests/lib.sh, expect_error); this reports the figures.
# Each case runs ROUNDS times (no-op, then failing job, alternately); medians are reported.
#   usage (in the build directory): $top_srcdir/bench/error_latency_bench.sh [ROUNDS]
set -eu
rounds=${1:-5}
builddir=${top_builddir:-.}
srcdir=${top_srcdir:-$(cd "$(dirname "$0")/.." && pwd)}
hetseq=${HETSEQ:-$builddir/hetseq}
mpirun=${MPIRUN:-mpirun}
[ -x "$hetseq" ] || { echo "no hetseq binary at $hetseq (run in the build directory)" >&2; exit 1; }
hetseq=$(cd "$(dirname "$hetseq")" && pwd)/$(basename "$hetseq")
work=$(mktemp -d "${TMPDIR:-/tmp}/hetseq-error-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# run N CMD...: CMD on N ranks as the tests start it (N = 1: the program alone, an MPI singleton)
run() {
  local n=$1; shift
  if [ "$n" = 1 ]; then timeout -k 5 120 "$@"
  else timeout -k 5 120 "$mpirun" --allow-run-as-root --oversubscribe -np "$n" --mca btl self,vader \
    --mca rmaps_base_oversubscribe 1 "$@"
  fi
}
seconds() { # WANT CMD...: wall seconds of CMD; WANT = ok (must succeed) or error (must fail saying "error:")
  local want=$1 t0 t1 rc=0; shift
  t0=$(date +%s.%N); "$@" < /dev/null > out.log 2>&1 || rc=$?; t1=$(date +%s.%N)
  case $want in
    ok) [ $rc -eq 0 ] || { cat out.log >&2; echo "the no-op job failed: $*" >&2; exit 1; } ;;
    error) [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "error:" out.log ||
      { cat out.log >&2; echo "expected a user error (exit $rc): $*" >&2; exit 1; } ;;
  esac
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf 'optimizer: { lr = "0.01"; };\n' > wrong_type.cfg
printf 'task = "mnist";\noptimizer: { name = "adadelta"; lrr = 1.0; };\n' > typo.cfg
small="$srcdir/tests/e2e/small.cfg"
# a real MNIST file, so that the weights case gets past reading its data
data=$builddir/tests/fashion-mnist-small.h5
if [ ! -f "$data" ]; then
  data=$work/tiny.h5
  "$hetseq" prep mnist --in "${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}" --limit-train 400 \
    --limit-test 40 --out "$data" > prep.log 2>&1 || { cat prep.log; exit 1; }
fi
data=$(cd "$(dirname "$data")" && pwd)/$(basename "$data")

# NAME|RANKS|ARGS (ARGS split on spaces: no case needs a space inside an argument)
cases="string where a number belongs|1|train wrong_type.cfg
string where a number belongs|2|train wrong_type.cfg
string where a number belongs|3|train wrong_type.cfg
unknown key (typo)|2|train typo.cfg
missing data file|2|train $small -o data.path=\"nowhere.h5\"
weights for 2 ranks on 3|3|train $small -o data.path=\"$data\" -o distributed.weights=[2.0,1.0]
prep mnist: no input directory|2|prep mnist --in nowhere --out x.h5"

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
echo "error-exit latency: $cpu, $(nproc) CPU(s); load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "median of $rounds rounds; no-op = hetseq --version on the same ranks, started the same way"
printf '%-32s %5s %9s %9s %8s %7s\n' case ranks "failing s" "no-op s" "diff s" ratio
all_ratio=
while IFS='|' read -r name n args; do
  fails= noops=
  for r in $(seq 1 "$rounds"); do
    s=$(seconds ok run "$n" "$hetseq" --version) || exit 1
    noops="$noops $s"
    # shellcheck disable=SC2086
    s=$(seconds error run "$n" "$hetseq" $args) || exit 1
    fails="$fails $s"
  done
  f=$(echo $fails | median) z=$(echo $noops | median)
  ratio=$(awk -v f="$f" -v z="$z" 'BEGIN { printf "%.2f", f / z }')
  all_ratio="$all_ratio $ratio"
  printf '%-32s %5s %9s %9s %8s %7s\n' "$name" "$n" "$f" "$z" "$(awk -v f="$f" -v z="$z" 'BEGIN { printf "%.2f", f - z }')" "$ratio"
done <<< "$cases"
echo "median ratio failing / no-op over the cases: $(echo $all_ratio | median)"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
