#!/usr/bin/env python3
"""Summarise an Nsight Compute per-SASS-instruction export (docs/gpu.md).

    ncu --clock-control none --section SourceCounters --section WarpStateStats \\
        --page source --print-source sass --csv -k regex:<kernel> \\
        --launch-skip 3 --launch-count 1 <command> > out.csv
    python3 scripts/ncu-sass-top.py out.csv [N]      # out.csv.xz works too

Prints the stall reasons' shares of all samples, the N instructions (default
40) holding most samples (index in the export, samples, share, SASS, the two
main reasons), and the instructions with excess L2 sectors and excess shared
wavefronts. Lines before the CSV header (the profiled program's own output)
are skipped.
"""

import csv
import io
import lzma
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"


def read_rows(path):
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt") as f:
        lines = f.read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"Address"')), None)
    if start is None:
        sys.exit(f"{path}: no per-instruction table (was ncu run with --page source --csv?)")
    return list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))


def num(row, key):
    try:
        return float(row[key])
    except (KeyError, TypeError, ValueError):
        return 0.0


def excess(rows, key, total, ideal, label):
    hits = sorted(enumerate(rows), key=lambda x: -num(x[1], key))
    hits = [(i, r) for i, r in hits if num(r, key) > 0][:12]
    if hits:
        print(f"--- {label} (index, SASS, excess, total, ideal)")
    for i, r in hits:
        print(i, r["Source"].strip()[:60], r[key], r[total], r[ideal])


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    rows = read_rows(sys.argv[1])
    top_n = int(sys.argv[2]) if len(sys.argv) == 3 else 40
    total = sum(num(r, SAMPLES) for r in rows) or 1.0
    print("instructions", len(rows), "samples", int(total))
    reasons = [k for k in rows[0] if k.startswith("stall_") and "Not Issued" not in k]
    shares = sorted(((sum(num(r, k) for r in rows), k) for k in reasons), reverse=True)
    print("  ".join(f"{k[6:]} {v / total * 100:.1f} %" for v, k in shares[:8]))
    for i, r in sorted(enumerate(rows), key=lambda x: -num(x[1], SAMPLES))[:top_n]:
        s = num(r, SAMPLES)
        main_two = sorted(((num(r, k), k) for k in reasons), reverse=True)[:2]
        why = " ".join(f"{k[6:]}={v:.0f}" for v, k in main_two)
        print(f"{i:5d} {s:5.0f} {s / total * 100:4.1f}%  {r['Source'].strip()[:60]:60s} {why}")
    excess(rows, "L2 Theoretical Sectors Global Excessive", "L2 Theoretical Sectors Global",
           "L2 Theoretical Sectors Global Ideal", "excess L2 sectors")
    excess(rows, "L1 Wavefronts Shared Excessive", "L1 Wavefronts Shared",
           "L1 Wavefronts Shared Ideal", "excess shared wavefronts")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        pass
