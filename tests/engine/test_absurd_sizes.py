"""Absurd sizes (out_features 10**18, batch 10**200) give a loud one-line warning naming the node,
and no output path crashes on them; names that are not valid Unicode print escaped."""

import json

import pytest
from helpers import sequential

import memdesigner as md
from memdesigner.cli import main
from memdesigner.io.design_file import save_design
from memdesigner.units import format_bytes, format_count, format_flops


@pytest.mark.parametrize("n, text", [
    (10**620, "1.00e+620 B"),
    (-(10**30), "-1.00e+30 B"),
    (2**60, "1.15e+18 B"),            # 1 EiB: scientific from here on
    (2**60 - 2**30, "1073741823.0 GiB"),
    (float("inf"), "inf B"),
    (3 * 2**30, "3.0 GiB"),
], ids=["1e620", "minus_1e30", "1_EiB", "below_1_EiB", "inf", "3_GiB"])
def test_format_bytes_never_overflows(n, text):
    assert format_bytes(n) == text


def test_counts_and_flops_of_any_size():
    assert format_count(10**300) == "1.00e+300"
    assert format_flops(17 * 10**329) == "1.70e+330 FLOP"
    assert format_count(1_234_567) == "1.23 M" and format_flops(5 * 10**14) == "500.00 TFLOP"


def huge():
    return sequential((8,), [("Linear", {"out_features": 10**18}), ("ReLU", {})], name="huge")


def test_estimate_warns_in_one_line_naming_the_node():
    rep = md.estimate(huge(), batch=10**200)
    # n0's output (batch x out_features fp32 = 4 * 10**218 B) and ReLU's beside it, plus the weights
    assert 8 * 10**218 <= rep.peak_bytes < 8 * 10**218 + 10**202  # + the input batch (3.2e201 B)
    w = rep.warnings[0]
    assert w.startswith("peak ") and "exceeds 1 EiB" in w and "node n0 " in w and "\n" not in w
    assert "weights 3.60e+19 B, output 4.00e+218 B" in w  # (8 inputs + bias) * 10**18 * 4 B; props stop at 2^62, the batch does not


def test_normal_sizes_do_not_warn():
    rep = md.estimate(sequential((8,), [("Linear", {"out_features": 4})]), batch=2**20)
    assert not any("EiB" in w for w in rep.warnings)


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_cli_prints_absurd_estimate_with_the_warning(tmp_path, capsys, fmt):
    path = tmp_path / "huge.json"
    save_design(huge(), path)
    assert main(["estimate", str(path), "--batch", str(10**200), "--device", "h200", "--format", fmt,
                 "--timeline", "--explain"]) == 0
    out = capsys.readouterr().out
    if fmt == "json":
        assert "exceeds 1 EiB" in json.loads(out)["warnings"][0]
    else:
        assert [line for line in out.splitlines() if "exceeds 1 EiB" in line][0].startswith("warning: peak ")
        assert "peak memory       8.00e+218 B" in out


def test_lone_surrogate_names_print_escaped(tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text('{"format": "memdesigner-design", "version": 1, "name": "n\\udcff", "nodes": ['
                    '{"id": "\\udcff", "type": "Input", "props": {"shape": [8]}},'
                    '{"id": "fc", "name": "x\\ud800y", "type": "Linear", "props": {"out_features": 4}}],'
                    '"edges": [{"from": "\\udcff", "to": "fc"}]}')
    assert main(["estimate", str(path), "--explain", "--timeline"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("n\\udcff: inference")
    assert "x\\ud800y" in out and "\n\\udcff " in out
