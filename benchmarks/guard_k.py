"""The guard's k, chosen by the measured cost of what it returns: every learned planner's candidates and the
guard heuristics' plans of a suite's held-out tasks timed side by side, and the guard replayed exactly at
each k on them.

    .venv/bin/python benchmarks/guard_k.py --suite dlrm-20-2 --split train --tasks 10 -o F --workdir W
    .venv/bin/python benchmarks/guard_k.py --summary F1 F2 ...      # one file per suite; pooled too
    .venv/bin/python benchmarks/guard_k.py --summary F1 F2 ... --table   # the same as one markdown table
    .venv/bin/python benchmarks/guard_k.py --summary F1 F2 ... --heuristics  # H* against each fixed one

For each task (the suite's ``--split`` tasks, made by the bench's own stages in ``--workdir`` and cached
there, as ``benchmarks/risk_objective.py`` makes them), the four guard heuristics and each learned planner
(``--planners``, default search, neuroshard, ilp, rl) plan it with the shipped default cost model and
policy, each planner at its own defaults (the mean since stops 59-61) with the guard off (seed 0, 10 s).
The guard is then run on those plans for every k of ``KS`` (``planners.guard.guard_plan``: the planner's
returned plan, then its ``last_alternatives`` in order, each kept only where the model's mean predicts it
cheaper than H* by more than k x its margin, else H*, the heuristic plan the mean prices cheapest): exactly
what ``--option guard=K`` returns, since the guard decides after the planner has planned. Every distinct
plan of the task (the heuristics', each planner's returned plan and its alternatives) is timed side by side
(``hardware.evaluator.evaluate_plans``: 3 rounds, a fresh evaluator each, the least kept per device;
collectives from the suite's comm fit: modelled), one task after another. A row per task is written after
each (measured and predicted step per plan, and per planner and k the plan the guard returned), so an
interrupted run keeps what it timed and a re-run with the same ``-o`` continues after the tasks there.

Why not ``risk_objective.py``'s replay: it recorded the terms of the returned plan only, so it could not
follow ilp's and rl's alternatives, and measured one planner a run; here every planner's candidates share
the task's timing, and the replay is the guard itself.

``--summary`` prints, per file (suite) and pooled over the files: for each planner and k, how often the guard
kept a plan of the planner's own, the returned plans' geometric-mean cost over the best fixed heuristic (the
heuristic of lowest geometric-mean cost in that file) and, paired per task, over the guard at the shipped k
(``planners.guard.DEFAULT_GUARD_K``, or ``--reference-k``; how many tasks more than 5% above and below it, and
the worst task's ratio), with the bench's 95% bootstrap interval over the tasks (``bench.summary.compare``;
one measurement a plan, so no rounds are resampled). "all" takes, per task, the geometric mean of the
planners' returned costs, so its interval still resamples tasks. Last, H* (the heuristic plan the model's mean
prices cheapest, what the guard returns where it keeps no plan of the planner's) over the best fixed
heuristic: the part of a ratio that is the guard's pick among the heuristics.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

from autoshard.bench.summary import best_fixed_heuristic, compare
from autoshard.costs.base import plan_cost
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned import LearnedCostModel
from autoshard.costs.loading import SHIPPED_COST_MODEL
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import evaluate_plans
from autoshard.hardware.kernel import MeasureSettings
from autoshard.io import write_json
from autoshard.plan import Plan
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.planners.guard import DEFAULT_GUARD_K, GUARD_HEURISTICS, GUARDED, guard_plan
from autoshard.planners.row_split import split_oversize
from autoshard.tasks import Task

sys.path.insert(0, str(Path(__file__).resolve().parent))  # risk_objective.py, beside this script
from risk_objective import read_rows, suite_inputs

KS = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)
"""The guard's k replayed (k = 0, the guard off, is the planner's own plan: ``OFF``)."""
OFF = "off"
OWN = "own"
"""A planner's returned plan's label suffix: ``search:own``; an alternative's is its label (``ilp:whole``)."""


def k_label(k: float) -> str:
    return f"{k:g}"


