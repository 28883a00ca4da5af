"""Where a bench run's round-to-round noise sits, from the per-round device timings its results store; nothing
is measured.

Run: .venv/bin/python benchmarks/round_structure.py RESULTS [RESULTS ...] [--slow 1.15]

RESULTS: bench results files (``DIR/bench/results.json`` or gzipped in ``benchmarks/runs/``) whose plans kept
their per-round device timings. Every distinct device of a task (the bench times a device that several plans
share once a round) is put back in the order the bench timed it (``pipeline.measure.measure_task``: the
devices in the order of the results, rotated each round by ``hardware.evaluator.rotated_rounds``). Printed
per file, one markdown row:

- devices, rounds;
- ``slow``: the share of device timings (fwd + bwd) at or above ``--slow`` x that device's least over the
  run's rounds;
- ``round sd``: the sd of a whole round's level: each timing's log over its device's mean log, averaged over
  the task's devices per round (a round that is slow for every device; the bench's ratios cancel it only
  between plans timed in the same round, which they are);
- ``lag-1``: the correlation of two devices timed one after the other in a round (that log, less its round's
  level): contention that outlasts one device's timing;
- ``confirmed``: with the first half of the rounds (at least 2), the devices whose two least timings there
  agree within 5%, and the share of those whose least there is >= 10% above their least over all rounds,
  against that share of the others. If two agreeing timings marked a device's floor, the first share
  would be the smaller;
- ``top-up``: with the first half of the rounds, the share of devices within 20% of some plan's slowest
  (fwd + bwd; the devices that can set a plan's step), and the largest change of a plan's step (max fwd + max
  bwd over its devices' least timings) if only those had been timed in the other rounds, against every
  device timed in all. What a bench that times only the devices that can matter again would save, and lose.

Why: on the AMD EPYC VM a device slow in every round of a 6-round run set rl's DLRM-20 (2) figure
(docs/benchmarks.md, "Stop 67"). This shows how often a timing is slow, how much of it is a whole round's,
whether an agreeing pair of timings could tell a device's floor (and so stop timing it early), and whether
timing again only the devices that can set a step would keep a run's figures (docs/benchmarks.md, "Stop 68").
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Sequence

import numpy as np

from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import rotated_rounds
from autoshard.io import read_json
from autoshard.pipeline.results import TaskResult

CONFIRM = 0.05
"""Two least timings within this (relative) count as agreeing."""
ABOVE = 0.10
"""A least of the first rounds this far above the least of all rounds missed the device's floor."""
NEAR = 0.20
"""A device within this of its plan's slowest device can set the plan's step."""


def task_timings(task_result: TaskResult) -> tuple[np.ndarray, list[list[int]], list[list[int]]]:
    """(rounds, devices, 2) fwd/bwd timings of the task's distinct devices in the bench's order, the order
    the bench timed them in each round (indices into the devices), and each plan's devices (indices)."""
    task = task_result.task
    planned = [r for r in task_result.results if r.ok and r.plan is not None]
    layouts = [[tuple(sorted(d)) for d in r.plan.device_shards(task)] for r in planned]
    unique = list(dict.fromkeys(k for devs in layouts for k in devs if k))
    index = {k: i for i, k in enumerate(unique)}
    timed = [(r, devs) for r, devs in zip(planned, layouts) if r.device_rounds_ms]
    if not timed or not unique:
        return np.zeros((0, 0, 2)), [], []
    rounds = len(timed[0][0].device_rounds_ms)
    out = np.full((rounds, len(unique), 2), np.nan)
    for r, devs in timed:
        if len(r.device_rounds_ms) != rounds:
            raise AutoshardError(f"{task.name}: plans recorded different numbers of rounds")
        for rnd, row in enumerate(r.device_rounds_ms):
            for key, fwd_bwd in zip(devs, row):
                if key:
                    out[rnd, index[key]] = fwd_bwd
    orders: list[list[int]] = []

    def record(order: list[int]) -> np.ndarray:
        orders.append(list(order))
        return np.zeros((len(order), 1))

    rotated_rounds(list(range(len(unique))), rounds, record)
    plans = [[index[k] for k in devs if k] for _, devs in timed]
    return out, orders, plans


def _step(least: np.ndarray, devices: Sequence[int]) -> float:
    return float(least[list(devices), 0].max() + least[list(devices), 1].max())


