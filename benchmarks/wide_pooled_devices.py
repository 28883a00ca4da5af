"""Is the planning model further off on devices that hold a wide, heavily pooled table among few others?

    .venv/bin/python benchmarks/wide_pooled_devices.py RESULTS [RESULTS ...] \
        [--dim 256] [--pooling 50] [--few 3]

RESULTS: bench results files (``DIR/bench/results.json`` or gzipped in ``benchmarks/runs/``). Every
measured device of every plan the run priced with its planning model (each algorithm's, TorchRec's
included) falls in one of four groups: whether it holds a shard at least ``--dim`` columns wide of a table
whose pooling factor is at least ``--pooling``, and whether it holds at most ``--few`` shards. Printed
per file and group: the device count and the geometric mean of measured / predicted forward and of
backward; and the same ratios of the wide-and-few group over the rest (the bias a planner meets when it
gives such a table a device of its own or nearly).

Why (docs/benchmarks.md, "Stop 85"): on production-40-8's test-9 rl kept its own plan for a predicted gain of
11.5 ms (uncertainty 2.9 ms) and measured 3.0% above dim_greedy's plan: its two devices holding a dim-256,
pooling 53-76 table among 3 tables measured 2.2-2.3x the predicted forward. A bias shared by every device
of a task does not change which plan wins; one that depends on what a device holds does, and the ensemble's
spread did not show it. Nothing is planned or measured here.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

from autoshard.bench.summary import geomean
from autoshard.errors import AutoshardError
from autoshard.io import read_json

GROUPS = ("wide pooled, few", "wide pooled, more", "other, few", "other, more")


def device_ratios(results: dict, dim: int, pooling: float, few: int) -> dict[str, list[tuple[float, float]]]:
    """Per group, (measured / predicted forward, measured / predicted backward) of every measured device."""
    groups: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for task in results.get("tasks") or []:
        pooling_of = {t["name"]: t["pooling_factor"] for t in task["task"]["tables"]}
        for r in task["results"]:
            predicted, measured = r.get("predicted"), r.get("measured")
            if not (r.get("ok") and predicted and measured):
                continue
            held: dict[int, list[tuple[int, float]]] = defaultdict(list)
            for name, spec in r["plan"]["tables"].items():
                for shard in spec["shards"]:
                    held[shard["rank"]].append((shard["columns"][1] - shard["columns"][0], pooling_of[name]))
            for rank, (pd, md) in enumerate(zip(predicted["devices"], measured["devices"])):
                if not held.get(rank) or min(pd["fwd_ms"], pd["bwd_ms"], md["fwd_ms"], md["bwd_ms"]) <= 0:
                    continue
                wide = any(cols >= dim and p >= pooling for cols, p in held[rank])
                group = f"{'wide pooled' if wide else 'other'}, {'few' if len(held[rank]) <= few else 'more'}"
                groups[group].append((md["fwd_ms"] / pd["fwd_ms"], md["bwd_ms"] / pd["bwd_ms"]))
    return groups


def file_groups(path: str, dim: int, pooling: float, few: int) -> dict[str, list[tuple[float, float]]]:
    """``device_ratios`` of a results file; a file that is not one raises AutoshardError naming it."""
    results = read_json(path, kind="autoshard.bench")  # a missing file or another kind: its own error
    try:
        return device_ratios(results, dim, pooling, few)
    except (KeyError, TypeError, ValueError) as e:
        raise AutoshardError(f"{path}: not a bench results file ({e!r}); pass DIR/bench/results.json") from e


def wide_few_excess(groups: dict[str, list[tuple[float, float]]]) -> tuple[float, float] | None:
    """(forward, backward) measured / predicted of the wide-pooled-and-few devices over the others'."""
    rest = [ratios for g in GROUPS[1:] for ratios in groups.get(g, [])]
    if not groups.get(GROUPS[0]) or not rest:
        return None
    return tuple(geomean([x[i] for x in groups[GROUPS[0]]]) / geomean([x[i] for x in rest]) for i in (0, 1))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="bench results files")
    ap.add_argument("--dim", type=int, default=256, help="least shard width (columns) counted as wide")
    ap.add_argument("--pooling", type=float, default=50.0, help="least pooling factor counted as heavy")
    ap.add_argument("--few", type=int, default=3, help="most shards a device holds to count as few")
    args = ap.parse_args(argv)
    if args.dim < 1 or args.pooling < 0 or args.few < 1:
        print("error: --dim and --few must be positive and --pooling not negative", file=sys.stderr)
        return 2
    for path in args.results:
        try:
            groups = file_groups(path, args.dim, args.pooling, args.few)
        except AutoshardError as e:  # names the file
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(path)
        for group in GROUPS:
            if groups.get(group):
                fwd, bwd = zip(*groups[group])
                print(f"  {group:18s} {len(fwd):4d} devices   measured / predicted fwd {geomean(fwd):.2f}, "
                      f"bwd {geomean(bwd):.2f}")
        rest = [ratios for g in GROUPS[1:] for ratios in groups.get(g, [])]
        if groups.get(GROUPS[0]) and rest:
            fwd, bwd = zip(*rest)
            print(f"  {'the rest':18s} {len(fwd):4d} devices   measured / predicted fwd {geomean(fwd):.2f}, "
                  f"bwd {geomean(bwd):.2f}")
        excess = wide_few_excess(groups)
        if excess is not None:
            print(f"  wide pooled and few over the rest: fwd {excess[0]:.2f}, bwd {excess[1]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
