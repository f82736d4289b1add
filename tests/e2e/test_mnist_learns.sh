# A user trains HetSeq's MNIST CNN on 2 ranks for one epoch of the full Fashion-MNIST training set and
# evaluates the checkpoint: the test accuracy must show real learning (>= 85% after one epoch; the
# 8-epoch recipe in conf/mnist.cfg reaches >= 91%), and `hetseq eval` prints HetSeq's test-set line.
. "$top_srcdir/tests/lib.sh"
DATA="$top_builddir/tests/fashion-mnist.h5"
CFG="$top_srcdir/conf/mnist.cfg"
mpi 2 "$HETSEQ" train "$CFG" -o data.path=\"$DATA\" -o training.max_epoch=1 -o checkpoint.save_dir=\"ck\" \
  -o device=\"cpu\" > train.log 2>&1 || { cat train.log; fail "training failed"; }
grep "valid on" train.log
mpi 2 "$HETSEQ" eval "$CFG" -o data.path=\"$DATA\" --checkpoint ck/checkpoint_last.h5 > eval.log 2>&1 \
  || { cat eval.log; fail "eval failed"; }
cat eval.log
line=$(grep -E '^Test set: Average loss: [0-9]+\.[0-9]{4}, Accuracy: [0-9]+/10000 \([0-9]+%\)$' eval.log) \
  || fail "eval did not print HetSeq's test-set line"
correct=$(echo "$line" | sed 's/.*Accuracy: \([0-9]*\)\/.*/\1/')
loss=$(echo "$line" | sed 's/.*Average loss: \([0-9.]*\),.*/\1/')
[ "$correct" -ge 8500 ] || fail "accuracy $correct/10000 after one epoch is below 85%"
# The eval loss is the true mean NLL: it must agree with the validation pass at the end of training.
vloss=$(grep "valid on" train.log | tail -1 | sed 's/.*nll_loss \([0-9.]*\) .*/\1/')
awk -v a="$loss" -v b="$vloss" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d < 1e-3) }' \
  || fail "eval loss $loss differs from the validation loss $vloss"
pass
