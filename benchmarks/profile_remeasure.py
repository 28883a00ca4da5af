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
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict
from typing import Any

import numpy as np

from autoshard.bench.summary import geomean, geomean_interval
from autoshard.hardware.host_calibration import retime
from autoshard.hardware.profile_dataset import load_dataset
from autoshard.host import host_info
from autoshard.io import write_json


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


def _pair_profiles(data: Any, other: Any) -> list[dict[str, Any]]:
    """Records of ``other`` (as new) paired with ``data``'s (as recorded) by sample id."""
    theirs = {r.sample_id: r for r in other.records}
    pairs = []
    for rec in data.records:
        new = theirs.get(rec.sample_id)
        if new is None or tuple(new.dims) != tuple(rec.dims) or new.batch_size != rec.batch_size:
            continue
        pairs.append({"sample_id": rec.sample_id, "tables": len(rec.tables), "batch_size": rec.batch_size,
                      "recorded_host": rec.host.get("cpu"), "host": new.host.get("cpu"),
                      "recorded_fwd_ms": rec.fwd_ms, "recorded_bwd_ms": rec.bwd_ms,
                      "fwd_ms": new.fwd_ms, "bwd_ms": new.bwd_ms})
    return pairs


def _remeasure(data: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    picked = data.spread(args.records, args.max_ms)
    if not picked:
        raise SystemExit("no records to re-measure (check --records and --max-ms)")
    here = host_info("cpu")
    print(f"re-measuring {len(picked)} of {len(data.records)} records of {args.profile} on {here['cpu']} "
          f"(torch {here['torch']}, fbgemm {here['fbgemm_gpu']})")
    print(f"{'sample':<10} {'tables':>6} {'batch':>6} {'prec':<5} {'recorded on':<28} "
          f"{'fwd ms':>17} {'bwd ms':>17} {'fwd x':>6} {'bwd x':>6} {'s':>5}")
    pairs = []
    for rec in picked:
        (t,) = retime(data, [rec])  # the library's protocol (autoshard calibrate-cost), one record at a time
        pairs.append(asdict(t))
        print(f"{t.sample_id:<10} {t.tables:>6} {t.batch_size:>6} {t.precision:<5} "
              f"{t.recorded_host[:28]:<28} "
              f"{t.recorded_fwd_ms:8.2f}->{t.fwd_ms:8.2f} {t.recorded_bwd_ms:8.2f}->{t.bwd_ms:8.2f} "
              f"{t.fwd_ms / t.recorded_fwd_ms:6.2f} {t.bwd_ms / t.recorded_bwd_ms:6.2f} {t.seconds:5.1f}",
              flush=True)
    return pairs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", help="a profile directory (autoshard profile -o DIR), plain or packed")
    ap.add_argument("--records", type=int, default=24, help="how many records to re-measure")
    ap.add_argument("--max-ms", type=float, default=float("inf"),
                    help="skip records whose recorded fwd+bwd is above this (to bound the run time)")
    ap.add_argument("--against", metavar="PROFILE",
                    help="pair with this profile's records of the same samples instead of timing")
    ap.add_argument("--json", help="also write every pair and the summary to this file")
    args = ap.parse_args()

    data = load_dataset(args.profile)
    if args.against:
        pairs = _pair_profiles(data, load_dataset(args.against))
        if not pairs:
            raise SystemExit(f"{args.profile} and {args.against} share no sample")
        print(f"{len(pairs)} samples of {args.profile} ({pairs[0]['recorded_host']}) measured again in "
              f"{args.against} ({pairs[0]['host']}); ratio = {args.against} / {args.profile}")
    else:
        pairs = _remeasure(data, args)
    summary = summarize(pairs)
    if args.json:
        write_json(args.json, {"profile": args.profile, "against": args.against, "host": host_info("cpu"),
                               "pairs": pairs, "summary": summary})


if __name__ == "__main__":
    main()
