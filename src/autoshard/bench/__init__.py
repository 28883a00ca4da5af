"""Benchmarks: the named suites (``suites``), ``runner.run_suite`` (the pipeline, then ``summary`` and
``report``), used by ``autoshard bench`` and ``autoshard quickstart``."""
