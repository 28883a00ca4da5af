"""``autoshard train-cost`` and ``autoshard eval-cost``: train the neural cost model (one network or an
ensemble) on a profiled dataset and score it (MAPE, RMSE, Spearman per head, the ensemble's coverage of the
measurements, the share of devices outside its training support) on held-out unseen tables, with a
predicted-vs-measured plot; eval-cost also chooses the model's risk factor (``risk_k``: the smallest k whose
mean + k x spread covers 84% of held-out devices) and records it in the checkpoint; the planners plan at the
mean unless ``--option risk=K`` (stops 59-61)."""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Any

from autoshard.cli.common import positive_int, record_bar


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train-cost", help="train the neural cost model on a profiled dataset",
                       description="Train the cost network on 'autoshard profile' records, "
                                   "holding out unseen tables.")
    p.add_argument("--data", required=True, action="append",
                   help="profiling dataset directory (autoshard profile -o DIR); repeat it to train on "
                        "several profiles of this machine (the broad profile and one of row-cut samples)")
    p.add_argument("-o", "--output", default="costmodel.pt",
                   help="checkpoint to write (default costmodel.pt)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--test-fraction", "--test-tables", dest="test_fraction", type=float, default=0.2,
                   help="share of the records held out to score the model, as whole tables the scored "
                        "network never sees (default 0.2)")
    p.add_argument("--batch-size", type=positive_int, help="use the records of this kernel batch size")
    # None: TrainOptions' default (training.py imports torch, which the CLI loads only inside handlers)
    p.add_argument("--epochs", type=positive_int, help="most epochs (default 800)")
    p.add_argument("--patience", type=positive_int, help="early-stopping patience in epochs (default 100)")
    p.add_argument("--lr", type=float, help="Adam learning rate (default 1e-2)")
    p.add_argument("--weight-decay", type=float, help="Adam L2 penalty (default 1e-3)")
    p.add_argument("--no-refit", action="store_true",
                   help="save the network scored on the held-out tables instead of refitting it on all "
                        "records")
    p.add_argument("--linear-table-cost", action="store_true",
                   help="per-table cost from the linear term alone (no per-table MLP); "
                        "see CostNetConfig.table_mlp")
    p.add_argument("--hidden", type=positive_int, default=128)
    p.add_argument("--embed", type=positive_int, default=32)
    p.add_argument("--target", choices=["log", "linear"], default="log",
                   help="predict log-ms (default) or ms")
    p.add_argument("--interaction", action="store_true", help="add the pairwise per-device interaction term")
    p.add_argument("--no-additive", action="store_true", help="drop the additive log-sum head (log target)")
    p.add_argument("--ensemble", type=positive_int, default=1,
                   help="networks to train, each on a bootstrap of the records from its own seed; the model "
                        "predicts their mean and reports their spread (default 1; 5 recommended)")
    p.add_argument("--no-fallback", action="store_true",
                   help="let the networks price devices outside the training support too (default: the "
                        "analytical model calibrated on the same records prices them)")
    p.add_argument("--context", choices=["auto", "on", "off"], default="auto",
                   help="give the network each device's batch size and precision, so one model spans them "
                        "(auto: on when the records mix batch sizes or precisions, as --design broad does)")
    p.add_argument("--working-set", choices=["auto", "on", "off"], default="auto",
                   help="also give a context network each shard's working set at its batch (distinct rows "
                        "touched and their bytes, from the access bins; auto: on with --context)")
    p.add_argument("--density", choices=["on", "off"], default="off",
                   help="also give a working-set network how thinly each shard's batch is spread over the "
                        "rows it is timed with (the share touched and their bytes; default off, as in the "
                        "shipped model)")
    p.add_argument("--kernel-groups", choices=["auto", "on", "off"], default="auto",
                   help="add a learned cost per distinct shard dim on a device, which the torch backend runs "
                        "as its own kernels (auto: on when the records were timed with --backend torch)")
    p.set_defaults(func=run_train)

    f = sub.add_parser("fine-tune-cost",
                       help="fine-tune a trained cost model (e.g. the shipped default) on your own devices",
                       description="Continue a trained model's training on 'autoshard profile' records of "
                                   "your tables on this machine: each ensemble member keeps the epoch with "
                                   "the lowest error on a held-back share of the records (its starting "
                                   "weights included).")
    f.add_argument("--model", required=True, help="checkpoint to start from (train-cost, or the default)")
    f.add_argument("--data", required=True, help="profiling dataset directory (autoshard profile -o DIR)")
    f.add_argument("-o", "--output", required=True, help="where to write the fine-tuned checkpoint")
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--epochs", type=positive_int, help="most epochs per member (default 200)")
    f.add_argument("--patience", type=positive_int, help="early-stopping patience in epochs (default 30)")
    f.add_argument("--lr", type=float, help="Adam learning rate (default 1e-3)")
    f.add_argument("--adapt-hardware", action="store_true",
                   help="the records are of another machine than the model's (e.g. your GPU, the shipped "
                        "CPU model): scale the model to their level, fine-tune it, and save it as a model of "
                        "that machine")
    f.set_defaults(func=run_fine_tune)

    c = sub.add_parser("calibrate-cost",
                       help="scale a trained cost model (e.g. the shipped default) to this machine's speed",
                       description="Re-time a few records of the profile the model was trained on, with the "
                                   "settings they were recorded with, and multiply the model's forward and "
                                   "backward predictions by this machine's geometric-mean ratio to the "
                                   "profile's (one factor each; fine-tune-cost learns more than a factor).")
    c.add_argument("--model", required=True, help="checkpoint to calibrate (train-cost, or the default)")
    c.add_argument("--data", required=True,
                   help="the profile the model was trained on (the default's: profiles/<cpu>/broad-seed0)")
    c.add_argument("-o", "--output", required=True, help="where to write the calibrated checkpoint")
    # host_calibration's DEFAULT_RECORDS / DEFAULT_MAX_MS, written out so the CLI starts without torch (a
    # test keeps them equal)
    c.add_argument("--records", type=positive_int, default=16,
                   help="records to re-time, spread over the profile's cost range (default 16)")
    c.add_argument("--max-ms", type=float, default=200.0,
                   help="leave out records whose recorded fwd+bwd is above this (default 200)")
    c.set_defaults(func=run_calibrate)

    e = sub.add_parser("eval-cost",
                       help="score a cost model on held-out records and plot predicted vs measured",
                       description="MAPE, RMSE and Spearman per head on records with tables the model "
                                   "never saw.")
    e.add_argument("--model", required=True, help="checkpoint from train-cost")
    e.add_argument("--data", required=True, help="profiling dataset directory")
    e.add_argument("--plot", help="scatter PNG to write (default: next to the model, <model>-scatter.png)")
    e.add_argument("--seed", type=int, default=0, help="seed of the random 4-device plan groupings")
    e.add_argument("--allow-other-hardware", action="store_true",
                   help="use a model trained on other hardware / batch size anyway")
    e.add_argument("--no-record-risk", action="store_true",
                   help="do not write the risk factor chosen here into the checkpoint (risk_k)")
    e.set_defaults(func=run_eval)


