"""``autoshard tables``: make table pools (synthetic, from a dlrm_datasets trace or from TorchRec
EmbeddingBagConfigs) and summarise them."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from autoshard.cli.common import positive_int


def dim_list(text: str) -> tuple[int, ...]:
    """'16' or '4,8,16,32,64,128' -> a tuple of positive dims."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f"{text!r}: give one dim or a comma list such as 4,8,16")
    return tuple(positive_int(p) for p in parts)


def name_value(text: str) -> tuple[str, float]:
    """'NAME=X' (X a finite number >= 0) -> (NAME, X)."""
    name, sep, value = text.rpartition("=")
    try:
        x = float(value)
    except ValueError:
        x = float("nan")
    if not sep or not name or not x >= 0 or x == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give NAME=X with X a number >= 0, e.g. user_id=2.5")
    return name, x


def non_negative(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = float("nan")
    if not x >= 0 or x == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a number >= 0")
    return x


def _add_dims(p: argparse.ArgumentParser, default: int) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--dim", type=positive_int, default=None,
                   help=f"one dim for every table (default {default})")
    g.add_argument("--dims", type=dim_list, default=None,
                   help="dims to choose from per table, seeded, e.g. 4,8,16,32,64,128 (NeuroShard)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tables", help="make or inspect table pools", description=__doc__)
    tsub = p.add_subparsers(dest="tables_command", metavar="SUBCOMMAND")

    s = tsub.add_parser("synth", help="synthetic DLRM-like pool matching the published trace statistics")
    s.add_argument("--num-tables", type=positive_int, required=True,
                   help="number of tables (856 as the trace)")
    s.add_argument("--seed", type=int, default=0, help="seed of every draw (same seed, same pool)")
    _add_dims(s, 16)
    s.add_argument("--stats-batch-size", type=positive_int, default=None,
                   help="batch the access bins are computed at (default 65536, the published one)")
    s.add_argument("-o", "--output", required=True, help="tables file to write")
    s.set_defaults(func=run_synth)

    t = tsub.add_parser("from-trace", help="one table per table of a dlrm_datasets trace (.pt or .pt.gz)")
    t.add_argument("trace", metavar="FILE", help="trace file: torch.save((indices, offsets, lengths))")
    _add_dims(t, 16)
    t.add_argument("--seed", type=int, default=0, help="seed of the per-table dim choice (with --dims)")
    t.add_argument("-o", "--output", required=True, help="tables file to write")
    t.set_defaults(func=run_from_trace)

    c = tsub.add_parser(
        "from-torchrec", help="one table per TorchRec EmbeddingBagConfig (JSON file or Python module)",
        description="Tables from TorchRec EmbeddingBagConfigs. CONFIGS is a JSON file (a list of objects "
                    "with name, num_embeddings, embedding_dim and optionally feature_names, pooling (mean "
                    "ids per sample), alpha (skew exponent); or {\"tables\": [...]}) or a Python attribute "
                    "package.module:NAME or path/to/file.py:NAME holding a list of EmbeddingBagConfig (or "
                    "dicts, or an EmbeddingBagCollection). A module path IMPORTS and so runs that code: "
                    "only give code you trust. Missing pooling: --default-pooling ids per feature (1.0, "
                    "one-hot); missing alpha: a power law of alpha 0.7 over a bounded vocabulary (see "
                    "autoshard.tables.lookups.DEFAULT_ALPHA); both logged as warnings.")
    c.add_argument("configs", metavar="CONFIGS",
                   help="JSON file, or package.module:NAME / path/to/file.py:NAME (imports that code)")
    c.add_argument("--pooling", type=name_value, action="append", default=[], metavar="NAME=X",
                   help="mean ids per sample of table NAME (repeatable); overrides CONFIGS")
    c.add_argument("--alpha", type=name_value, action="append", default=[], metavar="NAME=X",
                   help="power-law skew exponent of table NAME's lookups (repeatable); overrides CONFIGS")
    c.add_argument("--default-pooling", type=non_negative, default=None, metavar="X",
                   help="ids per sample per feature of tables with no pooling (default 1.0: one-hot)")
    c.add_argument("--stats-batch-size", type=positive_int, default=None,
                   help="batch the access bins are computed at (default 65536, the published one)")
    c.add_argument("-o", "--output", required=True, help="tables file to write")
    c.set_defaults(func=run_from_torchrec)

    w = tsub.add_parser("show", help="summarise a tables file")
    w.add_argument("file", metavar="FILE",
                   help="tables file (autoshard tables synth/from-trace/from-torchrec)")
    w.set_defaults(func=run_show)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _dims(args: argparse.Namespace, default: int) -> tuple[int, ...]:
    return args.dims if args.dims else (args.dim if args.dim else default,)


