"""``autoshard calibrate-tables``: correct a cost model by measured devices of your own tables, a level and a
factor per table name (``costs.table_calibration``); plan with it by ``autoshard plan --calibration FILE``.

The devices are a directory of timed devices of a fixed set of tables: ``autoshard adapt-cost``'s
``OUT/devices`` (adapt-cost also writes ``OUT/table_calibration.json`` itself), or ``autoshard profile`` of
your tables file. The report gives the error on devices the fit did not see (5 folds) before and after.

Measured (docs/benchmarks.md, "Stop 76"; Intel Xeon VM, DLRM-50 (8)): the shipped model calibrated on 546
devices adapt-cost timed on the ten tasks ranked their devices in another day's bench run with a within-task
Spearman of 0.916 against 0.883 (fine-tuning the network on such devices ranked them no better), but the
plans made with it, timed side by side with the shipped model's, were level (0.987-1.001). Compare on your
own tasks before you plan with it."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

SHOWN_FACTORS = 3
"""Tables listed at each end of the correction in the report."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate-tables",
                       help="correct a cost model by measured devices of your tables (a factor per table)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--devices", required=True,
                   help="directory of timed devices of your tables (adapt-cost's OUT/devices, or "
                        "'autoshard profile' of your tables file)")
    p.add_argument("--model", default=None,
                   help="learned checkpoint it corrects (default: the shipped model)")
    p.add_argument("--ridge", type=float, default=None,
                   help="ridge penalty on the table factors, in units of a share (default 1.0)")
    p.add_argument("-o", "--output", required=True, help="calibration file to write (JSON)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from autoshard.cli.costmodel import load_data
    from autoshard.costs.learned import LearnedCostModel
    from autoshard.costs.loading import SHIPPED_COST_MODEL
    from autoshard.costs.task_fit import DEFAULT_RIDGE
    from autoshard.errors import AutoshardError
    from autoshard.pipeline.cache import file_key
    from autoshard.pipeline.calibration import calibrate, held_out_error, record_devices

    ridge = DEFAULT_RIDGE if args.ridge is None else args.ridge
    if not ridge > 0:
        raise AutoshardError(f"--ridge {args.ridge}: give a positive number (default {DEFAULT_RIDGE})")
    spec = args.model or str(SHIPPED_COST_MODEL)
    if spec == "analytical" or not Path(spec).is_file():
        raise AutoshardError(f"--model {spec}: give a learned checkpoint file (train-cost, or the shipped "
                             "default)")
    data = load_data(args.devices)
    model = LearnedCostModel.load(spec, allow_other_hardware=True)  # the level is part of what it corrects
    samples = record_devices(data)
    calibration = calibrate(model, data, ridge, samples, model_path=spec, model_key=file_key(spec))
    fwd, bwd = (math.exp(x) for x in calibration.level)
    print(f"fitted on {calibration.devices} devices of {len(calibration.factors)} tables "
          f"({data.records[0].host.get('cpu', 'this host')}): level x{fwd:.3f} fwd, x{bwd:.3f} bwd")
    try:
        check = held_out_error(model, samples, ridge)
        print(f"on devices it did not see ({check['devices']}, 5 folds): fwd + bwd MAPE "
              f"{check['mape_before_pct']:.1f}% -> {check['mape_after_pct']:.1f}%, Spearman "
              f"{check['spearman_before']:.3f} -> {check['spearman_after']:.3f}")
    except AutoshardError as e:
        print(f"not checked on held-out devices: {e}")
    ranked = sorted(calibration.factors.items(), key=lambda kv: sum(kv[1]))
    ends = min(SHOWN_FACTORS, len(ranked) // 2)
    for label, part in (("priced too high", ranked[:ends]), ("priced too low", ranked[len(ranked) - ends:])):
        listed = ", ".join(f"{n} (log {f[0]:+.2f} fwd, {f[1]:+.2f} bwd)" for n, f in part)
        print(f"{label} by the model: {listed}")
    calibration.save(args.output)
    print(f"wrote {args.output}; plan with 'autoshard plan --calibration {args.output}"
          + (f" --cost-model {args.model}'" if args.model else "'"))
    return 0
