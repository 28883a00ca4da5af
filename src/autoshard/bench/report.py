"""Write a benchmark's results: a markdown table, a JSON of every raw number, and PNG plots.

The markdown says plainly where the learned/searching planners do not beat the best heuristic, and how noisy
the measurements were, because a reader decides from it whether autoshard is worth using on their hardware.
"""

from __future__ import annotations

import io
import logging
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.bench.error_split import rounds_needed, split_by_rounds
from autoshard.bench.room import ROOM_THRESHOLD, room_summary
from autoshard.bench.summary import (
    BETTER,
    FEW_TASKS,
    WORSE,
    AlgoSummary,
    Comparison,
    estimate_summary,
    geomean,
    is_heuristic,
    task_costs,
)
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import UNRECORDED_ROUND_STATISTIC
from autoshard.io import ARTEFACT_VERSION, atomic_write_bytes, write_json
from autoshard.pipeline.choose import PICK_OUTCOMES, REFIT_OUTCOMES
from autoshard.pipeline.measure import MEASURED_DESCENT, MEASURED_REFIT, parse_measured_pick
from autoshard.pipeline.measured_descent import OUTCOMES
from autoshard.pipeline.refresh_stage import describe_sources
from autoshard.pipeline.results import AlgoResult, TaskResult, rounds_apart
from autoshard.planners.guard import kept_in

log = logging.getLogger(__name__)

FEW_TASKS_NOTE = f"fewer than {FEW_TASKS} tasks: the interval is wide"


def _fmt(v: float | None, spec: str = ".3f", suffix: str = "") -> str:
    return "-" if v is None else f"{v:{spec}}{suffix}"


def _pct(v: float | None, signed: bool = True) -> str:
    if v is None:
        return "-"
    return f"{v * 100:+.1f}%" if signed else f"{v * 100:.1f}%"


def _tasks(n: int) -> str:
    return f"{n} task" if n == 1 else f"{n} tasks"


def _interval(c: Comparison) -> str:
    if c.low is None or c.high is None:
        return f"no interval from {_tasks(c.tasks)}"
    return f"{c.level:.0%} interval [{c.low:.3f}, {c.high:.3f}]"


def _cell(c: Comparison | None, with_verdict: bool = False) -> str:
    """Ratio [interval] (verdict,) n tasks, for a table cell."""
    if c is None or c.ratio is None:
        return "-"
    iv = "" if c.low is None or c.high is None else f" [{c.low:.3f}, {c.high:.3f}]"
    return f"{c.ratio:.3f}{iv}" + (f" {c.verdict}" if with_verdict else "") + f" ({_tasks(c.tasks)})"


def comparison_sentence(c: Comparison, reference: str) -> str:
    """'vs REF: **better** over N tasks (ratio R, 95% interval [L, H], all below 1)' and the like."""
    why = {BETTER: ", all below 1", WORSE: ", all above 1"}.get(c.verdict, "")
    if not why and c.low is not None:
        why = ", contains 1"
    return (f"vs {reference}: **{c.verdict}** over {_tasks(c.tasks)} (ratio {_fmt(c.ratio)}, "
            f"{_interval(c)}{why})")


def verdict_lines(summaries: Sequence[AlgoSummary]) -> list[str]:
    """Plain sentences: whether each non-heuristic algorithm is better, worse or not clearly different
    from the best heuristic (and from TorchRec's planner), by the bootstrap interval of its geometric-mean
    ratio."""
    lines = []
    for s in summaries:
        if s.heuristic:
            continue
        if s.tasks_ok == 0:
            lines.append(f"- **{s.algorithm}** produced no plan ({'; '.join(s.errors) or 'no result'}).")
            continue
        c = s.vs_best_heuristic
        if c is None or c.ratio is None:
            continue
        partial = ("" if s.tasks_ok == s.tasks_total
                   else f" (it planned {s.tasks_ok}/{s.tasks_total} tasks)")
        t = s.vs_torchrec
        vs_torchrec = ("" if t is None or t.ratio is None
                       else "; " + comparison_sentence(t, "TorchRec's planner"))
        interval = s.cross_fitted_interval
        fitted = ("" if s.geomean_ratio_cross_fitted is None
                  else f" (cross-fitted, the heuristic picked on half the rounds and priced on the other: "
                       f"{_fmt(s.geomean_ratio_cross_fitted)}"
                       + ("" if interval is None else
                          f", 95% interval over the tasks [{_fmt(interval[0])}, {_fmt(interval[1])}]: "
                          f"{s.cross_fitted_verdict}") + ")")
        f = s.vs_best_fixed
        vs_fixed = ("" if f is None or f.ratio is None
                    else "; " + comparison_sentence(f, f"the best fixed heuristic ({f.reference})"))
        lines.append(f"- **{s.algorithm}** {comparison_sentence(c, 'the best heuristic')}{fitted}{partial}"
                     f"{vs_fixed}{vs_torchrec}; cheapest plan on {s.wins}/{s.tasks_total} tasks; beyond the "
                     f"round-to-round spread, confirmed by a re-timing, better than the best heuristic on "
                     f"{s.clear_wins} and worse on {s.clear_losses} of {_tasks(s.tasks_ok)}.")
    return lines


