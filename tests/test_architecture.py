"""The architecture's contracts (pyproject's import-linter section): model, engine, io and importers
never import Qt, and the packages import only downward (cli > _qt > measure > reports, snapshot,
exporters, importers > document > engine > io > model > units). The tools are the ones installed
beside this interpreter (the README's test command runs ``.venv/bin/python -m pytest`` without the
venv on PATH), and a missing tool fails the test rather than skipping it."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _tool(name: str) -> str:
    exe = BIN / name
    assert exe.is_file(), f"{name} is not installed beside {sys.executable} (pip install -e '.[test]')"
    return str(exe)


def test_import_linter_contracts():
    res = subprocess.run([_tool("lint-imports")], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "2 kept, 0 broken" in res.stdout


def test_engine_runs_without_qt_loaded():
    code = ("import sys, memdesigner; d = memdesigner.load_design('resources/examples/lenet5.json');"
            "memdesigner.estimate(d, mode='train', batch=4);"
            "assert not any(m.startswith(('PySide6', 'pyqtgraph')) for m in sys.modules), 'Qt imported'")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_ruff_lint_is_clean():
    res = subprocess.run([_tool("ruff"), "check", "memdesigner", "tests", "benchmarks"], cwd=ROOT, capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stdout
