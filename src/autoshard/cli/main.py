"""The ``autoshard`` entry point: parse, dispatch, and turn user errors into one line and a non-zero exit."""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys
from collections.abc import Sequence

import autoshard
import autoshard.cli
from autoshard.errors import AutoshardError

_NOT_COMMANDS = {"main", "common"}


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line (what is wrong, where to look) and exit code 2, without the usage block."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}; see '{self.prog} --help'\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="autoshard",
        description="Place DLRM embedding tables across devices so the slowest device is fastest.",
    )
    parser.add_argument("--version", action="version", version=f"autoshard {autoshard.__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(autoshard.cli.__path__), key=lambda m: m.name):
        if info.name in _NOT_COMMANDS:
            continue
        module = importlib.import_module(f"autoshard.cli.{info.name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except AutoshardError as e:
        print(f"autoshard: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("autoshard: interrupted; completed work was saved, re-run the command to resume",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
