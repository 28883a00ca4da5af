"""The sequence bench (``autoshard bench --suite seq-HxL``): FlexShard against table-, row- and
table-row-wise on held-out tasks of sequence tables, every plan at the same per-device memory.

A SUITE (``SeqSuite``) is N tasks, each a few sequence tables drawn from a seeded generator (task i from
``default_rng([seed, i])``, so a task does not change when N does): rows log-uniform in a range, dim from a
list, power-law access exponent uniform in [0.8, 1.2], mean sequence length uniform in [50, 500] (cv 0.5);
on hosts x local devices, B samples per rank per step. The tasks are held out in the only sense that matters
here: nothing in the planners was tuned on them (FlexShard has no learned part).

Per task, ``planners.flexshard.compare_at_same_memory`` plans all four plan types under one budget per
device, row_wise's footprint + ``headroom`` (5%), and prices each (``costs.sequence_traffic``): all-to-all
bytes (total and between hosts) and comm ms, MODELLED on the declared topology. With collectives measured
(``--collectives measure``, or ``auto`` where each of the D processes gets a core), every plan's three
all-to-alls are timed with its own byte matrices and FlexShard's replica all-reduce with its buckets, on D
local gloo processes (``hardware.sequence_evaluation``); with more processes than cores the times include
their contention for the cores, and the report says so.

STATISTICS, per metric (bytes, inter-host bytes, modelled ms, measured ms) and plan type: the geometric mean
over tasks of its ratio to row_wise, and to the task's BEST BASELINE (the cheapest of table_wise, row_wise,
table_row_wise among those that fit the budget: a reference must be a valid plan), each with a 95%
percentile bootstrap interval over tasks (measured ms: the measurement rounds are resampled too) from
``bench.summary.compare``, and a verdict: better / worse only when the interval excludes 1. A plan type over
the budget on a task is still priced there (its ratios say what it would cost); the report counts how often
it fits.

Every finished task is cached in ``OUT/tasks/task-NNN.json`` (atomic) with the settings it was run under; a
re-run reuses those whose settings match, so an interrupted run continues. ``OUT/results.json`` holds every
number, ``OUT/report.md`` the tables.
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.bench.summary import FEW_TASKS, Comparison, compare, geomean
from autoshard.errors import AutoshardError
from autoshard.hardware.sequence_evaluation import MEASURE, MODEL, measure_plans_comm, measurement_note
from autoshard.io import ARTEFACT_VERSION, atomic_write_bytes, read_json, write_json
from autoshard.pipeline.cache import code_version
from autoshard.pipeline.progress import Say, log_line
from autoshard.planners.flexshard import compare_at_same_memory
from autoshard.planners.sequence_plan import row_wise_footprint, tier_rows
from autoshard.tables.sequence import SequenceTable
from autoshard.topology import Topology

log = logging.getLogger(__name__)

PLAN_TYPES = ("table_wise", "row_wise", "table_row_wise", "flexshard")
BASELINES = ("table_wise", "row_wise", "table_row_wise")
ROW_WISE = "row_wise"
BEST_BASELINE = "best baseline"
_REF = "ref:"
"""Prefix of a baseline's entry that fits its task's budget: only those can be the best baseline."""
TASK_FORMAT = 1
"""Version of a cached task's layout; part of its key."""

METRICS: dict[str, str] = {
    "a2a_bytes": "all-to-all bytes per step (MODELLED)",
    "a2a_inter_bytes": "inter-host all-to-all bytes per step (MODELLED)",
    "comm_ms": "comm ms per step, all-to-alls + replica sync (MODELLED)",
    "measured_ms": "comm ms per step, all-to-alls + replica sync (MEASURED)",
}
"""What the report compares, key in a task's result -> what it is."""


