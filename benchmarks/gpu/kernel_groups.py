"""How a model prices a GPU profile's records by tables a device and by dim collisions (tables that share
a shard dim with another table of the device): the evidence that the torch backend's cost depends on a
device's distinct dims, which it runs as separate kernels (docs/benchmarks.md, "Stop 41").

    .venv/bin/python benchmarks/gpu/kernel_groups.py --model benchmarks/gpu/cost-h100-broad-s31.pt \
        profiles/nvidia-h100/broad-s31-b16384 profiles/nvidia-h100/fullvocab-s41-seed1-b16384 \
        profiles/nvidia-h100/fullvocab-s41-seed2-b16384

For each band of tables a device, and each count of collisions (tables - distinct shard dims), prints the
records, the median measured / predicted fwd + bwd and the median measured fwd + bwd; then the same by band
for each profile alone. A model that does not see the dims' grouping prices a device with collisions dear:
measured / predicted falls as collisions rise at a fixed table count.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from autoshard.costs.loading import load_cost_model
from autoshard.errors import AutoshardError
from autoshard.hardware.profile_dataset import load_dataset

BANDS = ((1, 3), (4, 6), (7, 10), (11, 16), (17, 10**6))


def rows_of(model, directory: str) -> np.ndarray:
    """(records, 6): tables, distinct shard dims, predicted and measured fwd + bwd ms, and the GPU's SM clock
    and temperature when the record was timed (NaN where it carries none: records before stop 35)."""
    ds = load_dataset(directory)
    out = []
    for r in ds.records:
        task, shards = ds.task_of(r)
        pred = model.device_costs(task, [shards])[0, :2].sum()
        state = r.host.get("gpu_state") or {}
        out.append((len(shards), len({s.dim for s in shards}), pred, r.fwd_ms + r.bwd_ms,
                    state.get("sm_clock_mhz", np.nan), state.get("temperature_c", np.nan)))
    return np.array(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("profiles", nargs="+", help="GPU profile directories")
    p.add_argument("--model", required=True, help="the cost model to price the records with")
    args = p.parse_args(argv)
    try:  # a model of GPU kernels prices on any host; this script times nothing
        model = load_cost_model(args.model, allow_other_hardware=True)
        per = {d: rows_of(model, d) for d in args.profiles}
    except AutoshardError as e:  # a missing model or profile: one line, not a traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
    a = np.concatenate(list(per.values()))
    n, ratio = a[:, 0], a[:, 3] / a[:, 2]
    collisions = (a[:, 0] - a[:, 1]).astype(int)
    print(f"{len(a)} records; measured / predicted fwd+bwd by tables a device and dim collisions:")
    for lo, hi in BANDS:
        band = (n >= lo) & (n <= hi)
        if not band.any():
            continue
        print(f"  {lo}-{hi if hi < 10**6 else ''} tables ({int(band.sum())} records)")
        for c in range(int(collisions[band].max()) + 1):
            s = band & (collisions == c)
            if s.sum() >= 5:
                print(f"    {c} collisions: {int(s.sum()):4d} records, measured / predicted "
                      f"{np.median(ratio[s]):.3f}, measured {np.median(a[s, 3]):.2f} ms")
    for d, rows in per.items():
        n = rows[:, 0]
        parts = []
        for lo, hi in BANDS:
            s = (n >= lo) & (n <= hi)
            if s.any():
                parts.append(f"{lo}-{hi if hi < 10**6 else ''}: x{np.median(rows[s, 3] / rows[s, 2]):.3f}")
        print(f"{d} ({len(rows)}): measured / predicted by tables a device: " + ", ".join(parts))
        clock, temp = rows[:, 4], rows[:, 5]
        if np.isfinite(clock).any():
            print(f"  GPU state of {int(np.isfinite(clock).sum())} records: SM clock {np.nanmin(clock):.0f}-"
                  f"{np.nanmax(clock):.0f} MHz, temperature {np.nanmin(temp):.0f}-{np.nanmax(temp):.0f} C")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
