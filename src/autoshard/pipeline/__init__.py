"""The whole pipeline, stage by stage, each stage cached in the output directory so a re-run continues.

Stages (``run.Pipeline``; each writes its outputs, then ``stages/<name>.json`` with its settings and a key
hashed from them, from the keys of the stages it reads and from the code version, ``cache``):

1. ``pool``        a DLRM-like synthetic table pool (``autoshard.tables.synth``), or the user's table file.
2. ``split``       disjoint train / test pools (DreamShard's split).
3. ``train_tasks``, ``test_tasks``  tasks from the train pool, held-out tasks from the test pool.
4. ``profile``     real kernel timings of random shards of train-pool tables (``autoshard.hardware``).
5. ``comm``        the fitted all-to-all (alpha-beta) model.
6. ``cost_model``  the learned cost model trained on the profile (``autoshard.costs.learned``).
7. ``policy``      the RL placement policy trained on the train tasks with that cost model.
8. ``bench``       every algorithm plans every test task; every plan is measured on real kernels by the same
                   evaluator (``measure``), one result file per task.

Modules: ``suite`` what to run; ``cache`` the stage cache and code version; ``data``, ``training``,
``evaluation`` the stages; ``run`` their order; ``measure`` and ``results`` side-by-side planning and
measuring; ``models`` cost-model specs including the real evaluator; ``refresh`` the DreamShard loop.
Summaries and reports of the results are ``autoshard.bench``'s.
"""

from autoshard.pipeline.cache import PIPELINE_CODE_VERSION

__all__ = ["PIPELINE_CODE_VERSION"]
