"""Write a benchmark's results: a markdown table, a JSON of every raw number, and PNG plots.

The markdown says plainly where the learned/searching planners do not beat the best heuristic, and how noisy
the measurements were, because a reader decides from it whether autoshard is worth using on their hardware.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.bench.summary import AlgoSummary, geomean, is_heuristic
from autoshard.io import ARTEFACT_VERSION, atomic_write_bytes, write_json
from autoshard.pipeline.results import TaskResult

log = logging.getLogger(__name__)

TIE_TOLERANCE = 0.02
"""Ratios within 2% of 1 are called a tie: run-to-run noise of plan costs on this shared CPU is of that order
(the report prints the measured spread next to it)."""


def _fmt(v: float | None, spec: str = ".3f", suffix: str = "") -> str:
    return "-" if v is None else f"{v:{spec}}{suffix}"


def _pct(v: float | None, signed: bool = True) -> str:
    if v is None:
        return "-"
    return f"{v * 100:+.1f}%" if signed else f"{v * 100:.1f}%"


def verdict_lines(summaries: Sequence[AlgoSummary]) -> list[str]:
    """Plain sentences: which non-heuristic algorithm beats, ties or loses to the best heuristic."""
    lines = []
    for s in summaries:
        if s.heuristic:
            continue
        if s.tasks_ok == 0:
            lines.append(f"- **{s.algorithm}** produced no plan ({'; '.join(s.errors) or 'no result'}).")
            continue
        r = s.geomean_ratio_to_best_heuristic
        if r is None:
            continue
        if r < 1 - TIE_TOLERANCE:
            word = f"beats the best heuristic by {(1 - r) * 100:.1f}% (geometric mean)"
        elif r > 1 + TIE_TOLERANCE:
            word = f"is **worse** than the best heuristic by {(r - 1) * 100:.1f}% (geometric mean)"
        else:
            word = f"ties with the best heuristic (within {TIE_TOLERANCE:.0%}; ratio {r:.3f})"
        partial = ("" if s.tasks_ok == s.tasks_total
                   else f" on the {s.tasks_ok}/{s.tasks_total} tasks it planned")
        lines.append(f"- **{s.algorithm}** {word}{partial}; cheapest plan on {s.wins}/{s.tasks_total} tasks; "
                     f"beyond the round-to-round spread, better than the best heuristic on {s.clear_wins} "
                     f"and worse on {s.clear_losses}.")
    return lines


def markdown(title: str, command: str, summaries: Sequence[AlgoSummary], results: Sequence[TaskResult],
             meta: dict[str, Any]) -> str:
    """The report as markdown: command, hardware, the comparison table, verdicts and skipped algorithms."""
    host = meta.get("host", {})
    loads = [x for tr in results for x in tr.load_average]
    lb_models = sorted({tr.lower_bound_model for tr in results if tr.lower_bound_ms})
    lb_notes = sorted({tr.lower_bound_note for tr in results if tr.lower_bound_note})
    out = [
        f"## {title}", "",
        f"Command: `{command}`", "",
        f"Hardware: {host.get('cpu', '?')}, {host.get('cpu_count', '?')} logical CPUs, torch "
        f"{host.get('torch', '?')}, fbgemm-gpu {host.get('fbgemm_gpu', '?')}"
        + (f", GPU {host['gpu']}" if host.get("gpu") else "") + ".",
        (f"Evaluator: {meta.get('evaluator', '?')}. Planning cost model: {meta.get('cost_model', '?')}. "
         f"Policy: {meta.get('policy', '-')}."),
        f"{len(results)} test tasks; every plan of a task measured back-to-back in {meta.get('rounds', '?')} "
        "rounds, median kept."
        + (f" Host load average (1 min) while measuring: {min(loads):.1f} to {max(loads):.1f} on "
           f"{host.get('cpu_count', '?')} CPUs (other processes slow timings down)." if loads else ""), "",
        ("| algorithm | planned | cost ms (geomean) | ratio to best heuristic | wins "
         "| clearly better / worse | gap to lower bound | planning s (mean / max) "
         "| prediction error | noise |"),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summaries:
        name = s.algorithm + (" (heuristic)" if s.heuristic else "")
        out.append(
            f"| {name} | {s.tasks_ok}/{s.tasks_total} | {_fmt(s.geomean_ms, '.2f')} "
            f"| {_fmt(s.geomean_ratio_to_best_heuristic)} | {s.wins} | {s.clear_wins} / {s.clear_losses} "
            f"| {_pct(s.geomean_gap_to_lower_bound)} "
            f"| {_fmt(s.mean_planning_s, '.3f')} / {_fmt(s.max_planning_s, '.3f')} "
            f"| {_pct(s.prediction_error, False)} | {_pct(s.noise, False)} |"
        )
    out += [
        "",
        "Ratio to best heuristic: per task, the plan's measured cost over the cheapest heuristic plan of "
        "that task (an oracle pick among all heuristics), then the geometric mean; below 1 is better. "
        "Gap to lower bound: geometric mean of cost / bound - 1"
        + (f" (bound: autoshard.planners.exact.lower_bound with the {', '.join(lb_models)} cost of every "
           "table alone, linearised; measured separately from the plans, so noise or non-additive kernels "
           "can make a gap negative)" if lb_models else " (no bound available)")
        + ". Prediction error: mean |predicted - measured| / measured of the plan cost by the planning "
        "model. "
        "Wins: tasks where its plan measured cheapest of all. Clearly better / worse: tasks where every "
        "round of its plan measured below / above every round of the best heuristic's plan (the rest are "
        "within the measurement spread). Noise: median spread (max - min) / median of a plan's cost across "
        "rounds.", "",
    ]
    verdicts = verdict_lines(summaries)
    if verdicts:
        out += ["Verdict:", "", *verdicts, ""]
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
        out += [f"Lower bound: {'; '.join(lb_notes)}", ""]
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
