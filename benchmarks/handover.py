"""How a learned model prices devices outside its training support: the graded hand-over (the networks at the
nearest device inside x the calibrated analytical model's ratio; since stop 17 what 'auto' picks when the
networks beat the fallback on their own errors) against the bare calibrated fallback (before) and the
networks extrapolating on their own, scored on a profile's measured devices.

Run: .venv/bin/python benchmarks/handover.py PROFILE_DIR [--cost-model CHECKPOINT]
     .venv/bin/python benchmarks/handover.py PROFILE_DIR --train-box dim=64,pooling=50,tables=12,batch=16384
                                            [--ensemble 3] [--max-epochs 300]

PROFILE_DIR is any ``autoshard profile -o DIR``, e.g. a held-out DLRM profile: ``autoshard tables synth
--num-tables 100 --seed 7 -o tables.json``, ``autoshard profile --tables tables.json --samples 120
--max-tables 12 --seed 3 --time-budget-ms 2000 -o costs``. Prints why the outside devices are outside, then
for the devices inside the support, outside it, and all, the fwd+bwd MAPE and Spearman of each pricing (the
three agree inside: the hand-over only prices devices outside).

``--train-box`` measures extrapolation further out: it trains a model (the train-cost recipe, ``--ensemble``
members) on the profile's devices inside the box (every shard's dim and pooling, the tables a device and the
batch at most the given values) and scores it on the devices outside the box, which are then outside that
model's support by construction.
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from autoshard.costs.learned import LearnedCostModel
from autoshard.costs.learned.evaluation import RECORD_DEVICE_MEMORY, predict_records, record_precision
from autoshard.costs.learned.model import HANDOVERS
from autoshard.costs.loading import default_cost_model
from autoshard.costs.metrics import score
from autoshard.errors import AutoshardError
from autoshard.hardware.profile_dataset import load_dataset
from autoshard.host import host_info
from autoshard.tasks import Task


def outside_reasons(model: LearnedCostModel, data, records) -> Counter:
    """How many outside devices each support feature (dim, rows, pooling, tables, batch...) sent out."""
    tables = data.pool.by_name()
    reasons: Counter = Counter()
    for r in records:
        task = Task(tuple(tables[n] for n in r.tables), (RECORD_DEVICE_MEMORY,),
                    precision=record_precision(r), batch_size=int(r.batch_size), name="record")
        for _, why in model.out_of_support(task, [r.shard_refs()]):
            # "dim 256 > 64", "pooling 80 > 50", "17 tables (trained 1..12)", "batch size 32768 (...)"
            parts = why.split(", ")
            reasons.update({"tables" if part[0].isdigit() else part.split(" ")[0] for part in parts})
    return reasons


BOX_KEYS = ("dim", "pooling", "tables", "batch")


def parse_box(text: str) -> dict[str, float]:
    box = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        try:
            if key not in BOX_KEYS:
                raise ValueError(key)
            box[key] = float(value)
        except ValueError:
            raise SystemExit(f"error: --train-box takes {'=N,'.join(BOX_KEYS)}=N (any of them), "
                             f"not {part!r}") from None
    return box


def in_box(data, record, box: dict[str, float]) -> bool:
    tables = data.pool.by_name()
    dims = [int(d) for d in record.dims]
    pooling = [tables[n].pooling_factor for n in record.tables]
    return (max(dims) <= box.get("dim", np.inf) and max(pooling) <= box.get("pooling", np.inf)
            and len(dims) <= box.get("tables", np.inf) and record.batch_size <= box.get("batch", np.inf))


def train_in_box(data, box: dict[str, float], ensemble: int, max_epochs: int):
    """(model trained on the devices inside ``box``, the records outside it)."""
    from dataclasses import replace

    from autoshard.costs.learned import CostNetConfig, TrainOptions

    inside = [r for r in data.records if in_box(data, r, box)]
    outside = [r for r in data.records if not in_box(data, r, box)]
    print(f"--train-box {box}: training on {len(inside)} devices, scoring the {len(outside)} outside")
    options = TrainOptions(seed=0, ensemble=ensemble, max_epochs=max_epochs,
                           config=CostNetConfig(context=len({int(r.batch_size) for r in inside}) > 1))
    return LearnedCostModel.fit(replace(data, records=inside), options), outside


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", help="a profile directory (autoshard profile -o DIR)")
    ap.add_argument("--cost-model", help="a checkpoint (default: the shipped default)")
    ap.add_argument("--train-box", help="train on the devices inside this box, score the others (see above)")
    ap.add_argument("--ensemble", type=int, default=3, help="members of the --train-box model")
    ap.add_argument("--max-epochs", type=int, default=300, help="epochs of the --train-box model")
    args = ap.parse_args()
    try:
        run(args)
    except AutoshardError as e:
        raise SystemExit(f"error: {e}") from None


def run(args: argparse.Namespace) -> None:
    data = load_dataset(args.profile)
    records = list(data.records)
    if args.train_box:
        model, records = train_in_box(data, parse_box(args.train_box), args.ensemble, args.max_epochs)
        args.cost_model = f"trained inside {args.train_box}"
    else:
        # scored on a profile's records, nothing timed here: this host's hardware does not matter
        model = (LearnedCostModel.load(args.cost_model, allow_other_hardware=True) if args.cost_model
                 else default_cost_model())
    if not isinstance(model, LearnedCostModel) or not model.prices_fallback:
        raise SystemExit("error: this model records no support and fallback; use one trained since stop 14")
    measured = np.array([float(r.fwd_ms) + float(r.bwd_ms) for r in records])
    preds = {h: predict_records(model.with_handover(h), data.pool, records) for h in HANDOVERS}
    outside = preds["graded"].fallback
    print(f"host: {host_info().get('cpu', '?')}; model: {args.cost_model or 'shipped default'}; "
          f"{len(records)} devices, {int(outside.sum())} outside the support")
    held = (model.info.get("metrics") or {}).get("fwd+bwd") or {}
    auto = model.with_handover("auto").handover
    print(f"'auto' hand-over of this model: {auto} (networks' held-out fwd+bwd MAPE"
          f" {held.get('mape_pct', float('nan')):.1f}%, fallback's relative error "
          f"{100 * model.fallback_rel_std:.1f}%)")
    reasons = outside_reasons(model, data, [records[i] for i in np.flatnonzero(outside)])
    if reasons:
        print("outside because of: " + ", ".join(f"{k} ({v} devices)" for k, v in reasons.most_common()))
    print(f"{'devices':<8} {'n':>4}" + "".join(f"  {h + ' MAPE':>16} {'rho':>6}" for h in HANDOVERS))
    for label, mask in (("inside", ~outside), ("outside", outside), ("all", np.ones_like(outside))):
        if mask.sum() < 2:
            continue
        cols = [score(preds[h].mean[mask, :2].sum(axis=1), measured[mask]) for h in HANDOVERS]
        print(f"{label:<8} {int(mask.sum()):>4}" + "".join(f"  {c['mape_pct']:>15.1f}% {c['spearman']:>6.3f}"
                                                         for c in cols))


if __name__ == "__main__":
    main()
