"""How much of a run's room is the instrument's noise? A measured step is the slowest device's forward plus
the slowest device's backward (plus the collectives), each device's time kept as its least over the rounds,
and that least still carries the instrument's noise (``bench.error_split``: its sd on this host is 0.02-0.09
in log). The largest of D noisy devices is high by about the noise's expected maximum, while the balance
floor (``bench.room``) averages the devices, so the room read from a measured plan holds part of that
maximum, and a plan whose devices are level (what a balancing planner returns) is pushed up by more of it
than a plan with one device well above the rest.

Per run and roomy task, a Monte Carlo (modelled, the assumptions below) prices each plan's expected
measured step under the run's own instrument noise:

    inflation = E[max_i f_i e^(s z_i - s^2/2) + max_i b_i e^(s y_i - s^2/2) + collectives] / measured step

with f_i, b_i the plan's kept device forward and backward, s the instrument's sd of the kept minimum from the
run's own rounds (``error_split.split_by_rounds``; ``--sd`` replaces it), z, y independent standard normals
per device (the mean-one factor keeps the level, only the spread counts), the collectives as measured (they
are modelled from the run's comm fit, no per-device noise). Printed: the roomy tasks (room >= 10% by
``bench.room``), their room, the best fixed heuristic's inflation, the room net of it (room / inflation), how
many tasks keep >= 10% net, and per learned planner the measured ratio to the heuristic with the ratio net of
both plans' inflations beside it (measured x heuristic's inflation / planner's).

Assumptions, each stated where the figures are used (docs/benchmarks.md, "Stop 74"): the measured devices
stand for the true ones (they already hold one draw of the noise, so their spread is wider than the truth's
and a wider spread lowers the expected maximum: the inflation is read low on that count); the devices' noises
are independent (the error split centres each task and round on its median device, so a slow moment common to
a plan's devices is not in s; what remains may still be shared between devices timed close together, which
would read the inflation high); the forward and backward take the same s (it is measured on their sum).

    .venv/bin/python benchmarks/room_noise.py benchmarks/runs/s73-amd-dlrm-50-8-torchrec.json.gz ...
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autoshard.bench.error_split import split_by_rounds
from autoshard.bench.room import room_summary, task_floor_ms
from autoshard.bench.summary import geomean, task_costs
from autoshard.breakdown import PlanCost
from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.pipeline.results import TaskResult, task_results_of

LEARNED = ("rl", "neuroshard", "search", "ilp")


def noise_inflation(cost: PlanCost, sd: float, draws: int, rng: np.random.Generator) -> float:
    """Expected measured step of a plan whose true devices are ``cost``'s, each device's forward and backward
    carrying an independent mean-one log-normal factor of sd ``sd``, over its measured step."""
    fwd = np.array([d.fwd_ms for d in cost.devices], dtype=np.float64)
    bwd = np.array([d.bwd_ms for d in cost.devices], dtype=np.float64)
    if sd <= 0 or cost.plan_ms <= 0:
        return 1.0
    factor = np.exp(sd * rng.standard_normal((draws, 2, len(fwd))) - sd * sd / 2)
    step = (fwd * factor[:, 0]).max(axis=1) + (bwd * factor[:, 1]).max(axis=1) + cost.collectives_ms
    return float(step.mean() / cost.plan_ms)


@dataclass(frozen=True)
class RoomNoise:
    """One run's roomy tasks, their room and the parts of it the instrument's noise explains."""

    name: str
    sd: float
    reference: str
    devices: int
    room: tuple[float, ...]
    """Per roomy task: the best fixed heuristic's measured step / the task's balance floor."""
    inflation: tuple[float, ...]
    """Per roomy task: the heuristic's plan's expected measured step over its measured step."""
    measured: dict[str, tuple[float, ...]]
    """Per learned planner measured on every roomy task: its measured ratio to the heuristic, per task."""
    net: dict[str, tuple[float, ...]]
    """The same ratios net of both plans' inflations."""


