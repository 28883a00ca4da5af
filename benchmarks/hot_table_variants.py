"""Is there room around a task's bottleneck that the planners miss? Hand-made re-shardings of one table,
measured beside the learned planners' plans, on an archived bench run's tasks.

    .venv/bin/python benchmarks/hot_table_variants.py benchmarks/runs/s51-amd-dlrm-20-8-torchrec.json.gz \
        -o out/hot/dlrm-20-8.json [--tasks 0,3] [--rounds 3]

Why: the bench's per-task estimate (``planners.exact.lower_bound``) divides the largest table's cost by its
column shards, as if a quarter of a dim-16 table cost a quarter of it; a suite's "cost / estimate" then
reads as room for a better plan. This checks that room by measurement: for every task, the base is the
heuristic plan the run measured cheapest; its hot device (the run's slowest fwd + bwd) holds a heaviest
table (the most pooled lookup bytes, pooling x dim); the variants re-shard that table alone, the rest of the
base plan unchanged: ``move`` (table-wise to the run's lightest device), ``cw2`` / ``cw4`` (column shards on
the hot device and the lightest ones, where the dim splits into multiples of 4), ``rw2`` / ``rw4`` / ``rwD``
(even row ranges on the hot device and the lightest ones, or on every device) and ``dp`` (a replica on every
device), each only where it fits the devices' memory. The base, the variants and the run's learned planners'
plans (as the run returned them) are measured together with the run's own settings (its measure settings,
comm model, rounds and round statistic; ``pipeline.measure.measure_task``: interleaved rounds, identical
devices timed once), so every ratio is within one measurement. Printed per task: each plan's step over the
base's; then the geometric mean over tasks of the best variant's and each learned planner's ratio.

The output file (``-o``) is rewritten after each task (atomically) and read back on a re-run, which skips
the tasks it holds (same run, same task): an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from autoshard.bench.summary import geomean, is_heuristic
from autoshard.costs.comm import AlphaBeta
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import MeasuredCostModel
from autoshard.hardware.kernel import MeasureSettings
from autoshard.io import read_json, write_json
from autoshard.pipeline.measure import measure_task
from autoshard.pipeline.results import AlgoResult
from autoshard.plan import COLUMN_SHARD_MULTIPLE, Plan, TablePlacement, validate
from autoshard.planners.guard import GUARDED
from autoshard.tasks import Task

KIND = "autoshard.hot_table_variants"


def heaviest_on(task: Task, plan: Plan, rank: int) -> str:
    """The table with the most pooled lookup bytes (pooling x dim) among those placed whole on ``rank``."""
    whole = [p.table for p in plan.placements if p.ranks == (rank,)]
    if not whole:
        raise AutoshardError(f"{task.name}: the hot device {rank} holds no whole table")
    by_name = {t.name: t for t in task.tables}
    return max(whole, key=lambda n: (by_name[n].pooling_factor * by_name[n].dim, n))


def variants(task: Task, base: Plan, name: str, hot: int, order: list[int]) -> dict[str, Plan]:
    """The hand-made re-shardings of table ``name``, on the hot device ``hot`` in ``base`` (module
    docstring); ``order``: the devices from the lightest up."""
    table = next(t for t in task.tables if t.name == name)
    others = [r for r in order if r != hot]
    d = task.num_devices
    made: dict[str, TablePlacement] = {"move": TablePlacement.table_wise(name, others[0], table.dim)}
    for c in (2, 4):
        if table.dim % (c * COLUMN_SHARD_MULTIPLE) == 0 and c <= d:
            made[f"cw{c}"] = TablePlacement.column_wise(name, [hot, *others[:c - 1]], [table.dim // c] * c)
    for ranks in ([hot, *others[:1]], [hot, *others[:3]], list(range(d))):
        label, c, n = f"rw{len(ranks)}", len(ranks), table.rows
        if 1 < c <= n and label not in made:
            counts = [n * (j + 1) // c - n * j // c for j in range(c)]
            made[label] = TablePlacement.row_wise(name, ranks, counts, table.dim)
    made["dp"] = TablePlacement.data_parallel(name, list(range(d)), table.dim)
    out = {}
    for label, placement in made.items():
        plan = replace(base, placements=tuple(placement if p.table == name else p for p in base.placements),
                       algorithm=label, cost=None)
        try:
            validate(plan, task)
        except AutoshardError:  # over a device's memory
            continue
        out[label] = plan
    return out


def measure_one(run: dict[str, Any], index: int) -> dict[str, Any]:
    """Measure task ``index`` of ``run``: the base, its variants and the learned planners' plans."""
    entry = run["tasks"][index]
    task = Task.from_json(entry["task"])
    ok = {x["algorithm"]: x for x in entry["results"] if x["ok"] and x.get("measured")}
    heuristics = [a for a in ok if is_heuristic(a)]
    if not heuristics:
        raise AutoshardError(f"task {index} ({task.name}): no heuristic plan was measured in the run")
    base_name = min(heuristics, key=lambda a: (ok[a]["measured"]["plan_ms"], a))
    base = Plan.from_json(ok[base_name]["plan"])
    devices = ok[base_name]["measured"]["devices"]
    load = [dv["fwd_ms"] + dv["bwd_ms"] for dv in devices]
    order = sorted(range(len(load)), key=lambda r: (load[r], r))
    hot = order[-1]
    table = heaviest_on(task, base, hot)
    learned = {a: replace(Plan.from_json(ok[a]["plan"]), algorithm=a, cost=None) for a in GUARDED if a in ok}
    plans = {"base": replace(base, algorithm="base", cost=None), **variants(task, base, table, hot, order),
             **learned}
    settings = MeasureSettings.from_json(run["measure_settings"])
    comm = AlphaBeta.from_json(run["comm"])
    results = [AlgoResult(label, True, plan=plan) for label, plan in plans.items()]
    measured = measure_task(task, results, lambda: MeasuredCostModel(settings, comm), int(run["rounds"]),
                            statistic=run.get("round_statistic", "min"))
    steps = {r.algorithm: r.measured.plan_ms for r in measured}
    return {"index": index, "task": task.name, "base": base_name, "hot_rank": hot, "table": table,
            "steps_ms": steps}


