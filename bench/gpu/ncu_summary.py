#!/usr/bin/env python3
"""Where an update's GPU time goes: Nsight Compute's CSV (ncu --csv) reduced to one line per kernel.

    python3 bench/gpu/ncu_summary.py KERNELS.csv [--updates N] [--top K] [--peak-gbs GB/s] [--out FILE]

KERNELS.csv is what `ncu --csv` writes (with --log-file, or its standard output: lines that are not the
CSV table, the program's log and ncu's ==PROF== lines, are skipped), either of its pages:
  details (the default)  one row per kernel and metric: "ID", "Kernel Name", "Metric Name", "Metric Unit",
                         "Metric Value" among the columns;
  raw (--page raw)       one row per kernel, a column per metric, the units in the row under the header.
Needed: gpu__time_duration.sum; optional: dram__bytes_read.sum and dram__bytes_write.sum (the bytes a
kernel moved to and from device memory, for its bandwidth). Units are read from the file (ns, us, ms, s
or nsecond..second; byte, Kbyte, Mbyte, Gbyte as powers of 1000, KiB..GiB of 1024); values may carry
thousands separators.

Kernels group by name: the kernel's function without its parameter list (and without the return type of
a demangled name); --templates keeps template arguments apart, else they group under one name. With
--updates N (the updates the file holds, e.g. HETSEQ_PROFILE_UPDATES=20-21 is 2) the table is per update.
Printed: a markdown table, kernels by GPU time: launches, time, share of the profiled time, mean time per
launch, and where the DRAM bytes are in the file, the achieved bandwidth (bytes / kernel time) and, with
--peak-gbs, its fraction of the GPU's peak (docs/gpu.md: memory-bound kernels are judged at >= 70 %).
Exit status 1 when the file holds no kernel with a duration.
"""
import argparse
import csv
import re
import sys
from collections import OrderedDict

TIME = "gpu__time_duration.sum"
READ, WRITE = "dram__bytes_read.sum", "dram__bytes_write.sum"
SECONDS = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3, "msecond": 1e-3, "s": 1.0,
           "second": 1.0}
