"""Where rl's greedy episode spends its time, piece by piece, without a profiler (which slows the small calls
most and so misstates their share).

One greedy episode of the shipped policy on a task (or the first of a tasks file), priced by a cost model at
its risk quantile as ``--algo rl`` does; timed: the policy network, the model's pricing of the candidate
devices (``costs_if_added``), adding the placed table, the observation, and the episode in all. Stop 47
(docs/benchmarks.md) ran it on stop 45's 856-table x 128-device task.

    .venv/bin/python benchmarks/rl_episode_time.py --task out/s45/big/task.json --repeats 2
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from typing import Any

import numpy as np
import torch

from autoshard.costs.learned.risk import risk_priced
from autoshard.costs.loading import SHIPPED_COST_MODEL, SHIPPED_POLICY, load_cost_model
from autoshard.errors import AutoshardError
from autoshard.planners.rl.env import PlacementEnv, TaskContext
from autoshard.planners.rl.policy import PolicyScorer, TrainedPolicy, obs_tensors
from autoshard.tasks import load_tasks


class _Timed:
    """Wraps an object so calls of the named methods add their wall time to ``totals``."""

    def __init__(self, inner: Any, totals: dict[str, float], names: tuple[str, ...]) -> None:
        self._inner, self._totals, self._names = inner, totals, names

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in self._names:
            return attr

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return attr(*args, **kwargs)
            finally:
                self._totals[name] += time.perf_counter() - t0
        return timed


def episode(task: Any, model: Any, policy: TrainedPolicy) -> dict[str, float]:
    """Seconds per piece of one greedy episode."""
    totals: dict[str, float] = defaultdict(float)
    start = time.perf_counter()
    ctx = TaskContext.build(task, model, policy.normalizer)
    totals["context"] = time.perf_counter() - start
    env = PlacementEnv(ctx, model, num_envs=1)
    obs = env.reset()
    env.devices = _Timed(env.devices, totals, ("costs_if_added", "add"))
    observe = env._observe

    def timed_observe() -> Any:
        t0 = time.perf_counter()
        out = observe()
        totals["observe"] += time.perf_counter() - t0
        return out
    env._observe = timed_observe  # type: ignore[method-assign]
    score = PolicyScorer(policy.net)  # as ``run_episodes`` decodes
    with torch.no_grad():
        while obs is not None:
            t0 = time.perf_counter()
            logits = score(*obs_tensors(obs)).numpy().astype(np.float64)
            totals["policy"] += time.perf_counter() - t0
            obs = env.step(logits.argmax(axis=1))
    totals["episode"] = time.perf_counter() - start
    return dict(totals)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", required=True, help="a task or tasks JSON file (the first task is used)")
    ap.add_argument("--cost-model", default=str(SHIPPED_COST_MODEL))
    ap.add_argument("--policy", default=str(SHIPPED_POLICY))
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args(argv)
    try:
        if args.repeats < 1:
            raise AutoshardError(f"--repeats {args.repeats} must be >= 1")
        task = load_tasks(args.task)[0]
        base = load_cost_model(args.cost_model, allow_other_hardware=True)
        model = risk_priced(base, getattr(base, "risk_k", 0.0))
        policy = TrainedPolicy.load(args.policy)
    except AutoshardError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{task.num_tables} tables on {task.num_devices} devices, {model.name}")
    for r in range(args.repeats):
        t = episode(task, model, policy)
        print(f"run {r + 1}: " + ", ".join(f"{k} {v:.3f} s" for k, v in t.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
