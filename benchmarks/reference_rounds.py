"""How far the 'best heuristic' reference depends on the rounds it is picked and priced on: the oracle pick
and the cross-fitted pick of ``autoshard.bench.summary`` redone on every split of a run's measurement rounds.

Run: .venv/bin/python benchmarks/reference_rounds.py RESULTS... [--algos rl,search] [--splits 200]

RESULTS are bench results files (``DIR/bench/results.json``, or gzipped in ``benchmarks/runs/``) whose plans
kept their per-round device timings. Why: every learned planner on the 2-device suites returns a heuristic's
plan, and against the per-task cheapest heuristic (the *oracle* pick, a minimum of noisy costs) such a plan
scores 1 at best and above 1 whenever noise makes another heuristic look cheaper; picked on some rounds and
priced on the others (*cross-fitted*), the reference is whichever heuristic the noisy picking rounds
favoured, so that ratio sits below the true one. The true ratio (against the heuristic that is cheapest in
expectation) lies between the two, and both approach it as the rounds grow: this prints both as functions
of the rounds used, so a run with many rounds (``autoshard bench --rounds 9``) shows where they meet.

For each algorithm, geometric means over tasks of its cost over the reference's, every plan's cost recomposed
from the chosen rounds by the run's round statistic (``autoshard.pipeline.measure.restate``, collectives as
measured):

- ``oracle n``: on n of the R rounds, the reference the cheapest heuristic on those same rounds (averaged over
  splits; n = R is the bench's own ratio);
- ``pick k / price R-k``: the reference the cheapest heuristic on k rounds, both priced on the other R - k;
  the leave-one-out form (k = R - 1) is the cross-fitted ratio with the least picking noise.

The last two columns give a 95% bootstrap interval over tasks of the oracle (n = R) and of the leave-one-out
cross-fitted ratio. No measurement happens here.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from autoshard.bench.summary import geomean, is_heuristic
from autoshard.costs.metrics import geomean_interval
from autoshard.errors import AutoshardError
from autoshard.hardware.evaluator import UNRECORDED_ROUND_STATISTIC
from autoshard.io import read_json
from autoshard.pipeline.measure import restate
from autoshard.pipeline.results import TaskResult


def splits(rounds: int, k: int, limit: int, rng: np.random.Generator) -> list[tuple[int, ...]]:
    """Subsets of size ``k`` of ``range(rounds)``: all of them if at most ``limit``, else ``limit`` drawn."""
    if math.comb(rounds, k) <= limit:
        return list(itertools.combinations(range(rounds), k))
    return [tuple(sorted(rng.choice(rounds, size=k, replace=False))) for _ in range(limit)]


class TaskRounds:
    """One task's plans, their costs recomposed from any subset of its rounds (cached)."""

    def __init__(self, task: TaskResult, statistic: str):
        self.results = {r.algorithm: r for r in task.results if r.ok and r.measured is not None}
        counts = {len(r.device_rounds_ms) for r in self.results.values()}
        if len(counts) != 1 or min(counts) < 2:
            raise AutoshardError(f"task {task.task.name}: plans without equal per-round device timings "
                                 f"(rounds {sorted(counts)}); re-run 'autoshard bench' (stop 19 or later)")
        self.rounds = counts.pop()
        self.statistic = statistic
        self.heuristics = [a for a in self.results if is_heuristic(a)]
        self._cache: dict[tuple[str, tuple[int, ...]], float] = {}

    def cost(self, algorithm: str, rounds: tuple[int, ...]) -> float:
        key = (algorithm, rounds)
        if key not in self._cache:
            measured = restate(self.results[algorithm], self.statistic, rounds).measured
            assert measured is not None
            self._cache[key] = measured.plan_ms
        return self._cache[key]

    def cheapest(self, rounds: tuple[int, ...]) -> str:
        return min(self.heuristics, key=lambda h: (self.cost(h, rounds), h))


