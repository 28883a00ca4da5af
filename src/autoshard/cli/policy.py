"""``autoshard train-policy``: train the RL placement policy against a cost model on a tasks file.

The checkpoint is rewritten (atomically) at every evaluation, with the optimizer state, so an interrupted run
continues with ``--resume`` and ends exactly as an uninterrupted one.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from autoshard.cli.common import positive_int


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train-policy", help="train the RL placement policy (--algo rl) against a cost model",
                       description=__doc__)
    p.add_argument("--cost-model", required=True, help="'analytical' or a learned cost model checkpoint")
    p.add_argument("--tasks", required=True, help="training tasks file (autoshard tasks ...)")
    p.add_argument("-o", "--output", required=True, help="policy checkpoint to write, e.g. policy.pt")
    p.add_argument("--eval-tasks", help="held-out tasks to score the greedy policy on during training")
    p.add_argument("--iterations", type=positive_int, default=300,
                   help="policy-gradient updates (default 300)")
    p.add_argument("--samples", type=int, default=16, help="episodes sampled per task per update (>= 2)")
    p.add_argument("--tasks-per-iteration", type=positive_int, default=4, help="tasks per update (default 4)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default 1e-3)")
    p.add_argument("--eval-every", type=positive_int, default=25, help="iterations between evaluations/saves")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--resume", action="store_true", help="continue the run saved in --output")
    p.add_argument("--refresh-with-real", metavar="DATASET_DIR",
                   help="DreamShard loop: each round, measure the policy's plans of a few training tasks "
                        "on the real kernels, add them to this profile directory, refit the cost model, "
                        "train again")
    p.add_argument("--rounds", type=positive_int, default=3, help="refresh rounds (with --refresh-with-real)")
    p.add_argument("--refresh-tasks", type=positive_int, default=2,
                   help="training tasks measured per refresh round (with --refresh-with-real)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from autoshard.errors import AutoshardError
    from autoshard.pipeline.models import load_cost_model
    from autoshard.planners.rl.policy import TrainedPolicy
    from autoshard.planners.rl.train import TrainConfig, train
    from autoshard.tasks import load_tasks

    config = TrainConfig(iterations=args.iterations, tasks_per_iteration=args.tasks_per_iteration,
                         samples_per_task=args.samples, learning_rate=args.lr, eval_every=args.eval_every,
                         seed=args.seed)
    train_tasks = load_tasks(args.tasks)
    eval_tasks = load_tasks(args.eval_tasks) if args.eval_tasks else []
    model = load_cost_model(args.cost_model)
    resume = None
    if args.resume:
        if not os.path.exists(args.output):
            raise AutoshardError(f"--resume: {args.output} does not exist; drop --resume to start a new run")
        resume = TrainedPolicy.load(args.output)

    total = config.iterations * (args.rounds + 1) if args.refresh_with_real else config.iterations
    bars: list[tqdm] = []  # made at the first update, so an input error is never preceded by a bar

    def progress(it: int, metrics: dict[str, float]) -> None:
        if not bars:
            bars.append(tqdm(total=total, initial=it - 1, desc="train-policy", unit="it", file=sys.stderr))
        bar = bars[0]
        bar.update(1)
        post = {"cost/S": f"{metrics['train_cost_over_s']:.3f}"}
        if "eval_ratio_to_best_heuristic" in metrics:
            post["eval/best_heur"] = f"{metrics['eval_ratio_to_best_heuristic']:.3f}"
        bar.set_postfix(post)

    try:
        if args.refresh_with_real:
            from autoshard.pipeline.refresh import RefreshConfig, refresh_with_real

            if resume is not None:
                raise AutoshardError("--resume does not combine with --refresh-with-real; "
                                     "re-run the loop (its measurements are kept in the dataset and "
                                     "not repeated)")
            cost_path = str(Path(args.output).with_suffix(".costmodel.pt"))
            result = refresh_with_real(model, args.refresh_with_real, train_tasks, config,
                                       RefreshConfig(args.rounds, args.refresh_tasks, seed=args.seed),
                                       eval_tasks, checkpoint_path=args.output,
                                       cost_model_path=cost_path, progress=progress)
            policy = result.policy
            for r in result.rounds:
                print(f"refresh round {r['round']}: measured {r['records_added']} devices "
                      f"(dataset now {r['records_total']} records); policy plans predicted vs measured: "
                      f"{100 * r['plan_cost_mape']:.1f}% mean error before the refit")
            print(f"wrote refreshed cost model {cost_path}")
        else:
            policy = train(model, train_tasks, config, eval_tasks, cost_model_spec=args.cost_model,
                           checkpoint_path=args.output, resume=resume, progress=progress)
    finally:
        for bar in bars:
            bar.close()
    policy.save(args.output)
    last = policy.metrics.get("last", {})
    line = f"wrote {args.output}: {policy.state.get('iteration')} iterations against cost model {model.name}"
    if "eval_ratio_to_best_heuristic" in last:
        line += (f"; held-out greedy cost / best heuristic = {last['eval_ratio_to_best_heuristic']:.3f} "
                 f"(geometric mean over {len(eval_tasks)} tasks)")
    print(line)
    return 0
