"""Does the planning model price the hottest tables' column cuts right? From the shards a bench run timed
alone for its stage floor (``StageFloor.alone``: the tables that could set the floor, whole and at each even
column cut, the least of the run's rounds), against the shipped model's price of each alone.

    .venv/bin/python benchmarks/hot_width_error.py benchmarks/runs/s73-amd-dlrm-50-8-torchrec.json.gz ... \
        [--top 2] [--cost-model src/autoshard/data/default_cost_model.pt] [--each]

Printed per run: the distinct tables timed (each once, its first task's timings), and for the ``--top``
tables that timed dearest whole (backward) and for the rest: the geometric mean of measured / predicted
backward of the table whole, of its half and of its narrowest cut, and the measured and predicted ratio of
whole to narrowest (how much a cut spreads); with ``--each``, then each of those tables' measured and
predicted backward whole. Nothing is planned or measured.

Why (docs/benchmarks.md, "Stop 74"): on DLRM-50 (8)'s roomy tasks the device holding the hottest table set
the step in every plan; the model prices that table's backward too low whole and too high cut, so no planner
cut it. A model right on average can still be wrong on the few tables a plan's step waits for.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from autoshard.bench.summary import geomean
from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.pipeline.results import task_results_of

DEFAULT_MODEL = "src/autoshard/data/default_cost_model.pt"


def table_widths(tasks, model) -> dict[str, dict[float, tuple[float, float]]]:
    """Per table name: {width / dim: (measured bwd, predicted bwd)} of its whole-row shards timed alone."""
    out: dict[str, dict[float, tuple[float, float]]] = {}
    for tr in tasks:
        floor = tr.stage_floor
        if floor is None or not floor.alone:
            continue
        refs = [r for r, _, _ in floor.alone if r.row_start == 0 and r.row_end is None and not r.replica]
        timed = {r: b for r, _, b in floor.alone}
        fresh = [r for r in refs if tr.task.tables[r.table].name not in out
                 or r.dim / tr.task.tables[r.table].dim not in out[tr.task.tables[r.table].name]]
        if not fresh:
            continue
        predicted = np.asarray(model.device_costs(tr.task, [[r] for r in fresh]), dtype=np.float64)[:, 1]
        for r, p in zip(fresh, predicted):
            t = tr.task.tables[r.table]
            out.setdefault(t.name, {})[round(r.dim / t.dim, 4)] = (float(timed[r]), float(p))
    return out


def _gm(values: list[float]) -> str:
    return f"{geomean(values):.2f}" if values else "-"


def summarise(widths: dict[str, dict[float, tuple[float, float]]], names: list[str]) -> list[str]:
    """Cells for ``names``: measured / predicted whole, half, narrowest; whole / narrowest measured and
    predicted."""
    rows = {"whole": [], "half": [], "narrowest": [], "spread_m": [], "spread_p": []}
    for n in names:
        w = widths[n]
        narrow = min(w)
        rows["whole"].append(w[1.0][0] / w[1.0][1])
        if 0.5 in w:
            rows["half"].append(w[0.5][0] / w[0.5][1])
        if narrow < 1.0:
            rows["narrowest"].append(w[narrow][0] / w[narrow][1])
            rows["spread_m"].append(w[1.0][0] / w[narrow][0])
            rows["spread_p"].append(w[1.0][1] / w[narrow][1])
    return [str(len(names)), _gm(rows["whole"]), _gm(rows["half"]), _gm(rows["narrowest"]),
            f"{_gm(rows['spread_m'])} / {_gm(rows['spread_p'])}"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="bench results files (.json or .json.gz)")
    p.add_argument("--top", type=int, default=2,
                   help="tables that timed dearest whole, read apart (default 2)")
    p.add_argument("--cost-model", default=DEFAULT_MODEL,
                   help=f"the planning model (default {DEFAULT_MODEL})")
    p.add_argument("--each", action="store_true",
                   help="also print each of the --top tables: its measured and predicted backward whole")
    args = p.parse_args(argv)
    if args.top < 1:
        print(f"hot_width_error: error: --top {args.top} must be 1 or more", file=sys.stderr)
        return 2
    try:  # every file read and priced before a line is printed: a bad one leaves no half-written table
        from autoshard.costs.learned.model import LearnedCostModel

        model = LearnedCostModel.load(args.cost_model, allow_other_hardware=True)
        rows, each = [], []
        for path in args.runs:
            widths = table_widths(task_results_of(read_json(path, kind="autoshard.bench"), path), model)
            widths = {n: w for n, w in widths.items() if 1.0 in w}
            name = Path(path).name.removesuffix(".gz").removesuffix(".json")
            if not widths:
                print(f"{name}: no shards timed alone (runs before stop 57 kept none); skipped",
                      file=sys.stderr)
                continue
            order = sorted(widths, key=lambda n: -widths[n][1.0][0])
            rest = summarise(widths, order[args.top:]) if order[args.top:] else ["0", "-", "-", "-", "-"]
            hottest = summarise(widths, order[:args.top])
            rows.append(f"| {name} | {' | '.join(hottest)} | {' | '.join(rest)} |")
            if args.each:
                each.extend(f"{name}: {n} whole bwd measured {widths[n][1.0][0]:.2f} ms, predicted "
                            f"{widths[n][1.0][1]:.2f} ms ({widths[n][1.0][0] / widths[n][1.0][1]:.2f})"
                            for n in order[:args.top])
    except AutoshardError as e:
        print(f"hot_width_error: error: {e}", file=sys.stderr)
        return 2
    if not rows:
        print("hot_width_error: error: no run had shards timed alone; pass bench results of stop 57 or later",
              file=sys.stderr)
        return 2
    cells = ("tables | measured / predicted bwd: whole | half | narrowest | whole / narrowest: measured / "
             "predicted")
    print(f"| run | hottest {cells} | other {cells} |")
    print("|---|" + "---|" * 10)
    print("\n".join(rows))
    if each:
        print("\n".join(each))
    return 0


if __name__ == "__main__":
    sys.exit(main())
