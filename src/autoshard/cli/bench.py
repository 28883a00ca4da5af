"""``autoshard bench --suite NAME -o DIR`` and ``autoshard quickstart [-o DIR]``: the pipeline, measured.

Both run ``autoshard.bench.runner.run_suite``: the stages of ``autoshard.pipeline`` (pool, split, tasks,
profile, comm, cost model, policy, benchmark), each cached in the output directory, so an interrupted run
continues where it stopped, then the summary and report.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any

from autoshard.cli.common import ProgressBars, add_device_args, check_backend, check_device

QUICKSTART_DIR = "autoshard-quickstart"
"""Default output directory of ``autoshard quickstart``."""

COLLECTIVES_DEFAULT = "auto"
"""--collectives when not given (``PipelineConfig.collectives``)."""


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("bench", help="benchmark every algorithm on a suite, measured on real kernels",
                       description=__doc__)
    b.add_argument("--suite", required=False,
                   help="suite name (see --list-suites), e.g. quick or dlrm-50-4; seq-* suites (e.g. "
                        "seq-2x4) compare FlexShard with its baselines on sequence tables (--test-tasks, "
                        "--rounds: timed runs per collective, --algos, --collectives apply)")
    b.add_argument("-o", "--output", help="output directory (default bench-SUITE)")
    b.add_argument("--list-suites", action="store_true", help="list the suites and exit")
    _common(b)
    b.set_defaults(func=run_bench_cmd)

    q = sub.add_parser("quickstart", description=__doc__,
                       help="the whole pipeline in minutes: data, profile, train, plan, measure")
    q.add_argument("-o", "--output", default=QUICKSTART_DIR,
                   help=f"output directory (default {QUICKSTART_DIR})")
    q.add_argument("--suite", default="quick", help="suite to run (default quick)")
    _common(q)
    q.set_defaults(func=run_quickstart_cmd)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tables", help="use this table pool instead of the synthetic one")
    p.add_argument("--cost-model", help="trained cost model checkpoint, 'analytical', or 'measured' (plan "
                   "with the real kernels: minutes a task for a learned planner); default: train one")
    p.add_argument("--policy", help="trained policy checkpoint for rl; default: train one")
    p.add_argument("--comm", help="comm model (comm_model.json of profile-comm) for the evaluator, or "
                                  "'default' for the uncalibrated one; default: measure it here")
    p.add_argument("--algos", help="comma-separated algorithms (default: every registered one)")
    p.add_argument("--measure-top", type=int, metavar="K",
                   help="also run every learned planner as PLANNER+topK: its plan and the heuristics', the K "
                        "its model prices cheapest timed at planning time, the measured best kept "
                        "(autoshard plan --measure-top K); the measuring counts as planning time")
    p.add_argument("--descend", type=int, metavar="N",
                   help="with --measure-top K: also run every learned planner as PLANNER+topK+descentN, the "
                        "measured pick (the same one PLANNER+topK kept) then balanced by at most N moves "
                        "its kernels' timings keep (autoshard plan --measure-top K --descend N)")
    p.add_argument("--refit", action="store_true",
                   help="with --measure-top K: also run every learned planner as PLANNER+topK+refit (and "
                        "+refit+descentN with --descend): the model corrected by the pick's timed devices, "
                        "the planner run again with it, its plan timed against the pick side by side "
                        "(autoshard plan --measure-top K --refit)")
    p.add_argument("--anchor-hot", type=int, metavar="H",
                   help="also run every learned planner as PLANNER+hotH: the model corrected by the H "
                        "tables it prices dearest, whole and at each column cut, timed alone here at "
                        "planning time (autoshard plan --anchor-hot H); the timing counts as planning time")
    p.add_argument("--test-tasks", type=int, help="override the suite's number of test tasks")
    p.add_argument("--batch-size", type=int,
                   help="override the per-device batch the kernels are timed at (default: the suite's, 2048 "
                        "for the DLRM suites; the papers time 65536 on GPUs)")
    p.add_argument("--rounds", type=int, help="override the suite's measurement rounds per task")
    p.add_argument("--round-statistic", choices=["min", "median"],
                   help="how a device's rounds become its cost (default min: contention only adds time; "
                        "median: the bench before stop 22)")
    p.add_argument("--time-limit", type=float, help="override the searching planners' seconds per task")
    p.add_argument("--profile-samples", type=int, help="override the shards profiled to train the cost model")
    p.add_argument("--policy-iterations", type=int, help="override the policy's training iterations")
    p.add_argument("--refresh-rounds", type=int,
                   help="rounds of DreamShard's loop before the test tasks (the learned planners' devices "
                        "of a few train tasks measured and added to the profile, the cost model refit, or a "
                        "given --cost-model fine-tuned on them, the policy trained further); the report gets "
                        "a row per round (default: the suite's)")
    p.add_argument("--refresh-tasks", type=int,
                   help="train tasks planned and measured in each refresh round (fresh ones each round)")
    p.add_argument("--refresh-budget", type=float, metavar="SECONDS",
                   help="no refresh round starts after this many seconds of the loop")
    g = p.add_argument_group("measurement (overrides the suite's; part of every stage key)")
    add_device_args(g)
    g.add_argument("--collectives", choices=["auto", "measure", "model"], default=COLLECTIVES_DEFAULT,
                   help="the step's all-to-alls: timed with every plan's own splits on D local processes "
                        "(measure), the comm model's estimate (model, labelled modelled), or auto (default): "
                        "measure only where each process gets a core or a GPU of its own")
    g.add_argument("--estimate", choices=["evaluator", "planning", "none"], default="evaluator",
                   help="the report's per-task cost estimate (not a bound): every table timed alone on the "
                        "real kernels (evaluator, default), priced by the planning model, or none")
    g.add_argument("--allow-other-hardware", action="store_true",
                   help="plan with a --cost-model trained on other hardware or measure settings (device, "
                        "backend, optimizer, threads) anyway")


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _run(args: argparse.Namespace, suite_name: str, out: str, command: str) -> int:
    from autoshard.bench.runner import run_suite
    from autoshard.bench.suites import get_suite, with_overrides
    from autoshard.errors import AutoshardError
    from autoshard.pipeline.context import PipelineConfig

    suite = get_suite(suite_name)
    for flag, value in (("--test-tasks", args.test_tasks), ("--rounds", args.rounds),
                        ("--batch-size", args.batch_size), ("--profile-samples", args.profile_samples),
                        ("--policy-iterations", args.policy_iterations),
                        ("--refresh-tasks", args.refresh_tasks), ("--measure-top", args.measure_top),
                        ("--descend", args.descend), ("--anchor-hot", args.anchor_hot)):
        if value is not None and value <= 0:
            raise AutoshardError(f"{flag} {value} must be a positive integer")
    if args.descend and not args.measure_top:
        raise AutoshardError("--descend N balances each measured pick; add --measure-top K "
                             "(e.g. --measure-top 3 --descend 8)")
    if args.refit and not args.measure_top:
        raise AutoshardError("--refit corrects the model by each measured pick's timings; add "
                             "--measure-top K (e.g. --measure-top 3 --refit)")
    if args.refresh_rounds is not None and args.refresh_rounds < 0:
        raise AutoshardError(f"--refresh-rounds {args.refresh_rounds} must be 0 or more")
    for flag, seconds in (("--time-limit", args.time_limit), ("--refresh-budget", args.refresh_budget)):
        if seconds is not None and not 0 < seconds < float("inf"):
            raise AutoshardError(f"{flag} {seconds} must be a positive number of seconds")
    ev = with_overrides(suite.eval, rounds=args.rounds, round_statistic=args.round_statistic)
    training = with_overrides(suite.training, profile_samples=args.profile_samples,
                              policy_iterations=args.policy_iterations, refresh_rounds=args.refresh_rounds,
                              refresh_tasks=args.refresh_tasks, refresh_budget_s=args.refresh_budget)
    suite = with_overrides(suite, num_test_tasks=args.test_tasks, time_limit_s=args.time_limit, eval=ev,
                           training=training, batch_size=args.batch_size)
    algos = tuple(a.strip() for a in args.algos.split(",") if a.strip()) if args.algos else None
    check_device(args.device)
    check_backend(args.backend)
    config = PipelineConfig(suite=suite, tables_path=args.tables, cost_model_path=args.cost_model,
                            policy_path=args.policy, comm_path=args.comm, algorithms=algos, command=command,
                            device=args.device, backend=args.backend, collectives=args.collectives,
                            allow_other_hardware=args.allow_other_hardware,
                            measure_top=args.measure_top or 0, descend=args.descend or 0, refit=args.refit,
                            anchor_hot=args.anchor_hot or 0, estimate=args.estimate)
    _check_inputs(args, algos, config)
    bars = ProgressBars()
    try:
        result = run_suite(config, out, say=_say, progress=bars)
    finally:
        bars.close()
    print(result.report)
    print(f"wrote {', '.join(str(p) for p in result.files.values())}", file=sys.stderr)
    return 0


def _check_inputs(args: argparse.Namespace, algos: tuple[str, ...] | None, config: Any) -> None:
    """Fail before any stage runs on a typo: unknown algorithms, input files that are not there, or a cost
    model trained on kernels timed otherwise than this run's (``evaluation.load_planning_model``)."""
    from pathlib import Path

    from autoshard.errors import AutoshardError
    from autoshard.pipeline.evaluation import load_planning_model
    from autoshard.pipeline.measure import select_algorithms
    from autoshard.pipeline.models import MEASURED_SPEC

    if algos is not None:
        select_algorithms(algos)
    given = (("--tables", args.tables, None), ("--cost-model", args.cost_model, "analytical"),
             ("--policy", args.policy, None), ("--comm", args.comm, "default"))
    for flag, value, keyword in given:
        if flag == "--cost-model" and value == MEASURED_SPEC:
            continue
        if value is not None and value != keyword and not Path(value).is_file():
            raise AutoshardError(f"{flag} {value}: no such file; check the path")
    if args.cost_model is not None:
        load_planning_model(args.cost_model, config.measure_settings(), args.allow_other_hardware)


