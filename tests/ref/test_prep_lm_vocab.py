#!/usr/bin/env python3
"""A user turns WikiText-format token files into language-model data with `hetseq prep lm` and checks
the result against NVIDIA's Transformer-XL recipe: the vocabulary order and every token id of the three
splits must equal what NVIDIA's utils/vocabulary.py Vocab gives (re-implemented here from its
description: Counter over the train split, specials first, Counter.most_common(max_size) cut at
min_freq, each line stripped and split on whitespace with <eos> appended), for several min_freq /
max_size settings, lower-casing, and text with every kind of whitespace and line end Python knows.
hetseq's two additions are checked too: --skip-empty-lines, and "<unk>" added as id 1 only when some
token has no id and the text has no "<unk>" word."""
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "fixtures", "lm")
HETSEQ = os.environ.get("HETSEQ", "hetseq")
SPLITS = ("train", "valid", "test")


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


class NvidiaVocab:
    """NVIDIA's Vocab for WikiText-103 (special ['<eos>'], delimiter None) plus hetseq's <unk> rule."""

    def __init__(self, min_freq=0, max_size=None, lower_case=False, skip_empty=False):
        self.counter = Counter()
        self.min_freq, self.max_size, self.lower_case, self.skip_empty = min_freq, max_size, lower_case, skip_empty
        self.idx2sym, self.sym2idx = [], {}

    def tokenize(self, line, add_eos):
        line = line.strip()
        if self.lower_case:
            line = line.lower()
        symbols = line.split()
        if add_eos and not (self.skip_empty and not symbols):
            symbols = symbols + ["<eos>"]
        return symbols

    def lines(self, path):
        with open(path, "r", encoding="utf-8") as f:  # universal newlines, as NVIDIA's open()
            return list(f)

    def count_file(self, path):
        for line in self.lines(path):
            self.counter.update(self.tokenize(line, add_eos=False))

    def add(self, sym):
        if sym not in self.sym2idx:
            self.idx2sym.append(sym)
            self.sym2idx[sym] = len(self.idx2sym) - 1

    def build_vocab(self):
        self.add("<eos>")
        for sym, cnt in self.counter.most_common(self.max_size):
            if cnt < self.min_freq:
                break
            self.add(sym)

    def encode(self, paths):
        """The three splits as symbol lists; then hetseq's <unk> rule; then ids."""
        sym_splits = [[s for line in self.lines(p) for s in self.tokenize(line, add_eos=True)] for p in paths]
        unknown = any(s not in self.sym2idx for split in sym_splits for s in split)
        if unknown and "<unk>" not in self.sym2idx:
            self.idx2sym.insert(1, "<unk>")
            self.sym2idx = {s: i for i, s in enumerate(self.idx2sym)}
        unk = self.sym2idx.get("<unk>", -1)
        return [np.array([self.sym2idx.get(s, unk) for s in split], dtype=np.int32) for split in sym_splits], unk


