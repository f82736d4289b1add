# Sourced by the Transformer-XL shell tests: make_txl_corpus DIR LINES writes DIR/raw/text.txt, LINES lines
# of English-like text (a fixed pseudo-random walk over a few hundred words, so the same on every
# machine), and DIR/lm.h5 by `hetseq prep lm --raw`.
make_txl_corpus() {
  mkdir -p "$1/raw"
  awk -v lines="$2" 'BEGIN {
    split("the of and to a in is was that for on as with by he it at from his an were are which this be " \
          "or has had first one their its new after who they have her she two been other when there all " \
          "during into school time may years more most only over city some world would where later up such " \
          "used many can state about national out known university united then made", w, " ");
    n = length(w); x = 12345;
    for (l = 0; l < lines; l++) {
      len = 6 + l % 11; s = "";
      for (k = 0; k < len; k++) {
        x = (x * 1103515245 + 12345) % 2147483648;
        i = int(x / 65536) % n + 1;
        if (k > 0 && (x % 3) == 0) i = (i * 7 + k) % n + 1;
        s = s (k ? " " : "") w[i] (x % 13 == 0 ? "s" : "");
      }
      print s " ."
    }
  }' > "$1/raw/text.txt"
  "$HETSEQ" prep lm --raw "$1/raw" --out "$1" > "$1/prep.log" 2>&1 || { cat "$1/prep.log"; fail "hetseq prep lm of $1 failed"; }
}

# A tiny model for the mechanics tests (seconds per run on two ranks).
txl_experiment() { # txl_experiment FILE DATA-DIR [extra txl keys]
  cat > "$1" <<CFG
task = "txl";
device = "${HS_TEST_DEVICE:-cpu}";
seed = 7;
data: { path = "$2"; };
txl: { n_layer = 2; n_head = 2; d_head = 8; d_model = 16; d_inner = 32; dropout = 0.1; dropatt = 0.1;
       tgt_len = 8; mem_len = 6; eval_tgt_len = 8; eval_mem_len = 10; cutoffs = [20, 60]; div_val = 2;
       batch_size = 4; eval_batch_size = 2; $3 };
optimizer: { name = "lamb"; lr = 1e-2; adam_eps = 1e-6; clip_norm = 0.25; weight_decay = 0.0; };
lr_scheduler: { name = "cosine"; warmup_updates = 5; total_num_update = 40; end_learning_rate = 1e-3; };
training: { max_update = 12; validate_interval_updates = 6; };
checkpoint: { save_interval_updates = 6; keep_last = -1; };
log: { interval = 2; metrics_file = "metrics.jsonl"; };
CFG
}