@dataclass(frozen=True)
class SeqSuite:
    """A sequence-table suite: how tasks are drawn, the cluster, and how collectives are timed."""

    name: str
    hosts: int
    local: int
    description: str
    num_tasks: int = 10
    tables_per_task: tuple[int, int] = (3, 6)
    rows: tuple[int, int] = (100_000, 10_000_000)
    """Rows of a table, log-uniform in [low, high]."""
    dims: tuple[int, ...] = (32, 64, 128)
    alpha: tuple[float, float] = (0.8, 1.2)
    """Power-law access exponent, uniform."""
    seq_len: tuple[float, float] = (50.0, 500.0)
    """Mean sequence length, uniform."""
    seq_len_cv: float = 0.5
    batch_per_rank: int = 64
    headroom: float = 0.05
    """Every plan's budget per device: row_wise's footprint x (1 + headroom)."""
    head_rows: int = 4096
    warmup: int = 2
    repeats: int = 10
    """Timed runs of each collective (the step's measurement rounds)."""
    seed: int = 0

    @property
    def num_devices(self) -> int:
        return self.hosts * self.local

    def to_json(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


def _seq(name: str, hosts: int, local: int, **kw: Any) -> SeqSuite:
    s = SeqSuite(name, hosts, local, "", **kw)
    desc = (f"sequence tables, {s.tables_per_task[0]}-{s.tables_per_task[1]} a task (rows {s.rows[0]:.0e}-"
            f"{s.rows[1]:.0e}, dim {'/'.join(map(str, s.dims))}), {hosts} hosts x {local} devices, "
            f"{s.batch_per_rank} samples per rank: FlexShard vs table/row/table-row-wise at the same memory")
    return replace(s, description=desc)


SEQ_SUITES: dict[str, SeqSuite] = {
    "seq-2x2": _seq("seq-2x2", 2, 2, rows=(5_000, 50_000), dims=(8, 16), batch_per_rank=16, head_rows=512),
    "seq-2x4": _seq("seq-2x4", 2, 4),
    "seq-4x2": _seq("seq-4x2", 4, 2),
}
"""The sequence suites; seq-2x2 is sized for tests (small tables, 4 processes)."""


def is_seq_suite(name: str) -> bool:
    """Suites named seq-* are sequence suites (this module), every other name a pooled one."""
    return name.startswith("seq-")


def get_seq_suite(name: str) -> SeqSuite:
    if name not in SEQ_SUITES:
        raise AutoshardError(f"unknown sequence suite {name!r}; choose one of: {', '.join(SEQ_SUITES)}")
    return SEQ_SUITES[name]


def task_tables(suite: SeqSuite, index: int) -> list[SequenceTable]:
    """Task ``index``'s tables, from its own seeded generator (module docstring)."""
    rng = np.random.default_rng([suite.seed, index])
    lo, hi = suite.tables_per_task
    tables = []
    for j in range(int(rng.integers(lo, hi + 1))):
        rows = round(math.exp(rng.uniform(math.log(suite.rows[0]), math.log(suite.rows[1]))))
        dim = int(rng.choice(suite.dims))
        alpha = float(rng.uniform(*suite.alpha))
        seq = float(rng.uniform(*suite.seq_len))
        tables.append(SequenceTable.from_power_law(f"t{j}_a{alpha:.2f}_s{seq:.0f}", rows, dim, alpha, seq,
                                                   seq_len_cv=suite.seq_len_cv,
                                                   head_rows=min(suite.head_rows, rows),
                                                   seed=index * 100 + j))
    return tables


def resolve_collectives(asked: str, num_devices: int) -> tuple[str, str]:
    """'measure' or 'model', and why. ``auto`` measures only where each of the D processes gets a core: with
    more processes than cores they take turns and a timing mostly measures that (as the pooled bench)."""
    if asked not in ("auto", MEASURE, MODEL):
        raise AutoshardError(f"--collectives {asked}: choose auto, measure or model")
    cores = os.cpu_count() or 1
    if asked == MODEL:
        return MODEL, "--collectives model: modelled figures only"
    if asked == MEASURE:
        return MEASURE, f"--collectives measure; {measurement_note(num_devices)}"
    if num_devices <= cores:
        return MEASURE, f"auto: {measurement_note(num_devices)}"
    return MODEL, (f"auto: {num_devices} processes would share {cores} cores, so the collectives were not "
                   "timed (modelled only); --collectives measure times them anyway, contention included")


# ------------------------------------------------------------------------------------------ one task
def _task_key(suite: SeqSuite, index: int, algorithms: Sequence[str], mode: str) -> dict[str, Any]:
    """What a cached task must have been run with to be reused (the task count is not part of it; the code
    version is, so a re-run after an upgrade re-measures)."""
    s = suite.to_json()
    s.pop("num_tasks")
    s.pop("description")
    if mode != MEASURE:
        s.pop("warmup")
        s.pop("repeats")
    return {"format": TASK_FORMAT, "suite": s, "index": index, "algorithms": list(algorithms),
            "collectives": mode, "code": code_version()}


def run_task(suite: SeqSuite, index: int, algorithms: Sequence[str], mode: str) -> dict[str, Any]:
    """Plan, price and (mode 'measure') time every plan type of task ``index``; plain JSON."""
    tables = task_tables(suite, index)
    d = suite.num_devices
    budget = row_wise_footprint(tables, d) * (1.0 + suite.headroom)
    t0 = time.perf_counter()
    cmp = compare_at_same_memory(tables, Topology(suite.hosts), d, suite.batch_per_rank, budget)
    planning_s = time.perf_counter() - t0
    measured = {}
    t1 = time.perf_counter()
    if mode == MEASURE:
        plans = [(cmp[a].traffic, [(t.dim, p) for t, p in zip(tables, cmp[a].placements)])
                 for a in algorithms]
        timed = measure_plans_comm(plans, warmup=suite.warmup, repeats=suite.repeats)
        measured = dict(zip(algorithms, timed))
    results = {}
    for a in algorithms:
        c, tr = cmp[a], cmp[a].traffic
        m = measured.get(a)
        results[a] = {"fits": bool(c.fits), "peak_memory_bytes": tr.peak_memory_bytes,
                      "a2a_bytes": tr.a2a_bytes, "a2a_inter_bytes": tr.a2a_inter_bytes, "a2a_ms": tr.a2a_ms,
                      "sync_bytes": tr.sync_bytes, "sync_ms": tr.sync_ms, "comm_ms": tr.comm_ms,
                      "tiers": [list(tier_rows(p)[:3]) for p in c.placements],
                      "measured_ms": None if m is None else m.total_ms,
                      "measured": None if m is None else {"collectives_ms": m.ms,
                                                          "rounds_ms": list(m.rounds_ms)}}
    return {"task": f"{suite.name}-task{index:03d}", "index": index, "budget_bytes": budget,
            "tables": [{"name": t.name, "rows": t.rows, "dim": t.dim, "alpha": t.tail_alpha,
                        "mean_seq_len": t.mean_seq_len} for t in tables],
            "planning_s": planning_s, "measuring_s": time.perf_counter() - t1 if measured else 0.0,
            "results": results}


# ------------------------------------------------------------------------------------------ statistics
def _task_costs(task: dict[str, Any], metric: str) -> dict[str, tuple[float, tuple[float, ...]]]:
    """One task's plans as ``summary.PlanCosts`` for ``metric`` (rounds for measured ms), plus a ``ref:``
    entry for every baseline that fits (the candidates for the best baseline). Non-positive values (nothing
    moved) are left out: a ratio to or of 0 has no geometric mean."""
    out: dict[str, tuple[float, tuple[float, ...]]] = {}
    for a, r in task["results"].items():
        v = r.get(metric)
        if v is None or not v > 0:
            continue
        rounds = tuple((r.get("measured") or {}).get("rounds_ms") or ()) if metric == "measured_ms" else ()
        out[a] = (float(v), rounds)
        if a in BASELINES and r["fits"]:
            out[_REF + a] = out[a]
    return out


@dataclass(frozen=True)
class SeqSummary:
    """One plan type on one metric over the tasks."""

    algorithm: str
    metric: str
    tasks: int
    """Tasks with a value for this metric."""
    fits: int
    """Tasks where the plan fit the budget."""
    geomean: float | None
    vs_row_wise: Comparison | None
    vs_best_baseline: Comparison | None

    def to_json(self) -> dict[str, Any]:
        rw, best = self.vs_row_wise, self.vs_best_baseline
        return {"algorithm": self.algorithm, "metric": self.metric, "tasks": self.tasks, "fits": self.fits,
                "geomean": self.geomean, "vs_row_wise": None if rw is None else rw.to_json(),
                "vs_best_baseline": None if best is None else best.to_json()}


def summarize_seq(tasks: Sequence[dict[str, Any]], algorithms: Sequence[str]) -> list[SeqSummary]:
    """Per metric with values and plan type: geometric mean, ratio to row_wise and to the best baseline with
    their bootstrap intervals and verdicts (``bench.summary.compare``)."""
    out = []
    for metric in METRICS:
        costs = [_task_costs(t, metric) for t in tasks]
        if not any(costs):
            continue
        refs = {_REF + b for b in BASELINES if b in algorithms}
        for a in algorithms:
            vals = [c[a][0] for c in costs if a in c]
            fits = sum(1 for t in tasks if t["results"].get(a, {}).get("fits"))
            rw = compare(costs, a, {ROW_WISE}, ROW_WISE) if ROW_WISE in algorithms else None
            best = compare(costs, a, refs, BEST_BASELINE) if refs else None
            out.append(SeqSummary(a, metric, len(vals), fits, geomean(vals), rw, best))
    return out


def cheaper_over_budget(tasks: Sequence[dict[str, Any]]) -> int:
    """Tasks where a baseline over the budget had lower modelled comm ms than every baseline that fits (the
    best-baseline reference leaves it out, as a plan that does not fit is no plan)."""
    n = 0
    for t in tasks:
        r = {a: v for a, v in t["results"].items() if a in BASELINES}
        fit = [v["comm_ms"] for v in r.values() if v["fits"]]
        over = [v["comm_ms"] for v in r.values() if not v["fits"]]
        n += bool(fit and over and min(over) < min(fit))
    return n


# ------------------------------------------------------------------------------------------ the report
def _cell(c: Comparison | None) -> tuple[str, str]:
    if c is None or c.ratio is None or not c.tasks:
        return "-", "-"
    iv = "" if c.low is None or c.high is None else f" [{c.low:.3f}, {c.high:.3f}]"
    return f"{c.ratio:.3f}{iv}", c.verdict


def _scaled(metric: str, v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v / 1e6:.1f} MB" if metric.endswith("bytes") else f"{v:.3f} ms"


def markdown(suite: SeqSuite, command: str, tasks: Sequence[dict[str, Any]], summaries: Sequence[SeqSummary],
             algorithms: Sequence[str], mode: str, reason: str) -> str:
    """The report: what was run, one ratio table per metric, the verdict lines and the per-task figures."""
    n = len(tasks)
    lo, hi = suite.tables_per_task
    few = f" (fewer than {FEW_TASKS}: the intervals are wide)" if n < FEW_TASKS else ""
    drawn = (f"{n} tasks{few}, each {lo}-{hi} sequence tables (rows log-uniform in [{suite.rows[0]}, "
             f"{suite.rows[1]}], dim in {{{', '.join(map(str, suite.dims))}}}, power-law exponent uniform in "
             f"[{suite.alpha[0]}, {suite.alpha[1]}], mean sequence length uniform in [{suite.seq_len[0]:g}, "
             f"{suite.seq_len[1]:g}], cv {suite.seq_len_cv}), seed {suite.seed}; {suite.hosts} hosts x "
             f"{suite.local} devices, {suite.batch_per_rank} samples per rank per step. Every plan under the "
             f"same budget per device: row_wise's footprint + {suite.headroom:.0%}.")
    timed = (f"Measured ms: {reason}; every plan's own byte matrices, {suite.repeats} timed runs after "
             f"{suite.warmup} warm-up, median of the slowest rank per collective." if mode == MEASURE
             else f"Not measured ({reason}).")
    how = ("Bytes and modelled ms: MODELLED on the declared topology (TorchRec's default bandwidths, "
           f"600 GB/s within a host, 12.5 GB/s between hosts). {timed}")
    rounds = " (and measurement rounds)" if mode == MEASURE else ""
    ratios = (f"Ratios: geometric mean over tasks of plan / reference, with a 95% bootstrap interval over "
              f"tasks{rounds}; below 1 is better; better / worse only when the interval excludes 1. Best "
              "baseline: per task the cheapest of table_wise, row_wise, table_row_wise that fits the budget. "
              "A plan over the budget is still priced (its ratios say what it would cost); 'fits' counts the "
              "tasks where it fit.")
    out = [f"## {suite.name}: {suite.description}", "", f"Command: `{command}`", "", drawn, "", how, "",
           ratios, ""]
    over = cheaper_over_budget(tasks)
    if over:
        out += [(f"On {over} of {n} tasks a baseline over the budget had lower modelled comm ms than every "
                 "baseline that fits."), ""]
    for metric, what in METRICS.items():
        rows = [s for s in summaries if s.metric == metric]
        if not rows:
            continue
        out += [f"### {what}", "",
                ("| plan | fits | geomean | vs row_wise [95% interval] | verdict | vs best baseline "
                 "[95% interval] | verdict |"), "|---|---|---:|---|---|---|---|"]
        for s in rows:
            rw, rv = _cell(s.vs_row_wise)
            bb, bv = _cell(s.vs_best_baseline)
            out.append(f"| {s.algorithm} | {s.fits}/{n} | {_scaled(metric, s.geomean)} | {rw} | {rv} | "
                       f"{bb} | {bv} |")
        out.append("")
    fs = [s for s in summaries if s.algorithm == "flexshard"]
    if fs:
        out += ["### FlexShard, in words", ""]
        for s in fs:
            for label, c in (("row_wise", s.vs_row_wise), ("the best baseline", s.vs_best_baseline)):
                if c is not None and c.ratio is not None:
                    iv = "" if c.low is None else f", 95% interval [{c.low:.3f}, {c.high:.3f}]"
                    out.append(f"- {METRICS[s.metric]}: vs {label} **{c.verdict}** (ratio {c.ratio:.3f}{iv}, "
                               f"{c.tasks} tasks)")
        out.append("")
    head = " | ".join(f"{a} ms" for a in algorithms)
    out += ["### Per task (comm ms modelled; measured in parentheses)", "",
            f"| task | tables | budget MB | {head} |", "|---|---:|---:|" + "---:|" * len(algorithms)]
    for t in tasks:
        cells = []
        for a in algorithms:
            r = t["results"][a]
            m = "" if r.get("measured_ms") is None else f" ({r['measured_ms']:.2f})"
            cells.append(f"{r['comm_ms']:.3f}{m}" + ("" if r["fits"] else " over"))
        out.append(f"| {t['task']} | {len(t['tables'])} | {t['budget_bytes'] / 1e6:.1f} | "
                   f"{' | '.join(cells)} |")
    out.append("")
    return "\n".join(out)


# ------------------------------------------------------------------------------------------ the run
@dataclass(frozen=True)
class SeqBenchRun:
    out_dir: Path
    files: dict[str, Path]
    report: str
    summaries: tuple[SeqSummary, ...]


def run_seq_suite(suite: SeqSuite, out_dir: str | Path, *, collectives: str = "auto",
                  algorithms: Sequence[str] | None = None, command: str = "",
                  say: Say = log_line) -> SeqBenchRun:
    """Run (or continue) ``suite`` in ``out_dir``: every task cached as it finishes, then results.json and
    report.md (module docstring)."""
    if suite.num_tasks < 1 or suite.repeats < 1 or suite.warmup < 0:
        raise AutoshardError("a sequence suite needs at least 1 task, 1 timed run and warmup >= 0")
    algos = list(PLAN_TYPES) if algorithms is None else list(algorithms)
    unknown = [a for a in algos if a not in PLAN_TYPES]
    if unknown:
        raise AutoshardError(f"--algos {unknown[0]}: a sequence suite runs {', '.join(PLAN_TYPES)}")
    if ROW_WISE not in algos:
        say(f"{suite.name}: row_wise added to --algos (the reference every ratio is taken against)")
        algos.append(ROW_WISE)
    algos = [a for a in PLAN_TYPES if a in algos]
    mode, reason = resolve_collectives(collectives, suite.num_devices)
    out = Path(out_dir)
    say(f"{suite.name}: {suite.num_tasks} tasks on {suite.hosts}x{suite.local} devices, plans "
        f"{', '.join(algos)}; collectives: {reason}")
    tasks = []
    for i in range(suite.num_tasks):
        path = out / "tasks" / f"task-{i:03d}.json"
        key = _task_key(suite, i, algos, mode)
        cached = _cached(path, key)
        if cached is not None:
            tasks.append(cached)
            say(f"{suite.name}: task {i + 1}/{suite.num_tasks} cached")
            continue
        t0 = time.perf_counter()
        task = run_task(suite, i, algos, mode)
        write_json(path, {"kind": "autoshard.seq_bench_task", "version": ARTEFACT_VERSION, "key": key,
                          "task": task})
        tasks.append(task)
        fs = task["results"].get("flexshard")
        gist = "" if fs is None else (f"; flexshard {fs['comm_ms']:.3f} ms vs row_wise "
                                      f"{task['results'][ROW_WISE]['comm_ms']:.3f} ms modelled")
        say(f"{suite.name}: task {i + 1}/{suite.num_tasks} ({len(task['tables'])} tables) in "
            f"{time.perf_counter() - t0:.1f} s{gist}")
    summaries = summarize_seq(tasks, algos)
    report = markdown(suite, command, tasks, summaries, algos, mode, reason)
    files = {"results_json": out / "results.json", "report_md": out / "report.md"}
    write_json(files["results_json"], {
        "kind": "autoshard.seq_bench_results", "version": ARTEFACT_VERSION, "suite": suite.to_json(),
        "command": command, "algorithms": algos, "collectives": mode, "collectives_reason": reason,
        "cores": os.cpu_count(), "tasks": tasks, "summary": [s.to_json() for s in summaries]})
    atomic_write_bytes(files["report_md"], report.encode())
    return SeqBenchRun(out, files, report, tuple(summaries))


def _cached(path: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """The task cached at ``path`` if it was run with ``key``; None (and it is re-run) otherwise."""
    if not path.is_file():
        return None
    try:
        data = read_json(path, kind="autoshard.seq_bench_task")
    except AutoshardError as e:
        log.warning("%s; re-running that task", e)
        return None
    if data.get("key") != key:
        log.info("%s was run with other settings; re-running it", path)
        return None
    return data.get("task")
