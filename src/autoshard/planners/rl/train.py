"""Train a placement policy on the estimated MDP with REINFORCE (CleanRL style: read it top to bottom).

Each iteration draws a few training tasks; on each, ``samples_per_task`` episodes are sampled from the current
policy side by side, and each episode's advantage is the mean normalised plan cost of the OTHER samples of the
same task minus its own (the leave-one-out baseline of Kool et al. 2019, "Buy 4 REINFORCE samples, get a
baseline for free"), which needs no critic and adapts to each task's difficulty. The loss is the policy
gradient over every step of the episode plus an entropy bonus; masked devices get probability zero in both
sampling and the loss. Every ``eval_every`` iterations the greedy policy is scored on held-out tasks, against
every heuristic by the same cost model, and the checkpoint (with optimizer state, so training can resume
exactly: each iteration's randomness is seeded by (seed, iteration)) is written atomically.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import torch

from autoshard.costs.base import CostModel, plan_cost
from autoshard.errors import AutoshardError, InfeasibleError
from autoshard.planners.base import PlannerOptions, make_planner
from autoshard.planners.rl.env import PlacementEnv, TaskContext
from autoshard.planners.rl.policy import PlacementPolicy, PolicyConfig, TrainedPolicy, run_episodes
from autoshard.tables.table import FeatureNormalizer
from autoshard.tasks import Task
from autoshard.threads import torch_threads

logger = logging.getLogger(__name__)

HEURISTICS = ("random", "round_robin", "dim_greedy", "lookup_greedy", "size_greedy", "size_lookup_greedy")
"""The heuristic planners (planners/heuristics.py) a policy is compared against."""

INFEASIBLE_COST_OVER_D = 1.0
"""A sampled episode that runs out of memory scores D + this (in units of S): worse than any feasible plan of
an additive cost, whose worst (everything on one device) is ~D."""


@dataclass(frozen=True)
class TrainConfig:
    """Settings of one training run (stored in the checkpoint)."""

    iterations: int = 300
    """Policy-gradient updates."""
    tasks_per_iteration: int = 4
    """Training tasks drawn (without replacement, when there are enough) per update."""
    samples_per_task: int = 16
    """Episodes sampled per task per update; >= 2, as each one's baseline is the mean of the others."""
    learning_rate: float = 1e-3
    """Adam step size."""
    entropy_coef: float = 0.01
    """Weight of the mean per-step entropy bonus (keeps exploring early on)."""
    max_grad_norm: float = 1.0
    """Gradient clipping norm."""
    hidden: int = 64
    """Width of the policy network's hidden layers."""
    eval_every: int = 25
    """Iterations between evaluations on the held-out tasks (and checkpoint writes)."""
    seed: int = 0
    """Seeds the network initialisation and, with the iteration number, every iteration's draws."""

    def __post_init__(self) -> None:
        for f in ("iterations", "tasks_per_iteration", "eval_every", "hidden"):
            if getattr(self, f) <= 0:
                raise AutoshardError(f"training setting {f}={getattr(self, f)} must be positive")
        if self.samples_per_task < 2:
            raise AutoshardError(f"samples_per_task={self.samples_per_task}: "
                                 "need at least 2 for the baseline")
        if not (self.learning_rate > 0 and math.isfinite(self.learning_rate)):
            raise AutoshardError(f"learning_rate={self.learning_rate} must be a positive number")

    @staticmethod
    def from_dict(d: dict[str, Any]) -> TrainConfig:
        names = {f.name for f in fields(TrainConfig)}
        return TrainConfig(**{k: v for k, v in d.items() if k in names})


def cost_model_info(model: CostModel, spec: str | None) -> dict[str, Any]:
    """What to record about the cost model a policy is trained against."""
    info: dict[str, Any] = {"name": model.name, "spec": spec}
    describe = getattr(model, "describe_hardware", None)  # LearnedCostModel: the host it was measured on
    if callable(describe):
        info["hardware"] = str(describe())
    return info


def heuristic_costs(task: Task, model: CostModel, seed: int = 0) -> dict[str, float]:
    """Predicted plan cost (ms) of every heuristic on ``task``; a heuristic that finds no room is left out."""
    out = {}
    for name in HEURISTICS:
        try:
            plan = make_planner(name, PlannerOptions(seed=seed)).plan(task)
        except InfeasibleError:
            continue
        out[name] = plan_cost(model, task, plan).plan_ms
    return out


def greedy_cost(net: PlacementPolicy, ctx: TaskContext, model: CostModel) -> float:
    """Predicted plan cost (ms) of the greedy policy on a task; inf if it ran out of memory."""
    env = PlacementEnv(ctx, model, 1)
    run_episodes(net, env, None, greedy_first=1)
    return math.inf if env.failed[0] else float(env.plan_costs()[0])


def evaluate(net: PlacementPolicy, contexts: Sequence[TaskContext], model: CostModel,
             baselines: Sequence[dict[str, float]]) -> dict[str, float]:
    """Geometric mean over tasks of greedy policy cost / best heuristic cost, and the count of failures."""
    ratios, failures = [], 0
    for ctx, base in zip(contexts, baselines):
        c = greedy_cost(net, ctx, model)
        if not math.isfinite(c) or not base:
            failures += not math.isfinite(c)
            continue
        ratios.append(c / min(base.values()))
    geo = float(np.exp(np.mean(np.log(ratios)))) if ratios else math.nan
    return {"eval_ratio_to_best_heuristic": geo, "eval_failures": failures}


