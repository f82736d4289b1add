#!/usr/bin/env python3
"""A user makes BERT shards from the fixture text with `hetseq prep bert` on 2 ranks and opens them
with h5py: NVIDIA's six datasets with NVIDIA's on-disk types (little-endian int32 / int8) and shapes
[N,L], [N,P], [N]; row chunks (min(N,256) x all columns), shuffle + gzip 1. Every row is a BERT pair:
input_mask is 1 then 0, [CLS] first, exactly two [SEP] once the masked tokens are put back, segment ids
0 through the first [SEP] and 1 through the second, zero padding everywhere after; masked positions
ascending, never [CLS]/[SEP], zero-padded with their ids, as many as Google's rule gives
(min(max_pred, max(1, round(n * masked_lm_prob))), ties rounded to even as Python 3's round). Some
segments are cut at the front (truncation pops the front or the back at random). The text of each
segment is a run of one document of the corpus (checked with an independent word splitter), B follows
A in the same document when next_sentence_label is 0 and comes from another document when it is 1."""
import os
import re
import subprocess
import sys
import tempfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "fixtures")
HETSEQ = os.environ.get("HETSEQ", "hetseq")
MPIRUN = os.environ.get("MPIRUN", "mpirun")
NAMES = {"input_ids": ("<i4", 2, "L"), "input_mask": ("|i1", 2, "L"), "segment_ids": ("|i1", 2, "L"),
         "masked_lm_positions": ("<i4", 2, "P"), "masked_lm_ids": ("<i4", 2, "P"),
         "next_sentence_labels": ("|i1", 1, None)}
L, P, PROB = 50, 20, 0.25  # n * 0.25 is exact, a tie (x.5) for n = 4k + 2: full rows (n = L = 50) too


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def mpi(n, *args):
    cmd = ["timeout", "-k", "5", "120", MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(n),
           "--mca", "btl", "self,vader"] + list(args)
    return subprocess.run(cmd, capture_output=True, text=True)


def corpus_documents():
    """Documents of the fixture corpus as lists of lower-case words (blank and '%' lines end one)."""
    docs = []
    for name in sorted(os.listdir(os.path.join(FIX, "prep_corpus"))):
        cur = []
        for line in open(os.path.join(FIX, "prep_corpus", name), encoding="utf-8"):
            s = line.strip()
            if s in ("", "%"):
                if cur:
                    docs.append(cur)
                cur = []
            else:
                cur += re.findall(r"[a-z0-9]+|[^\sa-z0-9]", s.lower())
        if cur:
            docs.append(cur)
    return docs


def words_of(tokens, vocab):
    """WordPiece tokens back to words; a segment cut inside a word loses that word at either end."""
    words = []
    for t in tokens:
        piece = vocab[t]
        if piece.startswith("##") and words:
            words[-1] += piece[2:]
        else:
            words.append(piece)
    return words[1:-1]


def find_run(words, docs):
    """Documents holding `words` as a contiguous run."""
    hits = set()
    n = len(words)
    for d, doc in enumerate(docs):
        for i in range(len(doc) - n + 1):
            if doc[i:i + n] == words:
                hits.add(d)
                break
    return hits


