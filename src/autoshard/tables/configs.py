"""Tables from what a TorchRec user has: a list of ``EmbeddingBagConfig`` (or dicts with its field names).

A config states a table's name, rows (``num_embeddings``) and dim (``embedding_dim``), but not how it is
looked up. What is missing is assumed, stated and logged (one warning per call, naming the tables):

- pooling factor (mean ids per sample): ``DEFAULT_POOLING`` = 1.0 per feature, i.e. every feature one-hot; a
  table shared by several features (``feature_names``) does one lookup per feature per sample, as in
  ``autoshard.torchrec.model_import``. TorchRec's own ``pooling`` field (SUM / MEAN, a reduction, not a count)
  is ignored.
- lookup distribution: ``lookups.default_lookup_spec`` (a power law of exponent ``DEFAULT_ALPHA``, 0.7, over
  a bounded active vocabulary; both medians of the synthetic generator's density fitted to the published
  dlrm_datasets statistics; see ``tables.lookups``), seeded from the table name. A given skew (``alpha``)
  replaces only the exponent.

Every table is written with its lookup distribution, and its 17 access bins are computed from one generated
batch of ``stats_batch_size`` samples (65536, the published batch, as ``tables.synth`` does), so a tables file
made here is profiled and evaluated without any further assumption.

Inputs (``load_configs``): a JSON file holding a list of such dicts or ``{"tables": [...]}``; or a Python
attribute ``package.module:NAME`` / ``path/to/file.py:NAME`` (a list of ``EmbeddingBagConfig`` or dicts, or an
``EmbeddingBagCollection``), which IMPORTS (runs) that user code.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from autoshard.errors import AutoshardError
from autoshard.io import read_json
from autoshard.tables.lookups import (
    DEFAULT_ALPHA,
    DEFAULT_VOCAB_LOG_RATIO,
    access_bins,
    default_lookup_spec,
    name_seed,
    sample_lookups,
)
from autoshard.tables.synth import STATS_BATCH_SIZE, STATS_SEED
from autoshard.tables.table import Table, TablePool

logger = logging.getLogger(__name__)

GENERATOR = "autoshard.tables.configs"

DEFAULT_POOLING = 1.0
"""Ids per sample per feature assumed when a config states no pooling factor: a one-hot feature."""

_TORCHREC_POOLING_TYPES = ("SUM", "MEAN", "NONE")
"""TorchRec's ``pooling`` (PoolingType names): a reduction, not a count; ignored as a pooling factor."""


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _positive_int(value: Any, what: str) -> int:
    whole = isinstance(value, int) or isinstance(value, float) and math.isfinite(value) and value.is_integer()
    if isinstance(value, bool) or not whole or int(value) <= 0:
        raise AutoshardError(f"{what} is {value!r}; it must be a positive integer")
    return int(value)


def _non_negative(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)) \
            or float(value) < 0:
        raise AutoshardError(f"{what} is {value!r}; it must be a finite number >= 0")
    return float(value)


def _fields(item: Any, i: int) -> dict[str, Any]:
    """name, rows, dim, features, pooling (or None), alpha (or None) of config ``i`` (a dict or an
    EmbeddingBagConfig-like object)."""
    if isinstance(item, Mapping):
        missing = [k for k in ("name", "num_embeddings", "embedding_dim") if k not in item]
        if missing:
            raise AutoshardError(f"table config {i} ({item.get('name', 'unnamed')!r}) lacks {missing[0]!r}; "
                                 "each needs name, num_embeddings, embedding_dim (TorchRec's field names)")
        get = item.get
    elif all(hasattr(item, k) for k in ("name", "num_embeddings", "embedding_dim")):
        def get(k: str, default: Any = None) -> Any:
            # a TorchRec config's own `pooling` is its reduction (PoolingType), never a count
            return None if k in ("pooling", "pooling_factor", "alpha") else getattr(item, k, default)
    else:
        raise AutoshardError(f"table config {i} is a {type(item).__name__}; give EmbeddingBagConfig objects "
                             "or dicts with name, num_embeddings, embedding_dim")
    name = get("name")
    if not isinstance(name, str) or not name:
        raise AutoshardError(f"table config {i}: name {name!r} must be a non-empty string")
    features = get("feature_names") or []
    if isinstance(features, str) or not isinstance(features, Sequence):
        raise AutoshardError(f"table {name!r}: feature_names {features!r} must be a list of names")
    pooling = get("pooling_factor", get("pooling"))
    if isinstance(pooling, str) or type(pooling).__name__ == "PoolingType":
        if str(getattr(pooling, "name", pooling)).upper() not in _TORCHREC_POOLING_TYPES:
            raise AutoshardError(f"table {name!r}: pooling {pooling!r} is not a number of ids per sample")
        pooling = None
    alpha = get("alpha")
    return {
        "name": name,
        "rows": _positive_int(get("num_embeddings"), f"table {name!r} num_embeddings"),
        "dim": _positive_int(get("embedding_dim"), f"table {name!r} embedding_dim"),
        "features": max(len(features), 1),
        "pooling": None if pooling is None else _non_negative(pooling, f"table {name!r} pooling"),
        "alpha": None if alpha is None else _non_negative(alpha, f"table {name!r} alpha"),
    }


