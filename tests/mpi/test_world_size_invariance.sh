# A user scales out: 1 rank accumulating 2 micro-batches per update and 2 ranks with one each see the
# same global batches, so after 20 updates their parameters agree (float reassociation only). The same
# holds for 3 ranks versus 1 rank with update_freq 3, and with dropout on, because dropout masks are
# keyed by sample index, not by rank.
. "$top_srcdir/tests/lib.sh"
# the gradients an update's first micro-batch writes whole start as NaN (src/nn/params.h): a writer that
# added to one first would show
export HETSEQ_CHECK_GRADS_WRITTEN=1
CFG="$top_srcdir/tests/e2e/small.cfg"
DATA="$top_builddir/tests/fashion-mnist-small.h5"
CMP="$top_builddir/tests/tools/h5compare"
common="-o data.path=\"$DATA\" -o training.max_update=20 -o training.max_epoch=0"
nodrop="-o model.conv_dropout=0.0 -o model.fc_dropout=0.0"

run() { # ranks uf dir extra...
  local np=$1 uf=$2 dir=$3; shift 3
  mpi "$np" "$HETSEQ" train "$CFG" $common -o training.update_freq=$uf -o checkpoint.save_dir=\"$dir\" "$@" \
    > "$dir.log" 2>&1 || { cat "$dir.log"; fail "training on $np rank(s) failed"; }
}

run 1 2 one_uf2 $nodrop
run 2 1 two_uf1 $nodrop
"$CMP" one_uf2/checkpoint_last.h5 two_uf1/checkpoint_last.h5 1e-5 || fail "1 rank x uf 2 != 2 ranks x uf 1 (dropout off)"

run 1 3 one_uf3
run 3 1 three_uf1
"$CMP" one_uf3/checkpoint_last.h5 three_uf1/checkpoint_last.h5 1e-5 || fail "1 rank x uf 3 != 3 ranks (dropout on)"

# Sanity: training moved the weights at all (a run of 0 updates differs from one of 20).
mpi 1 "$HETSEQ" train "$CFG" $common $nodrop -o training.max_update=1 -o checkpoint.save_dir=\"short\" > short.log 2>&1 \
  || fail "1-update run failed"
if "$CMP" short/checkpoint_last.h5 one_uf2/checkpoint_last.h5 1e-5 > /dev/null; then fail "20 updates left the weights unchanged"; fi
pass
