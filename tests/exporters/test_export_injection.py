"""Export must never run the design author's text: names, ids and string props reach the generated
file only as escaped literals or sanitized identifiers; NaN/inf props are refused in one line."""

import ast
import subprocess
import sys

import pytest

import memdesigner
from memdesigner.cli import main
from memdesigner.io.design_file import save_design

HOSTILE = [
    '"""; open(MARK, "w"); """',
    "ends in a backslash \\",
    "line one\nopen(MARK, 'w')\n",
    "__import__('os').system('touch ' + MARK)",
    "'''; open(MARK, 'w'); '''",
    "\\N{ incomplete escape",
    "模型 ☃ é \u2028 \x00 \ud800",
    "x = 1\r\nopen(MARK, 'w')",
]


def _design(name: str, marker: str) -> memdesigner.Design:
    d = memdesigner.Design(name)
    d.add_node("Input", {"shape": (4,)}, id="in", name=name)
    d.add_node("Linear", {"out_features": 3}, id="fc", name=name + "fc")
    d.add_node("Dropout", {"p": 0.25}, id="dr", name=f'"""{name}"""')
    d.add_node("Generic", {"op": f"__import__('os').system('touch {marker}')", "out_shape": (3,)}, id="g",
               name=name + "\n" + marker)
    for a, b in (("in", "fc"), ("fc", "dr"), ("dr", "g")):
        d.add_edge(a, b)
    return d


def _export(tmp_path, design, capsys):
    src = tmp_path / "d.json"
    save_design(design, src)
    out = tmp_path / "model.py"
    rc = main(["export", "torch", str(src), "-o", str(out)])
    return rc, out, capsys.readouterr()


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_names_export_to_code_that_compiles_and_injects_nothing(tmp_path, capsys, monkeypatch, name):
    marker = tmp_path / "INJECTED"
    monkeypatch.chdir(tmp_path)
    rc, out, _ = _export(tmp_path, _design(name.replace("MARK", repr(str(marker))), str(marker)), capsys)
    assert rc == 0
    code = out.read_text(encoding="utf-8")
    tree = ast.parse(code, str(out))
    # nothing but the docstring, the three imports, the class and make(): no injected statement
    assert [type(s).__name__ for s in tree.body] == ["Expr", "Import", "Import", "Import", "ClassDef",
                                                    "FunctionDef"]
    assert ast.literal_eval(tree.body[0].value).startswith(name.replace("MARK", repr(str(marker))))
    ns: dict = {"__name__": "exported"}
    exec(compile(code, str(out), "exec"), ns)  # noqa: S102 - the point: running it does nothing else
    assert not marker.exists()


def test_exported_hostile_file_runs_as_a_script(tmp_path, capsys):
    """The same file run by Python itself, forward pass included, creates no marker."""
    pytest.importorskip("torch")
    marker = tmp_path / "INJECTED"
    name = "".join(HOSTILE).replace("MARK", repr(str(marker)))
    rc, out, _ = _export(tmp_path, _design(name, str(marker)), capsys)
    assert rc == 0
    run = (f"import runpy, torch; ns = runpy.run_path({str(out)!r}); m, s = ns['make']();"
           f"print(tuple(m(torch.zeros(2, *s)).shape))")
    r = subprocess.run([sys.executable, "-c", run], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(2, 3)"
    assert not marker.exists()


@pytest.mark.parametrize("node_type,value,field", [
    ("Dropout", float("nan"), "p"),
    ("LeakyReLU", float("inf"), "negative_slope"),
    ("Scale", float("-inf"), "factor"),
])
def test_non_finite_props_are_refused_in_one_line(node_type, value, field):
    """A design built in code can hold NaN/inf (design files refuse them at load): the exporter
    names the node and the field instead of writing ``nn.Dropout(p=nan)``."""
    from memdesigner.exporters.torch_code import ExportError, to_python
    from memdesigner.model.design import Design

    d = Design("n")
    d.add_node("Input", {"shape": [4]}, id="in")
    d.add_node(node_type, {field: value}, id="bad", name="bad\nnode")
    d.add_edge("in", "bad")
    with pytest.raises(ExportError) as exc:
        to_python(d)
    msg = str(exc.value)
    # the registry refuses it first (node id and field), the exporter's own check is behind it
    assert "\n" not in msg and f"bad.{field}:" in msg and "not a finite number" in msg


def test_non_finite_props_in_a_file_are_one_line(tmp_path, capsys):
    src = tmp_path / "d.json"
    src.write_text('{"format": "memdesigner-design", "version": 1, "name": "n", "nodes": ['
                   '{"id": "in", "type": "Input", "props": {"shape": [4]}},'
                   '{"id": "bad", "type": "Dropout", "props": {"p": NaN}}], "edges": [{"from": "in", "to": "bad"}]}')
    out = tmp_path / "model.py"
    assert main(["export", "torch", str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "NaN" in err
    assert not out.exists()


def test_class_name_must_be_an_identifier():
    from memdesigner.exporters.torch_code import ExportError, to_python

    d = _design("ok", "m")
    with pytest.raises(ExportError, match="not a Python class name"):
        to_python(d, class_name="X(object): pass\nimport os\nclass Y")
    assert "class Fine(nn.Module)" in to_python(d, class_name="Fine")