def _check_overrides(values: Mapping[str, float] | None, names: set[str], what: str) -> dict[str, float]:
    out = {}
    for name, v in dict(values or {}).items():
        if name not in names:
            known = ", ".join(sorted(names)[:5]) + (", ..." if len(names) > 5 else "")
            raise AutoshardError(f"{what} names table {name!r}, which is not in the configs ({known})")
        out[name] = _non_negative(v, f"{what} of table {name!r}")
    return out


def _listed(names: list[str]) -> str:
    return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def _convert(configs: Any, pooling: Mapping[str, float] | None, skew: Mapping[str, float] | None,
             default_pooling: float | None, stats_batch_size: int
             ) -> tuple[list[Table], list[str], list[str]]:
    """The tables, and the names of those given the default pooling and the default alpha."""
    if hasattr(configs, "embedding_bag_configs"):  # an EmbeddingBagCollection
        configs = configs.embedding_bag_configs()
    if isinstance(configs, (str, bytes, Mapping)) or not isinstance(configs, Sequence) or not configs:
        raise AutoshardError("give a non-empty list of EmbeddingBagConfig or dicts (name, num_embeddings, "
                             "embedding_dim)")
    if int(stats_batch_size) <= 0:
        raise AutoshardError(f"stats batch size {stats_batch_size} must be positive")
    items = [_fields(c, i) for i, c in enumerate(configs)]
    seen: set[str] = set()
    for it in items:
        if it["name"] in seen:
            raise AutoshardError(f"table {it['name']!r} appears more than once in the configs; "
                                 "table names must be unique")
        seen.add(it["name"])
    given_pooling = _check_overrides(pooling, seen, "pooling")
    given_alpha = _check_overrides(skew, seen, "alpha")
    per_feature = DEFAULT_POOLING if default_pooling is None else _non_negative(default_pooling,
                                                                                "default pooling")
    tables, assumed_pooling, assumed_alpha = [], [], []
    for it in items:
        pf = given_pooling.get(it["name"], it["pooling"])
        if pf is None:
            pf = per_feature * it["features"]
            assumed_pooling.append(it["name"])
        alpha = given_alpha.get(it["name"], it["alpha"])
        if alpha is None:
            alpha = DEFAULT_ALPHA
            assumed_alpha.append(it["name"])
        table = Table(it["name"], it["dim"], it["rows"], float(pf))
        table = replace(table, lookups=default_lookup_spec(table, alpha))
        bins = access_bins(sample_lookups(table, int(stats_batch_size), seed=STATS_SEED).indices)
        tables.append(replace(table, access_bins=bins))
    if assumed_pooling:
        log = logger.warning if default_pooling is None else logger.info
        log("%d tables state no pooling factor (%s); assuming %g ids per sample per feature (one-hot); "
            "give --pooling NAME=X", len(assumed_pooling), _listed(assumed_pooling), per_feature)
    if assumed_alpha:
        logger.warning("%d tables state no skew (%s); assuming a power law of alpha %g over a bounded active "
                       "vocabulary (tables.lookups.DEFAULT_ALPHA); give --alpha NAME=X",
                       len(assumed_alpha), _listed(assumed_alpha), DEFAULT_ALPHA)
    return tables, assumed_pooling, assumed_alpha


def tables_from_configs(
    configs: Any,
    pooling: Mapping[str, float] | None = None,
    skew: Mapping[str, float] | None = None,
    default_pooling: float | None = None,
    stats_batch_size: int = STATS_BATCH_SIZE,
) -> list[Table]:
    """autoshard tables for TorchRec ``EmbeddingBagConfig`` objects or dicts (name, num_embeddings,
    embedding_dim; optional feature_names, pooling (mean ids per sample), alpha (skew exponent)).

    ``pooling`` and ``skew`` map table names to a pooling factor and a power-law exponent, overriding the
    configs. A missing pooling factor is ``default_pooling`` (``DEFAULT_POOLING`` with a warning if None) per
    feature; a missing exponent ``DEFAULT_ALPHA`` (warned). Access bins come from one generated batch of
    ``stats_batch_size`` samples. Raises AutoshardError (one line) on any bad input.
    """
    return _convert(configs, pooling, skew, default_pooling, stats_batch_size)[0]