def _bar(total: int, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="table", file=sys.stderr, leave=False, disable=None)


def _summary(pool) -> str:
    import numpy as np

    from autoshard.io import format_bytes

    rows = np.mean([t.rows for t in pool.tables])
    pooling = np.mean([t.pooling_factor for t in pool.tables])
    size = np.mean([t.size_bytes() for t in pool.tables])
    dims = sorted({t.dim for t in pool.tables})
    rows_text = f"{rows / 1e6:.2f}M" if rows >= 1e5 else f"{rows:.0f}"
    return (f"{len(pool.tables)} tables, dims {dims}, mean rows {rows_text}, mean pooling {pooling:.2f}, "
            f"mean size {format_bytes(size)} (fp32)")


def run_synth(args: argparse.Namespace) -> int:
    from autoshard.tables.synth import STATS_BATCH_SIZE, synthesize_pool

    batch = args.stats_batch_size or STATS_BATCH_SIZE
    start = time.perf_counter()
    # finished tables go to a checkpoint next to the output, so an interrupted run resumes where it stopped
    checkpoint = Path(args.output).with_name(Path(args.output).name + ".partial.jsonl")
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    with _bar(args.num_tables, "synth") as bar:
        pool = synthesize_pool(args.num_tables, args.seed, dims=_dims(args, 16), stats_batch_size=batch,
                               progress=lambda k: bar.update(k - bar.n), checkpoint=str(checkpoint))
    pool.save(args.output)
    checkpoint.unlink(missing_ok=True)
    print(f"wrote {args.output}: {_summary(pool)}, bins at batch {batch} "
          f"({time.perf_counter() - start:.1f} s)")
    return 0


def run_from_trace(args: argparse.Namespace) -> int:
    from autoshard.tables.trace import DEFAULT_TRACE_DIM, trace_pool
    from autoshard.tables.trace_file import load_trace

    start = time.perf_counter()
    trace = load_trace(args.trace)
    with _bar(trace.num_tables, "from-trace") as bar:
        pool = trace_pool(args.trace, dims=_dims(args, DEFAULT_TRACE_DIM), seed=args.seed,
                          progress=lambda k: bar.update(k - bar.n))
    pool.save(args.output)
    empty = len(pool.source.get("empty_tables", []))
    print(f"wrote {args.output}: {_summary(pool)}, batch {trace.batch_size}, {empty} tables without lookups "
          f"({time.perf_counter() - start:.1f} s)")
    return 0


def _overrides(pairs: list[tuple[str, float]], flag: str) -> dict[str, float]:
    from autoshard.errors import AutoshardError

    out: dict[str, float] = {}
    for name, x in pairs:
        if name in out:
            raise AutoshardError(f"{flag} gives table {name!r} twice; give each table once")
        out[name] = x
    return out


def run_from_torchrec(args: argparse.Namespace) -> int:
    from autoshard.tables.configs import load_configs, pool_from_configs
    from autoshard.tables.synth import STATS_BATCH_SIZE

    start = time.perf_counter()
    batch = args.stats_batch_size or STATS_BATCH_SIZE
    pool = pool_from_configs(load_configs(args.configs), pooling=_overrides(args.pooling, "--pooling"),
                             skew=_overrides(args.alpha, "--alpha"), default_pooling=args.default_pooling,
                             stats_batch_size=batch, origin=args.configs)
    pool.save(args.output)
    pooled, skewed = (len(pool.source[k]) for k in ("default_pooling_tables", "default_alpha_tables"))
    print(f"wrote {args.output}: {_summary(pool)}, bins at batch {batch}; default pooling for {pooled}, "
          f"default alpha for {skewed} tables ({time.perf_counter() - start:.1f} s)")
    return 0


def run_show(args: argparse.Namespace) -> int:
    import numpy as np

    from autoshard.tables import TablePool

    pool = TablePool.load(args.file)
    bins = np.mean([t.access_bins for t in pool.tables], axis=0)
    empty = sum(1 for t in pool.tables if t.pooling_factor == 0)
    src = pool.source
    origin = src.get("generator", "unknown")
    if "trace_path" in src:
        origin += f" {src['trace_path']}"
    elif src.get("configs"):
        origin += f" {src['configs']}"
    elif isinstance(src.get("config"), dict):  # the synthetic generator's settings
        cfg = src["config"]
        origin += f" seed {cfg.get('seed')}, bins at batch {cfg.get('stats_batch_size')}"
    print(f"{args.file}: {_summary(pool)}, {empty} without lookups; from {origin}")
    print("mean access bins: " + " ".join(f"{b:.3f}" for b in bins))
    return 0
