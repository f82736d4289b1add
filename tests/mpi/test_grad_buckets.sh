# A user's gradients summed by the bucketed all-reduce on 1, 2, 3 and 4 ranks (tests/mpi/test_grad_buckets.c):
# for every bucket cap from below one float to far above the buffer, and fp32/bf16/fp16 in transit, every
# element equals the rank-ordered sum computed on every rank, bit for bit, whichever ranks declare their
# gradients ready and when. The caps must really cut the buffer: a tiny cap makes one bucket per tensor.
. "$top_srcdir/tests/lib.sh"
PROG="$top_builddir/tests/mpi/test_grad_buckets"
for n in 1 2 3 4; do
  mpi $n "$PROG" > run$n.log 2>&1 || { cat run$n.log; fail "bucketed all-reduce on $n rank(s)"; }
  grep "^ok: $n rank(s)" run$n.log || { cat run$n.log; fail "$n rank(s): no success line"; }
done
# 16 tensors: a cap below one float gives 16 buckets, a cap of 0 one, and some cap in between several
grep -q "gradient all-reduce: 16 bucket(s)" run2.log || { cat run2.log; fail "a tiny cap did not give one bucket per tensor"; }
grep -q "gradient all-reduce: 1 bucket(s) of at most 0 MiB" run2.log || fail "cap 0 is not one bucket"
grep -Eq "gradient all-reduce: ([2-9]|1[0-5]) bucket\(s\)" run2.log || fail "no cap gave an intermediate number of buckets"
pass
