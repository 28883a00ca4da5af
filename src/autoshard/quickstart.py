"""The whole pipeline, stage by stage, each stage cached in the output directory so a re-run continues.

Stages (each writes its outputs, then ``stages/<name>.json`` recording its settings and a key hashed from
them and from the keys of the stages it reads; a stage whose record and outputs exist with the same key is
skipped, and changing a setting re-runs that stage and every stage after it):

1. ``pool``      a DLRM-like synthetic table pool (``autoshard.tables.synth``), or the user's ``--tables``.
2. ``split``     disjoint train / test pools (DreamShard's split).
3. ``train_tasks``, ``test_tasks``  tasks from the train pool, held-out tasks from the test pool.
4. ``profile``   real kernel timings of random shards of train-pool tables (``autoshard.hardware``).
5. ``comm``      the fitted all-to-all (alpha-beta) model.
6. ``cost_model`` the learned cost model trained on the profile (``autoshard.costs.learned``).
7. ``policy``    the RL placement policy trained on the train tasks with that cost model.
8. ``bench``     every registered algorithm plans every test task; every plan is measured on real kernels
                 by the same evaluator; report.md, results.json and plots.

A stage whose piece is not built in this checkout is skipped and says so (planning then uses the analytical
model, ``rl`` is not run); nothing is imitated. The benchmark command runs the same stages
(``autoshard bench --suite NAME``), skipping training when given checkpoints.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoshard.bench.report import write_report
from autoshard.bench.runner import BenchConfig, Progress, run_bench, select_algorithms, summarize
from autoshard.bench.suites import Suite
from autoshard.errors import AutoshardError
from autoshard.io import ARTEFACT_VERSION, read_json, write_json

log = logging.getLogger(__name__)

COST_MODEL_RECIPE = 2
"""Version of the cost model's training recipe, part of the cost_model stage key so that a cached model made
by an older recipe is retrained (2: refit on all records, lr 1e-2, weight decay 1e-3; see training.py)."""

Say = Callable[[str], None]
"""say(line): a progress message for the user (the CLI prints it)."""


def _quiet(line: str) -> None:
    log.info(line)


def _no_progress(what: str, done: int, total: int) -> None:
    pass


@dataclass(frozen=True)
class PipelineConfig:
    """What to run: a suite, and optionally the user's own inputs instead of generated/trained ones."""

    suite: Suite
    tables_path: str | None = None
    """A table pool file to use instead of the synthetic pool."""
    cost_model_path: str | None = None
    """A trained cost model checkpoint (or 'analytical', or 'measured': plan with the real evaluator itself);
    None = train one (profile + fit)."""
    policy_path: str | None = None
    """A trained policy checkpoint for rl; None = train one."""
    comm_path: str | None = None
    """A comm model (comm_model.json) for the evaluator, or 'default' (uncalibrated); None = measure it."""
    algorithms: tuple[str, ...] | None = None
    """Algorithms to benchmark; None = every registered planner."""
    command: str = ""
    """The command line, written into the report so its tables can be regenerated."""
    title: str = ""


@dataclass(frozen=True)
class PipelineResult:
    """Where the outputs are, and which stages ran or were skipped (and why)."""

    out_dir: Path
    files: dict[str, Path]
    stages: dict[str, str] = field(default_factory=dict)
    """Stage name -> 'ran', 'cached', or 'skipped: why'."""
    report: str = ""


