"""Would a default heuristic chosen by measurement beat the model's pick as the guard's reference? Checked on
archived bench runs, cross-fitted over their tasks; nothing is measured.

    .venv/bin/python benchmarks/default_heuristic_folds.py \
        benchmarks/runs/s23-dlrm-100-4.json.gz=src/autoshard/data/default_cost_model.pt \
        benchmarks/runs/s25-gpu-h200-dlrm-50-4-b16384.json.gz=benchmarks/gpu/cost-h200-dlrm50-b16384.pt

Each argument is RUN=CHECKPOINT (the model the run planned with). The tasks are split in two folds (even,
odd); on one fold the guard heuristic with the lowest geometric-mean measured cost is chosen (what a user who
times the heuristics on a few of their tasks would deploy), and on the other the guard's reference is priced
by ``benchmarks/guard_margin.py``'s rules: 'cheapest' (today: the heuristic the model prices cheapest),
'default' (the chosen one unless the model prices another cheaper by more than the margin) and 'always'.
Printed: the measured step of each rule's pick over the per-task best heuristic, geometric mean over all
tasks (each task priced by the fold that did not choose), and the default each fold chose.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned import LearnedCostModel
from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.planners.guard import GUARD_HEURISTICS

sys.path.insert(0, str(Path(__file__).resolve().parent))  # guard_margin.py, beside this script
import guard_margin

RULES = ("cheapest", "default", "always")




def fixed_best(tasks: list[dict]) -> str:
    """The guard heuristic with the lowest geometric-mean measured step over ``tasks``."""
    def cost(h: str) -> float:
        steps = [next(x["measured"]["plan_ms"] for x in t["results"] if x["algorithm"] == h and x["ok"])
                 for t in tasks]
        return float(np.mean(np.log(steps)))
    return min(GUARD_HEURISTICS, key=lambda h: (cost(h), h))


def analyse(results: dict, model: LearnedCostModel) -> tuple[dict[str, float], list[str]]:
    gm = guard_margin
    tasks = results["tasks"]
    picked: dict[str, list[float]] = {rule: [] for rule in RULES}
    chosen = []
    for fold in range(2):
        choose = [t for i, t in enumerate(tasks) if i % 2 != fold]
        price = [t for i, t in enumerate(tasks) if i % 2 == fold]
        default = fixed_best(choose)
        chosen.append(default)
        rules = gm.analyse({**results, "tasks": price}, model, [1.0], default)["rules"]
        for rule in RULES:
            picked[rule] += rules[("H*", rule)]
    return {rule: gm.geomean(v) for rule, v in picked.items()}, chosen


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="RUN=CHECKPOINT pairs")
    args = p.parse_args(argv)
    print("| run | tasks | model's cheapest | measured default unless the model is sure | measured default "
          "always | defaults chosen (fold 0, fold 1) |")
    print("|---|---|---|---|---|---|")
    try:
        for pair in args.runs:
            run, sep, checkpoint = pair.partition("=")
            if not sep:
                raise AutoshardError(f"{pair!r}: give RUN=CHECKPOINT")
            results = read_json(run)
            comm = AlphaBeta.from_json(results["comm"])
            model = LearnedCostModel.load(checkpoint, allow_other_hardware=True).with_comm(comm)
            ratios, chosen = analyse(results, model)
            print(f"| {Path(run).name.split('.')[0]} | {len(results['tasks'])} | {ratios['cheapest']:.3f} | "
                  f"{ratios['default']:.3f} | {ratios['always']:.3f} | {', '.join(chosen)} |")
    except AutoshardError as e:
        print(f"default_heuristic_folds: error: {e}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, ValueError) as e:
        why = f"{type(e).__name__}: {e}"
        print(f"default_heuristic_folds: error: not a finished bench's results file ({why})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
