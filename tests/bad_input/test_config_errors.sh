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

# Overrides are read by libconfig, one value each: every bad one names the override and the fix.
expect_error "override: a float for an integer" \
  "-o training\.max_sentences=16\.5: training\.max_sentences: expected an integer, found the number 16\.5 \(write a whole number without a decimal point\)" \
  "$HETSEQ" train ok.cfg -o training.max_sentences=16.5
expect_error "override: a quoted number" \
  "-o optimizer\.lr=\"0\.5\": optimizer\.lr: expected a number, found the string \"0\.5\" \(leave out the double quotes\)" \
  "$HETSEQ" train ok.cfg -o 'optimizer.lr="0.5"'
expect_error "override: a malformed list" \
  "-o training\.update_freq=\[1,,2\]: training\.update_freq: malformed list '\[1,,2\]'; expected an integer or a list of integers" \
  "$HETSEQ" train ok.cfg -o 'training.update_freq=[1,,2]'
expect_error "override: mixed types in \[ \]" \
  "optimizer\.adam_betas: malformed list '\[0, 0\.5\]' \(the elements of \[ \] must all be integers or all have a decimal point: write 0\.0, not 0, or use \( \)\)" \
  "$HETSEQ" train ok.cfg -o 'optimizer.adam_betas=[0, 0.5]'
expect_error "override: a list of the wrong length" \
  "-o optimizer\.adam_betas=\[0\.9\]: optimizer\.adam_betas: expected a list of exactly 2 numbers, found 1" \
  "$HETSEQ" train ok.cfg -o 'optimizer.adam_betas=[0.9]'
expect_error "override: not a boolean" \
  "-o checkpoint\.no_save=maybe: checkpoint\.no_save: expected a boolean \(true/false, yes/no, on/off, 1/0\), found 'maybe'" \
  "$HETSEQ" train ok.cfg -o checkpoint.no_save=maybe
expect_error "override: an unterminated string" \
  "-o data\.path=\"/x: data\.path: malformed quoted string \"/x \(write \"text\" with" \
  "$HETSEQ" train ok.cfg -o 'data.path="/x'
expect_error "override: a second setting smuggled in" \
  "-o optimizer\.lr=0\.5; seed = 3: optimizer\.lr: expected a number, found '0\.5; seed = 3'" \
  "$HETSEQ" train ok.cfg -o 'optimizer.lr=0.5; seed = 3'
expect_error "override: beyond 64 bits" \
  "-o seed=99999999999999999999: the integer 99999999999999999999 is beyond 64 bits" \
  "$HETSEQ" train ok.cfg -o seed=99999999999999999999
expect_error "override: out of range" "-o seed=-1: seed = -1 is out of range; allowed: 0 <= value <= 4294967295" \
  "$HETSEQ" train ok.cfg --set seed=-1
expect_error "override: a group" \
  "-o optimizer=adam: 'optimizer' is a group of settings; set one of its keys, e.g. -o optimizer\.name=\.\.\." \
  "$HETSEQ" train ok.cfg -o optimizer=adam
expect_error "override: no '='" "-o optimizer\.lr: expected group\.key=value, e\.g\. -o optimizer\.lr=0\.5" \
  "$HETSEQ" train ok.cfg -o optimizer.lr
# good overrides reach the effective configuration (printed at start; the run then stops at data.path)
out=$("$HETSEQ" train ok.cfg -o 'data.path="/nowhere/x y"' -o training.update_freq=[1,2,4] -o seed=4294967295 \
      --set=checkpoint.no_save=yes -o optimizer.adam_betas='(0, 0.5)' -o optimizer.name=lamb -o training.max_epoch=1 2>&1)
for want in 'path = "/nowhere/x y";' 'update_freq = \[1, 2, 4\];' 'seed = 4294967295L;' 'no_save = true;' \
            'adam_betas = \[0\.0, 0\.5\];' 'name = "lamb";'; do
  printf '%s\n' "$out" | grep -q -- "$want" || fail "good overrides: '$want' missing from the effective configuration:
$out"
done
echo "ok: good overrides reach the effective configuration"

# The command line of train and eval (getopt_long): each mistake is one message.
expect_error "-o without its value" "-o needs an argument group\.key=value" "$HETSEQ" train ok.cfg -o
expect_error "--set without its value" "--set needs an argument group\.key=value" "$HETSEQ" train ok.cfg --set
expect_error "--checkpoint without its file" "--checkpoint needs a file name" "$HETSEQ" eval ok.cfg --checkpoint
expect_error "eval without --checkpoint" "hetseq eval needs --checkpoint FILE" "$HETSEQ" eval ok.cfg
expect_error "no CONFIG" "hetseq train needs a CONFIG file" "$HETSEQ" train -o seed=1
expect_error "two CONFIG files" "unexpected argument 'other\.cfg': hetseq train takes one CONFIG file" \
  "$HETSEQ" train ok.cfg other.cfg
expect_error "an unknown short option" "unknown option '-x' for hetseq train \(see hetseq --help\)" "$HETSEQ" train ok.cfg -x
expect_error "an unknown long option" "unknown option '--frobnicate' for hetseq eval" "$HETSEQ" eval ok.cfg --frobnicate
expect_error "a value for --help" "option '--help' takes no value" "$HETSEQ" train ok.cfg --help=yes
expect_error "an unknown command" "unknown command 'trian' \(expected train, eval, prep; see hetseq --help\)" "$HETSEQ" trian ok.cfg
# an environment knob with a malformed value: one message, before any work
expect_error "a malformed HETSEQ_CUDA_LEDGER_WARMUP" "HETSEQ_CUDA_LEDGER_WARMUP=one is not a non-negative integer" \
  env HETSEQ_CUDA_LEDGER_WARMUP=one "$HETSEQ" train ok.cfg
expect_error "-oKEY=VALUE, options before CONFIG" "-o optimizer\.lrr=1: unknown key 'optimizer\.lrr'" \
  "$HETSEQ" train -ooptimizer.lrr=1 ok.cfg
"$HETSEQ" train ok.cfg -o seed=1 --help 2>&1 | grep -q "^usage: hetseq" || fail "--help after options prints no usage"
echo "ok: --help after other options prints the usage"

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
