"""Does a profile's timing level drift with the order its samples were timed in?

    .venv/bin/python benchmarks/gpu/profile_drift.py profiles/nvidia-h100/broad-s31-b16384 [--chunk 250]

Samples are timed in index order within a sitting, so a sample's index is its place in time. This fits every
record's forward and backward (least squares, all records) on what the broad design sets per sample: batch x
summed pooling (lookups), lookups x dim, tables, batch x summed dims, and lookups times the sample's mean
skew, log10 rows, dim, row-cut share, bag-size cv and log10 vocabulary; then prints, per chunk of sample
indices, the median of measured / fitted. A design drawn evenly over the index (its median features are
printed for the two halves) leaves the chunks level (below 1: the fit is of the mean, the costs are
skewed); a machine whose speed changes over a sitting does not.
No measurement happens here (docs/benchmarks.md, "Stop 35").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.hardware.jsonl import read_jsonl
from autoshard.hardware.profile_records import record_files

FEATURES = ("mean pooling", "alpha", "log10 rows", "dim", "row-cut share", "pooling cv", "log10 vocab")
"""The per-sample design quantities printed for the two halves (each a mean over the sample's tables)."""


def _design(r: dict) -> list[float]:
    specs = r["table_specs"]
    ranges = r.get("row_ranges") or [[0, None]] * len(specs)
    return [float(np.mean([t["pooling_factor"] for t in specs])),
            float(np.mean([t["lookups"].get("alpha", 0.0) for t in specs])),
            float(np.mean([np.log10(t["rows"]) for t in specs])), float(np.mean(r["dims"])),
            float(np.mean([1.0 if rr and (rr[0] or rr[1] is not None) else 0.0 for rr in ranges])),
            float(np.mean([t["lookups"].get("pooling_cv", 0.0) for t in specs])),
            float(np.mean([np.log10(max(1, t["lookups"].get("vocab", 1))) for t in specs]))]


def analyse(records: list[dict], chunk: int) -> dict:
    index = np.array([int(str(r["sample_id"]).rsplit("-", 1)[1]) for r in records])
    design = np.array([_design(r) for r in records])
    base = []
    for r in records:
        batch, pooling = r["batch_size"], [t["pooling_factor"] for t in r["table_specs"]]
        wide = batch * sum(p * d for p, d in zip(pooling, r["dims"]))
        base.append([1.0, batch * sum(pooling) / 1e6, wide / 1e7, len(pooling), batch * sum(r["dims"]) / 1e6])
    x = np.array(base)
    x = np.column_stack([x, design * x[:, [1]]])
    out: dict = {"n": len(records), "chunks": []}
    ratios = []
    for head in ("fwd_ms", "bwd_ms"):
        y = np.array([r[head] for r in records])
        w, *_ = np.linalg.lstsq(x, y, rcond=None)
        ratios.append(y / np.maximum(x @ w, 1e-3))
    for lo in range(0, int(index.max()) + 1, chunk):
        sel = (index >= lo) & (index < lo + chunk)
        if sel.any():
            out["chunks"].append((lo, int(sel.sum()), float(np.median(ratios[0][sel])),
                                  float(np.median(ratios[1][sel]))))
    half = np.median(index)
    out["halves"] = [np.median(design[index < half], axis=0).tolist(),
                     np.median(design[index >= half], axis=0).tolist()]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", help="a broad profile directory (autoshard profile --design broad -o DIR)")
    ap.add_argument("--chunk", type=int, default=250, help="sample indices per row (default 250)")
    args = ap.parse_args(argv)
    try:
        if args.chunk < 1:
            raise AutoshardError(f"--chunk {args.chunk} must be >= 1")
        files = record_files(args.profile) if Path(args.profile).is_dir() else []
        records = [r for p in files for r in read_jsonl(p)]
        if not records or "table_specs" not in records[0]:
            raise AutoshardError(f"{args.profile}: no broad-design records (autoshard profile --design broad "
                                 "-o DIR makes them)")
    except AutoshardError as e:
        print(f"profile_drift: error: {e}", file=sys.stderr)
        return 2
    result = analyse(records, args.chunk)
    print(f"{result['n']} records; measured / fitted (all records), median per chunk of sample indices")
    print(f"{'samples':>12} {'n':>5} {'fwd':>6} {'bwd':>6}")
    for lo, n, fwd, bwd in result["chunks"]:
        print(f"{f'{lo}-{lo + args.chunk - 1}':>12} {n:>5} {fwd:>6.2f} {bwd:>6.2f}")
    print("design medians, first half / second half of the indices: " + "; ".join(
        f"{name} {a:.3g} / {b:.3g}" for name, a, b in zip(FEATURES, *result["halves"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
