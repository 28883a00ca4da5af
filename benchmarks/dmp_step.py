"""Check the step model against a real step: plans priced by ``autoshard.costs.step`` vs the same plans
trained in TorchRec DistributedModelParallel on D processes (``--devices``, default 2; gloo on 127.0.0.1).

One task (``--tables`` synthetic DLRM-like tables from ``synthesize_pool``, rows capped at ``--rows-cap`` in
the task itself, so the kernel timings and DMP use the very same tables and lookups, no folding) and six
strongly different plans on D ranks:

- ``all_on_rank0``: every table on rank 0, the other ranks idle;
- ``balanced``: ``--balanced-planner`` (size_lookup_greedy), table-wise;
- ``imbalanced``: the heaviest tables (pooling x dim) on rank 0 until it holds ``--imbalance`` of the load,
  the rest greedily on the least loaded of the other ranks;
- ``col_split_hot``: ``balanced`` with the ``--hot`` heaviest tables split column-wise into min(D, dim / 4)
  shards of multiples of 4 columns, on consecutive ranks (each table starting where the last one ended);
- ``col_split_all``: every table split so (every id is sent to every shard's rank);
- ``row_split_hot``: ``balanced`` with the ``--hot`` heaviest tables split row-wise over the ranks, at
  TorchRec's own row blocks (``ceil(rows / D)``: TorchRec 1.8's training input dist bucketises ids by
  blocks of ``ceil(rows / D)`` whatever the plan's shard sizes, so another split sends ids to the wrong
  shard); a table too small for D blocks stays whole.

With ``--pin-cpus`` every rank (of the all-to-all sweep, the per-plan collectives and DMP) is pinned to a
physical core of its own (``hardware.multiprocess.rank_cpus``; an error where the host has fewer cores than
ranks): on a host with a core per rank, each rank then computes alone, as on a device of its own, and DMP's
step can rank plans. Without it (and on the 2-vCPU hosts) it cannot; see the CAVEAT below.

For every plan:

1. the step model (``evaluate_plan``, collectives='model'): every device's kernels timed alone, one after
   the other, in this process (FBGEMM fused TBE, SGD, 1 thread), collectives from an alpha-beta fit of
   all-to-alls measured at D=2 just before (``hardware.comm``; ``--comm FILE`` loads one instead);
2. the same kernel timings with the all-to-alls timed on 2 processes with the plan's own splits
   (``measure_plan_collectives``, what ``evaluate_plan(collectives='measure')`` composes; the kernels are
   not re-timed, so the two columns differ in the collectives only);
3. a real step: ``verify_plan`` with ``sync_steps`` (DMP, fused kernel, SGD fused into backward, 1 thread per
   rank, identical weights checked against an unsharded module first), a barrier before every step, each
   rank timing its own; the step's time is the slowest rank's, median over ``--steps`` steps after
   ``--warmup``. Kernels are timed on the CPU and DMP runs gloo CPU ranks, on a host with GPUs too. With
   ``--overhead-batch`` the DMP step is also run at that tiny global batch: nearly all
   of it is then fixed cost (Python, the KJT input dist's splits/lengths/values all-to-alls per sharding
   type, the output dist, autograd), which the step model has no term for.

Printed: the step model's ms with modelled and with measured collectives, the DMP step ms, each normalised
to the balanced plan, and the Spearman rank correlation of each model's ordering with DMP's; then a
diagnostic table (DMP forward part, DMP at the tiny batch, the kernels' sum over ranks). JSON (``--json``):
everything, the command line, ``host_info`` and /proc/loadavg before and after.

CAVEAT, also printed: on a host whose cores are fewer than the ranks need (the 2-vCPU CPU hosts give about
one core of throughput), two single-thread ranks each run about 2x slower when both compute, and a rank
waiting in a collective frees the core for the other. So a multi-process step here proves the plans run and
match the unsharded model, not which is faster: an idle rank costs nothing, and the sum of all ranks' kernel
time (the "serial kernels" column) is the host's natural model, not the max. Step-time rankings need one
device per rank.

Measured 2026-11-23 on the 2-vCPU CPU host (defaults: 10 tables, batch 2048, rows <= 100k, 10 steps after 3;
load average ~2, the run's own ranks; about 100 s a run): every plan, the row-wise one included, ran and
matched the unsharded model (TorchRec 1.8 + torch 2.13 gloo now do row_wise's reduce-scatter on CPU). The
step model put the plans in the same order in two runs (balanced 10.9-11.5 ms, all_on_rank0 1.9x that); DMP
took 19-39 ms a step, and its ratios to balanced moved from 0.92-1.30 in one run to 1.37-1.72 in the next
(balanced alone 30.3 then 18.8 ms), so the Spearman correlation went from -0.77 to +0.14: on this host DMP's
ordering is noise and neither confirms nor refutes the model.

    .venv/bin/python benchmarks/dmp_step.py --json dmp_step.json
    .venv/bin/python benchmarks/dmp_step.py --tables 8 --steps 20 --overhead-batch 0
    python3 benchmarks/dmp_step.py --devices 8 --tables 24 --pin-cpus --overhead-batch 0   # a 16-core host
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.breakdown import PlanCost
from autoshard.costs import metrics
from autoshard.costs.comm import AlphaBeta
from autoshard.costs.step import compose
from autoshard.errors import AutoshardError
from autoshard.hardware.comm import fit_alpha_beta, measure_all_to_all
from autoshard.hardware.evaluator import SOURCE, evaluate_plan, measure_plan_collectives
from autoshard.hardware.kernel import MeasureSettings
from autoshard.hardware.multiprocess import physical_cores, rank_cpus
from autoshard.host import host_info
from autoshard.io import write_json
from autoshard.plan import COLUMN_SHARD_MULTIPLE, Plan, TablePlacement, validate
from autoshard.planners.base import PlannerOptions, make_planner, run_planner
from autoshard.planners.column_split import even_split
from autoshard.planners.row_split import torchrec_row_wise
from autoshard.shards import even_row_bounds
from autoshard.tables.synth import synthesize_pool
from autoshard.tables.table import Table
from autoshard.tasks import Task
from autoshard.torchrec.verify import VerifyResult, VerifySettings, verify_plan

DIMS = (16, 32, 64)
"""Dims of the synthetic tables (multiples of 8: on 2 ranks every table halves into shards of 4k columns)."""
MEMORY = 10**12
"""Bytes per device: no plan here is limited by memory (the rows are capped in the task)."""
PLANS = ("all_on_rank0", "balanced", "imbalanced", "col_split_hot", "col_split_all", "row_split_hot")
REFERENCE = "balanced"
COMM_DIM_SUMS = (16, 64, 256, 1024)
"""Per-rank dim sums of the quick all-to-all sweep the comm model is fitted to."""

log = logging.getLogger("dmp_step")


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return "unknown"


def make_task(num_tables: int, devices: int, seed: int, batch_size: int, rows_cap: int) -> Task:
    """Synthetic tables with rows capped in the tables themselves (lookups drawn over the capped rows)."""
    pool = synthesize_pool(num_tables, seed=seed, dims=DIMS, stats_batch_size=1024)
    tables = tuple(replace(t, rows=min(t.rows, rows_cap)) for t in pool.tables)
    return Task(tables, (MEMORY,) * devices, batch_size=batch_size,
                name=f"synth-{num_tables}x{devices}-s{seed}-b{batch_size}")


def load(task: Task) -> np.ndarray:
    """A table's kernel load for choosing hot tables: ids per sample x dim (bytes looked up per sample)."""
    return np.array([t.pooling_factor * t.dim for t in task.tables])


