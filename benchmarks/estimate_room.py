"""How much room does a suite leave? Archived bench runs' per-task estimates restated with column shards
priced by the evaluator (stop 52's ``planners.exact.lower_bound``) instead of divided evenly.

    .venv/bin/python benchmarks/estimate_room.py benchmarks/runs/s51-amd-dlrm-20-8-torchrec.json.gz ... \
        -o out/room.json

The bench reports every suite's "best fixed heuristic's cost / estimate", and issue 15 asks for a 5% win
wherever that leaves 10% room. Before stop 52 the estimate's largest-piece term took a table's column shards
at its weight / shards; the measured kernels price a dim-16 table's 4-wide shard at about 3/4 of the whole.
For every task of each run this times, with the run's own measure settings and comm model, every table alone
and the column shards of the tables heavier than the average (``planners.exact.linear_costs``,
``column_pieces``), and computes from those same timings the old estimate (the even division) and the new
one; their ratio, applied to the run's archived estimate, restates it without the host's drift since the run.
Printed per run: the best fixed heuristic's measured cost over the archived estimate, over the restated one,
and the learned planners' ratio to that heuristic (the run's, for reference). The output file is rewritten
after each task and read back on a re-run (an interrupted run resumes).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.bench.summary import geomean, is_heuristic
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.loading import resolve_cost_model
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import MeasuredCostModel
from autoshard.hardware.kernel import MeasureSettings
from autoshard.io import read_json, write_json
from autoshard.plan import COLUMN_SHARD_MULTIPLE
from autoshard.planners.exact import column_pieces, linear_bound, linear_costs
from autoshard.planners.guard import GUARDED
from autoshard.tasks import Task

KIND = "autoshard.estimate_room"


def even_division_ms(costs: Any, task: Task) -> float:
    """The estimate as computed before stop 52: the largest table's weight divided by the most column shards
    it can have."""
    w = costs.weights_ms
    parts = np.array([min(task.num_devices, t.dim // COLUMN_SHARD_MULTIPLE)
                      if t.dim % COLUMN_SHARD_MULTIPLE == 0 else 1 for t in task.tables])
    return costs.overhead_ms + max(float(w.sum()) / task.num_devices, float((w / np.maximum(parts, 1)).max()))


def estimates(run: dict[str, Any], index: int) -> dict[str, Any]:
    """Task ``index`` of ``run``: the even-division and the priced-shard estimate from one set of timings."""
    task = Task.from_json(run["tasks"][index]["task"])
    settings = MeasureSettings.from_json(run["measure_settings"])
    model = resolve_cost_model(MeasuredCostModel(settings, AlphaBeta.from_json(run["comm"])))
    costs = linear_costs(task, model)
    return {"index": index, "task": task.name, "even_ms": even_division_ms(costs, task),
            "priced_ms": linear_bound(costs, task, column_pieces(task, model, costs))}


def run_rows(run: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, float]:
    """Geometric means over the run's tasks: the best fixed heuristic's cost over the archived and the
    restated estimate, and each learned planner's cost over that heuristic."""
    tasks = [run["tasks"][r["index"]] for r in rows]

    def measured(entry: dict[str, Any]) -> dict[str, float]:
        return {x["algorithm"]: x["measured"]["plan_ms"]
                for x in entry["results"] if x["ok"] and x.get("measured")}

    costs = [measured(t) for t in tasks]
    heuristics = sorted(set.intersection(*({a for a in c if is_heuristic(a)} for c in costs)))
    if not heuristics:
        raise AutoshardError("no heuristic was measured on every task")

    best = min(heuristics, key=lambda h: (geomean([c[h] for c in costs]), h))
    archived = [t["lower_bound_ms"] for t in tasks]
    if any(not a for a in archived):
        raise AutoshardError("the run has tasks without an estimate (run with --estimate evaluator)")
    restated = [a * r["priced_ms"] / r["even_ms"] for a, r in zip(archived, rows, strict=True)]
    out = {"best_fixed": best,
           "over_archived": geomean([c[best] / a for c, a in zip(costs, archived, strict=True)]),
           "over_restated": geomean([c[best] / e for c, e in zip(costs, restated, strict=True)]),
           "priced_over_even": geomean([r["priced_ms"] / r["even_ms"] for r in rows])}
    for a in GUARDED:
        if all(a in c for c in costs):
            out[a] = geomean([c[a] / c[best] for c in costs])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="bench results files (bench/results.json, or gzipped)")
    ap.add_argument("-o", "--out", required=True, help="results JSON (rewritten after each task; resumes)")
    args = ap.parse_args(argv)
    try:
        runs = {}
        for path in args.runs:
            run = read_json(path)
            if not (isinstance(run, dict) and isinstance(run.get("tasks"), list)
                    and "measure_settings" in run and "comm" in run):
                raise AutoshardError(f"{path}: not a bench results file (no tasks, measure settings or comm)")
            runs[path] = run
        done: dict[str, Any] = {"kind": KIND, "runs": {}}
        if Path(args.out).exists():  # resume; never overwrite a file of something else
            done = read_json(args.out)
            if not (isinstance(done, dict) and done.get("kind") == KIND
                    and isinstance(done.get("runs"), dict)):
                raise AutoshardError(f"{args.out}: not this script's results; give another -o")
        for path, run in runs.items():
            rows = done["runs"].setdefault(Path(path).name, [])  # a run is known by its file name
            for i in range(len(run["tasks"])):
                if any(r["index"] == i for r in rows):
                    continue
                print(f"{path}: task {i + 1}/{len(run['tasks'])}", file=sys.stderr, flush=True)
                rows.append(estimates(run, i))
                write_json(args.out, done)
        print("| run | best fixed heuristic | its cost / estimate as archived | / restated | restated / "
              "archived estimate | " + " | ".join(f"{a} / it" for a in GUARDED) + " |")
        print("|---|---|---|---|---|" + "---|" * len(GUARDED))
        for path, run in runs.items():
            s = run_rows(run, sorted(done["runs"][Path(path).name], key=lambda r: r["index"]))
            name = Path(path).name.removesuffix(".json.gz").removesuffix(".json")
            learned = " | ".join(f"{s[a]:.3f}" if a in s else "-" for a in GUARDED)
            print(f"| {name} | {s['best_fixed']} | {s['over_archived']:.3f} | {s['over_restated']:.3f} | "
                  f"{s['priced_over_even']:.3f} | {learned} |")
    except AutoshardError as e:
        print(f"estimate_room: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