def plan_task(task: Task, model: LearnedCostModel, planners: tuple[str, ...],
              time_limit_s: float = 10.0) -> tuple[dict[str, Plan], dict[str, dict[str, str]]]:
    """The task's distinct candidate plans by label (the heuristics by name, ``planner:own`` and
    ``planner:<alternative>``) and, per planner, the label the guard returns at each k (``OFF``: its own)."""
    if split_oversize(task, False) is not None:
        raise AutoshardError(f"task {task.name} has a table larger than every device; the replay needs the "
                             "planner's alternatives on the task itself: give a suite without such tables")
    options = PlannerOptions(seed=0, cost_model=model, time_limit_s=time_limit_s)
    plans = {h: run_planner(make_planner(h, options), task) for h in GUARD_HEURISTICS}
    heuristics = dict(plans)
    chosen: dict[str, dict[str, str]] = {}
    for name in planners:
        planner = make_planner(name, PlannerOptions(seed=0, cost_model=model, time_limit_s=time_limit_s,
                                                    extra={"guard": 0}))
        own = run_planner(planner, task)
        alternatives = tuple(getattr(planner, "last_alternatives", ()))
        labelled = {f"{name}:{OWN}": own, **{f"{name}:{label}": p for label, p in alternatives}}
        plans.update(labelled)
        picks = {OFF: f"{name}:{OWN}"}
        for k in KS:
            _, decision = guard_plan(task, own, heuristics, model, k, alternatives)
            if decision is None or not decision.kept_planner:
                picks[k_label(k)] = decision.heuristic if decision else f"{name}:{OWN}"
            else:
                picks[k_label(k)] = f"{name}:{decision.candidate or OWN}"
        chosen[name] = picks
    return plans, chosen


def measure(tasks: list[Task], settings: MeasureSettings, comm: AlphaBeta, out: Path,
            rows: list[dict[str, Any]], planners: tuple[str, ...],
            model_path: str = str(SHIPPED_COST_MODEL)) -> list[dict[str, Any]]:
    """Plan, replay and time ``tasks`` (module docstring) after ``rows``, an interrupted run's."""
    model = LearnedCostModel.load(model_path, allow_other_hardware=True).with_comm(comm)
    rows = list(rows)
    done = {r.get("task") for r in rows}
    for task in tasks:
        if task.name in done:
            continue
        start = time.perf_counter()
        plans, chosen = plan_task(task, model, planners)
        labels = list(plans)
        costs = evaluate_plans(task, [plans[lab] for lab in labels], settings, comm, rounds=3)
        rows.append({"task": task.name,
                     "measured": {lab: c.plan_ms for lab, c in zip(labels, costs)},
                     "predicted": {lab: plan_cost(model, task, plans[lab]).plan_ms for lab in labels},
                     "chosen": chosen})
        write_json(out, rows)
        picks = " ".join(f"{p} {chosen[p][k_label(DEFAULT_GUARD_K)]}" for p in planners)
        print(f"{task.name}: {len(labels)} plans timed in {time.perf_counter() - start:.0f} s; at k = "
              f"{DEFAULT_GUARD_K:g}: {picks}", flush=True)
    return rows


