"""The planning model's error on a bench run's devices by the pooling of the hottest table each holds: does
the model price the devices a plan's step waits for as well as the rest?

Run: .venv/bin/python benchmarks/hot_device_error.py RESULTS [RESULTS ...] [--bands 30,50,70,90]

RESULTS: bench results files (``DIR/bench/results.json`` or gzipped in ``benchmarks/runs/``). Every device
of every measured plan but TorchRec's (its plans are priced by the same model, but planned by another) is
one row: the largest pooling factor among its shards (a row range counts its share of the table's lookups)
and measured / predicted forward and backward (the median of the rounds the run kept). Printed per file and
per band of that pooling: the devices and the geometric means of measured / predicted forward and backward.
A level common to every band is the host's speed against the profile's; a band apart from the rest is an
error a planner balancing the model's prices feels, because the step waits for the slowest device.

Why (docs/benchmarks.md, "Stop 92"): on DLRM-100 (8) the stop-90 defaults lost one task to lookup_greedy,
the device holding its pooling-92 table measuring 1.40-1.43x its predicted backward against 1.18-1.30x on
the others. Nothing is planned or measured.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys

from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.pipeline.results import TaskResult

UNPLANNED = ("torchrec",)
"""Rows left out: plans the autoshard planners did not make."""


def device_rows(bench: dict) -> list[tuple[float, float, float]]:
    """(hottest pooling, log measured / predicted fwd, the same bwd) of every device of every measured plan
    with a prediction, TorchRec's left out."""
    rows = []
    for raw in bench.get("tasks") or []:
        result = TaskResult.from_json(raw)
        tables = result.task.tables
        for r in result.results:
            if r.algorithm in UNPLANNED or not (r.ok and r.plan and r.measured and r.predicted):
                continue
            for d, shards in enumerate(r.plan.device_shards(result.task)):
                pd, md = r.predicted.devices[d], r.measured.devices[d]
                if not shards or min(pd.fwd_ms, pd.bwd_ms, md.fwd_ms, md.bwd_ms) <= 0:
                    continue
                hot = max(tables[s.table].pooling_factor * s.row_fraction(tables[s.table].rows)
                          for s in shards)
                rows.append((hot, math.log(md.fwd_ms / pd.fwd_ms), math.log(md.bwd_ms / pd.bwd_ms)))
    return rows


def band_table(rows: list[tuple[float, float, float]],
               bands: list[float]) -> list[tuple[str, int, float, float]]:
    """(band, devices, geometric-mean measured / predicted fwd, the same bwd) per non-empty pooling band."""
    edges = [0.0, *bands, math.inf]
    table = []
    for lo, hi in itertools.pairwise(edges):
        inside = [r for r in rows if lo <= r[0] < hi]
        if inside:
            name = f">= {lo:g}" if math.isinf(hi) else f"[{lo:g}, {hi:g})"
            table.append((name, len(inside), math.exp(sum(r[1] for r in inside) / len(inside)),
                          math.exp(sum(r[2] for r in inside) / len(inside))))
    return table


def _bands(text: str) -> list[float]:
    try:
        bands = [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give increasing poolings, e.g. 30,50,70,90") from None
    if not bands or any(b <= a for a, b in itertools.pairwise(bands)) or bands[0] <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give increasing positive poolings, e.g. 30,50,70,90")
    return bands


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="bench results files")
    ap.add_argument("--bands", type=_bands, default=[30.0, 50.0, 70.0, 90.0],
                    help="band edges of the hottest pooling (default 30,50,70,90)")
    args = ap.parse_args(argv)
    tables = []
    for path in args.results:  # every file read before anything is printed
        try:
            rows = device_rows(read_json(path, kind="autoshard.bench"))
            tables.append((path, band_table(rows, args.bands)))
        except AutoshardError as e:  # names the file itself
            print(f"error: {e}", file=sys.stderr)
            return 2
        except (OSError, KeyError, ValueError, TypeError, IndexError) as e:
            print(f"error: {path}: not a bench results file ({e})", file=sys.stderr)
            return 2
    for path, table in tables:
        print(f"{path}: measured / predicted by the device's hottest pooling (geometric means)")
        print("| hottest pooling | devices | fwd | bwd |")
        print("|---|---|---|---|")
        for name, n, fwd, bwd in table:
            print(f"| {name} | {n} | {fwd:.3f} | {bwd:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
