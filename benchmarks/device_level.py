"""How far a bench run's planning model was from the measured kernels: its level, per algorithm and per kind
of device, from the results files alone.

Run: .venv/bin/python benchmarks/device_level.py RESULTS [RESULTS ...]

RESULTS: bench results files (``DIR/bench/results.json`` or gzipped in ``benchmarks/runs/``). Printed per
file:

- per algorithm, the step's error (mean |predicted - measured| / measured of the plan's step, the report's
  "prediction error") and the geometric mean over tasks of measured / predicted (max fwd + max bwd): the
  model's level on that algorithm's bottleneck kernels;
- per device, grouped by the mean dim of the tables it holds (<= 16, 17-64, > 64), the geometric mean of
  measured / predicted fwd + bwd and the device count.

Why: a model trained on one CPU and used on another (``--allow-other-hardware``), or scaled by
``autoshard calibrate-cost``, can be off by a level that differs between kinds of tables; the planners then
weigh kernels against the measured collectives at the wrong rate (docs/benchmarks.md, "Stop 45").
No measurement happens here.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict

from autoshard.bench.summary import geomean
from autoshard.errors import AutoshardError
from autoshard.io import read_json

DIM_GROUPS = ((16, "dim <= 16"), (64, "dim 17-64"), (math.inf, "dim > 64"))


def levels(results: dict) -> tuple[dict[str, tuple[float, float]], dict[str, list[float]]]:
    """Per algorithm (step error, kernel level) and per dim group the devices' measured / predicted."""
    errors: dict[str, list[float]] = defaultdict(list)
    kernels: dict[str, list[float]] = defaultdict(list)
    groups: dict[str, list[float]] = defaultdict(list)
    for task in results.get("tasks") or []:
        dims = {t["name"]: t["dim"] for t in task["task"]["tables"]}
        for r in task["results"]:
            predicted, measured = r.get("predicted"), r.get("measured")
            if not (r.get("ok") and predicted and measured and predicted.get("step")):
                continue
            algo = r["algorithm"]
            errors[algo].append(abs(predicted["plan_ms"] - measured["plan_ms"]) / measured["plan_ms"])
            p, m = predicted["step"], measured["step"]
            kernels[algo].append((m["max_fwd_ms"] + m["max_bwd_ms"]) / (p["max_fwd_ms"] + p["max_bwd_ms"]))
            held: dict[int, list[int]] = defaultdict(list)
            for name, spec in r["plan"]["tables"].items():
                for shard in spec["shards"]:
                    held[shard["rank"]].append(dims[name])
            for rank, (pd, md) in enumerate(zip(predicted["devices"], measured["devices"])):
                p_ms, m_ms = pd["fwd_ms"] + pd["bwd_ms"], md["fwd_ms"] + md["bwd_ms"]
                if not held.get(rank) or p_ms <= 0 or m_ms <= 0:
                    continue
                mean_dim = sum(held[rank]) / len(held[rank])
                groups[next(label for top, label in DIM_GROUPS if mean_dim <= top)].append(m_ms / p_ms)
    per_algo = {a: (sum(e) / len(e), geomean(kernels[a])) for a, e in errors.items()}
    return per_algo, groups


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="bench results files")
    args = ap.parse_args(argv)
    for path in args.results:
        try:
            per_algo, groups = levels(read_json(path, kind="autoshard.bench"))
        except AutoshardError as e:  # names the file itself
            print(f"error: {e}", file=sys.stderr)
            return 2
        except (OSError, KeyError, ValueError) as e:
            print(f"error: {path}: not a bench results file ({e})", file=sys.stderr)
            return 2
        print(path)
        print("  algorithm            step error   measured / predicted max fwd + max bwd")
        for algo, (error, level) in per_algo.items():
            print(f"  {algo:20s} {100 * error:9.1f}%   {level:.2f}")
        for _, label in DIM_GROUPS:
            if groups.get(label):
                print(f"  devices of {label}: measured / predicted fwd + bwd {geomean(groups[label]):.2f} "
                      f"({len(groups[label])} devices)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
