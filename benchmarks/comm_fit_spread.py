"""How far apart are comm fits of one host taken minutes apart? Run ``autoshard profile-comm`` several times,
some of them with two busy loops beside for a while (a moment of contention), and print each fit's latency
and bandwidth with their spread; or only print that for fits already taken.

    .venv/bin/python benchmarks/comm_fit_spread.py measure -o out/comm-spread/three-pass --devices 8 \
        --passes 3 --fits 4 --busy 2:0:25,3:25:25
    .venv/bin/python benchmarks/comm_fit_spread.py summarize benchmarks/runs/comm-s71/three-pass
    .venv/bin/python benchmarks/comm_fit_spread.py estimators benchmarks/runs/comm-s71/paired

``--busy F:START:SECONDS,...``: during fit F (1-based), two ``yes > /dev/null`` loops from START seconds after
the fit began, for SECONDS (a 2-vCPU host then has no core to spare). Between fits the script waits
``--gap`` seconds (default 27, past the longest busy window) so one fit's load does not spill into the next.
Each fit is its own directory (``fitK/comm.jsonl``, ``fitK/comm_model.json``), so a run can be archived and
summarised again.

``estimators``: fits of several passes (stop 71's records keep each pass's own fwd/bwd median) refitted with
each point's forward and backward times taken four ways from the same timings: as recorded (the least of
the passes' medians, ``hardware.comm``'s since stop 71; for stop 71's ``paired`` set, taken by the code that
tried it, the median over all the passes' repeats), the first pass alone (what one pass of repeats gives:
the sweep before stop 71), the least of the passes' medians, and the median of them; the latency and
bandwidth of each, per fit, and their spread over the fits (paired: every way sees the same moments).

Why (docs/benchmarks.md, "Stop 71"): on a host with fewer cores than ranks the bench models the all-to-alls
from a fit taken at the start of every run, so the fit's own spread moves every plan's collectives, half or
more of a step there.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from autoshard.costs.comm import AlphaBeta
from autoshard.errors import AutoshardError
from autoshard.hardware.comm import COMM_MODEL_FILE, CommRecord, fit_alpha_beta, load_comm_records

ESTIMATORS = {
    "as recorded": None,
    "first pass": lambda passes: passes[0],
    "least of passes": lambda passes: passes.min(axis=0),
    "median of passes": lambda passes: np.median(passes, axis=0),
}
"""How a point's (fwd, bwd) is taken from its passes' medians (an (passes, 2) array); None: as recorded."""


def parse_busy(text: str) -> dict[int, tuple[float, float]]:
    """``"F:START:SECONDS,..."`` -> {fit: (start s, seconds)}; one-line error on anything else."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            fit, start, seconds = part.split(":")
            out[int(fit)] = (float(start), float(seconds))
        except ValueError:
            raise AutoshardError(f"--busy {text!r}: use FIT:START:SECONDS,... e.g. 2:0:25") from None
    return out


def fit_rows(root: Path) -> list[tuple[str, AlphaBeta, int]]:
    """(fit directory name, its comm model, passes of its records) for every ``fit*`` directory of ``root``
    in order; one-line error where there is none."""
    dirs = sorted((d for d in root.glob("fit*") if (d / COMM_MODEL_FILE).is_file()),
                  key=lambda d: int(d.name.removeprefix("fit") or 0))
    if not dirs:
        raise AutoshardError(f"{root}: no fitK/{COMM_MODEL_FILE} directories; run `measure` first")
    return [(d.name, AlphaBeta.load(str(d / COMM_MODEL_FILE)),
             min((r.passes for r in load_comm_records(d)), default=1)) for d in dirs]


def _cv(xs: list[float]) -> float:
    return statistics.stdev(xs) / statistics.fmean(xs) if len(xs) >= 2 else 0.0


def summary(root: Path, busy: set[str] = frozenset()) -> str:
    """A markdown table of the fits in ``root`` and a line with the mean and coefficient of variation."""
    rows = fit_rows(root)
    lines = ["| fit | passes | alpha ms | GB/s |", "|---|---|---|---|"]
    for name, comm, passes in rows:
        mark = " (busy loops beside)" if name in busy else ""
        lines.append(f"| {name}{mark} | {passes} | {comm.alpha_ms:.2f} | {comm.bytes_per_ms / 1e6:.3f} |")
    alphas = [c.alpha_ms for _, c, _ in rows]
    bws = [c.bytes_per_ms / 1e6 for _, c, _ in rows]
    if len(rows) >= 2:
        lines.append(f"\n{root}: {len(rows)} fits; alpha mean {statistics.fmean(alphas):.2f} ms (cv "
                     f"{_cv(alphas):.3f}, {min(alphas):.2f}-{max(alphas):.2f}); bandwidth mean "
                     f"{statistics.fmean(bws):.3f} GB/s (cv {_cv(bws):.3f}, {min(bws):.3f}-{max(bws):.3f})")
    return "\n".join(lines)


