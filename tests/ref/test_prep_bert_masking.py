#!/usr/bin/env python3
"""Statistics of `hetseq prep bert` against the configured probabilities, on a generated corpus whose
every token says where it comes from: sentence j of document i is "di sj di sj di" (5 tokens), so an
instance tells its documents and sentences. With sequence length 43 (40 tokens for A and B, a multiple
of 5) and short_seq_prob 0 no pair is ever truncated, and A starts a chunk.

Checked on ~9000 instances (tolerances: 5 standard deviations of the binomial / sampling distribution,
computed from the sample size):
- the number of masked tokens of each row is exactly min(max_pred, max(1, round(n * masked_lm_prob)))
  (n tokens with [CLS]/[SEP], round half to even, capped by the candidates), also with a max_pred cap;
- of the masked tokens, [MASK] 0.8 + 0.1/V, the original 0.1 + 0.1/V (a random id can be the original),
  and the random ids are uniform over the whole vocabulary, special tokens included (mean, 6 bins);
- masked positions fall in A and B in proportion to their lengths;
- next sentence: B follows A in the same document (label 0) or comes from another document (label 1);
  a chunk of one sentence (A starts at its document's last sentence) is always random, otherwise
  random with probability 0.5."""
import math
import os
import random
import subprocess
import sys
import tempfile

import h5py
import numpy as np

HETSEQ = os.environ.get("HETSEQ", "hetseq")
MPIRUN = os.environ.get("MPIRUN", "mpirun")
N_DOCS, L, PROB = 120, 43, 0.15
SIGMAS = 5.0


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok: " + msg)


def within(observed, expected, sd, what):
    check(abs(observed - expected) <= SIGMAS * sd,
          "%s: %.1f, expected %.1f +- %.1f (5 sd)" % (what, observed, expected, SIGMAS * sd))


def prep(tmp, corpus, vocab, out, max_pred, ranks=2):
    cmd = ["timeout", "-k", "5", "300", MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks),
           "--mca", "btl", "self,vader", HETSEQ, "prep", "bert", "--corpus", corpus, "--vocab", vocab,
           "--out", out, "--seq-len", str(L), "--max-pred", str(max_pred), "--masked-lm-prob", str(PROB),
           "--short-seq-prob", "0", "--dupe-factor", "10", "--shards", "3", "--seed", "2024",
           "--split-sentences", "lines"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail("prep bert failed:\n" + r.stdout + r.stderr)
    rows = {k: [] for k in ["input_ids", "input_mask", "masked_lm_positions", "masked_lm_ids",
                            "next_sentence_labels"]}
    for name in sorted(os.listdir(out)):
        with h5py.File(os.path.join(out, name), "r") as f:
            for k in rows:
                rows[k].append(f[k][:].astype(np.int64))
    return {k: np.concatenate(v) for k, v in rows.items()}


