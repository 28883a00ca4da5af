"""How much room do archived bench runs leave by balance? Each task's stage floor timed, its room restated.

    .venv/bin/python benchmarks/balance_room.py benchmarks/runs/s51-amd-dlrm-20-8-torchrec.json.gz ... \
        -o out/balance-room.json

Issue 15 asks for a 5% win "wherever the bound leaves >= 10% room", and the bench's estimate read room on
suites where nothing beats the heuristics (docs/benchmarks.md, "Stop 52"). ``autoshard.bench.room`` floors
each measured plan like the step: mean device fwd and bwd, each at least what the device holding the
costliest table (its narrowest column cut) must take, plus each collective at the least bytes its busiest
rank could move. Runs before stop 53 recorded no stage floor, so for every task of each run this times it
(``planners.exact.stage_floor``: the tables ranked in one pass, the few that can set it priced as the run
priced its devices, the least of its rounds) with the run's own measure settings, and the devices of the
run's best fixed heuristic's plan the same way: the floor is scaled, per stage, by how that plan's devices
measured in the run over how they measure now (the host's drift since the run, or another host's speed).
Printed per run: the room without and with the stage floor, how much of the reference plan's distance to
its own floor is its kernels' (the rest its collectives'), how far its slowest device is above the mean in
the round that found it and in the others (``persistent_excess``: the part that persists is the plan's, not
the noise of D timings), the tasks with at least 10%, and the learned planners' cost over the reference
heuristic on those tasks. Since stop 57 the floor's shards are timed alone too (the floor's tables whole and
cut, and every plan's shards of them; scaled the same way), and the last three columns restate the room with
the cut the floor assumes priced (``bench.room.cut_floor_terms``: the work and the ids its pieces add), "-"
for tasks timed before. The output file is rewritten after each task
and read back on a re-run (an interrupted run resumes); ``--no-measure`` prints what it holds.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.bench.room import ROOM_THRESHOLD, least_shard_bytes, plan_floor_ms, room_summary
from autoshard.bench.summary import best_fixed_heuristic, task_costs
from autoshard.breakdown import StageFloor
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.loading import resolve_cost_model
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import MeasuredCostModel, RoundsMinimum
from autoshard.hardware.kernel import MeasureSettings
from autoshard.io import read_json, write_json
from autoshard.pipeline.results import TaskResult
from autoshard.planners.exact import stage_floor
from autoshard.planners.guard import GUARDED

KIND = "autoshard.balance_room"


def timed_floor(run: dict[str, Any], results: list[TaskResult], reference: str, index: int) -> dict[str, Any]:
    """Task ``index``'s stage floor timed now, and the reference plan's devices (fwd, bwd summed) as the run
    measured them and as they measure now."""
    tr = results[index]
    settings = MeasureSettings.from_json(run["measure_settings"])
    comm = AlphaBeta.from_json(run["comm"])
    rounds = RoundsMinimum(lambda: MeasuredCostModel(settings, comm), int(run.get("rounds", 3)))
    plans = [ref for r in tr.results if r.ok and r.plan is not None
             for device in r.plan.device_shards(tr.task) for ref in device]
    floor = stage_floor(tr.task, resolve_cost_model(MeasuredCostModel(settings, comm)), rounds, plans)
    ref = tr.by_algorithm()[reference]
    devices = [d for d in ref.plan.device_shards(tr.task) if d]
    now = rounds.device_costs(tr.task, devices)[:, :2].sum(axis=0)
    then = np.array([[d.fwd_ms, d.bwd_ms] for d in ref.measured.devices
                     if d.fwd_ms + d.bwd_ms > 0]).sum(axis=0)
    return {"index": index, "task": tr.task.name, **floor.to_json(),
            "reference_now": now.tolist(), "reference_then": then.tolist()}


def scaled(row: dict[str, Any]) -> StageFloor:
    """The floor, and its shards timed alone (rows of stop 57 on), in the run's own milliseconds: each stage
    times the reference plan's then / now."""
    (f_now, b_now), (f_then, b_then) = row["reference_now"], row["reference_then"]
    floor = StageFloor.from_json(row)
    f, b = f_then / f_now, b_then / b_now
    return StageFloor(floor.fwd_ms * f, floor.bwd_ms * b,
                      tuple((ref, fwd * f, bwd * b) for ref, fwd, bwd in floor.alone))


def kernel_share(results: list[TaskResult], reference: str, stages: list[StageFloor],
                 alpha_ms: float) -> float:
    """Mean over tasks of the kernels' part of the reference plan's distance to its own floor (the slowest
    device's fwd and bwd above their floors), the rest being its collectives above theirs."""
    shares = []
    for tr, st in zip(results, stages, strict=True):
        cost = tr.by_algorithm()[reference].measured
        gap = cost.plan_ms - plan_floor_ms(cost, st, least_shard_bytes(tr.task), alpha_ms)
        fwd = np.mean([d.fwd_ms for d in cost.devices])
        bwd = np.mean([d.bwd_ms for d in cost.devices])
        kernels = cost.max_fwd_ms - max(fwd, st.fwd_ms) + cost.max_bwd_ms - max(bwd, st.bwd_ms)
        if gap > 0:
            shares.append(kernels / gap)
    return float(np.mean(shares)) if shares else float("nan")