def pool_from_configs(
    configs: Any,
    pooling: Mapping[str, float] | None = None,
    skew: Mapping[str, float] | None = None,
    default_pooling: float | None = None,
    stats_batch_size: int = STATS_BATCH_SIZE,
    origin: str | None = None,
) -> TablePool:
    """``tables_from_configs`` as a TablePool whose ``source`` records the input and every assumption."""
    tables, assumed_pooling, assumed_alpha = _convert(configs, pooling, skew, default_pooling,
                                                      stats_batch_size)
    return TablePool.from_tables(tables, {
        "generator": GENERATOR,
        "configs": origin,
        "stats_batch_size": int(stats_batch_size),
        "stats_seed": STATS_SEED,
        "default_pooling_per_feature": DEFAULT_POOLING if default_pooling is None else float(default_pooling),
        "default_pooling_tables": assumed_pooling,
        "default_alpha": DEFAULT_ALPHA,
        "default_vocab_log_ratio": DEFAULT_VOCAB_LOG_RATIO,
        "default_alpha_tables": assumed_alpha,
    })


def _import_attribute(spec: str) -> Any:
    """``package.module:NAME`` or ``path/to/file.py:NAME``: imports (runs) that module."""
    module_name, _, attr = spec.rpartition(":")
    if not module_name or not attr:
        raise AutoshardError(f"{spec!r}: give a JSON file, package.module:NAME or path/to/file.py:NAME")
    try:
        if module_name.endswith(".py") or os.sep in module_name or "/" in module_name:
            path = Path(module_name)
            if not path.is_file():
                raise AutoshardError(f"{path}: no such file; check the path")
            unique = f"_autoshard_configs_{name_seed(str(path.resolve()))}"
            mod_spec = importlib.util.spec_from_file_location(unique, path)
            if mod_spec is None or mod_spec.loader is None:
                raise AutoshardError(f"{path}: not a Python module; give a .py file")
            module = importlib.util.module_from_spec(mod_spec)
            sys.modules[unique] = module  # dataclasses defined in it look their module up here
            mod_spec.loader.exec_module(module)
        else:
            cwd = os.getcwd()
            added = cwd not in sys.path
            if added:  # `autoshard` as a console script does not search the working directory
                sys.path.insert(0, cwd)
            try:
                module = importlib.import_module(module_name)
            finally:
                if added:
                    sys.path.remove(cwd)
    except AutoshardError:
        raise
    except ModuleNotFoundError as e:
        raise AutoshardError(f"{spec!r}: cannot import {module_name} ({_one_line(e)}); check the module path "
                             "and that its package is importable from here") from None
    except Exception as e:  # noqa: BLE001 - user code: any failure is reported in one line
        raise AutoshardError(f"{spec!r}: importing {module_name} failed ({type(e).__name__}: "
                             f"{_one_line(e)})") from None
    if not hasattr(module, attr):
        raise AutoshardError(f"{spec!r}: module {module_name} has no attribute {attr!r}")
    return getattr(module, attr)


def load_configs(spec: str) -> list[Any]:
    """Table configs from a JSON file (a list of dicts, or ``{"tables": [...]}``) or a Python attribute
    ``package.module:NAME`` / ``path/to/file.py:NAME`` (imports that code). Raises AutoshardError (one line)
    for a missing file, bad JSON, a missing attribute or a value that is no list of configs."""
    if Path(spec).is_file() or ":" not in spec:
        data: Any = read_json(spec)
        if isinstance(data, Mapping):
            if not isinstance(data.get("tables"), list):
                raise AutoshardError(f"{spec}: expected a list of table configs or {{\"tables\": [...]}}")
            data = data["tables"]
    else:
        data = _import_attribute(spec)
        if hasattr(data, "embedding_bag_configs"):  # an EmbeddingBagCollection
            data = data.embedding_bag_configs()
    if isinstance(data, (str, bytes, Mapping)) or not isinstance(data, Sequence):
        raise AutoshardError(f"{spec}: expected a list of table configs, found a {type(data).__name__}")
    if not data:
        raise AutoshardError(f"{spec}: the list of table configs is empty")
    return list(data)