def column_widths(dim: int, parts: int) -> list[int]:
    """``dim`` cut into min(parts, dim / COLUMN_SHARD_MULTIPLE) column shards, as the planners cut them."""
    return list(even_split(dim, max(1, min(parts, dim // COLUMN_SHARD_MULTIPLE))))


def make_plans(task: Task, planner: str, hot: int, imbalance: float, seed: int) -> dict[str, Plan]:
    n, d = task.num_tables, task.num_devices
    weight = load(task)
    order = [int(i) for i in np.argsort(-weight, kind="stable")]
    hottest = {task.tables[i].name for i in order[:hot]}
    balanced = run_planner(make_planner(planner, PlannerOptions(seed=seed)), task)
    balanced = replace(balanced, algorithm=f"balanced:{planner}")

    ranks = [0] * n
    held = np.zeros(d)
    for i in order:  # heaviest first onto rank 0 until it holds `imbalance` of the load, the rest greedily
        if held[0] < imbalance * weight.sum() or d == 1:
            r = 0
        else:
            r = 1 + int(np.argmin(held[1:]))
        ranks[i] = r
        held[r] += weight[i]

    next_rank = 0

    def column_split(t: Table) -> TablePlacement:
        nonlocal next_rank  # consecutive ranks, each split starting where the last ended
        widths = column_widths(t.dim, d)
        on = [(next_rank + j) % d for j in range(len(widths))]
        next_rank = (next_rank + len(widths)) % d
        return TablePlacement.column_wise(t.name, on, widths)

    by_name = {t.name: t for t in task.tables}

    def with_hot(kind: str) -> Plan:
        out = []
        for p in balanced.placements:
            t = by_name[p.table]
            too_small = len(even_row_bounds(t.rows, d)) - 1 < d  # fewer TorchRec row blocks than ranks
            if p.table not in hottest or (kind == "row" and too_small):
                out.append(p)
            elif kind == "col":
                out.append(column_split(t))
            else:  # TorchRec's row blocks; see the module docstring
                out.append(torchrec_row_wise(t.name, t.rows, t.dim, d))
        return Plan(tuple(out), d, f"{kind}_split_hot", task.name)

    plans = {
        "all_on_rank0": Plan.from_ranks(task, [0] * n, "all_on_rank0"),
        "balanced": balanced,
        "imbalanced": Plan.from_ranks(task, ranks, f"imbalanced:{imbalance:.2f}"),
        "col_split_hot": with_hot("col"),
    }
    next_rank = 0
    plans["col_split_all"] = Plan(tuple(column_split(t) for t in task.tables), d, "col_split_all", task.name)
    plans["row_split_hot"] = with_hot("row")
    for plan in plans.values():
        validate(plan, task)
    return plans


def fit_comm(task: Task, args: argparse.Namespace) -> tuple[AlphaBeta, list[dict[str, Any]]]:
    if args.comm:
        return AlphaBeta.load(args.comm), []
    records = list(measure_all_to_all(task.num_devices, COMM_DIM_SUMS, batch_size=task.batch_size,
                                      backend="gloo", pin_cpus=args.pin_cpus))
    return fit_alpha_beta(records), [r.to_json() for r in records]


def kernel_loads(cost: PlanCost) -> list[float]:
    return [d.fwd_ms + d.bwd_ms for d in cost.devices]


def dmp_summary(res: VerifyResult) -> dict[str, float]:
    slowest = res.slowest_step_ms
    fwd = [max(r.fwd_ms[k] for r in res.ranks) for k in range(len(slowest))]
    return {"step_ms": float(np.median(slowest)), "fwd_ms": float(np.median(fwd)),
            "max_rank_median_ms": res.max_step_ms}


def spearman(a: list[float], b: list[float]) -> float:
    return metrics.spearman(a, b)


PROFILE_TOP = 40
"""Ops a rank reports from its profiled DMP steps (``VerifySettings.profile_top``) in these scripts."""


def print_profiles(ranks: dict[str, list[dict[str, Any]]], steps: int, top: int = 15) -> None:
    """Self CPU ms per profiled DMP step of the slowest rank's ops, plan by plan (``ranks``: plan name -> its
    verify JSON's ranks): the ``top`` ops by their largest time in any plan (an op outside a rank's reported
    ``PROFILE_TOP`` counts as 0 there)."""
    names = list(ranks)
    slowest = {n: {op["name"]: op["self_ms"] for op in max(r, key=lambda x: x["median_ms"])["profile"]}
               for n, r in ranks.items()}
    ops = sorted({op for per in slowest.values() for op in per}, key=lambda op: -max(
        per.get(op, 0.0) for per in slowest.values()))[:top]
    print(f"DMP's ops, self CPU ms per step of the slowest rank ({steps} profiled steps, torch.profiler; "
          "the profiler slows every op)")
    print("| op | " + " | ".join(names) + " |")
    print("|---|" + "---:|" * len(names))
    for op in ops:
        print(f"| {op} | " + " | ".join(f"{slowest[n].get(op, 0.0):.2f}" for n in names) + " |")
    totals = " | ".join(f"{sum(slowest[n].values()):.2f}" for n in names)
    print(f"| (the {PROFILE_TOP} reported ops' sum) | {totals} |")
    print()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=10, help="synthetic tables in the task")
    ap.add_argument("--devices", type=int, default=2, help="ranks (gloo CPU processes)")
    ap.add_argument("--pin-cpus", action="store_true",
                    help="pin every rank to a physical core of its own (the host needs one per rank)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--batch-size", type=int, default=2048, help="global batch (each rank feeds 1/D of it)")
    ap.add_argument("--rows-cap", type=int, default=100_000, help="rows per table, capped in the task")
    ap.add_argument("--balanced-planner", default="size_lookup_greedy")
    ap.add_argument("--hot", type=int, default=3, help="heaviest tables split in the *_split_hot plans")
    ap.add_argument("--imbalance", type=float, default=0.8, help="share of the load on rank 0 (imbalanced)")
    ap.add_argument("--steps", type=int, default=10, help="timed DMP steps")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--overhead-batch", type=int, default=32,
                    help="also time DMP at this tiny global batch (0: skip)")
    ap.add_argument("--comm", help="comm_model.json to use instead of a quick all-to-all fit on the D ranks")
    ap.add_argument("--plans", default=",".join(PLANS), help=f"comma list of {', '.join(PLANS)}")
    ap.add_argument("--profile-steps", type=int, default=0,
                    help="profile this many DMP steps a plan after the timed ones (torch.profiler) and print "
                         "the slowest rank's ops by self time, plan by plan")
    ap.add_argument("--json", help="write everything here")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    wanted = [p for p in args.plans.split(",") if p]
    unknown = [p for p in wanted if p not in PLANS]
    if unknown:
        ap.error(f"unknown plan(s) {unknown}; choose from {', '.join(PLANS)}")
    if not 0.5 < args.imbalance < 1.0:
        ap.error("--imbalance must be in (0.5, 1)")
    if args.devices < 2:
        ap.error("--devices must be at least 2")
    if args.profile_steps < 0:
        ap.error("--profile-steps must be >= 0")
    cores = len(physical_cores())
    if args.pin_cpus:
        try:  # the ranks' own check, before minutes of kernel timing rather than at the first collective
            rank_cpus(args.devices)
        except AutoshardError as e:
            ap.error(str(e))

    start = time.perf_counter()
    load_before = loadavg()

    def note(msg: str) -> None:
        print(f"[{time.perf_counter() - start:6.1f} s] {msg}", file=sys.stderr, flush=True)

    task = make_task(args.tables, args.devices, args.seed, args.batch_size, args.rows_cap)
    plans = {k: v for k, v in make_plans(task, args.balanced_planner, args.hot, args.imbalance,
                                         args.seed).items() if k in wanted}
    note(f"task {task.name}: " + ", ".join(f"{t.name} d{t.dim} r{t.rows} p{t.pooling_factor:.1f}"
                                           for t in task.tables))
    comm, comm_records = fit_comm(task, args)
    note(f"comm: alpha {comm.alpha_ms:.3f} ms, {comm.bytes_per_ms / 1e6:.3f} GB/s ({comm.source})")

    kernels = MeasureSettings(threads=1)
    vs = VerifySettings(steps=args.steps, warmup=args.warmup, rows_cap=None, threads=1, sync_steps=True,
                        timeout_s=300.0, device="cpu", pin_cpus=args.pin_cpus,
                        profile_steps=args.profile_steps, profile_top=PROFILE_TOP)
    rows: dict[str, dict[str, Any]] = {}
    for name, plan in plans.items():
        modelled = evaluate_plan(task, plan, kernels, comm, collectives="model")
        measured = compose(modelled.to_array(),
                           measure_plan_collectives(task, plan, comm, backend="gloo", pin_cpus=args.pin_cpus),
                           SOURCE)
        rows[name] = {"plan": plan.to_json(), "model_comm": modelled.to_json(),
                      "measured_comm": measured.to_json(), "model_ms": modelled.plan_ms,
                      "measured_ms": measured.plan_ms, "serial_kernels_ms": sum(kernel_loads(modelled)),
                      "kernel_ms_per_rank": kernel_loads(modelled),
                      "collectives_ms": {"model": modelled.collectives_ms,
                                         "measured": measured.collectives_ms}}
        note(f"{name}: step model {modelled.plan_ms:.2f} ms (model comm), {measured.plan_ms:.2f} ms "
             f"(measured comm); kernels per rank {[round(x, 2) for x in kernel_loads(modelled)]}")
    for name, plan in plans.items():
        res = verify_plan(plan, task, vs)
        rows[name]["dmp"] = dict(dmp_summary(res), matches=res.matches, max_abs_diff=res.max_abs_diff,
                                 slowest_step_ms=list(res.slowest_step_ms), verify=res.to_json())
        if args.overhead_batch:
            tiny = verify_plan(plan, replace(task, batch_size=args.overhead_batch),
                               replace(vs, profile_steps=0))
            rows[name]["dmp_tiny"] = dict(dmp_summary(tiny), batch_size=args.overhead_batch,
                                          matches=tiny.matches, verify=tiny.to_json())
        note(f"{name}: DMP step {rows[name]['dmp']['step_ms']:.2f} ms, matches {res.matches}")

    names = list(rows)
    ref = REFERENCE if REFERENCE in rows else names[0]
    cols = {"model": [rows[n]["model_ms"] for n in names],
            "measured": [rows[n]["measured_ms"] for n in names],
            "dmp": [rows[n]["dmp"]["step_ms"] for n in names],
            "serial": [rows[n]["serial_kernels_ms"] + rows[n]["collectives_ms"]["measured"] for n in names]}
    for n in names:
        rows[n]["ratio_to_" + ref] = {k: v[names.index(n)] / v[names.index(ref)] for k, v in cols.items()}
    rho = {"model_vs_dmp": spearman(cols["model"], cols["dmp"]),
           "measured_vs_dmp": spearman(cols["measured"], cols["dmp"]),
           "serial_vs_dmp": spearman(cols["serial"], cols["dmp"])}

    print(f"task {task.name}: {task.num_tables} tables, dims {sorted({t.dim for t in task.tables})}, "
          f"rows <= {args.rows_cap}, global batch {task.batch_size}, D={task.num_devices} gloo, 1 thread per "
          f"rank, {'each pinned to a physical core of its own' if args.pin_cpus else 'unpinned'} "
          f"({cores} physical cores)")
    print(f"comm fit: alpha {comm.alpha_ms:.3f} ms, {comm.bytes_per_ms / 1e6:.3f} GB/s")
    print()
    print(f"| plan | step model ms (model comm) | step model ms (measured comm) | DMP step ms | "
          f"ratio to {ref}: model / measured / DMP | DMP matches |")
    print("|---|---:|---:|---:|---|---|")
    for n in names:
        r, q = rows[n], rows[n]["ratio_to_" + ref]
        print(f"| {n} | {r['model_ms']:.2f} | {r['measured_ms']:.2f} | {r['dmp']['step_ms']:.2f} | "
              f"{q['model']:.2f} / {q['measured']:.2f} / {q['dmp']:.2f} | {r['dmp']['matches']} |")
    print()
    print(f"Spearman rank correlation with DMP's ordering: step model (model comm) "
          f"{rho['model_vs_dmp']:+.2f}, step model (measured comm) {rho['measured_vs_dmp']:+.2f}; "
          f"serial kernels + measured comm "
          f"{rho['serial_vs_dmp']:+.2f}")
    print()
    tiny_head = f"DMP ms @B={args.overhead_batch}" if args.overhead_batch else "DMP ms @tiny B"
    print(f"| plan | kernels ms per rank | collectives ms model / measured | serial kernels + measured "
          f"comm ms | DMP fwd ms | {tiny_head} |")
    print("|---|---|---|---:|---:|---:|")
    for n in names:
        r = rows[n]
        per_rank = " / ".join(f"{k:.2f}" for k in r["kernel_ms_per_rank"])
        tiny = f"{r['dmp_tiny']['step_ms']:.2f}" if "dmp_tiny" in r else "-"
        print(f"| {n} | {per_rank} | {r['collectives_ms']['model']:.2f} / "
              f"{r['collectives_ms']['measured']:.2f} | {cols['serial'][names.index(n)]:.2f} | "
              f"{r['dmp']['fwd_ms']:.2f} | {tiny} |")
    print()
    if args.profile_steps:
        print_profiles({n: rows[n]["dmp"]["verify"]["ranks"] for n in names}, args.profile_steps)
    load_after = loadavg()
    wall = time.perf_counter() - start
    print(f"load average before / after: {load_before} / {load_after}; wall {wall:.0f} s")
    info = host_info("cpu")
    if not args.pin_cpus:
        print(f"note: {task.num_devices} ranks unpinned on {cores} physical cores (--pin-cpus gives each one "
              "of its own); where ranks share cores, these DMP times prove the plans run (and match the "
              "unsharded model), not which plan is faster")
    if args.json:
        write_json(args.json, {
            "kind": "autoshard.bench.dmp_step", "version": 1,
            "command": " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]),
            "argv": sys.argv[1:], "host": info, "loadavg_before": load_before, "loadavg_after": load_after,
            "devices": task.num_devices, "pin_cpus": args.pin_cpus, "physical_cores": cores,
            "task": task.to_json(), "comm": comm.to_json(), "comm_records": comm_records,
            "measure_settings": {"threads": kernels.threads, "statistic": kernels.statistic.value,
                                 "repeats": kernels.repeats, "warmup": kernels.warmup},
            "reference_plan": ref, "spearman": rho, "plans": rows,
            "wall_s": time.perf_counter() - start})
    return 0


if __name__ == "__main__":
    sys.exit(main())
