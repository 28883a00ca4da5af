"""``autoshard adapt-cost``: DreamShard's loop on your own tasks, on the machine you train on.

Each round the guard heuristics and the learned planners (search, neuroshard, ilp; rl with ``--policy``) plan
the tasks with the current model, every device of their plans is timed on this machine's kernels (kept in
``OUT/devices/``, each distinct device once) and the starting model is fine-tuned on all of them
(``costs.learned.fine_tune``; a model of other hardware is first scaled to this one). ``OUT/cost_model.pt`` is
the adapted model (``autoshard plan --cost-model OUT/cost_model.pt``), ``OUT/table_calibration.json`` the
starting model corrected per table by the same devices (``autoshard plan --calibration``; ``autoshard
calibrate-tables``), ``OUT/rounds.json`` the per-round table
(the model's error on the learned planners' devices before it saw them, each learned planner's measured step
over the best heuristic's, collectives modelled). Interrupted, it resumes after its last finished round,
timing nothing twice. The same loop runs in ``autoshard bench --refresh-rounds``.

Measured (docs/benchmarks.md, "Stop 75"; Intel Xeon VM, DLRM-50 (8)): adapted on five of the tasks, the
shipped model's plans of all ten, timed side by side with the adapted model's, were as good or better (rl and
search resolved better, 1.9% and 2.9%): it ranked the devices no better after tuning and priced devices of
1-2 tables high against those of 6-9. Its table calibration ranked the devices better, and the plans made
with it were level with the shipped model's (stop 76). Compare on your own tasks before you plan with
either."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autoshard.cli.common import ProgressBars, add_device_args, positive_int
from autoshard.cli.plan import devices_spec, load_task

CALIBRATION_FILE = "table_calibration.json"
"""The starting model's table calibration on every device the loop timed (``autoshard calibrate-tables``)."""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("adapt-cost",
                       help="adapt a cost model to this machine on your own tasks' planned devices "
                            "(DreamShard's loop)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--tables", help="tables file; all its tables form one task (with --devices)")
    src.add_argument("--task", help="tasks file (autoshard tasks ...); its first --tasks tasks")
    p.add_argument("--tasks", type=positive_int, metavar="N",
                   help="with --task: how many of its tasks, from the first (default all)")
    p.add_argument("--devices", type=devices_spec,
                   help="devices with --tables: a count (8) or HOSTSxLOCAL (2x4)")
    p.add_argument("--memory", default=None, help="memory per device with --tables (default 5GB)")
    p.add_argument("--batch-size", type=positive_int, default=None, help="per-device batch with --tables")
    p.add_argument("--model", default=None,
                   help="learned checkpoint to start from (default: the shipped model)")
    p.add_argument("--policy", help="trained policy checkpoint: rl plans too (not retrained)")
    p.add_argument("--comm", help="all-to-all fit the planners and the rounds' steps use (comm_model.json "
                                  "from 'autoshard profile-comm'; default: the model's own)")
    p.add_argument("--rounds", type=positive_int, default=2,
                   help="plan -> time -> fine-tune rounds (default 2)")
    p.add_argument("--budget", type=float, default=3600.0, metavar="SECONDS",
                   help="no round starts after this many seconds (default 3600)")
    p.add_argument("--time-limit", type=float, default=10.0, help="searching planners' seconds per task")
    p.add_argument("--seed", type=int, default=0)
    add_device_args(p)
    p.add_argument("-o", "--output", required=True, help="output directory (resumed if it holds a run)")
    p.set_defaults(func=run)


def load_tasks_arg(args: argparse.Namespace) -> list:
    """The tasks to adapt on: the first ``--tasks`` of ``--task``, or ``--tables`` on ``--devices`` (as
    ``autoshard plan`` reads them)."""
    from autoshard.errors import AutoshardError
    from autoshard.tasks import load_tasks

    if args.task:
        tasks = load_tasks(args.task)
        return tasks[:args.tasks] if args.tasks else tasks
    if not args.tables:
        raise AutoshardError("give --task FILE, or --tables FILE with --devices N")
    return [load_task(args)]


