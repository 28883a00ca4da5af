"""Does a learned planner's risk objective (mean + risk_k x spread) lose plans the mean would find, by
measurement?

    .venv/bin/python benchmarks/risk_objective.py out/s60/dlrm-50-8-descent --tasks 10 -o out/s61/risk.json
    .venv/bin/python benchmarks/risk_objective.py --suite dlrm-20-4 --split train --tasks 10 -o risk.json
    .venv/bin/python benchmarks/risk_objective.py --planner neuroshard --suite dlrm-20-4 -o risk-ns.json
    .venv/bin/python benchmarks/risk_objective.py \
        --summary benchmarks/runs/room/s58-amd-risk-objective-dlrm-50-8.json [more files: pooled too]

For each of a bench run's first test tasks (``RUN/test_tasks.json``, that run's measure settings and comm
fit), or, with ``--suite NAME``, of that suite's ``--split`` tasks (its pool, split, tasks and comm fit made
by the bench's own pipeline stages in ``--workdir``, cached there, the suite's measure settings), the four
guard heuristics and ``--planner`` (default ``search``; ``neuroshard``, ``ilp``, ``rl``) four ways plan it
with the shipped default cost model (seed 0, 10 s): guard off at the model's ``risk_k`` (``search_risk``),
guard off at the mean (``risk=0``, ``search_mean``), guarded at risk_k (``search_guarded``, search's default
until stop 59, still the other planners') and guarded at the mean (``search_mean_guarded``, search's default
since: ``planners.local_search.SEARCH_RISK``); another planner's rows are named after it
(``neuroshard_risk``, ...). Every task's plans are then timed side by side
(``hardware.evaluator.evaluate_plans``: 3 rounds, a fresh evaluator each, the least kept per device;
collectives from the comm fit: modelled), one task after another. The rows (measured and predicted step per
plan) are written after each task, so an interrupted run keeps what it timed, and a re-run with the same
``-o`` continues after the tasks already there. ``--split train`` gives tasks none of the bench's test tasks
share a table with: a k chosen there is chosen on held-out data, not on the tasks it is then judged on.

``--summary`` reads such a file: each search row's geometric mean over the tasks against the best fixed
heuristic (the one of lowest geometric-mean cost there) and the per-task best, and the mean objective's
plans over the risk objective's, paired per task, with the bench's 95% bootstrap interval over the tasks
(``bench.summary.compare``; one measurement a plan, so no rounds are resampled). Given several files (one
per suite), it also pools the paired ratios over all their tasks.

The guard's k, replayed (since stop 61): each task's row also records the guard's terms for the planner's
plan at the mean (the guard-off ``*_mean`` row): H*, the heuristic plan the model's mean prices cheapest,
the predicted gain over it and the margin at k = 1 (``planners.guard.guard_reference``,
``plan_spread_ms``; the margin scales with k). ``--summary`` then replays the guard at other k on the
measured plans: at k the row is the planner's plan where gain > k x margin, else H*'s (k = 0: the guard
off). It weighs the returned plan only, not ilp's and rl's alternatives, so at k = 1 it can differ from
the ``*_mean_guarded`` row (the summary counts where it matches). ``--annotate FILE`` adds the terms to a
file measured without them, re-planning each task's heuristics and the ``*_mean`` row (no timing); a task
whose re-planned plan prices differently from the file's (another comm fit, a time-limited solve that
ended elsewhere) is left without them and counted.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from autoshard.bench.suites import get_suite
from autoshard.bench.summary import best_fixed_heuristic, compare
from autoshard.costs.base import plan_cost
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned import LearnedCostModel
from autoshard.costs.loading import SHIPPED_COST_MODEL
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import evaluate_plans
from autoshard.hardware.kernel import MeasureSettings
from autoshard.io import read_json, write_json
from autoshard.plan import Plan
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.planners.guard import guard_reference, plan_spread_ms
from autoshard.tasks import Task, load_tasks

HEURISTICS = ("dim_greedy", "lookup_greedy", "size_greedy", "size_lookup_greedy")
PLANNERS = ("search", "neuroshard", "ilp", "rl")
"""The learned planners ``--planner`` takes (each plans at ``--option risk=K`` and behind the guard)."""
AT_RISK_K = "risk_k"
ROW_OPTIONS = (("risk", {"guard": 0, "risk": AT_RISK_K}), ("mean", {"guard": 0, "risk": 0}),
               ("guarded", {"risk": AT_RISK_K}), ("mean_guarded", {"risk": 0}))
"""Each planner row's suffix and the planner options it runs with (``AT_RISK_K``: the model's ``risk_k``,
given explicitly: search's own default is the mean since stop 59, ``planners.local_search.SEARCH_RISK``)."""
PAIR_SUFFIXES = (("mean", "risk"), ("mean_guarded", "guarded"), ("risk", "guarded"), ("mean", "mean_guarded"))
"""Paired ratios the summary prints: the mean over risk_k, guard off and on; guard off over on, at risk_k and
at the mean."""
DEFAULT_MODEL = str(SHIPPED_COST_MODEL)
REPLAY_KS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)
"""The guard's k the summary replays (k = 1 was the shipped ``planners.guard.DEFAULT_GUARD_K`` until stop 62,
0.5 since: ``benchmarks/guard_k.py``, which also follows ilp's and rl's alternatives)."""


