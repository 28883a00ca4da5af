"""``autoshard flexshard``: plan sequence (unpooled) tables with FlexShard's tiers, beside table-, row- and
table-row-wise at the same memory; ``autoshard flexshard synth`` writes skewed sequence tables to try it."""

from __future__ import annotations

import argparse
import sys

from autoshard.cli.common import positive_int

PLANS = ("table_wise", "row_wise", "table_row_wise", "flexshard")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("flexshard", help="plan sequence tables with FlexShard (tiered hot-row replication)",
                       description="Plan sequence embedding tables (EmbeddingCollection, one vector per id) "
                                   "with FlexShard's tiers: hottest rows on every device, the next once per "
                                   "host, the rest row-wise over the cluster; print every plan type's "
                                   "all-to-all bytes (total and inter-host), modelled comm time and memory "
                                   "at the same per-device budget.")
    p.add_argument("--tables", help="sequence tables JSON (a list of autoshard.sequence_table, e.g. from "
                                    "'autoshard flexshard --synth')")
    p.add_argument("--synth", help="write skewed example sequence tables (alpha 0.8/1.0/1.2 x mean sequence "
                                   "length 50/200/500) to this file and exit")
    p.add_argument("--rows", type=positive_int, default=2_000_000, help="rows of each --synth table")
    p.add_argument("--dim", type=positive_int, default=64, help="dim of each --synth table")
    p.add_argument("--devices", default="2x4", help="HOSTSxLOCAL (default 2x4)")
    p.add_argument("--memory", help="memory per device (default: row_wise's footprint + 5%%)")
    p.add_argument("--batch-per-rank", type=positive_int, default=64, help="samples per rank per step")
    p.add_argument("--measure", action="store_true",
                   help="also time every plan's all-to-alls (and FlexShard's replica all-reduce) on D local "
                        "gloo processes grouped into the hosts (one machine: no slow link between them)")
    p.add_argument("--json", help="also write the comparison as JSON here (to plan the tables with one of "
                                  "these and write a plan file: autoshard plan --tables FILE --algo NAME)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from autoshard.errors import AutoshardError
    from autoshard.io import ARTEFACT_VERSION, write_json
    from autoshard.planners.flexshard import compare_at_same_memory
    from autoshard.planners.sequence_plan import device_budget, load_sequence_tables, write_sequence_tables
    from autoshard.tables.sequence import SequenceTable
    from autoshard.topology import Topology, parse_devices

    if args.synth:
        tables = [SequenceTable.from_power_law(f"a{a}_s{s}", args.rows, args.dim, a, s, seq_len_cv=0.5,
                                               head_rows=4096, seed=i)
                  for i, (a, s) in enumerate((a, s) for a in (0.8, 1.0, 1.2) for s in (50, 200, 500))]
        write_sequence_tables(args.synth, tables)
        print(f"wrote {len(tables)} sequence tables to {args.synth}", file=sys.stderr)
        return 0
    if not args.tables:
        raise AutoshardError("give --tables FILE (sequence tables), or --synth FILE to write an example")
    tables = load_sequence_tables(args.tables)
    hosts, d = parse_devices(args.devices)
    topo = Topology(hosts)
    budget = device_budget(args.memory, tables, d)
    cmp = compare_at_same_memory(tables, topo, d, args.batch_per_rank, budget)
    print(f"{len(tables)} sequence tables on {hosts} hosts x {d // hosts} devices, {args.batch_per_rank} "
          f"samples per rank per step, {budget / 1e9:.3f} GB a device; times MODELLED on the declared "
          f"topology ({topo.source})")
    print(f"{'plan':15s} {'a2a MB':>9s} {'inter MB':>9s} {'a2a ms':>8s} {'sync ms':>8s} {'comm ms':>8s} "
          f"{'peak MB':>9s} fits")
    for name in PLANS:
        c = cmp[name]
        tr = c.traffic
        print(f"{name:15s} {tr.a2a_bytes / 1e6:9.1f} {tr.a2a_inter_bytes / 1e6:9.1f} {tr.a2a_ms:8.3f} "
              f"{tr.sync_ms:8.3f} {tr.comm_ms:8.3f} {tr.peak_memory_bytes / 1e6:9.1f} {c.fits}")
    measured = _measure(cmp, tables, d) if args.measure else {}
    rw, fs = cmp["row_wise"].traffic, cmp["flexshard"].traffic
    print(f"flexshard vs row_wise: all-to-all bytes {fs.a2a_bytes / rw.a2a_bytes - 1:+.1%}, inter-host "
          f"{fs.a2a_inter_bytes / max(rw.a2a_inter_bytes, 1e-9) - 1:+.1%}, comm time "
          f"{rw.comm_ms / fs.comm_ms:.2f}x lower (with the replicas' gradient sync)")
    if args.json:
        write_json(args.json, {"kind": "autoshard.flexshard_comparison", "version": ARTEFACT_VERSION,
                               "devices": args.devices, "budget_bytes": budget,
                               "plans": {n: {"a2a_bytes": cmp[n].traffic.a2a_bytes,
                                             "a2a_inter_bytes": cmp[n].traffic.a2a_inter_bytes,
                                             "a2a_ms": cmp[n].traffic.a2a_ms,
                                             "sync_ms": cmp[n].traffic.sync_ms,
                                             "peak_memory_bytes": cmp[n].traffic.peak_memory_bytes,
                                             "fits": cmp[n].fits, "measured_ms": measured.get(n)}
                                         for n in PLANS}})
    return 0


def _measure(cmp: dict, tables: list, num_devices: int) -> dict[str, float]:
    """Every plan's three all-to-alls timed with their own byte matrices on D processes, plus the replicas'
    all-reduce where a plan has replicas (``hardware.sequence_evaluation.measure_plans_comm``); printed and
    returned (ms a step, measured)."""
    from autoshard.hardware.sequence_evaluation import measure_plans_comm, measurement_note

    timed = measure_plans_comm([(cmp[p].traffic, [(t.dim, pl) for t, pl in zip(tables, cmp[p].placements)])
                                for p in PLANS])
    print(measurement_note(num_devices))
    out = {}
    for name, m in zip(PLANS, timed):
        out[name] = m.total_ms
        sync = m.ms["replica_sync"]
        extra = f" (+ replica all-reduce {sync:.1f} ms)" if sync else ""
        print(f"{name:15s} all-to-alls {m.total_ms - sync:8.1f} ms{extra}")
    print(f"measured: flexshard {out['row_wise'] / out['flexshard']:.2f}x lower than row_wise")
    return out
