"""How the planning model prices devices that hold row shards against those that hold whole tables, on a
bench run's measured plans.

Run: .venv/bin/python benchmarks/row_device_error.py RESULTS [RESULTS ...]

RESULTS is a bench's ``results.json`` (plain or gzipped). For every measured plan of every algorithm, each
device's predicted fwd+bwd (the planning model's, as the bench recorded it) over its measured fwd+bwd,
grouped by whether the device holds a row-wise (or table-row-wise) shard; prints the count, the median and
the p10-p90 of that ratio per group, which algorithms made the row-wise devices, and the ratio of the two
medians (the model's level cancels in it: below 1, row-wise devices are priced cheaper than they are,
relative to whole-table ones). Why: stop 28's first
quickstart lost a task with search's row-wise plan, its devices priced ~18% below their measurement while
whole-table devices were priced right.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.io import read_json

ROW_TYPES = ("row_wise", "table_row_wise")


def device_ratios(run: dict) -> dict[str, list[tuple[str, float]]]:
    """(algorithm, predicted / measured fwd+bwd) of every measured device, by 'row' / 'table'."""
    out: dict[str, list[tuple[str, float]]] = {"row": [], "table": []}
    for task in run["tasks"]:
        for x in task["results"]:
            if not x.get("ok") or not x.get("measured") or not x.get("predicted"):
                continue
            plan = x["plan"]
            has_row = [False] * int(plan["devices"])
            for spec in plan["tables"].values():
                if spec["sharding_type"] in ROW_TYPES:
                    for shard in spec["shards"]:
                        has_row[int(shard["rank"])] = True
            for d, (p, m) in enumerate(zip(x["predicted"]["devices"], x["measured"]["devices"])):
                ratio = (p["fwd_ms"] + p["bwd_ms"]) / (m["fwd_ms"] + m["bwd_ms"])
                out["row" if has_row[d] else "table"].append((x["algorithm"], ratio))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", help="bench results.json files")
    args = p.parse_args(argv)
    try:
        for path in args.results:
            try:
                groups = device_ratios(read_json(Path(path)))
            except (KeyError, TypeError, ValueError) as e:
                raise AutoshardError(f"{path}: not a bench's results ({type(e).__name__}: {e})") from None
            print(path)
            medians = {k: float(np.median([x for _, x in rows])) for k, rows in groups.items() if rows}
            if len(medians) == 2:  # the model's level cancels: how much cheaper it makes a row-wise device
                print(f"  row / table median: {medians['row'] / medians['table']:.3f}")
            for kind, rows in groups.items():
                if not rows:
                    print(f"  {kind}: no devices")
                    continue
                r = np.array([x for _, x in rows])
                lo, hi = np.quantile(r, [0.1, 0.9])
                print(f"  {kind}-shard devices: {len(r)}, predicted / measured median {np.median(r):.3f} "
                      f"(p10-p90 {lo:.2f}-{hi:.2f}); algorithms {', '.join(sorted({a for a, _ in rows}))}")
    except AutoshardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
