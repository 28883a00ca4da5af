"""Tables from TorchRec EmbeddingBagConfigs (tables.configs, ``autoshard tables from-torchrec``) and the
default lookup distribution of tables that state none (profile and evaluate use it, with one warning)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

from autoshard.cli.main import main
from autoshard.errors import AutoshardError
from autoshard.tables import (
    DEFAULT_ALPHA,
    DEFAULT_POOLING,
    LookupKind,
    Table,
    TablePool,
    default_lookup_spec,
    load_configs,
    pool_from_configs,
    tables_from_configs,
)
from autoshard.tables.lookups import DEFAULT_VOCAB_LOG_RATIO, default_vocab, name_seed, sample_lookups
from autoshard.tables.published import ALPHA_EDGES, CELL_WEIGHTS, VOCAB_EDGES

FAST = ["--repeats", "2", "--warmup", "0", "--max-cv", "100", "--max-tries", "1", "--no-flush"]
SMALL_BATCH = 256
"""stats batch of the converted tables in most tests (bins need not be at the published batch here)."""

CONFIGS = [
    {"name": "user", "num_embeddings": 20000, "embedding_dim": 16, "feature_names": ["uid"], "pooling": 3.0},
    {"name": "item", "num_embeddings": 5000, "embedding_dim": 32, "feature_names": ["i1", "i2"]},
    {"name": "cat", "num_embeddings": 300, "embedding_dim": 8, "alpha": 1.2, "pooling": "SUM"},
]

MODULE = """
from torchrec.modules.embedding_configs import EmbeddingBagConfig

TABLES = [EmbeddingBagConfig(name=f"t{i}", num_embeddings=1000 * (i + 1), embedding_dim=16,
                             feature_names=[f"f{i}"]) for i in range(3)]
