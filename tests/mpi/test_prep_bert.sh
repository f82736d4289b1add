# A user turns a directory of English text (five files: one sentence per line, wrapped prose, and the
# fortune format with "%" lines) into BERT shards with `hetseq prep bert`:
# - on 1, 2 and 3 ranks with the same seed the shards are identical: the same files, every dataset
#   equal (h5diff) and even the same bytes; another seed gives other shards;
# - the shards train: hetseq's BERT trainer reads them (training and test split) on 2 ranks.
. "$top_srcdir/tests/lib.sh"
FIX="$top_srcdir/tests/fixtures"
CORPUS="$FIX/prep_corpus"
VOCAB="$FIX/prep_corpus_vocab.txt"
need_cmd h5diff hdf5-tools

prep() { # ranks out seed
  mpi "$1" "$HETSEQ" prep bert --corpus "$CORPUS" --vocab "$VOCAB" --out "$2" --seq-len 64 --max-pred 10 \
    --masked-lm-prob 0.15 --short-seq-prob 0.1 --dupe-factor 3 --shards 4 --valid-fraction 0.2 --seed "$3" \
    > "$2.log" 2>&1 || { cat "$2.log"; fail "prep bert on $1 rank(s) into $2 failed"; }
}

prep 1 one 11
prep 2 two 11
prep 3 three 11
prep 1 other 12
cat three.log
grep -q "5 files read" one.log || fail "expected 5 files read"
grep -q "wrote 4 training shards" one.log || fail "expected 4 training shards"
ls one > one.list
[ "$(grep -c '^corpus_training_[0-3]\.hdf5$' one.list)" -eq 4 ] || { cat one.list; fail "training shard names"; }
[ "$(grep -c '^corpus_test_0\.hdf5$' one.list)" -eq 1 ] || { cat one.list; fail "test shard name"; }
[ "$(wc -l < one.list)" -eq 5 ] || { cat one.list; fail "unexpected files in the output (a temporary left?)"; }
ls -A one | grep -q '^\.' && fail "a hidden temporary file was left in the output"

for d in two three; do
  ls "$d" > "$d.list"
  diff one.list "$d.list" || fail "1 rank and $d ranks wrote different files"
  for f in $(cat one.list); do
    h5diff -r "one/$f" "$d/$f" > diff.out 2>&1 || { head -20 diff.out; fail "$f differs between 1 rank and $d ranks"; }
    cmp -s "one/$f" "$d/$f" || fail "$f: same datasets but different bytes between 1 rank and $d ranks"
  done
  echo "ok: 1 rank = $d ranks: $(wc -l < one.list) shards identical"
done
# (h5diff exits 0 for datasets of different shapes, "not comparable": cmp decides)
cmp -s one/corpus_training_0.hdf5 other/corpus_training_0.hdf5 && fail "seeds 11 and 12 gave identical shards"

# the trainer reads them: a 2-layer BERT with the fixture vocabulary, a few updates with validation
V=$(wc -l < "$VOCAB")
mpi 2 "$HETSEQ" train "$top_srcdir/tests/e2e/bert_small.cfg" -o data.path=\"one\" -o model.vocab_size=$V \
  -o model.max_position_embeddings=64 -o training.max_update=4 -o training.validate_interval_updates=4 \
  -o checkpoint.save_dir=\"ck\" > train.log 2>&1 || { cat train.log; fail "training on the shards failed"; }
grep -q "num_updates=4," train.log || { cat train.log; fail "training did not reach 4 updates"; }
grep -q "valid on 'test' subset" train.log || { cat train.log; fail "no validation on the test shard"; }
grep "valid on" train.log
pass
