"""What plan-and-measure produces: each algorithm's plan of a task with its predicted and measured costs.

One ``TaskResult`` per test task is written as JSON as soon as it is measured (``measure.run_bench``), so
an interrupted benchmark resumes; ``autoshard.bench`` summarizes and reports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from autoshard.breakdown import PlanCost, StageFloor
from autoshard.errors import AutoshardError
from autoshard.io import ARTEFACT_VERSION, read_json
from autoshard.plan import Plan
from autoshard.tasks import Task


def rounds_apart(a: Sequence[float], b: Sequence[float]) -> int:
    """+1 if every round of ``a`` is below every round of ``b``, -1 if every one is above, 0 if they overlap
    (or either has none): the bench's "clearly better / worse" on one task."""
    if not a or not b:
        return 0
    if max(a) < min(b):
        return 1
    if min(a) > max(b):
        return -1
    return 0


@dataclass(frozen=True)
class AlgoResult:
    """One algorithm on one task."""

    algorithm: str
    ok: bool
    error: str = ""
    """The planner's one-line error when it produced no plan."""
    plan: Plan | None = None
    predicted: PlanCost | None = None
    """The planning cost model's view of the plan."""
    measured: PlanCost | None = None
    """Median over the rounds, per device and component, by the real evaluator."""
    rounds_ms: tuple[float, ...] = ()
    """The plan's measured cost in each round (its spread shows the measurement noise)."""
    device_rounds_ms: tuple[tuple[tuple[float, float], ...], ...] = ()
    """Per round, per device: the measured (fwd ms, bwd ms), so a device's repeatability (the floor under any
    cost model's error on it) can be computed from the results."""
    confirm_rounds_ms: tuple[float, ...] = ()
    """The plan's cost in each round of a second timing of its devices beside its task's best heuristic's plan
    alone, taken where ``rounds_ms`` set the two apart (``pipeline.measure.confirm_apart``; since stop 64):
    with 3 rounds, two plans of equal cost fall apart by chance on 1 task in 10, so a "clearly" verdict
    needs both timings to agree. () where none was taken."""
    guard: str = ""
    """A learned planner's heuristic-guard decision (``planners.guard.GuardDecision.describe``: which plan it
    kept, by how much its predicted gain cleared or missed the model's uncertainty); "" for the others."""
    descent: str = ""
    """A measured pick's notes, "; "-joined: the pick's (``pipeline.choose.MeasuredChoice.describe``: which
    candidate timed cheapest, what a re-timing decided; since stop 57), the refit's and the descent's
    (``pipeline.measured_descent.MeasuredDescent.describe``: moves kept, the step as it timed them, the
    side-by-side confirmation); "" for the others. (The name is its first use's.)"""

    @property
    def planning_time_s(self) -> float | None:
        return self.plan.planning_time_s if self.plan else None

    def to_json(self) -> dict[str, Any]:
        return {
            "algorithm": self.algorithm, "ok": self.ok, "error": self.error,
            "plan": self.plan.to_json() if self.plan else None,
            "planning_time_s": self.planning_time_s,
            "predicted": self.predicted.to_json() if self.predicted else None,
            "measured": self.measured.to_json() if self.measured else None,
            "rounds_ms": list(self.rounds_ms),
            "device_rounds_ms": [[list(fb) for fb in rnd] for rnd in self.device_rounds_ms],
            **({"confirm_rounds_ms": list(self.confirm_rounds_ms)} if self.confirm_rounds_ms else {}),
            "guard": self.guard,
            **({"descent": self.descent} if self.descent else {}),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> AlgoResult:
        return AlgoResult(
            algorithm=d["algorithm"], ok=bool(d["ok"]), error=d.get("error", ""),
            plan=Plan.from_json(d["plan"]) if d.get("plan") else None,
            predicted=PlanCost.from_json(d["predicted"]) if d.get("predicted") else None,
            measured=PlanCost.from_json(d["measured"]) if d.get("measured") else None,
            rounds_ms=tuple(float(x) for x in d.get("rounds_ms", ())),
            device_rounds_ms=tuple(tuple((float(f), float(b)) for f, b in rnd)
                                   for rnd in d.get("device_rounds_ms", ())),
            confirm_rounds_ms=tuple(float(x) for x in d.get("confirm_rounds_ms", ())),
            guard=str(d.get("guard", "")),
            descent=str(d.get("descent", "")),
        )


@dataclass(frozen=True)
class TaskResult:
    """All algorithms on one task, and the task's lower bound where one is computed."""

    task: Task
    results: tuple[AlgoResult, ...]
    lower_bound_ms: float | None = None
    """A lower bound on any plan's cost under ``lower_bound_model`` (None when unavailable)."""
    lower_bound_model: str = ""
    lower_bound_note: str = ""
    key: str = ""
    """Hash of what produced it (suite, algorithms, models), so a resumed run reuses only matching work."""
    load_average: tuple[float, ...] = ()
    """The host's 1-minute load average before and after measuring (other processes slow timings down)."""
    stage_floor: StageFloor | None = None
    """The slowest forward and backward any device holding the task's costliest table can have, timed with
    the estimate (``planners.exact.stage_floor``; None when not computed): the room report's floor
    (``bench.room``)."""

    def by_algorithm(self) -> dict[str, AlgoResult]:
        return {r.algorithm: r for r in self.results}

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "autoshard.bench_task", "version": ARTEFACT_VERSION, "key": self.key,
            "task": self.task.to_json(), "lower_bound_ms": self.lower_bound_ms,
            "lower_bound_model": self.lower_bound_model, "lower_bound_note": self.lower_bound_note,
            "results": [r.to_json() for r in self.results], "load_average": list(self.load_average),
            "stage_floor": None if self.stage_floor is None else self.stage_floor.to_json(),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> TaskResult:
        """The inverse of ``to_json``. A malformed entry (a key missing, a value of the wrong type) is one
        ``AutoshardError`` naming the task where it can, so every reader of results files (the bench's
        resume, ``benchmarks/``) says one line instead of a traceback."""
        try:
            return TaskResult(
                task=Task.from_json(d["task"]), results=tuple(AlgoResult.from_json(r) for r in d["results"]),
                lower_bound_ms=d.get("lower_bound_ms"), lower_bound_model=d.get("lower_bound_model", ""),
                lower_bound_note=d.get("lower_bound_note", ""), key=d.get("key", ""),
                load_average=tuple(float(x) for x in d.get("load_average", ())),
                stage_floor=StageFloor.from_json(d["stage_floor"]) if d.get("stage_floor") else None,
            )
        # AutoshardError: the task's own check (Task.from_json), named here as this result's
        except (KeyError, TypeError, ValueError, AttributeError, AutoshardError) as e:
            task = d.get("task") if isinstance(d, dict) else None
            name = f" of task {task['name']!r}" if isinstance(task, dict) and "name" in task else ""
            why = str(e) if isinstance(e, AutoshardError) else f"{type(e).__name__}: {e}"
            raise AutoshardError(f"a bench task result{name} is malformed ({why}); "
                                 "pass a results file `autoshard bench` wrote") from None


def read_task_results(path: str) -> list[TaskResult]:
    """The measured tasks of a bench results file (``DIR/bench/results.json``, or gzipped in
    ``benchmarks/runs/``); a missing, broken or malformed file is one ``AutoshardError`` naming it."""
    return task_results_of(read_json(path, kind="autoshard.bench"), path)  # its own errors name the file


def task_results_of(run: dict[str, Any], path: str) -> list[TaskResult]:
    """The measured tasks of a bench results file already read from ``path`` (for a reader that needs its
    other fields too, so the file is read once); a malformed one is one ``AutoshardError`` naming it."""
    try:
        return [TaskResult.from_json(t) for t in run["tasks"]]
    except AutoshardError as e:
        raise AutoshardError(f"{path}: {e}") from None
    except (KeyError, TypeError) as e:
        raise AutoshardError(f"{path}: not a bench results file (no task list: {e!r}); pass a results.json "
                             "that `autoshard bench` wrote") from None