def estimate_lines(results: Sequence[TaskResult]) -> list[str]:
    """What the measured plans say about the estimate (``lower_bound_ms``): ratios, never a gap."""
    est = estimate_summary([task_costs(tr) for tr in results], [tr.lower_bound_ms for tr in results])
    if not est.tasks:
        return []
    lines = [(f"Estimate (not a bound): cheapest measured plan / estimate, geometric mean "
              f"{_fmt(est.geomean_best_ratio)} over {_tasks(est.tasks)}.")]
    if est.tasks_below:
        lines.append(f"Estimate above a measured plan on {_tasks(est.tasks_below)}.")
    return lines


def room_lines(results: Sequence[TaskResult], algorithms: Sequence[str], alpha_ms: float) -> list[str]:
    """How much the tasks leave to win by balancing the measured plans' own work (``bench.room``; ``alpha_ms``
    the run's comm latency), and how the planners did on the tasks with at least 10% of it."""
    room = room_summary(results, algorithms, alpha_ms)
    if room is None or not room.tasks:
        return []
    pieces = ("with the costliest table's stage floor" if room.with_stage_floor == room.tasks
              else f"the costliest table's stage floor on {room.with_stage_floor} of them")
    if room.with_cuts:
        pieces += (", the work and ids its cut adds priced" if room.with_cuts == room.tasks
                   else f", the work and ids its cut adds priced on {room.with_cuts}")
    lines = [(f"Room by balance (not a bound; autoshard.bench.room): {room.reference}'s measured cost over "
             f"the least balance floor of the task's measured plans (mean device fwd and bwd, each at least "
             f"the costliest table's, plus each collective at the least busiest-rank bytes), geometric mean "
             f"{_fmt(room.geomean_room)} over {_tasks(room.tasks)} ({pieces}); at least "
             f"{ROOM_THRESHOLD - 1:.0%} on {_tasks(len(room.roomy))}.")]
    if room.ratio_on_roomy:
        lines.append("On those tasks, cost / " + room.reference + ": " + ", ".join(
            f"{a} {r:.3f}" for a, r in sorted(room.ratio_on_roomy.items())) + ".")
    return lines


def error_split_lines(results: Sequence[TaskResult]) -> list[str]:
    """The planning model's per-device error split into its own part and the instrument's
    (``bench.error_split``), which is larger in what the bench keeps, and the instrument's part of a kept
    minimum of fewer rounds (``error_split.split_by_rounds``); [] where it cannot be split."""
    try:
        s, curve = split_by_rounds(results)
    except AutoshardError:  # too few devices or rounds to split
        return []
    larger = ("the instrument's is the larger: more --rounds would sharpen the verdicts more than a better "
              "model" if s.min_noise_sd >= s.model_sd else "the model's is the larger")
    needed = rounds_needed(curve, s.model_sd)
    where = (f"below the model's from {needed} round{'s' if needed > 1 else ''}" if needed is not None
             else f"not below the model's within the {s.rounds} timed")
    return [(f"Per-device error of the planning model (log sd of measured / predicted fwd + bwd, "
             f"relative to the task's devices, {s.devices} distinct devices; autoshard.bench.error_split): "
             f"the model's own {s.model_sd:.3f} (shared by the rounds, correlation {s.correlation:.2f}), "
             f"the instrument's {s.round_noise_sd:.3f} in one round and {s.min_noise_sd:.3f} in the "
             f"minimum of the {s.rounds} kept: {larger}. The instrument's part of the minimum of k rounds "
             f"(every k of the {s.rounds} averaged), k = 1..{s.rounds}: "
             + ", ".join(f"{v:.3f}" for v in curve) + f"; {where}.")]


