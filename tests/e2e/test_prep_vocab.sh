# A user learns a WordPiece vocabulary from a directory of English text with `hetseq prep vocab`:
# the special tokens come first at ids 0-4, every character of the text is a token, frequent words such
# as "the" are learnt whole, continuation pieces start with "##" and nothing else holds "##"; --size is
# the exact number of lines; two runs and 1 or 2 ranks give byte-identical files; lower-casing and accent
# stripping by default, --cased keeps both; a file that is not UTF-8 (or binary) is named with the byte
# offset of its first bad byte and skipped, or ends the run with --strict; an empty corpus, a --size below
# the alphabet and a missing option are clear errors.
. "$top_srcdir/tests/lib.sh"

mkdir corpus
cat > corpus/a.txt <<'EOF'
The old lighthouse stood at the end of the harbour wall, and the keeper climbed its stairs every evening.
He lit the lamp, wound the clockwork that turned the lens, and wrote the weather into the log book.
On clear nights the beam reached the far islands; on foggy nights the horn sounded until the morning.
EOF
cat > corpus/b.txt <<'EOF'
Ships that passed the harbour at night watched for the light and counted the seconds between the flashes.
The keeper's daughter learned the pattern of every light along the coast and could name them all.
When the lamp was replaced by an electric one, the keeper kept the old brass burner on the shelf.
EOF
cat > corpus/c.txt <<'EOF'
Visitors still climb the stairs in the summer, read the old log books and look out over the harbour.
The lens turns, the light flashes, and the ships that pass at night still count the seconds between.
EOF
cat corpus/a.txt corpus/b.txt corpus/c.txt > all.txt
# every pair of the text occurs at least twice (min-frequency 2): three copies of each file
for f in a b c; do cp corpus/$f.txt corpus/$f-2.txt; cp corpus/$f.txt corpus/$f-3.txt; done

SIZE=250
"$HETSEQ" prep vocab --corpus corpus --size $SIZE --out v1.txt > run1.log 2>&1 || { cat run1.log; fail "prep vocab failed"; }
cat run1.log
[ "$(wc -l < v1.txt)" -eq $SIZE ] || fail "--size $SIZE: the vocabulary has $(wc -l < v1.txt) lines"
[ "$(head -5 v1.txt | tr '\n' ' ')" = "[PAD] [UNK] [CLS] [SEP] [MASK] " ] || fail "ids 0-4 are not the special tokens: $(head -5 v1.txt | tr '\n' ' ')"
[ -z "$(sort v1.txt | uniq -d)" ] || fail "tokens listed twice: $(sort v1.txt | uniq -d | head)"
# every character of the (lower-cased) text is a token of its own
for c in $(tr -d ' \n' < all.txt | tr 'A-Z' 'a-z' | fold -w1 | sort -u); do
  grep -qxF -- "$c" v1.txt || fail "character '$c' of the text is not in the vocabulary"
done
for w in the harbour keeper light; do grep -qx "$w" v1.txt || fail "the frequent word '$w' was not learnt"; done
grep -qx '##s' v1.txt || fail "no continuation piece ##s"
! grep -q '.##' v1.txt || fail "a token holds ## other than as its prefix: $(grep '.##' v1.txt | head -3)"
! grep -qx '##' v1.txt || fail "an empty continuation piece"
! grep -v '^\[' v1.txt | grep -q '[A-Z]' || fail "upper case in a lower-cased vocabulary: $(grep -v '^\[' v1.txt | grep '[A-Z]' | head -3)"
# learnt in order of frequency: "the" (36 times per copy) comes before "keeper" (5 times)
[ "$(grep -nx the v1.txt | cut -d: -f1)" -lt "$(grep -nx keeper v1.txt | cut -d: -f1)" ] || fail "'keeper' learnt before 'the'"
echo "ok: special tokens, alphabet, 'the', ## pieces, $SIZE lines"

"$HETSEQ" prep vocab --corpus corpus --size $SIZE --out v2.txt > /dev/null 2>&1 || fail "second run failed"
cmp v1.txt v2.txt || fail "two runs on the same corpus differ"
mpi 2 "$HETSEQ" prep vocab --corpus corpus/a.txt corpus/a-2.txt corpus/a-3.txt corpus/b.txt corpus/b-2.txt corpus/b-3.txt \
  --corpus corpus/c.txt corpus/c-2.txt corpus/c-3.txt --size $SIZE --out v3.txt > run3.log 2>&1 || { cat run3.log; fail "2 ranks failed"; }