NOT_A_LIST = 3
"""


def _marginal_median(edges: tuple[float, ...], axis: int) -> float:
    mass: dict[int, float] = {}
    for cell in CELL_WEIGHTS:
        mass[cell[axis]] = mass.get(cell[axis], 0.0) + cell[2]
    total, cum = sum(mass.values()), 0.0
    for k in sorted(mass):
        p = mass[k] / total
        if cum + p >= 0.5:
            return edges[k] + (0.5 - cum) / p * (edges[k + 1] - edges[k])
        cum += p
    raise AssertionError("no median")


def test_default_constants_are_the_medians_of_the_fitted_synthetic_density() -> None:
    assert DEFAULT_ALPHA == pytest.approx(_marginal_median(ALPHA_EDGES, 0), abs=0.01)
    assert DEFAULT_VOCAB_LOG_RATIO == pytest.approx(_marginal_median(VOCAB_EDGES, 1), abs=0.01)
    assert DEFAULT_POOLING == 1.0


def test_default_spec_is_seeded_from_the_name_and_uses_the_tables_pooling() -> None:
    assert name_seed("user") == name_seed("user") == 1635289255  # blake2b: the same in every process
    assert name_seed("user") != name_seed("item")
    t = Table("plain", 16, 10**6, 4.0)
    spec = default_lookup_spec(t)
    assert spec.kind is LookupKind.POWER_LAW and spec.alpha == DEFAULT_ALPHA
    assert spec.seed == name_seed("plain")
    assert spec.vocab == default_vocab(t.rows, 4.0) == round(65536 * 4.0 * 10**DEFAULT_VOCAB_LOG_RATIO)
    assert default_vocab(300, 4.0) == 300 and default_vocab(300, 0.0) == 1
    lk = sample_lookups(t, 4096, seed=3)
    assert np.array_equal(lk.indices, sample_lookups(Table("plain", 16, 10**6, 4.0, lookups=spec), 4096,
                                                     seed=3).indices)
    assert lk.indices.size / 4096 == pytest.approx(4.0, rel=0.1)


def test_json_configs_with_overrides_and_defaults(tmp_path: Path, caplog) -> None:
    f = tmp_path / "configs.json"
    f.write_text(json.dumps({"tables": CONFIGS}))
    with caplog.at_level(logging.WARNING, logger="autoshard.tables.configs"):
        pool = pool_from_configs(load_configs(str(f)), skew={"user": 1.1}, stats_batch_size=SMALL_BATCH)
    by = pool.by_name()
    assert [t.name for t in pool.tables] == ["user", "item", "cat"]
    assert (by["user"].rows, by["user"].dim, by["user"].pooling_factor) == (20000, 16, 3.0)
    assert by["item"].pooling_factor == 2 * DEFAULT_POOLING  # one-hot per feature, two features
    assert by["cat"].pooling_factor == DEFAULT_POOLING  # TorchRec's "SUM" is a reduction, not a count
    assert [by[n].lookups.alpha for n in ("user", "item", "cat")] == [1.1, DEFAULT_ALPHA, 1.2]
    assert all(t.lookups.seed == name_seed(t.name) for t in pool.tables)
    # access bins computed from the distribution, not the all-in-first-bin default
    assert all(sum(t.access_bins) == pytest.approx(1.0) and t.access_bins[0] < 1.0 for t in pool.tables)
    assert pool.source["default_pooling_tables"] == ["item", "cat"]
    assert pool.source["default_alpha_tables"] == ["item"]
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2 and "item, cat" in warned[0] and "(item)" in warned[1]
    # a plain list is read the same; deterministic
    f.write_text(json.dumps(CONFIGS))
    again = tables_from_configs(load_configs(str(f)), skew={"user": 1.1}, stats_batch_size=SMALL_BATCH)
    assert tuple(again) == pool.tables


def test_module_paths_and_torchrec_objects(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("torchrec")
    from torchrec.modules.embedding_configs import EmbeddingBagConfig

    (tmp_path / "user_cfgs.py").write_text(MODULE)
    by_path = load_configs(f"{tmp_path / 'user_cfgs.py'}:TABLES")
    assert all(isinstance(c, EmbeddingBagConfig) for c in by_path) and len(by_path) == 3
    pkg = tmp_path / "autoshard_test_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)  # package.module:NAME resolves from the working directory
    by_module = load_configs("autoshard_test_pkg.model:TABLES")
    assert [c.name for c in by_module] == ["t0", "t1", "t2"]

    tables = tables_from_configs(by_module, pooling={"t1": 5.0}, skew={"t2": 2.0}, default_pooling=2.0,
                                 stats_batch_size=SMALL_BATCH)
    assert [(t.rows, t.dim, t.pooling_factor) for t in tables] == [(1000, 16, 2.0), (2000, 16, 5.0),
                                                                   (3000, 16, 2.0)]
    assert [t.lookups.alpha for t in tables] == [DEFAULT_ALPHA, DEFAULT_ALPHA, 2.0]
    # objects built here, with a shared table (two features) and TorchRec's pooling enum ignored
    direct = tables_from_configs([EmbeddingBagConfig(name="shared", num_embeddings=777, embedding_dim=8,
                                                     feature_names=["a", "b", "c"])],
                                 stats_batch_size=SMALL_BATCH)
    assert direct[0].pooling_factor == 3.0 and direct[0].rows == 777


def test_from_torchrec_cli_writes_a_pool_that_plans(tmp_path: Path, capsys) -> None:
    pytest.importorskip("torchrec")
    (tmp_path / "cfgs.py").write_text(MODULE)
    out = tmp_path / "pool.json"
    assert main(["tables", "from-torchrec", f"{tmp_path / 'cfgs.py'}:TABLES", "-o", str(out),
                 "--pooling", "t0=4", "--alpha", "t0=1.5", "--default-pooling", "2",
                 "--stats-batch-size", str(SMALL_BATCH)]) == 0
    assert "wrote" in capsys.readouterr().out
    pool = TablePool.load(str(out))
    assert [t.pooling_factor for t in pool.tables] == [4.0, 2.0, 2.0]
    assert [t.lookups.alpha for t in pool.tables] == [1.5, DEFAULT_ALPHA, DEFAULT_ALPHA]
    assert pool.source["generator"] == "autoshard.tables.configs"
    assert main(["plan", "--tables", str(out), "--devices", "2", "--algo", "size_greedy"]) == 0


def test_help_states_the_default_alpha(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["tables", "from-torchrec", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"alpha {DEFAULT_ALPHA:g} over" in text and "IMPORTS" in text


@pytest.mark.parametrize(("content", "spec", "expect"), [
    (None, "missing.json", "no such file"),
    ("{not json", "c.json", "not valid JSON"),
    ('{"other": 1}', "c.json", "list of table configs"),
    ("[]", "c.json", "is empty"),
    ('[{"name": "a", "num_embeddings": 10}]', "c.json", "lacks 'embedding_dim'"),
    ('[{"name": "a", "num_embeddings": 0, "embedding_dim": 4}]', "c.json", "positive integer"),
    ('[{"name": "a", "num_embeddings": 10, "embedding_dim": -4}]', "c.json", "positive integer"),
    ('[{"name": "a", "num_embeddings": 10.5, "embedding_dim": 4}]', "c.json", "positive integer"),
    ('[{"name": "a", "num_embeddings": 10, "embedding_dim": 4, "pooling": -1}]', "c.json", ">= 0"),
    ('[{"name": "a", "num_embeddings": 10, "embedding_dim": 4, "alpha": "x"}]', "c.json", ">= 0"),
    (json.dumps([{"name": "a", "num_embeddings": 10, "embedding_dim": 4}] * 2), "c.json", "more than once"),
    ("[3]", "c.json", "is a int"),
    ("X = [1]\n", "m.py:NOPE", "no attribute 'NOPE'"),
    ("X = 3\n", "m.py:X", "expected a list"),
    ("raise RuntimeError('boom\\nsecond line')\n", "m.py:X", "RuntimeError: boom second line"),
    (None, "gone.py:X", "no such file"),
    (None, "autoshard_no_such_module.sub:X", "cannot import"),
])
def test_bad_inputs_are_one_line_errors(tmp_path: Path, capsys, monkeypatch, content, spec, expect) -> None:
    monkeypatch.chdir(tmp_path)
    if content is not None:
        (tmp_path / spec.split(":")[0]).write_text(content)
    assert main(["tables", "from-torchrec", spec, "-o", str(tmp_path / "out.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("autoshard: error:") and "\n" not in err and expect in err, err
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize(("flags", "expect"), [
    (["--pooling", "nope=2"], "not in the configs"),
    (["--alpha", "a=1", "--alpha", "a=2"], "twice"),
    (["--pooling", "a"], "NAME=X"),
    (["--alpha", "a=-1"], "NAME=X"),
    (["--default-pooling", "nan"], ">= 0"),
])
def test_bad_overrides_are_one_line_errors(tmp_path: Path, capsys, flags, expect) -> None:
    f = tmp_path / "c.json"
    f.write_text('[{"name": "a", "num_embeddings": 10, "embedding_dim": 4}]')
    try:
        code = main(["tables", "from-torchrec", str(f), "-o", str(tmp_path / "out.json"), *flags])
    except SystemExit as e:  # a usage error: argparse exits
        code = e.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and expect in err, err


def _bare_tables_file(path: Path, prefix: str) -> Path:
    """A tables file whose tables have name, dim, rows and pooling only (what an EmbeddingBagConfig gives)."""
    tables = [{"name": f"{prefix}{i}", "dim": (8, 16, 32)[i], "rows": (300, 2000, 5000)[i],
               "pooling_factor": (1.0, 4.0, 8.0)[i]} for i in range(3)]
    path.write_text(json.dumps({"kind": "autoshard.tables", "version": 1, "tables": tables}))
    return path


def _default_warnings(caplog) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in caplog.records:
        if r.name == "autoshard.tables.lookups" and "no lookup distribution" in r.getMessage():
            name = r.getMessage().split()[1]
            counts[name] = counts.get(name, 0) + 1
    return counts


def test_bare_tables_can_be_profiled_with_one_warning_per_table(tmp_path: Path, caplog) -> None:
    tables = _bare_tables_file(tmp_path / "tables.json", "bare_profile_")
    costs = tmp_path / "costs"
    with caplog.at_level(logging.WARNING):
        assert main(["profile", "--tables", str(tables), "--samples", "2", "-o", str(costs), *FAST,
                     "--batch-size", "32", "--max-tables", "3"]) == 0
    assert list(costs.glob("shards-*.jsonl"))
    warned = _default_warnings(caplog)
    assert warned and set(warned) <= {f"bare_profile_{i}" for i in range(3)}
    assert all(n == 1 for n in warned.values())
    assert "alpha 0.7" in caplog.text


def test_bare_tables_can_be_evaluated_with_one_warning_per_table(tmp_path: Path, caplog, capsys) -> None:
    tables = _bare_tables_file(tmp_path / "tables.json", "bare_eval_")
    plan = tmp_path / "plan.json"
    assert main(["plan", "--tables", str(tables), "--devices", "2", "--algo", "size_greedy",
                 "-o", str(plan)]) == 0
    with caplog.at_level(logging.WARNING):
        assert main(["evaluate", "--plan", str(plan), "--tables", str(tables), "--collectives", "model",
                     *FAST, "--batch-size", "64"]) == 0
    assert "step cost (measured)" in capsys.readouterr().out
    assert _default_warnings(caplog) == {f"bare_eval_{i}": 1 for i in range(3)}


def test_tables_from_configs_rejects_non_lists() -> None:
    for bad in ("a", {"name": "a"}, [], 3):
        with pytest.raises(AutoshardError, match="non-empty list"):
            tables_from_configs(bad)


@pytest.mark.parametrize(("content", "expect"), [
    ('[{"name": "a", "num_embeddings": 10, "embedding_dim": 4}]', "autoshard tables from-torchrec"),
    ('{"tables": [{"name": "a", "num_embeddings": 10, "embedding_dim": 4}]}', "tables from-torchrec"),
    ('[{"name": "a", "dim": 4, "rows": 10, "pooling_factor": 1}]', '"kind": "autoshard.tables"'),
    ('[{"name": "a"}]', "expected a 'autoshard.tables' file"),
    ("[]", "expected a 'autoshard.tables' file"),
    ('{"kind": "autoshard.tables", "version": 1, "tables": []}', "lists no tables"),
])
def test_plan_says_how_to_make_a_tables_file(tmp_path: Path, capsys, content, expect) -> None:
    """What a user passes first (their configs, a bare list, an empty pool) is one line naming the fix."""
    f = tmp_path / "mine.json"
    f.write_text(content)
    assert main(["plan", "--tables", str(f), "--devices", "2", "--algo", "size_greedy",
                 "-o", str(tmp_path / "plan.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("autoshard: error:") and "\n" not in err and expect in err, err
    assert not (tmp_path / "plan.json").exists()