def main():
    vocab = [l.rstrip("\n") for l in open(os.path.join(FIX, "prep_corpus_vocab.txt"), encoding="utf-8")]
    V = len(vocab)
    CLS, SEP, MASK = vocab.index("[CLS]"), vocab.index("[SEP]"), vocab.index("[MASK]")
    docs = corpus_documents()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "shards")
        r = mpi(2, HETSEQ, "prep", "bert", "--corpus", os.path.join(FIX, "prep_corpus"), "--vocab",
                os.path.join(FIX, "prep_corpus_vocab.txt"), "--out", out, "--seq-len", str(L), "--max-pred", str(P),
                "--masked-lm-prob", str(PROB), "--dupe-factor", "2", "--shards", "2", "--valid-fraction", "0.25",
                "--prefix", "fixture", "--seed", "5")
        check(r.returncode == 0, "prep bert failed:\n" + r.stdout + r.stderr)
        files = sorted(os.listdir(out))
        check(files == ["fixture_test_0.hdf5", "fixture_training_0.hdf5", "fixture_training_1.hdf5"],
              "output files %s" % files)
        rows = nsp_random = segs = ties = front_cuts = 0
        for name in files:
            with h5py.File(os.path.join(out, name), "r") as f:
                check(sorted(f.keys()) == sorted(NAMES), "%s: datasets %s" % (name, sorted(f.keys())))
                n = f["input_ids"].shape[0]
                check(n > 0, name + ": no rows")
                for k, (dt, nd, width) in NAMES.items():
                    ds = f[k]
                    check(ds.dtype.str == dt, "%s/%s: dtype %s, NVIDIA writes %s" % (name, k, ds.dtype.str, dt))
                    shape = (n, {"L": L, "P": P}[width]) if nd == 2 else (n,)
                    check(ds.shape == shape, "%s/%s: shape %s, expected %s" % (name, k, ds.shape, shape))
                    chunk = (min(n, 256),) + shape[1:]
                    check(ds.chunks == chunk, "%s/%s: chunks %s, expected rows %s" % (name, k, ds.chunks, chunk))
                    check(ds.compression == "gzip" and ds.compression_opts == 1 and ds.shuffle,
                          "%s/%s: expected shuffle + gzip 1" % (name, k))
                ids = f["input_ids"][:]
                mask = f["input_mask"][:]
                seg = f["segment_ids"][:]
                pos = f["masked_lm_positions"][:]
                lab = f["masked_lm_ids"][:]
                nsp = f["next_sentence_labels"][:]
            for i in range(n):
                m = int(mask[i].sum())
                where = "%s row %d" % (name, i)
                check(m >= 5 and (mask[i, :m] == 1).all() and (mask[i, m:] == 0).all(), where + ": input_mask")
                check((ids[i, m:] == 0).all() and (seg[i, m:] == 0).all(), where + ": padding is not 0")
                check(ids[i].min() >= 0 and ids[i].max() < V, where + ": id outside the vocabulary")
                k = int((pos[i] != 0).sum())
                check((pos[i, :k] != 0).all() and (pos[i, k:] == 0).all() and (lab[i, k:] == 0).all(),
                      where + ": masked positions are not zero-padded at the end")
                check((np.diff(pos[i, :k]) > 0).all(), where + ": positions not ascending")
                check(k == min(P, max(1, round(m * PROB)), m - 3), "%s: %d masked of %d tokens" % (where, k, m))
                ties += (m * PROB) % 1 == 0.5 and round(m * PROB) < P
                orig = ids[i, :m].copy()
                orig[pos[i, :k]] = lab[i, :k]
                check(orig[0] == CLS, where + ": [CLS] is not first")
                seps = np.nonzero(orig == SEP)[0]
                check(len(seps) == 2 and seps[1] == m - 1, where + ": expected two [SEP], the last at the end")
                check(not np.isin(pos[i, :k], [0, seps[0], m - 1]).any(), where + ": [CLS]/[SEP] masked")
                expect_seg = np.array([0] * (seps[0] + 1) + [1] * (m - seps[0] - 1))
                check((seg[i, :m] == expect_seg).all(), where + ": segment ids")
                check(nsp[i] in (0, 1), where + ": next_sentence_label")
                # truncation pops from the front too: a segment then may start inside a word
                front_cuts += vocab[orig[1]].startswith("##") + vocab[orig[seps[0] + 1]].startswith("##")
                # the segments' text (inner words: truncation may cut the words at the ends)
                a_words = words_of(orig[1:seps[0]], vocab)
                b_words = words_of(orig[seps[0] + 1:m - 1], vocab)
                da, db = find_run(a_words, docs), find_run(b_words, docs)
                check(da and db, where + ": a segment is not a run of one document: %s | %s" % (a_words, b_words))
                if len(a_words) >= 6 and len(b_words) >= 6:  # long enough to name its document
                    segs += 1
                    if nsp[i] == 0:
                        check(da & db, where + ": IsNext but A and B come from different documents")
                    elif len(da) == 1 and len(db) == 1:
                        check(da != db, where + ": random next from the same document")
                rows += 1
                nsp_random += int(nsp[i])
        check(front_cuts > 0, "no segment was truncated at its front (truncate_seq_pair pops front or back)")
        check(ties > 10, "only %d rows where round(n * prob) is a tie" % ties)
        check(0.3 < nsp_random / rows < 0.8, "next_sentence_labels: %d of %d random" % (nsp_random, rows))
        print("PASS: %d rows in %d shards: NVIDIA datasets/dtypes/shapes, BERT pairs (%d with document checks), "
              "%d random next, %d masked counts rounded from a tie" % (rows, len(files), segs, nsp_random, ties))


if __name__ == "__main__":
    main()