def refit(records: list[CommRecord], estimator: str) -> AlphaBeta:
    """The alpha-beta fit of ``records`` with each point's fwd/bwd taken by ``estimator`` from its passes."""
    how = ESTIMATORS[estimator]
    if how is None:
        return fit_alpha_beta(records)
    if any(len(r.pass_ms) < 2 for r in records):
        raise AutoshardError("the estimators need records of 2+ passes (profile-comm --passes 3, stop 71 on)")
    taken = [how(np.array(r.pass_ms)) for r in records]
    return fit_alpha_beta([replace(r, fwd_ms=float(fwd), bwd_ms=float(bwd))
                           for r, (fwd, bwd) in zip(records, taken)])


def estimators(root: Path) -> str:
    """A markdown table: per estimator, each fit's latency and the spread over the fits of latency and
    bandwidth."""
    names = [name for name, _, _ in fit_rows(root)]
    lines = [f"| estimator | alpha ms per fit ({', '.join(names)}) | alpha mean (cv) | GB/s mean (cv) |",
             "|---|---|---|---|"]
    for estimator in ESTIMATORS:
        fits = [refit(load_comm_records(root / name), estimator) for name in names]
        alphas = [f.alpha_ms for f in fits]
        bws = [f.bytes_per_ms / 1e6 for f in fits]
        lines.append(f"| {estimator} | {' '.join(f'{a:.2f}' for a in alphas)} | "
                     f"{statistics.fmean(alphas):.2f} ({_cv(alphas):.3f}) | "
                     f"{statistics.fmean(bws):.3f} ({_cv(bws):.3f}) |")
    return "\n".join(lines)


def _busy_loops(start: float, seconds: float) -> list[subprocess.Popen]:
    """Two busy loops that begin after ``start`` s and stop after ``seconds`` (in their own shells, so the
    fit is not held up starting them)."""
    script = f"sleep {start}; timeout {seconds} sh -c 'yes > /dev/null'"
    return [subprocess.Popen(["sh", "-c", script]) for _ in range(2)]


def measure(out: Path, devices: int, passes: int, fits: int, busy: dict[int, tuple[float, float]],
            gap_s: float) -> None:
    autoshard = Path(sys.executable).with_name("autoshard")
    for k in range(1, fits + 1):
        loops = _busy_loops(*busy[k]) if k in busy else []
        began = time.perf_counter()
        cmd = [str(autoshard), "profile-comm", "-o", str(out / f"fit{k}"), "--devices", str(devices),
               "--passes", str(passes)]
        done = subprocess.run(cmd, check=False, capture_output=True, text=True, env=os.environ.copy())
        for p in loops:
            p.wait()
        if done.returncode != 0:
            raise AutoshardError(f"fit {k}: profile-comm failed: {done.stderr.strip().splitlines()[-1:]}")
        print(f"fit {k}: {time.perf_counter() - began:.1f} s; {done.stdout.strip().splitlines()[-1]}",
              flush=True)
        if k < fits:
            time.sleep(gap_s)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("measure", help="take the fits, then summarise them")
    m.add_argument("-o", "--output", required=True, help="directory for fit1, fit2, ...")
    m.add_argument("--devices", type=int, default=8)
    m.add_argument("--passes", type=int, default=3)
    m.add_argument("--fits", type=int, default=4)
    m.add_argument("--busy", default="", help="FIT:START:SECONDS,... fits with two busy loops beside")
    m.add_argument("--gap", type=float, default=27.0, help="seconds between fits (default 27)")
    s = sub.add_parser("summarize", help="summarise fits already taken")
    s.add_argument("root", help="a directory of fitK/ directories")
    s.add_argument("--busy", default="", help="FIT:START:SECONDS,... to mark those fits in the table")
    e = sub.add_parser("estimators", help="refit fits of several passes with each way of taking a point")
    e.add_argument("root", help="a directory of fitK/ directories")
    args = p.parse_args(argv)
    try:
        if args.command == "estimators":
            print(estimators(Path(args.root)))
            return 0
        busy = parse_busy(args.busy)
        root = Path(args.output if args.command == "measure" else args.root)
        if args.command == "measure":
            if args.fits < 1 or args.passes < 1 or args.devices < 2:
                raise AutoshardError("--fits and --passes must be at least 1, --devices at least 2")
            measure(root, args.devices, args.passes, args.fits, busy, args.gap)
        print(summary(root, {f"fit{k}" for k in busy}))
    except AutoshardError as e:
        print(f"comm_fit_spread: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
