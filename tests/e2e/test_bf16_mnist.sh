# A user trains HetSeq's MNIST CNN (conf/mnist.cfg) on 2 ranks on the CPU for one epoch of the full
# Fashion-MNIST training set, once in fp32 and once with precision = "bf16" (convolutions and linear
# layers on bf16 operands with fp32 sums), same seed. Both are evaluated on the 10 000-image test set:
# bf16 reaches the fp32 accuracy within 0.3 points (one-sided: bf16 >= fp32 - 0.3). Measured here:
# fp32 87.93 %, bf16 87.80 % (87.68 % through oneDNN's matmul). A full epoch is needed: after 12 000
# or 24 000 images the two runs are still 0.44 and 0.35 points apart (early training is noisier than
# the bound), so the test takes two epochs' time (about 2 × 100 s on 2 busy cores).
# Asking for a precision that does not exist ends with a message listing the ones that do.
. "$top_srcdir/tests/lib.sh"
grep -q '^#define HAVE_DNNL 1' "$top_builddir/build_config.h" || fail "hetseq built without oneDNN: install Debian's libdnnl-dev and configure again"
CFG="$top_srcdir/conf/mnist.cfg"
DATA="$top_builddir/tests/fashion-mnist.h5"
expect_error "precision fp8" 'fp32.*tf32.*bf16.*fp16' \
  mpi 2 "$HETSEQ" train "$CFG" -o data.path=\"$DATA\" -o device=\"cpu\" -o precision=\"fp8\"
acc() { grep "valid on" "$1" | tail -1 | sed 's/.*| accuracy \([0-9.]*\) .*/\1/'; }
for p in fp32 bf16; do
  mpi 2 "$HETSEQ" train "$CFG" -o data.path=\"$DATA\" -o training.max_epoch=1 -o checkpoint.no_save=true \
    -o checkpoint.save_dir=\"$p\" -o device=\"cpu\" -o precision=\"$p\" -o log.interval=1000 > $p.log 2>&1 \
    || { cat $p.log; fail "$p training failed"; }
  grep "valid on" $p.log
done
a32=$(acc fp32.log); a16=$(acc bf16.log)
[ -n "$a32" ] && [ -n "$a16" ] || fail "no validation accuracy in the logs"
echo "test accuracy after one epoch: fp32 $a32, bf16 $a16"
awk -v a="$a32" 'BEGIN { exit !(a >= 0.80) }' || fail "fp32 accuracy $a32 shows no learning (< 80%)"
awk -v a="$a32" -v b="$a16" 'BEGIN { exit !(b >= a - 0.003) }' \
  || fail "bf16 accuracy $a16 is more than 0.3 points below fp32's $a32"
pass
