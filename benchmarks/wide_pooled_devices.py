"""Is the planning model further off on devices that hold a wide, heavily pooled table among few others?

    .venv/bin/python benchmarks/wide_pooled_devices.py RESULTS [RESULTS ...] \
        [--dim 256] [--pooling 50] [--few 3] [--cost-model src/autoshard/data/default_cost_model.pt]

RESULTS: bench results files (``DIR/bench/results.json`` or gzipped in ``benchmarks/runs/``). Every
measured device of every plan the run priced with its planning model (each algorithm's, TorchRec's
included) falls in one of four groups: whether it holds a shard at least ``--dim`` columns wide of a table
whose pooling factor is at least ``--pooling``, and whether it holds at most ``--few`` shards. Printed
per file and group: the device count and the geometric mean of measured / predicted forward and of
backward; and the same ratios of the wide-and-few group over the rest (the bias a planner meets when it
gives such a table a device of its own or nearly). With ``--cost-model M``, also the tables the run timed
alone and whole for its stage floor (``StageFloor.alone``; each table once, at its first task), wide pooled
and the others apart: measured / predicted forward and backward by ``M`` (the shipped model for the runs of
the default), and each wide pooled table's milliseconds: whether the bias is the table's own or the device's
mix.

Why (docs/benchmarks.md, "Stop 85"): on production-40-8's test-9 rl kept its own plan for a predicted gain of
11.5 ms (uncertainty 2.9 ms) and measured 3.0% above dim_greedy's plan: its two devices holding a wide
(128-256 columns), heavily pooled (53-89) table of 0.4-1.4M rows among 3 tables measured 2.2-2.3x the
predicted forward. A bias shared by every device
of a task does not change which plan wins; one that depends on what a device holds does, and the ensemble's
spread did not show it. The tables timed alone say whose it is: the wide pooled tables' own (1.67x against
1.25x for the other tables timed alone there), which a device that holds little else shows undiluted.
Nothing is planned or measured here.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

import numpy as np

from autoshard.bench.summary import geomean
from autoshard.costs.base import CostModel
from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.pipeline.results import TaskResult, task_results_of
from autoshard.tables import Table

GROUPS = ("wide pooled, few", "wide pooled, more", "other, few", "other, more")


def device_ratios(tasks: list[TaskResult], dim: int, pooling: float,
                  few: int) -> dict[str, list[tuple[float, float]]]:
    """Per group, (measured / predicted forward, measured / predicted backward) of every measured device."""
    groups: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for tr in tasks:
        pooling_of = {t.name: t.pooling_factor for t in tr.task.tables}
        for r in tr.results:
            if not (r.ok and r.predicted is not None and r.measured is not None):
                continue
            held: dict[int, list[tuple[int, float]]] = defaultdict(list)
            for placement in r.plan.placements:
                for shard in placement.shards:
                    held[shard.rank].append((shard.cols, pooling_of[placement.table]))
            for rank, (pd, md) in enumerate(zip(r.predicted.devices, r.measured.devices)):
                if not held.get(rank) or min(pd.fwd_ms, pd.bwd_ms, md.fwd_ms, md.bwd_ms) <= 0:
                    continue
                wide = any(cols >= dim and p >= pooling for cols, p in held[rank])
                group = f"{'wide pooled' if wide else 'other'}, {'few' if len(held[rank]) <= few else 'more'}"
                groups[group].append((md.fwd_ms / pd.fwd_ms, md.bwd_ms / pd.bwd_ms))
    return groups


def tables_alone(tasks: list[TaskResult], model: CostModel) -> list[tuple[Table, float, float, float, float]]:
    """(table, measured fwd, predicted fwd, measured bwd, predicted bwd) of every table the run timed alone
    and whole for its stage floor, each table once (its first task's timing)."""
    rows: list[tuple[Table, float, float, float, float]] = []
    seen: set[str] = set()
    for tr in tasks:
        tables = tr.task.tables
        timed = [(r, f, b) for r, f, b in (tr.stage_floor.alone if tr.stage_floor else ())
                 if r.dim == tables[r.table].dim and r.row_start == 0 and r.row_end is None and not r.replica
                 and tables[r.table].name not in seen]
        if not timed:
            continue
        predicted = np.asarray(model.device_costs(tr.task, [[r] for r, _, _ in timed]), dtype=np.float64)
        for (r, f, b), (pf, pb) in zip(timed, predicted[:, :2]):
            seen.add(tables[r.table].name)
            rows.append((tables[r.table], f, float(pf), b, float(pb)))
    return rows


def wide_few_excess(groups: dict[str, list[tuple[float, float]]]) -> tuple[float, float] | None:
    """(forward, backward) measured / predicted of the wide-pooled-and-few devices over the others'."""
    rest = [ratios for g in GROUPS[1:] for ratios in groups.get(g, [])]
    if not groups.get(GROUPS[0]) or not rest:
        return None
    return tuple(geomean([x[i] for x in groups[GROUPS[0]]]) / geomean([x[i] for x in rest]) for i in (0, 1))


def print_run(path: str, groups: dict[str, list[tuple[float, float]]], alone: list, dim: int,
              pooling: float) -> None:
    print(path)
    for group in GROUPS:
        if groups.get(group):
            print(_line(group, "devices", groups[group]))
    rest = [ratios for g in GROUPS[1:] for ratios in groups.get(g, [])]
    if groups.get(GROUPS[0]) and rest:
        print(_line("the rest", "devices", rest))
    excess = wide_few_excess(groups)
    if excess is not None:
        print(f"  wide pooled and few over the rest: fwd {excess[0]:.2f}, bwd {excess[1]:.2f}")
    is_wide = [t.dim >= dim and t.pooling_factor >= pooling for t, *_ in alone]
    wide = [row for row, w in zip(alone, is_wide) if w]
    other = [row for row, w in zip(alone, is_wide) if not w]
    for label, rows in (("alone: wide pooled", wide), ("alone: other", other)):
        if rows:
            print(_line(label, "tables", [(f / pf, b / pb) for _, f, pf, b, pb in rows]))
    for t, f, pf, b, pb in wide:
        print(f"    {t.name} (dim {t.dim}, pooling {t.pooling_factor:.0f}, {t.rows} rows): fwd {f:.2f} ms "
              f"measured / {pf:.2f} predicted, bwd {b:.2f} / {pb:.2f}")


def _line(label: str, unit: str, ratios: list[tuple[float, float]]) -> str:
    fwd, bwd = zip(*ratios)
    return (f"  {label:18s} {len(fwd):4d} {unit:7s}   measured / predicted fwd {geomean(fwd):.2f}, "
            f"bwd {geomean(bwd):.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="bench results files")
    ap.add_argument("--dim", type=int, default=256, help="least shard width (columns) counted as wide")
    ap.add_argument("--pooling", type=float, default=50.0, help="least pooling factor counted as heavy")
    ap.add_argument("--few", type=int, default=3, help="most shards a device holds to count as few")
    ap.add_argument("--cost-model", help="also price the tables timed alone with this model (a checkpoint)")
    args = ap.parse_args(argv)
    if args.dim < 1 or args.pooling < 0 or args.few < 1:
        print("error: --dim and --few must be positive and --pooling not negative", file=sys.stderr)
        return 2
    try:  # every file read and priced before a line is printed: a bad one leaves nothing half-written
        model = None
        if args.cost_model:
            from autoshard.costs.learned.model import LearnedCostModel

            model = LearnedCostModel.load(args.cost_model, allow_other_hardware=True)
        runs = []
        for path in args.results:  # a missing file, another kind or a malformed one: an error naming it
            tasks = task_results_of(read_json(path, kind="autoshard.bench"), path)
            runs.append((path, device_ratios(tasks, args.dim, args.pooling, args.few),
                         tables_alone(tasks, model) if model is not None else []))
    except AutoshardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for path, groups, alone in runs:
        print_run(path, groups, alone, args.dim, args.pooling)
    return 0


if __name__ == "__main__":
    sys.exit(main())
