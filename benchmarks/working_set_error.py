"""A cost model's bias by the working set of a device: measured / predicted forward and backward of a
profile's records, in bands of the bytes a batch touches (the distinct rows it looks up,
``distinct_rows_per_batch``, x dim x element bytes, summed over the device's shards) and apart for devices of
at most ``--few`` shards.

    .venv/bin/python benchmarks/working_set_error.py --cost-model src/autoshard/data/default_cost_model.pt \
        --data profiles/amd-epyc/wide-seed3 [--few 3]

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
from autoshard.errors import AutoshardError
from autoshard.hardware.profile_dataset import load_dataset
from autoshard.hardware.profile_level import at_reference_level
from autoshard.tables.table import distinct_rows_per_batch

BAND_EDGES_MB = (0, 8, 32, 128, 512, float("inf"))
"""Working-set bands; 32 MB is the AMD EPYC VM's last-level cache."""


def working_set_bytes(task, shards) -> float:
    """Bytes one batch of ``task`` touches on a device of ``shards``."""
    raw = np.array([task.tables[s.table].raw_features(s.dim) for s in shards])
    rows = distinct_rows_per_batch(raw, task.batch_size)
    return float(sum(r * s.dim * task.precision.bytes for r, s in zip(rows, shards)))


def band_ratios(data_dir: str, model, few: int) -> tuple[dict[tuple[int, bool], np.ndarray], str]:
    """Per (band, few), the (fwd, bwd) measured / predicted of every record; and the level line."""
    data = load_dataset(data_dir)
    records, said = data.records, "as measured (no level.json)"
    if data.level is not None:
        records = at_reference_level(records, data.level)
        said = f"at {data.level.reference}'s speed (fwd / {data.level.fwd:.3f}, bwd / {data.level.bwd:.3f})"
    groups: dict[tuple[int, bool], list] = defaultdict(list)
    for rec in records:
        task, shards = data.task_of(rec)
        mb = working_set_bytes(task, shards) / 2**20
        band = next(i for i in range(len(BAND_EDGES_MB) - 1) if mb < BAND_EDGES_MB[i + 1])
        (fwd, bwd, _), = model.device_costs(task, [shards])
        groups[(band, len(shards) <= few)].append((rec.fwd_ms / fwd, rec.bwd_ms / bwd))
    return {k: np.array(v) for k, v in groups.items()}, said


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cost-model", required=True, help="a learned cost model checkpoint")
    ap.add_argument("--data", action="append", required=True, help="a profile directory (repeat)")
    ap.add_argument("--few", type=int, default=3, help="most shards a device holds to count as few")
    args = ap.parse_args(argv)
    if args.few < 1:
        print("error: --few must be positive", file=sys.stderr)
        return 2
    lines: list[str] = []
    try:  # every profile read and priced before a line is printed
        model = LearnedCostModel.load(args.cost_model, allow_other_hardware=True)
        for d in args.data:
            groups, said = band_ratios(d, model, args.few)
            lines.append(f"{d}: {sum(len(v) for v in groups.values())} records, {said}")
            for (band, is_few), ratios in sorted(groups.items()):
                gm = np.exp(np.log(ratios).mean(axis=0))
                lo, hi = BAND_EDGES_MB[band], BAND_EDGES_MB[band + 1]
                lines.append(f"  {lo:>4g}-{hi:<4g} MB, {'few ' if is_few else 'more'}: {len(ratios):4d} "
                             f"records, measured / predicted fwd {gm[0]:.2f}, bwd {gm[1]:.2f}")
    except AutoshardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0

if __name__ == "__main__":
    sys.exit(main())