def _outcomes(results: Sequence[TaskResult], outcome: Callable[[AlgoResult], str]) -> dict[str, Counter[str]]:
    """Per algorithm, how many tasks ended each way (``outcome`` of its result; "" for none)."""
    counts: dict[str, Counter[str]] = {}
    for tr in results:
        for r in tr.results:
            what = outcome(r) if r.ok else ""
            if what:
                counts.setdefault(r.algorithm, Counter())[what] += 1
    return counts


def guard_lines(results: Sequence[TaskResult]) -> list[str]:
    """What each learned planner's heuristic guard returned, counted over the tasks (its own plan, another
    of its plans, or the heuristic plan the model priced cheapest: ``planners.guard``)."""
    # "kept its plan", "kept X's plan", ...
    counts = _outcomes(results, lambda r: kept_in(r.guard) if r.guard else "")
    if not counts:
        return []
    lines = [f"- {algo}: " + ", ".join(f"{what} on {_tasks(n)}" for what, n in
                                        sorted(per.items(), key=lambda kv: (-kv[1], kv[0])))
             for algo, per in counts.items()]
    head = ("Heuristic guard (a learned planner keeps its plan only for a predicted gain beyond the model's "
            "uncertainty; results.json has each decision):")
    return [head, "", *lines, ""]


CONFIRM_OUTCOMES = ("worse in both timings", "better in both timings", "apart in the first timing only")
"""How a plan the first rounds set apart from its task's best heuristic's fared when the two were re-timed."""


def confirm_lines(results: Sequence[TaskResult]) -> list[str]:
    """Per algorithm, how its plans that every first round set apart from the task's best heuristic's plan
    fared when the two were timed again side by side (``pipeline.measure.confirm_apart``)."""
    counts: dict[str, Counter[str]] = {}
    for tr in results:
        reference = next((r for r in tr.results if r.confirm_rounds_ms and is_heuristic(r.algorithm)), None)
        if reference is None:
            continue
        for r in tr.results:
            if r is reference or not r.confirm_rounds_ms:
                continue
            first = rounds_apart(r.rounds_ms, reference.rounds_ms)
            again = rounds_apart(r.confirm_rounds_ms, reference.confirm_rounds_ms)
            what = CONFIRM_OUTCOMES[2] if again != first else CONFIRM_OUTCOMES[0 if first < 0 else 1]
            counts.setdefault(r.algorithm, Counter())[what] += 1
    if not counts:
        return []
    lines = [f"- {algo}: " + ", ".join(f"{what} on {_tasks(per[what])}" for what in CONFIRM_OUTCOMES
                                        if what in per) for algo, per in counts.items()]
    head = ("Re-timed (every round of the plan apart from every round of the task's best heuristic's plan, "
            "so the two were timed again side by side; a task counts as clearly better / worse only where "
            "both timings agree):")
    return [head, "", *lines, ""]


def _step_lines(results: Sequence[TaskResult], rows: Callable[[str], bool], outcomes: Sequence[str],
                head: str) -> list[str]:
    """How each measured row whose name ``rows`` accepts ended (one of ``outcomes``, read from the note it
    kept), counted over the tasks, under ``head``."""
    counts = _outcomes(results, lambda r: next((o for o in outcomes if o in r.descent), "other")
                       if r.descent and rows(r.algorithm) else "")
    if not counts:
        return []
    lines = [f"- {algo}: " + ", ".join(f"{what} on {_tasks(per[what])}" for what in outcomes if what in per)
             for algo, per in counts.items()]
    return [head, "", *lines, ""]