cmp v1.txt v3.txt || fail "1 rank and 2 ranks learnt different vocabularies"
echo "ok: deterministic, 1 rank = 2 ranks"

# --size larger than the corpus supports: all it has, and a note
"$HETSEQ" prep vocab --corpus corpus --size 100000 --out big.txt > big.log 2>&1 || { cat big.log; fail "large --size failed"; }
grep -q "gives only $(wc -l < big.txt) tokens" big.log || fail "no note that the corpus gives fewer tokens: $(cat big.log)"
head -n $SIZE big.txt | cmp - v1.txt || fail "a larger --size must extend the same vocabulary"

# case and accents
printf 'The Café serves Crème brûlée.\nThe Café serves Crème brûlée.\n' > accents.txt
"$HETSEQ" prep vocab --corpus accents.txt --size 60 --out lower.txt > /dev/null 2>&1 || fail "accents run failed"
"$HETSEQ" prep vocab --corpus accents.txt --size 60 --out cased.txt --cased > /dev/null 2>&1 || fail "--cased run failed"
grep -qx 'cafe' lower.txt || fail "lower-casing + accent stripping: no 'cafe' in $(tr '\n' ' ' < lower.txt)"
! grep -v '^\[' lower.txt | grep -q 'é\|T\|C' || fail "an accent or capital survived the default lower-casing"
grep -qx 'Café' cased.txt && grep -qx 'T' cased.txt && grep -qx '##é' cased.txt || fail "--cased must keep 'Café', 'T', '##é': $(tr '\n' ' ' < cased.txt)"
echo "ok: lower-cased and accent-stripped by default, --cased keeps them"

# bad files: not UTF-8 (0xFF at byte 16), binary (NUL at byte 3)
mkdir mixed
cp corpus/a.txt corpus/a-2.txt mixed/
printf 'good words\nmore \377 bad words\n' > mixed/latin1.txt
printf 'abc\000def\n' > mixed/index.dat
"$HETSEQ" prep vocab --corpus mixed --size 100 --out skip.txt > skip.log 2>&1 || { cat skip.log; fail "bad files must be skipped without --strict"; }
cat skip.log
grep -q "mixed/latin1.txt is not UTF-8.*byte offset 16; skipped" skip.log || fail "the non-UTF-8 file is not reported with its byte offset"
grep -q "skipped 1 binary file in mixed: index.dat (NUL byte at byte offset 3; --strict stops at it instead)" skip.log || fail "the binary file is not reported"
! grep -qx 'bad' skip.txt || fail "words of the skipped file were learnt"
expect_error "--strict with a non-UTF-8 file" "latin1.txt is not UTF-8.*byte offset 16" \
  "$HETSEQ" prep vocab --corpus mixed --size 100 --out strict.txt --strict
[ ! -e strict.txt ] || fail "--strict failed but wrote a vocabulary"
expect_error "--strict on 2 ranks" "could not be used" \
  mpi 2 "$HETSEQ" prep vocab --corpus mixed --size 100 --out strict.txt --strict

# clear errors
: > empty.txt
mkdir nothing
expect_error "an empty file" "holds no words" "$HETSEQ" prep vocab --corpus empty.txt --size 100 --out e.txt
expect_error "an empty directory" "corpus is empty" "$HETSEQ" prep vocab --corpus nothing --size 100 --out e.txt
expect_error "only a bad file" "holds no words" "$HETSEQ" prep vocab --corpus mixed/latin1.txt --size 100 --out e.txt
expect_error "a missing corpus" "cannot read --corpus nowhere" "$HETSEQ" prep vocab --corpus nowhere --size 100 --out e.txt
expect_error "--size below the alphabet" "--size 20 is smaller than the smallest vocabulary" \
  "$HETSEQ" prep vocab --corpus corpus --size 20 --out e.txt
expect_error "--out naming a directory" "--out corpus exists and is not a regular file" \
  "$HETSEQ" prep vocab --corpus corpus --size 100 --out corpus
expect_error "--out in a missing directory" "cannot write --out nodir/v.txt: directory nodir" \
  "$HETSEQ" prep vocab --corpus corpus --size 100 --out nodir/v.txt
expect_error "no --out" "--out FILE is required" "$HETSEQ" prep vocab --corpus corpus --size 100
expect_error "no --size" "--size N is required" "$HETSEQ" prep vocab --corpus corpus --out e.txt
expect_error "an empty corpus on 2 ranks" "holds no words" mpi 2 "$HETSEQ" prep vocab --corpus empty.txt --size 100 --out e.txt
pass
