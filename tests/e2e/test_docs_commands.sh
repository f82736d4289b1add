# A user copies the command lines of the README's "Using it" section and of docs/*.md into a shell, in
# the order they are written, at the top of a source checkout: every one must work. The commands are
# read from the documents themselves, so a wrong command in a document fails this test.
#
# Which lines run:
# - README: every line of the indented block under "Using it" (continuation lines ending in "\" joined).
# - docs/*.md: lines of code blocks (``` fences or 4-space indentation) that start with `hetseq `,
#   `mpirun ` or `python3 tools/`. A synopsis (a line with an optional "[--option]") is not run; each of
#   its --options must be one `hetseq --help` lists. docs/cluster.md (needs Slurm or PBS) and
#   docs/performance.md (benchmarks in a build tree) are not run.
# Each line runs verbatim with bash in one scratch directory laid out like a checkout (conf/ and tools/
# are the source tree's), after the lines before it, with these documented substitutions so that it is
# small and fast:
# - on PATH: `hetseq` is the binary under test, `python3` is $PYTHON_TORCH, `mpirun` is $MPIRUN with
#   --allow-run-as-root --oversubscribe and a time limit;
# - `text/` holds tests/fixtures/prep_corpus three times (93 documents: enough for --shards 64);
#   /usr/share/games/fortunes is used as is when installed, else replaced by text/; /scratch/... paths
#   become data/fashion-mnist.h5; FASHION_MNIST_DIR replaces /usr/share/datasets/fashion-mnist if set;
#   exp.cfg and experiment.cfg (names the docs use for "your experiment") are conf/mnist.cfg with their
#   own save_dir;
# - a PyTorch checkpoint named by `hetseq_convert.py import SRC ...` (and its --bert-config JSON) is made
#   on the fly when missing: a 1-layer BertForPreTraining (tests/ref/bert_torch.py) saved as NVIDIA does;
# - a `hetseq train` line of docs/*.md starts from scratch, as for a reader trying the example: if an
#   earlier line left a checkpoint in its save_dir (the README's MNIST run), that directory is moved aside;
# - appended (after a trailing comment is cut): `hetseq train` gets -o training.max_update=2; `hetseq
#   train/eval` of a BERT experiment gets -o model.config_file= a copy of its bert_config.json with
#   hidden 48, 1 layer, intermediate 64 (vocabulary, heads and positions kept) and
#   -o training.max_sentences=2 -o training.update_freq=1; `hetseq prep mnist` gets --limit-train 512
#   --limit-test 256.
# A line fails on a non-zero exit or when hetseq says an option it was given "is ignored". Lines that
# need PyTorch are skipped (said so) when there is none.
. "$top_srcdir/tests/lib.sh"
SRC=$(cd "$top_srcdir" && pwd)
HETSEQ_BIN=$(cd "$(dirname "$HETSEQ")" && pwd)/$(basename "$HETSEQ")
[ -x "$HETSEQ_BIN" ] || fail "no hetseq binary at $HETSEQ"
REAL_MPIRUN=$(command -v "$MPIRUN") || fail "no mpirun ($MPIRUN)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
export HDF5_USE_FILE_LOCKING=FALSE

# ---- the scratch checkout -------------------------------------------------------------------------
mkdir -p bin text
ln -s "$HETSEQ_BIN" bin/hetseq
if [ -n "${PYTHON_TORCH:-}" ]; then ln -s "$(command -v "$PYTHON_TORCH")" bin/python3; fi
cat > bin/mpirun <<EOF
#!/bin/sh
exec timeout -k 5 120 "$REAL_MPIRUN" --allow-run-as-root --oversubscribe --mca btl self,vader \\
  --mca rmaps_base_oversubscribe 1 "\$@"