def pick_lines(results: Sequence[TaskResult]) -> list[str]:
    """How each measured pick (``PLANNER+topK``, the row without a refit or a descent: those share its pick)
    ended, counted over the tasks (runs before stop 57 kept no note of it)."""
    def plain_pick(name: str) -> bool:
        pick = parse_measured_pick(name)
        return pick is not None and not pick.refit and not pick.descent

    return _step_lines(results, plain_pick, PICK_OUTCOMES,
                       "Measured pick (the K candidates the model priced cheapest timed here; one other than "
                       "the model's cheapest kept only if a second side-by-side timing agrees; results.json "
                       "has each task's):")


def descent_lines(results: Sequence[TaskResult]) -> list[str]:
    """How each measured descent (``PLANNER+topK+descentN``) ended, counted over the tasks."""
    return _step_lines(results, lambda name: MEASURED_DESCENT in name, OUTCOMES,
                       "Measured descent (moves kept only where this host's kernels timed a lower step, the "
                       "result then timed against the measured pick side by side; results.json has each "
                       "task's):")


def refit_lines(results: Sequence[TaskResult]) -> list[str]:
    """How each refit (``PLANNER+topK+refit``) ended, counted over the tasks."""
    return _step_lines(results, lambda name: MEASURED_REFIT in name, REFIT_OUTCOMES,
                       "Refit (the model corrected by the pick's timed devices, the planner run again with "
                       "it, its plan timed against the pick side by side; results.json has each task's):")


def refresh_lines(rounds: Sequence[dict[str, Any]]) -> list[str]:
    """The refresh loop's table (``pipeline.refresh_stage``): one row per round."""
    if not rounds:
        return []
    algos = list(dict.fromkeys(a for r in rounds for a in r.get("ratio_to_best_heuristic", {})))
    timed = any("comm_mape" in r for r in rounds)
    out = [("Refresh loop (DreamShard's: plan the loop's train tasks, measure every device of the plans, add "
            "them to the profile, refit the cost model, train the policy further; the test tasks above were "
            "planned with the models after the last round):"), "",
           "| round | devices added | profile records | model error on the learned planners' devices "
           "(before refit) | underestimated | " + " | ".join(f"{a} / best heuristic" for a in algos)
           + (" | comm fit error on the plans' timed all-to-alls (before refit) | planning comm after"
              if timed else "") + " | elapsed s |",
           "|---|---|---|---|---|" + "---|" * len(algos) + ("---|---|" if timed else "") + "---|"]
    for r in rounds:
        ratios = r.get("ratio_to_best_heuristic", {})
        comm = ""
        if timed:
            refit = r.get("comm_refit")
            after = (f"{refit['alpha_ms']:.3f} ms + bytes / {refit['bytes_per_ms'] / 1e3:.0f} KB/ms" if refit
                     else "-")
            comm = (f" | {_pct(r.get('comm_mape'), False)} ({len(r.get('collective_points', []))} "
                    f"all-to-alls) | {after}")
        out.append(f"| {r['round']} | {r['records_added']} | {r.get('records_total', '-')} "
                   f"| {_pct(r.get('device_mape'), False)} ({r.get('devices', 0)} devices) "
                   f"| {_pct(r.get('underestimated_share'), False)} | "
                   + " | ".join(_fmt(ratios.get(a)) + describe_sources(r.get("plan_sources", {}).get(a))
                                for a in algos)
                   + comm + f" | {_fmt(r.get('elapsed_s'), '.0f')} |")
    collectives = ("collectives timed with each plan's own splits" if timed
                   else "collectives from the comm fit: modelled")
    out += ["", ("Ratios: measured step of the planner's plan over the cheapest heuristic plan's, geometric "
                 f"mean over the loop's train tasks (kernels timed once each, {collectives}), and on how "
                 "many tasks the plan was a heuristic's (a guarded planner keeps one unless its own is "
                 "predicted cheaper by more than the model's spread: then the ratio is that heuristic's one "
                 "timing over the cheapest heuristic's) or its own. Model error: "
                 "mean |predicted - measured| / measured fwd+bwd of the learned planners' devices by the "
                 "model they planned with; the loop plans the same tasks every "
                 "round, so a device measured in an earlier round is in that model's training data.")
            + (" Comm: every distinct plan's all-to-alls timed with its own splits, as the bench times them; "
               "the planning comm (not the evaluator's) is refit on all the loop has timed, the busiest "
               "rank's bytes against the time." if timed else ""), ""]
    return out