def persistent_excess(results: list[TaskResult], reference: str) -> tuple[float, float]:
    """How far the reference plan's slowest device is above the mean device, fwd and bwd apart, from the
    run's rounds: in the round that found it slowest, and that same device in each other round (cross-fitted:
    the part that persists is the plan's, the rest the maximum of D noisy timings). Means over tasks, stages
    and ordered pairs of rounds; NaN without two rounds."""
    same, other = [], []
    for tr in results:
        rounds = np.asarray(tr.by_algorithm()[reference].device_rounds_ms, dtype=np.float64)
        if rounds.ndim != 3 or rounds.shape[0] < 2:
            continue
        for stage in (0, 1):
            x = rounds[:, :, stage]
            x = x[:, x.max(axis=0) > 0]  # devices that hold something
            for a, b in itertools.permutations(range(len(x)), 2):
                slowest = int(x[a].argmax())
                same.append(x[a, slowest] / x[a].mean() - 1)
                other.append(x[b, slowest] / x[b].mean() - 1)
    return (float(np.mean(same)), float(np.mean(other))) if same else (float("nan"), float("nan"))


def load_run(path: str) -> tuple[dict[str, Any], list[TaskResult], str]:
    run = read_json(path)
    if not (isinstance(run, dict) and isinstance(run.get("tasks"), list)
            and isinstance(run.get("measure_settings"), dict) and isinstance(run.get("comm"), dict)):
        raise AutoshardError(f"{path}: not a bench results file (no tasks, measure settings or comm)")
    results = [TaskResult.from_json(t) for t in run["tasks"]]
    reference = best_fixed_heuristic([task_costs(tr) for tr in results])
    if reference is None or not all(reference in tr.by_algorithm() for tr in results):
        raise AutoshardError(f"{path}: no heuristic was measured on every task")
    return run, results, reference


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="bench results files (bench/results.json, or gzipped)")
    ap.add_argument("-o", "--out", required=True, help="results JSON (rewritten after each task; resumes)")
    ap.add_argument("--no-measure", action="store_true", help="time nothing: print what -o holds")
    ap.add_argument("--algos", default=",".join(GUARDED),
                    help="comma-separated algorithms whose ratio on the roomy tasks is printed (default: the "
                         "learned planners; e.g. search+top3+descent8 for a measured row)")
    args = ap.parse_args(argv)
    algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    try:
        runs = {path: load_run(path) for path in args.runs}
        done: dict[str, Any] = {"kind": KIND, "runs": {}}
        if Path(args.out).exists():  # resume; never overwrite a file of something else
            done = read_json(args.out)
            if not (isinstance(done, dict) and done.get("kind") == KIND
                    and isinstance(done.get("runs"), dict)):
                raise AutoshardError(f"{args.out}: not this script's results; give another -o")
        elif args.no_measure:
            raise AutoshardError(f"{args.out}: no such file to print (leave out --no-measure to time it)")
        for path, (run, results, reference) in runs.items():
            rows = done["runs"].setdefault(Path(path).name, [])  # a run is known by its file name
            for i in range(len(results)):
                if args.no_measure or any(r["index"] == i for r in rows):
                    continue
                print(f"{path}: task {i + 1}/{len(results)}", file=sys.stderr, flush=True)
                rows.append(timed_floor(run, results, reference, i))
                write_json(args.out, done)
        print(f"| run | reference | room, balance only | room with the stage floor | kernels' share of the "
              f"reference's gap | its slowest device over the mean: that round / another | tasks >= "
              f"{ROOM_THRESHOLD - 1:.0%} | " + " / ".join(algos) + " / reference there | room with the "
              f"cut priced | tasks >= {ROOM_THRESHOLD - 1:.0%} | " + " / ".join(algos) + " there |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for path, (run, results, reference) in runs.items():
            rows = {r["index"]: r for r in done["runs"].get(Path(path).name, [])}
            if len(rows) < len(results):
                print(f"{path}: {len(rows)} of {len(results)} tasks timed; skipped", file=sys.stderr)
                continue
            alpha = float(run["comm"].get("alpha_ms", 0.0))
            bare = room_summary(results, algos, alpha, [None] * len(results))
            cut = [scaled(rows[i]) for i in range(len(results))]
            stages = [replace(st, alone=()) for st in cut]
            room = room_summary(results, algos, alpha, stages)
            name = Path(path).name.removesuffix(".json.gz").removesuffix(".json")
            learned = " / ".join(f"{room.ratio_on_roomy[a]:.3f}" if a in room.ratio_on_roomy else "-"
                                 for a in algos)
            same, other = persistent_excess(results, reference)
            priced = "- | - | -"
            if all(st.alone for st in cut):
                room_cut = room_summary(results, algos, alpha, cut)
                priced = (f"{room_cut.geomean_room:.3f} | {len(room_cut.roomy)} | "
                          + " / ".join(f"{room_cut.ratio_on_roomy[a]:.3f}" if a in room_cut.ratio_on_roomy
                                       else "-" for a in algos))
            print(f"| {name} | {reference} | {bare.geomean_room:.3f} | {room.geomean_room:.3f} | "
                  f"{kernel_share(results, reference, stages, alpha):.2f} | {same:.3f} / {other:.3f} | "
                  f"{len(room.roomy)} | {learned} | {priced} |")
    except AutoshardError as e:
        print(f"balance_room: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
