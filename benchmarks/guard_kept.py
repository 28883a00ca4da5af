"""Every plan a learned planner kept through the guard (``planners.guard``) in bench runs, with the gain the
model predicted, the guard's margin, their ratio and the plan's measured step over the heuristic plan the
guard weighed it against: can any margin separate the kept plans that lost from those that won?

Run: .venv/bin/python benchmarks/guard_kept.py RESULTS [RESULTS ...]

RESULTS: bench results files (``DIR/bench/results.json`` or gzipped in ``benchmarks/runs/``). Everything comes
from the files: the guard's decision as each planner logged it (gain and margin in ms) and the measured
steps. Printed per file: one row per kept plan, then the kept plans sorted by gain / margin with the
measured ratio, so a threshold on k (the guard's rule keeps a plan iff gain > k x margin) reads off as a
cut in that list. ``benchmarks/guard_margin.py`` gives the geometric means at each k.
"""

from __future__ import annotations

import argparse
import sys

from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.planners.guard import kept_gain_margin


def kept_rows(results: dict) -> list[tuple[str, str, float, float, float]]:
    """(task, planner, gain ms, margin ms, measured step / the weighed heuristic's) of every kept plan."""
    rows = []
    for task in results.get("tasks") or []:
        by_algo = {r["algorithm"]: r for r in task["results"] if r.get("ok") and r.get("measured")}
        for algo, r in by_algo.items():
            kept = kept_gain_margin(r.get("guard") or "")
            if kept is None or kept[0] not in by_algo:
                continue
            heuristic, gain, margin = kept
            ratio = r["measured"]["plan_ms"] / by_algo[heuristic]["measured"]["plan_ms"]
            rows.append((task["task"]["name"], algo, gain, margin, ratio))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="bench results files")
    args = ap.parse_args(argv)
    for path in args.results:
        try:
            rows = kept_rows(read_json(path, kind="autoshard.bench"))
        except AutoshardError as e:  # names the file itself
            print(f"error: {e}", file=sys.stderr)
            return 2
        except (OSError, KeyError, ValueError) as e:
            print(f"error: {path}: not a bench results file ({e})", file=sys.stderr)
            return 2
        print(f"{path}: {len(rows)} kept plans (gain / margin, measured ratio to the weighed heuristic's)")
        for task, algo, gain, margin, ratio in sorted(rows, key=lambda r: r[2] / r[3]):
            flag = "  <- measured worse" if ratio > 1 else ""
            print(f"  {task:32s} {algo:10s} gain {gain:6.2f} ms  margin {margin:5.2f} ms  "
                  f"k* {gain / margin:5.2f}  ratio {ratio:.3f}{flag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
