# PBS has no Debian package, so the PBS job scripts users submit (batch/mnist.pbs, batch/bert_phase1.pbs,
# batch/bert_phase2.pbs) run here as PBS would run them: from $HOME, with PBS's variables (PBS_NODEFILE
# listing each node mpiprocs times, PBS_O_WORKDIR, PBS_JOBID, NCPUS, OMP_NUM_THREADS from ompthreads)
# and a fake `mpirun` first on PATH that records its arguments, working directory and environment. The
# test checks the command lines the scripts build: rank count from the node file, ranks per node and
# binding, the exported variables, the hetseq command, experiment and overrides.
. "$top_srcdir/tests/lib.sh"
SRC=$(cd "$top_srcdir" && pwd)

mkdir -p bin home calls jobdir/conf root/bin root/share/hetseq/conf
cat > bin/mpirun << 'EOF'
#!/bin/bash
# records one call: arguments one per line, then the working directory and some environment
n=$(ls "$CALLS" | grep -c "\.args$")
{ printf '%s\n' "$@"; } > "$CALLS/$n.args"
{ echo "PWD=$PWD"; env | grep -E '^(OMP_[A-Z_]*|HDF5_USE_FILE_LOCKING|OMPI_MCA_odls_base_sigkill_timeout)=' | sort; } > "$CALLS/$n.env"
# `hetseq prep ... --out FILE` makes FILE
prev=; for a in "$@"; do [ "$prev" = --out ] && : > "$a"; prev=$a; done
exit 0
EOF
# `module load hetseq` in a script must not be needed when HETSEQ_ROOT is set, but mnist.pbs calls it
# unconditionally: a stand-in that does nothing (a site's module command would set HETSEQ_ROOT).
printf '#!/bin/sh\nexit 0\n' > bin/module
chmod +x bin/mpirun bin/module
ln -s "$HETSEQ" root/bin/hetseq
export CALLS="$WORK/calls" PATH="$WORK/bin:$WORK/root/bin:$PATH" HETSEQ_ROOT="$WORK/root"
cp "$SRC"/conf/bert_*.cfg "$SRC"/conf/bert_config_*.json jobdir/conf/

