"""A cost model's bias by the working set of a device: measured / predicted forward and backward of a
profile's records, in bands of the bytes a batch touches (the distinct rows it looks up,
``distinct_rows_per_batch``, x dim x element bytes, summed over the device's shards) and apart for devices of
at most ``--few`` shards.

    .venv/bin/python benchmarks/working_set_error.py --cost-model src/autoshard/data/default_cost_model.pt \
        --data profiles/amd-epyc/wide-seed3 [--few 3]

``--by table-bytes`` bands by the bytes of the tables the device was timed with instead (each table's rows
kept for timing, the rows cap applied, x dim x element bytes), in ``TABLE_BAND_EDGES_MB``; ``--dims LO:HI``
keeps the records whose shards' dims all lie in the range (stop 94: narrow tables, ``--few 1`` for devices of
one table). ``--by density`` bands by the share of its timed rows a batch touches on the device's most
looked-up shard (``features.touched_share``: the distinct rows it looks up, folded into the rows kept for
timing), in ``DENSITY_EDGES``: how scattered the backward's row updates are over the table.

A profile with a ``level.json`` (``autoshard profile-level``) is divided by it first, so its records stand at
the reference profile's speed, the one the model learned; the level used is printed. Nothing is measured.

Why (docs/benchmarks.md, "Stop 86"): the shipped model under-priced the forward of wide, heavily pooled
tables far beyond the last-level cache (stop 85), and its training profile held 30 devices of <= 3 shards
touching >= 32 MB a batch out of 3,005; the profile of that corner measured at stop 86 says by how much.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

import numpy as np

from autoshard.costs.learned import LearnedCostModel
from autoshard.costs.learned.features import touched_share
from autoshard.errors import AutoshardError
from autoshard.hardware.profile_dataset import load_dataset
from autoshard.hardware.profile_level import at_reference_level
from autoshard.tables.table import distinct_rows_per_batch

BAND_EDGES_MB = (0, 8, 32, 128, 512, float("inf"))
"""Working-set bands; 32 MB is the AMD EPYC VM's last-level cache."""

TABLE_BAND_EDGES_MB = (0, 8, 16, 32, 64, float("inf"))
"""Timed-table-bytes bands (``--by table-bytes``), around the same 32 MB."""

DENSITY_EDGES = (0, 0.03, 0.1, 0.3, float("inf"))
"""Touched-share bands (``--by density``)."""

EDGES = {"working-set": BAND_EDGES_MB, "table-bytes": TABLE_BAND_EDGES_MB, "density": DENSITY_EDGES}
UNIT = {"working-set": " MB", "table-bytes": " MB", "density": ""}


def working_set_bytes(task, shards) -> float:
    """Bytes one batch of ``task`` touches on a device of ``shards``."""
    raw = np.array([task.tables[s.table].raw_features(s.dim) for s in shards])
    rows = distinct_rows_per_batch(raw, task.batch_size)
    return float(sum(r * s.dim * task.precision.bytes for r, s in zip(rows, shards)))


def device_touched_share(task, shards, rec) -> float:
    """``features.touched_share`` of the device's most looked-up shard, at the rows cap it was timed with."""
    hot = max(shards, key=lambda s: task.tables[s.table].pooling_factor)
    raw = task.tables[hot.table].raw_features(hot.dim)[None]
    return float(touched_share(raw, task.batch_size, rec.settings.get("rows_cap"))[0])


def band_value(by: str, task, shards, rec) -> float:
    """The quantity records are banded by: MB a batch touches, MB of timed tables, or the touched share."""
    if by == "working-set":
        return working_set_bytes(task, shards) / 2**20
    if by == "table-bytes":
        return rec.timed_bytes / 2**20
    return device_touched_share(task, shards, rec)


def band_ratios(data_dir: str, model, few: int, by: str = "working-set",
                dims: tuple[int, int] | None = None) -> tuple[dict[tuple[int, bool], np.ndarray], str]:
    """Per (band, few), the (fwd, bwd) measured / predicted of every record (of shards of ``dims`` only, if
    given), banded ``by`` working set or timed table bytes; and the level line."""
    data = load_dataset(data_dir)
    records, said = data.records, "as measured (no level.json)"
    if dims is not None:
        records = [r for r in records if all(dims[0] <= d <= dims[1] for d in r.dims)]
    if data.level is not None:
        records = at_reference_level(records, data.level)
        said = f"at {data.level.reference}'s speed (fwd / {data.level.fwd:.3f}, bwd / {data.level.bwd:.3f})"
    groups: dict[tuple[int, bool], list] = defaultdict(list)
    for rec in records:
        task, shards = data.task_of(rec)
        value, edges = band_value(by, task, shards, rec), EDGES[by]
        band = next(i for i in range(len(edges) - 1) if value < edges[i + 1])
        (fwd, bwd, _), = model.device_costs(task, [shards])
        groups[(band, len(shards) <= few)].append((rec.fwd_ms / fwd, rec.bwd_ms / bwd))
    return {k: np.array(v) for k, v in groups.items()}, said


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cost-model", required=True, help="a learned cost model checkpoint")
    ap.add_argument("--data", action="append", required=True, help="a profile directory (repeat)")
    ap.add_argument("--few", type=int, default=3, help="most shards a device holds to count as few")
    ap.add_argument("--by", choices=tuple(EDGES), default="working-set",
                    help="band by the bytes a batch touches (default), the timed tables' bytes or the share "
                         "of its timed rows the most looked-up shard's batch touches")
    ap.add_argument("--dims", metavar="LO:HI", help="only records whose shards' dims all lie in LO..HI")
    args = ap.parse_args(argv)
    if args.few < 1:
        print("error: --few must be positive", file=sys.stderr)
        return 2
    dims = None
    if args.dims is not None:
        try:
            dims = tuple(int(v) for v in args.dims.split(":"))
            if len(dims) != 2 or not 0 < dims[0] <= dims[1]:
                raise ValueError
        except ValueError:
            print(f"error: --dims {args.dims!r} is not LO:HI with 0 < LO <= HI (e.g. 8:32)", file=sys.stderr)
            return 2
    edges, unit = EDGES[args.by], UNIT[args.by]
    lines: list[str] = []
    try:  # every profile read and priced before a line is printed
        model = LearnedCostModel.load(args.cost_model, allow_other_hardware=True)
        for d in args.data:
            groups, said = band_ratios(d, model, args.few, args.by, dims)
            lines.append(f"{d}: {sum(len(v) for v in groups.values())} records, {said}")
            for (band, is_few), ratios in sorted(groups.items()):
                gm = np.exp(np.log(ratios).mean(axis=0))
                lo, hi = edges[band], edges[band + 1]
                lines.append(f"  {lo:>4g}-{hi:<4g}{unit}, {'few ' if is_few else 'more'}: {len(ratios):4d} "
                             f"records, measured / predicted fwd {gm[0]:.2f}, bwd {gm[1]:.2f}")
    except AutoshardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0

if __name__ == "__main__":
    sys.exit(main())
