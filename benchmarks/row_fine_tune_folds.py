"""Does fine-tuning the shipped model on measured row-wise devices fix how it prices them? One suite out.

Run: .venv/bin/python benchmarks/row_fine_tune_folds.py RUN [RUN ...] [--model CKPT] [--epochs 40]

RUN: bench results files of one machine (``benchmarks/runs/*.json.gz``: the CPU runs). Every distinct device
of every measured plan (row-wise ones with their row ranges; devices with a data-parallel replica left out)
becomes a cost record (min over rounds, as the bench kept it). For each suite, the model (default: the
shipped one) is fine-tuned (``costs.learned.fine_tune``) on the devices of the runs of every OTHER suite
(runs of one suite share tasks and devices, so they are held out together), and on the held-out suite's
devices it prints the ratio of two medians of predicted / measured fwd+bwd: row-wise devices over
whole-table devices (below 1: row-wise devices priced cheaper than they are, relative to whole-table ones;
the model's level cancels), before and after. Why: the model prices a row shard from whole-table features
(no profile holds one) and prices row-wise devices 4-21% low relative to whole-table ones on every archived
CPU run (``benchmarks/row_device_error.py``), which stop 28's ``LearnedCostModel.row_move_margin`` guards
against at the price of real row-wise wins (docs/benchmarks.md, "Stop 29"). No measurement happens here.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from autoshard.costs.learned import LearnedCostModel
from autoshard.costs.learned.evaluation import predict_records
from autoshard.costs.learned.fine_tune import FineTuneOptions, fine_tune
from autoshard.errors import AutoshardError
from autoshard.hardware.profile_records import CostRecord
from autoshard.io import read_json
from autoshard.tables import TablePool

sys.path.insert(0, str(Path(__file__).resolve().parent))  # refresh_folds.py, beside this script
import refresh_folds

SHIPPED = Path(__file__).resolve().parent.parent / "src" / "autoshard" / "data" / "default_cost_model.pt"


@dataclass(frozen=True)
class Devices:
    """Records and their tables: what ``fine_tune`` reads of a dataset (no comm: nothing is adapted)."""

    records: list[CostRecord]
    pool: TablePool


def run_records(results: dict, seed: int) -> list[CostRecord]:
    """One record per distinct device of the run's measured plans, row-wise ones included
    (``refresh_folds.device_records``)."""
    return refresh_folds.device_records(results, results["tasks"], seed, rows=True)


def as_dataset(records: Sequence[CostRecord]) -> Devices:
    tables = {t.name: t for r in records for t in r.own_tables()}
    return Devices(list(records), TablePool.from_tables(list(tables.values())))


def row_table_ratio(model: LearnedCostModel, records: Sequence[CostRecord]) -> float:
    """Median predicted / measured fwd+bwd of the row-wise devices over that of the whole-table ones."""
    data = as_dataset(records)
    pred = predict_records(model, data.pool, data.records).mean[:, :2].sum(axis=1)
    ratio = pred / np.array([r.fwd_ms + r.bwd_ms for r in records])
    row = np.array([bool(r.row_ranges) for r in records])
    if not row.any() or row.all():
        raise AutoshardError("a held-out suite needs both row-wise and whole-table devices")
    return float(np.median(ratio[row]) / np.median(ratio[~row]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+")
    p.add_argument("--model", default=str(SHIPPED))
    p.add_argument("--epochs", type=int, default=40, help="most fine-tuning epochs per member (default 40)")
    args = p.parse_args(argv)
    try:
        # fine-tunes on archived runs' devices, nothing timed here: any host
        model = LearnedCostModel.load(args.model, allow_other_hardware=True)
        suites: dict[str, list[CostRecord]] = {}
        for i, path in enumerate(args.runs):
            raw = read_json(path)
            suites.setdefault(str(raw["suite"]["name"]), []).extend(run_records(raw, i))
        if len(suites) < 2:
            raise AutoshardError("give runs of at least two suites (one is held out at a time)")
        options = FineTuneOptions(seed=0, max_epochs=args.epochs, patience=min(10, args.epochs))
        print(f"{sum(len(r) for r in suites.values())} devices of {len(suites)} suites; model {args.model}")
        for name, held in suites.items():
            train = [r for other, recs in suites.items() if other != name for r in recs]
            t0 = time.perf_counter()
            tuned = fine_tune(model, as_dataset(train), options)
            rows = sum(1 for r in held if r.row_ranges)
            print(f"{name}: {rows} row-wise and {len(held) - rows} whole-table devices held out; row / table "
                  f"{row_table_ratio(model, held):.3f} before, {row_table_ratio(tuned, held):.3f} after "
                  f"fine-tuning on {len(train)} devices of the other suites "
                  f"({sum(1 for r in train if r.row_ranges)} row-wise; {time.perf_counter() - t0:.0f} s)",
                  flush=True)
    except AutoshardError as e:
        print(f"row_fine_tune_folds: error: {e}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, ValueError) as e:
        print(f"row_fine_tune_folds: error: not a finished bench's results file ({type(e).__name__}: {e})",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
