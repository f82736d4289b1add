#!/bin/sh
# A user runs `hetseq train` with a broken experiment file or a bad -o override: every mistake ends
# with exit 1 and one message naming the file, line and key (with the closest valid key for a typo),
# on one rank or several, without a hang.
. "${top_srcdir:-.}/tests/lib.sh"

"$HETSEQ" --version >/dev/null 2>&1 || skip "the hetseq binary is not built yet ($HETSEQ --version failed)"

cat > typo.cfg <<'CFG'
task = "mnist";

optimizer: {
  name = "adadelta";
  lrr = 1.0;
};
CFG
expect_error "typo in a key" "typo\.cfg:5: unknown key 'optimizer\.lrr'; did you mean 'optimizer\.lr'\?" \
  "$HETSEQ" train typo.cfg

cat > wrong_group.cfg <<'CFG'
training: {
  max_sentences = 32;
  clip_norm = 1.0;
};
CFG
expect_error "key in the wrong group" "wrong_group\.cfg:3: unknown key 'training\.clip_norm'; did you mean 'optimizer\.clip_norm'\?" \
  "$HETSEQ" train wrong_group.cfg

cat > wrong_type.cfg <<'CFG'
optimizer: { lr = "0.01"; };
CFG
expect_error "string where a number belongs" \
  "wrong_type\.cfg:1: optimizer\.lr: expected a number, found the string \"0\.01\"" \
  "$HETSEQ" train wrong_type.cfg

cat > range.cfg <<'CFG'
training: {
  max_sentences = 0;
};
CFG
expect_error "out of range" "range\.cfg:2: training\.max_sentences = 0 is out of range; allowed: value >= 1" \
  "$HETSEQ" train range.cfg

cat > choice.cfg <<'CFG'
optimizer: { name = "adma"; };
CFG
expect_error "not one of the choices" "choice\.cfg:1: optimizer\.name = \"adma\" is not allowed; did you mean \"adam\"\?" \
  "$HETSEQ" train choice.cfg

cat > syntax.cfg <<'CFG'
task = "mnist";
optimizer: {
  lr = ;
};
CFG
expect_error "syntax error" "syntax\.cfg:3: syntax error" "$HETSEQ" train syntax.cfg

cat > seed.cfg <<'CFG'
seed = 4294967295;
CFG
expect_error "seed beyond 32 bits" "seed\.cfg:1: the integer 4294967295 does not fit in 32 bits.*write 4294967295L" \
  "$HETSEQ" train seed.cfg

expect_error "missing experiment file" "cannot read experiment file 'nowhere\.cfg': No such file or directory" \
  "$HETSEQ" train nowhere.cfg

echo 'task = "mnist";' > ok.cfg
expect_error "override typo" "-o optimizer\.lrr=0\.1: unknown key 'optimizer\.lrr'; did you mean 'optimizer\.lr'\?" \
  "$HETSEQ" train ok.cfg -o optimizer.lrr=0.1
expect_error "override of the wrong type" \
  "-o training\.max_sentences=big: training\.max_sentences: expected an integer, found 'big'" \
  "$HETSEQ" train ok.cfg -o training.max_sentences=big

# Two ranks: the same error, printed once, and no rank hangs.
if command -v "$MPIRUN" >/dev/null 2>&1; then
  out=$(mpi 2 "$HETSEQ" train typo.cfg 2>&1); rc=$?
  [ $rc -ne 0 ] || fail "2 ranks: expected a non-zero exit. Output:
$out"
  [ $rc -ne 124 ] && [ $rc -ne 137 ] || fail "2 ranks: timed out. Output:
$out"
  count=$(printf '%s\n' "$out" | grep -c "unknown key 'optimizer\.lrr'")
  [ "$count" -eq 1 ] || fail "2 ranks: expected the message once, found it $count times. Output:
$out"
  echo "ok: 2 ranks print the error once"
fi

pass
