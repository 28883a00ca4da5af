"""``autoshard profile``, ``profile-comm`` and ``evaluate``: measure real costs and plans on this machine."""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Any

from autoshard.cli.common import add_device_args, check_backend, check_device, positive_int, record_bar
from autoshard.errors import AutoshardError


def _add_measure_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("measurement (recorded with every result)")
    g.add_argument("--optimizer", choices=["exact_sgd", "rowwise_adagrad"], default="exact_sgd",
                   help="optimizer fused into backward (default exact_sgd)")
    g.add_argument("--threads", type=positive_int, default=1, help="torch threads (default 1; see README)")
    g.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
    g.add_argument("--repeats", type=positive_int, default=10,
                   help="timed steps; the median is kept (default 10)")
    g.add_argument("--time-budget-ms", type=float, default=0.0,
                   help="timed ms a measurement aims for: slow steps are warmed up and repeated fewer "
                        "times (at least 3); 0 (default) always runs --warmup and --repeats steps")
    g.add_argument("--rows-cap", type=positive_int, default=1_000_000,
                   help="most rows a table keeps for timing; lookups are folded mod it (default 1000000)")
    g.add_argument("--max-shard-bytes", default="2GiB",
                   help="most weight bytes one shard allocates; rows are capped further to fit "
                        "(default 2GiB)")
    add_device_args(g)
    g.add_argument("--max-cv", type=float, default=0.10,
                   help="re-measure when CV is above this (default 0.10)")
    g.add_argument("--max-tries", type=positive_int, default=3, help="most tries per measurement (default 3)")
    g.add_argument("--no-flush", action="store_true", help="do not evict caches between timed runs")
    g.add_argument("--statistic", choices=["median", "min"], default="median",
                   help="summary of the timed runs: median (dedicated machine) "
                        "or min (shared, noisy machine)")


def _settings(args: argparse.Namespace) -> Any:
    from autoshard.hardware.kernel import MeasureSettings
    from autoshard.io import parse_bytes

    return MeasureSettings(optimizer=args.optimizer, threads=args.threads, warmup=args.warmup,
                           repeats=args.repeats, rows_cap=args.rows_cap,
                           max_shard_bytes=parse_bytes(args.max_shard_bytes), device=args.device,
                           backend=args.backend, max_cv=args.max_cv, max_tries=args.max_tries,
                           flush_cache=not args.no_flush, statistic=args.statistic,
                           time_budget_ms=args.time_budget_ms)


def _env_int(name: str, default: int) -> int:
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise AutoshardError(f"environment variable {name}={text!r} is not an integer") from None