def markdown(title: str, command: str, summaries: Sequence[AlgoSummary], results: Sequence[TaskResult],
             meta: dict[str, Any]) -> str:
    """The report as markdown: command, hardware, the comparison table, verdicts and skipped algorithms."""
    host = meta.get("host", {})
    loads = [x for tr in results for x in tr.load_average]
    lb_models = sorted({tr.lower_bound_model for tr in results if tr.lower_bound_ms and tr.lower_bound_model})
    has_estimate = any(tr.lower_bound_ms for tr in results)
    lb_model = ", ".join(lb_models) + " " if lb_models else ""
    lb_notes = sorted({tr.lower_bound_note for tr in results if tr.lower_bound_note})
    n = len(results)
    comparisons = [c for s in summaries for c in (s.vs_best_heuristic, s.vs_torchrec) if c is not None]
    fixed = {s.vs_best_fixed.reference for s in summaries if s.vs_best_fixed is not None}
    fixed_name = f" ({fixed.pop()})" if len(fixed) == 1 else ""
    resamples = comparisons[0].resamples if comparisons else 0
    level = comparisons[0].level if comparisons else 0.95
    few = n < FEW_TASKS or any(c.tasks < FEW_TASKS for c in comparisons)
    out = [
        f"## {title}", "",
        f"Command: `{command}`", "",
        f"Hardware: {host.get('cpu', '?')}, {host.get('cpu_count', '?')} logical CPUs, torch "
        f"{host.get('torch', '?')}, fbgemm-gpu {host.get('fbgemm_gpu', '?')}"
        + (f", GPU {host['gpu']}" if host.get("gpu") else "") + ".",
        (f"Evaluator: {meta.get('evaluator', '?')}. Planning cost model: {meta.get('cost_model', '?')}. "
         f"Policy: {meta.get('policy', '-')}."),
        f"{n} test tasks" + (f" ({FEW_TASKS_NOTE})" if n < FEW_TASKS else "")
        + f"; every plan of a task measured back-to-back in {meta.get('rounds', '?')} rounds, the "
        + f"{meta.get('round_statistic', UNRECORDED_ROUND_STATISTIC)} over rounds kept per device."
        + (f" Host load average (1 min) while measuring: {min(loads):.1f} to {max(loads):.1f} on "
           f"{host.get('cpu_count', '?')} CPUs (other processes slow timings down)." if loads else ""), "",
        (f"| algorithm | planned | cost ms (geomean) "
         f"| ratio to best heuristic [{level:.0%} interval] (tasks) | verdict "
         f"| vs best fixed heuristic{fixed_name} [interval] verdict "
         "| vs torchrec [interval] verdict (tasks) | wins | clearly better / worse "
         "| cost / estimate (not a bound) | planning s (mean / max) | prediction error | noise |"),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        name = s.algorithm + (" (heuristic)" if s.heuristic else "")
        c = s.vs_best_heuristic
        out.append(
            f"| {name} | {s.tasks_ok}/{s.tasks_total} | {_fmt(s.geomean_ms, '.2f')} "
            f"| {_cell(c)} | {'-' if c is None else c.verdict} | {_cell(s.vs_best_fixed, True)} "
            f"| {_cell(s.vs_torchrec, True)} "
            f"| {s.wins} | {s.clear_wins} / {s.clear_losses} "
            f"| {_fmt(s.geomean_ratio_to_estimate)} "
            f"| {_fmt(s.mean_planning_s, '.3f')} / {_fmt(s.max_planning_s, '.3f')} "
            f"| {_pct(s.prediction_error, False)} | {_pct(s.noise, False)} |"
        )
    out += [
        "",
        "Ratio to best heuristic: per task, the plan's measured cost over the cheapest heuristic plan of "
        "that task (an oracle pick among all heuristics), then the geometric mean over the tasks counted; "
        f"below 1 is better. Interval: {level:.0%} percentile bootstrap of that geometric mean over "
        f"{resamples} resamples of the tasks (with replacement) and, within every drawn task, of its "
        "measurement rounds (the best heuristic re-picked on each draw). Verdict: better only when the whole "
        "interval is below 1, worse only when it is above 1, otherwise no clear difference. With fewer than "
        f"{FEW_TASKS} tasks the interval is wide, and a bootstrap over very few tasks still tends to "
        "understate the uncertainty. "
        "vs best fixed heuristic: the same against the one heuristic with the lowest geometric-mean cost "
        "over the suite (what a user deploying one heuristic gets; picked once, not per task, so nearly "
        "free of the oracle pick's bias, which the best fixed heuristic's own ratio to the best heuristic "
        "shows). "
        "vs torchrec: the same against TorchRec's planner, on the tasks where it produced a plan. "
        "Cost / estimate: geometric mean of the measured cost over the task's estimate (not a bound)"
        + (f": autoshard.planners.exact.lower_bound with the {lb_model}cost of every table alone, "
           "linearised (a table heavier than the average counted as its column shards where those, each "
           "priced alone, are cheaper), of the slowest device's fwd + bwd + own comm; it is computed "
           "separately from "
           "the plans and leaves out what the measured step adds or saves, so a measured plan can come in "
           "below it" if has_estimate else ": none available")
        + ". Prediction error: mean |predicted - measured| / measured of the plan cost by the planning "
        "model. "
        "Wins: tasks where its plan measured cheapest of all. Clearly better / worse: tasks where every "
        "round of its plan measured below / above every round of the best heuristic's plan, and again "
        "when the two plans were re-timed side by side (the rest are within the measurement spread). "
        "Noise: median spread (max - min) / median of a plan's cost across "
        "rounds.", "",
    ]
    learned = [s.algorithm for s in summaries if not s.heuristic]
    alpha = float((meta.get("comm") or {}).get("alpha_ms", 0.0))
    estimate = estimate_lines(results) + room_lines(results, learned, alpha) + error_split_lines(results)
    if estimate:
        out += [*estimate, ""]
    out += guard_lines(results)
    out += confirm_lines(results)
    out += pick_lines(results)
    out += descent_lines(results)
    out += refit_lines(results)
    out += refresh_lines(meta.get("refresh", []))
    verdicts = verdict_lines(summaries)
    if verdicts:
        out += ["Verdict:", "", *verdicts, ""]
        if few:
            out += [f"Note: {FEW_TASKS_NOTE}.", ""]
    else:
        out += [("Verdict: no non-heuristic algorithm ran, so nothing here compares autoshard's learned or "
                 "searching planners with the heuristics."), ""]
    skipped = meta.get("skipped", {})
    if skipped:
        out += ["Skipped algorithms:", "", *[f"- {a}: {why}" for a, why in skipped.items()], ""]
    failures = [s for s in summaries if s.errors]
    if failures:
        out += ["Planner errors:", "", *[f"- {s.algorithm}: {e}" for s in failures for e in s.errors[:3]], ""]
    if lb_notes:
        out += [f"Estimate: {'; '.join(lb_notes)}", ""]
    return "\n".join(out)


def raw_json(summaries: Sequence[AlgoSummary], results: Sequence[TaskResult], meta: dict[str, Any]) -> dict:
    return {
        "kind": "autoshard.bench", "version": ARTEFACT_VERSION, **meta,
        "summary": [s.to_json() for s in summaries],
        "tasks": [tr.to_json() for tr in results],
    }


# --------------------------------------------------------------------------------------------- plots


def _save(fig: Any, path: Path) -> None:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    atomic_write_bytes(path, buf.getvalue())


def plot_devices(result: TaskResult, path: Path) -> bool:
    """Per-device stacked fwd / bwd / comm bars of one task, one group of bars per algorithm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = [r for r in result.results if r.measured is not None]
    if not measured:
        return False
    d = result.task.num_devices
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(measured) * max(d, 2) * 0.5 + 2), 4.2))
    width = 0.8 / d
    colors = {"fwd": "#4c72b0", "bwd": "#dd8452", "comm": "#55a868"}
    for i, r in enumerate(measured):
        arr = r.measured.to_array()
        for g in range(d):
            x = i + (g - (d - 1) / 2) * width
            bottom = 0.0
            for j, part in enumerate(("fwd", "bwd", "comm")):
                ax.bar(x, arr[g, j], width * 0.9, bottom=bottom, color=colors[part],
                       label=part if (i == 0 and g == 0) else None)
                bottom += arr[g, j]
    ax.set_xticks(range(len(measured)), [r.algorithm for r in measured], rotation=30, ha="right")
    ax.set_ylabel("measured ms per step (bars = devices)")
    ax.set_title(f"{result.task.name}: {result.task.num_tables} tables on {d} devices")
    ax.legend()
    _save(fig, path)
    plt.close(fig)
    return True


def plot_costs(results: Sequence[TaskResult], algorithms: Sequence[str], path: Path) -> bool:
    """Per algorithm, each task's measured cost over that task's best heuristic (dots) and the geomean."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ratios: dict[str, list[float]] = {a: [] for a in algorithms}
    for tr in results:
        costs = {r.algorithm: r.measured.plan_ms for r in tr.results if r.measured is not None}
        heur = [c for a, c in costs.items() if is_heuristic(a)]
        if not heur:
            continue
        for a, c in costs.items():
            if a in ratios:
                ratios[a].append(c / min(heur))
    shown = [a for a in algorithms if ratios[a]]
    if not shown:
        return False
    fig, ax = plt.subplots(figsize=(max(6.0, 0.8 * len(shown) + 2), 4.2))
    rng = np.random.default_rng(0)  # jitter only, so the plot is reproducible
    for i, a in enumerate(shown):
        ys = ratios[a]
        ax.scatter(i + rng.uniform(-0.15, 0.15, len(ys)), ys, s=14, alpha=0.6,
                   color="#999999" if is_heuristic(a) else "#c44e52")
        ax.hlines(geomean(ys), i - 0.3, i + 0.3, color="black")
    ax.axhline(1.0, color="#4c72b0", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(shown)), shown, rotation=30, ha="right")
    ax.set_ylabel("measured cost / best heuristic (per task; line = geomean)")
    ax.set_title(f"plan cost per algorithm over {len(results)} test tasks (below 1 beats every heuristic)")
    _save(fig, path)
    plt.close(fig)
    return True