EOF
chmod +x bin/mpirun
PATH="$WORK/bin:$PATH"
export PATH
ln -s "$SRC/conf" conf
ln -s "$SRC/tools" tools
for copy in 1 2 3; do
  for f in "$SRC"/tests/fixtures/prep_corpus/*; do cp "$f" "text/copy${copy}_$(basename "$f")"; done
done
for cfg in exp.cfg experiment.cfg; do
  sed "s#\"checkpoints/mnist\"#\"checkpoints/${cfg%.cfg}\"#" conf/mnist.cfg > "$cfg"
  grep -q "checkpoints/${cfg%.cfg}" "$cfg" || fail "conf/mnist.cfg no longer has save_dir \"checkpoints/mnist\""
  # trainer.c does not yet create save_dir when checkpoint.no_save = true (the metrics file lives there);
  # drop this line once it does.
  mkdir -p "checkpoints/${cfg%.cfg}"
done

# ---- extracting the command lines -------------------------------------------------------------------
# Output: "FILE:LINE<TAB>command" per command, continuation lines joined.
readme_commands() {
  awk '
    /^Using it[ \t]*$/ { getline; if ($0 ~ /^-+$/) { on = 1; next } }
    on && /^[^ \t]/ && NF { exit }
    on && /^[ \t]+[^ \t]/ {
      line = $0; sub(/^[ \t]+/, "", line)
      if (cont != "") { cmd = cmd " " line } else { cmd = line; start = NR }
      if (cmd ~ /\\$/) { sub(/[ \t]*\\$/, "", cmd); cont = 1; next }
      cont = ""; printf "README:%d\t%s\n", start, cmd
    }' "$SRC/README"
}
doc_commands() { # FILE
  awk -v name="docs/$(basename "$1")" '
    /^[ \t]*```/ { fence = !fence; next }
    {
      code = fence || /^    /
      if (!code) { cont = ""; next }
      line = $0; sub(/^[ \t]+/, "", line)
      if (cont != "") { cmd = cmd " " line }
      else if (line ~ /^(hetseq |mpirun |python3 tools\/)/) { cmd = line; start = NR }
      else next
      if (cmd ~ /\\$/) { sub(/[ \t]*\\$/, "", cmd); cont = 1; next }
      cont = ""; printf "%s:%d\t%s\n", name, start, cmd
    }' "$1"
}

# ---- running one ------------------------------------------------------------------------------------
tiny_bert_config() { # bert_config.json of the experiment -> path of its tiny copy
  local src=$1 dst
  dst="tiny_$(basename "$src")"
  sed -e 's/"hidden_size": *[0-9]*/"hidden_size": 48/' -e 's/"num_hidden_layers": *[0-9]*/"num_hidden_layers": 1/' \
      -e 's/"intermediate_size": *[0-9]*/"intermediate_size": 64/' "$src" > "$dst"
  grep -q '"hidden_size": 48' "$dst" || fail "cannot shrink $src"
  echo "$dst"
}

make_torch_checkpoint() { # SRC.pt [bert_config.json]
  "$PYTHON_TORCH" - "$SRC/tests/ref" "$@" <<'PY' || fail "cannot make the PyTorch checkpoint $1"
import json, os, sys
from collections import OrderedDict
import torch
sys.path.insert(0, sys.argv[1])
import bert_torch as bt
cfg = OrderedDict([("attention_probs_dropout_prob", 0.1), ("hidden_act", "gelu"), ("hidden_dropout_prob", 0.1),
                   ("hidden_size", 48), ("initializer_range", 0.02), ("intermediate_size", 64),
                   ("max_position_embeddings", 64), ("num_attention_heads", 12), ("num_hidden_layers", 1),
                   ("type_vocab_size", 2), ("vocab_size", 101)])
sd = bt.build_model(cfg, dropout=False, seed=1).state_dict()
# as NVIDIA's run_pretraining.py saves it: {'model': state_dict} with DistributedDataParallel's prefix
torch.save({"model": OrderedDict(("module." + k, v) for k, v in sd.items())}, sys.argv[2])
if len(sys.argv) > 3 and not os.path.exists(sys.argv[3]):
    with open(sys.argv[3], "w") as f:
        json.dump(cfg, f)
PY
}

