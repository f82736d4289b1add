#!/bin/sh
# A user reads docs/gpu.md's mixed-precision memory budget and MFU tables: the script that prints them
# (bench/mp_budget.py) re-checks its hand-computed figures — parameter counts, the model FLOPs per
# sequence and per token (the same formulas as src/tasks/model_flops.c), NVIDIA's MFU, the activation
# bytes per layer — and fails when the counting changed without the documented figures.
. "${top_srcdir:-.}/tests/lib.sh"
py=$(command -v python3 || true)
[ -n "$py" ] || skip "no python3"
"$py" "$top_srcdir/bench/mp_budget.py" --check || fail "bench/mp_budget.py --check: a documented figure changed"
"$py" "$top_srcdir/bench/mp_budget.py" > tables.txt || fail "bench/mp_budget.py did not print its tables"
grep -q "TXL base .*0.47 GFLOP per token" tables.txt || { cat tables.txt; fail "TXL-base FLOPs per token is not 0.47 GFLOP"; }
pass
