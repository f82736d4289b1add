# A user has a directory of NVIDIA-format BERT shards (written here by an independent h5py writer the
# way create_pretraining_data.py writes them: gzip, automatic chunks, int32/int8) and reads them on 1, 2
# and 3 ranks: every value matches the writer's reference, micro-batches straddle file boundaries,
# EMPTY ones join the collective reads, the reads stay collective and each file is opened once (or,
# under a low descriptor limit, reopened least recently used first). The split filter, HetSeq's file
# order (x_10 before x_2), num_file and a single-file path select what HetSeq would select, and the
# slow-layout warning is printed once.
. "$top_srcdir/tests/lib.sh"
PY=/usr/bin/python3
PROG="$top_builddir/tests/mpi/test_bert_shards"
"$PY" -c 'import h5py, numpy' 2>/dev/null || fail "$PY cannot import h5py and numpy: install Debian's python3-h5py python3-numpy (tools/quickstart.sh test does)"

W="$top_srcdir/tests/ref/make_bert_shards.py"
# 12 training shards (1 to 2000 rows; the 2000-row one gets h5py's thin 250x16 chunks) and 2 test shards
"$PY" "$W" shards --rows 300,1,2000,45,3,17,1,2,60,5,9,11 --seq-len 128 --max-pred 20 --vocab 30522 \
  --dump train.ref || fail "writer failed"
"$PY" "$W" shards --split test --rows 50,20 --seq-len 128 --max-pred 20 --vocab 30522 --seed 2 \
  --dump test.ref || fail "writer failed"

for n in 1 2 3; do
  mpi $n "$PROG" verify shards training 0 128 20 30522 train.ref > run$n.log 2>&1 || { cat run$n.log; fail "$n rank(s)"; }
  grep "^ok: $n rank(s): 2454 rows of 12 file(s)" run$n.log || { cat run$n.log; fail "$n rank(s): no success line"; }
  [ "$(grep -c 'warning: 1 of 12 BERT shards (e.g. shards/x_training_2.hdf5) store input_ids in compressed chunks of 250x16: each 128-token row touches 8 chunks' run$n.log)" = 1 ] \
    || { cat run$n.log; fail "$n rank(s): the slow-layout warning should appear exactly once"; }
  grep -q "hetseq prep repack --in DIR --out DIR2" run$n.log || { cat run$n.log; fail "the warning names no fix"; }
done

# the test split of the same directory; the first 3 training files (x_0, x_1, x_10); one file by path
mpi 2 "$PROG" verify shards test 0 128 20 30522 test.ref > split.log 2>&1 || { cat split.log; fail "test split"; }
grep "^ok: 2 rank(s): 70 rows of 2 file(s)" split.log || { cat split.log; fail "test split: wrong rows"; }
grep -q warning split.log && { cat split.log; fail "the test split has no thin chunks, yet a warning"; }
mpi 2 "$PROG" verify shards training 3 128 20 30522 train.ref > num.log 2>&1 || { cat num.log; fail "num_file 3"; }
grep "^ok: 2 rank(s): 310 rows of 3 file(s)" num.log || { cat num.log; fail "num_file 3: expected x_0, x_1, x_10"; }
mpi 3 "$PROG" verify shards/x_test_0.hdf5 training 1 128 20 30522 test.ref > one.log 2>&1 || { cat one.log; fail "one file"; }
grep "^ok: 3 rank(s): 50 rows of 1 file(s)" one.log || { cat one.log; fail "one file: wrong rows"; }

# 70 small shards, read in micro-batches that straddle files and in spans of many files while other
# ranks read other files or nothing: each file is opened once and stays open, however often it is read
"$PY" - <<'PYEOF' > many.rows || fail "python failed"
print(",".join(str(1 + (i * 7) % 5) for i in range(70)))
PYEOF
"$PY" "$W" many --rows "$(cat many.rows)" --seq-len 16 --max-pred 3 --vocab 500 --seed 3 --dump many.ref \
  || fail "writer failed"
for n in 2 3; do
  mpi $n "$PROG" verify many training 0 16 3 500 many.ref > many$n.log 2>&1 || { cat many$n.log; fail "70 files, $n ranks"; }
  grep "^ok: $n rank(s): [0-9]* rows of 70 file(s)" many$n.log || { cat many$n.log; fail "70 files: no success line"; }
  grep -q "^file opens 70, at most 70 open" many$n.log || { cat many$n.log; fail "70 files, $n ranks: each file should be opened once"; }
done
hard=$(ulimit -H -n)
# A descriptor limit of 160 (soft and hard) lets a reader keep 40 files open: the others are closed and
# reopened, least recently used first, identically on every rank, and every value still matches.
if [ "$hard" = unlimited ] || [ "$hard" -ge 160 ]; then
  (ulimit -n 160 && mpi 3 "$PROG" verify many training 0 16 3 500 many.ref) > lru.log 2>&1 || { cat lru.log; fail "70 files under ulimit -n 160"; }
  grep "^ok: 3 rank(s): [0-9]* rows of 70 file(s)" lru.log || { cat lru.log; fail "ulimit -n 160: no success line"; }
  grep -q "^file opens [0-9]*, at most 40 open" lru.log || { cat lru.log; fail "ulimit -n 160: expected at most 40 open files"; }
  opens=$(sed -n 's/^file opens \([0-9]*\),.*/\1/p' lru.log)
  [ "$opens" -gt 70 ] || { cat lru.log; fail "ulimit -n 160: 70 files read repeatedly with 40 open need reopens"; }
fi
# A low soft limit (100) below a higher hard limit is raised for the files (4 descriptors per file).
if [ "$hard" = unlimited ] || [ "$hard" -ge 280 ]; then
  (ulimit -S -n 100 && mpi 3 "$PROG" verify many training 0 16 3 500 many.ref) > soft.log 2>&1 || { cat soft.log; fail "ulimit -S -n 100"; }
  grep -q "^file opens 70, at most 70 open" soft.log || { cat soft.log; fail "ulimit -S -n 100: the soft limit should be raised"; }
fi
pass
