#!/usr/bin/env python3
"""Writes small, random but valid BERT pre-training shards exactly the way NVIDIA's
create_pretraining_data.py does (h5py create_dataset with compression='gzip', dtypes 'i4'/'i1', no
explicit chunks, so h5py picks its automatic thin chunks), independently of hetseq.

Each row: [CLS] A [SEP] B [SEP] with random WordPiece ids, 0-padded to L; segment ids 0 for the
first part, 1 for B; up to P masked positions sorted ascending, never [CLS]/[SEP], 0-padded, and the
original ids there; NSP label 0 or 1. Every 11th row (from row 5) also carries a stray entry after the
terminating 0 of its masked positions, which NVIDIA's reader never looks at (the list ends at the
first 0), with an id outside the vocabulary: a reader that ignores the cut returns wrong labels or
refuses the row.

usage: make_bert_shards.py OUT_DIR --prefix x --rows 37,5,50 --split training [--seq-len 32]
           [--max-pred 5] [--vocab 1000] [--seed 1] [--dump FILE]
  --rows: one shard per number: OUT_DIR/<prefix>_<split>_<i>.hdf5
  --dump: also FILE, the concatenation of every shard as little-endian
          int32 rows of [input_ids L | segment_ids L | input_mask L | labelled positions P (-1 padded)
          | their ids P (-1 padded) | nsp 1 | number of labelled positions 1], the masked-LM labels
          built as NVIDIA's run_pretraining.py does (positions up to the first 0)."""
import argparse
import os

import h5py
import numpy as np

CLS, SEP = 101, 102


def make_rows(rng, n, L, P, vocab):
    input_ids = np.zeros((n, L), np.int32)
    input_mask = np.zeros((n, L), np.int32)
    segment_ids = np.zeros((n, L), np.int32)
    positions = np.zeros((n, P), np.int32)
    ids = np.zeros((n, P), np.int32)
    nsp = rng.integers(0, 2, size=n).astype(np.int32)
    for r in range(n):
        length = int(rng.integers(5, L + 1))  # at least [CLS] a [SEP] b [SEP]
        len_a = int(rng.integers(1, length - 3))
        tokens = rng.integers(100, vocab, size=length)  # [UNK] and ordinary WordPiece ids
        if r % 7 == 3:
            tokens[1] = vocab - 1  # the largest legal id, sometimes masked
        tokens[0] = CLS
        tokens[1 + len_a] = SEP
        tokens[length - 1] = SEP
        seg = np.zeros(length, np.int32)
        seg[2 + len_a:] = 1
        candidates = [i for i in range(length) if tokens[i] not in (CLS, SEP)]
        rng.shuffle(candidates)
        k = min(P, max(1, int(round(length * 0.15))), len(candidates))
        chosen = sorted(candidates[:k])
        input_ids[r, :length] = tokens
        input_mask[r, :length] = 1
        segment_ids[r, :length] = seg
        positions[r, :k] = chosen
        ids[r, :k] = tokens[chosen]
        if r % 11 == 5 and k + 1 < P:
            # a stray entry after the terminating 0: NVIDIA stops at the first 0 and never sees it
            positions[r, k + 1] = chosen[0]
            ids[r, k + 1] = vocab + 5
    return input_ids, input_mask, segment_ids, positions, ids, nsp


def write_shard(path, arrays):
    input_ids, input_mask, segment_ids, positions, ids, nsp = arrays
    # NVIDIA create_pretraining_data.py, write_instance_to_example_file:
    with h5py.File(path, "w") as f:
        f.create_dataset("input_ids", data=input_ids, dtype="i4", compression="gzip")
        f.create_dataset("input_mask", data=input_mask, dtype="i1", compression="gzip")
        f.create_dataset("segment_ids", data=segment_ids, dtype="i1", compression="gzip")
        f.create_dataset("masked_lm_positions", data=positions, dtype="i4", compression="gzip")
        f.create_dataset("masked_lm_ids", data=ids, dtype="i4", compression="gzip")
        f.create_dataset("next_sentence_labels", data=nsp, dtype="i1", compression="gzip")


def reference_rows(arrays, L, P):
    """NVIDIA run_pretraining.py: index = first 0 in masked_lm_positions (or P); labels there."""
    input_ids, input_mask, segment_ids, positions, ids, nsp = arrays
    n = input_ids.shape[0]
    out = np.full((n, 3 * L + 2 * P + 2), -1, np.int32)
    for r in range(n):
        index = P
        zeros = np.nonzero(positions[r] == 0)[0]
        if len(zeros):
            index = int(zeros[0])
        out[r, 0:L] = input_ids[r]
        out[r, L:2 * L] = segment_ids[r]
        out[r, 2 * L:3 * L] = input_mask[r]
        out[r, 3 * L:3 * L + index] = positions[r, :index]
        out[r, 3 * L + P:3 * L + P + index] = ids[r, :index]
        out[r, 3 * L + 2 * P] = nsp[r]
        out[r, 3 * L + 2 * P + 1] = index
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--prefix", default="x")
    ap.add_argument("--split", default="training")
    ap.add_argument("--rows", required=True)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--max-pred", type=int, default=5)
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dump")
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    os.makedirs(a.out_dir, exist_ok=True)
    refs = {}
    for i, n in enumerate(int(x) for x in a.rows.split(",")):
        arrays = make_rows(rng, n, a.seq_len, a.max_pred, a.vocab)
        name = "%s_%s_%d.hdf5" % (a.prefix, a.split, i)
        write_shard(os.path.join(a.out_dir, name), arrays)
        refs[name] = reference_rows(arrays, a.seq_len, a.max_pred)
    if a.dump:  # in HetSeq's file order: plain sorted names, so x_10 comes before x_2
        np.concatenate([refs[k] for k in sorted(refs)]).astype("<i4").tofile(a.dump)


if __name__ == "__main__":
    main()
