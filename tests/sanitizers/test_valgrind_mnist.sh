# valgrind memcheck of a training run (make check-valgrind, in a build without sanitizers): HetSeq's
# MNIST CNN trains for 20 updates on 2 ranks, each rank under valgrind, with the prefetch thread, the
# stall inspector, validation and a checkpoint at update 10 and at the end of the epoch (update 20),
# then `hetseq eval` loads the checkpoint on 1 rank under valgrind. Any invalid read or write, use of
# uninitialised memory, bad free, or block definitely lost (a leak with no pointer left to it) fails the
# test, and valgrind's report (with a suppression for each error, --gen-suppressions) is printed. The
# suppressions for Open MPI and PMIx internals are in tests/sanitizers/valgrind.supp, each with its
# reason. Valgrind runs the CNN's vector code about 60 times slower, so the run uses one image per
# micro-batch on a 40-image slice (20 updates = one epoch on 2 ranks) and a 40-image test split. More
# updates would only repeat the same code: these 20 already run every path a longer run does (a
# validation and a checkpoint mid-epoch and at the epoch's end, a log record mid-run and at the end, the
# prefetch thread's queue refilled many times over), and memcheck judges code paths, not counts.
. "$top_srcdir/tests/lib.sh"
CFG="$top_srcdir/tests/e2e/small.cfg"
DATA=tiny.h5
SUPP="$top_srcdir/tests/sanitizers/valgrind.supp"
case "${HS_SANITIZER:-no}" in no) ;; *) skip "valgrind cannot run a -fsanitize build (HS_SANITIZER=$HS_SANITIZER)" ;; esac
VG=${VALGRIND:-$(command -v valgrind 2>/dev/null)}
[ -n "$VG" ] && [ -x "$VG" ] || fail "valgrind is not installed: install Debian's valgrind (tools/quickstart.sh test does)"
UPDATES=${HS_VALGRIND_UPDATES:-20}
HALF=$((UPDATES / 2))
"$HETSEQ" prep mnist --in "${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}" --limit-train $((2 * UPDATES)) \
  --limit-test 40 --out tiny.h5 > prep.log 2>&1 || { cat prep.log; fail "cannot make the MNIST slice"; }

vgopts="--tool=memcheck --leak-check=full --show-leak-kinds=definite --errors-for-leak-kinds=definite
 --error-exitcode=99 --num-callers=40 --track-origins=no --gen-suppressions=all --suppressions=$SUPP"
# Debian's openmpi-bin ships Open MPI's own suppressions (its uninitialised padding in wire headers).
for s in /usr/share/openmpi/openmpi-valgrind.supp /usr/share/openmpi/doc/openmpi-valgrind.supp; do
  [ -f "$s" ] && { vgopts="$vgopts --suppressions=$s"; break; }
done
export OMP_NUM_THREADS=1

# timeout: valgrind makes the run ~50x slower; a hang must still end the test.
vg_mpi() { # N log-prefix CMD...
  local n=$1 prefix=$2; shift 2
  # shellcheck disable=SC2086
  timeout -k 10 900 "$MPIRUN" --allow-run-as-root --oversubscribe -np "$n" --mca btl self,vader \
    "$VG" $vgopts --log-file="$prefix.%p.vg" "$@"
}

check_logs() { # what log-prefix
  local what=$1 prefix=$2 bad=0 f
  ls "$prefix".*.vg > /dev/null 2>&1 || fail "$what: valgrind wrote no log"
  for f in "$prefix".*.vg; do
    grep -q "ERROR SUMMARY: 0 errors" "$f" && continue
    bad=1
    echo "==== $f"
    cat "$f"
  done
  [ $bad = 0 ] || fail "$what: valgrind found errors or definite leaks (logs above; hetseq frames point at the bug)"
  grep -h -E "definitely lost:|ERROR SUMMARY" "$prefix".*.vg | sed 's/^==[0-9]*== */  /' | sort | uniq -c
}

t0=$(date +%s)
vg_mpi 2 train "$HETSEQ" train "$CFG" -o data.path=\"$DATA\" -o training.max_sentences=1 -o training.max_epoch=0 \
  -o training.max_update="$UPDATES" -o training.validate_interval_updates="$HALF" \
  -o checkpoint.save_interval_updates="$HALF" -o checkpoint.save_dir=\"ck\" -o distributed.stall_timeout=600.0 \
  -o log.interval=10 > train.log 2>&1
rc=$?
t1=$(date +%s)
[ $rc -ne 124 ] && [ $rc -ne 137 ] || { cat train.log; fail "training under valgrind timed out"; }
check_logs "training ($UPDATES updates, 2 ranks)" train
[ $rc -eq 0 ] || { cat train.log; fail "training under valgrind exited $rc"; }
grep -q "valid on" train.log || { cat train.log; fail "no validation in the valgrind run"; }
[ -f ck/checkpoint_last.h5 ] || { cat train.log; fail "no checkpoint written"; }
echo "ok: $UPDATES updates on 2 ranks under valgrind in $((t1 - t0)) s: no memory error, no definite leak"

vg_mpi 1 eval "$HETSEQ" eval "$CFG" -o data.path=\"$DATA\" --checkpoint ck/checkpoint_last.h5 > eval.log 2>&1
rc=$?
check_logs "eval" eval
[ $rc -eq 0 ] || { cat eval.log; fail "eval under valgrind exited $rc"; }
grep -q "Test set: Average loss" eval.log || { cat eval.log; fail "eval printed no test-set line"; }
echo "ok: eval of the checkpoint under valgrind in $(($(date +%s) - t1)) s: no memory error, no definite leak"
pass
