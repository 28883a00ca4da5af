"""How much the measured time of one all-to-all differs between identical byte matrices timed in one call of
``autoshard.hardware.collectives.measure_all_to_alls`` (what the bench does with every plan's collectives):
identical matrices should measure the same, so their spread is the measurement's noise.

Run: .venv/bin/python benchmarks/collective_noise.py [--ranks 2] [--copies 8] [--kb 64,350,1300]
                                                      [--repeats 30] [--trials 3] [-o out.json]
     .venv/bin/python benchmarks/collective_noise.py --bench-run RESULTS [--tasks 0,5,9]

For each size, ``--copies`` identical (D, D) matrices (every rank sends every other rank KB kilobytes)
are timed in one call, the sizes one after another as a bench task's plans are; per size it prints the
copies' median ms, their spread (max - min) / median and their coefficient of variation, per trial, and
the pooled spread over trials. Why: stop 24 found the pooled-output and output-gradient all-to-alls of the
same plan (equal bytes) measured 0.80-1.38x each other (p10-p90 over DLRM-10 (2)'s 61 distinct plans), a
noise that the bench's rounds do not average out because collectives are timed once per plan.

``--bench-run RESULTS`` instead reads a bench results file: over its distinct plans, the measured
pooled-output all-to-all over the output-gradient one (equal bytes, so a spread around 1 is noise;
p10 / median / p90), then times what the measurement costs the bench: the seconds
``autoshard.pipeline.measure.measure_collectives`` takes for each chosen task (every distinct plan's
collectives in one process group, as the bench times them).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.hardware.collectives import DEFAULT_REPEATS, measure_all_to_alls
from autoshard.io import write_json


def matrix(ranks: int, kb: float) -> np.ndarray:
    m = np.full((ranks, ranks), kb * 1024.0)
    np.fill_diagonal(m, 0.0)
    return m


def time_bench_collectives(path: Path, tasks: str) -> None:
    """Print the seconds the bench's collectives step takes on each chosen task of ``path``."""
    from autoshard.costs.comm import AlphaBeta
    from autoshard.io import read_json
    from autoshard.pipeline.measure import measure_collectives
    from autoshard.pipeline.results import TaskResult

    run = read_json(path)
    try:
        comm = AlphaBeta.from_json(run["comm"])
        chosen = [TaskResult.from_json(run["tasks"][int(i)]) for i in tasks.split(",") if i.strip()]
    except (KeyError, IndexError, TypeError, ValueError) as e:
        raise AutoshardError(f"{path}: not a finished bench's results, or --tasks {tasks!r} not in it "
                             f"({type(e).__name__}: {e})") from None
    ratios = []
    for t in run["tasks"]:
        seen = set()
        for x in t["results"]:
            cs = {c["name"]: c["ms"] for c in (x.get("measured") or {}).get("collectives", ())}
            key = tuple(sorted(cs.items()))
            if x.get("ok") and cs.get("output_grads") and key not in seen:  # identical plans share timings
                seen.add(key)
                ratios.append(cs["pooled_outputs"] / cs["output_grads"])
    if ratios:
        q = np.quantile(ratios, [0.1, 0.5, 0.9])
        print(f"pooled-output / output-gradient all-to-all over {len(ratios)} distinct plans: "
              f"p10 {q[0]:.2f}, median {q[1]:.2f}, p90 {q[2]:.2f}")
    for tr in chosen:
        t0 = time.perf_counter()
        measure_collectives(tr.task, tr.results, comm)
        print(f"{tr.task.name}: collectives of its distinct plans timed in {time.perf_counter() - t0:.1f} s")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--copies", type=int, default=8, help="identical matrices per size")
    p.add_argument("--kb", default="64,350,1300", help="sizes, KB each rank sends each other rank")
    p.add_argument("--repeats", type=int, default=DEFAULT_REPEATS,
                   help=f"timed runs per matrix (the bench's: {DEFAULT_REPEATS})")
    p.add_argument("--trials", type=int, default=3, help="separate calls (process starts)")
    p.add_argument("-o", "--output", help="also write every timing as JSON here")
    p.add_argument("--bench-run",
                   help="instead time the bench's collectives step on this results file's tasks")
    p.add_argument("--tasks", default="0,5,9", help="with --bench-run: task indices (default 0,5,9)")
    args = p.parse_args(argv)
    try:
        if args.bench_run:
            time_bench_collectives(Path(args.bench_run), args.tasks)
            return 0
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
