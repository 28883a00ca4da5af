"""The bench's own plans in real TorchRec steps: every distinct plan of an archived 2-device bench task run
in DMP, and the evaluator's order of them against DMP's.

    .venv/bin/python benchmarks/dmp_tasks.py benchmarks/runs/s41-intel-dlrm-20-2-r6.json.gz --pin-cpus \
        --tasks 0,1,2 --json dmp_tasks.json

For each chosen task of RUN (``autoshard bench``'s results, archived or not): the task's distinct plans
(algorithms that returned the same plan share a row), each run in DMP on the task's D gloo ranks exactly as
``benchmarks/dmp_step.py`` runs its plans (``verify_plan`` with a barrier before every step, one thread a
rank, identical weights checked first; the step's time the slowest rank's, median of ``--steps``), with the
bench's own rows cap, so DMP's tables and lookups are the ones the evaluator timed. Printed per task: each
plan's evaluator step (the archived measurement) and DMP step, each over the task's best heuristic by that
measure; then over the tasks: the Spearman correlation of the two orders, how often the two name the same best
heuristic, and each learned planner's plan over the best heuristic in both (geometric means).

Needs a core per rank to mean anything (``--pin-cpus``; ``benchmarks/rank_cores.py`` says whether the host
has them): on ranks that share a core DMP's step follows the sum of the ranks' work, not its max.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from autoshard.bench.summary import Comparison, best_fixed_heuristic, compare, is_heuristic
from autoshard.costs import metrics
from autoshard.errors import AutoshardError
from autoshard.host import host_info
from autoshard.io import read_json, write_json
from autoshard.plan import Plan
from autoshard.tasks import Task
from autoshard.torchrec.verify import VerifySettings, verify_plan

sys.path.insert(0, str(Path(__file__).resolve().parent))  # dmp_step.py, beside this script
from dmp_step import PROFILE_TOP, dmp_summary, print_profiles

KIND = "autoshard.bench.dmp_tasks"


def distinct_plans(task_result: dict) -> list[tuple[list[str], dict, float]]:
    """(algorithms, plan JSON, evaluator's measured step ms) per distinct plan of an archived task, in the
    order the algorithms first appear; results without a plan or a measurement are left out."""
    out: list[tuple[list[str], dict, float]] = []
    index: dict[str, int] = {}
    for r in task_result["results"]:
        if not r.get("plan") or not r.get("measured"):
            continue
        key = repr(r["plan"]["tables"])
        if key in index:
            out[index[key]][0].append(r["algorithm"])
        else:
            index[key] = len(out)
            out.append(([r["algorithm"]], r["plan"], float(r["measured"]["plan_ms"])))
    return out


def parse_tasks(text: str, count: int) -> list[int]:
    """'0,2,5' -> [0, 2, 5] (all ``count`` when empty); one-line error on anything else."""
    if not text:
        return list(range(count))
    try:
        picked = [int(x) for x in text.split(",")]
    except ValueError:
        raise AutoshardError(f"--tasks {text!r}: use task indices, e.g. 0,1,2") from None
    if bad := [i for i in picked if not 0 <= i < count]:
        raise AutoshardError(f"--tasks: index {bad[0]} out of range; the run has {count} tasks")
    return picked


def best_heuristic(rows: list[dict], key: str) -> dict:
    """The row, among those that hold a heuristic's plan, with the lowest ``key``."""
    return min((r for r in rows if any(is_heuristic(a) for a in r["algorithms"])), key=lambda r: r[key])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="bench results (results.json or an archived .json.gz) of a 2-device suite; "
                                "or a --json result of this script, to print its summary again")
    ap.add_argument("--tasks", default="", help="task indices, comma-separated (default all)")
    ap.add_argument("--steps", type=int, default=20, help="timed DMP steps a plan (default 20)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--pin-cpus", action="store_true", help="every rank on a physical core of its own")
    ap.add_argument("--profile-steps", type=int, default=0,
                    help="profile this many DMP steps a plan after the timed ones (torch.profiler) and print "
                         "each task's ops of the slowest rank, plan by plan (default 0: off)")
    ap.add_argument("--json", help="write everything here")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    try:
        run = read_json(args.run)
        if isinstance(run, dict) and run.get("kind") == KIND:
            summarise(run["tasks"], run.get("suite") or Path(run["run"]).name)
            return 0
        if not isinstance(run, dict) or run.get("kind") != "autoshard.bench":
            raise AutoshardError(f"{args.run} is not a bench result (autoshard bench's results.json)")
        picked = parse_tasks(args.tasks, len(run["tasks"]))
        rows_cap = run["measure_settings"]["rows_cap"]
        settings = VerifySettings(steps=args.steps, warmup=args.warmup, rows_cap=rows_cap, threads=1,
                                  sync_steps=True, timeout_s=900.0, device="cpu", pin_cpus=args.pin_cpus,
                                  profile_steps=args.profile_steps, profile_top=PROFILE_TOP)
        tasks_out = []
        for i in picked:
            task = Task.from_json(run["tasks"][i]["task"])
            rows = []
            for algos, plan_json, measured in distinct_plans(run["tasks"][i]):
                res = verify_plan(Plan.from_json(plan_json), task, settings)
                if not res.matches:
                    raise AutoshardError(f"task {i}: {algos[0]}'s plan does not match the unsharded module "
                                         "in DMP")
                rows.append({"algorithms": algos, "evaluator_ms": measured, **dmp_summary(res),
                             **({"ranks": res.to_json()["ranks"]} if args.profile_steps else {})})
                print(f"[{time.perf_counter() - start:6.1f} s] task {i}: {'/'.join(algos)}: evaluator "
                      f"{measured:.2f} ms, DMP {rows[-1]['step_ms']:.2f} ms", file=sys.stderr, flush=True)
            tasks_out.append({"index": i, "task": task.name, "plans": rows})
    except AutoshardError as e:
        print(f"dmp_tasks.py: error: {e}", file=sys.stderr)
        return 2
    summarise(tasks_out, run["suite"]["name"])
    if args.profile_steps:
        for t in tasks_out:
            print(f"\ntask {t['index']}: ", end="")
            print_profiles({"/".join(r["algorithms"]): r["ranks"] for r in t["plans"]}, args.profile_steps)
    if args.json:
        write_json(args.json, {"kind": KIND, "version": 1, "run": args.run, "suite": run["suite"]["name"],
                               "command": " ".join(sys.argv), "settings": {"steps": args.steps,
                               "warmup": args.warmup, "rows_cap": rows_cap, "pin_cpus": args.pin_cpus,
                               "profile_steps": args.profile_steps},
                               "tasks": tasks_out, "host": host_info("cpu"),
                               "wall_s": time.perf_counter() - start})
    return 0


