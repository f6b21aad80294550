"""The architecture's contracts (pyproject's import-linter section): model, engine, io and importers
never import Qt, and the packages import only downward (cli > _qt > measure > reports, snapshot,
exporters, importers > document > engine > io > model > units), and inside the engine too (advisors >
searches > estimate > generate > step > ranks > passes > rules), and inside the window (entry points >
main_window > menus > dialogs > jobs > views > blocks > document > scheduling > theme). The tools are the ones installed
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
    assert "4 kept, 0 broken" in res.stdout


def _layers(container: str) -> list[str]:
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c.get("containers") == [container]]
    return [m.strip() for layer in contract["layers"] for m in layer.replace(":", "|").split("|")]


def _engine_layers() -> list[str]:
    return _layers("memdesigner.engine")


def test_every_window_module_and_subpackage_is_in_the_window_layers():
    """As for the engine: a module or subpackage of ``_qt`` the layers leave out is not checked."""
    qt = ROOT / "memdesigner" / "_qt"
    present = sorted([p.stem for p in qt.glob("*.py") if p.stem != "__init__"]
                     + [p.name for p in qt.iterdir() if (p / "__init__.py").is_file()])
    listed = _layers("memdesigner._qt")
    assert sorted(listed) == present, (set(present) ^ set(listed))


def test_every_engine_module_is_in_the_engine_layers():
    """import-linter ignores a module its layers do not name: a new engine module left out could
    import upward (or in a circle) unseen."""
    listed = _engine_layers()
    present = sorted(p.stem for p in (ROOT / "memdesigner" / "engine").glob("*.py") if p.stem != "__init__")
    assert sorted(listed) == present, (set(present) ^ set(listed))


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


def test_no_import_circle_anywhere_in_the_package():
    """No module reaches itself through the modules it imports (function-level imports count too):
    the layers contracts see packages and engine modules, this sees every module. Uses grimp, the
    graph import-linter builds on."""
    import grimp

    graph = grimp.build_graph("memdesigner")
    edges = {m: [i for i in graph.find_modules_directly_imported_by(m) if i.startswith("memdesigner")]
             for m in graph.modules if m.startswith("memdesigner")}
    index, low, stack, on_stack, circles = {}, {}, [], set(), []
    for root in edges:  # Tarjan's strongly connected components, iteratively
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(edges.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    circles.append(sorted(comp))
    assert circles == []