def _key(settings: dict[str, Any], deps: Sequence[str]) -> str:
    blob = json.dumps([settings, list(deps)], sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


class Pipeline:
    """Runs the stages in order in ``out_dir``; ``run()`` returns the benchmark outputs."""

    def __init__(self, config: PipelineConfig, out_dir: str | Path, say: Say = _quiet,
                 progress: Progress = _no_progress) -> None:
        self.config = config
        self.suite = config.suite
        self.out = Path(out_dir)
        self.say = say
        self.progress = progress
        self.status: dict[str, str] = {}

    # ----------------------------------------------------------------------------------------- caching

    def stage(self, name: str, settings: dict[str, Any], deps: Sequence[str], outputs: Sequence[str],
              fn: Callable[[bool], None], usable: Callable[[], str] | None = None) -> str:
        """Run ``fn(resume)`` unless the stage completed with the same key and its outputs exist; return the
        key.

        The record is written as incomplete before ``fn`` runs and complete after, so ``resume`` is True when
        an earlier run of the same stage (same key) was interrupted: ``fn`` may continue what it left.
        ``usable()`` returns '' if cached outputs can still be used, else why not (e.g. a checkpoint this
        version cannot read), and the stage runs again."""
        key = _key(settings, deps)
        record = self.out / "stages" / f"{name}.json"
        done: dict[str, Any] = {}
        if record.is_file():
            try:
                done = read_json(record, kind="autoshard.stage")
            except AutoshardError:
                done = {}
        same = done.get("key") == key
        if same and done.get("complete") and all((self.out / o).exists() for o in outputs):
            why = usable() if usable is not None else ""
            if not why:
                self.status[name] = "cached"
                self.say(f"[{name}] cached ({', '.join(outputs)})")
                return key
            self.say(f"[{name}] cached output not usable ({why}); running it again")
            same = False
        resume = same and not done.get("complete")
        self.say(f"[{name}] {'resuming' if resume else 'running'}")
        entry = {"kind": "autoshard.stage", "version": ARTEFACT_VERSION, "name": name, "key": key,
                 "deps": list(deps), "settings": settings, "outputs": list(outputs), "complete": False}
        write_json(record, entry)
        start = time.perf_counter()
        fn(resume)
        elapsed = time.perf_counter() - start
        write_json(record, {**entry, "complete": True, "elapsed_s": elapsed})
        self.status[name] = "ran"
        self.say(f"[{name}] done in {elapsed:.1f} s")
        return key

    def skip(self, name: str, why: str) -> str:
        self.status[name] = f"skipped: {why}"
        self.say(f"[{name}] skipped: {why}")
        return f"skipped:{name}"

    # ----------------------------------------------------------------------------------------- stages

    def run(self) -> PipelineResult:
        s = self.suite
        k_pool = self.stage_pool()
        k_split = self.stage_split(k_pool)
        k_train = self.stage_tasks(k_split, "train")
        self.stage_tasks(k_split, "test")  # its key is not needed: each bench result is matched to its task
        k_comm = self.stage_comm()
        k_cost, cost_spec = self.stage_cost_model(k_split, k_comm)
        k_policy, policy_path = self.stage_policy(k_train, k_cost, cost_spec)
        files, report = self.stage_bench(k_comm, k_cost, cost_spec, k_policy, policy_path)
        log.info("suite %s finished", s.name)
        return PipelineResult(self.out, files, dict(self.status), report)

    def stage_pool(self) -> str:
        s = self.suite
        if self.config.tables_path:
            from autoshard.tables import TablePool

            src = self.config.tables_path
            digest = hashlib.sha256(Path(src).read_bytes()).hexdigest()[:16] if Path(src).is_file() else ""
            return self.stage("pool", {"tables_path": src, "sha256": digest}, [], ["pool.json"],
                              lambda resume: TablePool.load(src).save(str(self.out / "pool.json")))
        synth = _require("autoshard.tables.synth", "the synthetic table generator",
                         "pass --tables FILE with your own table pool")
        settings = {"generator": "autoshard.tables.synth.synthesize_pool", "num_tables": s.pool_tables,
                    "generator_version": getattr(synth, "GENERATOR_VERSION", None),
                    "seed": s.seed, "dims": list(s.dims), "stats_batch_size": s.stats_batch_size}

        def make(resume: bool) -> None:
            kwargs = {} if s.stats_batch_size is None else {"stats_batch_size": s.stats_batch_size}
            pool = synth.synthesize_pool(s.pool_tables, seed=s.seed, dims=s.dims,
                                         progress=lambda k: self.progress("pool tables", k, s.pool_tables),
                                         **kwargs)
            pool.save(str(self.out / "pool.json"))

        return self.stage("pool", settings, [], ["pool.json"], make)

    def stage_split(self, k_pool: str) -> str:
        from autoshard.tables import TablePool
        from autoshard.tasks import split_pool

        def make(resume: bool) -> None:
            train, test = split_pool(TablePool.load(str(self.out / "pool.json")), seed=self.suite.seed)
            train.save(str(self.out / "train_pool.json"))
            test.save(str(self.out / "test_pool.json"))

        return self.stage("split", {"seed": self.suite.seed}, [k_pool], ["train_pool.json", "test_pool.json"],
                          make)

    def stage_tasks(self, k_split: str, split: str) -> str:
        """``{split}_tasks.json``: tasks drawn from that split's pool. Train and test are separate stages, so
        raising ``--test-tasks`` neither retrains the policy nor re-measures the test tasks already done (the
        draws are sequential: the first N tasks are the same for any count >= N)."""
        from autoshard.tables import TablePool
        from autoshard.tasks import sample_tasks, save_tasks

        s = self.suite
        n, seed_offset = (s.num_train_tasks, 0) if split == "train" else (s.num_test_tasks, 1)
        settings = {"num_tables": s.num_tables, "num_devices": s.num_devices,
                    "device_memory": s.device_memory, "batch_size": s.batch_size, "tasks": n, "seed": s.seed}

        def make(resume: bool) -> None:
            pool = TablePool.load(str(self.out / f"{split}_pool.json"))
            if s.num_tables > len(pool.tables):
                raise AutoshardError(
                    f"suite {s.name}: {s.num_tables} tables per task but the {split} pool has "
                    f"{len(pool.tables)}; use a bigger pool (pool_tables >= {2 * s.num_tables})"
                )
            tasks = sample_tasks(pool, n, s.num_tables, (s.device_memory,) * s.num_devices,
                                 seed=s.seed * 10 + seed_offset, batch_size=s.batch_size,
                                 prefix=f"{s.name}-{split}")
            save_tasks(str(self.out / f"{split}_tasks.json"), tasks, settings)

        return self.stage(f"{split}_tasks", settings, [k_split], [f"{split}_tasks.json"], make)

    def measure_settings(self) -> Any:
        from autoshard.hardware.kernel import MeasureSettings

        e = self.suite.eval
        return MeasureSettings(warmup=e.warmup, repeats=e.repeats, rows_cap=e.rows_cap)

    def stage_comm(self) -> str:
        """The all-to-all model the evaluator (and a cost model trained here) uses: measured with D processes
        on this host (``autoshard.hardware.comm``) and fitted; the uncalibrated default if not built."""
        s = self.suite
        if self.config.comm_path:
            self.skip("comm", f"comm model given (--comm {self.config.comm_path})")
            return _file_key(self.config.comm_path)
        if not _has("autoshard.hardware.comm", "profile_comm"):
            self.skip("comm", "autoshard.hardware.comm is not built; comm uses the uncalibrated default")
            return "default-comm"
        settings = {"num_devices": s.num_devices, "batch_size": s.batch_size}

        def make(resume: bool) -> None:
            from autoshard.hardware.comm import (
                COMM_MODEL_FILE,
                DEFAULT_DIM_SUMS,
                fit_alpha_beta,
                load_comm_records,
                profile_comm,
            )

            costs = self.out / "costs"
            n = len(DEFAULT_DIM_SUMS)
            done = len(load_comm_records(costs))
            for k, _ in enumerate(profile_comm(costs, s.num_devices, batch_size=s.batch_size), start=1):
                self.progress("comm sizes", min(done + k, n), n)
            fit_alpha_beta(load_comm_records(costs)).save(str(costs / COMM_MODEL_FILE))

        return self.stage("comm", settings, [], ["costs/comm_model.json"], make)

    def stage_cost_model(self, k_split: str, k_comm: str) -> tuple[str, str]:
        """The planning cost model: the user's checkpoint, or one trained here; (key, spec for load).

        Trained here: random shards of train-pool tables are timed on the real kernels with the evaluator's
        settings (``autoshard.hardware.profiler``, resumable), then ``LearnedCostModel.fit``."""
        if self.config.cost_model_path:
            spec = self.config.cost_model_path
            self.skip("profile", "cost model given (--cost-model)")
            self.skip("cost_model", "cost model given (--cost-model)")
            return _file_key(spec), spec
        if not _has("autoshard.costs.learned", "LearnedCostModel"):
            self.skip("profile", "the learned cost model is not built in this checkout")
            self.skip("cost_model", "not built in this checkout; planning uses the analytical model")
            return "analytical", "analytical"
        if not _has("autoshard.hardware.profiler", "profile"):
            self.skip("profile", "the profiler is not built in this checkout")
            self.skip("cost_model", "no profile to train on; planning uses the analytical model")
            return "analytical", "analytical"
        s, t = self.suite, self.suite.training
        costs = self.out / "costs"
        measure = self.measure_settings()
        profile_settings = {"samples": t.profile_samples, "max_tables": t.profile_max_tables,
                            "batch_size": s.batch_size, "seed": s.seed, "measure": measure.to_json()}

        def profile_stage(resume: bool) -> None:
            from autoshard.hardware.profiler import ProfileConfig, pending_samples, profile
            from autoshard.tables import TablePool

            config = ProfileConfig(samples=t.profile_samples, max_tables=t.profile_max_tables,
                                   batch_size=s.batch_size, seed=s.seed, settings=measure)
            train_pool = TablePool.load(str(self.out / "train_pool.json"))
            if not resume and _profiled_otherwise(costs, train_pool, config):
                # Records made with other settings or tables: start the dataset over (comm stays). Records of
                # the same settings are kept, so changing only the number of samples continues the dataset.
                for old in [*costs.glob("shards-*.jsonl"), costs / "tables.json", costs / "profile.json"]:
                    old.unlink(missing_ok=True)
            total = t.profile_samples
            start = total - len(pending_samples(costs, config)) if (costs / "profile.json").is_file() else 0
            for k, _ in enumerate(profile(train_pool, costs, config), start=1):
                self.progress("profile samples", start + k, total)

        k_profile = self.stage("profile", profile_settings, [k_split], ["costs/tables.json"], profile_stage)
        path = self.out / "cost_model.pt"
        fit_settings = {"epochs": t.cost_epochs, "seed": s.seed, "extra": t.extra.get("cost_model", {}),
                        "comm": self.config.comm_path, "recipe": COST_MODEL_RECIPE}

        def fit_stage(resume: bool) -> None:
            from autoshard.costs.learned import LearnedCostModel
            from autoshard.costs.learned.training import TrainOptions
            from autoshard.hardware.profiler import load_dataset

            options = TrainOptions(seed=s.seed, max_epochs=t.cost_epochs, **fit_settings["extra"])
            given = self.config.comm_path
            if given and given != "default":
                # The model's comm term is the same alpha-beta as the evaluator's.
                from autoshard.costs.comm import AlphaBeta

                AlphaBeta.load(given).save(str(costs / "comm_model.json"))
            budget = options.epoch_budget  # the scored pass, then the refit on all records
            epochs = [0]

            def progress(epoch: int, h: dict[str, float]) -> None:
                epochs[0] += 1
                self.progress("cost model epochs", min(epochs[0], budget), budget)

            model = LearnedCostModel.fit(load_dataset(costs), options, progress)
            model.save(path)
            self.progress("cost model epochs", budget, budget)
            metrics = model.info.get("metrics", {})
            if metrics:
                self.say(f"[cost_model] held-out tables: {json.dumps(metrics)[:300]}")

        key = self.stage("cost_model", fit_settings, [k_profile, k_comm], ["cost_model.pt"], fit_stage,
                         lambda: _unreadable(lambda: _load_cost_model(path)))
        return key, str(path)

    def stage_policy(self, k_train: str, k_cost: str, cost_spec: str) -> tuple[str, str | None]:
        """The rl policy: the user's checkpoint, or one trained here on the train tasks against the planning
        cost model (``autoshard.planners.rl.train``, resumed from its checkpoint after an interruption)."""
        from autoshard.planners.base import PLANNERS

        if "rl" not in PLANNERS:
            self.skip("policy", "rl is not registered in this checkout")
            return "none", None
        if self.config.policy_path:
            self.skip("policy", "policy given (--policy)")
            return _file_key(self.config.policy_path), self.config.policy_path
        if self.config.algorithms is not None and "rl" not in self.config.algorithms:
            self.skip("policy", "rl not among --algos")
            return "none", None
        if cost_spec == "measured":
            self.skip("policy", "training against the real kernels (--cost-model measured) is too slow; pass --policy")
            return "none", None
        s = self.suite
        iterations = s.training.policy_iterations
        settings = {"iterations": iterations, "seed": s.seed, "extra": s.training.extra.get("policy", {})}
        path = self.out / "policy.pt"

        def make(resume: bool) -> None:
            from autoshard.costs.loading import load_cost_model
            from autoshard.planners.rl.policy import TrainedPolicy
            from autoshard.planners.rl.train import TrainConfig, train
            from autoshard.tasks import load_tasks

            config = TrainConfig.from_dict({"iterations": iterations, "seed": s.seed,
                                            "eval_every": max(1, min(25, iterations)), **settings["extra"]})
            previous = TrainedPolicy.load(str(path)) if resume and path.is_file() else None
            start = int(previous.state.get("iteration", 0)) if previous else 0
            done = [start]

            def progress(it: int, metrics: dict[str, float]) -> None:
                done[0] += 1
                self.progress("policy iterations", done[0], iterations)

            policy = train(load_cost_model(cost_spec), load_tasks(str(self.out / "train_tasks.json")), config,
                           cost_model_spec=cost_spec, checkpoint_path=str(path), resume=previous,
                           progress=progress)
            policy.save(str(path))

        return self.stage("policy", settings, [k_train, k_cost], ["policy.pt"], make,
                          lambda: _unreadable(lambda: _load_policy(path))), str(path)

    def comm_model(self) -> Any:
        from autoshard.costs.comm import DEFAULT_COMM, AlphaBeta

        given = self.config.comm_path
        if given == "default":
            return DEFAULT_COMM
        if given:
            return AlphaBeta.load(given)
        path = self.out / "costs" / "comm_model.json"
        return AlphaBeta.load(str(path)) if path.is_file() else DEFAULT_COMM

    def stage_bench(self, k_comm: str, k_cost: str, cost_spec: str, k_policy: str,
                    policy_path: str | None) -> tuple[dict[str, Path], str]:
        from autoshard.costs.loading import MEASURED_SPEC, load_cost_model, with_comm
        from autoshard.hardware.host import host_info
        from autoshard.planners.base import PlannerOptions
        from autoshard.tasks import load_tasks

        evaluator_mod = _require("autoshard.hardware.evaluator", "the real evaluator (MeasuredCostModel)",
                                 "it is needed to measure plans; build issue 3 first")
        s = self.suite
        requested = self.config.algorithms
        if policy_path is None and requested is None:
            algorithms, skipped = select_algorithms(None)
            if "rl" in algorithms:
                algorithms.remove("rl")
                skipped["rl"] = "no trained policy (pass --policy or let the pipeline train one)"
        else:
            algorithms, skipped = select_algorithms(requested)
        comm = self.comm_model()
        settings = self.measure_settings()

        def make_evaluator() -> Any:
            return evaluator_mod.MeasuredCostModel(settings, comm)
        # 'measured' plans with the evaluator's own settings and comm model (an oracle cost model: it shows
        # how much the learned model's error costs the planners)
        # Every planner prices the all-to-all with the suite's fit at its D, as the evaluator does: a model
        # trained elsewhere carries the comm fitted there (the shipped one: 4 processes), and on this host the
        # fit for 8 processes had ~0.6x that bandwidth and ~2.3x its latency (costs/comm_model.json of runs).
        if cost_spec == MEASURED_SPEC:
            cost_model = make_evaluator()
        else:
            cost_model = with_comm(load_cost_model(cost_spec), comm)
        options = PlannerOptions(seed=s.seed, cost_model=cost_model, policy_path=policy_path,
                                 time_limit_s=s.time_limit_s)
        # What a measured task depends on (not e.g. the suite's description), with the models' file contents,
        # so a retrained model is never paired with plans of the previous one. The task itself is not in the
        # key: run_bench reuses a result only for an equal task, so more test tasks keep the ones measured.
        bench_key = _key({"algorithms": algorithms, "seed": s.seed, "time_limit_s": s.time_limit_s,
                          "rounds": s.eval.rounds, "measure": settings.to_json(), "comm": comm.to_json(),
                          "models": [_file_key(cost_spec), _file_key(policy_path or "")]},
                         [k_comm, k_cost, k_policy])
        config = BenchConfig(tuple(algorithms), options, rounds=s.eval.rounds, key=bench_key)
        tasks = load_tasks(str(self.out / "test_tasks.json"))
        self.say(f"[bench] {len(tasks)} test tasks x {len(algorithms)} algorithms: {', '.join(algorithms)}")
        bench_dir = self.out / "bench"
        results = run_bench(tasks, config, make_evaluator, bench_dir, self.progress)
        summaries = summarize(results, algorithms)
        meta = {
            "suite": s.settings(), "host": host_info(settings.device.value),
            "evaluator": f"{evaluator_mod.MeasuredCostModel.name} (real FBGEMM kernels, settings "
                         f"{json.dumps(settings.to_json())}; comm: alpha-beta {comm.source})",
            "measure_settings": settings.to_json(), "comm": comm.to_json(),
            "cost_model": f"{cost_model.name} ({cost_spec}; comm: the evaluator's)",
            "policy": policy_path or "-",
            "rounds": s.eval.rounds, "skipped": skipped, "stages": dict(self.status),
            "command": self.config.command,
        }
        title = self.config.title or f"{s.name}: {s.description}"
        files = write_report(bench_dir, title, self.config.command, summaries, results, meta)
        self.status["bench"] = "ran"
        return files, (bench_dir / "report.md").read_text()


def _profiled_otherwise(costs: Path, pool: Any, config: Any) -> bool:
    """True if ``costs`` holds a profile of other tables or other settings than ``config``."""
    from autoshard.tables import TablePool

    if not (costs / "tables.json").is_file():
        return False
    if TablePool.load(str(costs / "tables.json")).to_json()["tables"] != pool.to_json()["tables"]:
        return True
    manifest = costs / "profile.json"
    try:
        return manifest.is_file() and read_json(manifest, kind="autoshard.profile") != config.manifest()
    except AutoshardError:
        return True


def _load_cost_model(path: Path) -> Any:
    from autoshard.costs.learned import LearnedCostModel

    return LearnedCostModel.load(str(path))


def _load_policy(path: Path) -> Any:
    from autoshard.planners.rl.policy import TrainedPolicy

    return TrainedPolicy.load(str(path))


def _unreadable(load: Callable[[], Any]) -> str:
    """'' if ``load()`` works, else its one-line error (a checkpoint from an incompatible version)."""
    try:
        load()
    except AutoshardError as e:
        return str(e)
    return ""


def _file_key(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        return path
    return hashlib.sha256(p.read_bytes()).hexdigest()[:16]


def _has(module: str, attr: str) -> bool:
    try:
        return hasattr(importlib.import_module(module), attr)
    except ImportError:
        return False


def _require(module: str, what: str, fix: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise AutoshardError(f"{what} ({module}) is not built in this checkout; {fix}") from None
