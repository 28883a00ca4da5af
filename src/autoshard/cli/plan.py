"""``autoshard plan``: place a task's tables with one algorithm and print the per-device table.

A ``--tables`` file of sequence tables (kind ``autoshard.sequence_tables``) is planned by a sequence planner
(``autoshard.planners.sequence_plan``: flexshard, the default there, or a baseline) into a sequence plan."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from autoshard.cli.common import device_memory, positive_int

POOLED_ALGO = "search"
"""The default for pooled tables: local search on the shipped model behind the heuristic guard, so it returns
a heuristic's plan wherever its own gain is within the model's uncertainty. Over 230 archived bench tasks
(stops 71-79) it measured 0.955 of size_lookup_greedy's plan, the default before stop 80, and no run resolved
worse (``benchmarks/default_algo.py``; docs/benchmarks.md, "Stop 80")."""
POOLED_MEMORY = "5GB"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="plan a task with one algorithm", description=__doc__)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--tables", help="tables file (autoshard tables ...); all its tables form the task; a "
                                      "sequence-tables file (autoshard flexshard --synth) is planned with "
                                      "a sequence planner")
    src.add_argument("--task", help="tasks file (autoshard tasks ...); see --task-index")
    p.add_argument("--task-index", type=int, default=0, help="which task of --task (default 0)")
    p.add_argument("--devices", type=devices_spec,
                   help="devices (with --tables): a count (8) or HOSTSxLOCAL (2x4: 2 hosts of 4, for "
                        "table_row_wise and inter-host traffic at the declared bandwidth)")
    p.add_argument("--memory", default=None,
                   help=f"memory per device, e.g. 5GB, or one per device: 8GB,4GB (default {POOLED_MEMORY}; "
                        "sequence tables: row_wise's footprint + 5%%)")
    p.add_argument("--batch-size", type=positive_int, default=None,
                   help="per-device batch size (with --tables; sequence tables: samples per rank per step, "
                        "default 64)")
    p.add_argument("--algo", default=None,
                   help=f"algorithm; see --list-algos (default {POOLED_ALGO}, guarded by the heuristics' "
                        "plans; flexshard for sequence tables)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cost-model", help="cost model for cost-driven algorithms: a checkpoint (train-cost), "
                   "'analytical', or 'measured[:comm_model.json]' (every cost timed on this machine's "
                   "kernels: about a minute for search, two for ilp, on 50 tables); "
                   "default: the shipped model")
    p.add_argument("--calibration", metavar="FILE",
                   help="correct the cost model per table by this calibration of it (autoshard "
                        "calibrate-tables, or adapt-cost's OUT/table_calibration.json): devices of your "
                        "tables timed on the hardware you train on")
    p.add_argument("--comm", help="all-to-all fit of the cluster planned for (comm_model.json from "
                   "'autoshard profile-comm --devices D'); replaces the cost model's own, fitted where it "
                   "was trained")
    p.add_argument("--policy", help="trained policy checkpoint for --algo rl")
    p.add_argument("--time-limit", type=float, default=10.0, help="seconds for searching algorithms")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="planner-specific setting, repeatable "
                        "(e.g. beam_width=4 for neuroshard, samples=8 for rl)")
    p.add_argument("--measure-top", type=positive_int, metavar="K",
                   help="also plan with every heuristic, time the K candidates the model predicts "
                        "cheapest on this machine's kernels, and keep the measured best, if not the "
                        "model's cheapest only where a second side-by-side timing agrees (for planning on "
                        "the hardware you train on)")
    p.add_argument("--descend", type=positive_int, metavar="N",
                   help="with --measure-top: then move, swap or halve (by columns) tables off the measured "
                        "slowest device, keeping at most N changes that the kernels timed here say lower "
                        "the step by over 1%%, and return the result only if it times cheaper than the pick "
                        "side by side")
    p.add_argument("--refit", action="store_true",
                   help="with --measure-top: correct the model by the timed candidates' devices (a level and "
                        "a factor per table), plan again with it, and keep that plan if it times cheaper "
                        "than the pick side by side (before any --descend)")
    p.add_argument("--anchor-hot", type=positive_int, metavar="H",
                   help="first time the H tables the model prices dearest, whole and at each column cut, "
                        "alone on this machine's kernels (seconds), and plan with the model corrected by "
                        "those timings (for planning on the hardware you train on; with --measure-top the "
                        "corrected model also ranks the candidates)")
    p.add_argument("--torchrec-rows", action="store_true",
                   help="cut a table larger than a device in TorchRec's row_wise form (even blocks on every "
                        "rank) before planning, so the plan exports to a TorchRec ShardingPlan (default: "
                        "row pieces the planner places freely, which autoshard's runtime runs)")
    p.add_argument("-o", "--output", help="write the plan JSON here")
    p.add_argument("--list-algos", action="store_true", help="list the algorithms and exit")
    p.set_defaults(func=run)


def devices_spec(text: str) -> str:
    """argparse type of ``--devices``: a positive integer, or HOSTSxLOCAL."""
    from autoshard.errors import AutoshardError
    from autoshard.topology import parse_devices

    try:
        parse_devices(text)
    except AutoshardError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer or HOSTSxLOCAL (e.g. 8, 2x4)")
    return text


def load_task(args: argparse.Namespace):
    """The task named by --task/--task-index, or all tables of --tables on --devices."""
    from autoshard.errors import AutoshardError
    from autoshard.tables import TablePool
    from autoshard.tasks import DEFAULT_BATCH_SIZE, Task, load_tasks
    from autoshard.topology import Topology, parse_devices

    if args.task:
        tasks = load_tasks(args.task)
        if not 0 <= args.task_index < len(tasks):
            raise AutoshardError(f"--task-index {args.task_index} out of range: "
                                 f"{args.task} has {len(tasks)} tasks")
        return tasks[args.task_index]
    if not args.tables:
        raise AutoshardError("give --tables FILE with --devices N, or --task FILE")
    if not args.devices:
        raise AutoshardError("--tables needs --devices N (a positive number of devices)")
    hosts, devices = parse_devices(args.devices)
    pool = TablePool.load(args.tables)
    return Task(tables=pool.tables, device_memory=device_memory(args.memory or POOLED_MEMORY, devices),
                batch_size=args.batch_size or DEFAULT_BATCH_SIZE, name=args.tables, topology=Topology(hosts))


def parse_options(pairs: list[str]) -> dict[str, str]:
    """``['beam_width=4']`` -> ``{'beam_width': '4'}``; each planner converts and checks its own keys."""
    from autoshard.errors import AutoshardError

    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise AutoshardError(f"--option {pair!r} is not KEY=VALUE; write e.g. --option beam_width=4")
        out[key.strip()] = value.strip()
    return out


def run(args: argparse.Namespace) -> int:
    from autoshard.planners.base import PlannerOptions, available_planners, make_planner, run_planner
    from autoshard.planners.sequence_plan import (
        SEQUENCE_HINT,
        SEQUENCE_PLANNERS,
        check_pooled_algorithm,
        is_sequence_tables,
    )

    if args.list_algos:
        for name, desc in available_planners().items():
            print(f"{name:<20} {desc}")
        print(f"for sequence tables only ({SEQUENCE_HINT}):")
        for name, desc in SEQUENCE_PLANNERS.items():
            print(f"{name:<20} [sequence tables] {desc}")
        return 0
    if args.tables and is_sequence_tables(args.tables):
        return _plan_sequence(args)
    args.algo = args.algo or POOLED_ALGO
    check_pooled_algorithm(args.algo)
    from autoshard.costs.comm import AlphaBeta
    from autoshard.costs.loading import resolve_cost_model
    from autoshard.pipeline.models import load_cost_model
    from autoshard.plan import format_report
    from autoshard.planners.heuristics import size_lookup_proxy

    task = load_task(args)
    cost_model = load_cost_model(args.cost_model) if args.cost_model else None
    if args.calibration:
        cost_model = calibrated_model(args.calibration, args.cost_model, cost_model, task)
    if args.comm:
        cost_model = resolve_cost_model(cost_model).with_comm(AlphaBeta.load(args.comm))
    options = PlannerOptions(seed=args.seed, cost_model=cost_model, policy_path=args.policy,
                             time_limit_s=args.time_limit, extra=parse_options(args.option))
    from autoshard.costs.base import plan_cost
    from autoshard.costs.loading import describe_cost_model

    estimator = resolve_cost_model(cost_model)
    if args.descend and not args.measure_top:
        from autoshard.errors import AutoshardError

        raise AutoshardError("--descend N balances the plan --measure-top K picked; add --measure-top K "
                             "(e.g. --measure-top 3 --descend 8)")
    if args.refit and not args.measure_top:
        from autoshard.errors import AutoshardError

        raise AutoshardError("--refit corrects the model by the candidates --measure-top K timed; add "
                             "--measure-top K (e.g. --measure-top 3 --refit)")
    describe = getattr(estimator, "describe_fallback", None)
    anchoring_s = 0.0
    if args.anchor_hot:
        options, estimator, anchoring_s = _anchor(args, task, options, estimator)
    decision = None
    if args.measure_top:
        plan = _measure_top(args, task, options, estimator)
    else:
        planner = make_planner(args.algo, options)
        plan = run_planner(planner, task, args.torchrec_rows)
        plan = plan.with_cost(plan_cost(estimator, task, plan))
        decision = getattr(planner, "last_decision", None)
    if anchoring_s:
        plan = replace(plan, planning_time_s=(plan.planning_time_s or 0.0) + anchoring_s)
    devices = plan.device_shards(task)
    proxy = [sum(size_lookup_proxy(task.tables[s.table].with_dim(s.dim)) for s in dev) for dev in devices]
    print(format_report(plan, task, proxy))
    if decision is not None:  # which plan the guard kept, and why: a heuristic's plan kept is no failure
        print(f"guard: {decision.describe()}")
    outside = describe(task, devices) if callable(describe) and not args.measure_top else ""
    if outside:  # the learned model extrapolated there: say where and why
        print(f"warning: {outside}", file=sys.stderr)
    estimated = (f"costs estimated by {describe_cost_model(estimator)} (measure for real with 'autoshard "
                 "evaluate')")
    how = "costs measured here (kernels; collectives by the comm model)" if args.measure_top else estimated
    print(f"planned in {plan.planning_time_s * 1000:.1f} ms; "
          f"cost proxy = size_lookup (dim x pooling x log10 rows); {how}")
    if args.output:
        plan.save(args.output)
        print(f"wrote {args.output}", file=sys.stderr)
    return 0


def calibrated_model(path: str, spec: str | None, model, task):
    """``model`` (the shipped one when ``spec`` is None) corrected by the table calibration at ``path``,
    which must have been fitted against that very checkpoint; says how many of ``task``'s tables it covers."""
    from autoshard.costs.loading import SHIPPED_COST_MODEL, default_cost_model
    from autoshard.costs.table_calibration import CalibratedCostModel
    from autoshard.pipeline.calibration import load_calibration

    calibration = load_calibration(path, spec or str(SHIPPED_COST_MODEL))
    base = model if model is not None else default_cost_model()
    covered = calibration.covered(task)
    print(f"table calibration {path}: {covered} of {task.num_tables} tables corrected (fitted on "
          f"{calibration.devices} devices of {calibration.host.get('cpu', 'an unnamed host')})"
          + ("; the others keep its level" if covered < task.num_tables else ""))
    return CalibratedCostModel(base, calibration)


