"""``autoshard verify``: run a plan in TorchRec's DistributedModelParallel on D processes, check the sharded
forward against the unsharded module and time training steps per rank.

On a CPU-only host all ranks share the same cores: the step times show the plan runs, not how fast it is on
one device per rank.
"""

from __future__ import annotations

import argparse
import sys

from autoshard.cli.common import device_memory, positive_int

UNCHECKED_MEMORY = 2**62
"""Per-device memory when --tables is given without --memory: the plan's memory use is then not checked."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="run a plan in TorchRec DMP on D processes and time it",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plan", required=True, help="plan file (autoshard plan -o ...)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--tables", help="tables file; the task is all its tables on the plan's devices")
    src.add_argument("--task", help="tasks file (autoshard tasks ...); see --task-index")
    p.add_argument("--task-index", type=int, default=0, help="which task of --task (default 0)")
    p.add_argument("--memory",
                   help="with --tables: memory per device to check the plan against (default: no check)")
    p.add_argument("--batch-size", type=positive_int, default=None,
                   help="with --tables: batch each device's kernels process (default 2048)")
    p.add_argument("--steps", type=positive_int, default=10, help="timed training steps (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds before the processes are stopped")
    p.add_argument("--rows-cap", type=int, default=None,
                   help="rows per table in the run, lookups folded mod the cap (default 100000; 0 = no cap)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cpu (gloo) or cuda (NCCL)")
    p.add_argument("--optimizer", default="exact_sgd",
                   help="fused optimizer: exact_sgd, exact_rowwise_adagrad or exact_adagrad")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the result here")
    p.set_defaults(func=run)


def _task(args: argparse.Namespace, num_devices: int):
    from autoshard.errors import AutoshardError
    from autoshard.tables import TablePool
    from autoshard.tasks import DEFAULT_BATCH_SIZE, Task, load_tasks

    if args.task:
        tasks = load_tasks(args.task)
        if not 0 <= args.task_index < len(tasks):
            raise AutoshardError(f"--task-index {args.task_index} out of range: "
                                 f"{args.task} has {len(tasks)} tasks")
        return tasks[args.task_index]
    pool = TablePool.load(args.tables)
    memory = device_memory(args.memory, num_devices) if args.memory else (UNCHECKED_MEMORY,) * num_devices
    return Task(tables=pool.tables, device_memory=memory, batch_size=args.batch_size or DEFAULT_BATCH_SIZE,
                name=args.tables)


def run(args: argparse.Namespace) -> int:
    from autoshard.errors import AutoshardError
    from autoshard.io import write_json
    from autoshard.plan import Plan, validate
    from autoshard.torchrec.verify import DEFAULT_ROWS_CAP, Optimizer, VerifySettings, verify_plan

    plan = Plan.load(args.plan)
    task = _task(args, plan.num_devices)
    validate(plan, task)
    try:
        optimizer = Optimizer(args.optimizer)
    except ValueError:
        raise AutoshardError(f"--optimizer {args.optimizer!r} unknown; use one of "
                             f"{', '.join(o.value for o in Optimizer)}") from None
    if args.rows_cap is not None and args.rows_cap < 0:
        raise AutoshardError(f"--rows-cap {args.rows_cap} must be >= 0 (0 = no cap)")
    rows_cap = DEFAULT_ROWS_CAP if args.rows_cap is None else (args.rows_cap or None)
    settings = VerifySettings(steps=args.steps, warmup=args.warmup, timeout_s=args.timeout, rows_cap=rows_cap,
                              device=args.device, optimizer=optimizer, seed=args.seed)
    result = verify_plan(plan, task, settings)
    print(f"verified plan by {plan.algorithm or '?'} on {task.num_devices} {args.device} processes: "
          f"local batch {result.local_batch} (kernels see {result.global_batch}), rows cap {rows_cap}")
    print(f"{'rank':>4} {'shards':>6} {'median ms':>10} {'mean ms':>9} {'max |diff|':>11}")
    for r in result.ranks:
        print(f"{r.rank:>4} {r.shards:>6} {r.median_ms:>10.3f} {r.mean_ms:>9.3f} {r.max_abs_diff:>11.3g}")
    print(f"step time (slowest rank, median): {result.max_step_ms:.3f} ms; sharded output "
          f"{'matches' if result.matches else 'DOES NOT match'} the unsharded module")
    if args.device == "cpu":
        print("note: CPU ranks share this host's cores, so step times show the plan runs, not its speed")
    if args.json:
        write_json(args.json, result.to_json())
        print(f"wrote {args.json}", file=sys.stderr)
    if not result.matches:
        print("autoshard: error: sharded forward differs from the unsharded module "
              "(or a rank holds other shards than the plan says)", file=sys.stderr)
        return 1
    return 0
