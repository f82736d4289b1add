#!/usr/bin/env python3
"""An update's device work at a micro-batch too large to run here, from two runs that fit: the device-op
ledger's tables (HETSEQ_CUDA_LEDGER=1, docs/gpu.md "The device-operation ledger") of the same model at
micro-batches B1 and B2, extrapolated to B.

    python3 bench/gpu/ledger_scale.py LOG1 B1 LOG2 B2 --to B [--bandwidth-gbs GB/s] [--top K] [--exclude OP]...

Each op's calls and bytes per update are linear in the micro-batch at fixed shapes otherwise (the
parameters' share fixed, the activations' proportional): value(B) = value(B1) + (B - B1)·(value(B2) -
value(B1))/(B2 - B1). The ledger's counts are what the CUDA backend enqueues, the same on the emulated
device as on a GPU, so two small runs on the emulated device give a GPU-sized update's device ops and
the bytes hetseq's kernels declare. Printed: a markdown table of the ops by bytes at B (calls and GB per
update, the time those bytes take at --bandwidth-gbs, default 4800: an H200), and the totals. --exclude
leaves an op out where the runs made it (e.g. "to_half_kernel (parameter copy)", the one-time conversion of the parameters'
16-bit copy). bench/gpu/ledger_bert.sh makes the two runs for BERT.
"""
import argparse
import re
import sys

HEAD = re.compile(r"^\| device-op ledger over (\d+) update\(s\)(?: after the first \d+)?: (\d+) device ops")
ROW = re.compile(r"^\| (.+?)\s{2,}(kernel|library|copy)\s+(\d+)\s+[\d.]+\s+(\S+)\s+\S+\s*$")


def read(path):
    """{op: (kind, calls per update, bytes per update or None)} of the last ledger table in path."""
    table, updates = None, None
    for line in open(path, errors="replace"):
        h = HEAD.match(line)
        if h:
            table, updates = {}, int(h.group(1))
            continue
        r = ROW.match(line) if table is not None else None
        if r:
            total = r.group(4)
            if total.endswith("+?"):
                sys.exit("%s: %s was launched without a byte count: the extrapolation needs every op's bytes"
                         % (path, r.group(1).strip()))
            table[r.group(1).strip()] = (r.group(2), int(r.group(3)) / updates,
                                         None if total == "-" else int(total) / updates)
    if not table:
        sys.exit("%s: no device-op ledger table (run with HETSEQ_CUDA_LEDGER=1 on a CUDA or emulated device)" % path)
    return table


def main():
    ap = argparse.ArgumentParser(description="an update's device ops and bytes at a larger micro-batch")
    ap.add_argument("log1")
    ap.add_argument("b1", type=float)
    ap.add_argument("log2")
    ap.add_argument("b2", type=float)
    ap.add_argument("--to", type=float, required=True, help="the micro-batch to extrapolate to")
    ap.add_argument("--bandwidth-gbs", type=float, default=4800.0, help="memory bandwidth for the ms column")
    ap.add_argument("--top", type=int, default=0, help="ops listed (the rest in one line; 0: all)")
    ap.add_argument("--exclude", action="append", default=[], help="an op left out (repeatable)")
    a = ap.parse_args()
    if a.b1 == a.b2 or a.bandwidth_gbs <= 0 or a.top < 0:
        sys.exit("B1 and B2 must differ, --bandwidth-gbs be > 0 and --top >= 0")
    t1, t2 = read(a.log1), read(a.log2)
    if set(t1) != set(t2):
        sys.exit("the two runs ran other ops (only in %s: %s; only in %s: %s): not the same model and settings?" % (
            a.log1, ", ".join(sorted(set(t1) - set(t2))) or "-", a.log2, ", ".join(sorted(set(t2) - set(t1))) or "-"))
    a.exclude = [x for x in a.exclude if x in t1]  # an op the runs did not make has nothing to leave out
    f = (a.to - a.b1) / (a.b2 - a.b1)
    rows = []
    for op, (kind, c1, y1) in t1.items():
        if op in a.exclude:
            continue
        _, c2, y2 = t2[op]
        calls = c1 + f * (c2 - c1)
        size = None if y1 is None else y1 + f * (y2 - y1)
        rows.append((size or 0.0, op, kind, calls, size))
    rows.sort(key=lambda r: (-r[0], r[1]))
    total_bytes = sum(r[0] for r in rows)
    total_calls = sum(r[3] for r in rows)
    bw = a.bandwidth_gbs * 1e9
    out = ["## Device work per update at micro-batch %g (from %g and %g)" % (a.to, a.b1, a.b2), "",
           "%.1f device ops, %.4g GB (%.0f bytes) moved by hetseq's kernels and copies: %.4g ms at %g GB/s%s." % (
               total_calls, total_bytes / 1e9, total_bytes, 1e3 * total_bytes / bw, a.bandwidth_gbs,
               " (left out: %s)" % ", ".join(a.exclude) if a.exclude else ""), "",
           "| op | kind | calls | GB | ms |", "|---|---|---|---|---|"]
    shown, rest = (rows[:a.top], rows[a.top:]) if a.top else (rows, [])
    for size, op, kind, calls, s in shown:
        out.append("| %s | %s | %g | %s | %s |" % (op.replace("|", "\\|"), kind, round(calls, 2),
                                                  "-" if s is None else "%.4g" % (s / 1e9),
                                                  "-" if s is None else "%.4g" % (1e3 * s / bw)))
    if rest:
        rb = sum(r[0] for r in rest)
        out.append("| (the other %d ops) | | %g | %.4g | %.4g |" % (len(rest), round(sum(r[3] for r in rest), 2),
                                                                 rb / 1e9, 1e3 * rb / bw))
    print("\n".join(out))


if __name__ == "__main__":
    main()
