"""How much does a bench verdict depend on the run's comm fit? Re-price one bench run's measured plans with
the all-to-all models other runs fitted on the same host, and summarise each time.

    .venv/bin/python benchmarks/comm_sensitivity.py benchmarks/runs/s70-amd-dlrm-10-4-r6-torchrec.json.gz \
        benchmarks/runs/s6*-amd-*.json.gz benchmarks/runs/s70-amd-*.json.gz

The first file is the run; the others lend their ``comm`` (bench results files of another device count are
skipped, said so), or are ``comm_model.json`` files (``profile-comm``; taken as given, named by their
directory).

On a host with fewer cores than ranks the bench models the all-to-alls (alpha-beta, fitted at the start
of every run from a few seconds of gloo timings; ``Context.collectives``), so the collectives part of every
plan's measured step is the fit's: a run fitted on a busier minute charges every plan more per byte and per
collective. Here each plan's kernels (its measured rounds) stay as they were and only its collectives are
re-priced: ``plan_ms - old collectives + new collectives`` in every round. The plans stay those the planners
chose under the run's own fit (what a planner would do under another fit is not measured here).

Prints, per comm model: its latency and bandwidth, the collectives' share of the best fixed heuristic's step,
and each learned planner's geometric-mean ratio to the best fixed heuristic with its interval (the bench's
``summarize``), so one can read whether a verdict holds across the fits this host has given.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from autoshard.bench.summary import best_fixed_heuristic, geomean, summarize, task_costs
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.step import plan_collectives
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import UNRECORDED_ROUND_STATISTIC
from autoshard.io import read_json
from autoshard.pipeline.results import AlgoResult, TaskResult, task_results_of
from autoshard.planners.base import is_heuristic


def bench_run(path: str, run: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], list[TaskResult], AlphaBeta]:
    """A bench run read once (or ``run``, already read from ``path``): its fields, its measured tasks and its
    comm model; one-line error where the file has no comm model or no readable tasks."""
    run = read_json(path, kind="autoshard.bench") if run is None else run
    tasks = task_results_of(run, path)
    try:
        comm = AlphaBeta.from_json(run["comm"])
    except (KeyError, TypeError, ValueError) as e:
        raise AutoshardError(f"{path}: no comm model in this bench results file ({e!r})") from None
    return run, tasks, comm


def devices_of(tasks: list[TaskResult]) -> int:
    return tasks[0].task.num_devices if tasks else 0


def repriced(result: AlgoResult, task: Any, comm: AlphaBeta) -> AlgoResult:
    """``result`` with its step's collectives priced by ``comm`` in its cost and every round (its kernels as
    measured). A result without a measured cost, or measured before the step model (no collectives), is
    returned as it was."""
    m = result.measured
    if m is None or result.plan is None or not m.collectives:
        return result
    steps = plan_collectives(task, comm, result.plan.device_shards(task))
    delta = sum(c.ms for c in steps) - m.collectives_ms
    return replace(result, measured=replace(m, collectives=steps),
                   rounds_ms=tuple(v + delta for v in result.rounds_ms),
                   confirm_rounds_ms=tuple(v + delta for v in result.confirm_rounds_ms))


def reprice_run(tasks: list[TaskResult], comm: AlphaBeta) -> list[TaskResult]:
    return [replace(t, results=tuple(repriced(r, t.task, comm) for r in t.results)) for t in tasks]


def comm_share(tasks: list[TaskResult], algorithm: str) -> float | None:
    """Geometric mean over tasks of the collectives' share of ``algorithm``'s measured step."""
    shares = [r.measured.collectives_ms / r.measured.plan_ms for t in tasks for r in t.results
              if r.algorithm == algorithm and r.measured is not None and r.measured.plan_ms > 0]
    return geomean(shares)


def rows(tasks: list[TaskResult], statistic: str) -> tuple[str | None, list[tuple[str, str]]]:
    """The best fixed heuristic, and per learned planner its "ratio [low, high]" to it."""
    fixed = best_fixed_heuristic([task_costs(t) for t in tasks])
    algos = sorted({r.algorithm for t in tasks for r in t.results if not is_heuristic(r.algorithm)})
    out = []
    for s in summarize(tasks, algos, statistic=statistic):
        c = s.vs_best_fixed
        if c is None or c.ratio is None:
            continue
        interval = f" [{c.low:.3f}, {c.high:.3f}]" if c.low is not None and c.high is not None else ""
        out.append((s.algorithm, f"{c.ratio:.3f}{interval}"))
    return fixed, out


def _name(path: str) -> str:
    return Path(path).name.removesuffix(".gz").removesuffix(".json")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="the bench results file whose plans are re-priced (.json or .json.gz)")
    p.add_argument("others", nargs="*",
                   help="bench results files lending their comm fits (same device count)")
    args = p.parse_args(argv)
    try:
        meta, tasks, own = bench_run(args.run)
        devices = devices_of(tasks)
        if meta.get("collectives") == "measure":
            raise AutoshardError(f"{args.run}: its collectives were timed on D processes, not modelled; "
                                 "re-pricing applies to runs whose collectives the comm fit priced")
        statistic = meta.get("round_statistic", UNRECORDED_ROUND_STATISTIC)
        fits = [(f"{_name(args.run)} (its own)", own)]
        for path in args.others:
            if Path(path).resolve() == Path(args.run).resolve():
                continue
            other = read_json(path)
            if other.get("kind") == "autoshard.comm_model":
                fits.append((Path(path).parent.name, AlphaBeta.load(path)))  # its checks, one line each
                continue
            if other.get("kind") != "autoshard.bench":
                raise AutoshardError(f"{path}: neither a bench results file nor a comm_model.json")
            _, other_tasks, comm = bench_run(path, other)
            d = devices_of(other_tasks)
            if d != devices:
                print(f"comm_sensitivity: skipped {path}: {d} devices, the run has {devices}",
                      file=sys.stderr)
                continue
            fits.append((_name(path), comm))
    except AutoshardError as e:
        print(f"comm_sensitivity: error: {e}", file=sys.stderr)
        return 2
    if not tasks:
        print(f"comm_sensitivity: error: {args.run}: no measured tasks", file=sys.stderr)
        return 2
    table = []
    for name, comm in fits:
        priced = reprice_run(tasks, comm)
        fixed, ratios = rows(priced, statistic)
        share = comm_share(priced, fixed) if fixed else None
        cells = ", ".join(f"{a} {r}" for a, r in ratios)
        table.append(f"| {name} | {comm.alpha_ms:.2f} | {comm.bytes_per_ms / 1e6:.3f} | {fixed} | "
                     f"{'-' if share is None else f'{share:.2f}'} | {cells} |")
    print(f"Plans of {args.run} ({len(tasks)} tasks, {devices} devices), kernels as measured, collectives "
          "re-priced with each fit:")
    print("| comm fit from | alpha ms | GB/s | best fixed heuristic | its collectives share | "
          "learned planners / best fixed heuristic [95% interval] |")
    print("|---|---|---|---|---|---|")
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
