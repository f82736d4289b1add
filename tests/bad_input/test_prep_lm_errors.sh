# A user's mistakes with `hetseq prep lm`, on 2 ranks (some on 3): a missing split file, an empty split,
# a file that is not UTF-8, an unknown or malformed option, an --out that cannot be created, options of
# the two modes mixed, raw text too short to split. Each ends every rank with a non-zero exit, without a
# hang (expect_error's time bound), with exactly one error line naming the file or option and what to
# do, and leaves no lm.h5 behind.
. "$top_srcdir/tests/lib.sh"
FIX="$top_srcdir/tests/fixtures/lm"

# run_to FILE CMD...: CMD's output to FILE and to stdout, CMD's exit status
run_to() { local f=$1; shift; "$@" > "$f" 2>&1; local rc=$?; cat "$f"; return $rc; }
# err WHAT PATTERN OUT ARGS...: `hetseq prep lm ARGS... --out OUT` on $RANKS ranks must fail with PATTERN
# in its only error line, and write no OUT/lm.h5
RANKS=2
err() {
  local what=$1 pattern=$2 out=$3; shift 3
  expect_error "$what ($RANKS ranks)" "$pattern" run_to last.out mpi $RANKS "$HETSEQ" prep lm "$@" --out "$out"
  local n; n=$(grep -c "error" last.out)
  [ "$n" -eq 1 ] || fail "$what: $n lines mention an error, expected one:
$(cat last.out)"
  [ ! -e "$out/lm.h5" ] || fail "$what: $out/lm.h5 was written"
}

mkdir wt && cp "$FIX"/wiki.*.tokens wt/
mkdir novalid && cp wt/wiki.train.tokens wt/wiki.test.tokens novalid/
err "a missing split file" "cannot read the valid split novalid/wiki.valid.tokens: No such file or directory; --in DIR must hold wiki.train.tokens, wiki.valid.tokens and wiki.test.tokens" \
  o1 --in novalid
err "a missing --train file" "cannot read --train nosuch.tokens: No such file or directory" \
  o2 --train nosuch.tokens --valid wt/wiki.valid.tokens --test wt/wiki.test.tokens

mkdir emptyvalid && cp wt/wiki.train.tokens wt/wiki.test.tokens emptyvalid/ && : > emptyvalid/wiki.valid.tokens
err "an empty valid file" "the valid split is empty: emptyvalid/wiki.valid.tokens is an empty file; every split needs words" \
  o3 --in emptyvalid
mkdir blanktest && cp wt/wiki.train.tokens wt/wiki.valid.tokens blanktest/ && printf ' \n\n \t \n' > blanktest/wiki.test.tokens
err "a test file of blank lines" "the test split is empty: blanktest/wiki.test.tokens holds no words \(3 lines, all blank\)" \
  o4 --in blanktest
: > empty.tokens
RANKS=3 err "an empty train file" "the train split is empty: empty.tokens is an empty file" \
  o5 --train empty.tokens --valid wt/wiki.valid.tokens --test wt/wiki.test.tokens
err "a split that is not a regular file" "cannot read --train /dev/null: not a regular file" \
  o5b --train /dev/null --valid wt/wiki.valid.tokens --test wt/wiki.test.tokens

mkdir latin1 && cp wt/wiki.valid.tokens wt/wiki.test.tokens latin1/
printf ' = Title = \n Caf\351 au lait \n' > latin1/wiki.train.tokens # 0xE9 at byte offset 16, line 2
err "a train file that is not UTF-8" "the train split latin1/wiki.train.tokens is not UTF-8 text: invalid byte 0xE9 at byte offset 16 \(line 2\); convert it first" \
  o6 --in latin1

err "an unknown option" "prep lm: unknown option --vocab-size" o7 --in wt --vocab-size 100
err "a negative --min-freq" "--min-freq -1: expected a whole number from 0" o8 --in wt --min-freq -1
err "--max-size not a number" "--max-size lots: expected a whole number from 0" o9 --in wt --max-size lots
expect_error "an option without its value" "option --min-freq needs a value" \
  mpi 2 "$HETSEQ" prep lm --out o10 --in wt --min-freq
err "no input" "give --in DIR .*, all three of --train/--valid/--test FILE, or --raw PATH" o11 --train wt/wiki.train.tokens
expect_error "no --out" "--out DIR is required" mpi 2 "$HETSEQ" prep lm --in wt

err "--out naming the file, not its directory" "--out data/lm.h5: --out is the directory lm.h5 is written to" \
  data/lm.h5 --in wt
touch afile
err "--out under a regular file" "cannot create --out afile/lm: afile exists and is not a directory" afile/lm --in wt
err "--out that is a regular file" "cannot create --out afile: afile exists and is not a directory" afile --in wt
mkdir locked && chmod 500 locked
if [ "$(id -u)" -ne 0 ]; then # root may write anywhere
  err "--out in a directory without write permission" "cannot create --out locked/out: locked/out: Permission denied" \
    locked/out --in wt
fi

printf 'One line of text.\n\nAnother line.\n' > short.txt
err "--raw with --in" "--raw makes the three splits from ordinary text: it cannot be combined with --in" o12 --raw short.txt --in wt
err "--valid-fraction without --raw" "--valid-fraction, --test-fraction, --seed and --write-tokens belong to --raw" \
  o13 --in wt --valid-fraction 0.1
err "--test-fraction 0.7" "--test-fraction 0.7: expected a fraction of the paragraphs above 0 and below 0.5" \
  o14 --raw short.txt --test-fraction 0.7
err "a missing --raw file" "cannot read --raw nosuch.txt: No such file or directory" o15 --raw nosuch.txt
err "raw text too short to split" "the raw text has 2 paragraphs \(lines with words or numbers\): too few to give valid \(1\) and test \(1\)" \
  o16 --raw short.txt
printf 'good text\n' > bad.txt && printf 'caf\351\n' >> bad.txt
err "a --raw file that is not UTF-8" "--raw file bad.txt is not UTF-8 text: invalid byte 0xE9 at byte offset 13 \(line 2\)" o17 --raw bad.txt
[ ! -e o16/.lm-tokens.tmp ] || fail "a failed raw run left o16/.lm-tokens.tmp behind"
pass
