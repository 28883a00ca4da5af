"""Does an all-to-all's time on this host depend on its shape (even or uneven) and on how it is timed (the
comm sweep's even fp32 messages one size after another, or the bench's byte matrices interleaved), or on
when it is timed?

Run: .venv/bin/python benchmarks/collective_shape.py [--kb 64,128,256,512] [--trials 3] [-o out.json]

Why: stop 27 saw the sweep's even all-to-alls (``hardware.comm.measure_all_to_all``, what ``profile-comm``
fits the evaluator's comm model on) time 0.86-0.9 ms at 262 KB where the bench timed the plans' uneven ones
(``hardware.collectives.measure_all_to_alls``) at 0.4-0.6 ms on the same host, in calls minutes apart. On
2 ranks, per trial (a fresh process group each, one after another), for every size A in ``--kb``:

- ``sweep``: the sweep's forward all-to-all, rank sends A KB, in a call of its own (fp32 messages, the
  sizes one after another, median of 10 after 3 warm-up runs);
- ``even``: a byte matrix with both ranks sending A KB, timed by the bench's routine (interleaved with the
  matrices below, median of 30);
- ``uneven``: rank 0 sends A KB, rank 1 A / 4 KB (the plans' shape: one rank holds more of the outputs).

Prints one row per trial and size (ms of each), then per kind the trial-to-trial spread of the trial's mean
level and the mean of ``uneven / even`` and ``sweep / even`` within a trial.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.hardware.collectives import measure_all_to_alls
from autoshard.hardware.comm import measure_all_to_all
from autoshard.io import write_json

RANKS = 2
BATCH = 2048
"""The sweep's default batch; a rank sends BATCH / 2 rows of dim_sum fp32 values, 4 KB per unit of dim."""


def trial(sizes_kb: list[int]) -> dict[str, list[float]]:
    """One trial: the sweep's times, then the even and uneven matrices interleaved in one call."""
    dim_sums = [kb * 1024 // (BATCH // RANKS * 4) for kb in sizes_kb]
    sweep = {r.dim_sum: r.fwd_ms for r in measure_all_to_all(RANKS, dim_sums, batch_size=BATCH)}
    mats = []
    for kb in sizes_kb:
        mats.append(np.array([[0, kb * 1024], [kb * 1024, 0]], dtype=float))
        mats.append(np.array([[0, kb * 1024], [kb * 256, 0]], dtype=float))
    timed = measure_all_to_alls(mats)
    return {"sweep": [sweep[d] for d in dim_sums], "even": [t.ms for t in timed[0::2]],
            "uneven": [t.ms for t in timed[1::2]]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kb", default="64,128,256,512", help="KB rank 0 sends (multiples of 4)")
    p.add_argument("--trials", type=int, default=3, help="separate trials, one after another")
    p.add_argument("-o", "--output", help="also write every timing as JSON here")
    args = p.parse_args(argv)
    try:
        sizes = [int(x) for x in args.kb.split(",") if x.strip()]
        if not sizes or any(s < 4 or s % 4 for s in sizes) or args.trials < 1:
            raise AutoshardError("give --kb as positive multiples of 4 and --trials >= 1")
        trials = []
        for k in range(args.trials):
            t = trial(sizes)
            trials.append(t)
            for i, kb in enumerate(sizes):
                print(f"trial {k} {kb:>4d} KB: sweep {t['sweep'][i]:.3f} ms, even {t['even'][i]:.3f} ms, "
                      f"uneven {t['uneven'][i]:.3f} ms")
        for kind in ("sweep", "even", "uneven"):
            levels = [float(np.mean(t[kind])) for t in trials]
            print(f"{kind:>6}: trial mean levels {', '.join(f'{x:.3f}' for x in levels)} ms "
                  f"(max / min {max(levels) / min(levels):.2f})")
        for kind in ("uneven", "sweep"):
            r = [float(np.mean(np.array(t[kind]) / np.array(t["even"]))) for t in trials]
            print(f"{kind} / even within a trial: {', '.join(f'{x:.2f}' for x in r)}")
        if args.output:
            write_json(Path(args.output), {"sizes_kb": sizes, "trials": trials})
    except (AutoshardError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
