"""The training stages: the learned cost model fitted on the profile, and the rl policy trained against it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from autoshard.costs.comm import AlphaBeta
from autoshard.costs.learned import LearnedCostModel
from autoshard.costs.learned.fine_tune import FineTuneOptions, fine_tune
from autoshard.costs.learned.training import TrainOptions
from autoshard.costs.loading import SHIPPED_COST_MODEL
from autoshard.errors import AutoshardError
from autoshard.hardware.comm import COMM_MODEL_FILE
from autoshard.hardware.profiler import load_dataset
from autoshard.pipeline.cache import file_key
from autoshard.pipeline.context import Context
from autoshard.pipeline.models import MEASURED_SPEC, load_cost_model
from autoshard.pipeline.profiling import stage_profile
from autoshard.planners.rl.policy import TrainedPolicy
from autoshard.planners.rl.train import TrainConfig, train
from autoshard.tasks import load_tasks

COST_MODEL_RECIPE = 2
"""Version of the cost model's training recipe, part of the cost_model stage key so that a cached model made
by an older recipe is retrained (2: refit on all records, lr 1e-2, weight decay 1e-3; see training.py)."""


def cost_train_options(ctx: Context) -> TrainOptions:
    """How the suite trains (and the refresh loop refits) its cost model."""
    t = ctx.suite.training
    return TrainOptions(seed=ctx.suite.seed, max_epochs=t.cost_epochs,
                        **{"ensemble": t.cost_ensemble, **t.extra.get("cost_model", {})})


def cost_base_path(ctx: Context) -> str | None:
    """The checkpoint the suite fine-tunes its cost model from (``TrainingConfig.cost_base``), or None."""
    base = ctx.suite.training.cost_base
    return str(SHIPPED_COST_MODEL) if base == "default" else base


def fit_cost_model(ctx: Context, dataset: Any, progress: Callable[[int, dict[str, float]], None] | None = None
                   ) -> LearnedCostModel:
    """The suite's cost model on a profile ``dataset``: its ``cost_base`` fine-tuned on the records (adapted
    to this machine first where the base describes another: ``fine_tune(..., adapt_hardware=True)``), or,
    without a base or where the base cannot take them (too few records, an unreadable checkpoint), a model
    fitted from scratch (``cost_train_options``). Why a base: on the quick suite a model fitted on its 60
    profiled shards ranked near-equal heuristic plans by chance (stop 26: 1 of 3 quickstarts clearly worse on
    a task), while the shipped model fine-tuned on the same records picked as well as the best fixed
    heuristic on both archived runs (docs/benchmarks.md, stop 27); and on another machine the adapted default
    ranks held-out devices better than a fit from scratch on a few dozen (stop 28)."""
    path = cost_base_path(ctx)
    if path is not None:
        try:
            base = LearnedCostModel.load(path, allow_other_hardware=True)
            tuned = fine_tune(base, dataset, FineTuneOptions(seed=ctx.suite.seed), progress,
                              adapt_hardware=True)
            adapted = tuned.info["fine_tuned"].get("adapted_from")
            if adapted:
                ctx.say(f"[cost_model] {path} describes {base.describe_hardware()}: adapted to this machine "
                        f"(level x{adapted['fwd_scale']:.3g} forward, x{adapted['bwd_scale']:.3g} backward, "
                        "then fine-tuned)")
            return tuned.with_comm(dataset.comm) if dataset.comm is not None else tuned
        except AutoshardError as e:
            ctx.say(f"[cost_model] not fine-tuning {path} ({e}); fitting a model from scratch")
    return LearnedCostModel.fit(dataset, cost_train_options(ctx), progress)


def policy_train_config(ctx: Context, iterations: int) -> TrainConfig:
    """How the suite trains (and the refresh loop retrains) its rl policy, for ``iterations`` in all."""
    return TrainConfig.from_dict({"iterations": iterations, "seed": ctx.suite.seed,
                                  "eval_every": max(1, min(25, ctx.suite.training.policy_iterations)),
                                  **ctx.suite.training.extra.get("policy", {})})


def stage_cost_model(ctx: Context, k_split: str, k_comm: str) -> tuple[str, str]:
    """The planning cost model: the user's checkpoint, or one trained here; (key, spec for load).

    Trained here: the profile stage times random shards on the real kernels, then ``fit_cost_model`` on
    those records writes ``cost_model.pt``."""
    if ctx.config.cost_model_path:
        spec = ctx.config.cost_model_path
        ctx.skip("profile", "cost model given (--cost-model)")
        ctx.skip("cost_model", "cost model given (--cost-model)")
        return file_key(spec), spec
    k_profile = stage_profile(ctx, k_split)
    s, t = ctx.suite, ctx.suite.training
    costs = ctx.out / "costs"
    path = ctx.out / "cost_model.pt"
    settings = {"epochs": t.cost_epochs, "seed": s.seed, "extra": t.extra.get("cost_model", {}),
                "comm": ctx.config.comm_path, "recipe": COST_MODEL_RECIPE, "ensemble": t.cost_ensemble}
    base = cost_base_path(ctx)
    if base is not None:
        settings["base"] = file_key(base)

    def make(resume: bool) -> None:
        options = cost_train_options(ctx)
        given = ctx.config.comm_path
        if given and given != "default":
            # The model's comm term is the same alpha-beta as the evaluator's.
            AlphaBeta.load(given).save(str(costs / COMM_MODEL_FILE))
        # the scored pass, then the refit on all records; or each member's fine-tuning
        budget = options.epoch_budget if base is None else t.cost_ensemble * FineTuneOptions().max_epochs
        epochs = [0]

        def progress(epoch: int, h: dict[str, float]) -> None:
            epochs[0] += 1
            ctx.progress("cost model epochs", min(epochs[0], budget), budget)

        model = fit_cost_model(ctx, load_dataset(costs), progress)
        model.save(path)
        ctx.progress("cost model epochs", budget, budget)
        tuned = model.info.get("fine_tuned")
        if tuned:
            ctx.say(f"[cost_model] fine-tuned {base} on {tuned['records']} records: validation fwd+bwd "
                    f"MAPE {tuned['val_mape_pct_before']:.1f}% -> {tuned['val_mape_pct_after']:.1f}%")
        metrics = model.info.get("metrics", {})
        if metrics and not tuned:
            ctx.say(f"[cost_model] held-out tables: {json.dumps(metrics)[:300]}")

    key = ctx.stage("cost_model", settings, [k_profile, k_comm], ["cost_model.pt"], make,
                    lambda: _unreadable(lambda: LearnedCostModel.load(str(path))))
    return key, str(path)


def stage_policy(ctx: Context, k_train: str, k_cost: str, cost_spec: str) -> tuple[str, str | None]:
    """The rl policy: the user's checkpoint, or one trained here on the train tasks against the planning
    cost model (``autoshard.planners.rl.train``, resumed from its checkpoint after an interruption)."""
    if ctx.config.policy_path:
        ctx.skip("policy", "policy given (--policy)")
        return file_key(ctx.config.policy_path), ctx.config.policy_path
    if ctx.config.algorithms is not None and "rl" not in ctx.config.algorithms:
        ctx.skip("policy", "rl not among --algos")
        return "none", None
    if cost_spec == MEASURED_SPEC:
        ctx.skip("policy", "training against the real kernels (--cost-model measured) is too slow; "
                           "pass --policy")
        return "none", None
    s = ctx.suite
    iterations = s.training.policy_iterations
    settings = {"iterations": iterations, "seed": s.seed, "extra": s.training.extra.get("policy", {})}
    path = ctx.out / "policy.pt"

    def make(resume: bool) -> None:
        config = policy_train_config(ctx, iterations)
        previous = TrainedPolicy.load(str(path)) if resume and path.is_file() else None
        start = int(previous.state.get("iteration", 0)) if previous else 0
        done = [start]

        def progress(it: int, metrics: dict[str, float]) -> None:
            done[0] += 1
            ctx.progress("policy iterations", done[0], iterations)

        policy = train(load_cost_model(cost_spec), load_tasks(str(ctx.out / "train_tasks.json")), config,
                       cost_model_spec=cost_spec, checkpoint_path=str(path), resume=previous,
                       progress=progress)
        policy.save(str(path))

    key = ctx.stage("policy", settings, [k_train, k_cost], ["policy.pt"], make,
                    lambda: _unreadable(lambda: TrainedPolicy.load(str(path))))
    return key, str(path)


def _unreadable(load: Callable[[], Any]) -> str:
    """'' if ``load()`` works, else its one-line error (a checkpoint from an incompatible version)."""
    try:
        load()
    except AutoshardError as e:
        return str(e)
    return ""
