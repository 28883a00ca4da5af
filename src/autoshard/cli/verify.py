"""``autoshard verify``: run a plan in TorchRec's DistributedModelParallel on D processes, check the sharded
forward against the unsharded module and time training steps per rank.

On a CPU-only host all ranks share the same cores: the step times show the plan runs, not how fast it is on
one device per rank. ``--pin-cpus`` gives every rank a physical core of its own (an error where the host has
fewer than the plan's ranks); only then do CPU step times rank plans.

``--runtime autoshard`` runs the plan in autoshard's own runtime instead
(``autoshard.hardware.pooled_runtime``: pooled tables, exact SGD, gloo on CPU), which executes every plan
autoshard makes, uneven row-wise splits and data-parallel tables included, and checks every table's outputs
and trained weights against the unsharded computation: one line per table, exit 1 on a mismatch.
"""

from __future__ import annotations

import argparse
import sys

from autoshard.cli.common import device_memory, positive_int

UNCHECKED_MEMORY = 2**62
"""Per-device memory when --tables is given without --memory: the plan's memory use is then not checked."""

RUNTIMES = ("torchrec", "autoshard")
"""``--runtime``: TorchRec's DistributedModelParallel, or autoshard's own pooled runtime."""


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
    p.add_argument("--pin-cpus", action="store_true",
                   help="pin every CPU rank to a physical core of its own (needs a core per rank)")
    p.add_argument("--profile-steps", type=int, default=0,
                   help="after the timed steps, profile this many more (torch.profiler, CPU) and print each "
                        "rank's ops by self time per step: where the step's time goes (default 0: off)")
    p.add_argument("--profile-top", type=int, default=None,
                   help="with --profile-steps: ops each rank lists, by self time (default: "
                        "VerifySettings.profile_top, 15)")
    p.add_argument("--optimizer", default="exact_sgd",
                   help="fused optimizer: exact_sgd, exact_rowwise_adagrad or exact_adagrad")
    p.add_argument("--runtime", choices=RUNTIMES, default="torchrec",
                   help="torchrec: TorchRec DMP, timed (default); autoshard: autoshard's own runtime, which "
                        "runs any autoshard plan (uneven row splits, data_parallel) and checks every table")
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
    if args.runtime == "autoshard":
        if args.profile_steps:
            raise AutoshardError("--profile-steps profiles TorchRec DMP steps; drop it or use --runtime "
                                 "torchrec")
        if optimizer is not Optimizer.EXACT_SGD or args.device != "cpu":
            raise AutoshardError("--runtime autoshard trains with exact_sgd on CPU processes (gloo); drop "
                                 "--optimizer / --device cuda, or use --runtime torchrec")
        return _run_autoshard(args, plan, task, rows_cap, VerifySettings())
    settings = VerifySettings(steps=args.steps, warmup=args.warmup, timeout_s=args.timeout, rows_cap=rows_cap,
                              device=args.device, optimizer=optimizer, seed=args.seed, pin_cpus=args.pin_cpus,
                              profile_steps=args.profile_steps,
                              **({} if args.profile_top is None else {"profile_top": args.profile_top}))
    result = verify_plan(plan, task, settings)
    print(f"verified plan by {plan.algorithm or '?'} on {task.num_devices} {args.device} processes: "
          f"local batch {result.local_batch} (kernels see {result.global_batch}), rows cap {rows_cap}")
    print(f"{'rank':>4} {'shards':>6} {'median ms':>10} {'mean ms':>9} {'max |diff|':>11}")
    for r in result.ranks:
        print(f"{r.rank:>4} {r.shards:>6} {r.median_ms:>10.3f} {r.mean_ms:>9.3f} {r.max_abs_diff:>11.3g}")
    for r in result.ranks:
        if r.profile:
            print(f"rank {r.rank}: ops by self CPU time per profiled step ({args.profile_steps} steps, "
                  "torch.profiler)")
            for op in r.profile:
                print(f"  {op.self_ms:9.3f} ms  {op.calls:7.1f} calls  {op.name}")
    print(f"step time (slowest rank, median): {result.max_step_ms:.3f} ms; sharded output "
          f"{'matches' if result.matches else 'DOES NOT match'} the unsharded module")
    if args.device == "cpu" and not args.pin_cpus:
        print("note: CPU ranks share this host's cores, so step times show the plan runs, not its speed "
              "(--pin-cpus on a host with a core per rank)")
    if args.json:
        write_json(args.json, result.to_json())
        print(f"wrote {args.json}", file=sys.stderr)
    if not result.matches:
        print("autoshard: error: sharded forward differs from the unsharded module "
              "(or a rank holds other shards than the plan says)", file=sys.stderr)
        return 1
    return 0


def _run_autoshard(args: argparse.Namespace, plan, task, rows_cap: int | None, defaults) -> int:
    """``--runtime autoshard``: one line per table, OK or MISMATCH; 1 on a mismatch."""
    from autoshard.hardware.pooled_runtime import verify_pooled
    from autoshard.io import write_json

    result = verify_pooled(plan, task, rows_cap=rows_cap, steps=args.steps, lr=defaults.learning_rate,
                           seed=args.seed, atol=defaults.atol, rtol=defaults.rtol, timeout_s=args.timeout)
    print(f"ran plan by {plan.algorithm or '?'} in autoshard's runtime on {task.num_devices} cpu processes: "
          f"global batch {result.global_batch}, {result.steps} SGD steps, rows cap {rows_cap}")
    width = max(len(c.table) for c in result.checks)
    for c in result.checks:
        print(f"{c.table:<{width}} {c.sharding_type:<14} {'OK' if c.ok else 'MISMATCH':<8} "
              f"max |output diff| {c.max_output_diff:.3g}  max |weight diff| {c.max_weight_diff:.3g}")
    if args.json:
        write_json(args.json, result.to_json())
        print(f"wrote {args.json}", file=sys.stderr)
    bad = [c.table for c in result.checks if not c.ok]
    if bad:
        print(f"autoshard: error: {len(bad)} table(s) differ from the unsharded computation, e.g. {bad[0]}",
              file=sys.stderr)
        return 1
    print(f"all {len(result.checks)} tables match the unsharded computation")
    return 0
