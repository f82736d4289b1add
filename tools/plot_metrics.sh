#!/bin/sh
# Plots the training and validation loss of a hetseq metrics file (JSON lines) to a PNG with gnuplot.
#   tools/plot_metrics.sh checkpoints/bert_demo/metrics.jsonl loss.png [KEY]
# KEY: the loss field to plot (default: mlm_loss for BERT runs when present, else loss_nats_interval /
# nll_loss). Needs gnuplot (Debian: gnuplot-nox).
set -eu
metrics=$1
out=$2
key=${3:-}
command -v gnuplot >/dev/null || { echo "plot_metrics: gnuplot not found (apt-get install gnuplot-nox)" >&2; exit 1; }
[ -f "$metrics" ] || { echo "plot_metrics: no metrics file $metrics" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
field() { # type key -> "update value" lines
  grep "\"type\": \"$1\"" "$metrics" | sed -n "s/.*\"num_updates\": \([0-9]*\),.*\"$2\": \([-0-9.eE+]*\).*/\1 \2/p"
}
if [ -z "$key" ]; then
  if grep -q '"mlm_loss"' "$metrics"; then key=mlm_loss; else key=; fi
fi
if [ -n "$key" ]; then
  field train "$key" > "$tmp/train"; field valid "$key" > "$tmp/valid"; label="$key (nats)"
else
  field train loss_nats_interval > "$tmp/train"; field valid nll_loss > "$tmp/valid"; label="loss (nats)"
fi
[ -s "$tmp/train" ] || { echo "plot_metrics: no training records with $label in $metrics" >&2; exit 1; }
gnuplot <<GP
set terminal png size 900,560 noenhanced
set output "$out"
set title "hetseq: $(basename "$(dirname "$metrics")")"
set xlabel "update"
set ylabel "$label"
set grid
plot "$tmp/train" using 1:2 with lines lw 2 title "training", \
     "$tmp/valid" using 1:2 with linespoints pt 7 lw 2 title "validation"
GP
echo "| plot: $out"
