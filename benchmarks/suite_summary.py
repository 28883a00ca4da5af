"""One table across benchmark suites: each algorithm's measured plan cost relative to the heuristics.

Reads the ``results.json`` that ``autoshard bench`` writes (one per suite) and prints markdown:

1. per suite and algorithm, the geometric mean over test tasks of the measured plan cost divided by
   - the per-task cheapest of the six heuristics (an oracle pick: a user would have to measure all six to
     know it, and the minimum of six noisy measurements is biased low), and
   - the best *fixed* heuristic of that suite (the one heuristic with the lowest geometric-mean cost, which
     is what a user would deploy);
2. per suite and algorithm, the ratio to the per-task best heuristic and to TorchRec's planner (where it
   ran) with the number of tasks, the 95% bootstrap interval and the verdict of
   ``autoshard.bench.summary.compare`` (tasks and each task's measurement rounds resampled; "better" only
   when the whole interval is below 1, "worse" only when above 1, else "no clear difference"), and the
   ratio to the best heuristic picked without the oracle's bias (``cross_fitted_ratio``: picked on half of
   a task's rounds, priced on the other) with its interval over the tasks and verdict;
3. per suite: tasks, the best fixed heuristic, its cost over the estimate (``lower_bound_ms``, which is an
   estimate, not a bound: the tasks where a measured plan came in below it are counted), the median
   round-to-round spread of plan costs (noise), and the host load while measuring;
4. ``--per-task ALGO``: that algorithm's ratio to the per-task best heuristic on every task (the issue's
   transfer table for ``rl``).

``--round-statistic min|median`` restates every file's measured costs from its stored per-round device
timings with that statistic (``autoshard.pipeline.measure.restate``; the bench's default is ``min`` since
stop 22, older files were reduced with the median); without it each file is read as it was written.

    .venv/bin/python benchmarks/suite_summary.py /tmp/suites/*/bench/results.json [--per-task rl]
    .venv/bin/python benchmarks/suite_summary.py benchmarks/runs/*.json.gz    # the committed runs

No measurement happens here: every number comes from the results files.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from autoshard.bench.summary import (
    FEW_TASKS,
    TORCHREC,
    Comparison,
    best_fixed_heuristic,
    compare,
    cross_fitted_ratio,
    estimate_summary,
    geomean,
    geomean_interval,
    is_heuristic,
    task_costs_from_json,
    verdict,
)
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import UNRECORDED_ROUND_STATISTIC
from autoshard.io import read_json
from autoshard.pipeline.measure import restate_task
from autoshard.pipeline.results import TaskResult


def _first(load: Any) -> float:
    """The 1-minute load average (the runner records the (1, 5, 15)-minute triple)."""
    return float(load[0] if isinstance(load, (list, tuple)) else load)


def _suite_name(r: dict[str, Any]) -> str:
    s = r["suite"]
    return f"DLRM-{s['num_tables']} ({s['num_devices']})" if s["name"].startswith("dlrm") else s["name"]


def restated(r: dict[str, Any], statistic: str | None) -> dict[str, Any]:
    """``r`` with its measured costs reduced from the rounds by ``statistic`` (None: as written)."""
    own = r.get("round_statistic", UNRECORDED_ROUND_STATISTIC)
    if statistic is None or statistic == own:
        return {**r, "round_statistic": own}
    tasks = [restate_task(TaskResult.from_json(t), statistic).to_json() for t in r["tasks"]]
    return {**r, "tasks": tasks, "round_statistic": statistic}


def summarise(r: dict[str, Any]) -> dict[str, Any]:
    """Ratios per algorithm and per task for one suite's results."""
    tasks = r["tasks"]
    stat = r.get("round_statistic", UNRECORDED_ROUND_STATISTIC)
    measured: list[dict[str, float]] = [
        {x["algorithm"]: x["measured"]["plan_ms"] for x in t["results"] if x["ok"] and x.get("measured")}
        for t in tasks]
    algos = [x["algorithm"] for x in tasks[0]["results"]]
    heur = [a for a in algos if is_heuristic(a)]
    costs = [task_costs_from_json(t) for t in tasks]
    best_fixed = best_fixed_heuristic(costs) or heur[0]
    per_task_best = [min(m[a] for a in heur if a in m) for m in measured]
    name = _suite_name(r) + ("" if stat == UNRECORDED_ROUND_STATISTIC else f", {stat}")
    out: dict[str, Any] = {"name": name,
                           "tasks": len(tasks), "best_fixed": best_fixed,
                           "vs_oracle": {}, "per_task": {}}
    for a in algos:
        ok = [(m[a], b) for m, b in zip(measured, per_task_best) if a in m]
        out["per_task"][a] = [m.get(a, math.nan) / b for m, b in zip(measured, per_task_best)]
        out["vs_oracle"][a] = geomean([c / b for c, b in ok])
        if len(ok) < len(measured):
            out.setdefault("partial", {})[a] = f"{len(ok)}/{len(measured)}"
    compared = {h for c in costs for h in c if is_heuristic(h)}
    torchrec = any(TORCHREC in c for c in costs)
    out["vs_best_heuristic"] = {a: compare(costs, a, compared, "best heuristic", statistic=stat)
                                for a in algos if compared}
    out["vs_torchrec"] = {a: compare(costs, a, {TORCHREC}, TORCHREC, statistic=stat) for a in algos
                          if torchrec and a != TORCHREC}
    out["vs_fixed"] = {a: compare(costs, a, {best_fixed}, best_fixed, statistic=stat) for a in algos
                       if a != best_fixed}
    out["cross_fitted"] = {}
    for a in algos:
        fitted = [x for x in (cross_fitted_ratio(c, a, compared, stat) for c in costs) if x is not None]
        if not is_heuristic(a) and len(fitted) >= 2:
            low, high = geomean_interval(fitted)
            out["cross_fitted"][a] = (geomean(fitted), low, high, verdict(low, high), len(fitted))
    estimates = [t.get("lower_bound_ms") for t in tasks]
    ratios = [m[best_fixed] / e for m, e in zip(measured, estimates) if e and best_fixed in m]
    out["best_fixed_to_estimate"] = geomean(ratios)
    est = estimate_summary(costs, estimates)
    out["estimate_tasks"], out["below_estimate"] = est.tasks, est.tasks_below
    spreads = []
    for t in tasks:
        for x in t["results"]:
            rounds = x.get("rounds_ms") or []
            if x["ok"] and len(rounds) > 1:
                spreads.append((max(rounds) - min(rounds)) / sorted(rounds)[len(rounds) // 2])
    out["noise"] = sorted(spreads)[len(spreads) // 2] if spreads else None
    loads = [_first(t["load_average"]) for t in tasks if t.get("load_average") not in (None, [], ())]
    out["load"] = (min(loads), max(loads)) if loads else None
    out["algos"] = algos
    return out


def _cell(v: float | None, partial: str | None = None) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" + (f" ({partial})" if partial else "")


def _comparison(c: Comparison | None) -> list[str]:
    """Tasks, ratio, interval and verdict cells of one comparison."""
    if c is None or c.ratio is None:
        return ["-"] * 4
    iv = "-" if c.low is None or c.high is None else f"[{c.low:.3f}, {c.high:.3f}]"
    return [str(c.tasks), f"{c.ratio:.3f}", iv, c.verdict]


def render(suites: list[dict[str, Any]], per_task: str | None) -> str:
    algos: list[str] = []
    for s in suites:
        algos += [a for a in s["algos"] if a not in algos]
    head = "| algorithm | " + " | ".join(f"{s['name']}, {s['tasks']} tasks" for s in suites) + " |"
    rule = "|---|" + "---|" * len(suites)
    lines = ["Ratio to the per-task best heuristic (oracle pick), geometric mean; below 1 is better:", "",
             head, rule]
    for a in algos:
        lines.append(f"| {a} | " + " | ".join(_cell(s["vs_oracle"].get(a), s.get("partial", {}).get(a))
                                               for s in suites) + " |")
    lines += ["", ("Ratio to the best fixed heuristic of the suite (named in the last table; picked once per "
                   "suite, so nearly free of the oracle pick's bias), geometric mean, 95% bootstrap interval "
                   "(tasks and rounds resampled), verdict:"), "", head, rule]
    for a in algos:
        cells = []
        for s in suites:
            _, ratio, iv, word = _comparison(s["vs_fixed"].get(a))
            if a == s["best_fixed"]:
                ratio, iv, word = "1.000", "-", ""
            cells.append(ratio if iv == "-" else f"{ratio} {iv} {word}")
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    lines += ["", ("Ratio to the best heuristic picked without the oracle's bias (cross-fitted: picked on "
                   "half of each task's rounds, priced on the other), geometric mean, 95% bootstrap interval "
                   "over the tasks, verdict:"), "", head, rule]
    for a in algos:
        cells = []
        for s in suites:
            c = s["cross_fitted"].get(a)
            cells.append("-" if c is None else f"{c[0]:.3f} [{c[1]:.3f}, {c[2]:.3f}] {c[3]}")
        if any(c != "-" for c in cells):
            lines.append(f"| {a} | " + " | ".join(cells) + " |")
    lines += ["", ("Against the per-task best heuristic and TorchRec's planner: geometric-mean ratio, 95% "
                   "bootstrap interval (tasks and rounds resampled) and verdict (better: interval below 1; "
                   "worse: above 1; else no clear difference):"), "",
              ("| suite | algorithm | tasks | ratio to best heuristic | 95% interval | verdict "
               "| tasks with torchrec | ratio to torchrec | 95% interval | verdict |"),
              "|---|---|---|---|---|---|---|---|---|---|"]
    for s in suites:
        for a in s["algos"]:
            cells = _comparison(s["vs_best_heuristic"].get(a)) + _comparison(s["vs_torchrec"].get(a))
            lines.append(f"| {s['name']} | {a} | " + " | ".join(cells) + " |")
    few = [s["name"] for s in suites if s["tasks"] < FEW_TASKS]
    if few:
        lines += ["", f"Fewer than {FEW_TASKS} tasks: the interval is wide ({', '.join(few)})."]
    lines += ["",
              ("| suite | test tasks | best fixed heuristic | its cost / estimate (not a bound) "
               "| estimate above a measured plan | noise | load average |"),
              "|---|---|---|---|---|---|---|"]
    for s in suites:
        ratio = _cell(s["best_fixed_to_estimate"])
        below = f"{s['below_estimate']} of {s['estimate_tasks']} tasks" if s["estimate_tasks"] else "-"
        noise = "-" if s["noise"] is None else f"{s['noise'] * 100:.1f}%"
        load = "-" if s["load"] is None else f"{s['load'][0]:.1f}-{s['load'][1]:.1f}"
        lines.append(f"| {s['name']} | {s['tasks']} | {s['best_fixed']} | {ratio} | {below} | {noise} "
                     f"| {load} |")
    if per_task:
        lines += ["", f"`{per_task}` per task, ratio to the per-task best heuristic:", "",
                  "| suite | per task | geometric mean | tasks | 95% interval | verdict |",
                  "|---|---|---|---|---|---|"]
        for s in suites:
            xs = s["per_task"].get(per_task)
            if xs is None:
                continue
            tasks, _, iv, word = _comparison(s["vs_best_heuristic"].get(per_task))
            lines.append(f"| {s['name']} | " + ", ".join("-" if math.isnan(x) else f"{x:.3f}" for x in xs)
                         + f" | {_cell(s['vs_oracle'].get(per_task))} | {tasks} | {iv} | {word} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="results.json files (or bench output directories)")
    ap.add_argument("--per-task", help="also list this algorithm's ratio on every task, e.g. rl")
    ap.add_argument("--round-statistic", choices=["min", "median"],
                    help="restate every file's costs from its stored rounds with this statistic")
    args = ap.parse_args(argv)
    suites = []
    for p in map(Path, args.results):
        path = p / "results.json" if p.is_dir() else p
        if not path.is_file():
            print(f"error: {path} not found; pass results.json files written by autoshard bench",
                  file=sys.stderr)
            return 2
        try:
            r = read_json(path)  # plain or gzip-compressed (the archive in benchmarks/runs/)
        except AutoshardError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if not isinstance(r, dict) or r.get("kind") != "autoshard.bench":
            print(f"error: {path} is not an autoshard bench result", file=sys.stderr)
            return 2
        suites.append(summarise(restated(r, args.round_statistic)))
    suites.sort(key=lambda s: (s["name"].startswith("DLRM"), len(s["name"]), s["name"]))
    print(render(suites, args.per_task))
    return 0


if __name__ == "__main__":
    sys.exit(main())
