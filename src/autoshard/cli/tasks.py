"""``autoshard tasks``: sample train/test sharding tasks from a table pool (DreamShard's "DLRM-T (D)" scheme).

The pool is split into disjoint train and test halves by ``--split-seed`` (the same for the train and the test
call, so the halves never share a table); each task then samples ``--num-tables`` tables of one half (or of
the whole pool with ``--split all``) onto ``--devices`` devices, drawn by ``--seed``.
"""

from __future__ import annotations

import argparse
import sys

from autoshard.cli.common import device_memory, positive_int

SPLITS = ("train", "test", "all")


def _non_negative_float(text: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number >= 0")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tasks", help="sample train/test sharding tasks from a table pool",
                       description=__doc__)
    p.add_argument("--tables", required=True, help="table pool (autoshard tables synth/from-trace)")
    p.add_argument("--num-tasks", type=positive_int, default=50,
                   help="tasks to sample (default 50, as DreamShard)")
    p.add_argument("--num-tables", type=positive_int, required=True, help="tables per task (T of DLRM-T (D))")
    p.add_argument("--devices", type=positive_int, required=True, help="devices per task (D of DLRM-T (D))")
    p.add_argument("--memory", default="5GB",
                   help="memory per device, e.g. 5GB (DreamShard), or one per device")
    p.add_argument("--split", choices=SPLITS, default="train", help="which half of the pool to sample from")
    p.add_argument("--split-seed", type=int, default=0,
                   help="seed of the train/test split of the pool; keep it equal for train and test")
    p.add_argument("--seed", type=int, default=0, help="seed of the task sampling")
    p.add_argument("--batch-size", type=positive_int, default=None,
                   help="per-device batch size of the kernels")
    p.add_argument("--precision", choices=("fp32", "fp16"), default="fp32", help="embedding weight precision")
    p.add_argument("--optimizer-bytes", type=_non_negative_float, default=0.0,
                   help="optimizer state bytes per weight element (0 for SGD, 4 for fp32 Adagrad)")
    p.add_argument("-o", "--output", required=True, help="tasks file to write")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from autoshard.io import format_bytes
    from autoshard.tables import Precision, TablePool
    from autoshard.tasks import DEFAULT_BATCH_SIZE, sample_tasks, save_tasks, split_pool

    pool = TablePool.load(args.tables)
    memory = device_memory(args.memory, args.devices)
    if args.split == "all":
        part = pool
    else:
        train, test = split_pool(pool, seed=args.split_seed)
        part = train if args.split == "train" else test
    batch = args.batch_size or DEFAULT_BATCH_SIZE
    tasks = sample_tasks(
        part, args.num_tasks, args.num_tables, memory, seed=args.seed, precision=Precision(args.precision),
        optimizer_bytes_per_element=args.optimizer_bytes, batch_size=batch,
        prefix=f"dlrm-{args.split}-T{args.num_tables}-D{args.devices}",
    )
    for task in tasks:
        task.check_fits()
    settings = {
        "scheme": "DreamShard DLRM-T (D)",
        "tables_file": args.tables,
        "pool_source": pool.source.get("generator", "unknown"),
        "split": args.split,
        "split_seed": args.split_seed,
        "split_pool": [t.name for t in part.tables],
        "seed": args.seed,
        "num_tasks": args.num_tasks,
        "num_tables": args.num_tables,
        "devices": args.devices,
        "device_memory": list(memory),
        "batch_size": batch,
        "precision": args.precision,
        "optimizer_bytes_per_element": args.optimizer_bytes,
    }
    save_tasks(args.output, tasks, settings)
    mem = format_bytes(memory[0]) if len(set(memory)) == 1 else ",".join(format_bytes(m) for m in memory)
    print(f"wrote {args.output}: {len(tasks)} {args.split} tasks of {args.num_tables} tables on "
          f"{args.devices} devices x {mem}, from {len(part.tables)} of {len(pool.tables)} pool tables "
          f"(split seed {args.split_seed})", file=sys.stdout)
    return 0