def main():
    rng = random.Random(7)
    n_sent = [rng.randint(3, 60) for _ in range(N_DOCS)]
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "text")
        os.mkdir(corpus)
        for part in range(3):  # three files, documents separated by blank lines
            with open(os.path.join(corpus, "part%d.txt" % part), "w") as f:
                for i in range(part, N_DOCS, 3):
                    for j in range(n_sent[i]):
                        f.write("d%d s%d d%d s%d d%d\n" % (i, j, i, j, i))
                    f.write("\n")
        words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + ["d%d" % i for i in range(N_DOCS)] + \
            ["s%d" % j for j in range(max(n_sent))]
        vocab = os.path.join(tmp, "vocab.txt")
        open(vocab, "w").write("\n".join(words) + "\n")
        V = len(words)
        index = {w: i for i, w in enumerate(words)}
        CLS, SEP, MASK = index["[CLS]"], index["[SEP]"], index["[MASK]"]
        doc_of = {index["d%d" % i]: i for i in range(N_DOCS)}
        sent_of = {index["s%d" % j]: j for j in range(max(n_sent))}

        d = prep(tmp, corpus, vocab, os.path.join(tmp, "p20"), 20)
        ids, mask, pos, lab, nsp = (d["input_ids"], d["input_mask"], d["masked_lm_positions"], d["masked_lm_ids"],
                                    d["next_sentence_labels"])
        N = len(ids)
        counts = {"mask": 0, "keep": 0, "other": 0}
        other_sum = other_expect = other_var = 0.0
        other_ids = []
        in_a = in_a_expect = in_a_var = 0.0
        forced = forced_random = free = free_random = 0
        bad_counts = 0
        for r in range(N):
            m = int(mask[r].sum())
            k = int((pos[r] != 0).sum())
            bad_counts += k != min(20, max(1, round(m * PROB)), m - 3)
            orig = ids[r, :m].copy()
            orig[pos[r, :k]] = lab[r, :k]
            sep = int(np.nonzero(orig == SEP)[0][0])
            for p, o in zip(pos[r, :k], lab[r, :k]):
                t = ids[r, p]
                if t == MASK:
                    counts["mask"] += 1
                elif t == o:
                    counts["keep"] += 1
                else:
                    counts["other"] += 1
                    other_sum += t
                    # uniform over the vocabulary without the original and [MASK]
                    other_expect += (V * (V - 1) / 2 - o - MASK) / (V - 2)
                    other_var += (V * V - 1) / 12.0
                    other_ids.append((t, o))
            # masked positions in A: hypergeometric over the n_cand candidates
            a_len, n_cand = sep - 1, m - 3
            in_a += int((pos[r, :k] < sep).sum())
            in_a_expect += k * a_len / n_cand
            if n_cand > 1:
                in_a_var += k * (a_len / n_cand) * (1 - a_len / n_cand) * (n_cand - k) / (n_cand - 1)
            # where A and B come from: "di sj di sj di" sentences, no truncation
            a_doc, a_sent = doc_of[orig[1]], sent_of[orig[2]]
            a_sents = a_len // 5
            b_doc, b_sent = doc_of[orig[sep + 1]], sent_of[orig[sep + 2]]
            if nsp[r] == 0:
                if b_doc != a_doc or b_sent != a_sent + a_sents:
                    fail("row %d: label IsNext but B (doc %d sentence %d) does not follow A (doc %d sentences %d+%d)"
                         % (r, b_doc, b_sent, a_doc, a_sent, a_sents))
            elif b_doc == a_doc:
                fail("row %d: random next from A's own document %d" % (r, a_doc))
            if a_sent == n_sent[a_doc] - 1:
                forced += 1
                forced_random += int(nsp[r])
            else:
                free += 1
                free_random += int(nsp[r])
        print("%d instances, %d masked tokens (V = %d)" % (N, sum(counts.values()), V))
        check(bad_counts == 0, "masked tokens per row = min(max_pred, max(1, round(n * %.2f))) in every row (%d wrong)"
              % (PROB, bad_counts))
        total = sum(counts.values())
        for what, p in (("mask", 0.8 + 0.1 / V), ("keep", 0.1 + 0.1 / V), ("other", 0.1 * (V - 2) / V)):
            within(counts[what], total * p, math.sqrt(total * p * (1 - p)), "masked tokens replaced by " +
                   {"mask": "[MASK]", "keep": "themselves", "other": "another random id"}[what])
        within(other_sum, other_expect, math.sqrt(other_var), "sum of the random replacement ids")
        # any vocabulary id, as Google's rng.randint(0, len(vocab_words) - 1): special ids too; 6 bins
        edges = [0, 4] + [4 + (V - 4) * b // 5 for b in range(1, 6)]
        for lo, hi in zip(edges[:-1], edges[1:]):
            seen = sum(lo <= t < hi for t, _ in other_ids)
            probs = [(hi - lo - (lo <= o < hi) - (lo <= MASK < hi)) / (V - 2) for _, o in other_ids]
            within(seen, sum(probs), math.sqrt(sum(q * (1 - q) for q in probs)), "random replacement ids in [%d, %d)" % (lo, hi))
        within(in_a, in_a_expect, math.sqrt(in_a_var), "masked tokens in segment A")
        check(forced > 0 and forced_random == forced, "one-sentence chunks: %d of %d random next (all must be)"
              % (forced_random, forced))
        within(free_random, free * 0.5, math.sqrt(free * 0.25), "random next among %d other chunks" % free)

        # a max_pred cap below round(n * prob): every full row holds exactly max_pred
        d = prep(tmp, corpus, vocab, os.path.join(tmp, "p4"), 4, ranks=1)
        m = d["input_mask"].sum(axis=1)
        k = (d["masked_lm_positions"] != 0).sum(axis=1)
        expect = np.minimum(np.minimum(4, np.maximum(1, np.round(m * PROB))), m - 3)
        check((k == expect).all() and (k == 4).sum() > N // 2,
              "max_pred 4: every row has min(4, max(1, round(n * %.2f))) masked tokens" % PROB)
    print("PASS")


if __name__ == "__main__":
    main()
