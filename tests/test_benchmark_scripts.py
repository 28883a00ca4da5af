"""Every ``benchmarks/*.py`` script imports against the current API, and does its work only under
``__main__``.

The scripts are not run by the suite (they take minutes to hours), so a renamed or removed function they
import would otherwise go unnoticed until someone re-runs a benchmark. Importing them (without running
``main``) catches that in a second.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("*.py"))


def _is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":``"""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    t = node.test
    return (isinstance(t.left, ast.Name) and t.left.id == "__name__" and len(t.ops) == 1
            and isinstance(t.ops[0], ast.Eq) and isinstance(t.comparators[0], ast.Constant)
            and t.comparators[0].value == "__main__")


def test_benchmarks_found():
    assert SCRIPTS, f"no scripts in {BENCHMARKS}"


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_benchmark_script_guards_its_work(script: Path):
    tree = ast.parse(script.read_text(), filename=str(script))
    assert any(_is_main_guard(n) for n in tree.body), \
        f"{script.name}: no `if __name__ == \"__main__\":` block; put its work in main() and guard the call"


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_benchmark_script_imports(script: Path):
    name = f"_autoshard_benchmark_{script.stem}"
    spec = importlib.util.spec_from_file_location(name, script)
    assert spec is not None and spec.loader is not None, f"{script.name}: cannot make an import spec"
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and the like look their module up by name while it executes
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - any failure to import is the finding, named with the script
        pytest.fail(f"benchmarks/{script.name} fails on import: {type(e).__name__}: {e}")
    finally:
        sys.modules.pop(name, None)
    assert callable(getattr(module, "main", None)), f"{script.name}: no main() to run"


def test_policy_tasks_refuses_a_file_that_is_not_tasks_in_one_line(tmp_path: Path, capsys):
    """benchmarks/policy_tasks.py (the shipped policy's tasks, DEFAULTS.md): a missing file or a file of the
    wrong kind is one line on stderr and exit 2, before any pipeline stage runs or any output is written."""
    spec = importlib.util.spec_from_file_location("_autoshard_policy_tasks", BENCHMARKS / "policy_tasks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tables = tmp_path / "tables.json"
    tables.write_text('{"kind": "autoshard.tables", "version": 1, "tables": []}')
    for train in (tmp_path / "missing.json", tables):
        out = tmp_path / "out"
        assert module.main(["--train", str(train), "--test", str(train), "--work", str(tmp_path / "w"),
                            "-o", str(out)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and "\n" not in err and str(train) in err
        assert not out.exists() and not (tmp_path / "w").exists()
