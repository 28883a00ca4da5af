"""The stage cache: a stage runs unless an earlier run in the same directory completed it with the same key.

A stage's key hashes its settings, the keys of the stages it reads, and the code version (``autoshard``'s
version and ``PIPELINE_CODE_VERSION``), so changing a setting re-runs that stage and every stage after it,
and so does a code change that alters what a stage produces.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from autoshard import __version__
from autoshard.errors import AutoshardError
from autoshard.io import ARTEFACT_VERSION, read_json, write_json
from autoshard.pipeline.progress import Say, log_line

PIPELINE_CODE_VERSION = 2
"""Version of what the stages produce, part of every stage key and of each measured task's key. Bump it when a
change makes a stage's outputs mean something else (another generator, profile, fit, training or measuring
recipe), so that a re-run in an old output directory redoes that work instead of reusing stale results.
``autoshard.__version__`` is in the keys too, so a release re-runs everything regardless."""


def code_version() -> dict[str, Any]:
    """What every key and every result records about the code that made it."""
    return {"autoshard": __version__, "pipeline_code": PIPELINE_CODE_VERSION}


PLANNING_CODE = ("planners", "costs")
"""The subpackages of ``autoshard`` a plan is made by (the planners and their defaults, the cost models):
their code is in the keys of the stages that plan (the bench's measured tasks, the refresh loop)."""


def _without_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` with every module, class and function docstring removed (in place)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def code_key(root: Path, packages: Sequence[str]) -> str:
    """Short hash of the Python code under ``root/<package>`` for each of ``packages`` as Python parses it:
    comments and docstrings are left out, so editing them changes nothing."""
    digest = hashlib.sha256()
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            tree = _without_docstrings(ast.parse(path.read_text(), filename=str(path)))
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(ast.dump(tree).encode())
    return digest.hexdigest()[:16]


@functools.cache
def planning_code_key() -> str:
    """``code_key`` of this installation's ``PLANNING_CODE``.

    Why: a planner's default changing (search planning at the mean since stop 59, say) changes the plans of
    every later bench run, but ``PIPELINE_CODE_VERSION`` is bumped for what stages produce, not for planner
    code, so a re-run in an old output directory reused the plans made before (stops 59-61 had to use a
    fresh ``-o``)."""
    return code_key(Path(__file__).resolve().parent.parent, PLANNING_CODE)


def stage_key(settings: dict[str, Any], deps: Sequence[str]) -> str:
    """Short hash of a stage's settings, its dependencies' keys and the code version."""
    blob = json.dumps([settings, list(deps), code_version()], sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def file_key(path: str) -> str:
    """A file's content hash (so a replaced checkpoint changes the keys), or ``path`` itself if no file."""
    p = Path(path)
    if not p.is_file():
        return path
    return hashlib.sha256(p.read_bytes()).hexdigest()[:16]


class StageCache:
    """Runs stages in ``out_dir``, recording each in ``stages/<name>.json``; ``status`` says what each did."""

    def __init__(self, out_dir: str | Path, say: Say = log_line) -> None:
        self.out = Path(out_dir)
        self.say = say
        self.status: dict[str, str] = {}
        """Stage name -> 'ran', 'cached', or 'skipped: why'."""

    def stage(self, name: str, settings: dict[str, Any], deps: Sequence[str], outputs: Sequence[str],
              fn: Callable[[bool], None], usable: Callable[[], str] | None = None) -> str:
        """Run ``fn(resume)`` unless the stage completed with the same key and its outputs exist; return the
        key.

        The record is written as incomplete before ``fn`` runs and complete after, so ``resume`` is True when
        an earlier run of the same stage (same key) was interrupted: ``fn`` may continue what it left.
        ``usable()`` returns '' if cached outputs can still be used, else why not (e.g. a checkpoint this
        version cannot read), and the stage runs again."""
        key = stage_key(settings, deps)
        record = self.out / "stages" / f"{name}.json"
        done: dict[str, Any] = {}
        if record.is_file():
            try:
                done = read_json(record, kind="autoshard.stage")
            except AutoshardError:
                done = {}
        same = done.get("key") == key
        if same and done.get("complete") and all((self.out / o).exists() for o in outputs):
            why = usable() if usable is not None else ""
            if not why:
                self.status[name] = "cached"
                self.say(f"[{name}] cached ({', '.join(outputs)})")
                return key
            self.say(f"[{name}] cached output not usable ({why}); running it again")
            same = False
        resume = same and not done.get("complete")
        self.say(f"[{name}] {'resuming' if resume else 'running'}")
        entry = {"kind": "autoshard.stage", "version": ARTEFACT_VERSION, "name": name, "key": key,
                 "code": code_version(), "deps": list(deps), "settings": settings, "outputs": list(outputs),
                 "complete": False}
        write_json(record, entry)
        start = time.perf_counter()
        fn(resume)
        elapsed = time.perf_counter() - start
        write_json(record, {**entry, "complete": True, "elapsed_s": elapsed})
        self.status[name] = "ran"
        self.say(f"[{name}] done in {elapsed:.1f} s")
        return key

    def skip(self, name: str, why: str) -> str:
        """Record that a stage did not run (its input was given); returns a stand-in key."""
        self.status[name] = f"skipped: {why}"
        self.say(f"[{name}] skipped: {why}")
        return f"skipped:{name}"