def load_data(path: str) -> Any:
    """The profiling dataset at ``path``, with one-line errors for a missing or empty directory."""
    from autoshard.errors import AutoshardError

    d = Path(path)
    if not d.is_dir():
        raise AutoshardError(f"{d}: no such dataset directory; create one with 'autoshard profile -o {d}'")
    from autoshard.hardware.profiler import load_dataset, record_files

    if not record_files(d):
        raise AutoshardError(f"{d}: no shards-*.jsonl or packed records; "
                             f"run 'autoshard profile -o {d}' first")

    return load_dataset(str(d))


def print_metrics(metrics: dict[str, dict[str, float]], comm_source: str, out: Any = None) -> None:
    print(f"{'head':<22}{'MAPE %':>9}{'RMSE ms':>10}{'Spearman':>10}{'n':>7}", file=out)
    for head, m in metrics.items():
        print(f"{head:<22}{m['mape_pct']:>9.2f}{m['rmse_ms']:>10.3f}{m['spearman']:>10.4f}{m['n']:>7d}",
              file=out)
    print(f"{'comm':<22} from the dataset's alpha-beta model ({comm_source}), not learned", file=out)


def print_uncertainty(held: dict[str, Any], ensemble: int, out: Any = None) -> None:
    """The ensemble's coverage of held-out measurements, the out-of-support share and the chosen risk_k."""
    cov = ", ".join(f"{k} {100 * v:.1f}%" for k, v in held["coverage"].items())
    print(f"coverage of held-out fwd+bwd by mean + k x spread ({held['n']} devices, ensemble of {ensemble}): "
          f"{cov}", file=out)
    print(f"out of support (priced by the graded hand-over to the calibrated analytical model): "
          f"{100 * held['out_of_support_share']:.1f}% of held-out devices", file=out)
    from autoshard.costs.learned.evaluation import RISK_COVERAGE

    print(f"risk_k {held['risk_k']:.3f}: the smallest k whose mean + k x spread covers "
          f"{100 * RISK_COVERAGE:.0f}% of held-out devices", file=out)


