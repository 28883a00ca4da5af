"""Can a cost model pre-trained on one machine be adapted to another with a few measured devices?

Run: .venv/bin/python benchmarks/cross_hardware_fine_tune.py --data PROFILE --model CKPT
                      [--sizes 16,32,64,128,256,all] [--variants scaled,adapted,from scratch]
                      [--test-fraction 0.25] [--seed 0] [-o out.json] [--save DIR]

``PROFILE`` is a profile directory of the target machine (e.g. ``profiles/nvidia-h200/pool-dlrm50-b16384``,
792 devices timed on an H200 with the torch backend at batch 16384), ``CKPT`` a model of another machine
(e.g. the shipped default, trained on this project's AMD EPYC CPUs). A seeded share of the profile's records
is held out; for each budget N of the rest (the first N of a seeded order, so the budgets nest) it scores on
the held-out records (fwd+bwd MAPE and Spearman):

- ``pre-trained``: CKPT as it is (a CPU model prices GPU devices at CPU speed: its level is off);
- ``scaled``: CKPT with forward and backward scaled by the median measured / predicted ratio on the N
  records (what ``autoshard calibrate-cost`` does with re-timed records);
- ``adapted``: ``costs.learned.fine_tune(..., adapt_hardware=True)`` on the N records, what
  ``autoshard fine-tune-cost --adapt-hardware`` does: CKPT scaled as above on the records it does not hold
  back for validation, then fine-tuned (the networks continue from their CPU weights at the new level);
- ``from scratch``: ``LearnedCostModel.fit`` on the N records (the recipe of ``autoshard train-cost``, an
  ensemble of 5; a context network with the working set where the records mix batch sizes, as its
  ``--context auto``).

Why: NeuroShard pre-trains once and adapts; a user with a GPU cluster has the shipped CPU model and can time
a few dozen devices. Whether the CPU pre-training helps there, or a fit from scratch on the same devices is
as good, decides what ``fine-tune-cost`` should offer across machines.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from autoshard.costs.learned import CostNetConfig, LearnedCostModel
from autoshard.costs.learned.evaluation import predict_records
from autoshard.costs.learned.fine_tune import FineTuneOptions, fine_tune, level_ratios
from autoshard.costs.learned.training import TrainOptions
from autoshard.costs.metrics import mape
from autoshard.errors import AutoshardError
from autoshard.hardware.profiler import load_dataset
from autoshard.io import write_json


def score(model, pool, records, scale: tuple[float, float] = (1.0, 1.0)) -> tuple[float, float]:
    """fwd+bwd MAPE (%) and Spearman of ``model`` on ``records``, forward and backward scaled by ``scale``."""
    p = predict_records(model, pool, records)
    pred = p.mean[:, 0] * scale[0] + p.mean[:, 1] * scale[1]
    measured = np.array([float(r.fwd_ms) + float(r.bwd_ms) for r in records])
    return float(mape(pred, measured)), float(spearmanr(pred, measured)[0])


VARIANTS = ("scaled", "adapted", "from scratch")


def run_variant(name: str, base, data, subset, test, seed: int, save: Path | None) -> tuple[float, float]:
    """Score one variant (module docstring) adapted on ``subset``'s records; with ``save``, the adapted and
    from-scratch models are written there as ``adapted-N.pt`` and ``scratch-N.pt``."""
    if name == "from scratch":
        # records of several batch sizes (a broad profile) need a context network (train-cost: --context auto)
        mixed = len({int(r.batch_size) for r in subset.records}) > 1
        config = CostNetConfig(context=True, reuse=True) if mixed else CostNetConfig()
        model = LearnedCostModel.fit(subset, TrainOptions(seed=seed, ensemble=5, config=config))
        if save is not None:
            model.save(save / f"scratch-{len(subset.records)}.pt")
        return score(model, data.pool, test)
    if name == "adapted":
        adapted = fine_tune(base, subset, FineTuneOptions(seed=seed), adapt_hardware=True)
        if save is not None:
            adapted.save(save / f"adapted-{len(subset.records)}.pt")
        return score(adapted, data.pool, test)
    return score(base, data.pool, test, level_ratios(base, data.pool, subset.records))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="profile directory of the target machine")
    p.add_argument("--model", required=True, help="cost model of another machine")
    p.add_argument("--sizes", default="16,32,64,128,256,all",
                   help="device budgets N ('all': every train record)")
    p.add_argument("--test-fraction", type=float, default=0.25)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"which of {', '.join(VARIANTS)}")
    p.add_argument("-o", "--output", help="also write the rows as JSON here")
    p.add_argument("--save", help="also save the adapted and from-scratch models in this directory")
    args = p.parse_args(argv)
    try:
        if not 0.0 < args.test_fraction < 1.0:
            raise AutoshardError(f"--test-fraction {args.test_fraction} must be in (0, 1)")
        chosen = [v.strip() for v in args.variants.split(",") if v.strip()]
        if not chosen or any(v not in VARIANTS for v in chosen):
            raise AutoshardError(f"--variants {args.variants!r}: choose from {', '.join(VARIANTS)}")
        save = Path(args.save) if args.save else None
        if save is not None:
            save.mkdir(parents=True, exist_ok=True)
        data = load_dataset(args.data)
        base = LearnedCostModel.load(args.model, allow_other_hardware=True)
        order = np.random.default_rng(args.seed).permutation(len(data.records))
        n_test = round(args.test_fraction * len(order))
        test = [data.records[i] for i in order[:n_test]]
        train_pool = [data.records[i] for i in order[n_test:]]
        try:
            sizes = [len(train_pool) if s.strip() == "all" else int(s)
                     for s in args.sizes.split(",") if s.strip()]
        except ValueError:
            raise AutoshardError(f"--sizes {args.sizes!r}: give numbers of devices or 'all', "
                                 "comma-separated") from None
        print(f"{len(data.records)} records: {len(test)} held out, budgets {sizes} of {len(train_pool)}")
        rows = [{"variant": "pre-trained", "n": 0, **dict(zip(("mape", "spearman"),
                                                              score(base, data.pool, test)))}]
        print(f"pre-trained: MAPE {rows[0]['mape']:.1f}%, Spearman {rows[0]['spearman']:.3f}")
        for n in sizes:
            if not 0 < n <= len(train_pool):
                raise AutoshardError(f"budget {n} must be in 1..{len(train_pool)}")
            subset = replace(data, records=train_pool[:n])
            for name in chosen:
                t0 = time.perf_counter()
                try:
                    m, rho = run_variant(name, base, data, subset, test, args.seed, save)
                    row = {"variant": name, "n": n, "mape": m, "spearman": rho}
                    print(f"N={n:4d} {name:>12}: MAPE {m:6.1f}%, Spearman {rho:.3f} "
                          f"({time.perf_counter() - t0:.0f} s)", flush=True)
                except AutoshardError as e:
                    row = {"variant": name, "n": n, "error": str(e)}
                    print(f"N={n:4d} {name:>12}: {e}", flush=True)
                rows.append(row)
        if args.output:
            write_json(Path(args.output), {"args": vars(args), "rows": rows})
    except AutoshardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
