"""Hostile ONNX files (issue 22): node ids stay linear in the node count (100,000 unnamed Relu
nodes did not import in 180 s), the reader is bounded by file size and node count, special
files are refused before reading, and a fixed sample of benchmarks/fuzz_onnx.py is one line."""

import os
import sys
import time

import pytest
from helpers import ROOT

pytest.importorskip("onnx")

from memdesigner.cli import main  # noqa: E402
from memdesigner.importers.onnx_import import OnnxImportError, _Importer, load_onnx  # noqa: E402
from memdesigner.model.design import Design  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
import fuzz_onnx  # noqa: E402
from _fuzz_run import good, run_argv  # noqa: E402


class _CountingNodes(dict):
    checks = 0

    def __contains__(self, key):
        _CountingNodes.checks += 1
        return super().__contains__(key)


def test_new_ids_for_one_base_cost_constant_checks_each():
    """_new_id started each search at base_2: n unnamed nodes made n^2/2 membership tests."""
    imp = _Importer.__new__(_Importer)
    imp.design = Design("x")
    imp.design.nodes = _CountingNodes()
    imp._next_suffix = {}
    _CountingNodes.checks = 0
    ids = []
    for _ in range(3000):
        nid = imp._new_id("Relu")
        imp.design.nodes[nid] = None
        ids.append(nid)
    assert ids[:3] == ["Relu", "Relu_2", "Relu_3"] and ids[-1] == "Relu_3000"
    assert _CountingNodes.checks < 2 * 3000  # was 4,501,500
    imp.design.nodes["Conv_2"] = None  # a suffix already taken by a node named so: skipped
    first = imp._new_id("Conv")
    imp.design.nodes[first] = None
    assert (first, imp._new_id("Conv")) == ("Conv", "Conv_3")


def test_unnamed_chain_imports_with_sequential_ids(tmp_path):
    p = tmp_path / "chain.onnx"
    p.write_bytes(fuzz_onnx.chain(2000, named=False))
    d = load_onnx(p)
    relus = sorted((n for n in d.nodes if n.startswith("Relu")), key=lambda s: int(s.partition("_")[2] or 1))
    assert len(d.nodes) == 2001 and relus[0] == "Relu" and relus[1] == "Relu_2" and relus[-1] == "Relu_2000"


def test_node_and_size_limits_are_one_line(tmp_path, capsys, monkeypatch):
    p = tmp_path / "chain.onnx"
    p.write_bytes(fuzz_onnx.chain(100_000, named=False))
    monkeypatch.setenv("MEMDESIGNER_MAX_ONNX_NODES", "99999")
    t = time.perf_counter()
    assert main(["import", "onnx", str(p), "-o", str(tmp_path / "o.json")]) == 2
    assert time.perf_counter() - t < 1.0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "100,000 nodes" in err and "MEMDESIGNER_MAX_ONNX_NODES" in err
    monkeypatch.setenv("MEMDESIGNER_MAX_ONNX_MB", "1")  # the file is 2.4 MB
    with pytest.raises(OnnxImportError, match="bytes is too big.*MEMDESIGNER_MAX_ONNX_MB"):
        load_onnx(p)


def test_special_files_are_refused_without_reading(tmp_path, capsys):
    fifo = tmp_path / "fifo.onnx"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.onnx"
    zero.symlink_to("/dev/zero")
    for p in (fifo, zero, tmp_path):
        t = time.perf_counter()
        assert main(["import", "onnx", str(p), "-o", str(tmp_path / "o.json")]) == 2
        assert time.perf_counter() - t < 1.0
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "cannot read" in err


def test_fuzz_sample(tmp_path):
    """40 cases of benchmarks/fuzz_onnx.py (every family)."""
    src, out = tmp_path / "m.onnx", tmp_path / "o.json"
    bad = []
    for fam, what, data, args in fuzz_onnx.cases(40, seed=3):
        src.write_bytes(data)
        out.unlink(missing_ok=True)
        r = run_argv(["import", "onnx", str(src), "-o", str(out), *args], fam, what, time_limit=20)
        if not good(r):
            bad.append(f"{what}: {r.kind} {r.err[-200:]!r}")
    assert not bad, bad