BYTES = {"byte": 1.0, "B": 1.0, "Kbyte": 1e3, "KB": 1e3, "Mbyte": 1e6, "MB": 1e6, "Gbyte": 1e9, "GB": 1e9,
         "Tbyte": 1e12, "TB": 1e12, "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30}


def number(text):
    """A metric value as ncu prints it ("1,234.5", "12"); None for "n/a" and the like."""
    t = text.strip().replace(",", "")
    try:
        return float(t)
    except ValueError:
        return None


def scaled(metric, value, unit, where):
    """value in seconds (the duration) or bytes (DRAM metrics)."""
    table = SECONDS if metric == TIME else BYTES
    if unit not in table:
        sys.exit("%s: unit '%s' of %s not understood (expected one of %s)" % (where, unit, metric, ", ".join(table)))
    return value * table[unit]


def kernel_group(name, templates):
    """The name a kernel is counted under: 'void f<T>(float const*, int)' -> 'f<T>' or 'f'."""
    n = name.strip()
    if n.endswith(")"):  # a demangled name: drop the parameter list (balanced parentheses from the end)
        depth = 0
        for i in range(len(n) - 1, -1, -1):
            depth += n[i] == ")"
            depth -= n[i] == "("
            if depth == 0:
                n = n[:i].rstrip()
                break
    depth, cut = 0, 0  # drop a return type: the last space outside template brackets
    for i, c in enumerate(n):
        depth += c == "<"
        depth -= c == ">"
        if c == " " and depth == 0:
            cut = i + 1
    n = n[cut:]
    if not templates and "<" in n:
        n = n[:n.index("<")]
    return n or name


def read_csv(path):
    """{kernel id: {"name": NAME, METRIC: value in seconds or bytes}} from either page of ncu's CSV."""
    lines = open(path, newline="", errors="replace").read().splitlines()
    start = next((i for i, x in enumerate(lines) if x.startswith('"ID",')), None)
    if start is None:
        sys.exit("%s: no ncu CSV table (a line starting with \"ID\",): was it written with ncu --csv?" % path)
    header = next(csv.reader([lines[start]]))
    rows = [r for r in csv.reader(x for x in lines[start + 1:] if x.startswith('"')) if len(r) == len(header)]
    col = {h: i for i, h in enumerate(header)}
    kernels = OrderedDict()
    name_col = col.get("Kernel Name", col.get("Function Name"))
    if name_col is None:
        sys.exit("%s: the CSV has no \"Kernel Name\" column" % path)
    if "Metric Name" in col:  # details page
        for n, r in enumerate(rows, start + 2):
            metric = r[col["Metric Name"]]
            if metric not in (TIME, READ, WRITE):
                continue
            k = kernels.setdefault(r[col["ID"]], {"name": r[name_col]})
            v = number(r[col["Metric Value"]])
            if v is not None:
                k[metric] = scaled(metric, v, r[col["Metric Unit"]].strip(), "%s line %d" % (path, n))
    else:  # raw page: the first row under the header holds the units (its ID cell empty)
        units = rows[0] if rows and not rows[0][col["ID"]].strip() else None
        if units is None:
            sys.exit("%s: a raw-page CSV without its row of units" % path)
        for n, r in enumerate(rows[1:], start + 3):
            k = kernels.setdefault(r[col["ID"]], {"name": r[name_col]})
            for metric in (TIME, READ, WRITE):
                if metric in col:
                    v = number(r[col[metric]])
                    if v is not None:
                        k[metric] = scaled(metric, v, units[col[metric]].strip(), "%s line %d" % (path, n))
    return kernels


def summarize(kernels, updates, top, peak_gbs, templates, source):
    groups = OrderedDict()
    for k in kernels.values():
        if TIME not in k:
            continue
        g = groups.setdefault(kernel_group(k["name"], templates), {"launches": 0, "seconds": 0.0, "bytes": 0.0,
                                                                   "bytes_seconds": 0.0})
        g["launches"] += 1
        g["seconds"] += k[TIME]
        if READ in k or WRITE in k:
            g["bytes"] += k.get(READ, 0.0) + k.get(WRITE, 0.0)
            g["bytes_seconds"] += k[TIME]
    total = sum(g["seconds"] for g in groups.values())
    if not groups or total <= 0:
        return None
    has_bytes = any(g["bytes_seconds"] > 0 for g in groups.values())
    per = "per update" if updates > 1 else ("in the update" if updates == 1 else "in the file")
    u = float(max(updates, 1))
    launches = sum(g["launches"] for g in groups.values())
    out = ["## GPU time by kernel (Nsight Compute: %s)" % source, "",
           "%d kernel launches, %.3f ms of GPU time %s%s; %d kernels by name." % (
               launches / u, 1e3 * total / u, per, " (%d updates profiled)" % updates if updates > 1 else "",
               len(groups)), ""]
    head = "| kernel | launches | ms | share % | us / launch |"
    rule = "|---|---|---|---|---|"
    if has_bytes:
        head += " DRAM GB/s |" + (" % of peak |" if peak_gbs else "")
        rule += "---|" + ("---|" if peak_gbs else "")
    out += [head, rule]
    ordered = sorted(groups.items(), key=lambda kv: -kv[1]["seconds"])
    shown, rest = ordered[:top] if top else ordered, ordered[top:] if top else []
    if rest:
        r = {"launches": sum(g["launches"] for _, g in rest), "seconds": sum(g["seconds"] for _, g in rest),
             "bytes": sum(g["bytes"] for _, g in rest), "bytes_seconds": sum(g["bytes_seconds"] for _, g in rest)}
        shown = shown + [("(the other %d kernels)" % len(rest), r)]
    for name, g in shown:
        line = "| %s | %g | %.3f | %.1f | %.1f |" % (name.replace("|", "\\|"), round(g["launches"] / u, 2),
                                                    1e3 * g["seconds"] / u, 100.0 * g["seconds"] / total,
                                                    1e6 * g["seconds"] / g["launches"])
        if has_bytes:
            gbps = g["bytes"] / g["bytes_seconds"] / 1e9 if g["bytes_seconds"] > 0 else None
            line += " %s |" % ("n/a" if gbps is None else "%.0f" % gbps)
            if peak_gbs:
                line += " %s |" % ("n/a" if gbps is None else "%.0f" % (100.0 * gbps / peak_gbs))
        out.append(line)
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description="GPU time by kernel from Nsight Compute's CSV (ncu --csv)")
    ap.add_argument("csv")
    ap.add_argument("--updates", type=int, default=0, help="the updates the file holds: the table per update")
    ap.add_argument("--top", type=int, default=30, help="kernels listed (the rest in one line; 0: all)")
    ap.add_argument("--peak-gbs", type=float, help="the GPU's memory bandwidth, GB/s: bandwidth as a fraction of it")
    ap.add_argument("--templates", action="store_true", help="keep kernels with other template arguments apart")
    ap.add_argument("--out", help="also write the table to this file")
    a = ap.parse_args()
    if a.updates < 0 or a.top < 0 or (a.peak_gbs is not None and a.peak_gbs <= 0):
        sys.exit("--updates and --top take a count >= 0, --peak-gbs a bandwidth > 0")
    md = summarize(read_csv(a.csv), a.updates, a.top, a.peak_gbs, a.templates, re.sub(r".*/", "", a.csv))
    if md is None:
        sys.exit("%s: no kernel with %s (profile with ncu --metrics %s)" % (a.csv, TIME, TIME))
    print(md, end="")
    if a.out:
        with open(a.out, "w") as f:
            f.write(md)


if __name__ == "__main__":
    main()
