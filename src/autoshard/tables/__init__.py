"""Tables and workloads: the Table type, its features, trace loading and the synthetic generator."""

from autoshard.tables.configs import DEFAULT_POOLING, load_configs, pool_from_configs, tables_from_configs
from autoshard.tables.lookups import DEFAULT_ALPHA, default_lookup_spec
from autoshard.tables.table import (
    ACCESS_BIN_EDGES,
    FEATURE_NAMES,
    NUM_ACCESS_BINS,
    NUM_FEATURES,
    FeatureNormalizer,
    LookupKind,
    LookupSpec,
    Precision,
    Table,
    TablePool,
)

__all__ = [
    "ACCESS_BIN_EDGES", "DEFAULT_ALPHA", "DEFAULT_POOLING", "FEATURE_NAMES", "NUM_ACCESS_BINS",
    "NUM_FEATURES", "FeatureNormalizer", "LookupKind", "LookupSpec", "Precision", "Table", "TablePool",
    "default_lookup_spec", "load_configs", "pool_from_configs", "tables_from_configs",
]
