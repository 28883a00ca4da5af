"""How much the measured time of one all-to-all differs between identical byte matrices timed in one call of
``autoshard.hardware.collectives.measure_all_to_alls`` (what the bench does with every plan's collectives):
identical matrices should measure the same, so their spread is the measurement's noise.

Run: .venv/bin/python benchmarks/collective_noise.py [--ranks 2] [--copies 8] [--kb 64,350,1300]
                                                      [--repeats 30] [--trials 3] [-o out.json]

For each size, ``--copies`` identical (D, D) matrices (every rank sends every other rank KB kilobytes)
are timed in one call, the sizes one after another as a bench task's plans are; per size it prints the
copies' median ms, their spread (max - min) / median and their coefficient of variation, per trial, and
the pooled spread over trials. Why: stop 24 found the pooled-output and output-gradient all-to-alls of the
same plan (equal bytes) measured 0.80-1.38x each other (p10-p90 over DLRM-10 (2)'s 61 distinct plans), a
noise that the bench's rounds do not average out because collectives are timed once per plan.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.hardware.collectives import DEFAULT_REPEATS, measure_all_to_alls
from autoshard.io import write_json


def matrix(ranks: int, kb: float) -> np.ndarray:
    m = np.full((ranks, ranks), kb * 1024.0)
    np.fill_diagonal(m, 0.0)
    return m


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--copies", type=int, default=8, help="identical matrices per size")
    p.add_argument("--kb", default="64,350,1300", help="sizes, KB each rank sends each other rank")
    p.add_argument("--repeats", type=int, default=DEFAULT_REPEATS,
                   help=f"timed runs per matrix (the bench's: {DEFAULT_REPEATS})")
    p.add_argument("--trials", type=int, default=3, help="separate calls (process starts)")
    p.add_argument("-o", "--output", help="also write every timing as JSON here")
    args = p.parse_args(argv)
    try:
        sizes = [float(x) for x in args.kb.split(",") if x.strip()]
        if args.copies < 2 or args.trials < 1 or not sizes:
            raise AutoshardError("give --copies >= 2, --trials >= 1 and at least one --kb size")
        mats = [matrix(args.ranks, kb) for kb in sizes for _ in range(args.copies)]
        rows = []
        for trial in range(args.trials):
            timings = measure_all_to_alls(mats, repeats=args.repeats)
            for i, kb in enumerate(sizes):
                ms = np.array([t.ms for t in timings[i * args.copies:(i + 1) * args.copies]])
                rows.append({"trial": trial, "kb": kb, "ms": ms.tolist()})
                spread, cv = (ms.max() - ms.min()) / np.median(ms), ms.std() / ms.mean()
                print(f"trial {trial} {kb:>7g} KB: median {np.median(ms):.3f} ms, spread {spread:.2f}, "
                      f"cv {cv:.3f}")
        for kb in sizes:
            mine = [np.asarray(r["ms"]) for r in rows if r["kb"] == kb]
            spreads = [(m.max() - m.min()) / float(np.median(m)) for m in mine]
            cvs = [float(m.std() / m.mean()) for m in mine]
            print(f"{kb:>7g} KB over {args.trials} trials: spread {np.mean(spreads):.2f}, "
                  f"cv {np.mean(cvs):.3f}")
        if args.output:
            write_json(Path(args.output), {"args": vars(args), "rows": rows})
    except (AutoshardError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
