"""``autoshard train-cost`` and ``autoshard eval-cost``: train the neural cost model on a profiled dataset
and score it (MAPE, RMSE, Spearman per head) on held-out unseen tables, with a predicted-vs-measured plot."""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path
from typing import Any

from autoshard.cli.common import positive_int


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train-cost", help="train the neural cost model on a profiled dataset",
                       description="Train the cost network on 'autoshard profile' records, "
                                   "holding out unseen tables.")
    p.add_argument("--data", required=True, help="profiling dataset directory (autoshard profile -o DIR)")
    p.add_argument("-o", "--output", default="costmodel.pt",
                   help="checkpoint to write (default costmodel.pt)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--test-tables", type=float, default=0.2,
                   help="share of tables held out; records touching them are the test set (default 0.2)")
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
    p.set_defaults(func=run_train)

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
    e.set_defaults(func=run_eval)


def load_data(path: str) -> Any:
    """The profiling dataset at ``path``, with one-line errors for a missing or empty directory."""
    from autoshard.errors import AutoshardError

    d = Path(path)
    if not d.is_dir():
        raise AutoshardError(f"{d}: no such dataset directory; create one with 'autoshard profile -o {d}'")
    if not any(d.glob("shards-*.jsonl")):
        raise AutoshardError(f"{d}: no shards-*.jsonl records; run 'autoshard profile -o {d}' first")
    from autoshard.hardware.profiler import load_dataset

    return load_dataset(str(d))


def print_metrics(metrics: dict[str, dict[str, float]], comm_source: str, out: Any = None) -> None:
    print(f"{'head':<22}{'MAPE %':>9}{'RMSE ms':>10}{'Spearman':>10}{'n':>7}", file=out)
    for head, m in metrics.items():
        print(f"{head:<22}{m['mape_pct']:>9.2f}{m['rmse_ms']:>10.3f}{m['spearman']:>10.4f}{m['n']:>7d}",
              file=out)
    print(f"{'comm':<22} from the dataset's alpha-beta model ({comm_source}), not learned", file=out)


def run_train(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from autoshard.costs.learned import CostNetConfig, LearnedCostModel, TrainOptions
    from autoshard.errors import AutoshardError

    if args.lr is not None and not 0.0 < args.lr < 1.0:
        raise AutoshardError(f"--lr {args.lr} must be in (0, 1)")
    if args.weight_decay is not None and not args.weight_decay >= 0.0:
        raise AutoshardError(f"--weight-decay {args.weight_decay} must be >= 0")
    config = CostNetConfig(hidden=args.hidden, embed=args.embed, target=args.target,
                           interaction=args.interaction,
                           additive=args.target == "log" and not args.no_additive,
                           table_mlp=not args.linear_table_cost)
    given = {"max_epochs": args.epochs, "patience": args.patience, "lr": args.lr,
             "weight_decay": args.weight_decay}
    options = TrainOptions(seed=args.seed, test_table_fraction=args.test_tables, refit=not args.no_refit,
                           batch_size=args.batch_size, config=config,
                           **{k: v for k, v in given.items() if v is not None})
    dataset = load_data(args.data)
    from autoshard.costs.learned.training import select_records

    select_records(dataset.records, options.batch_size)  # fail before the progress bar opens
    with tqdm(total=options.epoch_budget, desc="train-cost", unit="epoch", file=sys.stderr) as bar:
        def progress(epoch: int, h: dict[str, float]) -> None:
            bar.update(1)
            bar.set_postfix(loss=f"{h['train_loss']:.4f}", val_mape=f"{h['val_mape_pct']:.2f}%",
                            best=f"{h['best_val_mape_pct']:.2f}%")

        model = LearnedCostModel.fit(dataset, options, progress)
    model.save(args.output)
    split = model.info["split"]
    print(f"scored: trained on {split['train_records']} records ({len(split['train_tables'])} tables), "
          f"early-stopped at epoch {model.info['best_epoch']}; "
          f"held out {len(split['held_out_tables'])} tables "
          f"({split['test_records']} test records). Hardware: {model.describe_hardware()}")
    print_metrics(model.info["metrics"], model.comm.source)
    refit = model.info.get("refit")
    if refit:
        print(f"saved: refit on all {refit['train_records'] + refit['val_records']} records "
              f"({len(refit['train_tables'])} tables, early-stopped at epoch {refit['best_epoch']}); "
              "the errors "
              "above are of the network that did not see the held-out tables")
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
    print(f"held-out records: {len(records)} (tables unseen in training); model: {model.describe_hardware()}")
    print_metrics(result["metrics"], model.comm.source)
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
