# A user reruns a job with settings that differ from the checkpoint it resumes. A change that would
# silently change which samples come next (seed, max_sentences, ranks x update_freq, the data, the task,
# the optimizer) is refused on 2 ranks within seconds, naming the setting and the checkpoint.reset_* key
# that accepts it; the checkpoint is untouched. A change of world size at the same global batch is exact
# and allowed; checkpoint.reset_dataloader accepts a changed data order. Also: checkpoint.no_save works,
# and a checkpoint saved inside epoch 2 says it is not at an epoch's end.
. "$top_srcdir/tests/lib.sh"
CMP="$top_builddir/tests/tools/h5compare"
make_tiny_mnist tiny.h5
"$HETSEQ" prep mnist --in "${FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}" --limit-train 320 \
  --limit-test 40 --out other.h5 > prep.log 2>&1 || { cat prep.log; fail "prep mnist"; }
CFG="$top_srcdir/tests/e2e/small.cfg"
args=(-o data.path=\"tiny.h5\" -o training.max_sentences=4 -o training.max_epoch=0 -o log.interval=10)

# A run stopped inside epoch 2 (50 updates per epoch on 2 ranks).
mpi 2 "$HETSEQ" train "$CFG" "${args[@]}" -o training.max_update=60 -o checkpoint.save_dir=\"ck\" > first.log 2>&1 \
  || { cat first.log; fail "the first run failed"; }
attr() { h5dump -a "/train_state/$2" "$1" 2>/dev/null | sed -n 's/^ *(0): *//p'; }
[ "$(attr ck/checkpoint_last.h5 epoch)" = 2 ] && [ "$(attr ck/checkpoint_last.h5 end_of_epoch)" = 0 ] \
  || fail "a checkpoint inside epoch 2 has epoch=$(attr ck/checkpoint_last.h5 epoch) end_of_epoch=$(attr ck/checkpoint_last.h5 end_of_epoch)"
[ "$(attr ck/checkpoint_last.h5 world_size)" = 2 ] || fail "the checkpoint does not record its world size"
sum=$(md5sum < ck/checkpoint_last.h5)

more=(-o training.max_update=70 -o checkpoint.save_dir=\"ck\")
expect_error "max_sentences changed" "training.max_sentences changed from 4 to 8.*checkpoint.reset_dataloader = true" \
  mpi 2 "$HETSEQ" train "$CFG" "${args[@]}" "${more[@]}" -o training.max_sentences=8
expect_error "seed changed" "seed changed from 19940802 to 7.*checkpoint.reset_dataloader" \
  mpi 2 "$HETSEQ" train "$CFG" "${args[@]}" "${more[@]}" -o seed=7
expect_error "more ranks, same update_freq" "checkpoint ran 2 rank\(s\) x update_freq 1 = 2 micro-batches per update, this run 3 rank\(s\) x update_freq 1 = 3" \
  mpi 3 "$HETSEQ" train "$CFG" "${args[@]}" "${more[@]}"
expect_error "update_freq changed" "this run 2 rank\(s\) x update_freq 2 = 4" \
  mpi 2 "$HETSEQ" train "$CFG" "${args[@]}" "${more[@]}" -o training.update_freq=2
expect_error "other training data" "the training data changed from 400 to 320 samples \(data.path = \"other.h5\", was \"tiny.h5\"\)" \
  mpi 2 "$HETSEQ" train "$CFG" "${args[@]}" "${more[@]}" -o data.path=\"other.h5\"
expect_error "other optimizer" "optimizer \"adadelta\" but optimizer.name is \"sgd\".*checkpoint.reset_optimizer = true" \
  mpi 2 "$HETSEQ" train "$CFG" "${args[@]}" "${more[@]}" -o optimizer.name=\"sgd\"
"$HETSEQ" prep bert --corpus "$top_srcdir/tests/fixtures/prep_corpus" --vocab "$top_srcdir/tests/fixtures/prep_corpus_vocab.txt" \
  --out shards --seq-len 32 --max-pred 5 --valid-fraction 0.2 > prep.log 2>&1 || { cat prep.log; fail "prep bert"; }
expect_error "other task" "written by a \"mnist\" run but this run's task is \"bert\"" \
  mpi 2 "$HETSEQ" train "$top_srcdir/tests/e2e/bert_small.cfg" -o data.path=\"shards\" "${more[@]}"
[ "$(md5sum < ck/checkpoint_last.h5)" = "$sum" ] || fail "a refused resume modified the checkpoint"

# Accepted: reset_dataloader keeps weights and counters, restarts epoch 2 from its first update.
cp -r ck ck_reset
mpi 2 "$HETSEQ" train "$CFG" "${args[@]}" -o training.max_update=70 -o checkpoint.save_dir=\"ck_reset\" \
  -o training.max_sentences=8 -o checkpoint.reset_dataloader=true > reset.log 2>&1 || { cat reset.log; fail "reset_dataloader run"; }
grep -q "checkpoint.reset_dataloader: training.max_sentences changed from 4 to 8.*epoch 2 restarts from its first update" reset.log \
  || { cat reset.log; fail "reset_dataloader did not say what it did"; }
grep -q "resuming from ck_reset/checkpoint_last.h5 (epoch 2, 0 updates into it, 60 updates in all)" reset.log \
  || fail "reset_dataloader did not restart epoch 2 at update 60"

# Accepted: 2 ranks x update_freq 1 -> 1 rank x update_freq 2 is the same global batch and data order.
mpi 2 "$HETSEQ" train "$CFG" "${args[@]}" -o training.max_update=80 -o checkpoint.save_dir=\"straight\" > straight.log 2>&1 \
  || { cat straight.log; fail "the uninterrupted run failed"; }
cp -r ck ck_one
mpi 1 "$HETSEQ" train "$CFG" "${args[@]}" -o training.max_update=80 -o training.update_freq=2 \
  -o checkpoint.save_dir=\"ck_one\" > one.log 2>&1 || { cat one.log; fail "resuming on 1 rank x update_freq 2 failed"; }
grep -q "resuming on 1 rank(s) x update_freq 2 where the checkpoint ran 2 rank(s) x update_freq 1: the same global batch" one.log \
  || { cat one.log; fail "the world-size change was not reported"; }
"$CMP" straight/checkpoint_last.h5 ck_one/checkpoint_last.h5 1e-5 > one.cmp \
  || { cat one.cmp; fail "1 rank x uf 2 resumed from 2 ranks differs from the 2-rank run"; }

# checkpoint.no_save: trains, writes its metrics, saves nothing.
mpi 2 "$HETSEQ" train "$CFG" "${args[@]}" -o training.max_update=5 -o log.interval=1 -o checkpoint.no_save=true \
  -o checkpoint.save_dir=\"nosave\" > nosave.log 2>&1 || { cat nosave.log; fail "checkpoint.no_save = true failed"; }
[ "$(grep -c '"type": "train"' nosave/metrics.jsonl)" -ge 1 ] || fail "no_save run wrote no metrics"
ls nosave | grep -q '\.h5' && fail "no_save run wrote a checkpoint"
pass
