"""Re-time, on one GPU, devices a GPU bench measured and records a GPU profile measured, under the bench's
timing protocol and the profile's, interleaved, with the GPU's clocks and temperature beside each.

Why (docs/benchmarks.md, "Stop 35" and "Stop 41"): a model trained on the broad H100 profile priced the
production suite's devices 1.1-2.0x dearer than the bench measured them, the more so the more tables a device
held, while it priced the profile's own later records within 0.76-1.00. Either the two measurements differ
(the protocol: the bench times 2 + 5 steps a round and keeps the minimum of two rounds, the profile 3 + 10
steps and their median under a 300 ms budget; or the sitting: another machine, another minute of a warming
GPU), or the devices do (the suite's tables against the design's). Timing the same devices both ways on one
machine, beside their recorded times, separates the two.

    python benchmarks/gpu/retime.py \
        --bench benchmarks/runs/s31-gpu-h100-production-40-8-b16384-broad.json.gz \
        --profile profiles/nvidia-h100/broad-s31-b16384 \
        --devices 60 --records 40 --seconds 150 \
        --device cuda -o OUT/retime.jsonl

One JSON line per item, written as it is timed (a run stopped early keeps what it timed): ``source``
(bench or profile), ``key``, ``tables``, ``recorded`` [fwd, bwd] ms, ``bench`` [fwd, bwd] (the bench's
protocol: two rounds, their minimum), ``profile`` [fwd, bwd] (the profile's settings as its manifest records
them), ``gpu_state`` and ``elapsed_s``. Summarise with ``retime.py --summary FILE``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ (cost_model_on_plans)

from cost_model_on_plans import TABLE_BANDS, bench_devices, load_results

from autoshard.errors import AutoshardError
from autoshard.hardware.kernel import MeasureSettings, measure_shard, prepare_lookups
from autoshard.hardware.profile_dataset import load_dataset, spread_evenly
from autoshard.hardware.profile_records import sample_index
from autoshard.io import read_json


def bench_items(run: Path, count: int) -> list[dict[str, Any]]:
    """``count`` of the run's distinct devices: every device of 10+ tables (few, and where the model's
    bias was largest), the rest spread over the measured fwd + bwd of the others."""
    devices = bench_devices(load_results(run))
    many = [d for d in devices if len(d[1]) >= 10][:count]
    rest = spread_evenly([d for d in devices if len(d[1]) < 10], count - len(many), key=lambda d: d[2] + d[3])
    return [{"source": "bench", "key": f"{task.name}:{i}", "task": task, "shards": shards,
             "recorded": [fwd, bwd]}
            for i, (task, shards, fwd, bwd) in enumerate(many + rest)]


def profile_items(directory: Path, count: int) -> list[dict[str, Any]]:
    """``count`` records: half of the profile's first sitting (its first 235 samples, stop 31), half of its
    last 500 (stop 35's second call), each half spread over the recorded fwd + bwd."""
    ds = load_dataset(directory)
    first, last = ds.records[:235], ds.records[-500:]
    chosen = (spread_evenly(first, count // 2, key=lambda r: r.fwd_ms + r.bwd_ms)
              + spread_evenly(last, count - count // 2, key=lambda r: r.fwd_ms + r.bwd_ms))
    out = []
    for r in chosen:
        task, shards = ds.task_of(r)
        out.append({"source": "profile", "key": r.sample_id, "task": task, "shards": shards,
                    "recorded": [r.fwd_ms, r.bwd_ms]})
    return out


def retime(args: argparse.Namespace) -> int:
    from autoshard.host import gpu_state

    bench_run = read_json(args.bench)
    bench_settings = MeasureSettings.from_json(bench_run["measure_settings"])
    manifest = read_json(args.profile / "profile.json")
    profile_settings = MeasureSettings.from_json(manifest["settings"])
    if args.device != "cuda":  # a dry run on a CPU host
        bench_settings = replace(bench_settings, device="cpu")
        profile_settings = replace(profile_settings, device="cpu")
    rounds = int(bench_run.get("rounds", 2))
    items = bench_items(args.bench, args.devices) + profile_items(args.profile, args.records)
    random.Random(0).shuffle(items)  # neither source all early or all late in the sitting
    start = time.monotonic()
    done = 0
    with open(args.output, "a") as out:
        for item in items:
            if time.monotonic() - start > args.seconds:
                break
            task, shards = item["task"], item["shards"]
            prepared = prepare_lookups(task, shards, bench_settings)
            b_rounds = []
            for k in range(rounds):  # the bench's rounds, the profile's timing between them
                t = measure_shard(task, shards, bench_settings, prepared)
                b_rounds.append([t.fwd_ms, t.bwd_ms])
                if k == 0:
                    p = measure_shard(task, shards, profile_settings, prepared)
            state = gpu_state(0) if args.device == "cuda" else None
            line = {"source": item["source"], "key": item["key"], "tables": len(shards),
                    "recorded": item["recorded"], "bench": np.min(b_rounds, axis=0).tolist(),
                    "bench_rounds": b_rounds, "profile": [p.fwd_ms, p.bwd_ms], "profile_tries": p.tries,
                    "gpu_state": state, "elapsed_s": round(time.monotonic() - start, 2)}
            out.write(json.dumps(line) + "\n")
            out.flush()
            done += 1
    print(f"retimed {done} of {len(items)} items in {time.monotonic() - start:.0f} s")
    return 0


def summary(path: Path) -> int:
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    print(f"{len(lines)} items; median ratios (fwd+bwd), [fwd, bwd]:")
    for source in ("bench", "profile"):
        sel = [x for x in lines if x["source"] == source]
        if not sel:
            continue
        rec = np.array([x["recorded"] for x in sel])
        ben = np.array([x["bench"] for x in sel])
        pro = np.array([x["profile"] for x in sel])
        tables = np.array([x["tables"] for x in sel])
        rounds = np.array([[sum(r) for r in x["bench_rounds"]] for x in sel])
        print(f"{source} ({len(sel)} items; the bench protocol's first round against its second, median "
              f"|r1 / r2 - 1|: {np.median(np.abs(rounds[:, 0] / rounds[:, -1] - 1)):.3f})")
        for name, a, b in (("profile protocol / bench protocol", pro, ben),
                           ("bench protocol / recorded", ben, rec),
                           ("profile protocol / recorded", pro, rec)):
            ratio = a.sum(axis=1) / b.sum(axis=1)
            parts = np.median(a / b, axis=0)
            print(f"  {name}: {np.median(ratio):.3f} [{parts[0]:.3f}, {parts[1]:.3f}]"
                  f"  (p10 {np.quantile(ratio, 0.1):.3f}, p90 {np.quantile(ratio, 0.9):.3f})")
        for lo, hi in TABLE_BANDS:
            s = (tables >= lo) & (tables <= hi)
            if s.any():
                band = f"{lo}-{hi if hi < 10**6 else ''}"
                print(f"    {band} tables ({int(s.sum())}): bench protocol / recorded "
                      f"{np.median(ben[s].sum(axis=1) / rec[s].sum(axis=1)):.3f}, profile / bench protocol "
                      f"{np.median(pro[s].sum(axis=1) / ben[s].sum(axis=1)):.3f}")
        if source == "profile":
            first = np.array([sample_index(x["key"])[1] < 235 for x in sel])
            for name, s in (("first sitting (samples < 235)", first), ("last 500 samples", ~first)):
                if s.any():
                    print(f"    {name} ({int(s.sum())}): profile protocol / recorded "
                          f"{np.median(pro[s].sum(axis=1) / rec[s].sum(axis=1)):.3f}")
    states = [x["gpu_state"] for x in lines if x.get("gpu_state")]
    if states:
        for k in states[0]:
            v = [s[k] for s in states]
            print(f"gpu {k}: first {v[0]}, min {min(v)}, max {max(v)}, last {v[-1]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--summary", type=Path, help="summarise a finished output instead of timing")
    p.add_argument("--bench", type=Path, help="a GPU bench's results (benchmarks/runs/*.json.gz)")
    p.add_argument("--profile", type=Path, help="a GPU profile directory (packed or not)")
    p.add_argument("--devices", type=int, default=60, help="bench devices to re-time")
    p.add_argument("--records", type=int, default=40, help="profile records to re-time")
    p.add_argument("--seconds", type=float, default=150.0, help="stop starting items after this long")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="cpu: a dry run")
    p.add_argument("-o", "--output", type=Path, help="JSON lines, appended")
    args = p.parse_args(argv)
    if not (args.summary or (args.bench and args.profile and args.output)):
        p.error("--bench, --profile and -o are needed to re-time (or --summary FILE)")
    try:
        return summary(args.summary) if args.summary else retime(args)
    except (AutoshardError, OSError) as e:  # a missing or unreadable input: one line, not a traceback
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
