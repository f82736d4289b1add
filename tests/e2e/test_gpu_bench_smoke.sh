# A user without a GPU tries the GPU benchmark (bench/gpu/run.sh) in its smoke mode, --device cpu --quick:
# every path of the script runs (data made by `hetseq prep` and the shard writer, hetseq BERT-large/-base
# at fp32/tf32/bf16/fp16 and BERT-large at phase-2 shapes (its file's init_checkpoint overridden), Transformer-XL at tf32/bf16 and the CNN on the CPU backend, the PyTorch side of
# each: Hugging Face's BertForPreTraining, NVIDIA's MemTransformerLM, the CNN; torch.compile where the
# PyTorch has it, else a note), and the table it prints and writes has every row, a positive rate for
# hetseq and PyTorch eager, ratios, model TFLOP/s and peak memory as numbers, MFU n/a (no GPU peak), a
# compiled cell that is a number or n/a with a note, every note it marks, and hetseq's own FLOP count
# equal to the table's. No time is checked: the figures are the benchmark's, not the test's.
. "$top_srcdir/tests/lib.sh"
need_python torch h5py numpy
"$PYTHON_TORCH" -c 'import transformers' 2> /dev/null ||
  fail "$PYTHON_TORCH cannot import transformers (Hugging Face, PyPI): tools/quickstart.sh test installs it in" \
    "build/pyenv; by hand: /usr/bin/python3 -m venv --system-site-packages build/pyenv && build/pyenv/bin/pip" \
    "install transformers==4.38.2, then configure with PYTHON_TORCH=build/pyenv/bin/python"

timeout -k 5 900 bash "$top_srcdir/bench/gpu/run.sh" "$top_builddir" --device cpu --quick --threads 1 \
  --out table.md > run.log 2>&1 || { cat run.log; fail "bench/gpu/run.sh --device cpu --quick failed"; }
cat table.md
[ -s table.md ] || fail "the table file (--out) is empty"
# the file is the table that was printed
grep -qF "$(grep -m1 '^| BERT-large | fp32 |' table.md)" run.log || fail "the table printed differs from table.md"

num='[0-9]+(\.[0-9]+)?(e[-+]?[0-9]+)?'
marks='( \[[0-9]+(,[0-9]+)*\])?'
for row in "BERT-large fp32" "BERT-large tf32" "BERT-large bf16" "BERT-large fp16" "BERT-base fp32" \
  "BERT-base tf32" "BERT-base bf16" "BERT-base fp16" "BERT-large phase 2 fp32" "BERT-large phase 2 tf32" \
  "BERT-large phase 2 bf16" "BERT-large phase 2 fp16" "TXL-base tf32" "TXL-base bf16" "CNN (MNISTNet) fp32"; do
  model=${row% *} prec=${row##* }
  line=$(grep -F "| $model | $prec |" table.md)
  [ "$(printf '%s\n' "$line" | grep -c .)" = 1 ] || fail "row '$model $prec': $(printf '%s\n' "$line" | grep -c .) lines, not 1"
  # fields: 2 model, 3 precision, 4 unit, 5 hetseq, 6 eager, 7 compiled, 8 and 9 ratios, 10 TFLOP/s, 11 MFU, 12 memory
  IFS='|' read -r _ _ _ unit hs eager comp r_eager r_comp tflops mfu mem _ <<< "$line"
  t() { local x=$1; x=${x#"${x%%[![:space:]]*}"}; printf '%s' "${x%"${x##*[![:space:]]}"}"; }
  [[ $(t "$unit") =~ ^(seq|tokens|images)/s$ ]] || fail "$row: unit '$(t "$unit")'"
  [[ $(t "$hs") =~ ^$num$marks$ ]] || fail "$row: hetseq '$(t "$hs")' is not a number"
  [[ $(t "$eager") =~ ^$num$marks$ ]] || fail "$row: PyTorch eager '$(t "$eager")' is not a number"
  [[ $(t "$comp") =~ ^($num|n/a)$marks$ ]] || fail "$row: PyTorch compiled '$(t "$comp")'"
  [[ $(t "$comp") =~ ^n/a$ ]] && fail "$row: compiled n/a without a note"
  [[ $(t "$r_eager") =~ ^${num}x$ ]] || fail "$row: hetseq / eager '$(t "$r_eager")'"
  [[ $(t "$r_comp") =~ ^(${num}x|n/a)$ ]] || fail "$row: hetseq / compiled '$(t "$r_comp")'"
  [[ $(t "$tflops") =~ ^$num\ /\ $num\ /\ ($num|n/a)$ ]] || fail "$row: TFLOP/s '$(t "$tflops")'"
  [ "$(t "$mfu")" = "n/a / n/a / n/a" ] || fail "$row: MFU '$(t "$mfu")' on the CPU (no GPU peak): expected n/a"
  [[ $(t "$mem") =~ ^$num\ /\ $num\ /\ ($num|n/a)$ ]] || fail "$row: peak memory '$(t "$mem")'"
  awk -v a="$(t "$hs")" -v b="$(t "$eager")" 'BEGIN { exit !(a + 0 > 0 && b + 0 > 0) }' || fail "$row: a rate of 0"
done
[ "$(grep -c '^| ' table.md)" = 16 ] || fail "expected the header and 15 rows, got $(grep -c '^| ' table.md) lines"
# every note marked is there; hetseq's FLOPs per sample (its tflops field) are the table's
for k in $(grep -o '\[[0-9,]*\]' table.md | tr -d '[]' | tr ',' '\n' | sort -u); do
  grep -q "^\[$k\] ." table.md || fail "note [$k] is marked but not written"
done
grep -q 'hetseq counts' table.md && fail "hetseq's FLOP count differs from the table's: $(grep 'hetseq counts' table.md)"
grep -q '^- model FLOPs: .*BERT-large [0-9.e+]* per sequence, BERT-base [0-9.e+]* per sequence, BERT-large phase 2 [0-9.e+]* per sequence, TXL [0-9.e+]* per token, CNN [0-9.e+]* per image$' table.md ||
  fail "the FLOP counts are not stated"

# --only and --precisions in the order given, --budget: with a budget of 0 s no run starts, and every
# cell of the rows asked for, in their order, says why
timeout -k 5 300 bash "$top_srcdir/bench/gpu/run.sh" "$top_builddir" --device cpu --quick --threads 1 \
  --only txl,bert-base --precisions bf16,tf32 --budget 0 --out budget.md > budget.log 2>&1 ||
  { cat budget.log; fail "bench/gpu/run.sh --budget 0 failed"; }
[ "$(awk -F' *[|] *' '/^[|] [^m-]/ { print $2, $3 }' budget.md)" = "$(printf '%s\n' 'TXL-base bf16' 'TXL-base tf32' \
  'BERT-base bf16' 'BERT-base tf32')" ] ||
  { cat budget.md; fail "--only txl,bert-base --precisions bf16,tf32: not those rows in that order"; }
k=$(sed -n 's/^\[\([0-9]*\)\] not run: the --budget of 0 s was spent$/\1/p' budget.md)
[ -n "$k" ] || { cat budget.md; fail "--budget 0: no note says the runs were not started"; }
[ "$(grep -c "^| [^m-].*| n/a \[$k\] | n/a \[$k\] |" budget.md)" = 4 ] ||
  { cat budget.md; fail "--budget 0: not every row's hetseq and eager cells carry the note [$k]"; }
grep -Eq '^  (hetseq|pytorch) ' budget.log && { cat budget.log; fail "--budget 0 started a run"; }
pass
