"""autoshard: learned embedding-table sharding for DLRM-style recommenders."""

__version__ = "0.1.0"
