"""Which corners of the broad design a profile's one-table devices cover: a coupling check, nothing timed.

Run: .venv/bin/python benchmarks/design_cells.py profiles/amd-epyc/broad-seed0 profiles/amd-epyc/narrow-seed4

A one-table device is where a table's own cost shows undiluted. For each profile, its one-table records are
counted in the four cells of (precision, the table's pooling above or below its range's middle in
log(1 + pooling)) and of (batch above or below its range's log-middle, rows above or below theirs): a
space-filling design fills all four of each near a quarter. Before stop 95 the composition's and the tables'
Sobol sequences were read at the same index (``BroadDesign.sobol_axes``, "aligned"), and every profile's
one-table records fill two cells of each. Also counted: the one-table records in DLRM-100 (8)'s corner
(``--corner``: fp32, pooling at least P, at least M MiB of table timed), where the shipped model prices
synth0_399's backward 1.5x low (docs/benchmarks.md, "Stop 93").
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from typing import Any

from autoshard.errors import AutoshardError
from autoshard.hardware.profile_dataset import load_dataset
from autoshard.hardware.profile_design import BroadDesign


def cell_keys(design: BroadDesign, precision: str, pooling: float, batch: int, rows: int) -> tuple[str, str]:
    """A one-table device's cells: (precision, its pooling above or below the middle of the design's range in
    log(1 + pooling)) and (batch, rows above or below their ranges' log-middles), as the axes are drawn."""
    p_mid = math.expm1(sum(math.log1p(p) for p in design.pooling) / 2)
    b_mid, r_mid = math.sqrt(math.prod(design.batch_sizes)), math.sqrt(math.prod(design.rows))
    return (f"{precision} {'high' if pooling > p_mid else 'low'} pooling",
            f"{'large' if batch > b_mid else 'small'} batch, {'many' if rows > r_mid else 'few'} rows")


def cells(path: str, corner_pooling: float, corner_mib: float) -> dict[str, Any]:
    """The one-table cells of the broad profile at ``path`` (see the module docstring)."""
    data = load_dataset(path)
    if data.design != "broad":
        raise AutoshardError(f"{path} is not a broad-design profile; its tables are a pool's, not drawn")
    design = BroadDesign.from_json(data.settings["design"])
    prec: Counter[str] = Counter()
    size: Counter[str] = Counter()
    corner = 0
    ones = [r for r in data.records if len(r.tables) == 1 and r.table_specs]
    for rec in ones:
        table = rec.own_tables()[0]
        by_precision, by_size = cell_keys(design, rec.precision.value, table.pooling_factor, rec.batch_size,
                                          table.rows)
        prec[by_precision] += 1
        size[by_size] += 1
        corner += (rec.precision.value == "fp32" and table.pooling_factor >= corner_pooling
                   and rec.timed_bytes >= corner_mib * 2**20)
    return {"profile": path, "sobol_axes": design.sobol_axes, "one_table": len(ones),
            "precision_pooling": dict(sorted(prec.items())), "batch_rows": dict(sorted(size.items())),
            "corner": corner}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("profiles", nargs="+", help="broad-design profile directories")
    p.add_argument("--corner", nargs=2, type=float, default=(40.0, 16.0), metavar=("POOLING", "MIB"),
                   help="count fp32 one-table records pooled at least POOLING with at least MIB of table "
                        "timed (default 40 16)")
    args = p.parse_args(argv)
    try:
        rows = [cells(path, *args.corner) for path in args.profiles]
    except AutoshardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for r in rows:
        print(f"{r['profile']} ({r['sobol_axes']} axes): {r['one_table']} one-table records; "
              f"fp32, pooling >= {args.corner[0]:g}, >= {args.corner[1]:g} MiB: {r['corner']}")
        print("  " + "; ".join(f"{k}: {v}" for k, v in r["precision_pooling"].items()))
        print("  " + "; ".join(f"{k}: {v}" for k, v in r["batch_rows"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
