# The scheduler stops a job mid-epoch: Slurm's time limit or scancel sends SIGTERM, `sbatch
# --signal=USR1@120` sends SIGUSR1 to the ranks, a user presses Ctrl-C at mpirun. The ranks agree at
# the next update boundary, write a checkpoint of exactly that update, and exit with status 75
# (docs/reliability.md); running the same command again resumes to exactly the parameters of a run
# that was never stopped.
. "$top_srcdir/tests/lib.sh"
CMP="$top_builddir/tests/tools/h5compare"
need_cmd pkill procps
need_cmd h5dump hdf5-tools
make_tiny_mnist tiny.h5
CFG="$top_srcdir/tests/e2e/small.cfg"
# 50 updates per epoch on 2 ranks. Each run is long enough that the signal lands mid-run: the signal is
# sent once 20 updates are logged; a signal to the ranks, or SIGUSR1 to mpirun, arrives at once (100
# updates: the stops land at update 21-22, and one that came too late fails the test, below), while
# SIGTERM to mpirun reaches the ranks only after odls_base_sigkill_timeout (below), and an idle machine
# runs ~60 updates a second (600).
SHORT=100 LONG=600
args=(-o data.path=\"tiny.h5\" -o training.max_sentences=4 -o training.max_epoch=0 -o log.interval=10)
# mpirun waits this long before it passes its SIGTERM on to the ranks, and as long again before a
# SIGKILL (Open MPI's default is 1 s: too short to write a large checkpoint).
export OMPI_MCA_odls_base_sigkill_timeout=4

# The uninterrupted runs, one per length; how long the short one took is the measure of this machine
# now (load included) that the stopping time is compared with.
for max in $SHORT $LONG; do
  t0=$(date +%s.%N)
  mpi 2 "$HETSEQ" train "$CFG" "${args[@]}" -o training.max_update=$max -o checkpoint.save_dir=\"ref_$max\" \
    > "ref_$max.log" 2>&1 || { cat "ref_$max.log"; fail "the uninterrupted run of $max updates failed"; }
  [ $max = $SHORT ] && ref_seconds=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
done
# A stop takes at most one more update, a checkpoint and the job's end (all within what the whole short
# run takes) plus mpirun's waits before it passes a signal on and before its SIGKILL (the sigkill
# timeout, twice): its bound is 3 x the short run + 5 s + 2 x the sigkill timeout. A job still running
# after 120 s is killed (the hang guard).
stop_limit=$(awk -v r="$ref_seconds" -v k="$OMPI_MCA_odls_base_sigkill_timeout" 'BEGIN { printf "%.0f", 3 * r + 5 + 2 * k }')
echo "uninterrupted run of $SHORT updates: $ref_seconds s; a stop must end within $stop_limit s"

saved_updates() { h5dump -a /train_state/num_updates "$1" 2>/dev/null | sed -n 's/^ *(0): *//p'; }
updates_logged() { # num_updates of the newest train record, 0 before the first
  local n; n=$(grep -o '"num_updates": [0-9]*' "$1/metrics.jsonl" 2>/dev/null | tail -n 1 | grep -o '[0-9]*$')
  echo "${n:-0}"
}

# stop NAME SIGNAL TARGET EXPECTED_STATUS MAX_UPDATE: TARGET = mpirun or ranks.
stop() {
  local name=$1 sig=$2 target=$3 want=$4 max=$5 dir="ck_$1"
  local cmd=("$HETSEQ" train "$CFG" "${args[@]}" -o training.max_update=$max -o checkpoint.save_dir=\"$dir\")
  "$MPIRUN" --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader "${cmd[@]}" > "$name.log" 2>&1 &
  local pid=$! i
  for i in $(seq 1 600); do [ "$(updates_logged "$dir")" -ge 20 ] && break; sleep 0.1; done
  [ "$(updates_logged "$dir")" -ge 20 ] || { kill -9 $pid; cat "$name.log"; fail "$name: the run did not get going"; }
  if [ "$target" = mpirun ]; then kill -s "$sig" $pid; else pkill --signal "$sig" -P $pid; fi
  local t0=$SECONDS rc
  ( sleep 120; kill -9 $pid 2>/dev/null ) & local guard=$!
  wait $pid; rc=$?
  kill $guard 2>/dev/null
  [ $((SECONDS - t0)) -le "$stop_limit" ] || fail "$name: the job took $((SECONDS - t0)) s to stop, more than" \
    "$stop_limit s (3 x the $ref_seconds s of the uninterrupted $SHORT-update run + 5 s + 2 x the sigkill timeout)"
  [ "$rc" = "$want" ] || { tail -n 20 "$name.log"; fail "$name: exit status $rc, expected $want"; }
  local line n
  line=$(grep -m1 "stopped by SIG$sig after update" "$name.log") || { cat "$name.log"; fail "$name: no stop line"; }
  n=$(printf '%s\n' "$line" | sed 's/.*after update \([0-9]*\).*/\1/')
  [ "$n" -lt "$max" ] || fail "$name: the signal did not stop the run early"
  [ "$(saved_updates "$dir/checkpoint_last.h5")" = "$n" ] \
    || fail "$name: checkpoint_last.h5 holds update $(saved_updates "$dir/checkpoint_last.h5"), the run stopped after $n"
  mpi 2 "${cmd[@]}" > "$name.rerun.log" 2>&1 \
    || { cat "$name.rerun.log"; fail "$name: the rerun failed"; }
  grep -q "resuming from $dir/checkpoint_last.h5 (.*$n updates in all)" "$name.rerun.log" \
    || fail "$name: the rerun did not resume from update $n"
  "$CMP" "ref_$max/checkpoint_last.h5" "$dir/checkpoint_last.h5" 0 > "$name.cmp" \
    || { cat "$name.cmp"; fail "$name: the resumed run does not end with the uninterrupted run's parameters"; }
  echo "ok: $name: $line; exit $rc; resumed bit-identical"
}

# SIGUSR1 straight to the ranks (what srun and `--signal=USR1@T` do): every rank exits 75, so does mpirun.
stop usr1_ranks USR1 ranks 75 $SHORT
# SIGTERM straight to the ranks (Slurm's time limit, scancel with srun).
stop term_ranks TERM ranks 75 $SHORT
# SIGUSR1 to mpirun, which forwards it to the ranks.
stop usr1_mpirun USR1 mpirun 75 $SHORT
# SIGTERM to mpirun (scancel of an mpirun job): the ranks stop as above; mpirun itself, having been
# signalled, reports 1 (Open MPI's own status), which docs/reliability.md says.
stop term_mpirun TERM mpirun 1 $LONG
pass