def _anchor(args: argparse.Namespace, task, options, estimator):
    """``--anchor-hot H``: the options and estimator with the model corrected by the H hottest tables' shards
    timed alone here (``pipeline.anchors``), and the seconds the timing took."""
    from autoshard.costs.loading import resolve_cost_model
    from autoshard.pipeline.anchors import anchored_model, hot_shards, time_anchors

    anchors = time_anchors(task, hot_shards(task, estimator, args.anchor_hot), None, estimator.comm)
    print(anchors.describe(task))
    anchored = anchored_model(task, estimator, anchors)
    for ref, (df, db) in sorted(anchored.deltas.items()):
        print(f"  {task.tables[ref.table].name:<20} width {ref.dim:>4}: timed {df:+.3f} fwd, {db:+.3f} bwd "
              "ms against the model")
    return replace(options, cost_model=anchored), resolve_cost_model(anchored), anchors.seconds


def _measure_top(args: argparse.Namespace, task, options, estimator):
    from autoshard.pipeline.choose import candidate_plans, measure_top

    candidates = candidate_plans(task, args.algo, options, args.torchrec_rows)
    choice = measure_top(task, candidates, estimator, args.measure_top)
    print(f"{'candidate':<20} {'predicted ms':>12} {'measured ms':>12}")
    for c in choice.candidates:
        measured = f"{c.measured_ms:>12.3f}" if c.measured_ms is not None else f"{'-':>12}"
        print(f"{c.algorithm:<20} {c.predicted_ms:>12.3f} {measured}")
    print(f"measured {min(args.measure_top, len(candidates))} of {len(candidates)} candidates in "
          f"{choice.measuring_s:.1f} s; kept {choice.best.algorithm}'s plan")
    if choice.confirmed_ms is not None:
        print(f"timed again side by side: the model's cheapest {choice.confirmed_ms[0]:.3f} ms, the measured "
              f"best {choice.confirmed_ms[1]:.3f} ms ({choice.describe().rpartition(', ')[2]})")
    best = choice.best
    if args.refit:
        from autoshard.pipeline.choose import refit_pick

        refit = refit_pick(task, args.algo, options, choice, estimator)
        print(f"refit: {refit.describe()}")
        best = refit.best
    if not args.descend:
        return best
    from autoshard.pipeline.measured_descent import DescentConfig, measured_descent

    config = DescentConfig(steps=args.descend, seed=args.seed)
    descent = measured_descent(task, best, estimator, config)
    print(f"measured descent: {descent.describe()}")
    return descent.plan


