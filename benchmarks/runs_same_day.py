"""Two bench runs' plans of the same tasks timed side by side on one day: did a planner's plans change for
the better between the runs, or did the host?

Run: .venv/bin/python benchmarks/runs_same_day.py RUN_A RUN_B -o rows.json [--algos rl,search] [--rounds 3]
     .venv/bin/python benchmarks/runs_same_day.py --summary rows.json

RUN_A, RUN_B: bench results files (``DIR/bench/results.json``, or gzipped in ``benchmarks/runs/``) of the same
suite, e.g. one before and one after a change of planner defaults. Why: comparing two runs' ratios to their
own heuristics mixes the change with the day (the same heuristic plans of DLRM-10 (8) measured 0-16% apart
between stops 51 and 63), and ``pooled_runs.py`` removes only each run's level, not its per-task noise.
Here, for every task both runs measured (the same task, by its JSON), the guard heuristics' plans (RUN_B's),
and each of ``--algos``' plans of both runs (one timing for a plan both returned) are timed together
(``hardware.evaluator.evaluate_plans``: ``--rounds`` rounds, the least kept a device, RUN_B's measure
settings; collectives from RUN_B's comm fit for every plan alike: modelled). A row per task is written to
``-o`` after each (resumable: a re-run continues after the tasks there; a file holding anything else is
refused before any timing).

The summary, per algorithm: A's plans over B's, paired per task, with a 95% bootstrap interval over the
tasks (``costs.metrics.geomean_interval``), on how many tasks A's measured > 1% below / above B's (the same
plan counts as neither), and each run's plans over the best fixed heuristic re-timed here (the guard
heuristic of lowest geometric-mean cost over these rows), so neither ratio carries the oracle pick's bias,
on a second line with each one's 95% bootstrap interval over the tasks and its verdict (better / worse only
where the interval excludes 1).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from autoshard.bench.summary import geomean, verdict
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.metrics import geomean_interval
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import evaluate_plans
from autoshard.hardware.kernel import MeasureSettings
from autoshard.io import read_json, write_json
from autoshard.plan import Plan
from autoshard.planners.guard import GUARD_HEURISTICS, GUARDED
from autoshard.tasks import Task

SAME = "same"
"""A row's label for an algorithm whose two plans are identical: one timing serves both."""


def _placements(plan: Plan) -> str:
    return json.dumps(plan.to_json()["tables"], sort_keys=True)


def _plans(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["algorithm"]: a["plan"] for a in result["results"] if a.get("plan") and a.get("measured")}


def paired_tasks(run_a: dict[str, Any], run_b: dict[str, Any],
                 algos: tuple[str, ...]) -> list[tuple[Task, dict[str, Plan]]]:
    """Per task both runs measured (matched by the task's JSON), in RUN_B's order: the plans to time, by
    label (each guard heuristic's, RUN_B's; ``A:<algo>`` and ``B:<algo>``, or ``same:<algo>`` where the two
    runs returned the same placements)."""
    tasks_a = {json.dumps(t["task"], sort_keys=True): t for t in run_a.get("tasks") or []}
    out = []
    for t in run_b.get("tasks") or []:
        other = tasks_a.get(json.dumps(t["task"], sort_keys=True))
        if other is None:
            continue
        plans_a, plans_b = _plans(other), _plans(t)
        if not all(h in plans_b for h in GUARD_HEURISTICS) or not all(a in plans_a and a in plans_b
                                                                      for a in algos):
            continue
        labelled = {h: Plan.from_json(plans_b[h]) for h in GUARD_HEURISTICS}
        for algo in algos:
            a, b = Plan.from_json(plans_a[algo]), Plan.from_json(plans_b[algo])
            if _placements(a) == _placements(b):
                labelled[f"{SAME}:{algo}"] = b
            else:
                labelled.update({f"A:{algo}": a, f"B:{algo}": b})
        out.append((Task.from_json(t["task"]), labelled))
    return out


def _check(rows: Any, path: str) -> list[dict[str, Any]]:
    if not isinstance(rows, list) or not all(isinstance(r, dict) and "task" in r and isinstance(
            r.get("measured"), dict) for r in rows):
        raise AutoshardError(f"{path} does not hold this script's rows (a list of tasks with 'measured' "
                             "costs); give a file it wrote with -o")
    return rows


def _read_rows(path: Path) -> list[dict[str, Any]]:
    return _check(read_json(path), str(path))


def _read_run(path: str) -> dict[str, Any]:
    """A bench results file; anything else is refused in one line."""
    run = read_json(path)
    tasks = run.get("tasks") if isinstance(run, dict) else None
    if not isinstance(tasks, list) or not all(isinstance(t, dict) and isinstance(t.get("task"), dict)
                                              and isinstance(t.get("results"), list) for t in tasks):
        raise AutoshardError(f"{path} is not a bench results file (DIR/bench/results.json, or gzipped in "
                             "benchmarks/runs/)")
    return run