# run_pbs SCRIPT HOSTS... : run SCRIPT as PBS runs it on the nodes HOSTS (each listed as often as it is
# given), in a clean environment plus the assignments in the array VARS; the calls of mpirun land in
# calls/.
VARS=()
run_pbs() {
  local script=$1; shift
  rm -f calls/*
  printf '%s\n' "$@" > nodefile
  (cd home && env -i PATH="$PATH" HOME="$WORK/home" CALLS="$CALLS" HETSEQ_ROOT="$HETSEQ_ROOT" \
     PBS_NODEFILE="$WORK/nodefile" PBS_O_WORKDIR="$WORK/jobdir" PBS_JOBID=1234.pbs-server PBS_JOBNAME=test \
     PBS_ENVIRONMENT=PBS_BATCH NCPUS="${NCPUS:-8}" ${OMP:+OMP_NUM_THREADS=$OMP} "${VARS[@]}" \
     bash "$SRC/batch/$script") > "$script.out" 2>&1
}
# has CALL WORD...: the recorded call has these consecutive arguments
has() {
  local call=$1; shift
  local want; want=$(printf '%s\n' "$@")
  awk -v want="$want" 'BEGIN { n = split(want, w, "\n") }
    { a[NR] = $0 } END { for (i = 1; i + n - 1 <= NR; i++) { ok = 1; for (j = 1; j <= n; j++) if (a[i + j - 1] != w[j]) { ok = 0; break }
      if (ok) exit 0 } exit 1 }' "calls/$call.args" \
    || { echo "--- mpirun arguments:"; cat "calls/$call.args"; fail "$CASE: mpirun was not given: $*"; }
}
env_has() { grep -q -x -F "$2" "calls/$1.env" || { cat "calls/$1.env"; fail "$CASE: mpirun's environment lacks $2"; }; }

# ---- mnist.pbs: select=2:ncpus=8:mpiprocs=2:ompthreads=4 -> 4 lines, 2 per node ---------------------
CASE=mnist.pbs
OMP=4 run_pbs mnist.pbs node01 node01 node02 node02 || { cat mnist.pbs.out; fail "$CASE failed"; }
[ "$(ls calls/*.args | wc -l)" = 2 ] || { cat mnist.pbs.out; fail "$CASE: expected 2 mpirun calls (prep, train)"; }
has 0 -np 1 hetseq prep mnist --in "$WORK/jobdir/fashion-mnist" --out "$WORK/jobdir/data/fashion-mnist.h5.tmp"
has 1 -np 4 --map-by ppr:2:node:PE=4 --bind-to core
has 1 -x OMP_NUM_THREADS -x OMP_PLACES -x OMP_PROC_BIND -x HDF5_USE_FILE_LOCKING
has 1 hetseq train "$WORK/root/share/hetseq/conf/mnist.cfg" \
  -o "data.path=\"$WORK/jobdir/data/fashion-mnist.h5\"" -o "checkpoint.save_dir=\"$WORK/jobdir/checkpoints/mnist\""
env_has 1 "PWD=$WORK/jobdir"
env_has 1 OMP_NUM_THREADS=4
env_has 1 HDF5_USE_FILE_LOCKING=FALSE
env_has 1 OMPI_MCA_odls_base_sigkill_timeout=30
echo "ok: $CASE: mpirun -np 4 --map-by ppr:2:node:PE=4 --bind-to core hetseq train .../mnist.cfg, in \$PBS_O_WORKDIR"

# ---- bert_phase1.pbs: select=2:ncpus=32:ngpus=4:mpiprocs=4:ompthreads=8 -> 8 ranks ---------------------
CASE=bert_phase1.pbs
OMP=8 NCPUS=32 run_pbs bert_phase1.pbs node0{1,1,1,1,2,2,2,2} || { cat bert_phase1.pbs.out; fail "$CASE failed"; }
[ "$(ls calls/*.args | wc -l)" = 1 ] || fail "$CASE: expected 1 mpirun call"
has 0 -np 8 --map-by ppr:4:node:PE=8 --bind-to core
has 0 hetseq train conf/bert_base_phase1.cfg -o 'device="auto"' -o training.update_freq=128 \
  -o 'checkpoint.save_dir="checkpoints/bert_base_phase1"'
env_has 0 "PWD=$WORK/jobdir"
env_has 0 OMP_NUM_THREADS=8
env_has 0 OMPI_MCA_odls_base_sigkill_timeout=120
echo "ok: $CASE: 2 nodes x 4 ranks x 8 threads, update_freq 128 (8 x 64 x 128 = 65536)"

# 4 nodes x 4 ranks, threads from NCPUS (no ompthreads), the large model, shards and extra options
CASE="bert_phase1.pbs (16 ranks, MODEL=large)"
VARS=(MODEL=large DATA_DIR=/shared/shards128 "EXTRA_ARGS=-o training.max_update=10")
NCPUS=32 run_pbs bert_phase1.pbs n1 n1 n1 n1 n2 n2 n2 n2 n3 n3 n3 n3 n4 n4 n4 n4 \
  || { cat bert_phase1.pbs.out; fail "$CASE failed"; }
has 0 -np 16 --map-by ppr:4:node:PE=8 --bind-to core
has 0 hetseq train conf/bert_large_phase1.cfg -o 'device="auto"' -o training.update_freq=64 \
  -o 'checkpoint.save_dir="checkpoints/bert_large_phase1"' -o 'data.path="/shared/shards128"' -o training.max_update=10
echo "ok: $CASE: update_freq 64, threads 32/4 = 8 from NCPUS"
VARS=()

# a rank count that does not divide the global batch is refused before mpirun
CASE="bert_phase1.pbs (3 nodes x 5 ranks)"
NCPUS=10 run_pbs bert_phase1.pbs n1 n1 n1 n1 n1 n2 n2 n2 n2 n2 n3 n3 n3 n3 n3 \
  && { cat bert_phase1.pbs.out; fail "$CASE: 15 ranks accepted"; }
grep -q "not a multiple of 15 ranks x 64" bert_phase1.pbs.out || { cat bert_phase1.pbs.out; fail "$CASE: no clear message"; }
[ -z "$(ls calls)" ] || fail "$CASE: mpirun ran"
echo "ok: $CASE refused: $(grep -m1 'not a multiple' bert_phase1.pbs.out)"

# ---- bert_phase2.pbs: 8 ranks, from phase 1's checkpoint -----------------------------------------------
CASE=bert_phase2.pbs
OMP=8 NCPUS=32 run_pbs bert_phase2.pbs node0{1,1,1,1,2,2,2,2} || { cat bert_phase2.pbs.out; fail "$CASE failed"; }
has 0 -np 8 --map-by ppr:4:node:PE=8 --bind-to core
has 0 hetseq train conf/bert_base_phase2.cfg -o 'device="auto"' -o training.update_freq=512 \
  -o 'checkpoint.save_dir="checkpoints/bert_base_phase2"' \
  -o 'checkpoint.init_checkpoint="checkpoints/bert_base_phase1/checkpoint_last.h5"'
echo "ok: $CASE: update_freq 512 (8 x 8 x 512 = 32768), init from checkpoints/bert_base_phase1/checkpoint_last.h5"

# The overrides the BERT scripts build are ones hetseq accepts (type-checked keys): the recorded
# command line, run for real for zero updates would need shards; instead each -o is checked by
# `hetseq train` against the schema with a missing data path, which fails later than option parsing.
cd jobdir
args=(); while IFS= read -r a; do args+=("$a"); done < ../calls/0.args
i=0; while [ "${args[$i]}" != hetseq ]; do i=$((i + 1)); done
out=$(timeout 60 "$HETSEQ" "${args[@]:$((i + 1))}" -o 'data.path="nonexistent-shards"' 2>&1) && fail "training without shards succeeded"
printf '%s\n' "$out" | grep -q -i -E "unknown key|not a valid|invalid value|expects" \
  && { printf '%s\n' "$out"; fail "hetseq rejects an override bert_phase2.pbs builds"; }
printf '%s\n' "$out" | grep -q "nonexistent-shards" || { printf '%s\n' "$out"; fail "hetseq did not get as far as the data"; }
echo "ok: hetseq accepts every override of the BERT script (it stops at the missing shards)"
pass
