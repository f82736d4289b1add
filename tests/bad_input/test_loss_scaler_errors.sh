#!/bin/sh
# A user mistypes a loss_scaler key (dynamic loss scaling, docs/configuration.md) in the experiment
# file or in a -o override: every mistake ends with exit 1 and one message naming the key, on one rank
# or two, before any training.
. "${top_srcdir:-.}/tests/lib.sh"

"$HETSEQ" --version >/dev/null 2>&1 || skip "the hetseq binary is not built yet ($HETSEQ --version failed)"
CFG="$top_srcdir/tests/e2e/small.cfg"
DATA="$top_builddir/tests/fashion-mnist-small.h5"
base="-o data.path=\"$DATA\" -o checkpoint.save_dir=\"ckpt\""

# (override, expected message) pairs, each checked on 2 ranks
check() {
  expect_error "$1" "$2" mpi 2 "$HETSEQ" train "$CFG" $base -o "$1"
  [ ! -e ckpt/checkpoint_last.h5 ] || fail "$1: a checkpoint was written"
}
check 'loss_scaler.enabled="yes"' \
  'loss_scaler\.enabled = "yes" is not allowed; allowed: one of "auto", "on", "off"'
check 'loss_scaler.enabled=true' 'loss_scaler\.enabled = "true" is not allowed; allowed: one of "auto", "on", "off"'
check 'loss_scaler.init_scale=0.0' 'loss_scaler\.init_scale = 0 is out of range; allowed: 0 < value <= 1e\+30'
check 'loss_scaler.init_scale="big"' 'loss_scaler\.init_scale: expected a number'
check 'loss_scaler.growth_factor=1.0' 'loss_scaler\.growth_factor = 1 is out of range; allowed: 1 < value'
check 'loss_scaler.backoff_factor=1.0' 'loss_scaler\.backoff_factor = 1 is out of range; allowed: 0 < value < 1'
check 'loss_scaler.backoff_factor=0' 'loss_scaler\.backoff_factor = 0 is out of range; allowed: 0 < value < 1'
check 'loss_scaler.growth_interval=0' 'loss_scaler\.growth_interval = 0 is out of range; allowed: value >= 1'
check 'loss_scaler.growth_interval=2.5' 'loss_scaler\.growth_interval: expected an integer'
check 'loss_scaler.min_scale=-1.0' 'loss_scaler\.min_scale = -1 is out of range'
check 'loss_scaler.max_scale=1e40' 'loss_scaler\.max_scale = 1e\+40 is out of range'
check 'loss_scaler.grow_interval=5' "unknown key 'loss_scaler\.grow_interval'; did you mean 'loss_scaler\.growth_interval'\?"
# the order of the three scales
expect_error "init_scale above max_scale" \
  'loss_scaler\.init_scale = 33554432 \(.*\) is larger than loss_scaler\.max_scale = 16777216 \(default\): loss_scaler needs min_scale <= init_scale <= max_scale' \
  mpi 2 "$HETSEQ" train "$CFG" $base -o loss_scaler.init_scale=33554432.0
expect_error "min_scale above init_scale" \
  'loss_scaler\.min_scale = 8 \(.*\) is larger than loss_scaler\.init_scale = 4 \(.*\): loss_scaler needs min_scale <= init_scale <= max_scale' \
  mpi 2 "$HETSEQ" train "$CFG" $base -o loss_scaler.init_scale=4.0 -o loss_scaler.min_scale=8.0
pass
