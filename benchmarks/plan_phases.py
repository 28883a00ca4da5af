"""Where a guarded learned planner's time goes, phase by phase, on one task, without a profiler: the
policy's episodes (rl's ``_place``), the sharding moves and descent after them (``planners.finish.finish``),
the guard's heuristic plans and its pick (``planners.guard.guard_plan``); the whole ``run_planner`` call.

Run: .venv/bin/python benchmarks/plan_phases.py --task TASKS.json [--algo rl] [--repeats 5]

The first plan in a process pays one-off costs (lookup samples of the row-cut tables, the stacked ensemble),
so one warm-up plan runs first (``autoshard plan`` pays them). Each of ``--repeats`` plans is then timed;
printed per phase: the least and the median over the repeats (a shared 2-vCPU host drifts by 20% within
minutes: compare two checkouts by running this script on each in turn, several times, ``PYTHONPATH=OTHER/src``
for the other), and the plan's predicted step, which must not move.
Stops 49 and 50 (docs/benchmarks.md) ran it on stop 45's 856-table x 128-device task.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from autoshard.costs.base import plan_cost
from autoshard.errors import AutoshardError
from autoshard.planners import finish as finish_module
from autoshard.planners import guard as guard_module
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.planners.guard import mean_model
from autoshard.tasks import load_tasks

PHASES = ("episodes", "finish", "heuristics", "guard_plan")


@contextmanager
def timing(owner: Any, name: str, phase: str, totals: dict[str, float]) -> Iterator[None]:
    """``owner.name`` (a function or method) adds its calls' wall time to ``totals[phase]`` inside the block,
    and is restored after it (an instance's method by removing the wrapper again)."""
    inner = getattr(owner, name)
    own = name in vars(owner)  # a module's function or an instance's own attribute, not a class's method

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            totals[phase] += time.perf_counter() - t0

    setattr(owner, name, timed)
    try:
        yield
    finally:
        if own:
            setattr(owner, name, inner)
        else:
            delattr(owner, name)


def timed_plan(planner: Any, task: Any) -> tuple[dict[str, float], float]:
    """(seconds per phase and in all, the plan's predicted step by the planner's model) of one plan."""
    totals: dict[str, float] = defaultdict(float)
    inner = getattr(planner, "inner", planner)
    with ExitStack() as stack:
        if hasattr(inner, "_place"):  # rl: the policy's episodes (whole tables, then column shards)
            stack.enter_context(timing(inner, "_place", "episodes", totals))
        planner_module = sys.modules[type(inner).__module__]
        if getattr(planner_module, "finish", None) is finish_module.finish:
            stack.enter_context(timing(planner_module, "finish", "finish", totals))
        stack.enter_context(timing(guard_module, "guard_plan", "guard_plan", totals))
        for heuristic in getattr(planner, "heuristics", {}).values():
            stack.enter_context(timing(heuristic, "plan", "heuristics", totals))
        t0 = time.perf_counter()
        plan = run_planner(planner, task)
        totals["total"] = time.perf_counter() - t0
    return dict(totals), plan_cost(mean_model(inner.cost_model), task, plan).plan_ms


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", required=True, help="a tasks file (autoshard tasks ...)")
    p.add_argument("--task-index", type=int, default=0)
    p.add_argument("--algo", default="rl", help="a learned planner (rl, search, neuroshard, ilp)")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args(argv)
    try:
        if args.repeats < 1:
            raise AutoshardError(f"--repeats {args.repeats} must be >= 1")
        tasks = load_tasks(args.task)
        if not 0 <= args.task_index < len(tasks):
            raise AutoshardError(f"--task-index {args.task_index}: the file has tasks 0..{len(tasks) - 1}")
        task = tasks[args.task_index]
        planner = make_planner(args.algo, PlannerOptions(seed=0))
        if getattr(planner, "cost_model", None) is None:
            raise AutoshardError(f"--algo {args.algo} has no cost model to time; give a learned planner")
        run_planner(planner, task)  # warm-up: the one-off costs of a process's first plan
        runs = [timed_plan(planner, task) for _ in range(args.repeats)]
    except AutoshardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{args.algo} on {task.name}: {task.num_tables} tables, {task.num_devices} devices, "
          f"{args.repeats} plans after a warm-up")
    for phase in ("total", *PHASES):
        seconds = [t.get(phase, 0.0) for t, _ in runs]
        print(f"  {phase:<11} least {min(seconds):.3f} s   median {statistics.median(seconds):.3f} s   "
              f"({', '.join(f'{s:.3f}' for s in seconds)})")
    steps = sorted({round(ms, 6) for _, ms in runs})
    print(f"  predicted step: {', '.join(f'{ms:.3f}' for ms in steps)} ms"
          + ("" if len(steps) == 1 else "  (MOVED between repeats)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
