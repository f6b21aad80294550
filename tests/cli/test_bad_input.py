"""Bad input gets one line, never a traceback: a sample of benchmarks/fuzz_designs.py through the
CLI and memdesigner.load_design, the byte-level cases it found, and mistyped subcommands."""

import json
import sys
from pathlib import Path

import pytest

import memdesigner
from memdesigner.cli import main

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import fuzz_designs  # noqa: E402

GOOD = {"format": "memdesigner-design", "version": 1, "name": "t",
        "nodes": [{"id": "in", "type": "Input", "props": {"shape": [8]}},
                  {"id": "fc", "type": "Linear", "props": {"out_features": 4}}],
        "edges": [{"from": "in", "to": "fc"}]}
GOOD_TEXT = json.dumps(GOOD)


# the two largest examples add only load time (same code paths), so the test sample leaves them out
SMALL_EXAMPLES = [p for p in fuzz_designs.EXAMPLES if p.name not in ("mobilenet_v2.json", "resnet18.json")]


def test_fuzz_sample_one_line_exit_2_and_only_design_file_error(tmp_path):
    path = tmp_path / "m.json"
    outcomes, loaded = {}, 0
    for i, (what, data) in enumerate(fuzz_designs.mutants(300, seed=10, examples=SMALL_EXAMPLES)):
        path.write_bytes(data)
        if i < 100:  # the Python API: DesignFileError with a one-line message, or a design (the CLI
            try:  # below goes through it too, catching DesignFileError only)
                memdesigner.load_design(path)
                loaded += 1
            except memdesigner.DesignFileError as err:
                assert "\n" not in str(err), what
        code, err = fuzz_designs.run_cli(str(path))  # the CLI: exit 0, or one stderr line and exit 2
        outcomes.setdefault(fuzz_designs.classify(code, err), []).append(what)
    assert set(outcomes) <= {"valid (exit 0)", "exit 2, one line"}, {k: v[:3] for k, v in outcomes.items()}
    assert len(outcomes["exit 2, one line"]) > 200 and loaded > 0  # the sample exercises both paths


def _one_line(tmp_path, capsys, content: bytes) -> str:
    path = tmp_path / "d.json"
    path.write_bytes(content)
    code = main(["estimate", str(path)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("memdesigner: error: ")
    return err


@pytest.mark.parametrize("content, expected", [
    (GOOD_TEXT.replace('"t"', '"caf\xe9"').encode("latin-1"), "byte 0xe9 at offset"),
    (b"\xff" + GOOD_TEXT.encode(), "byte 0xff at offset 0"),
    (GOOD_TEXT.replace("[8]", "[" * 100_000 + "]" * 100_000).encode(), "nested deeper than 64 levels"),
    (GOOD_TEXT.replace("[8]", "[" * 500 + "8" + "]" * 500).encode(), "nested deeper than 64 levels"),
    (GOOD_TEXT.replace("[8]", "[Infinity]").encode(), "Infinity is not a number JSON allows"),
    (GOOD_TEXT.replace("[8]", "[NaN]").encode(), "NaN is not a number JSON allows"),
    (GOOD_TEXT.replace("[8]", "[1e400]").encode(), "nodes[0].props.shape: [inf] is not a valid shape"),
    (GOOD_TEXT.replace("[8]", "[1e300]").encode(), "nodes[0].props.shape: 1e+300 is too large"),
    (GOOD_TEXT.replace("[8]", "[" + "9" * 5000 + "]").encode(), "invalid JSON: Exceeds the limit"),
    (GOOD_TEXT.replace("[8]", "[8.5]").encode(), "nodes[0].props.shape: [8.5] is not a valid shape"),
    (GOOD_TEXT.replace('"out_features": 4', '"out_features": 1e300').encode(), "out_features: 1e+300 is too large"),
    (GOOD_TEXT.replace('"to": "fc"', '"to": "fc", "to_port": 1e300').encode(), "edges[0].to_port: 1e+300 is not"),
    (GOOD_TEXT.replace('"props": {"shape": [8]}', '"props": {"shape": [8]}, "pos": [1e308, 0]').encode(),
     "nodes[0].pos: (1e+308, 0) is not a canvas position"),
    (GOOD_TEXT.replace('"props": {"shape": [8]}', '"props": {"shape": [8]}, "pos": [0, ' + "9" * 400 + ']').encode(),
     "... is not a canvas position (finite numbers within"),
], ids=["latin-1", "0xff", "nesting-100000", "nesting-500", "Infinity", "NaN", "1e400", "1e300", "5000-digits",
        "fraction", "huge-prop", "huge-port", "pos-1e308", "pos-400-digits"])
def test_byte_and_number_cases_one_line(tmp_path, capsys, content, expected):
    assert expected in _one_line(tmp_path, capsys, content)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-8-sig"])
def test_utf16_and_bom_files_load(tmp_path, encoding):
    path = tmp_path / "d.json"
    path.write_bytes(GOOD_TEXT.encode(encoding))
    d = memdesigner.load_design(path)
    assert d.nodes["fc"].props["out_features"] == 4


def test_several_layer_problems_still_one_line(tmp_path, capsys):
    bad = dict(GOOD, nodes=[GOOD["nodes"][0], {"id": "fc", "type": "Linear", "props": {"out_features": 4}},
                            {"id": "add", "type": "Add"}, {"id": "add2", "type": "Add"}],
               edges=GOOD["edges"] + [{"from": "fc", "to": "add", "to_port": 3}, {"from": "fc", "to": "add2"}])
    err = _one_line(tmp_path, capsys, json.dumps(bad).encode())
    assert "more; --format json lists them" in err


def test_mistyped_subcommand_is_one_line_not_the_window(monkeypatch, capsys):
    import memdesigner._qt.app as app

    monkeypatch.setattr(app, "main", lambda argv: pytest.fail("the window opened"))
    assert main(["estmate", "x.json"]) == 2
    err = capsys.readouterr().err
    assert err == ("memdesigner: error: 'estmate' is not a command nor a design file; did you mean 'estimate'? "
                   "commands: devices, estimate, export, fit, import, layers, render, report, snapshot\n")
    assert main(["nosuchcommand"]) == 2
    assert main(["missing/net.json"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == "memdesigner: error: missing/net.json: no such design file"


def test_existing_file_still_opens_the_window(monkeypatch, tmp_path):
    import memdesigner._qt.app as app

    path = tmp_path / "net.json"
    path.write_text(GOOD_TEXT)
    seen = []
    monkeypatch.setattr(app, "main", lambda argv: seen.append(argv) or 0)
    assert main([str(path)]) == 0
    assert seen == [[str(path)]]


def test_error_with_newlines_stays_one_line(monkeypatch, capsys):
    from memdesigner.cli import devices
    from memdesigner.cli.common import CliError

    def fails(args):  # e.g. a traced model's error text with newlines in it
        raise CliError("first\nsecond\n  third")

    monkeypatch.setattr(devices, "run", fails)
    assert main(["devices"]) == 2
    assert capsys.readouterr().err == "memdesigner: error: first second third\n"
