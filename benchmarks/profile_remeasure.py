"""Re-measure records of a profile on this machine: how far a cost record moves between two measurements.

Run: .venv/bin/python benchmarks/profile_remeasure.py profiles/intel-xeon/broad-seed0 [--records 24]
     .venv/bin/python benchmarks/profile_remeasure.py profiles/intel-xeon/broad-seed0 \
         --against profiles/amd-epyc/broad-seed0          # pair two profiles' records by sample id, no timing

Picks ``--records`` records spread evenly over the profile's range of fwd+bwd cost (so small and large
devices are both covered), re-times each with the settings it was recorded with (``measure_shard``, same
protocol, tables, batch, precision and seeds), and prints per record the recorded and the new fwd/bwd and
their ratio (new / recorded), then the geometric-mean ratio with a 95% bootstrap interval and the median
absolute log-ratio (the typical per-record disagreement), for fwd, bwd and fwd+bwd.

Two readings, told apart by the hosts printed: when the records were measured on this CPU model the figures
are the re-measurement floor (no cost model can be scored more accurately than this); when they were measured
on another CPU model the geometric mean is the systematic difference between the two machines and the spread
what a single scale factor cannot explain. ``--against`` pairs the records two profile directories share (same
design and seed: the same samples, measured on two machines) without timing anything.

Whether the difference depends on the table's size (stop 94: a host whose last-level cache misses cost more
moves big tables more than small ones, which one level factor cannot carry): ``--one-table`` keeps records
of one table, ``--dims LO:HI`` those whose shards' dims lie in the range, and ``--spread-by table-bytes``
spreads the picks evenly over the log of the bytes the records' tables were timed with (rows capped) instead
of their cost; the ratios are then also printed per band of those bytes (``MIB_BANDS``).

     .venv/bin/python benchmarks/profile_remeasure.py profiles/amd-epyc/broad-seed0 --one-table --dims 8:32 \
         --spread-by table-bytes --records 30
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from dataclasses import asdict
from typing import Any

import numpy as np

from autoshard.bench.summary import geomean, geomean_interval
from autoshard.errors import AutoshardError
from autoshard.hardware.host_calibration import retime
from autoshard.hardware.profile_dataset import load_dataset, spread_evenly
from autoshard.host import host_info
from autoshard.io import write_json

MIB_BANDS = (0.0, 8.0, 32.0, 64.0, float("inf"))
"""Bands of timed table MiB the ratios are printed in: around the AMD EPYC VM's 32 MiB last-level cache."""


def timed_mib(rec: Any) -> float:
    """MiB of the tables ``rec`` was timed with (``CostRecord.timed_bytes``)."""
    return rec.timed_bytes / 2**20