def run_train(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from autoshard.costs.learned import CostNetConfig, LearnedCostModel, TrainOptions
    from autoshard.errors import AutoshardError

    if args.lr is not None and not 0.0 < args.lr < 1.0:
        raise AutoshardError(f"--lr {args.lr} must be in (0, 1)")
    if args.weight_decay is not None and not args.weight_decay >= 0.0:
        raise AutoshardError(f"--weight-decay {args.weight_decay} must be >= 0")
    from autoshard.hardware.profile_dataset import level_joining, merge_datasets

    datasets = [load_data(d) for d in args.data]
    if len(datasets) > 1:
        for data, name in zip(datasets, args.data):
            level = level_joining(data, name, args.data)
            if level is not None:
                print(f"{name}: its records join at {level.reference}'s speed (forward / {level.fwd:.3f}, "
                      f"backward / {level.bwd:.3f}: its level.json)", file=sys.stderr)
    dataset = merge_datasets(datasets, args.data)
    from autoshard.costs.learned.fit import check_one_machine
    from autoshard.costs.learned.training import record_precision, select_records

    if args.context == "auto":
        chosen = [r for r in dataset.records if args.batch_size is None or r.batch_size == args.batch_size]
        context = (len({int(r.batch_size) for r in chosen}) > 1
                   or len({record_precision(r) for r in chosen}) > 1)
    else:
        context = args.context == "on"
    additive = args.target == "log" and not args.no_additive
    if args.kernel_groups == "auto":
        kernel_groups = additive and any(r.settings.get("backend") == "torch" for r in dataset.records)
    else:
        kernel_groups = args.kernel_groups == "on"
    config = CostNetConfig(hidden=args.hidden, embed=args.embed, target=args.target,
                           interaction=args.interaction, additive=additive,
                           table_mlp=not args.linear_table_cost, context=context,
                           reuse=context if args.working_set == "auto" else args.working_set == "on",
                           density=args.density == "on", kernel_groups=kernel_groups)
    given = {"max_epochs": args.epochs, "patience": args.patience, "lr": args.lr,
             "weight_decay": args.weight_decay}
    options = TrainOptions(seed=args.seed, test_fraction=args.test_fraction, refit=not args.no_refit,
                           batch_size=args.batch_size, config=config, ensemble=args.ensemble,
                           fallback=not args.no_fallback,
                           **{k: v for k, v in given.items() if v is not None})
    # fail before the progress bar opens
    check_one_machine(select_records(dataset.records, options.batch_size, context)[0])
    with tqdm(total=options.epoch_budget, desc="train-cost", unit="epoch", file=sys.stderr) as bar:
        def progress(epoch: int, h: dict[str, float]) -> None:
            bar.update(1)
            bar.set_postfix(loss=f"{h['train_loss']:.4f}", val_mape=f"{h['val_mape_pct']:.2f}%",
                            best=f"{h['best_val_mape_pct']:.2f}%")

        model = LearnedCostModel.fit(dataset, options, progress)
    model.save(args.output)
    split = model.info["split"]
    seen = (f"{len(split['train_tables'])} tables" if "train_tables" in split
            else "tables generated per sample")
    held = (f"held out {len(split['held_out_tables'])} tables" if "train_tables" in split
            else "held out the records")
    print(f"scored: trained on {split['train_records']} records ({seen}), "
          f"early-stopped at epoch {model.info['best_epoch']}; {held} "
          f"({split['test_records']} test records). Hardware: {model.describe_hardware()}")
    print_metrics(model.info["metrics"], model.comm.source)
    print_uncertainty(model.info["held_out"], model.ensemble_size)
    if config.kernel_groups:
        print("kernel groups: on (a learned cost per distinct shard dim on a device, which the torch backend "
              "runs as its own kernels; --kernel-groups off leaves it out)")
    refit = model.info.get("refit")
    if refit:
        seen = (f"{len(refit['train_tables'])} tables" if "train_tables" in refit
                else f"{len(refit['train_samples'])} samples")
        print(f"saved: refit on all {refit['train_records'] + refit['val_records']} records "
              f"({seen}, early-stopped at epoch {refit['best_epoch']}); the errors above are of the "
              f"network{'s' if model.ensemble_size > 1 else ''} that did not see the held-out records")
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def run_fine_tune(args: argparse.Namespace) -> int:
    from autoshard.costs.learned import LearnedCostModel
    from autoshard.costs.learned.fine_tune import FineTuneOptions, fine_tune
    from autoshard.errors import AutoshardError

    if args.lr is not None and not 0.0 < args.lr < 1.0:
        raise AutoshardError(f"--lr {args.lr} must be in (0, 1)")
    if args.model == "analytical":
        raise AutoshardError(f"--model {args.model} is not a learned cost model checkpoint; "
                             "give one from train-cost or the shipped default")
    model = LearnedCostModel.load(args.model, allow_other_hardware=args.adapt_hardware)
    dataset = load_data(args.data)
    given = {"max_epochs": args.epochs, "patience": args.patience, "lr": args.lr}
    options = FineTuneOptions(seed=args.seed, **{k: v for k, v in given.items() if v is not None})
    tuned = fine_tune(model, dataset, options, adapt_hardware=args.adapt_hardware)
    tuned.save(args.output)
    info = tuned.info["fine_tuned"]
    adapted = info.get("adapted_from")
    if adapted:
        print(f"adapted to {tuned.describe_hardware()}: level x{adapted['fwd_scale']:.3g} forward, "
              f"x{adapted['bwd_scale']:.3g} backward (fwd+bwd MAPE on the held-back records "
              f"{info['val_mape_pct_scaled']:.1f}% scaled, before fine-tuning)")
    elif args.adapt_hardware:
        print("the records are of the model's own machine: nothing to adapt, fine-tuned as usual")
    print(f"fine-tuned on {info['records']} records ({info['val_records']} held back): fwd+bwd MAPE on "
          f"those {info['val_mape_pct_before']:.1f}% -> {info['val_mape_pct_after']:.1f}%; epochs kept per "
          f"member {info['epochs']}; risk_k {tuned.risk_k:.2f}")
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def run_calibrate(args: argparse.Namespace) -> int:
    from autoshard.costs.learned import LearnedCostModel
    from autoshard.costs.loading import load_cost_model
    from autoshard.errors import AutoshardError
    from autoshard.hardware.host_calibration import calibrate, pick_records
    from autoshard.host import hardware_difference, host_info

    # another CPU's model is what this command exists for: it re-times that model's own records here
    model = load_cost_model(args.model, allow_other_hardware=True)
    if not isinstance(model, LearnedCostModel):
        raise AutoshardError(f"--model {args.model} is not a learned cost model checkpoint; "
                             "give one from train-cost or the shipped default")
    trained, here = model.trained_on.get("host") or {}, host_info()
    differs = hardware_difference(trained, here)  # what a model load refuses other hardware by
    if differs:
        # measured (docs/benchmarks.md, "Stop 45"): the AMD-trained default on the Intel VM prices dim-16 DLRM
        # devices 1.03-1.18x low and production-40-8's wide ones 1.59x low, so one factor fixes one suite and
        # moves the other off
        print(f"the model was trained on {trained[differs]!r}, this host is {here[differs]!r} ({differs}): "
              "other hardware moves different tables differently, and this gives one factor per part "
              "(forward, backward); fine-tune-cost --adapt-hardware on devices timed here learns more than a "
              "factor")
    dataset = load_data(args.data)
    records = pick_records(dataset, args.data, args.records, args.max_ms)  # fail before the bar opens
    with record_bar(len(records), "calibrate-cost") as progress:
        calibrated, scale, timings = calibrate(model, dataset, args.data, records, progress)
    took = sum(t.seconds for t in timings)
    print(f"{scale.describe()}; {took:.0f} s of timing")
    calibrated.save(args.output)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from autoshard.costs.learned import LearnedCostModel
    from autoshard.costs.learned.evaluation import evaluate, held_out_records
    from autoshard.errors import AutoshardError
    from autoshard.io import atomic_write_bytes

    model = LearnedCostModel.load(args.model, allow_other_hardware=args.allow_other_hardware)
    dataset = load_data(args.data)
    records = held_out_records(model, dataset.records)
    if not records:
        raise AutoshardError(f"{args.data} has no records with tables the model did not train on (at batch "
                             f"{model.trained_on.get('batch_size')}); "
                             "evaluate on its training dataset or new tables")
    result = evaluate(model, dataset.pool, records, seed=args.seed)
    unseen = "samples" if "train_samples" in (model.info.get("refit") or model.info.get("split", {})) \
        else "tables"
    print(f"held-out records: {len(records)} ({unseen} unseen in training); "
          f"model: {model.describe_hardware()}")
    print_metrics(result["metrics"], model.comm.source)
    print_uncertainty(result, model.ensemble_size)
    if not args.no_record_risk and model.has_spread:
        chosen = model.with_risk_k(result["risk_k"])
        chosen.info["risk"] = {"risk_k": result["risk_k"], "data": str(args.data), "n": result["n"],
                               "coverage": result["coverage"],
                               "out_of_support_share": result["out_of_support_share"]}
        chosen.save(args.model)
        print(f"recorded risk_k {result['risk_k']:.3f} in {args.model} (mean + risk_k x spread prices the "
              f"plan report; planners plan at the mean unless --option risk={result['risk_k']:.2f})")
    plot = args.plot or str(Path(args.model).with_suffix("")) + "-scatter.png"
    atomic_write_bytes(plot, scatter_png(result["pairs"], result["metrics"]))
    print(f"wrote {plot}", file=sys.stderr)
    return 0


def scatter_png(pairs: dict[str, tuple[Any, Any]], metrics: dict[str, dict[str, float]]) -> bytes:
    """Predicted vs measured, one log-log panel per head, with the y = x line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, len(pairs), figsize=(4 * len(pairs), 4), squeeze=False)
    for ax, (head, (pred, true)) in zip(axes[0], pairs.items()):
        lo = float(min(np.min(pred), np.min(true))) * 0.8
        hi = float(max(np.max(pred), np.max(true))) * 1.25
        ax.scatter(true, pred, s=8, alpha=0.6)
        ax.plot([lo, hi], [lo, hi], "k--", lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured ms")
        ax.set_ylabel("predicted ms")
        m = metrics[head]
        ax.set_title(f"{head}\nMAPE {m['mape_pct']:.1f}%  Spearman {m['spearman']:.3f}", fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()
