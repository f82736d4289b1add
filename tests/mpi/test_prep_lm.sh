# A user makes language-model data with `hetseq prep lm` on 1 and on 3 ranks: from the WikiText-format
# fixture (with and without --min-freq/--max-size/--lower-case) and, when the `fortunes` package is
# installed, from the fortune files as raw text. The lm.h5 files must be byte-identical whatever the
# number of ranks and however often they are made; raw mode's WikiText-format files must hold every
# line of the text that has a letter or digit, split as the fractions say, and running the WikiText
# mode on them must give the same lm.h5 again.
. "$top_srcdir/tests/lib.sh"
FIX="$top_srcdir/tests/fixtures/lm"

prep() { # prep NRANKS OUT ARGS...
  local n=$1 out=$2; shift 2
  local log; log=$(printf "%s" "$out" | tr / _).log
  mpi "$n" "$HETSEQ" prep lm "$@" --out "$out" > "$log" 2>&1 || { cat "$log"; fail "prep lm $* on $n rank(s)"; }
  [ -f "$out/lm.h5" ] || fail "$out/lm.h5 was not written"
  [ ! -e "$out/lm.h5.tmp" ] || fail "$out/lm.h5.tmp left behind"
}

# WikiText mode: 1 rank twice, 3 ranks, into a directory that does not exist yet
for opts in "" "--min-freq 2 --max-size 60 --lower-case --skip-empty-lines"; do
  tag=$(printf '%s' "x$opts" | tr -c 'a-z0-9' '_')
  prep 1 "w1$tag" --in "$FIX" $opts
  sleep 1 # a later second: HDF5 would store another modification time if objects kept one
  prep 1 "w1again$tag" --in "$FIX" $opts
  prep 3 "deep/er/w3$tag" --in "$FIX" $opts
  cmp "w1$tag/lm.h5" "w1again$tag/lm.h5" || fail "two runs on 1 rank gave different lm.h5 ($opts)"
  cmp "w1$tag/lm.h5" "deep/er/w3$tag/lm.h5" || fail "1 and 3 ranks gave different lm.h5 ($opts)"
  echo "ok: WikiText fixture ${opts:-(defaults)}: 1 rank, 1 rank again and 3 ranks give the same $(stat -c %s "w1$tag/lm.h5") bytes"
done
# the options change the data (else the comparison above proves little)
cmp -s w1x/lm.h5 "w1x__min_freq_2___max_size_60___lower_case___skip_empty_lines/lm.h5" &&
  fail "--min-freq/--max-size/--lower-case/--skip-empty-lines made no difference"
h5dump -a vocab_size w1x/lm.h5 | grep -q "(0): 327" || fail "fixture vocabulary: $(h5dump -a vocab_size w1x/lm.h5)"

# Raw mode on a real Debian text
FORTUNES=/usr/share/games/fortunes
[ -d "$FORTUNES" ] || fail "the WikiText checks passed; raw mode needs real text: no $FORTUNES: install Debian's fortunes"
prep 1 r1 --raw "$FORTUNES" --write-tokens tok1
prep 3 r3 --raw "$FORTUNES" --write-tokens tok3
for s in train valid test; do
  cmp "tok1/wiki.$s.tokens" "tok3/wiki.$s.tokens" || fail "raw mode: wiki.$s.tokens differs between 1 and 3 ranks"
done
cmp r1/lm.h5 r3/lm.h5 || fail "raw mode: 1 and 3 ranks gave different lm.h5"
[ ! -e r1/.lm-tokens.tmp ] || fail "raw mode left r1/.lm-tokens.tmp behind"

# every line of the text files (the *.u8 links are the same files; *.dat are binary) with a letter or a
# digit is one paragraph; the valid and test fractions (0.05 each) are llround(0.05 * paragraphs)
want=0
for f in "$FORTUNES"/*; do
  case "$f" in *.dat|*.u8) continue ;; esac
  [ -f "$f" ] || continue
  n=$(grep -c -P '[\p{L}\p{N}]' "$f")
  want=$((want + n))
done
got=$(cat tok1/wiki.*.tokens | wc -l)
[ "$got" -eq "$want" ] || fail "raw mode wrote $got paragraphs, the fortune files have $want lines with a letter or digit"
for s in valid test; do
  n=$(wc -l < "tok1/wiki.$s.tokens")
  expect=$(awk -v p="$want" 'BEGIN { printf "%d", p * 0.05 + 0.5 }')
  [ "$n" -eq "$expect" ] || fail "raw mode: $n $s paragraphs, expected $expect (0.05 of $want)"
done
grep -q -E '(^ |  | $)' tok1/wiki.*.tokens && fail "raw mode wrote a line with extra spaces"
grep -q '^$' tok1/wiki.*.tokens && fail "raw mode wrote an empty line"
# punctuation is split off: no token mixes letters and punctuation
grep -q -E "[[:alpha:]][.,;:!?\"'()]|[.,;:!?\"'()][[:alpha:]]" tok1/wiki.*.tokens && fail "raw mode left punctuation on a word"
echo "ok: raw mode on $FORTUNES: $got paragraphs, the same files and lm.h5 ($(stat -c %s r1/lm.h5) bytes) on 1 and 3 ranks"

# the WikiText mode on raw mode's files gives the same lm.h5; another seed another split of the same text
prep 1 again --in tok1
cmp r1/lm.h5 again/lm.h5 || fail "prep lm --in on the files raw mode wrote gave a different lm.h5"
prep 1 seed7 --raw "$FORTUNES" --seed 7 --write-tokens tok7
cmp -s tok1/wiki.valid.tokens tok7/wiki.valid.tokens && fail "--seed 7 chose the same valid paragraphs as the default seed"
[ "$(cat tok7/wiki.*.tokens | wc -l)" -eq "$got" ] || fail "--seed 7 changed the number of paragraphs"
[ "$(cat tok1/wiki.*.tokens | sort | md5sum)" = "$(cat tok7/wiki.*.tokens | sort | md5sum)" ] ||
  fail "--seed 7 split different paragraphs"
echo "ok: --in on raw mode's files gives the same lm.h5; --seed 7 splits the same paragraphs differently"
pass