def run_prep(in_dir, out_dir, *opts):
    cmd = [HETSEQ, "prep", "lm", "--in", in_dir, "--out", out_dir] + list(opts)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        fail("%s exited with %d:\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r.stdout


def compare(name, in_dir, work, min_freq=0, max_size=None, lower_case=False, skip_empty=False):
    opts = []
    if min_freq:
        opts += ["--min-freq", str(min_freq)]
    if max_size is not None:
        opts += ["--max-size", str(max_size)]
    if lower_case:
        opts.append("--lower-case")
    if skip_empty:
        opts.append("--skip-empty-lines")
    out = os.path.join(work, name)
    run_prep(in_dir, out, *opts)

    ref = NvidiaVocab(min_freq, max_size, lower_case, skip_empty)
    paths = [os.path.join(in_dir, "wiki.%s.tokens" % s) for s in SPLITS]
    ref.count_file(paths[0])
    ref.build_vocab()
    ids, unk = ref.encode(paths)

    with h5py.File(os.path.join(out, "lm.h5"), "r") as f:
        vocab = list(f["vocab"].asstr()[:])
        check(f.attrs["format"] == "hetseq-lm-1", "%s: format attribute %r" % (name, f.attrs["format"]))
        check(len(vocab) == len(ref.idx2sym),
              "%s: %d words in /vocab, NVIDIA's Vocab has %d" % (name, len(vocab), len(ref.idx2sym)))
        for i, (a, b) in enumerate(zip(vocab, ref.idx2sym)):
            check(a == b, "%s: vocabulary id %d is %r, NVIDIA's Vocab has %r" % (name, i, a, b))
        for key, want in (("vocab_size", len(ref.idx2sym)), ("eos_id", 0), ("unk_id", unk),
                          ("lower_case", int(lower_case))):
            check(int(f.attrs[key]) == want, "%s: attribute %s = %s, expected %s" % (name, key, f.attrs[key], want))
        for s, want in zip(SPLITS, ids):
            got = f[s][:]
            check(f[s].dtype == np.dtype("<i4"), "%s: /%s is %s, expected little-endian int32" % (name, s, f[s].dtype))
            check(got.shape == want.shape, "%s: /%s has %d tokens, NVIDIA's encode_file gives %d"
                  % (name, s, got.shape[0], want.shape[0]))
            bad = np.nonzero(got != want)[0]
            check(bad.size == 0, "%s: /%s token %d is %d (%r), NVIDIA's encode_file gives %d (%r)"
                  % (name, s, bad[0] if bad.size else -1, got[bad[0]] if bad.size else 0,
                     vocab[got[bad[0]]] if bad.size else "", want[bad[0]] if bad.size else 0,
                     ref.idx2sym[want[bad[0]]] if bad.size else ""))
    print("ok: %-28s %4d words, unk_id %3d, tokens %s" % (name, len(vocab), unk, [len(x) for x in ids]))
    return ref, vocab


def main():
    work = tempfile.mkdtemp(prefix="hetseq-prep-lm-vocab.")
    try:
        # The fixture must exercise the tie rule: words of equal count whose first occurrence order is
        # not their alphabetical order (else a sort by word would pass too).
        ref = NvidiaVocab()
        ref.count_file(os.path.join(FIX, "wiki.train.tokens"))
        by_count = {}
        for w, c in ref.counter.items():  # insertion order = first occurrence
            by_count.setdefault(c, []).append(w)
        check(any(len(ws) > 1 and ws != sorted(ws) for ws in by_count.values()),
              "the fixture has no ties in word counts that first occurrence and alphabetical order tell apart")
        check("<unk>" in ref.counter, "the fixture's train split has no <unk> word")

        compare("default", FIX, work)
        compare("min_freq_2", FIX, work, min_freq=2)
        compare("max_size_20", FIX, work, max_size=20)
        compare("min_freq_3_max_size_50", FIX, work, min_freq=3, max_size=50)
        compare("max_size_0", FIX, work, max_size=0)
        compare("lower_case", FIX, work, lower_case=True)
        compare("skip_empty_lines", FIX, work, skip_empty=True)

        # The same text with every whitespace Python's str.split() knows, CRLF and lone-CR line ends, tabs,
        # a literal <eos> word, accented capitals, and a last line without a line end.
        edge = os.path.join(work, "edge")
        os.makedirs(edge)
        odd = ("\u00a0Caf\u00c9 \u3000UNTER\u00dcBER\u2003river\x1cthe\x1fthe\u2028<eos>\u0085"
               "\u00c5ngstr\u00f6m\tthe \u200bzero\u200bwidth\r\n"
               " = \u00c9cole = \rlone CR line\r\n\x0b\x0c\r\n")
        for s in SPLITS:
            text = open(os.path.join(FIX, "wiki.%s.tokens" % s), encoding="utf-8").read()
            with open(os.path.join(edge, "wiki.%s.tokens" % s), "w", encoding="utf-8", newline="") as f:
                f.write(odd + text + "the last line has no line end \u00c9")
        compare("edge_default", edge, work)
        compare("edge_lower_case", edge, work, lower_case=True)
        compare("edge_min_freq_2", edge, work, min_freq=2)

        # Every character Python lower-cases, each as a one-character word (a word-final capital sigma is
        # the one documented difference, so none of these words has a cased letter before its sigma).
        caps = os.path.join(work, "caps")
        os.makedirs(caps)
        cs = [chr(c) for c in range(0x110000)
              if not 0xD800 <= c < 0xE000 and chr(c).lower() != chr(c) and not chr(c).isspace()]
        check(len(cs) > 1000, "only %d characters change with lower()" % len(cs))
        for s in SPLITS:
            with open(os.path.join(caps, "wiki.%s.tokens" % s), "w", encoding="utf-8") as f:
                f.write(" ".join(cs) + "\n" + " ".join(reversed(cs)) + "\n")
        compare("every_capital_lower_case", caps, work, lower_case=True)

        # Without a <unk> word: words cut by min_freq (and unseen valid/test words) need one, added as id 1.
        nounk = os.path.join(work, "nounk")
        os.makedirs(nounk)
        for s in SPLITS:
            text = open(os.path.join(FIX, "wiki.%s.tokens" % s), encoding="utf-8").read()
            with open(os.path.join(nounk, "wiki.%s.tokens" % s), "w", encoding="utf-8") as f:
                f.write(text.replace("<unk>", "unknown"))
        _, vocab = compare("no_unk_word_min_freq_2", nounk, work, min_freq=2)
        check(vocab[1] == "<unk>", "no <unk> word and words cut: <unk> should be id 1, /vocab starts %r" % vocab[:3])

        # Every valid/test word seen in train and nothing cut: no <unk> at all (unk_id -1).
        closed = os.path.join(work, "closed")
        os.makedirs(closed)
        train = open(os.path.join(FIX, "wiki.train.tokens"), encoding="utf-8").read().replace("<unk>", "unknown")
        lines = train.splitlines(keepends=True)
        for s, part in zip(SPLITS, (lines, lines[10:20], lines[30:40])):
            with open(os.path.join(closed, "wiki.%s.tokens" % s), "w", encoding="utf-8") as f:
                f.write("".join(part))
        _, vocab = compare("closed_vocabulary", closed, work)
        check("<unk>" not in vocab, "a closed vocabulary got a <unk>")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS: test_prep_lm_vocab")


if __name__ == "__main__":
    main()