def _command(prog: str, argv: list[str]) -> str:
    return "autoshard " + " ".join(shlex.quote(a) for a in [prog, *argv])


def run_bench_cmd(args: argparse.Namespace) -> int:
    from autoshard.bench.sequence import SEQ_SUITES, is_seq_suite
    from autoshard.bench.suites import SUITES
    from autoshard.errors import AutoshardError

    if args.list_suites:
        for name, suite in {**SUITES, **SEQ_SUITES}.items():
            print(f"{name:<14} {suite.description}")
        return 0
    if not args.suite:
        raise AutoshardError("give --suite NAME (see autoshard bench --list-suites)")
    out = args.output or f"bench-{args.suite}"
    if is_seq_suite(args.suite):
        return _run_seq(args, out)
    return _run(args, args.suite, out, _command("bench", _reconstruct(args, out)))


def _run_seq(args: argparse.Namespace, out: str) -> int:
    """A sequence suite (``autoshard.bench.sequence``): FlexShard and its baselines, collectives only, so
    the pooled pipeline's inputs do not apply (one line if given)."""
    from autoshard.bench.sequence import get_seq_suite, run_seq_suite
    from autoshard.bench.suites import with_overrides
    from autoshard.errors import AutoshardError

    suite = get_seq_suite(args.suite)
    pooled_only = [flag for flag, value in (
        ("--tables", args.tables), ("--cost-model", args.cost_model), ("--policy", args.policy),
        ("--comm", args.comm), ("--time-limit", args.time_limit), ("--batch-size", args.batch_size),
        ("--profile-samples", args.profile_samples),
        ("--policy-iterations", args.policy_iterations), ("--refresh-rounds", args.refresh_rounds),
        ("--refresh-tasks", args.refresh_tasks), ("--refresh-budget", args.refresh_budget),
        ("--device cuda", args.device != "cpu"), ("--round-statistic", args.round_statistic),
        ("--backend torch", args.backend != "fbgemm"), ("--estimate", args.estimate != "evaluator"),
        ("--allow-other-hardware", args.allow_other_hardware), ("--measure-top", args.measure_top),
        ("--descend", args.descend), ("--refit", args.refit), ("--anchor-hot", args.anchor_hot))
        if value]
    if pooled_only:
        raise AutoshardError(f"{pooled_only[0]} does not apply to sequence suites: they plan FlexShard and "
                             "its baselines and time only the collectives (gloo)")
    for flag, value in (("--test-tasks", args.test_tasks), ("--rounds", args.rounds)):
        if value is not None and value <= 0:
            raise AutoshardError(f"{flag} {value} must be a positive integer")
    suite = with_overrides(suite, num_tasks=args.test_tasks, repeats=args.rounds)
    algos = tuple(a.strip() for a in args.algos.split(",") if a.strip()) if args.algos else None
    argv = ["--suite", args.suite, "-o", out, "--collectives", args.collectives]
    for flag, value in (("--algos", args.algos), ("--test-tasks", args.test_tasks),
                        ("--rounds", args.rounds)):
        if value is not None:
            argv += [flag, str(value)]
    result = run_seq_suite(suite, out, collectives=args.collectives, algorithms=algos,
                           command=_command("bench", argv), say=_say)
    print(result.report)
    print(f"wrote {', '.join(str(p) for p in result.files.values())}", file=sys.stderr)
    return 0


