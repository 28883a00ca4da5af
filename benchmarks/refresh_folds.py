"""Would DreamShard's loop (measure the suite's own devices, refit, plan again) fix the model's pick? Tested
on a finished bench run without measuring anything, cross-fitted over its tasks.

    .venv/bin/python benchmarks/refresh_folds.py benchmarks/runs/s25-gpu-h200-dlrm-50-4-b16384.json.gz \
        --profile profiles/nvidia-h200/pool-dlrm50-b16384 \
        --cost-model benchmarks/gpu/cost-h200-dlrm50-b16384.pt

The run measured every plan's devices (min over rounds). The tasks are split into ``--folds`` folds; for
each fold, the devices of the OTHER folds' tasks become cost records (the run's host and measure settings,
their own tables), added to ``--profile``'s records (``--devices-only``: on their own, as the bench's refresh
loop fine-tunes a given model on the devices it measured), and the cost model is fine-tuned on them
(``costs.learned.fine_tune``, as ``autoshard fine-tune-cost``; ``--refit`` trains a new model from scratch
instead, with the checkpoint's options). Then, on the fold's own tasks, which no refit saw, the guard's
reference heuristic (the one the model prices cheapest, ``benchmarks/guard_margin.py``'s H*) is picked by
the model before and after, and its measured step over the per-task best heuristic is printed: the pick
the learned planners fall back to, and the one they lost by on the GPU (docs/benchmarks.md, "Stop 25").
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned import LearnedCostModel
from autoshard.costs.learned.fine_tune import FineTuneOptions, fine_tune
from autoshard.errors import AutoshardError
from autoshard.hardware.comm import COMM_MODEL_FILE
from autoshard.hardware.jsonl import append_jsonl
from autoshard.hardware.profile_dataset import load_dataset
from autoshard.hardware.profile_records import MANIFEST_FILE, TABLES_FILE, CostRecord, sample_id
from autoshard.io import read_json
from autoshard.plan import Plan
from autoshard.shards import ShardRef
from autoshard.tasks import Task

sys.path.insert(0, str(Path(__file__).resolve().parent))  # guard_margin.py, beside this script
import guard_margin

FOLD_SEED_BASE = 950
"""Sample-id seeds of the records made from the run's devices (``<base + fold>-<index>``), apart from the
profile's (0-) and the refresh loop's."""




def measured_devices(tasks: list[dict], rows: bool = False) -> Iterator[tuple[Task, list[ShardRef], dict]]:
    """(task, shards, measured device) for every distinct device of the tasks' measured plans (tables, widths
    and row ranges; the first plan's measurement where several built it). Whole-table devices only unless
    ``rows``; devices with a replica always left out (a cost record holds tables or row shards of them)."""
    seen: set[tuple] = set()
    for t in tasks:
        task = Task.from_json(t["task"])
        for r in t["results"]:
            if not r["ok"] or not r.get("measured"):
                continue
            plan = Plan.from_json(r["plan"])
            for shards, m in zip(plan.device_shards(task), r["measured"]["devices"]):
                if not shards or any(s.replica or (not rows and (s.row_start or s.row_end is not None))
                                     for s in shards):
                    continue
                key = tuple((task.tables[s.table].name, s.dim, s.row_start, s.row_end) for s in shards)
                if key not in seen:
                    seen.add(key)
                    yield task, shards, m


def whole_table_devices(tasks: list[dict]) -> Iterator[tuple[Task, list[ShardRef], dict]]:
    """``measured_devices`` of whole tables only (row shards and replicas left out)."""
    return measured_devices(tasks)


def device_records(results: dict, tasks: list[dict], seed: int, rows: bool = False) -> list[CostRecord]:
    """One record per distinct device of the tasks' measured plans (min over rounds): whole-table devices, and
    with ``rows`` row-wise ones too (with their row ranges)."""
    settings = dict(results["measure_settings"])
    host = {**results["host"], "rank": 0, "world_size": 1}
    out: list[CostRecord] = []
    for task, shards, m in measured_devices(tasks, rows):
        names = tuple(task.tables[s.table].name for s in shards)
        dims = tuple(s.dim for s in shards)
        specs = tuple(task.tables[s.table].to_json() for s in shards)
        whole = all(s.row_start == 0 and s.row_end is None for s in shards)
        out.append(CostRecord(sample_id(seed, len(out)), names, dims, task.batch_size,
                              float(m["fwd_ms"]), float(m["bwd_ms"]), 0.0, 0.0,
                              {**settings, "precision": task.precision.value}, host,
                              rows=tuple(min(task.tables[s.table].rows, int(settings["rows_cap"]))
                                         for s in shards),
                              real_rows=tuple(task.tables[s.table].rows for s in shards),
                              table_specs=specs,
                              row_ranges=() if whole else tuple((s.row_start, s.row_end) for s in shards)))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", help="a finished bench's results file (results.json or .json.gz)")
    p.add_argument("--profile", required=True, help="the profile the cost model was trained on")
    p.add_argument("--cost-model", required=True, help="the checkpoint the run planned with")
    p.add_argument("--folds", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--devices-only", action="store_true",
                   help="fine-tune on the other folds' devices alone, not added to the profile's records")
    args = p.parse_args(argv)
    gm = guard_margin
    try:
        results = read_json(args.results)
        tasks = results["tasks"]
        if not 2 <= args.folds <= len(tasks):
            raise AutoshardError(f"--folds {args.folds}: give 2 to {len(tasks)} (the run's tasks)")
        if not Path(args.profile).is_dir():
            raise AutoshardError(f"--profile {args.profile}: no such directory; give the profile the cost "
                                 "model was trained on (autoshard profile -o DIR)")
        comm = AlphaBeta.from_json(results["comm"])
        base = LearnedCostModel.load(args.cost_model, allow_other_hardware=True).with_comm(comm)
        before: list[float] = []
        after: list[float] = []
        for f in range(args.folds):
            held = [t for i, t in enumerate(tasks) if i % args.folds == f]
            seen = [t for i, t in enumerate(tasks) if i % args.folds != f]
            records = device_records(results, seen, FOLD_SEED_BASE + f)
            with tempfile.TemporaryDirectory() as tmp:
                data = Path(tmp) / "profile"
                if args.devices_only:  # the profile's description (design, pool, comm), not its records
                    data.mkdir()
                    for name in (MANIFEST_FILE, TABLES_FILE, COMM_MODEL_FILE):
                        if (Path(args.profile) / name).is_file():
                            shutil.copy(Path(args.profile) / name, data / name)
                else:
                    shutil.copytree(args.profile, data)
                for rec in records:
                    append_jsonl(data / "shards-folds.jsonl", rec.to_json())
                tuned = fine_tune(base, load_dataset(data), FineTuneOptions(seed=args.seed)).with_comm(comm)
            fold = {**results, "tasks": held}
            b = gm.analyse(fold, base, [1.0], "lookup_greedy")["rules"][("H*", "cheapest")]
            a = gm.analyse(fold, tuned, [1.0], "lookup_greedy")["rules"][("H*", "cheapest")]
            before += b
            after += a
            print(f"fold {f}: fine-tuned on {len(records)} devices of {len(seen)} tasks; on its {len(held)} "
                  f"held-out tasks the model's cheapest heuristic measures {gm.geomean(b):.3f} of the best "
                  f"before, {gm.geomean(a):.3f} after")
    except AutoshardError as e:
        print(f"refresh_folds: error: {e}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, ValueError) as e:
        print(f"refresh_folds: error: not a finished bench's results file ({type(e).__name__}: {e})",
              file=sys.stderr)
        return 2
    worse = sum(1 for x in after if x > 1.0 + 1e-9)
    print(f"all {len(after)} tasks, each held out once: {gm.geomean(before):.3f} before, "
          f"{gm.geomean(after):.3f} after (ratio of the measured step of the model's cheapest heuristic to "
          f"the per-task best heuristic, geometric mean; after: not the best on {worse}); "
          f"per task after: {', '.join(f'{x:.3f}' for x in after)}")
    return 0 if all(math.isfinite(x) for x in after) and np.isfinite(gm.geomean(after)) else 1


if __name__ == "__main__":
    sys.exit(main())
