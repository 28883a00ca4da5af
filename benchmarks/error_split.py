"""How much of the planning model's per-device error on archived bench runs is the model's and how much the
instrument's (``autoshard.bench.error_split``, which every bench report also prints); nothing is measured.

Run: .venv/bin/python benchmarks/error_split.py RESULTS [RESULTS ...]

RESULTS: bench results files (``DIR/bench/results.json`` or gzipped in ``benchmarks/runs/``). Printed per
file, as one markdown table (log sd over the distinct devices; the method is the module's docstring): the
devices and rounds, the sd of one round's error, the correlation between rounds (mean over the pairs), the
model's part (the rounds' shared part), the instrument's part of one round and of the minimum over the rounds
(the noise the bench's ground truth keeps on a device), that part for the minimum of k = 1..R rounds (every k
of the run's R averaged: what a run with fewer rounds would have kept) and the fewest rounds whose minimum
carries less instrument noise than the model's own error ("> R" where not even R do). Older runs are restated
as they were written, so one table compares hosts and suites (docs/benchmarks.md, "Stop 66", "Stop 67").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autoshard.bench.error_split import rounds_needed, split_by_rounds
from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.pipeline.results import TaskResult


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="bench results files")
    args = ap.parse_args(argv)
    rows = []
    for path in args.results:
        try:
            results = read_json(path, kind="autoshard.bench")  # its errors name the file
        except AutoshardError as e:
            print(f"error_split: error: {e}", file=sys.stderr)
            return 2
        try:
            s, curve = split_by_rounds([TaskResult.from_json(t) for t in results.get("tasks") or []])
        except AutoshardError as e:
            print(f"error_split: error: {path}: {e}", file=sys.stderr)
            return 2
        except (KeyError, ValueError, TypeError, IndexError) as e:
            print(f"error_split: error: {path}: not a bench results file ({e!r}); pass a results.json",
                  file=sys.stderr)
            return 2
        name = Path(path).name.removesuffix(".json.gz") if path.endswith(".json.gz") else path
        needed = rounds_needed(curve, s.model_sd) or f"> {s.rounds}"
        rows.append(f"| {name} | {s.devices} | {s.rounds} | {s.round_sd:.3f} | {s.correlation:.2f} | "
                    f"{s.model_sd:.3f} | {s.round_noise_sd:.3f} | {s.min_noise_sd:.3f} | "
                    + " ".join(f"{v:.3f}" for v in curve) + f" | {needed} |")
    print("| run | devices | rounds | one round's sd | correlation between rounds | model | instrument, one "
          "round | instrument, min of the rounds | instrument, min of k = 1..R rounds | rounds for it to "
          "fall below the model's |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