def planner_rows(planner: str = "search") -> tuple[tuple[str, dict[str, Any]], ...]:
    """``planner``'s four rows: (label, planner options)."""
    return tuple((f"{planner}_{suffix}", extra) for suffix, extra in ROW_OPTIONS)


def planner_pairs(planner: str = "search") -> tuple[tuple[str, str], ...]:
    return tuple((f"{planner}_{a}", f"{planner}_{b}") for a, b in PAIR_SUFFIXES)


SEARCH_ROWS = planner_rows("search")


def run_inputs(run: Path) -> tuple[list[Task], MeasureSettings, AlphaBeta]:
    """A finished bench run's test tasks, measure settings and comm fit."""
    for need in ("test_tasks.json", "costs/comm_model.json", "bench/results.json"):
        if not (run / need).is_file():
            raise AutoshardError(f"{run} has no {need}; give the output directory of a finished bench run")
    results = read_json(run / "bench" / "results.json", kind="autoshard.bench")
    if "measure_settings" not in results:
        raise AutoshardError(f"{run}/bench/results.json records no measure settings; give a run of the "
                             "measured evaluator")
    settings = MeasureSettings.from_json(results["measure_settings"])
    comm = AlphaBeta.load(str(run / "costs" / "comm_model.json"))
    return load_tasks(str(run / "test_tasks.json")), settings, comm


def suite_inputs(name: str, split: str, workdir: Path) -> tuple[list[Task], MeasureSettings, AlphaBeta]:
    """A suite's ``split`` tasks, its measure settings and a comm fit measured here, made by the bench's own
    stages (pool, split, tasks, comm) in ``workdir`` and cached there as ``autoshard bench`` caches them."""
    from autoshard.pipeline.context import Context, PipelineConfig
    from autoshard.pipeline.data import stage_pool, stage_split, stage_tasks
    from autoshard.pipeline.profiling import stage_comm

    ctx = Context(PipelineConfig(suite=get_suite(name)), workdir,
                  say=lambda line: print(line, file=sys.stderr, flush=True))
    k_split = stage_split(ctx, stage_pool(ctx))
    stage_tasks(ctx, k_split, split)
    stage_comm(ctx)
    return load_tasks(str(workdir / f"{split}_tasks.json")), ctx.measure_settings(), ctx.comm_model()


