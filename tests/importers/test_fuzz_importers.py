"""A fixed sample of benchmarks/fuzz_importers.py (50 Keras, 10 PyTorch cases), and the Keras
failures the full run found: each bad file is one stderr line and exit 2, never a traceback."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from memdesigner.cli import main

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("fuzz_importers", ROOT / "benchmarks" / "fuzz_importers.py")
fuzz = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("fuzz_importers", fuzz)  # dataclasses look their module up there
_spec.loader.exec_module(fuzz)

SEED = 12


def _check(outcomes):
    bad = [f"{o.case.ident} {o.case.family}: {o.why}: {o.stderr[-300:]}" for o in outcomes if not o.ok]
    assert not bad, "\n".join(bad)


def test_keras_sample(tmp_path):
    cases = fuzz.keras_cases(50, SEED)
    assert {c.family for c in cases} == set(fuzz.KERAS_FAMILIES)
    outcomes = [fuzz.run_case(c, tmp_path) for c in cases]
    _check(outcomes)
    assert sum(o.rc == 2 for o in outcomes) >= 25  # most mutants are bad files, and said so


def test_torch_sample(tmp_path):
    pytest.importorskip("torch")
    cases = fuzz.torch_cases(10, SEED)
    assert len({c.family for c in cases}) == len(fuzz.TORCH_FAMILIES)
    _check([fuzz.run_case(c, tmp_path) for c in cases])


def _keras(tmp_path, capsys, data: bytes):
    src = tmp_path / "model.json"
    src.write_bytes(data)
    out = tmp_path / "out.json"
    rc = main(["import", "keras", str(src), "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1, err
    assert not out.exists()
    return err


def _seed():
    return json.loads((ROOT / "resources" / "fixtures" / "seed_keras_audio.keras2.json").read_text())


def test_deeply_nested_json_is_one_line(tmp_path, capsys):
    err = _keras(tmp_path, capsys, b"[" * 100000 + b"]" * 100000)
    assert "nested deeper than 64 levels (set MEMDESIGNER_MAX_JSON_DEPTH to raise it)" in err


def test_infinite_size_names_the_layer(tmp_path, capsys):
    d = _seed()
    dense = next(lay for lay in d["config"]["layers"] if lay["class_name"] == "Dense")
    dense["config"]["units"] = float("inf")
    err = _keras(tmp_path, capsys, json.dumps(d).encode())
    assert f"layer {dense['config']['name']!r}" in err and "OverflowError" in err


def test_a_list_where_a_number_belongs_names_the_layer(tmp_path, capsys):
    d = _seed()
    conv = next(lay for lay in d["config"]["layers"] if lay["class_name"] == "Conv2D")
    conv["config"]["filters"] = [[16]]
    err = _keras(tmp_path, capsys, json.dumps(d).encode())
    assert f"layer {conv['config']['name']!r}" in err


def test_a_warning_about_a_name_with_a_newline_stays_one_line(tmp_path, capsys):
    d = _seed()
    conv = next(lay for lay in d["config"]["layers"] if lay["class_name"] == "Conv2D")
    conv["class_name"] = "MyConv"  # unknown: a Generic node and a warning naming the layer
    conv["config"]["name"] = "conv\nsecond line"
    src = tmp_path / "model.json"
    src.write_text(json.dumps(d))
    assert main(["import", "keras", str(src), "-o", str(tmp_path / "out.json")]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err and all(ln.startswith("memdesigner: warning: ") for ln in err), err
    assert any("conv\\nsecond line" in ln for ln in err)