def plot_predicted(results: Sequence[TaskResult], path: Path, model: str = "planning cost model") -> bool:
    """Predicted (planning cost model) against measured plan cost, one dot per plan."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [(r.predicted.plan_ms, r.measured.plan_ms) for tr in results for r in tr.results
           if r.predicted is not None and r.measured is not None]
    if not pts:
        return False
    p, m = np.array(pts).T
    fig, ax = plt.subplots(figsize=(4.8, 4.5))
    ax.scatter(m, p, s=14, alpha=0.7)
    hi = float(max(p.max(), m.max())) * 1.05
    ax.plot([0, hi], [0, hi], color="black", linewidth=1, linestyle="--")
    ax.set_xlim(0, hi)
    ax.set_ylim(0, hi)
    ax.set_xlabel("measured plan cost (ms)")
    ax.set_ylabel("predicted plan cost (ms)")
    ax.set_title(f"{model}: predicted vs measured", fontsize=10)
    _save(fig, path)
    plt.close(fig)
    return True


def write_report(out_dir: str | Path, title: str, command: str, summaries: Sequence[AlgoSummary],
                 results: Sequence[TaskResult], meta: dict[str, Any]) -> dict[str, Path]:
    """Write report.md, results.json and the plots into ``out_dir``; returns what was written by role."""
    out = Path(out_dir)
    written: dict[str, Path] = {}
    algorithms = [s.algorithm for s in summaries]
    model = str(meta.get("cost_model", "planning cost model"))
    plots = {
        "devices_png": (out / "devices.png", lambda p: plot_devices(results[0], p) if results else False),
        "costs_png": (out / "costs.png", lambda p: plot_costs(results, algorithms, p)),
        "predicted_png": (out / "predicted_vs_measured.png",
                          lambda p: plot_predicted(results, p, model)),
    }
    for role, (path, fn) in plots.items():
        if fn(path):
            written[role] = path
    md = markdown(title, command, summaries, results, meta)
    if written:
        md += "\nPlots: " + ", ".join(f"[{p.name}]({p.name})" for p in written.values()) + "\n"
    atomic_write_bytes(out / "report.md", md.encode())
    write_json(out / "results.json", raw_json(summaries, results, meta))
    written["report_md"] = out / "report.md"
    written["results_json"] = out / "results.json"
    return written