def measure(tasks: list[Task], settings: MeasureSettings, comm: AlphaBeta, out: Path,
            rows: list[dict[str, Any]], model_path: str = DEFAULT_MODEL,
            planner: str = "search") -> list[dict[str, Any]]:
    """Plan and time ``tasks`` (module docstring) with ``planner``'s four rows after ``rows``, an interrupted
    run's (``measured_so_far``), whose tasks are not measured again."""
    model = LearnedCostModel.load(model_path, allow_other_hardware=True).with_comm(comm)
    labels = [*HEURISTICS, *(label for label, _ in planner_rows(planner))]
    planners = [(h, {}) for h in HEURISTICS] + [
        (planner, {**extra, "risk": model.risk_k} if extra.get("risk") == AT_RISK_K else extra)
        for _, extra in planner_rows(planner)]
    rows = list(rows)
    done = {r.get("task") for r in rows}
    for task in tasks:
        if task.name in done:
            continue
        start = time.perf_counter()
        plans = [run_planner(make_planner(name, PlannerOptions(seed=0, cost_model=model, time_limit_s=10,
                                                               extra=extra)), task)
                 for name, extra in planners]
        costs = evaluate_plans(task, plans, settings, comm, rounds=3)
        by_label = dict(zip(labels, plans))
        rows.append({"task": task.name,
                     "measured": {lab: c.plan_ms for lab, c in zip(labels, costs)},
                     "predicted": {lab: plan_cost(model, task, p).plan_ms for lab, p in zip(labels, plans)},
                     "guard_terms": guard_terms(task, by_label[f"{planner}_mean"],
                                                {h: by_label[h] for h in HEURISTICS}, model)})
        write_json(out, rows)
        print(f"{task.name}: " + " ".join(f"{k} {v:.2f}" for k, v in rows[-1]["measured"].items())
              + f" ({time.perf_counter() - start:.0f} s)", flush=True)
    return rows


def guard_terms(task: Task, plan: Plan, heuristics: dict[str, Plan], model: Any) -> dict[str, Any]:
    """The guard's terms for ``plan`` (module docstring): H*'s name, the predicted gain over it (ms) and the
    margin at k = 1 (ms), by ``model``'s mean as the guard prices them."""
    best, best_key, best_spread = guard_reference(task, heuristics, model)
    own_ms = plan_cost(model, task, plan).plan_ms
    margin = math.hypot(plan_spread_ms(model, task, plan, own_ms), best_spread)
    return {"heuristic": best, "gain_ms": best_key[0] - own_ms, "margin_ms": margin}


def annotate(rows: list[dict[str, Any]], tasks: list[Task], comm: AlphaBeta, planner: str,
             model_path: str = DEFAULT_MODEL) -> tuple[list[dict[str, Any]], int]:
    """``rows`` with ``guard_terms`` added where missing, re-planning each such task's heuristics and
    ``planner``'s ``*_mean`` row as ``measure`` plans them (no timing), and the number of tasks left without
    them because the re-planned plan prices differently from the row's prediction (relative 1e-6)."""
    model = LearnedCostModel.load(model_path, allow_other_hardware=True).with_comm(comm)
    by_name = {t.name: t for t in tasks}
    mean_extra = dict(ROW_OPTIONS)["mean"]
    out, unmatched = [], 0
    for row in rows:
        task = by_name.get(row.get("task"))
        if "guard_terms" in row:
            out.append(row)
            continue
        if task is None:
            raise AutoshardError(f"the file's task {row.get('task')!r} is not among the given tasks; give "
                                 "the suite and split (or the run) it was measured on")
        options = PlannerOptions(seed=0, cost_model=model, time_limit_s=10)
        heuristics = {h: run_planner(make_planner(h, options), task) for h in HEURISTICS}
        own = run_planner(make_planner(planner, replace(options, extra=mean_extra)), task)
        expected = float(row["predicted"][f"{planner}_mean"])
        if not math.isclose(plan_cost(model, task, own).plan_ms, expected, rel_tol=1e-6):
            unmatched += 1
            out.append(row)
            continue
        out.append({**row, "guard_terms": guard_terms(task, own, heuristics, model)})
        print(f"{task.name}: {out[-1]['guard_terms']}", file=sys.stderr, flush=True)
    return out, unmatched


Replayed = tuple[dict[str, tuple[float, tuple[float, ...]]], dict[float, bool]]


def replayed(rows: list[dict[str, Any]], planner: str) -> list[Replayed]:
    """Each task with guard terms: its costs as {label: (cost, its one round)}, ``guard k=K`` added for each
    of ``REPLAY_KS`` (module docstring), and for each k whether the planner's plan was kept."""
    out = []
    for row in rows:
        terms, measured = row.get("guard_terms"), row["measured"]
        if not terms:
            continue
        own, ref = float(measured[f"{planner}_mean"]), float(measured[terms["heuristic"]])
        costs = {lab: (float(ms), (float(ms),)) for lab, ms in measured.items()}
        kept = {k: k == 0 or terms["gain_ms"] > k * terms["margin_ms"] for k in REPLAY_KS}
        for k in REPLAY_KS:
            cost = own if kept[k] else ref
            costs[f"guard k={k:g}"] = (cost, (cost,))
        out.append((costs, kept))
    return out