def summarise(tasks: list[dict], suite: str) -> None:
    """The per-task tables and the verdict over tasks (module docstring)."""
    same_best, rhos = 0, []
    for t in tasks:
        rows = t["plans"]
        ev_pick, dmp_pick = best_heuristic(rows, "evaluator_ms"), best_heuristic(rows, "step_ms")
        ev_best, dmp_best = ev_pick["evaluator_ms"], dmp_pick["step_ms"]
        print(f"\ntask {t['index']} ({t['task']})\n")
        print("| plans of | evaluator ms | DMP ms | evaluator / best heuristic | DMP / best heuristic |")
        print("|---|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {', '.join(r['algorithms'])} | {r['evaluator_ms']:.2f} | {r['step_ms']:.2f} | "
                  f"{r['evaluator_ms'] / ev_best:.3f} | {r['step_ms'] / dmp_best:.3f} |")
        same_best += ev_pick is dmp_pick
        if len(rows) > 2:
            rhos.append(metrics.spearman([r["evaluator_ms"] for r in rows], [r["step_ms"] for r in rows]))
    orders = (f"; Spearman of their orders of a task's plans: median {np.median(rhos):+.2f}, range "
              f"{min(rhos):+.2f} to {max(rhos):+.2f}" if rhos else "")
    print(f"\nOver {len(tasks)} task(s) of {suite}: the evaluator and DMP name the same best heuristic plan "
          f"on {same_best}{orders}")
    by = {key: [{a: (r[key], ()) for r in t["plans"] for a in r["algorithms"]} for t in tasks]
          for key in ("evaluator_ms", "step_ms")}
    fixed = {key: best_fixed_heuristic(costs) for key, costs in by.items()}
    heuristics = sorted({a for costs in by["step_ms"] for a in costs if is_heuristic(a)})
    learned = sorted({a for costs in by["step_ms"] for a in costs if not is_heuristic(a)})
    print(f"best fixed heuristic (the lowest geometric mean over the tasks): by the evaluator "
          f"{fixed['evaluator_ms']}, by DMP {fixed['step_ms']}")
    if not learned:
        return
    print("\nEach learned planner's plan over the best heuristic (per task) and over the best fixed "
          "heuristic, geometric mean [95% bootstrap interval over the tasks], by each measure:\n")
    print("| learned planner | / best heuristic: evaluator | DMP | / best fixed: evaluator | DMP |")
    print("|---|---|---|---|---|")
    for a in learned:
        cells = [compare(by[key], a, heuristics) for key in by] + [compare(by[key], a, [fixed[key]])
                                                                    for key in by]
        print(f"| {a} | " + " | ".join(_cell(c) for c in cells) + " |")


def _cell(c: Comparison) -> str:
    if c.ratio is None:
        return "-"
    return f"{c.ratio:.3f}" + (f" [{c.low:.3f}, {c.high:.3f}]" if c.low is not None else "")


if __name__ == "__main__":
    sys.exit(main())