def _use_local_gpu(rank: int) -> None:
    """One GPU per process: torchrun's LOCAL_RANK (or the rank) picks this process's device."""
    import torch

    if not torch.cuda.is_available():
        raise AutoshardError("--device cuda but torch sees no CUDA device; use --device cpu")
    torch.cuda.set_device(_env_int("LOCAL_RANK", rank) % torch.cuda.device_count())


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="measure random table subsets on the real kernels (resumable)",
                       description="Measure random shards (of a table pool, or of tables generated per "
                                   "sample with --design broad) and append one record per sample to "
                                   "OUT/shards-rank<R>.jsonl; re-run the same command to resume.")
    p.add_argument("--design", choices=["pool", "broad"], default="pool",
                   help="pool: subsets of --tables (default); broad: tables generated per sample over the "
                        "ranges below, Sobol-sampled, stratified by tables per device")
    p.add_argument("--tables", help="tables file (autoshard.tables) to profile (pool design)")
    p.add_argument("--samples", type=positive_int, required=True, help="samples in the profile (all ranks)")
    p.add_argument("-o", "--output", required=True, help="profile directory (created; resumed if it exists)")
    p.add_argument("--max-tables", type=positive_int, default=None,
                   help="pool design: a sample has 1..K tables (default 8)")
    p.add_argument("--batch-size", type=positive_int, default=None,
                   help="pool design: batch per device (default 2048)")
    p.add_argument("--precision", choices=["fp32", "fp16"], default=None,
                   help="pool design: weights (default fp32)")
    p.add_argument("--column-share", type=float, default=None,
                   help="probability a table of a sample is a column shard (default 0.2)")
    p.add_argument("--seed", type=int, default=0)
    b = p.add_argument_group("broad design (--design broad): ranges LO:HI, inclusive; one value fixes it")
    b.add_argument("--dims", default="4:256",
                   help="table dims, multiples of 4: LO:HI log-uniform (default 4:256), or a list such as "
                        "32,64,128,256, each equally often (devices then hold few dims, as users' do)")
    b.add_argument("--rows", default="1e2:1e8", help="table rows, log-uniform (default 1e2:1e8)")
    b.add_argument("--pooling", default="0:200", help="mean bag size, uniform in log(1+p) (default 0:200)")
    b.add_argument("--pooling-cv", default="0:2", help="bag-size coefficient of variation (default 0:2)")
    b.add_argument("--alpha", default="0:2", help="access skew, power-law exponent (default 0:2)")
    b.add_argument("--vocab-log-fraction", default="-3:0",
                   help="log10 of the active vocabulary's share of the rows (default -3:0)")
    b.add_argument("--tables-per-device", default="1:40", help="tables a sample holds (default 1:40)")
    b.add_argument("--batch-sizes", default="512:65536", help="per-device batch, log-uniform (default "
                                                              "512:65536)")
    b.add_argument("--precisions", default="fp32,fp16", help="weight precisions (default fp32,fp16)")
    b.add_argument("--stats-batch", type=positive_int, default=65536,
                   help="batch the access bins are counted on (default 65536, as synthetic pools)")
    b.add_argument("--row-share", type=float, default=0.0,
                   help="probability a table of a sample is cut to a row shard (default 0: whole tables)")
    b.add_argument("--row-parts", default="2:64",
                   help="row ranges a cut table is split into, log-uniform (default 2:64)")
    b.add_argument("--sobol-axes", choices=["joint", "aligned"], default="joint",
                   help="joint (default): a sample's composition and its tables draw disjoint Sobol "
                        "dimensions; aligned: as every profile before stop 95, whose one-table samples "
                        "couple precision to pooling and batch to rows (to resume such a profile)")
    p.add_argument("--rank", type=int, default=None, help="this process's share (default $RANK or 0)")
    p.add_argument("--world-size", type=int, default=None,
                   help="processes sharing the work ($WORLD_SIZE or 1)")
    p.add_argument("--prepare-workers", type=int, default=0,
                   help="processes that draw the next samples' tables and lookups while this one times "
                        "(default 0: drawn here, between timings); for a GPU, whose host CPU drew most of a "
                        "sample's time; on --device cpu they compete with the timed kernels. Not recorded: "
                        "the records are the same")
    _add_measure_args(p)
    p.set_defaults(func=run_profile)

    k = sub.add_parser("profile-pack", help="pack a profile's records into one compressed, stable file",
                       description="Merge every record of a profile directory into "
                                   "shards-packed.jsonl.gz (sample order, gzip, no time stamp), delete its "
                                   "shards-rank*.jsonl files, so the profile can be committed; a later "
                                   "'autoshard profile' run in it resumes beside the packed file. Not while "
                                   "a profiler is writing to the directory.")
    k.add_argument("directory", help="profile directory (autoshard profile -o DIR)")
    k.set_defaults(func=run_profile_pack)

    v = sub.add_parser("profile-level", help="measure how fast this host runs against another profile's "
                                             "(level.json, so train-cost can merge the two)",
                       description="Re-time records of REFERENCE here (spread over its cost range, with the "
                                   "settings they were recorded with) and write DATA/level.json: this "
                                   "host over REFERENCE's, forward and backward. Run it on the host "
                                   "that profiled DATA, right after: 'train-cost --data REFERENCE --data "
                                   "DATA' then divides DATA's records by it, so a profile measured on a "
                                   "faster or slower day joins at the reference's speed.")
    v.add_argument("--data", required=True, help="the profile measured here (autoshard profile -o DIR)")
    v.add_argument("--reference", required=True,
                   help="the profile DATA will be trained beside (e.g. profiles/amd-epyc/broad-seed0)")
    # host_calibration's DEFAULT_MAX_MS, written out so the CLI starts without torch; more records than
    # calibrate-cost's 16 because this factor goes into training data (48: its interval about +-6% here)
    v.add_argument("--records", type=positive_int, default=48,
                   help="REFERENCE records to re-time, spread over its cost range (default 48)")
    v.add_argument("--max-ms", type=float, default=200.0,
                   help="leave out records whose recorded fwd+bwd is above this (default 200)")
    v.set_defaults(func=run_profile_level)

    c = sub.add_parser("profile-comm",
                       help="measure the step's collectives and fit the comm model (resumable)",
                       description="Time forward/backward all-to-all of pooled embeddings over D "
                                   "processes, and beside it a reduce-scatter and an all-gather of the same "
                                   "bytes and the row-block bucketisation of ids (TorchRec's row-wise), "
                                   "append to OUT/comm.jsonl and fit OUT/comm_model.json; or, with "
                                   "--topology, derive the model from link bandwidths (row-wise collectives "
                                   "priced as all-to-alls, bucketisation free).")
    c.add_argument("-o", "--output", required=True, help="profile directory")
    c.add_argument("--devices", type=positive_int, default=2, help="processes (devices) D (default 2)")
    c.add_argument("--dim-sums", default="16,64,256,1024,4096", help="per-device dim sums to sweep")
    c.add_argument("--batch-size", type=positive_int, default=2048, help="global batch (default 2048)")
    c.add_argument("--precision", choices=["fp32", "fp16"], default="fp32", help="element type sent")
    c.add_argument("--warmup", type=int, default=3)
    c.add_argument("--repeats", type=positive_int, default=10)
    c.add_argument("--passes", type=positive_int, default=None,  # None: hardware.comm.DEFAULT_PASSES
                   help="sweeps over the sizes, each point's times the least of the passes' medians (default "
                        "3: a busy moment on a shared host does not set the fit)")
    c.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto")
    c.add_argument("--topology", help="topology file: derive the model for --devices instead of measuring")
    c.set_defaults(func=run_profile_comm)

    e = sub.add_parser("evaluate", help="measure a plan's step cost: real kernels and real collectives",
                       description="Validate a plan against its task, time every device's fused shard, "
                                   "time the step's all-to-alls with the plan's own splits on D local "
                                   "processes, print per-device costs, every collective's bytes and time, "
                                   "and the step cost (max fwd + forward collectives + max bwd + backward "
                                   "collectives).")
    e.add_argument("--plan", required=True,
                   help="plan file (autoshard plan -o ...); a sequence plan is evaluated against its "
                        "--tables (sequence tables): every collective's bytes, modelled and measured ms")
    src = e.add_mutually_exclusive_group()
    src.add_argument("--tables", help="tables file; all its tables form the task")
    src.add_argument("--task", help="tasks file; see --task-index")
    e.add_argument("--task-index", type=int, default=0)
    e.add_argument("--memory", default="5GB", help="memory per device with --tables (default 5GB)")
    e.add_argument("--batch-size", type=positive_int, default=None,
                   help="batch with --tables (default 2048; a sequence plan: samples per rank per step, "
                        "default the plan's)")
    e.add_argument("--precision", choices=["fp32", "fp16"], default=None, help="weights with --tables")
    e.add_argument("--comm-model", help="comm_model.json (autoshard profile-comm); default: uncalibrated")
    e.add_argument("--json", help="also write the result as JSON here")
    e.add_argument("--collectives", choices=["measure", "model"], default="measure",
                   help="time the plan's all-to-alls on D processes (default) or take the comm model's "
                        "estimate (labelled modelled)")
    e.add_argument("--comm-backend", choices=["auto", "gloo", "nccl"], default="auto",
                   help="process-group backend for --collectives measure (auto: NCCL with --device cuda and "
                        "one GPU per rank, else gloo: CPU processes)")
    e.add_argument("--pin-cpus", action="store_true",
                   help="with --collectives measure on CPU processes: every rank on a physical core of its "
                        "own (needs a core per device; without it D ranks share whatever cores the host has)")
    e.add_argument("--rounds", type=positive_int, default=3,
                   help="time every device this many times, the order rotated, a fresh evaluator each round "
                        "(default 3; the bench's protocol: on a shared host one timing can be 10-40%% slow)")
    e.add_argument("--round-statistic", choices=["min", "median"], default="min",
                   help="how a device's rounds become its cost (default min: contention only adds time)")
    _add_measure_args(e)
    e.set_defaults(func=run_evaluate)