ran=0 skipped=0
run_line() { # WHERE COMMAND FRESH (1: a docs example: its training starts from scratch)
  local where=$1 cmd=$2 fresh=${3:-0} out rc cfg json save_dir
  cmd=$(printf '%s' "$cmd" | sed -e 's/[[:space:]]#.*$//' -e 's/[[:space:]]*$//')
  cmd=$(printf '%s' "$cmd" | sed -e 's#"/scratch/[^"]*"#"data/fashion-mnist.h5"#g' -e 's#/scratch/[^ ]*#data/fashion-mnist.h5#g')
  [ -d /usr/share/games/fortunes ] || cmd=$(printf '%s' "$cmd" | sed 's#/usr/share/games/fortunes#text/#g')
  [ -n "${FASHION_MNIST_DIR:-}" ] && cmd=$(printf '%s' "$cmd" | sed "s#/usr/share/datasets/fashion-mnist#$FASHION_MNIST_DIR#g")
  case " $cmd" in
    *" python3 "*)
      if [ -z "${PYTHON_TORCH:-}" ]; then
        echo "SKIP: $where needs Python with torch and h5py: $cmd"; skipped=$((skipped + 1)); return
      fi ;;
  esac
  case "$cmd" in
    *"hetseq_convert.py import "*)
      set -- $(printf '%s' "$cmd" | sed 's/.*hetseq_convert\.py import //')
      json=$(printf '%s' "$cmd" | sed -n 's/.*--bert-config \([^ ]*\).*/\1/p')
      [ -e "$1" ] || make_torch_checkpoint "$1" $json ;;
  esac
  case "$cmd" in
    *"hetseq train "* | *"hetseq eval "*)
      cfg=$(printf '%s' "$cmd" | sed 's/.*hetseq \(train\|eval\) \([^ ]*\).*/\2/')
      [ -f "$cfg" ] || fail "$where: the experiment file $cfg does not exist: $cmd"
      json=$(sed -n 's/^[[:space:]]*config_file[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' "$cfg")
      if grep -q '^[[:space:]]*task[[:space:]]*=[[:space:]]*"bert"' "$cfg"; then
        [ -n "$json" ] || fail "$where: $cfg: BERT experiment without model.config_file (the test shrinks that file)"
        cmd="$cmd -o model.config_file=\"$(tiny_bert_config "$json")\" -o training.max_sentences=2 -o training.update_freq=1"
      fi
      case "$cmd" in *"hetseq train "*)
        cmd="$cmd -o training.max_update=2"
        # A docs example trains from scratch, as for a reader trying it: a checkpoint an earlier line
        # left in its save_dir (the README's MNIST run, on another number of ranks) is moved aside.
        save_dir=$(printf '%s' "$cmd" | sed -n 's/.*checkpoint\.save_dir="\{0,1\}\([^" ]*\).*/\1/p')
        [ -n "$save_dir" ] || save_dir=$(sed -n 's/^[[:space:]]*save_dir[[:space:]]*=[[:space:]]*"\([^"]*\)".*/\1/p' "$cfg")
        if [ "$fresh" = 1 ] && [ -n "$save_dir" ] && [ -e "$save_dir/checkpoint_last.h5" ]; then
          mv "$save_dir" "$save_dir.before_$(printf '%s' "$where" | tr '/:.' '___')"
          mkdir -p "$save_dir" # (for checkpoint.no_save = true, see above)
        fi ;;
      esac ;;
  esac
  case "$cmd" in *"hetseq prep mnist "*) cmd="$cmd --limit-train 512 --limit-test 256" ;; esac
  echo "== $where: $cmd"
  out=$(timeout -k 5 150 bash -c "$cmd" 2>&1); rc=$?
  printf '%s\n' "$out" > "log_$(printf '%s' "$where" | tr '/:' '__').txt"
  if [ $rc -ne 0 ]; then
    printf '%s\n' "$out" | tail -n 30
    fail "$where: the documented command fails (exit $rc): $cmd"
  fi
  if printf '%s\n' "$out" | grep -q "is ignored"; then
    printf '%s\n' "$out" | grep "is ignored"
    fail "$where: the documented command sets something that is ignored: $cmd"
  fi
  printf '%s\n' "$out" | grep -E '^(\| (done|wrote|prep|saved|initialised|resuming)|Test set:|hetseq_convert:|hetseq: warning)' | tail -n 3
  ran=$((ran + 1))
}

check_synopsis() { # WHERE COMMAND
  local where=$1 cmd=$2 opt
  for opt in $(printf '%s' "$cmd" | grep -o -- '--[a-z][a-z0-9-]*'); do
    printf '%s\n' "$HELP" | grep -q -- "$opt\b" || fail "$where: $opt is not an option hetseq --help lists: $cmd"
  done
  echo "== $where (synopsis; options checked against hetseq --help): $cmd"
}

HELP=$("$HETSEQ_BIN" --help 2>&1) || fail "hetseq --help fails"

# ---- README ---------------------------------------------------------------------------------------------
readme_commands > readme.cmds
[ "$(wc -l < readme.cmds)" -ge 8 ] || fail "found only $(wc -l < readme.cmds) commands under README's \"Using it\" (layout changed?)"
while IFS="$(printf '\t')" read -r where cmd; do
  run_line "$where" "$cmd" < /dev/null
  case "$cmd" in # what the README's comment promises
    *bert_base_phase2.cfg*)
      grep -q "initialised weights and optimizer moments from checkpoints/bert_base_phase1/checkpoint_last.h5" \
        "log_$(printf '%s' "$where" | tr '/:' '__').txt" || fail "$where: phase 2 did not start from phase 1's checkpoint" ;;
  esac
done < readme.cmds

# ---- docs/*.md ------------------------------------------------------------------------------------------
for doc in "$SRC"/docs/*.md; do
  case "$(basename "$doc")" in cluster.md | performance.md) continue ;; esac
  doc_commands "$doc" > doc.cmds
  while IFS="$(printf '\t')" read -r where cmd; do
    case "$cmd" in
      *"[-"*) check_synopsis "$where" "$cmd" ;;
      *) run_line "$where" "$cmd" 1 < /dev/null ;;
    esac
  done < doc.cmds
done

echo "ran $ran documented commands, skipped $skipped"
pass "every command line of README (Using it) and docs/*.md works as written"