def room_noise(name: str, tasks: list[TaskResult], alpha_ms: float, sd: float | None, draws: int,
               seed: int) -> RoomNoise | None:
    """``tasks``' roomy tasks with their noise (``sd`` None: the run's own), or None without one."""
    room = room_summary(tasks, [], alpha_ms)
    if room is None or not room.roomy:
        return None
    if sd is None:
        sd = split_by_rounds(tasks)[1][-1]
    rng = np.random.default_rng(seed)
    rooms, inflations = [], []
    measured: dict[str, list[float]] = {a: [] for a in LEARNED}
    net: dict[str, list[float]] = {a: [] for a in LEARNED}
    for k in room.roomy:
        by = tasks[k].by_algorithm()
        ref = by[room.reference]
        rooms.append(task_costs(tasks[k])[room.reference][0] / task_floor_ms(tasks[k], alpha_ms=alpha_ms))
        h = noise_inflation(ref.measured, sd, draws, rng)  # type: ignore[arg-type]
        inflations.append(h)
        for a in LEARNED:
            r = by.get(a)
            if r is None or not r.ok or r.measured is None:
                continue
            ratio = r.measured.plan_ms / ref.measured.plan_ms  # type: ignore[union-attr]
            measured[a].append(ratio)
            net[a].append(ratio * h / noise_inflation(r.measured, sd, draws, rng))
    full = {a: v for a, v in measured.items() if len(v) == len(room.roomy)}
    return RoomNoise(name, sd, room.reference, tasks[0].task.num_devices, tuple(rooms), tuple(inflations),
                     {a: tuple(v) for a, v in full.items()}, {a: tuple(net[a]) for a in full})


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", help="bench results files (.json or .json.gz)")
    p.add_argument("--sd", type=float, default=None,
                   help="the instrument's log sd of a kept device time (default: each run's own, from its "
                        "rounds)")
    p.add_argument("--draws", type=int, default=20000, help="Monte Carlo draws per plan (default 20000)")
    p.add_argument("--seed", type=int, default=0, help="Monte Carlo seed (default 0)")
    args = p.parse_args(argv)
    if args.sd is not None and not 0 <= args.sd < 1:
        print(f"room_noise: error: --sd {args.sd} is not a log sd in [0, 1); pass e.g. 0.05", file=sys.stderr)
        return 2
    if args.draws < 100:
        print(f"room_noise: error: --draws {args.draws} is too few; pass 100 or more", file=sys.stderr)
        return 2
    rows = []
    try:  # every file read and priced before a line is printed: a bad one leaves no half-written table
        for path in args.runs:
            run = read_json(path, kind="autoshard.bench")
            tasks = task_results_of(run, path)
            name = Path(path).name.removesuffix(".gz").removesuffix(".json")
            found = room_noise(name, tasks, float(run.get("comm", {}).get("alpha_ms", 0.0)), args.sd,
                               args.draws, args.seed)
            if found is None:
                print(f"{name}: no task with >= 10% room; skipped", file=sys.stderr)
            else:
                rows.append(found)
    except AutoshardError as e:
        print(f"room_noise: error: {e}", file=sys.stderr)
        return 2
    if not rows:
        print("room_noise: error: no run had a task with >= 10% room; pass bench results of a suite with "
              "room", file=sys.stderr)
        return 2
    heads = " | ".join(f"{a}: measured / net" for a in LEARNED)
    print(f"| run | devices | instrument sd | best fixed heuristic | roomy tasks | room | its inflation | "
          f"room net | net >= 10% | {heads} |")
    print("|---|---|---|---|---|---|---|---|---|" + "---|" * len(LEARNED))
    for r in rows:
        net_room = [a / b for a, b in zip(r.room, r.inflation)]
        cells = [f"{geomean(list(r.measured[a])):.3f} / {geomean(list(r.net[a])):.3f}" if a in r.measured
                 else "-" for a in LEARNED]
        print(f"| {r.name} | {r.devices} | {r.sd:.3f} | {r.reference} | {len(r.room)} | "
              f"{geomean(list(r.room)):.3f} | {geomean(list(r.inflation)):.3f} | {geomean(net_room):.3f} | "
              f"{sum(1 for x in net_room if x >= 1.10)} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