def _dim_range(text: str) -> tuple[int, int]:
    try:
        low, high = (int(v) for v in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not LO:HI (two integers, e.g. 8:32)") from None
    if not 0 < low <= high:
        raise argparse.ArgumentTypeError(f"{text!r}: need 0 < LO <= HI")
    return low, high


def summarize(pairs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per part (fwd, bwd, total): geometric-mean ratio new / recorded with its 95% bootstrap interval, the
    median absolute log-ratio and the range; printed and returned."""
    summary = {}
    for part in ("fwd", "bwd", "total"):
        def cost(p: dict[str, Any], pre: str = "", part: str = part) -> float:
            if part == "total":
                return p[f"{pre}fwd_ms"] + p[f"{pre}bwd_ms"]
            return p[f"{pre}{part}_ms"]
        ratios = np.array([cost(p) / cost(p, "recorded_") for p in pairs])
        low, high = geomean_interval(list(ratios))
        spread = float(np.median(np.abs(np.log(ratios))))
        summary[part] = {"geomean_ratio": geomean(list(ratios)), "low": low, "high": high,
                         "median_abs_log_ratio": spread, "max_ratio": float(ratios.max()),
                         "min_ratio": float(ratios.min())}
        print(f"{part:<5} new/recorded geomean {summary[part]['geomean_ratio']:.3f} [{low:.3f}, {high:.3f}], "
              f"median |change| {math.expm1(spread) * 100:.1f}%, range {ratios.min():.2f}-{ratios.max():.2f} "
              f"({len(pairs)} records)")
    return summary


def by_band(pairs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per ``MIB_BANDS`` band with records: geometric-mean fwd and bwd ratios new / recorded; printed and
    returned (the open band's upper edge as None)."""
    out = []
    for low, high in itertools.pairwise(MIB_BANDS):
        band = [p for p in pairs if low <= p["table_mib"] < high]
        if not band:
            continue
        row = {"low_mib": low, "high_mib": high if math.isfinite(high) else None, "records": len(band),
               **{part: geomean([p[f"{part}_ms"] / p[f"recorded_{part}_ms"] for p in band])
                  for part in ("fwd", "bwd")}}
        out.append(row)
        print(f"table MiB [{low:g}, {high:g}): {len(band):3d} records, new/recorded fwd {row['fwd']:.3f} "
              f"bwd {row['bwd']:.3f}")
    return out


def _pair_profiles(records: list[Any], other: Any) -> list[dict[str, Any]]:
    """Records of ``other`` (as new) paired with ``records`` (as recorded) by sample id."""
    theirs = {r.sample_id: r for r in other.records}
    pairs = []
    for rec in records:
        new = theirs.get(rec.sample_id)
        if new is None or tuple(new.dims) != tuple(rec.dims) or new.batch_size != rec.batch_size:
            continue
        pairs.append({"sample_id": rec.sample_id, "tables": len(rec.tables), "batch_size": rec.batch_size,
                      "table_mib": timed_mib(rec),
                      "recorded_host": rec.host.get("cpu"), "host": new.host.get("cpu"),
                      "recorded_fwd_ms": rec.fwd_ms, "recorded_bwd_ms": rec.bwd_ms,
                      "fwd_ms": new.fwd_ms, "bwd_ms": new.bwd_ms})
    return pairs


def _selected(data: Any, args: argparse.Namespace) -> list[Any]:
    """The records ``--one-table`` and ``--dims`` keep."""
    keep = list(data.records)
    if args.one_table:
        keep = [r for r in keep if len(r.tables) == 1]
    if args.dims:
        low, high = args.dims
        keep = [r for r in keep if all(low <= d <= high for d in r.dims)]
    return keep


def _remeasure(data: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    candidates = [r for r in _selected(data, args) if r.fwd_ms + r.bwd_ms <= args.max_ms]
    if args.spread_by == "table-bytes":
        picked = spread_evenly(candidates, args.records, key=lambda r: math.log(max(timed_mib(r), 1e-9)))
    else:  # CostDataset.spread's order
        picked = spread_evenly(candidates, args.records, key=lambda r: r.fwd_ms + r.bwd_ms)
    if not picked:
        raise AutoshardError("no records to re-measure (check --records, --max-ms, --one-table and --dims)")
    here = host_info("cpu")
    print(f"re-measuring {len(picked)} of {len(data.records)} records of {args.profile} on {here['cpu']} "
          f"(torch {here['torch']}, fbgemm {here['fbgemm_gpu']})")
    print(f"{'sample':<10} {'tables':>6} {'batch':>6} {'prec':<5} {'recorded on':<28} "
          f"{'fwd ms':>17} {'bwd ms':>17} {'fwd x':>6} {'bwd x':>6} {'s':>5}")
    pairs = []
    for rec in picked:
        (t,) = retime(data, [rec])  # the library's protocol (autoshard calibrate-cost), one record at a time
        pairs.append({**asdict(t), "table_mib": timed_mib(rec)})
        print(f"{t.sample_id:<10} {t.tables:>6} {t.batch_size:>6} {t.precision:<5} "
              f"{t.recorded_host[:28]:<28} "
              f"{t.recorded_fwd_ms:8.2f}->{t.fwd_ms:8.2f} {t.recorded_bwd_ms:8.2f}->{t.bwd_ms:8.2f} "
              f"{t.fwd_ms / t.recorded_fwd_ms:6.2f} {t.bwd_ms / t.recorded_bwd_ms:6.2f} {t.seconds:5.1f}",
              flush=True)
    return pairs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", help="a profile directory (autoshard profile -o DIR), plain or packed")
    ap.add_argument("--records", type=int, default=24, help="how many records to re-measure")
    ap.add_argument("--max-ms", type=float, default=float("inf"),
                    help="skip records whose recorded fwd+bwd is above this (to bound the run time)")
    ap.add_argument("--against", metavar="PROFILE",
                    help="pair with this profile's records of the same samples instead of timing")
    ap.add_argument("--one-table", action="store_true", help="only records of one table")
    ap.add_argument("--dims", type=_dim_range, metavar="LO:HI",
                    help="only records whose shards' dims all lie in LO..HI")
    ap.add_argument("--spread-by", choices=("cost", "table-bytes"), default="cost",
                    help="spread the picks over the recorded fwd+bwd (default) or over the log of the timed "
                         "table bytes")
    ap.add_argument("--json", help="also write every pair and the summary to this file")
    args = ap.parse_args(argv)
    if args.records < 1:
        ap.error("--records must be at least 1")
    try:
        return _run(args)
    except AutoshardError as e:
        print(f"profile_remeasure: error: {e}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    data = load_dataset(args.profile)
    if args.against:
        pairs = _pair_profiles(_selected(data, args), load_dataset(args.against))
        if not pairs:
            raise AutoshardError(f"{args.profile} and {args.against} share no sample")
        print(f"{len(pairs)} samples of {args.profile} ({pairs[0]['recorded_host']}) measured again in "
              f"{args.against} ({pairs[0]['host']}); ratio = {args.against} / {args.profile}")
    else:
        pairs = _remeasure(data, args)
    summary = summarize(pairs)
    bands = by_band(pairs)
    if args.json:
        write_json(args.json, {"profile": args.profile, "against": args.against, "host": host_info("cpu"),
                               "selection": {"one_table": args.one_table, "dims": args.dims,
                                             "spread_by": args.spread_by},
                               "pairs": pairs, "summary": summary, "by_table_mib": bands})
    return 0


if __name__ == "__main__":
    sys.exit(main())