def run(args: argparse.Namespace) -> int:
    from autoshard.cli.common import check_backend, check_device
    from autoshard.costs.comm import AlphaBeta
    from autoshard.costs.learned import LearnedCostModel
    from autoshard.costs.learned.fine_tune import FineTuneOptions, fine_tune
    from autoshard.costs.loading import SHIPPED_COST_MODEL
    from autoshard.errors import AutoshardError
    from autoshard.hardware.kernel import MeasureSettings
    from autoshard.hardware.profile_dataset import load_dataset
    from autoshard.pipeline.cache import file_key
    from autoshard.pipeline.calibration import calibrate
    from autoshard.pipeline.refresh_stage import LoopSettings, describe_round, device_recorder, loop_rounds
    from autoshard.planners.guard import GUARDED
    from autoshard.planners.rl.policy import TrainedPolicy
    from autoshard.tables import TablePool

    if args.time_limit <= 0 or args.budget <= 0:
        raise AutoshardError("--time-limit and --budget must be positive seconds")
    check_device(args.device)
    check_backend(args.backend)
    tasks = load_tasks_arg(args)
    if not tasks:
        raise AutoshardError(f"{args.task} has no tasks")
    spec = args.model or str(SHIPPED_COST_MODEL)
    if spec == "analytical" or not Path(spec).is_file():
        raise AutoshardError(f"--model {spec}: give a learned checkpoint file (train-cost, or the shipped "
                             "default)")
    if args.policy and not Path(args.policy).is_file():
        raise AutoshardError(f"--policy {args.policy}: no such file")
    if args.policy:
        TrainedPolicy.load(args.policy)  # a broken policy fails here, not as rl missing from every round
    base = LearnedCostModel.load(spec, allow_other_hardware=True)  # adapting other hardware is the point
    comm = AlphaBeta.load(args.comm) if args.comm else base.comm
    tables: dict = {}
    for task in tasks:
        for t in task.tables:
            if tables.setdefault(t.name, t) != t:
                raise AutoshardError(f"table {t.name!r} differs between the tasks of {args.task}; give tasks "
                                     "whose tables of one name are one table")
    out = Path(args.output)
    settings = MeasureSettings(device=args.device, backend=args.backend)
    recorder = device_recorder(out / "devices", TablePool.from_tables(list(tables.values())), settings)

    def refit(grown):
        return fine_tune(base, grown, FineTuneOptions(seed=args.seed), adapt_hardware=True)

    learned = tuple(a for a in GUARDED if a != "rl" or args.policy)
    loop = LoopSettings(rounds=args.rounds, budget_s=args.budget, seed=args.seed,
                        time_limit_s=args.time_limit, learned=learned)
    bars = ProgressBars()
    try:
        rows = loop_rounds(lambda _: tasks, out, base, recorder, refit, loop, comm, policy_path=args.policy,
                           resume=True, say=lambda line: print(line, file=sys.stderr, flush=True),
                           progress=bars)
    finally:
        bars.close()
    if not rows:
        raise AutoshardError(f"{out}: no round ran")
    for row in rows:
        print(f"round {row['round']}: {describe_round(row)}")
    # the starting model corrected per table by every device timed: what ranked the devices better where the
    # fine-tuned network did not (docs/benchmarks.md, "Stop 76")
    calibration = calibrate(base, load_dataset(str(out / "devices")), model_path=spec,
                            model_key=file_key(spec))
    calibration.save(str(out / CALIBRATION_FILE))
    print(f"wrote {out / 'cost_model.pt'}, {out / CALIBRATION_FILE} ({len(calibration.factors)} tables; plan "
          f"with --calibration) and {out / 'rounds.json'}", file=sys.stderr)
    return 0
