# A user's mistakes with `hetseq prep bert`, on 2 ranks: every one is a clear message and a non-zero
# exit on every rank (no hang), except a bad file among good ones, which is reported (file and byte
# offset) and skipped unless --strict.
. "$top_srcdir/tests/lib.sh"
FIX="$top_srcdir/tests/fixtures"
VOCAB="$FIX/prep_corpus_vocab.txt"

mkdir text
cp "$FIX"/prep_corpus/*.txt text/
# Latin-1 bytes in the middle of a file: 0xE9 at byte offset 24 (21 + 3)
printf 'A line of good text.\nCaf\351 au lait is not UTF-8 here.\n' > text/zz_latin1.txt
prep() { mpi 2 "$HETSEQ" prep bert --vocab "$VOCAB" --seq-len 32 --max-pred 5 --dupe-factor 1 "$@"; }

# skipped with a warning naming the file and offset; the good files still become shards
prep --corpus text --out out > skip.log 2>&1 || { cat skip.log; fail "a non-UTF-8 file among good ones must be skipped"; }
grep -q "zz_latin1.txt: not UTF-8 text (invalid byte 0xe9 at byte offset 24); skipped" skip.log \
  || { cat skip.log; fail "no warning naming the file and byte offset"; }
grep -q "5 files read .* 1 skipped" skip.log || { cat skip.log; fail "summary does not count the skipped file"; }
[ -f out/corpus_training_0.hdf5 ] || fail "no shard written"
echo "ok: non-UTF-8 file skipped: $(grep -m1 'not UTF-8' skip.log)"

expect_error "--strict stops at a non-UTF-8 file" "zz_latin1.txt: not UTF-8 text \(invalid byte 0xe9 at byte offset 24\)" \
  prep --corpus text --out strict --strict
[ -e strict/corpus_training_0.hdf5 ] && fail "--strict failure left a shard"

mkdir bin && cp "$FIX/prep_corpus/rivers.txt" bin/ && printf 'text\000\001\002' > bin/index.dat
expect_error "--strict stops at a binary file" "index.dat: not a text file \(NUL byte at byte offset 4\)" \
  prep --corpus bin --out binout --strict

mkdir empty && printf '\n\n%%\n   \n%%\n' > empty/blank.txt
expect_error "a corpus without text" "the corpus holds no text" prep --corpus empty --out e1
expect_error "only unusable files" "the corpus holds no text \(0 files read, 1 skipped\)" \
  prep --corpus text/zz_latin1.txt --out e2
expect_error "a missing corpus path" "--corpus nosuch.txt: No such file or directory" prep --corpus nosuch.txt --out e3

expect_error "--seq-len 4" "--seq-len 4: must be from 8" prep --corpus text --out e4 --seq-len 4
expect_error "--max-pred 0" "--max-pred 0: expected a whole number from 1" prep --corpus text --out e5 --max-pred 0
expect_error "--masked-lm-prob 0" "--masked-lm-prob 0: expected a number in \(0, 1\]" \
  prep --corpus text --out e6 --masked-lm-prob 0
expect_error "--masked-lm-prob 1.5" "--masked-lm-prob 1.5: expected a number in \(0, 1\]" \
  prep --corpus text --out e7 --masked-lm-prob 1.5
expect_error "--shards 0" "--shards 0: expected a whole number from 1" prep --corpus text --out e8 --shards 0
expect_error "--split-sentences words" "--split-sentences words: expected auto, lines or prose" \
  prep --corpus text --out e9 --split-sentences words
expect_error "more shards than documents" "31 training documents cannot fill 40 shards.*--shards 31 or fewer" \
  prep --corpus text --out e10 --shards 40
expect_error "no --vocab" "--vocab FILE is required" mpi 2 "$HETSEQ" prep bert --corpus text --out e11

grep -v '^\[MASK\]$' "$VOCAB" > nomask.txt
expect_error "a vocabulary without [MASK]" "nomask.txt.*\[MASK\]" \
  mpi 2 "$HETSEQ" prep bert --vocab nomask.txt --corpus text --out e12
for d in e1 e2 e4 e5 e6 e7 e8 e9 e10 e12; do
  [ -n "$(ls -A "$d" 2>/dev/null)" ] && fail "a failed run left files in $d"
done
pass