def _span(text: str, what: str) -> tuple[float, float]:
    """'LO:HI' or one value -> (low, high)."""
    parts = text.split(":")
    try:
        values = [float(x) for x in parts]
    except ValueError:
        values = []
    if len(values) not in (1, 2) or not all(math.isfinite(v) for v in values):
        raise AutoshardError(f"--{what} {text!r} must be LO:HI or one finite number, e.g. --{what} 4:256")
    return values[0], values[-1]


def _int_span(text: str, what: str) -> tuple[int, int]:
    lo, hi = _span(text, what)
    if lo != int(lo) or hi != int(hi):
        raise AutoshardError(f"--{what} {text!r} must be whole numbers")
    return int(lo), int(hi)


def broad_design(args: argparse.Namespace) -> Any:
    """The ``BroadDesign`` of the profile arguments (one-line errors for bad ranges)."""
    from autoshard.hardware.profiler import DEFAULT_COLUMN_SHARE, BroadDesign

    precisions = tuple(p.strip() for p in args.precisions.split(",") if p.strip())
    choices: tuple[int, ...] = ()
    if "," in args.dims:
        try:
            choices = tuple(int(x) for x in args.dims.split(",") if x.strip())
        except ValueError:
            choices = ()
        if not choices:
            raise AutoshardError(f"--dims {args.dims!r} must be LO:HI or a comma-separated list of whole "
                                 "numbers, e.g. 32,64,128,256")
    dims = (min(choices), max(choices)) if choices else _int_span(args.dims, "dims")
    return BroadDesign(dims=dims, dim_choices=choices, rows=_int_span(args.rows, "rows"),
                       pooling=_span(args.pooling, "pooling"),
                       pooling_cv=_span(args.pooling_cv, "pooling-cv"), alpha=_span(args.alpha, "alpha"),
                       vocab_log_fraction=_span(args.vocab_log_fraction, "vocab-log-fraction"),
                       tables_per_device=_int_span(args.tables_per_device, "tables-per-device"),
                       batch_sizes=_int_span(args.batch_sizes, "batch-sizes"), precisions=precisions,
                       column_share=DEFAULT_COLUMN_SHARE if args.column_share is None else args.column_share,
                       stats_batch=args.stats_batch, row_share=args.row_share,
                       row_parts=_int_span(args.row_parts, "row-parts"), sobol_axes=args.sobol_axes)


