r"""The shipped policy's training and held-out tasks (src/autoshard/data/DEFAULTS.md, "The policy").

Mixes DLRM-20 (4) tasks (``autoshard tasks ... --split train`` / ``--split test``) with the
production-40-8 suite's *train* tasks, which ``autoshard bench --suite production-40-8`` draws from its train
pool (none of its test tables) and which this script draws the same way, running only the pipeline's first
stages (pool, split, tasks) in ``--work``:

    mix_train.json = the DLRM-20 (4) train tasks + production train tasks 0-39
    mix_eval.json  = the DLRM-20 (4) test tasks  + production train tasks 40-49

    autoshard tables synth --num-tables 400 --seed 0 -o tables.json
    autoshard tasks --tables tables.json --num-tasks 50 --num-tables 20 --devices 4 --memory 5GB \
        --split train -o train.json
    autoshard tasks --tables tables.json --num-tasks 10 --num-tables 20 --devices 4 --memory 5GB \
        --split test -o test.json
    .venv/bin/python benchmarks/policy_tasks.py --train train.json --test test.json --work prod -o .

Nothing is measured (the pool's tables are drawn and their access statistics computed: about 25 s here).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from autoshard.bench.suites import get_suite
from autoshard.errors import AutoshardError
from autoshard.io import read_json, write_json
from autoshard.pipeline.context import Context, PipelineConfig
from autoshard.pipeline.data import stage_pool, stage_split, stage_tasks

PRODUCTION_TRAIN = 40
"""Production train tasks the policy trains on; the suite's other train tasks are held out for its eval."""


def production_train_tasks(work: Path) -> list[dict[str, Any]]:
    """The production-40-8 suite's train tasks, as its bench draws them."""
    ctx = Context(PipelineConfig(suite=get_suite("production-40-8")), work)
    stage_tasks(ctx, stage_split(ctx, stage_pool(ctx)), "train")
    return read_json(work / "train_tasks.json")["tasks"]


def mixed(base: dict[str, Any], extra: list[dict[str, Any]], note: str) -> dict[str, Any]:
    return {"kind": base["kind"], "version": base["version"], "settings": {"mix": note},
            "tasks": base["tasks"] + extra}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train", required=True,
                        help="DLRM-20 (4) train tasks (autoshard tasks --split train)")
    parser.add_argument("--test", required=True, help="DLRM-20 (4) test tasks (autoshard tasks --split test)")
    parser.add_argument("--work", required=True, help="directory for the production suite's first stages")
    parser.add_argument("-o", "--output", default=".", help="where mix_train.json and mix_eval.json go")
    args = parser.parse_args(argv)
    try:
        train = read_json(args.train, kind="autoshard.tasks")
        test = read_json(args.test, kind="autoshard.tasks")
        production = production_train_tasks(Path(args.work))
        out = Path(args.output)
        out.mkdir(parents=True, exist_ok=True)
        write_json(out / "mix_train.json", mixed(train, production[:PRODUCTION_TRAIN],
                                                 f"{args.train} + production-40-8 train tasks 0-39"))
        write_json(out / "mix_eval.json", mixed(test, production[PRODUCTION_TRAIN:],
                                                f"{args.test} + production-40-8 train tasks 40-49"))
    except (AutoshardError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out / 'mix_train.json'} ({len(train['tasks']) + PRODUCTION_TRAIN} tasks) and "
          f"{out / 'mix_eval.json'} ({len(test['tasks']) + len(production) - PRODUCTION_TRAIN} tasks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
