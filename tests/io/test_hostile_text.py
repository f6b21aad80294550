"""A design's strings and numbers cannot crash an output: a lone surrogate (a JSON "\\udcff"
escape) in a name is written as the escape ``\\udcff`` by the report, the CSV and the SVG, and a
tensor of 2^20,000 elements (or a 3,000-digit batch) is one line, not an integer too long to print."""

import json

import pytest

from memdesigner.cli import main
from memdesigner.engine import report
from memdesigner.engine.estimate import estimate
from memdesigner.engine.settings import Settings
from memdesigner.io.design_file import design_from_dict

SURROGATE = {"format": "memdesigner-design", "version": 1, "name": "net\udcff", "description": "about \ud800",
             "nodes": [{"id": "x", "type": "Input", "props": {"shape": [4]}},
                       {"id": "r\udcfe", "name": "relu\udcfd", "type": "ReLU"},
                       {"id": "fc", "type": "Linear", "props": {"out_features": 3}}],
             "edges": [{"from": "x", "to": "r\udcfe"}, {"from": "r\udcfe", "to": "fc"}]}


def _file(tmp_path, doc) -> str:
    path = tmp_path / "d.json"
    path.write_text(json.dumps(doc))  # ensure_ascii: the file holds the \udcff escapes
    return str(path)


@pytest.mark.parametrize("name, extra", [("r.html", []), ("r.md", []), ("r.md", ["--images", "files"])],
                         ids=["html", "md-inline", "md-files"])
def test_report_with_lone_surrogates(tmp_path, capsys, name, extra):
    out = tmp_path / name
    rc = main(["report", _file(tmp_path, SURROGATE), "-o", str(out), "--no-graph", "--no-max-batch", *extra])
    assert rc == 0, capsys.readouterr().err
    text = out.read_text(encoding="utf-8")
    assert "net\\udcff" in text and "relu\\udcfd" in text
    for svg in tmp_path.glob("*.svg"):
        assert svg.read_text(encoding="utf-8").startswith("<svg")


def test_layers_csv_with_lone_surrogates(tmp_path):
    rep = estimate(design_from_dict(SURROGATE), Settings())
    path = tmp_path / "layers.csv"
    report.write_layers_csv(rep.layers, path)
    assert path.read_text(encoding="utf-8").splitlines()[2] == "r\\udcfe,relu\\udcfd,ReLU,1×4,0,0,16,0,4"


def _huge(shape) -> dict:
    return {"format": "memdesigner-design", "version": 1, "name": "huge",
            "nodes": [{"id": "x", "type": "Input", "props": {"shape": shape}}, {"id": "r", "type": "ReLU"}],
            "edges": [{"from": "x", "to": "r"}]}


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_a_tensor_of_2_to_the_20000_elements_is_one_line(tmp_path, capsys, fmt):
    path = _file(tmp_path, _huge([2**60] * 334))  # each dimension allowed, the product 2^20,040
    assert main(["estimate", path, "--format", fmt]) == 2
    err = capsys.readouterr().err
    assert err == f"memdesigner: error: {path}: x.shape: output 0 would have about 10^6,032 elements, more than 10^1000\n"


def test_an_absurd_tensor_below_the_limit_still_estimates(tmp_path, capsys):
    assert main(["estimate", _file(tmp_path, _huge([2**62] * 16)), "--format", "json"]) == 0  # 2^992 elements
    assert json.loads(capsys.readouterr().out)["peak_bytes"] == 2 * 4 * 2**992  # input and ReLU output, fp32


def test_a_4000_digit_batch_is_one_line(tmp_path, capsys):
    """Absurd batches are estimated with a warning (tests/engine/test_absurd_sizes.py); one of 4,000 digits
    (argparse reads up to 4,300) made byte totals too long to print."""
    path = _file(tmp_path, _huge([2**31, 2**31]))
    assert main(["estimate", path, "--batch", "1" + "0" * 999]) == 0  # 10^999: still estimated
    capsys.readouterr()
    assert main(["estimate", path, "--batch", "1" + "0" * 4000]) == 2
    assert capsys.readouterr().err == ("memdesigner: error: batch: a number of about 4,000 digits is above the "
                                       "maximum 10^1000\n")
