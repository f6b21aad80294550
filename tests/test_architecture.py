"""The model, engine, io and importers never import Qt (import-linter contract in pyproject)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_import_linter_contract():
    exe = shutil.which("lint-imports")
    if exe is None:
        pytest.skip("import-linter is not installed")
    res = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 kept, 0 broken" in res.stdout


def test_engine_runs_without_qt_loaded():
    code = ("import sys, memdesigner; d = memdesigner.load_design('resources/examples/lenet5.json');"
            "memdesigner.estimate(d, mode='train', batch=4);"
            "assert not any(m.startswith(('PySide6', 'pyqtgraph')) for m in sys.modules), 'Qt imported'")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_ruff_lint_is_clean():
    exe = shutil.which("ruff")
    if exe is None:
        pytest.skip("ruff is not installed")
    res = subprocess.run([exe, "check", "memdesigner", "tests", "benchmarks"], cwd=ROOT, capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stdout