def _check(rows: Any, path: str = "the file") -> list[dict[str, Any]]:
    """``rows`` as this script writes them, else a one-line AutoshardError."""
    try:
        ok = isinstance(rows, list) and bool(rows) and all(
            isinstance(r["measured"], dict) and all(h in r["measured"] for h in GUARD_HEURISTICS) and all(
                pick in r["measured"] for picks in r["chosen"].values() for pick in picks.values())
            for r in rows)
    except (KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise AutoshardError(f"{path} does not hold the rows this script writes (tasks with 'measured' costs "
                             "and the guard's 'chosen' plans); give a file written by -o")
    return rows


def planners_of(rows: list[dict[str, Any]]) -> list[str]:
    """The planners every task of ``rows`` has picks for, in ``GUARDED``'s order."""
    common = set.intersection(*(set(r["chosen"]) for r in rows)) if rows else set()
    return [p for p in GUARDED if p in common]


def _picked(row: dict[str, Any], planners: list[str],
            fixed: str) -> dict[str, tuple[float, tuple[float, ...]]]:
    """One task's {"<planner> k=<k>" and "all k=<k>": (cost, its one round)} and its file's best fixed
    heuristic's under "fixed", the shape ``bench.summary.compare`` reads."""
    costs = {"fixed": float(row["measured"][fixed]), "H*": float(row["measured"][model_pick(row)])}
    for k in (OFF, *map(k_label, KS)):
        picked = [float(row["measured"][row["chosen"][p][k]]) for p in planners]
        costs.update({f"{p} k={k}": ms for p, ms in zip(planners, picked)})
        costs[f"all k={k}"] = math.exp(sum(map(math.log, picked)) / len(picked))
    return {label: (ms, (ms,)) for label, ms in costs.items()}


def model_pick(row: dict[str, Any]) -> str:
    """H*, the guard heuristic whose plan the model's mean prices cheapest on the task (ties by name; the
    guard breaks them by the devices from the slowest down): what every guarded planner returns where it
    keeps no plan of its own."""
    return min(GUARD_HEURISTICS, key=lambda h: (float(row["predicted"][h]), h))


def _interval(c: Any) -> str:
    return f" [{c.low:.3f}, {c.high:.3f}]" if c.low is not None and c.high is not None else ""


def summary_lines(rows: list[tuple[dict[str, Any], str]], title: str,
                  reference: float = DEFAULT_GUARD_K) -> list[str]:
    """The summary of tasks given as (row, its file's best fixed heuristic): one file, or several pooled
    (``title`` says which); each task is compared with its own file's fixed heuristic."""
    planners = planners_of([r for r, _ in rows])
    if not rows or not planners:
        raise AutoshardError(f"{title}: no tasks with every planner's picks; run the measurement first")
    shipped = k_label(reference)
    tasks = [_picked(r, planners, fixed) for r, fixed in rows]
    out = [f"{title}: {len(rows)} tasks; planners {', '.join(planners)}"]
    for who in (*planners, "all"):
        for k in (OFF, *map(k_label, KS)):
            label = f"{who} k={k}"
            own = ("" if who == "all" else
                   f"own plan on {sum(r['chosen'][who][k].startswith(who + ':') for r, _ in rows)}; ")
            vs_fixed = compare(tasks, label, ["fixed"])
            vs_shipped = compare(tasks, label, [f"{who} k={shipped}"])
            ratios = [t[label][0] / t[f"{who} k={shipped}"][0] for t in tasks]
            out.append(f"  {label}: {own}/ best fixed heuristic {vs_fixed.ratio:.3f}{_interval(vs_fixed)}; "
                       f"/ k={shipped} {vs_shipped.ratio:.3f}{_interval(vs_shipped)}, above it by > 5% on "
                       f"{sum(r > 1.05 for r in ratios)}, below on {sum(r < 1 / 1.05 for r in ratios)}, "
                       f"worst {max(ratios):.3f}")
    model = compare(tasks, "H*", ["fixed"])
    out.append(f"  H* (the model's pick among the heuristics; the guard's return where it keeps none of the "
               f"planner's): / best fixed heuristic {model.ratio:.3f}{_interval(model)}")
    return out


def best_fixed(rows: list[dict[str, Any]]) -> str:
    """The guard heuristic of lowest geometric-mean measured cost over ``rows`` (``bench.summary``'s)."""
    fixed = best_fixed_heuristic([{h: (float(r["measured"][h]), ()) for h in GUARD_HEURISTICS} for r in rows])
    assert fixed is not None  # every row has every guard heuristic (``_check``)
    return fixed


def summarise(files: dict[str, list[dict[str, Any]]], reference: float = DEFAULT_GUARD_K) -> list[str]:
    """Each file's summary, then, for several, the pooled one over all their tasks."""
    tagged = {path: [(r, best_fixed(rows)) for r in rows] for path, rows in files.items()}
    out = []
    for path, rows in tagged.items():
        out += summary_lines(rows, f"{path} (best fixed heuristic {rows[0][1]})", reference)
    if len(files) > 1:
        out += summary_lines([t for rows in tagged.values() for t in rows], f"pooled over {len(files)} files",
                             reference)
    return out


def table_lines(files: dict[str, list[dict[str, Any]]], reference: float = DEFAULT_GUARD_K) -> list[str]:
    """A markdown table, a row per file and one pooled: the planners' returned plans ("all") at each k over
    the shipped k, paired per task [95% over tasks], and how many of the planners' plans the guard kept."""
    tagged = {Path(path).name.removesuffix(".json"): [(r, best_fixed(rows)) for r in rows]
              for path, rows in files.items()}
    if len(files) > 1:
        tagged[f"**pooled, {sum(map(len, files.values()))} tasks**"] = [t for v in tagged.values() for t in v]
    shipped = k_label(reference)
    ks = (OFF, *map(k_label, KS))
    out = ["| tasks | " + " | ".join(f"k = {k}" for k in ks) + " |", "|---|" + "---|" * len(ks)]
    for name, rows in tagged.items():
        planners = planners_of([r for r, _ in rows])
        tasks = [_picked(r, planners, fixed) for r, fixed in rows]
        cells = []
        for k in ks:
            c = compare(tasks, f"all k={k}", [f"all k={shipped}"])
            kept = sum(r["chosen"][p][k].startswith(p + ":") for r, _ in rows for p in planners)
            cells.append(f"{c.ratio:.3f}{_interval(c)} ({kept}/{len(rows) * len(planners)})")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return out


def heuristic_lines(files: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Whether a fixed heuristic would do better than H*, the model's pick among the guard heuristics (what
    every guarded planner returns where it keeps no plan of its own): per file and pooled, H*'s measured cost
    over each fixed heuristic's, paired per task [95% over tasks], and each one's (H* too) over the task's
    cheapest heuristic plan (the oracle among the four, hindsight)."""
    names = {Path(path).name.removesuffix(".json"): rows for path, rows in files.items()}
    if len(files) > 1:
        names[f"pooled, {sum(map(len, files.values()))} tasks"] = [r for rows in files.values() for r in rows]
    out = []
    for name, rows in names.items():
        # one measurement a plan: ``compare``'s (cost, rounds) with the cost as its one round
        tasks = [{label: (ms, (ms,)) for label, ms in
                  {**{h: float(r["measured"][h]) for h in GUARD_HEURISTICS},
                   "H*": float(r["measured"][model_pick(r)])}.items()} for r in rows]
        vs = []
        for h in GUARD_HEURISTICS:
            c = compare(tasks, "H*", [h])
            vs.append(f"{h} {c.ratio:.3f}{_interval(c)}")
        oracle = [f"{h} {compare(tasks, h, GUARD_HEURISTICS).ratio:.3f}" for h in (*GUARD_HEURISTICS, "H*")]
        out += [f"{name}: H* over " + "; ".join(vs),
                "  over the task's cheapest heuristic plan: " + "; ".join(oracle)]
    return out


def measured_so_far(out: Path) -> list[dict[str, Any]]:
    """The rows an interrupted run left in ``out`` ([] if none); anything else there is refused."""
    return _check(read_rows(str(out)), str(out)) if out.is_file() else []


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", help="the suite whose tasks are planned, made here by the bench's stages")
    ap.add_argument("--split", choices=["train", "test"], default="train",
                    help="its train tasks (default; held out from its test tasks) or test")
    ap.add_argument("--workdir", help="where the suite's stages are cached (default guard-k-SUITE)")
    ap.add_argument("--tasks", type=int, default=10, help="how many of the tasks (first ones)")
    ap.add_argument("--planners", default=",".join(GUARDED),
                    help=f"comma-separated learned planners (default {','.join(GUARDED)})")
    ap.add_argument("-o", "--output", help="where to write the rows (JSON, rewritten after each task; a "
                                           "re-run continues after the tasks there)")
    ap.add_argument("--summary", nargs="+", metavar="FILE",
                    help="summarise files this script wrote instead of measuring (several: pooled too)")
    ap.add_argument("--table", action="store_true",
                    help="with --summary: a markdown table of every planner's plans at each k over the "
                         "shipped k, a row per file and one pooled")
    ap.add_argument("--heuristics", action="store_true",
                    help="with --summary: H* (the model's pick among the guard heuristics) against each "
                         "fixed heuristic, a line per file and one pooled")
    ap.add_argument("--reference-k", type=float, default=DEFAULT_GUARD_K,
                    help=f"with --summary: the k the others are paired with (default the shipped "
                         f"{DEFAULT_GUARD_K:g}; e.g. 1, the default until stop 62)")
    args = ap.parse_args(argv)
    try:
        if args.summary:
            files = {f: _check(read_rows(f), f) for f in args.summary}
            if args.reference_k not in KS:
                raise AutoshardError(f"--reference-k {args.reference_k:g}: give one of the replayed k, "
                                     f"{', '.join(map(k_label, KS))}")
            print("\n".join(heuristic_lines(files) if args.heuristics
                            else table_lines(files, args.reference_k) if args.table
                            else summarise(files, args.reference_k)))
            return 0
        planners = tuple(p.strip() for p in args.planners.split(",") if p.strip())
        unknown = sorted(set(planners) - set(GUARDED))
        if unknown or not planners:
            raise AutoshardError(f"--planners {args.planners!r}: give some of {', '.join(GUARDED)}")
        if not args.suite or not args.output or args.tasks <= 0:
            raise AutoshardError("give --suite NAME -o OUT (--tasks >= 1), or --summary FILE")
        done = measured_so_far(Path(args.output))  # refused before any stage runs
        tasks, settings, comm = suite_inputs(args.suite, args.split,
                                             Path(args.workdir or f"guard-k-{args.suite}"))
        rows = measure(tasks[:args.tasks], settings, comm, Path(args.output), done, planners)
        print("\n".join(summarise({args.output: rows})))
    except (AutoshardError, OSError, ValueError) as e:
        print(f"guard_k: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