def measure(pairs: list[tuple[Task, dict[str, Plan]]], settings: MeasureSettings, comm: AlphaBeta, out: Path,
            rows: list[dict[str, Any]], rounds: int) -> list[dict[str, Any]]:
    """Time each task's plans together after ``rows`` (an interrupted run's), writing ``out`` after each."""
    rows = list(rows)
    done = {r["task"] for r in rows}
    for task, plans in pairs:
        if task.name in done:
            continue
        # one timing a distinct placement (the learned planners often return the same plan)
        key_of = {lab: _placements(p) for lab, p in plans.items()}
        distinct: dict[str, Plan] = {}
        for lab, key in key_of.items():
            distinct.setdefault(key, plans[lab])
        keys = list(distinct)
        costs = evaluate_plans(task, [distinct[k] for k in keys], settings, comm, rounds=rounds)
        by_key = {k: c.plan_ms for k, c in zip(keys, costs)}
        rows.append({"task": task.name, "measured": {lab: by_key[key_of[lab]] for lab in plans}})
        write_json(out, rows)
        print(f"{task.name}: {len(keys)} distinct plans of {len(plans)} timed", flush=True)
    return rows


def _cost(row: dict[str, Any], run: str, algo: str) -> float | None:
    m = row["measured"]
    return m.get(f"{SAME}:{algo}", m.get(f"{run}:{algo}"))


def summary_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Per algorithm: A over B paired, and each over the best fixed heuristic re-timed here."""
    rows = [r for r in rows if all(h in r["measured"] for h in GUARD_HEURISTICS)]
    if not rows:
        raise AutoshardError("no timed tasks with the guard heuristics' plans; run the measurement first")
    fixed = min(GUARD_HEURISTICS, key=lambda h: (geomean([r["measured"][h] for r in rows]), h))
    algos = [a for a in GUARDED if any(_cost(r, "A", a) is not None for r in rows)]
    out = [f"{len(rows)} tasks; best fixed heuristic (re-timed here) {fixed}"]
    for algo in algos:
        both = [(a, b, r["measured"][fixed]) for r in rows
                for a, b in [(_cost(r, "A", algo), _cost(r, "B", algo))] if a is not None and b is not None]
        ratios = [a / b for a, b, _ in both]
        interval = " [{:.3f}, {:.3f}]".format(*geomean_interval(ratios)) if len(ratios) > 1 else ""
        same = sum(f"{SAME}:{algo}" in r["measured"] for r in rows)
        over_a, over_b = geomean([a / f for a, _, f in both]), geomean([b / f for _, b, f in both])
        out.append(f"  {algo}: A / B {geomean(ratios):.3f}{interval} over {len(both)} tasks "
                   f"(the same plan on {same}; A > 1% below B on {sum(x < 0.99 for x in ratios)}, above on "
                   f"{sum(x > 1.01 for x in ratios)}); / {fixed}: A {over_a:.3f}, B {over_b:.3f}")
        if len(both) > 1:  # a re-timing resolves only with an interval (the line above is stop 63's format)
            spans = [geomean_interval([x / f for x, f in pairs]) for pairs in
                     ([(a, f) for a, _, f in both], [(b, f) for _, b, f in both])]
            a_span, b_span = (f"[{lo:.3f}, {hi:.3f}] {verdict(lo, hi)}" for lo, hi in spans)
            out.append(f"    / {fixed}, 95% interval over the tasks: A {a_span}, B {b_span}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", metavar="RUN", help="RUN_A RUN_B: two bench results files")
    ap.add_argument("-o", "--output", help="where to write the rows (rewritten after each task; a re-run "
                                           "continues after the tasks there)")
    ap.add_argument("--algos", default=",".join(GUARDED),
                    help=f"comma-separated planners whose plans are compared (default {','.join(GUARDED)})")
    ap.add_argument("--rounds", type=int, default=3, help="measurement rounds a task (the least kept)")
    ap.add_argument("--summary", metavar="FILE", help="summarise rows this script wrote instead of timing")
    args = ap.parse_args(argv)
    try:
        if args.summary:
            print("\n".join(summary_lines(_read_rows(Path(args.summary)))))
            return 0
        algos = tuple(a.strip() for a in args.algos.split(",") if a.strip())
        if not algos or set(algos) - set(GUARDED):
            raise AutoshardError(f"--algos {args.algos!r}: give some of {', '.join(GUARDED)}")
        if len(args.runs) != 2 or not args.output or args.rounds < 1:
            raise AutoshardError("give RUN_A RUN_B -o OUT (--rounds >= 1), or --summary FILE")
        out = Path(args.output)
        done = _read_rows(out) if out.is_file() else []  # refused before any timing
        run_a, run_b = (_read_run(p) for p in args.runs)
        if "comm" not in run_b or "measure_settings" not in run_b:
            raise AutoshardError(f"{args.runs[1]} has no comm fit or measure settings; give a finished bench "
                                 "run's results")
        pairs = paired_tasks(run_a, run_b, algos)
        if not pairs:
            raise AutoshardError("the two runs share no task with the heuristics' and every --algos' plans; "
                                 "give two runs of the same suite")
        rows = measure(pairs, MeasureSettings.from_json(run_b["measure_settings"]),
                       AlphaBeta.from_json(run_b["comm"]), out, done, args.rounds)
        print("\n".join(summary_lines(rows)))
    except (AutoshardError, OSError, ValueError) as e:
        print(f"runs_same_day: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