def run_quickstart_cmd(args: argparse.Namespace) -> int:
    return _run(args, args.suite, args.output, _command("quickstart", _reconstruct(args, args.output)))


def _reconstruct(args: argparse.Namespace, out: str) -> list[str]:
    """The command's arguments rebuilt from the parsed ones, written into the report to regenerate it."""
    argv = ["--suite", args.suite, "-o", out]
    for flag, value in (("--tables", args.tables), ("--cost-model", args.cost_model),
                        ("--policy", args.policy), ("--comm", args.comm),
                        ("--algos", args.algos), ("--test-tasks", args.test_tasks), ("--rounds", args.rounds),
                        ("--batch-size", args.batch_size),
                        ("--round-statistic", args.round_statistic), ("--time-limit", args.time_limit),
                        ("--profile-samples", args.profile_samples),
                        ("--policy-iterations", args.policy_iterations),
                        ("--refresh-rounds", args.refresh_rounds), ("--refresh-tasks", args.refresh_tasks),
                        ("--refresh-budget", args.refresh_budget), ("--measure-top", args.measure_top),
                        ("--descend", args.descend), ("--anchor-hot", args.anchor_hot)):
        if value is not None:
            argv += [flag, str(value)]
    for flag, value, default in (("--device", args.device, "cpu"), ("--backend", args.backend, "fbgemm"),
                                 ("--estimate", args.estimate, "evaluator"),
                                 ("--collectives", args.collectives, COLLECTIVES_DEFAULT)):
        if value != default:
            argv += [flag, value]
    for flag, value in (("--allow-other-hardware", args.allow_other_hardware), ("--refit", args.refit)):
        if value:
            argv.append(flag)
    return argv