def replay_lines(replays: list[Replayed], planner: str, prefix: str = "") -> list[str]:
    """The replayed guard's rows: each k's count of the planner's plans kept and its cost over the k = 1
    replay, paired per task with the bench's interval; and where the k = 1 replay matched the guarded row."""
    if not replays:
        return []
    tasks = [costs for costs, _ in replays]
    guarded = f"{planner}_mean_guarded"
    same = sum(math.isclose(t["guard k=1"][0], t[guarded][0]) for t in tasks)
    out = [f"{prefix}guard replayed on {len(tasks)} tasks (k = 1 gives the {guarded} row's cost on {same})"]
    for k in REPLAY_KS:
        label = f"guard k={k:g}"
        c = compare(tasks, label, ["guard k=1"])
        interval = f" [{c.low:.3f}, {c.high:.3f}]" if c.low is not None and c.high is not None else ""
        out.append(f"{prefix}{label}: its own plan on {sum(kept[k] for _, kept in replays)}; "
                   f"/ guard k=1: {c.ratio:.3f}{interval}")
    return out


def rows_planner(rows: list[dict[str, Any]]) -> str:
    """Which learned planner a file's rows measured (search where none of ``PLANNERS``' rows are there)."""
    first = rows[0] if isinstance(rows, list) and rows and isinstance(rows[0], dict) else {}
    measured = first.get("measured")
    labels = measured if isinstance(measured, dict) else {}
    return next((p for p in PLANNERS if f"{p}_mean_guarded" in labels), "search")


def _measured(rows: list[dict[str, Any]],
              planner: str = "search") -> list[dict[str, tuple[float, tuple[float, ...]]]]:
    """Each task's {label: (cost, its one round)}, the shape ``bench.summary.compare`` reads; refused unless
    every task has the heuristics' and ``planner``'s rows."""
    if not rows:
        raise AutoshardError("no tasks in the file; run the measurement first")
    try:
        tasks = [{label: (float(ms), (float(ms),)) for label, ms in r["measured"].items()} for r in rows]
    except (KeyError, TypeError, AttributeError, ValueError):
        raise AutoshardError("the file does not hold the rows this script writes (a list of tasks, each "
                             "with its 'measured' plan costs); give a file written by -o") from None
    missing = sorted({*HEURISTICS, *(label for label, _ in planner_rows(planner))} - set(tasks[0]))
    if missing:
        raise AutoshardError(f"the file's tasks have no {', '.join(missing)}; give a file written by -o")
    return tasks


def _pair_lines(tasks: list[dict[str, tuple[float, tuple[float, ...]]]], planner: str,
                prefix: str = "") -> list[str]:
    out = []
    for a, b in planner_pairs(planner):
        c = compare(tasks, a, [b])
        lower = sum(t[a][0] < t[b][0] for t in tasks)
        interval = (f"[{c.low:.3f}, {c.high:.3f}]" if c.low is not None and c.high is not None
                    else "(no interval: fewer than 2 tasks)")
        out.append(f"{prefix}{a} / {b}: {c.ratio:.3f} {interval}, lower on {lower} of {len(tasks)} tasks")
    return out


def summary_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The summary of ``--summary`` (module docstring), one line per figure; the ratios and the interval are
    the bench's (``bench.summary.compare``), each plan with its one measurement (no rounds to resample)."""
    planner = rows_planner(rows)
    tasks = _measured(rows, planner)
    fixed = best_fixed_heuristic(tasks)
    out = [f"{len(rows)} tasks; best fixed heuristic {fixed}"]
    for label, _ in planner_rows(planner):
        out.append(f"{label}: {compare(tasks, label, [fixed]).ratio:.3f} of the best fixed heuristic, "
                   f"{compare(tasks, label, HEURISTICS).ratio:.3f} of the per-task best")
    return out + _pair_lines(tasks, planner) + replay_lines(replayed(rows, planner), planner)