def run_profile(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from autoshard.hardware.profiler import (
        DEFAULT_COLUMN_SHARE,
        DEFAULT_MAX_TABLES,
        ProfileConfig,
        check_rank,
        pending_samples,
        profile,
    )
    from autoshard.tables.table import Precision, TablePool
    from autoshard.tasks import DEFAULT_BATCH_SIZE

    check_device(args.device)
    check_backend(args.backend)
    rank = args.rank if args.rank is not None else _env_int("RANK", 0)
    world = args.world_size if args.world_size is not None else _env_int("WORLD_SIZE", 1)
    check_rank(rank, world)
    if args.design == "broad":
        given = [f"--{n.replace('_', '-')}" for n in ("tables", "max_tables", "batch_size", "precision")
                 if getattr(args, n) is not None]
        if given:
            raise AutoshardError(f"{given[0]} is for the pool design; --design broad generates its tables "
                                 "(use --tables-per-device, --batch-sizes, --precisions)")
        pool = None
        config = ProfileConfig(samples=args.samples, seed=args.seed, settings=_settings(args),
                               design=broad_design(args))
    else:
        if args.tables is None:
            raise AutoshardError("--tables is required with the pool design (or pass --design broad)")
        pool = TablePool.load(args.tables)
        config = ProfileConfig(
            samples=args.samples, max_tables=args.max_tables or DEFAULT_MAX_TABLES,
            batch_size=args.batch_size or DEFAULT_BATCH_SIZE, seed=args.seed,
            precision=Precision(args.precision or "fp32"),
            column_share=DEFAULT_COLUMN_SHARE if args.column_share is None else args.column_share,
            settings=_settings(args))
    if config.settings.device.value == "cuda":
        _use_local_gpu(rank)
    # checks the directory before anything prints
    records = profile(pool, args.output, config, rank, world, prepare_workers=args.prepare_workers)
    mine = len(range(rank, config.samples, world))
    todo = len(pending_samples(args.output, config, rank, world))
    print(f"profiling {mine} samples (rank {rank} of {world}); {mine - todo} already done in {args.output}",
          file=sys.stderr)
    bar = tqdm(total=mine, initial=mine - todo, unit="sample", desc="profile", dynamic_ncols=True)
    try:
        for rec in records:
            bar.set_postfix_str(f"{len(rec.tables)} tables batch {rec.batch_size} fwd {rec.fwd_ms:.2f} "
                                f"bwd {rec.bwd_ms:.2f} ms")
            bar.update(1)
    finally:
        bar.close()
    print(f"done: {mine} samples of rank {rank} in {args.output}", file=sys.stderr)
    return 0


def run_profile_pack(args: argparse.Namespace) -> int:
    from pathlib import Path

    from autoshard.hardware.profiler import MANIFEST_FILE, PACKED_FILE, pack_records

    d = Path(args.directory)
    if not (d / MANIFEST_FILE).is_file():
        raise AutoshardError(f"{d}: not a profile directory (no {MANIFEST_FILE}); "
                             "pass the -o directory of 'autoshard profile'")
    count, removed = pack_records(d)
    print(f"packed {count} records into {d / PACKED_FILE}; removed {removed} rank file(s)")
    return 0


def run_profile_level(args: argparse.Namespace) -> int:
    from autoshard.cli.costmodel import load_data
    from autoshard.hardware.host_calibration import host_scale, pick_records, retime
    from autoshard.hardware.profile_level import ProfileLevel, profile_key, write_level
    from autoshard.host import hardware_difference, host_info

    if profile_key(args.data) == profile_key(args.reference):
        raise AutoshardError(f"--data and --reference are the same profile ({profile_key(args.data)}); "
                             "a level is measured against another one")
    data = load_data(args.data)  # one-line errors for a missing directory or one without records
    here = host_info()
    differs = hardware_difference(data.records[0].host, here)
    if differs:
        raise AutoshardError(f"{args.data} was profiled on {data.records[0].host.get(differs)!r}, this host "
                             f"is {here.get(differs)!r} ({differs}); measure its level on the host that "
                             "profiled it")
    reference = load_data(args.reference)
    records = pick_records(reference, args.reference, args.records, args.max_ms)  # fail before the bar opens
    with record_bar(len(records), "profile-level") as progress:
        timings = retime(reference, records, progress)
    scale = host_scale(timings, args.reference)
    level = ProfileLevel(profile_key(args.reference), scale.fwd, scale.bwd, scale.to_json())
    path = write_level(args.data, level)
    print(f"{scale.describe()}; {sum(t.seconds for t in timings):.0f} s of timing")
    print(f"wrote {path}: train-cost --data {args.reference} --data {args.data} divides {args.data}'s "
          f"forward by {scale.fwd:.3f} and backward by {scale.bwd:.3f}", file=sys.stderr)
    return 0


def _dim_sums(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise AutoshardError(f"--dim-sums {text!r} must be a comma list of positive integers, "
                             "e.g. 16,64,256") from None
    if not values or any(v <= 0 for v in values):
        raise AutoshardError(f"--dim-sums {text!r} must be a comma list of positive integers, e.g. 16,64,256")
    return values


def run_profile_comm(args: argparse.Namespace) -> int:
    from pathlib import Path

    from autoshard.hardware.comm import (
        COMM_MODEL_FILE,
        DEFAULT_PASSES,
        fit_alpha_beta,
        load_comm_records,
        load_topology,
        profile_comm,
    )

    out = Path(args.output)
    if args.topology:
        model = load_topology(args.topology).alpha_beta(args.devices)
        out.mkdir(parents=True, exist_ok=True)
        model.save(str(out / COMM_MODEL_FILE))
        print(f"alpha {model.alpha_ms:.4f} ms, {model.bytes_per_ms / 1e6:.3f} GB/s ({model.source}); "
              f"wrote {out / COMM_MODEL_FILE}")
        return 0
    if args.devices < 2:
        raise AutoshardError("--devices must be at least 2 to measure an all-to-all")
    from tqdm import tqdm

    dim_sums = _dim_sums(args.dim_sums)
    elem_bytes = 2 if args.precision == "fp16" else 4
    passes = DEFAULT_PASSES if args.passes is None else args.passes
    with tqdm(total=len(dim_sums) * passes, unit="point", desc="all-to-all", dynamic_ncols=True) as bar:
        def advance(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        for rec in profile_comm(out, args.devices, dim_sums, args.batch_size, elem_bytes, args.warmup,
                                args.repeats, args.backend, passes, on_point=advance):
            bar.set_postfix_str(f"dim sum {rec.dim_sum}: fwd {rec.fwd_ms:.3f} bwd {rec.bwd_ms:.3f} ms")
    model = fit_alpha_beta(load_comm_records(out))
    model.save(str(out / COMM_MODEL_FILE))
    print(f"alpha {model.alpha_ms:.4f} ms, {model.bytes_per_ms / 1e6:.3f} GB/s ({model.source}); "
          f"wrote {out / COMM_MODEL_FILE}")
    return 0


def run_evaluate(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from autoshard.planners.sequence_plan import is_sequence_plan

    if os.path.isfile(args.plan) and is_sequence_plan(args.plan):  # a missing file: the pooled checks first
        return _evaluate_sequence(args)

    from tqdm import tqdm

    from autoshard.cli.plan import load_task
    from autoshard.costs.comm import DEFAULT_COMM, AlphaBeta
    from autoshard.hardware.evaluator import evaluate_plan_rounds
    from autoshard.host import host_info
    from autoshard.io import ARTEFACT_VERSION, write_json
    from autoshard.pipeline.context import comm_backend
    from autoshard.plan import Plan, format_report, validate
    from autoshard.tables.table import Precision

    check_device(args.device)
    check_backend(args.backend)
    plan = Plan.load(args.plan)
    args.devices = plan.num_devices
    task = load_task(args)
    if args.precision:
        if args.task:
            raise AutoshardError("--precision applies to --tables; a --task file states its own precision")
        task = replace(task, precision=Precision(args.precision))
    validate(plan, task)  # before any measuring, so a bad plan is one line and nothing else
    comm = AlphaBeta.load(args.comm_model) if args.comm_model else DEFAULT_COMM
    settings = _settings(args)
    backend, why = (args.comm_backend, f"--comm-backend {args.comm_backend}")
    if backend == "auto":  # not NCCL merely because CUDA is visible: it needs one GPU per rank
        backend, why = comm_backend(args.device, plan.num_devices)
    if args.pin_cpus and (args.collectives != "measure" or backend == "nccl"):
        raise AutoshardError("--pin-cpus pins the CPU (gloo) ranks of measured collectives; drop it, or use "
                             "--collectives measure --comm-backend gloo")
    if args.pin_cpus and plan.num_devices > 1:
        from autoshard.hardware.multiprocess import rank_cpus

        rank_cpus(plan.num_devices)  # too few cores: one line before the progress bar and any timing
        why += ", each rank pinned to a physical core of its own"
    timed = sum(1 for shards in plan.device_shards(task) if shards) * args.rounds
    with tqdm(total=timed, unit="timing", desc="measure", dynamic_ncols=True) as bar:
        cost, per_round = evaluate_plan_rounds(
            task, plan, settings, comm, progress=lambda done, total: bar.update(1),
            collectives=args.collectives, backend=backend, rounds=args.rounds, statistic=args.round_statistic,
            pin_cpus=args.pin_cpus and plan.num_devices > 1)
    print(format_report(plan.with_cost(cost), task))
    print(f"kernels: the {args.round_statistic} of {args.rounds} round(s) per device"
          + _round_spread(per_round))
    print(f"comm model: {comm.source}")
    if args.collectives == "measure" and plan.num_devices > 1:
        print(f"collectives timed with {why}")
    if args.json:
        write_json(args.json, {"kind": "autoshard.evaluation", "version": ARTEFACT_VERSION, "plan": args.plan,
                               "algorithm": plan.algorithm, "task": task.name, "batch_size": task.batch_size,
                               "precision": task.precision.value, "cost": cost.to_json(),
                               "settings": settings.to_json(), "comm_model": comm.to_json(),
                               "collectives": args.collectives,
                               "comm_backend": backend if args.collectives == "measure" else None,
                               "pin_cpus": args.pin_cpus,
                               "rounds": args.rounds, "round_statistic": args.round_statistic,
                               "device_rounds_ms": per_round.tolist(),
                               "host": host_info(settings.device.value)})
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


def _round_spread(per_round: Any) -> str:
    """'; spread across rounds ...' of each device's fwd + bwd: (max - min) / min, median and largest."""
    import numpy as np

    totals = np.asarray(per_round).sum(axis=-1)  # (rounds, devices)
    used = totals.min(axis=0) > 0
    if len(totals) < 2 or not used.any():
        return ""
    spread = (totals.max(axis=0)[used] - totals.min(axis=0)[used]) / totals.min(axis=0)[used]
    worst = int(np.flatnonzero(used)[int(np.argmax(spread))])
    return (f"; spread across rounds, (max - min) / min of fwd + bwd: median {np.median(spread):.1%}, "
            f"largest {spread.max():.1%} (device {worst})")


def _evaluate_sequence(args: argparse.Namespace) -> int:
    """``--plan`` is a sequence plan: its step's collectives, modelled and (unless ``--collectives model``)
    timed on D local gloo processes (``autoshard.hardware.sequence_evaluation``)."""
    from autoshard.hardware.sequence_evaluation import evaluate_sequence_plan
    from autoshard.host import host_info
    from autoshard.io import ARTEFACT_VERSION, write_json
    from autoshard.planners.sequence_plan import SequencePlan, load_sequence_tables

    if not args.tables:
        raise AutoshardError("a sequence plan is evaluated against its sequence tables: give --tables FILE")
    pooled_only = [flag for flag, value in (("--precision", args.precision),
                                            ("--comm-model", args.comm_model),
                                            ("--comm-backend nccl", args.comm_backend == "nccl"),
                                            ("--device cuda", args.device != "cpu"),
                                            ("--pin-cpus", args.pin_cpus)) if value]
    if pooled_only:
        raise AutoshardError(f"{pooled_only[0]} applies to pooled plans; a sequence plan's collectives are "
                             "modelled on its declared topology and timed with gloo")
    plan = SequencePlan.load(args.plan)
    tables = load_sequence_tables(args.tables)
    ev = evaluate_sequence_plan(plan, tables, collectives=args.collectives, batch_per_rank=args.batch_size,
                                warmup=args.warmup, repeats=args.repeats)
    print(ev.format())
    if args.json:
        write_json(args.json, {"kind": "autoshard.sequence_evaluation", "version": ARTEFACT_VERSION,
                               "plan": args.plan, "tables": args.tables, **ev.to_json(),
                               "warmup": args.warmup, "repeats": args.repeats, "host": host_info("cpu")})
        print(f"wrote {args.json}", file=sys.stderr)
    return 0