def _plan_sequence(args: argparse.Namespace) -> int:
    """``--tables`` holds sequence tables: plan them with a sequence planner, print the per-table summary,
    write the sequence plan (``autoshard.planners.sequence_plan``)."""
    from autoshard.errors import AutoshardError
    from autoshard.planners.sequence_plan import (
        DEFAULT_BATCH_PER_RANK,
        check_sequence_algorithm,
        device_budget,
        format_sequence_plan,
        load_sequence_tables,
        plan_sequence,
    )
    from autoshard.topology import Topology, parse_devices

    algo = args.algo or "flexshard"
    check_sequence_algorithm(algo)
    pooled_only = [flag for flag, value in (("--cost-model", args.cost_model), ("--comm", args.comm),
                                            ("--policy", args.policy), ("--calibration", args.calibration),
                                            ("--measure-top", args.measure_top),
                                            ("--descend", args.descend), ("--anchor-hot", args.anchor_hot),
                                            ("--option", args.option)) if value]
    if pooled_only:
        raise AutoshardError(f"{pooled_only[0]} applies to pooled tables; sequence planners price the "
                             "collectives on the declared topology")
    if not args.devices:
        raise AutoshardError("sequence tables need --devices HOSTSxLOCAL (e.g. 2x4)")
    tables = load_sequence_tables(args.tables)
    hosts, devices = parse_devices(args.devices)
    budget = device_budget(args.memory, tables, devices)
    plan = plan_sequence(tables, algo, Topology(hosts), devices, args.batch_size or DEFAULT_BATCH_PER_RANK,
                         budget)
    print(format_sequence_plan(plan, tables))
    if args.output:
        plan.save(args.output)
        print(f"wrote {args.output}", file=sys.stderr)
    return 0
