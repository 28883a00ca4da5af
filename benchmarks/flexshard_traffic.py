"""FlexShard vs table_wise, row_wise and table_row_wise on skewed sequence tables, at the same memory.

Nine sequence tables (power-law exponents 0.8, 1.0, 1.2 x mean sequence lengths 50, 200, 500; 2M rows of dim
64 each), 2 hosts x 4 devices, 64 samples per rank per step. Every plan is charged against the same
per-device budget: row_wise's footprint plus ``--headroom`` (FlexShard's replicas must fit in what row_wise
leaves free; ``planners.flexshard`` states the rules). Printed:

- MODELLED (``costs.sequence_traffic``, declared topology: TorchRec's default 600 GB/s intra-host, 12.5 GB/s
  inter-host): expected bytes per step of the three all-to-alls (ids, embeddings, gradients), the
  inter-host part, their time, and the replicas' gradient all-reduce (bytes and time), per table and total;
- MEASURED: the FlexShard and row_wise all-to-alls of all tables together, each with its plan's expected
  byte matrix (``hardware.collectives.measure_all_to_alls``), and the replicas' gradient all-reduce
  (``hardware.sequence_runtime.measure_replica_sync``), on 8 local gloo processes. The two "hosts" are a
  label: all 8 processes share this machine's cores and loopback, so there is no slow inter-host link and
  the processes contend for the CPUs; the measured ratio reflects the bytes moved, not the link tiers.

Run: ``.venv/bin/python benchmarks/flexshard_traffic.py`` (about a minute; ``--no-measure`` for the model
only).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from autoshard.costs.sequence_traffic import sequence_traffic
from autoshard.hardware.collectives import measure_all_to_alls
from autoshard.hardware.sequence_runtime import measure_replica_sync
from autoshard.planners.flexshard import compare_at_same_memory
from autoshard.tables.sequence import SequenceTable
from autoshard.topology import Topology

PLANS = ("table_wise", "row_wise", "table_row_wise", "flexshard")
PAPER = "FlexShard paper (abstract): > 85% less global all-to-all traffic, ~6x lower communication latency"


def _mb(x: float) -> str:
    return f"{x / 1e6:9.1f}"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--batch", type=int, default=64, help="samples per rank per step")
    ap.add_argument("--hosts", type=int, default=2)
    ap.add_argument("--local", type=int, default=4, help="devices per host")
    ap.add_argument("--headroom", type=float, default=0.05, help="budget = row_wise footprint x (1 + this)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--no-measure", action="store_true")
    args = ap.parse_args(argv)

    d = args.hosts * args.local
    topo = Topology(args.hosts)
    tables = [SequenceTable.from_power_law(f"a{a}_s{s}", args.rows, args.dim, a, s, seq_len_cv=0.5,
                                           head_rows=4096, seed=i)
              for i, (a, s) in enumerate((a, s) for a in (0.8, 1.0, 1.2) for s in (50, 200, 500))]
    footprint = sum(-(-t.rows // d) * t.dim * 4 for t in tables)
    budget = footprint * (1 + args.headroom)
    t0 = time.perf_counter()
    cmp = compare_at_same_memory(tables, topo, d, args.batch, budget)
    plan_s = time.perf_counter() - t0
    print(f"{len(tables)} sequence tables of {args.rows:,} rows x dim {args.dim}; {args.hosts} hosts x "
          f"{args.local} devices; {args.batch} samples per rank per step")
    print(f"topology: {topo.source}: intra {topo.intra_bytes_per_ms / 1e6:.1f} GB/s, inter "
          f"{topo.inter_bytes_per_ms / 1e6:.1f} GB/s, latency {topo.latency_ms} ms")
    print(f"budget per device: {budget / 1e6:.1f} MB = row_wise footprint {footprint / 1e6:.1f} MB x "
          f"{1 + args.headroom:.2f} (same for every plan); planning + comparison {plan_s:.2f} s")
    fs = cmp["flexshard"].placements
    print("\nMODELLED per table (bytes per step; a2a = ids + embeddings + gradients; ms on the declared "
          "topology)")
    print(f"{'table':12s} {'plan':15s} {'a2a MB':>9s} {'inter MB':>9s} {'a2a ms':>8s} {'sync MB':>8s} "
          f"{'sync ms':>8s}  tiers (k_all, k_host: share of lookups)")
    for i, t in enumerate(tables):
        for name in PLANS:
            tr = sequence_traffic([(t, cmp[name].placements[i])], topo, args.batch)
            tiers = ""
            if name == "flexshard":
                ka = sum(tt.stop - tt.start for tt in fs[i].tiers if len(tt.copies) == d and tt.width == 1)
                kh = sum(tt.stop - tt.start for tt in fs[i].tiers if len(tt.copies) == args.hosts
                         and tt.width == args.local)
                tiers = f"  {ka}, {kh}: {t.hot_mass(ka):.2f}, {t.hot_mass(ka + kh) - t.hot_mass(ka):.2f}"
            print(f"{t.name:12s} {name:15s} {_mb(tr.a2a_bytes)} {_mb(tr.a2a_inter_bytes)} {tr.a2a_ms:8.3f} "
                  f"{tr.sync_bytes / 1e6:8.2f} {tr.sync_ms:8.3f}{tiers}")
    print("\nMODELLED total (all tables in the same collectives)")
    print(f"{'plan':15s} {'a2a MB':>9s} {'inter MB':>9s} {'a2a ms':>8s} {'sync MB':>8s} {'sync ms':>8s} "
          f"{'comm ms':>8s} {'peak MB':>8s} fits")
    for name in PLANS:
        tr = cmp[name].traffic
        print(f"{name:15s} {_mb(tr.a2a_bytes)} {_mb(tr.a2a_inter_bytes)} {tr.a2a_ms:8.3f} "
              f"{tr.sync_bytes / 1e6:8.2f} {tr.sync_ms:8.3f} {tr.comm_ms:8.3f} "
              f"{tr.peak_memory_bytes / 1e6:8.1f} {cmp[name].fits}")
    f, r = cmp["flexshard"].traffic, cmp["row_wise"].traffic
    fitting = [n for n in PLANS[:3] if cmp[n].fits]
    best = min(fitting, key=lambda n: cmp[n].traffic.comm_ms)
    b = cmp[best].traffic
    print(f"\nFlexShard vs row_wise (modelled): a2a bytes -{1 - f.a2a_bytes / r.a2a_bytes:.1%}, inter-host "
          f"a2a bytes -{1 - f.a2a_inter_bytes / r.a2a_inter_bytes:.1%}, a2a time {r.a2a_ms / f.a2a_ms:.2f}x "
          f"lower, comm time incl. replica sync {r.comm_ms / f.comm_ms:.2f}x lower; memory "
          f"{f.memory_bytes.sum() / r.memory_bytes.sum() - 1:+.2%} of row_wise's total")
    print(f"FlexShard vs the best baseline that fits the budget ({best}, modelled): comm time "
          f"{b.comm_ms / f.comm_ms:.2f}x lower, inter-host a2a bytes "
          f"-{1 - f.a2a_inter_bytes / b.a2a_inter_bytes:.1%}")
    print(PAPER)
    if args.no_measure:
        return

    names = ("ids", "embeddings", "gradients")
    mats = [cmp[p].traffic.get(n).matrix for p in ("flexshard", "row_wise") for n in names]
    print(f"\nMEASURED on {d} local gloo processes (one machine: the {args.hosts} 'hosts' are a label, no "
          "slow link; the processes share its CPUs and contend), "
          f"median of {args.repeats} runs after {args.warmup} warm-up")
    t0 = time.perf_counter()
    timings = measure_all_to_alls(mats, backend="gloo", warmup=args.warmup, repeats=args.repeats)
    a2a_s = time.perf_counter() - t0
    measured = {}
    for k, p in enumerate(("flexshard", "row_wise")):
        ms = [timings[3 * k + j].ms for j in range(3)]
        measured[p] = sum(ms)
        moved = sum(timings[3 * k + j].matrix_bytes_total for j in range(3))
        print(f"{p:15s} all-to-alls: " + ", ".join(f"{n} {m:.1f} ms" for n, m in zip(names, ms))
              + f"; total {sum(ms):.1f} ms for {moved / 1e6:.1f} MB")
    t0 = time.perf_counter()
    sync = measure_replica_sync([(t.dim, p) for t, p in zip(tables, fs)], warmup=args.warmup,
                                repeats=args.repeats)
    sync_s = time.perf_counter() - t0
    print(f"flexshard replica gradient all-reduce (dense, torch.distributed.all_reduce per replica group): "
          f"{np.mean(sync.bytes_per_rank) / 1e6:.2f} MB per rank, {sync.ms:.1f} ms "
          f"(modelled bytes sent over links {f.sync_bytes / 1e6:.2f} MB)")
    print(f"measured comm: row_wise {measured['row_wise']:.1f} ms vs flexshard "
          f"{measured['flexshard']:.1f} ms + sync {sync.ms:.1f} ms = "
          f"{measured['flexshard'] + sync.ms:.1f} ms -> "
          f"{measured['row_wise'] / (measured['flexshard'] + sync.ms):.2f}x lower "
          f"({measured['row_wise'] / measured['flexshard']:.2f}x for the all-to-alls alone)")
    print(f"(measurement wall time: all-to-alls {a2a_s:.0f} s, all-reduce {sync_s:.0f} s)")
    print(PAPER)


if __name__ == "__main__":
    main()