def analyse(results: dict[str, Any], algos: list[str], limit: int, seed: int = 0) -> dict[str, Any]:
    statistic = results.get("round_statistic", UNRECORDED_ROUND_STATISTIC)
    tasks = [TaskRounds(TaskResult.from_json(t), statistic) for t in results["tasks"]]
    rounds = tasks[0].rounds
    if any(t.rounds != rounds for t in tasks):
        raise AutoshardError("tasks measured in different numbers of rounds; give one run's results")
    rng = np.random.default_rng(seed)
    subsets = {n: splits(rounds, n, limit, rng) for n in range(1, rounds + 1)}
    everything = tuple(range(rounds))
    out: dict[str, Any] = {"rounds": rounds, "statistic": statistic, "tasks": len(tasks), "algos": {}}
    for a in algos:
        if not all(a in t.results for t in tasks):
            continue
        oracle = {}
        for n, subs in subsets.items():
            oracle[n] = geomean([math.exp(np.mean([math.log(t.cost(a, s) / t.cost(t.cheapest(s), s))
                                                   for s in subs])) for t in tasks])
        cross = {}
        loo = []
        for k in range(1, rounds):
            per_task = []
            for t in tasks:
                logs = []
                for pick in subsets[k]:
                    price = tuple(i for i in everything if i not in pick)
                    ref = t.cheapest(pick)
                    logs.append(math.log(t.cost(a, price) / t.cost(ref, price)))
                per_task.append(math.exp(np.mean(logs)))
            cross[k] = geomean(per_task)
            if k == rounds - 1:
                loo = per_task
        full = [t.cost(a, everything) / t.cost(t.cheapest(everything), everything) for t in tasks]
        out["algos"][a] = {"oracle": oracle, "cross": cross, "oracle_interval": geomean_interval(full),
                           "loo_interval": geomean_interval(loo)}
    return out


def render(name: str, out: dict[str, Any]) -> str:
    r = out["rounds"]
    head = (["algorithm"] + [f"oracle {n}" for n in range(1, r + 1)]
            + [f"pick {k} / price {r - k}" for k in range(1, r)]
            + [f"oracle {r} [95%]", f"pick {r - 1} / price 1 [95%]"])
    title = (f"{name}: {out['tasks']} tasks, {r} rounds, statistic {out['statistic']}; ratio to the best "
             "heuristic (geometric mean over tasks)")
    lines = [title, "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for a, v in out["algos"].items():
        cells = [a] + [f"{v['oracle'][n]:.3f}" for n in range(1, r + 1)]
        cells += [f"{v['cross'][k]:.3f}" for k in range(1, r)]
        cells += [f"[{lo:.3f}, {hi:.3f}]" for lo, hi in (v["oracle_interval"], v["loo_interval"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="+", help="bench results files (results.json, or .json.gz)")
    p.add_argument("--algos", default="rl,neuroshard,search,ilp,lookup_greedy,size_lookup_greedy,torchrec",
                   help="algorithms to report (comma-separated; those missing from a task are skipped)")
    p.add_argument("--splits", type=int, default=200,
                   help="round subsets per size: all of them up to this many, else this many drawn")
    args = p.parse_args(argv)
    try:
        if args.splits < 1:
            raise AutoshardError(f"--splits {args.splits}: give a positive number")
        algos = [a for a in args.algos.split(",") if a.strip()]
        for f in args.results:
            path = Path(f)
            if not path.is_file():
                raise AutoshardError(f"{path}: no such file; give a bench's results.json or an archived run")
            try:
                results = read_json(path)
                out = analyse(results, algos, args.splits)
            except (KeyError, TypeError, ValueError, IndexError) as e:
                raise AutoshardError(f"{path}: not a finished bench's results "
                                     f"({type(e).__name__}: {e})") from None
            print(render(str(path), out) + "\n")
    except AutoshardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
