"""How far is the planners' comm model from the collectives the bench measured, and does a better one change
the learned planners' pick among heuristics? From archived bench runs, no new measurement.

Run: .venv/bin/python benchmarks/comm_fit.py RUN [RUN ...] [--cost-model CKPT]

RUN: a bench results file (``DIR/bench/results.json``, or gzipped in ``benchmarks/runs/``) whose collectives
were timed with every plan's own splits (``--collectives measure``; runs that modelled them are skipped with
a line). The planners price each all-to-all with the run's alpha-beta fit (``costs.step.collective_ms``: the
latency plus the busiest rank's bytes over the bandwidth), fitted on a sweep of even all-to-alls before the
bench. Per run this prints, over every measured collective of every plan (the busiest rank's bytes, sent or
received, against the measured time):

- the sweep fit's error (MAPE) on them, and the correlation of bytes with time;
- an alpha-beta fitted by least squares on the measured collectives themselves, and its (in-sample) MAPE;
- with ``--cost-model``: H*, the guard heuristic the model prices cheapest (what a learned planner returns
  when the model sees no gain beyond its spread; ``guard_margin.py``), priced with the run's comm fit and
  with an alpha-beta fitted on the measured collectives of the OTHER half of the tasks (cross-fitted, so
  no task's pick uses its own measurements), each as the geometric mean over tasks of H*'s measured step
  over the per-task best heuristic's; and the same for always lookup_greedy.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.bench.summary import geomean
from autoshard.breakdown import CollectiveCost
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.metrics import mape
from autoshard.errors import AutoshardError
from autoshard.hardware.comm import fit_points
from autoshard.io import read_json

sys.path.insert(0, str(Path(__file__).resolve().parent))  # guard_margin.py, beside this script
import guard_margin

H_STAR = ("H*", "cheapest")


def collective_points(tasks: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(busiest rank's bytes, measured ms, the run's modelled ms) of every measured collective that moved
    bytes, over every plan of ``tasks``."""
    rows = []
    for t in tasks:
        for r in t["results"]:
            if not r.get("ok") or not r.get("measured"):
                continue
            for c in map(CollectiveCost.from_json, r["measured"].get("collectives", [])):
                if c.measured_ms is not None and c.busiest_bytes > 0:
                    rows.append((c.busiest_bytes, c.measured_ms, c.modelled_ms))
    out = np.array(rows, dtype=np.float64).reshape(-1, 3)
    return out[:, 0], out[:, 1], out[:, 2]


def h_star(results: dict[str, Any], tasks: list[dict[str, Any]], model: Any, comm: AlphaBeta) -> list[float]:
    """Per task, H*'s measured step over the best heuristic's, H* priced by ``model`` with ``comm``."""
    rules = guard_margin.analyse({**results, "tasks": tasks}, model.with_comm(comm), [1.0], "lookup_greedy")
    return rules["rules"][H_STAR]


def analyse_run(results: dict[str, Any], model: Any = None) -> dict[str, Any] | None:
    """The figures of one run (module docstring); None when it measured no collective."""
    tasks = results["tasks"]
    x, y, modelled = collective_points(tasks)
    if not len(x):
        return None
    own = fit_points(x, y, "fitted on the measured collectives")
    out: dict[str, Any] = {
        "collectives": len(x), "bytes": (float(x.min()), float(x.max())),
        "ms": (float(y.min()), float(y.max())),
        "fit": AlphaBeta.from_json(results["comm"]), "fit_mape": mape(modelled, y) / 100,
        "correlation": float(np.corrcoef(x, y)[0, 1]) if x.std() > 0 and y.std() > 0 else float("nan"),
        "measured_fit": own, "measured_fit_mape": mape(own.alpha_ms + x / own.bytes_per_ms, y) / 100}
    if model is not None:
        crossed = []
        for half in (0, 1):
            test = [t for i, t in enumerate(tasks) if i % 2 == half]
            train = [t for i, t in enumerate(tasks) if i % 2 != half]
            tx, ty, _ = collective_points(train)
            if test and len(tx) >= 2:
                crossed += h_star(results, test, model, fit_points(tx, ty, "cross-fitted"))
        rules = guard_margin.analyse(results, model.with_comm(out["fit"]), [1.0], "lookup_greedy")["rules"]
        out["h_star_run_fit"] = geomean(rules[H_STAR])
        out["h_star_cross_fit"] = geomean(crossed) if len(crossed) == len(tasks) else float("nan")
        out["always_lookup_greedy"] = geomean(rules[("H*", "always")])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="bench results files (plain or .json.gz)")
    p.add_argument("--cost-model", help="also re-price H* with each comm model (the checkpoint the run "
                                        "planned with)")
    args = p.parse_args(argv)
    try:
        model = None
        if args.cost_model:  # loaded before anything is printed: a bad checkpoint prints only its error
            from autoshard.costs.learned import LearnedCostModel

            model = LearnedCostModel.load(args.cost_model, allow_other_hardware=True)
        runs = [(path, read_json(path)) for path in args.runs]
        figures = [(path, analyse_run(results, model)) for path, results in runs]
    except AutoshardError as e:
        print(f"comm_fit: error: {e}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, ValueError, IndexError) as e:
        print(f"comm_fit: error: not a finished bench's results file ({type(e).__name__}: {e})",
              file=sys.stderr)
        return 2
    for path, f in figures:
        name = Path(path).name
        if f is None:
            print(f"{name}: no measured collectives (the run modelled them); skipped")
            continue
        fit, own = f["fit"], f["measured_fit"]
        line = (f"{name}: {f['collectives']} collectives, busiest rank {f['bytes'][0] / 1e3:.0f}-"
                f"{f['bytes'][1] / 1e3:.0f} KB, {f['ms'][0]:.2f}-{f['ms'][1]:.2f} ms (correlation "
                f"{f['correlation']:.2f}); the run's fit {fit.alpha_ms:.3f} ms + bytes / "
                f"{fit.bytes_per_ms / 1e3:.0f} KB/ms: MAPE {100 * f['fit_mape']:.0f}%; fitted on them "
                f"{own.alpha_ms:.3f} ms + bytes / {own.bytes_per_ms / 1e3:.0f} KB/ms: MAPE "
                f"{100 * f['measured_fit_mape']:.0f}%")
        if "h_star_run_fit" in f:
            line += (f"; H* with the run's fit {f['h_star_run_fit']:.3f}, cross-fitted "
                     f"{f['h_star_cross_fit']:.3f}, always lookup_greedy {f['always_lookup_greedy']:.3f}")
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