def summarise(rows: list[dict[str, Any]]) -> str:
    lines = []
    for row in rows:
        base = row["steps_ms"]["base"]
        cells = " ".join(f"{k} {v / base:.3f}" for k, v in row["steps_ms"].items() if k != "base")
        lines.append(f"task {row['index']} ({row['base']}'s plan, {base:.2f} ms; {row['table']} on rank "
                     f"{row['hot_rank']}): {cells}")

    def ratio(row: dict[str, Any], keys: list[str]) -> float:
        return min(row["steps_ms"][k] for k in keys) / row["steps_ms"]["base"]

    hand = geomean([ratio(r, [k for k in r["steps_ms"] if k not in GUARDED]) for r in rows])
    lines.append(f"geometric mean over {len(rows)} tasks, over the base: best hand-made variant (or the "
                 f"base) {hand:.3f}")
    for a in GUARDED:
        have = [r for r in rows if a in r["steps_ms"]]
        if have:
            lines.append(f"  {a}: {geomean([ratio(r, [a]) for r in have]):.3f} on {len(have)} tasks")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a bench results file (bench/results.json, or gzipped in benchmarks/runs/)")
    ap.add_argument("-o", "--out", required=True, help="results JSON (rewritten after each task; resumes)")
    ap.add_argument("--tasks", default="", help="comma-separated task indices (default: every task)")
    args = ap.parse_args(argv)
    try:
        run = read_json(args.run)
        if not (isinstance(run, dict) and isinstance(run.get("tasks"), list)
                and all(k in run for k in ("measure_settings", "comm", "rounds"))):
            raise AutoshardError(f"{args.run}: not a bench results file (no tasks, measure settings, comm or "
                                 "rounds)")
        try:
            wanted = [int(i) for i in args.tasks.split(",")] if args.tasks else list(range(len(run["tasks"])))
        except ValueError:
            raise AutoshardError(f"--tasks {args.tasks!r}: give comma-separated task indices, e.g. 0,3")
        if any(not 0 <= i < len(run["tasks"]) for i in wanted):
            raise AutoshardError(f"--tasks {args.tasks}: the run has tasks 0-{len(run['tasks']) - 1}")
        name = Path(args.run).name  # a run is known by its file name, wherever it is read from
        done: dict[str, Any] = {"kind": KIND, "run": name, "rows": []}
        if Path(args.out).exists():  # resume; never overwrite a file of something else
            done = read_json(args.out)
            if not (isinstance(done, dict) and done.get("kind") == KIND and done.get("run") == name):
                raise AutoshardError(f"{args.out}: not this script's results for {name}; give another -o")
        have = {r["index"] for r in done["rows"]}
        for n, i in enumerate(wanted):
            if i in have:
                continue
            print(f"[{n + 1}/{len(wanted)}] task {i}", file=sys.stderr, flush=True)
            done["rows"].append(measure_one(run, i))
            done["rows"].sort(key=lambda r: r["index"])
            write_json(args.out, done)
    except AutoshardError as e:
        print(f"hot_table_variants: error: {e}", file=sys.stderr)
        return 2
    rows = [r for r in done["rows"] if r["index"] in set(wanted)]
    print(summarise(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