def _policy_loss(net: PlacementPolicy, ctx: TaskContext, model: CostModel, samples: int,
                 rng: np.random.Generator, entropy_coef: float) -> tuple[torch.Tensor, float]:
    """Sample ``samples`` episodes of one task and return the REINFORCE loss and their mean normalised
    cost."""
    env = PlacementEnv(ctx, model, samples)
    ro = run_episodes(net, env, rng, greedy_first=0, record=True)
    cost = ro.plan_ms / ctx.scale
    cost[env.failed] = ctx.task.num_devices + INFEASIBLE_COST_OVER_D
    baseline = (cost.sum() - cost) / (samples - 1)
    advantage = torch.from_numpy(baseline - cost).float()  # > 0: better than the other samples

    logits = net(torch.from_numpy(ro.devices), torch.from_numpy(ro.tables), torch.from_numpy(ro.masks))
    logp = torch.log_softmax(logits, dim=-1)  # (T, B, D); masked devices have probability exactly 0
    taken = logp.gather(-1, torch.from_numpy(ro.actions).unsqueeze(-1)).squeeze(-1)  # (T, B)
    valid = torch.from_numpy(~ro.forced).float()
    n = valid.sum().clamp(min=1.0)
    pg_loss = -(advantage.unsqueeze(0) * taken * valid).sum() / n
    entropy = (-(logp.exp() * logp).sum(-1) * valid).sum() / n
    return pg_loss - entropy_coef * entropy, float(cost.mean())


def train(
    model: CostModel,
    train_tasks: Sequence[Task],
    config: TrainConfig = TrainConfig(),
    eval_tasks: Sequence[Task] = (),
    cost_model_spec: str | None = None,
    checkpoint_path: str | None = None,
    resume: TrainedPolicy | None = None,
    progress: Callable[[int, dict[str, float]], None] | None = None,
) -> TrainedPolicy:
    """Train a policy against ``model`` on ``train_tasks``; see the module docstring.

    ``resume`` continues a checkpoint written by an interrupted run of the same config (its normaliser and
    optimizer state are kept). ``progress(iteration, metrics)`` is called after every update. Runs on one
    torch thread (``autoshard.threads``), restoring the caller's setting after.
    """
    with torch_threads():
        return _train(model, train_tasks, config, eval_tasks, cost_model_spec, checkpoint_path, resume,
                      progress)


def _train(model: CostModel, train_tasks: Sequence[Task], config: TrainConfig, eval_tasks: Sequence[Task],
           cost_model_spec: str | None, checkpoint_path: str | None, resume: TrainedPolicy | None,
           progress: Callable[[int, dict[str, float]], None] | None) -> TrainedPolicy:
    if not train_tasks:
        raise AutoshardError("no training tasks; generate some with 'autoshard tasks'")
    # Normaliser fitted once on the training tables (unique by name), stored with the policy.
    if resume is not None:
        normalizer = resume.normalizer
    else:
        unique = {t.name: t for task in train_tasks for t in task.tables}
        normalizer = FeatureNormalizer.fit(unique.values())

    torch.manual_seed(config.seed)
    net = PlacementPolicy(PolicyConfig(hidden=config.hidden))
    optimizer = torch.optim.Adam(net.parameters(), lr=config.learning_rate)
    start, history = 0, []
    if resume is not None:
        saved = TrainConfig.from_dict(resume.train_config)
        if {**asdict(saved), "iterations": 0} != {**asdict(config), "iterations": 0}:
            raise AutoshardError("the checkpoint was trained with other settings; "
                                 "resume with the same settings (only --iterations may change) "
                                 "or train a new policy")
        net.load_state_dict(resume.net.state_dict())
        if "optimizer" in resume.state:
            optimizer.load_state_dict(resume.state["optimizer"])
        start = int(resume.state.get("iteration", 0))
        history = list(resume.metrics.get("history", []))

    train_ctx = [TaskContext.build(t, model, normalizer) for t in train_tasks]
    eval_ctx = [TaskContext.build(t, model, normalizer) for t in eval_tasks]
    eval_base = [heuristic_costs(t, model, config.seed) for t in eval_tasks]
    info = cost_model_info(model, cost_model_spec)

    def snapshot(iteration: int) -> TrainedPolicy:
        return TrainedPolicy(net, normalizer, info, asdict(config),
                             {"history": history, "last": history[-1] if history else {}},
                             {"iteration": iteration, "optimizer": optimizer.state_dict()})

    began = time.perf_counter()
    for it in range(start, config.iterations):
        rng = np.random.default_rng([config.seed, it])
        k = min(config.tasks_per_iteration, len(train_ctx))
        picks = rng.choice(len(train_ctx), size=k, replace=False)
        net.train()
        optimizer.zero_grad()
        costs = []
        for j in picks:
            loss, c = _policy_loss(net, train_ctx[j], model, config.samples_per_task, rng,
                                   config.entropy_coef)
            (loss / k).backward()
            costs.append(c)
        torch.nn.utils.clip_grad_norm_(net.parameters(), config.max_grad_norm)
        optimizer.step()
        net.eval()
        metrics: dict[str, float] = {"iteration": it + 1, "train_cost_over_s": float(np.mean(costs))}
        if (it + 1) % config.eval_every == 0 or it + 1 == config.iterations:
            if eval_ctx:
                metrics.update(evaluate(net, eval_ctx, model, eval_base))
            metrics["elapsed_s"] = time.perf_counter() - began
            history.append(metrics)
            logger.info("iteration %d: %s", it + 1, metrics)
            if checkpoint_path:
                snapshot(it + 1).save(checkpoint_path)
        if progress is not None:
            progress(it + 1, metrics)
    net.eval()
    return snapshot(max(start, config.iterations))
