# A user saves a checkpoint after every update and validates every 5 updates (the worst case for the
# input thread, validation reads and checkpoint writes sharing HDF5) on 2 and 3 ranks, for the CNN and
# for BERT: 100 updates, 2 times each (HS_STRESS_REPEATS=N and HS_STRESS_UPDATES=N for more). Every
# run must finish, and its parameters must equal those of a run that saved nothing along the way
# (saving and validating never change the training).
. "$top_srcdir/tests/lib.sh"
need_python h5py numpy
CMP="$top_builddir/tests/tools/h5compare"
REPEATS=${HS_STRESS_REPEATS:-2}
UPDATES=${HS_STRESS_UPDATES:-100}
make_tiny_mnist tiny.h5
"$PYTHON_TORCH" "$top_srcdir/tests/ref/make_bert_shards.py" shards --prefix wiki --split training \
  --rows 300,250,200,250 --seq-len 32 --max-pred 5 --vocab 1000 --seed 3 || fail "writing training shards"
"$PYTHON_TORCH" "$top_srcdir/tests/ref/make_bert_shards.py" shards --prefix wiki --split test \
  --rows 40 --seq-len 32 --max-pred 5 --vocab 1000 --seed 4 || fail "writing test shards"

# SGD: no optimizer state, so the 1.2M-parameter CNN checkpoint stays small (the test is about when
# the writes happen, not what they hold).
mnist=("$top_srcdir/tests/e2e/small.cfg" -o data.path=\"tiny.h5\" -o optimizer.name=\"sgd\" -o optimizer.lr=0.05)
bert=("$top_srcdir/tests/e2e/bert_small.cfg")
common=(-o training.max_sentences=2 -o training.max_update=$UPDATES -o training.max_epoch=0 -o log.interval=100
        -o training.validate_interval_updates=5)

for model in mnist bert; do
  declare -n cfg=$model
  for np in 2 3; do
    # The reference: no checkpoint until the end, no validation.
    mpi $np "$HETSEQ" train "${cfg[@]}" "${common[@]}" -o training.disable_validation=true \
      -o checkpoint.save_dir=\"ref_${model}_$np\" > "ref_${model}_$np.log" 2>&1 \
      || { cat "ref_${model}_$np.log"; fail "$model reference run on $np ranks failed"; }
    for i in $(seq 1 "$REPEATS"); do
      dir="stress_${model}_${np}_$i"
      mpi $np "$HETSEQ" train "${cfg[@]}" "${common[@]}" -o checkpoint.save_interval_updates=1 \
        -o checkpoint.save_dir=\"$dir\" > "$dir.log" 2>&1 \
        || { tail -n 30 "$dir.log"; fail "$model on $np ranks, run $i, died while saving every update"; }
      grep -q "valid on" "$dir.log" || fail "$model run $i validated nothing"
      [ "$(grep -c 'saved checkpoint' "$dir.log")" -ge $((UPDATES * 19 / 20)) ] || fail "$model run $i saved fewer checkpoints than updates"
      "$CMP" "ref_${model}_$np/checkpoint_last.h5" "$dir/checkpoint_last.h5" 0 \
        || fail "$model on $np ranks, run $i: parameters differ from the run without checkpoints"
      ls "$dir" | grep -q '\.tmp$' && fail "$model run $i left a temporary checkpoint file"
      rm -rf "$dir"
    done
    echo "ok: $model on $np ranks: $REPEATS runs saving every update equal the reference"
  done
done
pass
