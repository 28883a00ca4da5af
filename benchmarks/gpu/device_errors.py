"""How well the planning model and a lookups-only fit price the devices a GPU bench measured.

    .venv/bin/python benchmarks/gpu/device_errors.py benchmarks/runs/s25-gpu-h200-dlrm-50-4-b16384.json.gz \
        profiles/nvidia-h200/pool-dlrm50-b16384

For every device of every measured plan (repeats included): the bench's stored prediction by the planning
model against the measured cost (min over rounds), and a least-squares fit of forward and backward on
[1, lookups, lookups x dim, tables] over the profile's records (lookups: batch x the tables' pooling
factors), scored on the same devices: MAPE of fwd, bwd and fwd+bwd, Spearman of fwd+bwd. No measurement
happens here (docs/benchmarks.md, "Stop 25").
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from autoshard.errors import AutoshardError
from autoshard.io import read_json


def _features(pooling: list[float], dims: list[int], batch: int) -> list[float]:
    looks = batch * float(sum(pooling))
    wide = batch * float(sum(p * d for p, d in zip(pooling, dims)))
    return [1.0, looks / 1e6, wide / 1e7, float(len(pooling))]


def _profile(directory: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pool = {t["name"]: t for t in json.loads((directory / "tables.json").read_text())["tables"]}
    with gzip.open(directory / "shards-packed.jsonl.gz", "rt") as f:
        lines = f.read().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    x = np.array([_features([pool[n]["pooling_factor"] for n in r["tables"]], r["dims"], r["batch_size"])
                  for r in records])
    return x, np.array([r["fwd_ms"] for r in records]), np.array([r["bwd_ms"] for r in records])


def _devices(results: dict) -> list[tuple[list[float], float, float, float, float]]:
    rows = []
    for t in results["tasks"]:
        tables = {tb["name"]: tb for tb in t["task"]["tables"]}
        batch = int(t["task"]["batch_size"])
        for x in t["results"]:
            if not x["ok"] or not x.get("measured") or not x.get("predicted"):
                continue
            per: list[tuple[list[float], list[int]]] = [([], []) for _ in range(int(x["plan"]["devices"]))]
            for name, spec in x["plan"]["tables"].items():
                for shard in spec["shards"]:
                    rank = shard["rank"] if isinstance(shard["rank"], int) else shard["rank"][0]
                    per[rank][0].append(tables[name]["pooling_factor"])
                    per[rank][1].append(shard["columns"][1] - shard["columns"][0])
            for (pooling, dims), m, p in zip(per, x["measured"]["devices"], x["predicted"]["devices"]):
                rows.append((_features(pooling, dims, batch), m["fwd_ms"], m["bwd_ms"],
                             p["fwd_ms"], p["bwd_ms"]))
    return rows


def _mape(pred: np.ndarray, true: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - true) / true)) * 100


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", help="a bench results file (results.json or an archived .json.gz)")
    p.add_argument("profile", help="the packed profile the fit learns from (profile-pack directory)")
    args = p.parse_args(argv)
    try:
        x, fwd, bwd = _profile(Path(args.profile))
        rows = _devices(read_json(args.results))
    except AutoshardError as e:
        print(f"device_errors: error: {e}", file=sys.stderr)
        return 2
    except (OSError, KeyError, ValueError) as e:
        print(f"device_errors: error: give a bench results file and a packed profile directory "
              f"({type(e).__name__}: {e})", file=sys.stderr)
        return 2
    c_fwd, *_ = np.linalg.lstsq(x, fwd, rcond=None)
    c_bwd, *_ = np.linalg.lstsq(x, bwd, rcond=None)
    if not rows:
        print("device_errors: error: no measured device with a prediction in the results", file=sys.stderr)
        return 2
    f = np.array([r[0] for r in rows])
    mf, mb, pf, pb = (np.array([r[k] for r in rows]) for k in (1, 2, 3, 4))
    print(f"{len(rows)} measured devices; lookups-only fit on {len(fwd)} profile records")
    print("| model | fwd MAPE % | bwd MAPE % | fwd+bwd MAPE % | fwd+bwd Spearman |")
    print("|---|---|---|---|---|")
    fits = (("planning model (stored prediction)", pf, pb), ("lookups-only fit", f @ c_fwd, f @ c_bwd))
    for name, a, b in fits:
        print(f"| {name} | {_mape(a, mf):.1f} | {_mape(b, mb):.1f} | {_mape(a + b, mf + mb):.1f} | "
              f"{spearmanr(a + b, mf + mb)[0]:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