def pooled_lines(files: list[list[dict[str, Any]]]) -> list[str]:
    """The paired ratios over every task of several files (one per suite): the best fixed heuristic differs
    between suites, so only the pairs, each task against itself, are pooled; files of different planners
    are refused."""
    planners = {rows_planner(rows) for rows in files}
    if len(planners) > 1:
        raise AutoshardError(f"the files measured different planners ({', '.join(sorted(planners))}); pool "
                             "files of one planner")
    (planner,) = planners
    tasks = [t for rows in files for t in _measured(rows, planner)]
    replays = [t for rows in files for t in replayed(rows, planner)]
    return [f"pooled over {len(files)} files, {len(tasks)} tasks", *_pair_lines(tasks, planner, "pooled "),
            *replay_lines(replays, planner, "pooled ")]


def measured_so_far(out: Path, planner: str = "search") -> list[dict[str, Any]]:
    """The rows an interrupted run of ``planner`` left in ``out`` ([] if none); an ``out`` holding something
    else (another planner's rows included) is refused (AutoshardError), not overwritten."""
    rows: list[dict[str, Any]] = read_rows(str(out)) if out.is_file() else []
    if rows:
        _measured(rows, planner)
    return rows


def read_rows(path: str) -> list[dict[str, Any]]:
    try:
        return json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise AutoshardError(f"{path} is not JSON ({e}); give a file written by -o") from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", nargs="?", help="a finished bench run's output directory (`autoshard bench -o`)")
    ap.add_argument("--suite", help="instead of RUN: this suite's tasks, made here by the bench's stages")
    ap.add_argument("--split", choices=["train", "test"], default="train",
                    help="with --suite: its train tasks (default; held out from its test tasks) or test")
    ap.add_argument("--workdir", help="with --suite: where its stages are cached (default risk-SUITE)")
    ap.add_argument("--tasks", type=int, default=10, help="how many of the tasks (first ones)")
    ap.add_argument("--planner", choices=PLANNERS, default="search",
                    help="the learned planner whose risk objective is measured (default search)")
    ap.add_argument("-o", "--output", help="where to write the rows (JSON, rewritten after each task; a "
                                           "re-run continues after the tasks there)")
    ap.add_argument("--summary", nargs="+", metavar="FILE",
                    help="summarise files this script wrote instead of measuring (several: pooled too)")
    ap.add_argument("--annotate", metavar="FILE",
                    help="add the guard's terms to FILE's tasks (RUN or --suite: the tasks it measured), "
                         "re-planning them without timing; FILE is rewritten")
    args = ap.parse_args(argv)
    try:
        if args.summary:
            files = [read_rows(f) for f in args.summary]
            lines = [line for rows in files for line in summary_lines(rows)]
            print("\n".join(lines + (pooled_lines(files) if len(files) > 1 else [])))
            return 0
        if bool(args.run) == bool(args.suite) or not (args.output or args.annotate) or args.tasks <= 0:
            raise AutoshardError("give RUN -o OUT or --suite NAME -o OUT (--tasks >= 1), --annotate FILE "
                                 "with RUN or --suite NAME, or --summary FILE")
        if args.annotate:
            rows = read_rows(args.annotate)
            planner = rows_planner(rows)
            _measured(rows, planner)  # refused before any stage runs
        else:
            done = measured_so_far(Path(args.output), args.planner)  # refused before any stage runs
        if args.suite:
            tasks, settings, comm = suite_inputs(args.suite, args.split,
                                                 Path(args.workdir or f"risk-{args.suite}"))
        else:
            tasks, settings, comm = run_inputs(Path(args.run))
        if args.annotate:
            rows, unmatched = annotate(rows, tasks, comm, planner)
            write_json(args.annotate, rows)
            print(f"{sum('guard_terms' in r for r in rows)} of {len(rows)} tasks have the guard's terms; "
                  f"{unmatched} re-planned differently, left without", file=sys.stderr)
        else:
            rows = measure(tasks[:args.tasks], settings, comm, Path(args.output), done, planner=args.planner)
        print("\n".join(summary_lines(rows)))
    except (AutoshardError, OSError, ValueError, KeyError) as e:
        print(f"risk_objective: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
