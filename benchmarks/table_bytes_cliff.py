"""One table of a bench run timed alone and whole, beside clones of it that change one thing: its lookup
seed (the same features, another draw) or its rows (its bytes across the last-level cache); each priced by
one or more cost models. Is a table's error its draw, or where its features sit?

    .venv/bin/python benchmarks/table_bytes_cliff.py RESULTS --table synth0_399 \
        [--seeds 3] [--mb 8,16,24,32,48,64] [--model M.pt ...] [--rounds 3] [-o OUT.json]

RESULTS: a bench results file (``DIR/bench/results.json`` or gzipped in ``benchmarks/runs/``) whose tasks
hold ``--table``. Variants: the table as the run had it; ``--seeds`` clones with other lookup seeds (every
stated feature the same; the access bins counted again from the new draw, as ``tables synth`` does); one
clone per ``--mb`` whose rows make the table that many MiB at its dim and precision (its active vocabulary
kept the same share of its rows; a clone above the run's rows cap is timed at the cap, as the bench times
it). Each is one device of its own, timed with the run's measure settings
(the run's kernel backend, batch, row cap and cache flush) in ``--rounds`` rounds, a fresh evaluator and a
rotated order each (``hardware.evaluator.time_in_rounds``, the bench's protocol), the median kept.
Printed per variant: table MiB, measured forward and backward (ms) and measured / predicted for each
model. ``-o`` writes the same as JSON (atomically), with this host and the run's.

Why (docs/benchmarks.md, "Stop 93"): on DLRM-100 (8) the stop-90 defaults lost test-1 to lookup_greedy on
the device holding synth0_399 (pooling 92, 904K rows of dim 16), whose backward measured 1.6x the shipped
model's price timed alone against about 1.25x for the other hot tables; its clones of other seeds measured
as it did, and the backward jumps 2x between 19 and 58 MiB while the model's price stays flat.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned import LearnedCostModel
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import combine_rounds, time_in_rounds
from autoshard.hardware.kernel import MeasureSettings
from autoshard.host import host_info
from autoshard.io import read_json, write_json
from autoshard.pipeline.results import task_results_of
from autoshard.shards import ShardRef
from autoshard.tables.lookups import access_bins, sample_lookups
from autoshard.tables.synth import STATS_BATCH_SIZE, STATS_SEED
from autoshard.tables.table import LookupKind, Table

DEFAULT_MODEL = "src/autoshard/data/default_cost_model.pt"
MIB = 1 << 20


def _rebinned(table: Table) -> Table:
    """``table`` with its access bins counted from its own draw (what a generated table records)."""
    drawn = sample_lookups(table, STATS_BATCH_SIZE, seed=STATS_SEED)
    return replace(table, access_bins=access_bins(drawn.indices))


def variants(table: Table, seeds: int, mib: list[float], element_bytes: int) -> list[tuple[str, Table]]:
    """(label, table) for the table itself, its seed clones and its size clones; a table whose lookups come
    from a trace is refused (a clone of it would replay the same ids, not another draw)."""
    if table.lookups.kind is not LookupKind.POWER_LAW:
        raise AutoshardError(f"table {table.name} replays a trace ({table.lookups.kind.value}); clones "
                             "need a synthetic (power-law) table: pick another --table")
    out = [("as run", table)]
    for k in range(1, seeds + 1):
        seed = (table.lookups.seed + 7919 * k) % (2**31)
        clone = replace(table, name=f"{table.name}~seed{seed}", lookups=replace(table.lookups, seed=seed))
        out.append((f"seed {seed}", _rebinned(clone)))
    share = table.lookups.vocab / table.rows if table.lookups.vocab else 1.0
    for m in mib:
        rows = max(1, round(m * MIB / (table.dim * element_bytes)))
        vocab = max(1, min(rows, round(share * rows)))
        clone = replace(table, name=f"{table.name}~{m:g}MiB", rows=rows,
                        lookups=replace(table.lookups, vocab=vocab))
        out.append((f"{m:g} MiB", _rebinned(clone)))
    return out


def _mib_list(text: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give table sizes in MiB, e.g. 8,16,32,64") from None
    if any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: table sizes must be positive MiB")
    return values


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="bench results file")
    ap.add_argument("--table", required=True, help="table name (as in the run's tasks)")
    ap.add_argument("--seeds", type=int, default=3, help="clones with other lookup seeds (default 3)")
    ap.add_argument("--mb", type=_mib_list, default=[8.0, 16.0, 24.0, 32.0, 48.0, 64.0],
                    help="table sizes of the row clones, MiB (default 8,16,24,32,48,64)")
    ap.add_argument("--model", action="append", help=f"cost model(s) to price them (default {DEFAULT_MODEL})")
    ap.add_argument("--rounds", type=int, default=3, help="timing rounds, median kept (default 3)")
    ap.add_argument("-o", "--output", help="write the rows as JSON here")
    args = ap.parse_args(argv)
    if args.seeds < 0 or args.rounds < 1:
        print("table_bytes_cliff: error: --seeds must be >= 0 and --rounds >= 1", file=sys.stderr)
        return 2
    paths = args.model or [DEFAULT_MODEL]
    try:  # everything read and checked before a kernel is timed
        run = read_json(args.results, kind="autoshard.bench")
        base = next((tr.task for tr in task_results_of(run, args.results)
                     if any(t.name == args.table for t in tr.task.tables)), None)
        if base is None:
            raise AutoshardError(f"{args.results}: no task holds a table named {args.table!r}")
        table = next(t for t in base.tables if t.name == args.table)
        settings = MeasureSettings.from_json(run["measure_settings"])
        comm = AlphaBeta.from_json(run["comm"])
        models = [LearnedCostModel.load(p, allow_other_hardware=True) for p in paths]
        labelled = variants(table, args.seeds, args.mb, base.precision.bytes)
        task = replace(base, tables=tuple(t for _, t in labelled),
                       device_memory=(max(base.device_memory),) * len(labelled), name=f"{args.table} alone")
        refs = [[ShardRef(i, t.dim)] for i, t in enumerate(task.tables)]
        predicted = [np.asarray(m.device_costs(task, refs), dtype=np.float64)[:, :2] for m in models]
    except AutoshardError as e:
        print(f"table_bytes_cliff: error: {e}", file=sys.stderr)
        return 2
    except (OSError, KeyError, ValueError, TypeError) as e:
        print(f"table_bytes_cliff: error: {args.results}: not a bench results file ({e})", file=sys.stderr)
        return 2
    measured = combine_rounds(time_in_rounds(task, refs, settings, comm, args.rounds), "median")
    names = [Path(p).name for p in paths]
    print(f"{args.table} (dim {table.dim}, pooling {table.pooling_factor:g}, skew {table.lookups.alpha:g}, "
          f"batch {task.batch_size}) alone, {args.rounds} rounds; measured / predicted by {', '.join(names)}")
    print("| variant | rows | MiB | fwd ms | bwd ms | " + " | ".join(f"{n}: fwd, bwd" for n in names) + " |")
    print("|---|---|---|---|---|" + "---|" * len(names))
    rows = []
    for i, (label, t) in enumerate(labelled):
        mib = t.rows * t.dim * base.precision.bytes / MIB
        cells = [f"{measured[i, 0] / p[i, 0]:.2f}, {measured[i, 1] / p[i, 1]:.2f}" for p in predicted]
        print(f"| {label} | {t.rows} | {mib:.1f} | {measured[i, 0]:.2f} | {measured[i, 1]:.2f} | "
              + " | ".join(cells) + " |")
        rows.append({"variant": label, "rows": t.rows, "mib": mib, "fwd_ms": float(measured[i, 0]),
                     "bwd_ms": float(measured[i, 1]),
                     "predicted": {n: [float(p[i, 0]), float(p[i, 1])] for n, p in zip(names, predicted)}})
    if args.output:
        write_json(args.output, {"kind": "autoshard.table_bytes_cliff", "version": 1, "results": args.results,
                                 "table": args.table, "rounds": args.rounds,
                                 "host": host_info(settings.device.value),
                                 "run_host": run.get("host"),
                                 "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
