"""The stages in order: each reads the outputs of the ones before it, by key (``cache``)."""

from __future__ import annotations

import logging

from autoshard.pipeline.context import Context
from autoshard.pipeline.data import stage_pool, stage_split, stage_tasks
from autoshard.pipeline.evaluation import Evaluation, stage_evaluate
from autoshard.pipeline.profiling import stage_comm
from autoshard.pipeline.refresh_stage import stage_refresh
from autoshard.pipeline.training import stage_cost_model, stage_policy

log = logging.getLogger(__name__)


class Pipeline(Context):
    """Runs the stages in order in the output directory; ``run()`` returns the measured test tasks."""

    def run(self) -> Evaluation:
        k_pool = stage_pool(self)
        k_split = stage_split(self, k_pool)
        k_train = stage_tasks(self, k_split, "train")
        stage_tasks(self, k_split, "test")  # its key is not needed: each bench result is matched to its task
        k_comm = stage_comm(self)
        k_cost, cost_spec = stage_cost_model(self, k_split, k_comm)
        k_policy, policy_path = stage_policy(self, k_train, k_cost, cost_spec)
        r = stage_refresh(self, k_train, k_cost, cost_spec, k_policy, policy_path)
        evaluation = stage_evaluate(self, k_comm, r.k_cost, r.cost_spec, r.k_policy, r.policy_path,
                                    r.comm_path)
        log.info("suite %s finished", self.suite.name)
        return evaluation