def structure(results: Sequence[TaskResult], slow: float) -> dict[str, float]:
    """The row's figures (module docstring) over ``results``' tasks."""
    rel, levels, pairs = [], [], []
    confirmed_missed = confirmed = other_missed = other = near = devices = distinct = 0
    step_change = 0.0
    rounds_seen: set[int] = set()
    for task_result in results:
        timings, orders, plans = task_timings(task_result)
        if timings.size == 0 or np.isnan(timings).any() or (timings.sum(axis=2) <= 0).any():
            continue
        total = timings.sum(axis=2)  # (rounds, devices)
        rounds, n = total.shape
        if rounds < 2 or n < 2:
            continue
        rounds_seen.add(rounds)
        distinct += n
        rel.extend((total / total.min(axis=0)).ravel())
        resid = np.log(total) - np.log(total).mean(axis=0)
        level = resid.mean(axis=1)
        levels.extend(level)
        for rnd, order in enumerate(orders):
            seq = resid[rnd, order] - level[rnd]
            pairs.extend(itertools.pairwise(seq))
        first = max(2, rounds // 2)
        head = np.sort(total[:first], axis=0)
        agree = head[1] <= (1 + CONFIRM) * head[0]
        missed = head[0] >= (1 + ABOVE) * total.min(axis=0)
        confirmed += int(agree.sum())
        confirmed_missed += int((agree & missed).sum())
        other += int((~agree).sum())
        other_missed += int((~agree & missed).sum())
        if first < rounds:
            least_head, least_all = timings[:first].min(axis=0), timings.min(axis=0)
            topped: set[int] = set()
            for devs in plans:
                sums = least_head[devs].sum(axis=1)
                topped |= {d for d, s in zip(devs, sums) if s >= (1 - NEAR) * sums.max()}
            mixed = least_head.copy()
            mixed[sorted(topped)] = least_all[sorted(topped)]
            near += len(topped)
            devices += n
            changes = [abs(np.log(_step(mixed, d) / _step(least_all, d))) for d in plans]
            step_change = max(step_change, *changes)
    if not rel:
        raise AutoshardError("no task has two or more devices timed in two or more rounds")
    if len(rounds_seen) != 1:
        raise AutoshardError(f"tasks recorded different numbers of rounds {sorted(rounds_seen)}")
    return {"devices": float(distinct), "rounds": float(rounds_seen.pop()),
            "slow": float(np.mean(np.array(rel) >= slow)), "round_sd": float(np.std(levels)),
            "lag1": float(np.corrcoef(np.array(pairs).T)[0, 1]) if len(pairs) > 2 else float("nan"),
            "confirmed": float(confirmed), "confirmed_missed": confirmed_missed / max(confirmed, 1),
            "other_missed": other_missed / max(other, 1),
            "topped": near / devices if devices else float("nan"), "step_change": step_change}


def row(name: str, s: dict[str, float]) -> str:
    return (f"| {name} | {s['devices']:.0f} | {s['rounds']:.0f} | {s['slow']:.2f} | {s['round_sd']:.3f} | "
            f"{s['lag1']:.2f} | {s['confirmed']:.0f}: {s['confirmed_missed']:.2f} vs "
            f"{s['other_missed']:.2f} | {s['topped']:.2f}, {s['step_change']:.3f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results", nargs="+", metavar="RESULTS", help="bench results files")
    ap.add_argument("--slow", type=float, default=1.15,
                    help="a timing at or above this x its device's least counts as slow (default 1.15)")
    args = ap.parse_args(argv)
    try:
        if not args.slow > 1:
            raise AutoshardError(f"--slow {args.slow:g} must be above 1")
        lines = []
        for path in args.results:
            run = read_json(path, kind="autoshard.bench")
            try:
                tasks = [TaskResult.from_json(t) for t in run.get("tasks") or []]
                lines.append(row(path.rsplit("/", 1)[-1].removesuffix(".gz").removesuffix(".json"),
                                 structure(tasks, args.slow)))
            except AutoshardError as e:
                raise AutoshardError(f"{path}: {e}") from None
            except (KeyError, TypeError, IndexError) as e:
                raise AutoshardError(f"{path}: not a bench results file ({e!r}); pass a results.json"
                                     ) from None
    except (AutoshardError, OSError, ValueError) as e:
        print(f"round_structure: error: {e}", file=sys.stderr)
        return 2
    print(f"| run | devices | rounds | slow (>= {args.slow:g}x least) | round sd | lag-1 | confirmed: "
          f"missed vs others | top-up: devices, max step change |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
