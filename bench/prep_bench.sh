#!/bin/sh
# Throughput of `hetseq prep bert` (text -> WordPiece -> NVIDIA-format shards) on a real English corpus,
# Debian's fortune files, on 1 and 2 ranks: MB of text per second, wall clock of the whole command
# (mpirun start-up included), CPU seconds of all processes (user + system: MB per CPU second does not
# depend on other load on the node) and the command's own figures (reading + tokenizing, total). A vocabulary
# is learned once with `hetseq prep vocab`. Each configuration runs ROUNDS times and the best round
# counts (other load on the node only ever slows a round down).
#   usage (in the build directory): $top_srcdir/bench/prep_bench.sh [CORPUS [ROUNDS [DUPE_FACTOR]]]
set -eu
corpus=${1:-/usr/share/games/fortunes}
rounds=${2:-3}
dupe=${3:-5}
builddir=${top_builddir:-.}
hetseq=${HETSEQ:-$builddir/hetseq}
mpirun=${MPIRUN:-mpirun}
[ -x "$hetseq" ] || { echo "no hetseq binary at $hetseq (run in the build directory)" >&2; exit 1; }
[ -e "$corpus" ] || { echo "no corpus at $corpus (apt-get install fortunes, or give a directory of text)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/hetseq-prep-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$hetseq" prep vocab --corpus "$corpus" --size 8000 --out "$work/vocab.txt" > "$work/vocab.log" 2>&1 \
  || { cat "$work/vocab.log"; exit 1; }
mb=$(du -L -b -c $(find -L "$corpus" -maxdepth 1 -type f ! -name '*.dat' ! -name '.*' | sort -u) | tail -1 | cut -f1)

echo "prep bert on $corpus: seq-len 128, max-pred 20, dupe-factor $dupe, 8 shards, valid-fraction 0.05;"
echo "best of $rounds rounds; wall = the whole command, 'read' = reading + tokenizing + sharing the corpus"
printf '%-6s %9s %10s %8s %12s %11s %10s %10s\n' ranks "wall s" "MB/s wall" "CPU s" "MB/CPU-s" "read MB/s" "own MB/s" instances
for np in 1 2; do
  best= best_cpu=
  r=0
  while [ $r -lt "$rounds" ]; do
    rm -rf "$work/out"
    t0=$(date +%s.%N)
    /usr/bin/time -f "%U %S" -o "$work/cpu" timeout 600 "$mpirun" --allow-run-as-root --oversubscribe -np $np "$hetseq" prep bert --corpus "$corpus" \
      --vocab "$work/vocab.txt" --out "$work/out" --seq-len 128 --max-pred 20 --dupe-factor "$dupe" --shards 8 \
      --valid-fraction 0.05 --seed 12345 > "$work/run.log" 2>&1 || { cat "$work/run.log"; exit 1; }
    t1=$(date +%s.%N)
    wall=$(echo "$t1 - $t0" | bc -l)
    cpu=$(awk '{ print $1 + $2 }' "$work/cpu")
    if [ -z "$best" ] || [ "$(echo "$wall < $best" | bc -l)" = 1 ]; then best=$wall; cp "$work/run.log" "$work/best.log"; fi
    if [ -z "${best_cpu:-}" ] || [ "$(echo "$cpu < $best_cpu" | bc -l)" = 1 ]; then best_cpu=$cpu; fi
    r=$((r + 1))
  done
  text_mb=$(grep -o '([0-9.]* MB,' "$work/best.log" | head -1 | tr -d '(,' | cut -d' ' -f1)
  read_rate=$(grep -o 's ([0-9.]* MB/s)' "$work/best.log" | head -1 | tr -d '()' | cut -d' ' -f2)
  own_rate=$(grep -o '[0-9.]* MB of text per second' "$work/best.log" | cut -d' ' -f1)
  inst=$(grep -o 'training shards ([0-9]* instances' "$work/best.log" | tr -d '(' | cut -d' ' -f3)
  printf '%-6s %9.2f %10.2f %8.2f %12.2f %11s %10s %10s\n' $np "$best" "$(echo "$text_mb / $best" | bc -l)" \
    "$best_cpu" "$(echo "$text_mb / $best_cpu" | bc -l)" "$read_rate" "$own_rate" "$inst"
done
echo "(text read: $(grep -o '[0-9]* files read ([0-9.]* MB' "$work/best.log" | head -1)); corpus size on disk without *.dat: $mb bytes)"
