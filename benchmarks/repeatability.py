"""How far one device's timing moves between re-measurements, under several timing protocols.

Run: .venv/bin/python benchmarks/repeatability.py profiles/amd-epyc/broad-seed0 [--records 10] [--reps 3]

Picks ``--records`` records of a profile spread over its range of fwd+bwd cost (at most ``--max-ms``), and
times each device ``--reps`` times under every protocol below, interleaved (repetition -> record ->
protocol), so drift of the host hits every protocol alike. Per protocol it prints the re-measurement spread:
per device the coefficient of variation (std / mean) of its ``--reps`` timings, then the median over the
devices, for fwd, bwd and fwd+bwd; and the median wall seconds one timing took.

Protocols (``MeasureSettings`` fields changed from the profile's own settings):
- ``profile``: the profile's settings as recorded (median of the repeats, cache flushed before each step);
- ``min``: the minimum of the repeats instead of the median (contention only adds time);
- ``3x repeats``: three times the repeats and time budget;
- ``no flush``: no cache flush between steps.
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from autoshard.hardware.kernel import MeasureSettings, Statistic, measure_shard
from autoshard.hardware.profile_dataset import load_dataset
from autoshard.host import host_info


def protocols(base: MeasureSettings) -> dict[str, MeasureSettings]:
    budget = base.time_budget_ms * 3 if base.time_budget_ms else base.time_budget_ms
    return {
        "profile": base,
        "min": dataclasses.replace(base, statistic=Statistic.MIN),
        "3x repeats": dataclasses.replace(base, repeats=base.repeats * 3, time_budget_ms=budget),
        "no flush": dataclasses.replace(base, flush_cache=False),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", help="a profile directory (autoshard profile -o DIR), plain or packed")
    ap.add_argument("--records", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3, help="timings of every device under every protocol")
    ap.add_argument("--max-ms", type=float, default=500.0, help="only records whose fwd+bwd is below this")
    args = ap.parse_args()

    data = load_dataset(args.profile)
    picks = data.spread(args.records, args.max_ms)
    if not picks or args.reps < 2:
        raise SystemExit("no records to time (check --records, --max-ms; --reps must be >= 2)")
    base = MeasureSettings.from_json({k: v for k, v in picks[0].settings.items() if k != "precision"})
    chosen = protocols(base)
    here = host_info("cpu")
    print(f"{len(picks)} devices of {args.profile} (fwd+bwd {picks[0].fwd_ms + picks[0].bwd_ms:.1f}-"
          f"{picks[-1].fwd_ms + picks[-1].bwd_ms:.1f} ms as recorded), {args.reps} timings each per "
          f"protocol, interleaved; {here['cpu']}, torch {here['torch']}")
    # timings[protocol][device] -> list of (fwd, bwd, seconds)
    timings: dict[str, list[list[tuple[float, float, float]]]] = {p: [[] for _ in picks] for p in chosen}
    for rep in range(args.reps):
        for d, rec in enumerate(picks):
            task, refs = data.task_of(rec)
            for name, settings in chosen.items():
                start = time.perf_counter()
                t = measure_shard(task, refs, settings)
                timings[name][d].append((t.fwd_ms, t.bwd_ms, time.perf_counter() - start))
        print(f"repetition {rep + 1}/{args.reps} done", flush=True)

    print(f"{'protocol':<12} {'fwd CV':>8} {'bwd CV':>8} {'total CV':>9} {'s a timing':>11}  "
          "(median over devices of the CV of their re-measurements)")
    for name in chosen:
        runs = np.array(timings[name])  # devices x reps x 3
        fwd, bwd = runs[:, :, 0], runs[:, :, 1]

        def cv(x: np.ndarray) -> float:
            return float(np.median(x.std(axis=1) / x.mean(axis=1)))

        print(f"{name:<12} {100 * cv(fwd):7.1f}% {100 * cv(bwd):7.1f}% {100 * cv(fwd + bwd):8.1f}% "
              f"{float(np.median(runs[:, :, 2])):11.2f}")


if __name__ == "__main__":
    main()
