"""Real cost measurement: fused FBGEMM kernels (``kernel``), the all-to-all (``comm``), the resumable
profiling dataset (``profiler``) and ground-truth plan evaluation (``evaluator``). Heavy libraries load on
first use."""
