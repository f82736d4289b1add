#!/usr/bin/env python3
"""A user repacks NVIDIA-format BERT shards (gzip, h5py's thin automatic chunks) with
`hetseq prep repack` on 2 ranks, then opens the result with h5py: the same datasets, the same types
(byte order included) and the same values, in chunks of rows_per_chunk x all columns, uncompressed or
shuffle + gzip as asked; no temporary file is left; a non-HDF5 file in the directory is skipped. hetseq's
reader then reads the repacked shards exactly as the originals, without the slow-layout warning. A
broken shard or a bad option is one clear message and no output file."""
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

NAMES = ["input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids", "next_sentence_labels"]
HERE = os.path.dirname(os.path.abspath(__file__))
HETSEQ = os.environ.get("HETSEQ", "hetseq")
BUILD = os.environ.get("top_builddir", ".")
MPIRUN = os.environ.get("MPIRUN", "mpirun")


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


def write_shards(out, split, rows, seed, ref):
    subprocess.run([sys.executable, os.path.join(HERE, "make_bert_shards.py"), out, "--split", split, "--rows", rows,
                    "--seq-len", "128", "--max-pred", "20", "--vocab", "30522", "--seed", str(seed), "--dump", ref],
                   check=True)


def compare(orig, repacked, rows_per_chunk, gzip):
    with h5py.File(orig, "r") as a, h5py.File(repacked, "r") as b:
        check(sorted(a.keys()) == sorted(b.keys()), "%s: datasets %s, the original has %s" %
              (repacked, sorted(b.keys()), sorted(a.keys())))
        for k in NAMES:
            x, y = a[k], b[k]
            check(x.dtype == y.dtype, "%s/%s: dtype %s, the original is %s" % (repacked, k, y.dtype, x.dtype))
            check(x.shape == y.shape, "%s/%s: shape %s vs %s" % (repacked, k, y.shape, x.shape))
            check(np.array_equal(x[()], y[()]), "%s/%s: values differ from the original" % (repacked, k))
            want = (min(rows_per_chunk, x.shape[0]),) + x.shape[1:]
            check(y.chunks == want, "%s/%s: chunks %s, expected %s" % (repacked, k, y.chunks, want))
            if gzip:
                check(y.compression == "gzip" and y.compression_opts == gzip and y.shuffle,
                      "%s/%s: expected shuffle + gzip %d, got %s %s shuffle=%s" %
                      (repacked, k, gzip, y.compression, y.compression_opts, y.shuffle))
            else:
                check(y.compression is None, "%s/%s: compressed (%s), expected none" % (repacked, k, y.compression))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        write_shards("in", "training", "300,1,2000,45,3,17,1,2,60,5,9,11", 1, "train.ref")
        write_shards("in", "test", "50,20", 2, "test.ref")
        with open("in/vocab.txt", "w") as f:
            f.write("[PAD]\n")
        shards = sorted(n for n in os.listdir("in") if n.endswith(".hdf5"))
        with h5py.File("in/x_training_2.hdf5", "r") as f:
            check(f["input_ids"].chunks[1] < 128, "the writer should have made thin chunks, got %s" %
                  (f["input_ids"].chunks,))

        # the default: 64-row chunks, uncompressed
        r = mpi(2, HETSEQ, "prep", "repack", "--in", "in", "--out", "out")
        check(r.returncode == 0, "repack failed:\n" + r.stdout + r.stderr)
        check("skipping in/vocab.txt (not an HDF5 file)" in r.stdout, "vocab.txt not reported:\n" + r.stdout)
        check("| prep repack: 14 files, 2524 rows, chunks of 64 rows, uncompressed -> out" in r.stdout,
              "no summary line:\n" + r.stdout)
        check(sorted(os.listdir("out")) == shards, "out holds %s" % sorted(os.listdir("out")))
        for n in shards:
            compare("in/" + n, "out/" + n, 64, 0)

        # rows_per_chunk 100 (not a divisor of the file sizes) with shuffle + gzip 6, on 3 ranks
        r = mpi(3, HETSEQ, "prep", "repack", "--in", "in", "--out", "gz", "--rows-per-chunk", "100", "--gzip", "6")
        check(r.returncode == 0, "repack --gzip 6 failed:\n" + r.stdout + r.stderr)
        for n in shards:
            compare("in/" + n, "gz/" + n, 100, 6)

        # one file by path
        r = mpi(1, HETSEQ, "prep", "repack", "--in", "in/x_test_1.hdf5", "--out", "one", "--rows-per-chunk", "8")
        check(r.returncode == 0 and os.listdir("one") == ["x_test_1.hdf5"], "single file:\n" + r.stdout + r.stderr)
        compare("in/x_test_1.hdf5", "one/x_test_1.hdf5", 8, 0)

        # hetseq reads the repacked shards value for value, with no slow-layout warning
        prog = os.path.join(BUILD, "tests", "mpi", "test_bert_shards")
        for d in ("out", "gz"):
            r = mpi(2, prog, "verify", d, "training", "0", "128", "20", "30522", "train.ref")
            check(r.returncode == 0 and "ok: 2 rank(s): 2454 rows of 12 file(s)" in r.stdout,
                  "reading %s:\n%s%s" % (d, r.stdout, r.stderr))
            check("warning" not in r.stderr, "%s: warning after repack:\n%s" % (d, r.stderr))
        r = mpi(2, prog, "verify", "out", "test", "0", "128", "20", "30522", "test.ref")
        check(r.returncode == 0, "reading out/ test split:\n" + r.stdout + r.stderr)

        # a broken shard: one message naming file and dataset; nothing left in --out
        os.mkdir("broken")
        with h5py.File("in/x_test_0.hdf5", "r") as a, h5py.File("broken/x_test_0.hdf5", "w") as b:
            for k in NAMES:
                if k != "next_sentence_labels":
                    b.create_dataset(k, data=a[k][()], compression="gzip")
        r = mpi(2, HETSEQ, "prep", "repack", "--in", "broken", "--out", "broken_out")
        check(r.returncode != 0 and "broken/x_test_0.hdf5: dataset next_sentence_labels is missing" in r.stderr,
              "missing dataset:\n" + r.stdout + r.stderr)
        check(os.listdir("broken_out") == [], "a failed repack left %s" % os.listdir("broken_out"))
        r = mpi(2, HETSEQ, "prep", "repack", "--in", "in", "--out", "x", "--gzip", "10")
        check(r.returncode != 0 and "--gzip 10: expected a whole number from 0 to 9" in r.stderr,
              "bad --gzip:\n" + r.stdout + r.stderr)
        r = mpi(2, HETSEQ, "prep", "repack", "--in", "nowhere", "--out", "x")
        check(r.returncode != 0 and "cannot read --in nowhere: No such file or directory" in r.stderr,
              "missing --in:\n" + r.stdout + r.stderr)
    print("PASS: repacked shards equal the originals (h5py), chunk shapes and filters as asked, read back by hetseq")


if __name__ == "__main__":
    main()
