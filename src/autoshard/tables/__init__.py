"""Tables and workloads: the Table type, its features, trace loading and the synthetic generator."""

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
    "ACCESS_BIN_EDGES", "FEATURE_NAMES", "NUM_ACCESS_BINS", "NUM_FEATURES", "FeatureNormalizer", "LookupKind",
    "LookupSpec", "Precision", "Table", "TablePool",
]
