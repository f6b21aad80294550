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


def _const_bomb(op: str, n: int) -> bytes:
    """A few hundred bytes that ask the constant folding for ``n`` elements (ConstantOfShape of
    [n // 1000, 1000], or Range(0, n)), reduced to one value added to the input."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    def c(name, v):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, dtype=np.int64)))

    if op == "ConstantOfShape":
        nodes = [c("s", [n // 1000, 1000]), helper.make_node("ConstantOfShape", ["s"], ["z"])]
    else:
        nodes = [c("a", 0), c("b", n), c("d", 1), helper.make_node("Range", ["a", "b", "d"], ["zi"]),
                 helper.make_node("Cast", ["zi"], ["z"], to=1)]
    nodes += [helper.make_node("ReduceSum", ["z"], ["r"], keepdims=0), helper.make_node("Add", ["x", "r"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def test_constant_folding_is_bounded_before_evaluating(tmp_path, monkeypatch):
    """ConstantOfShape([50,000, 1,000]) was evaluated (200 MB, more for bigger shapes) and
    Range(0, 5 * 10^7) went through ONNX's data propagation (7 GB, 80 s): neither runs now."""
    import onnx.reference
    import onnx.shape_inference

    from memdesigner.importers._onnx_fold_size import fold_size_bound

    evaluated, data_prop = [], []
    real_eval, real_infer = onnx.reference.ReferenceEvaluator, onnx.shape_inference.infer_shapes

    class Recording(real_eval):
        def __init__(self, proto, *a, **k):
            evaluated.append(proto.op_type)
            super().__init__(proto, *a, **k)

    monkeypatch.setattr(onnx.reference, "ReferenceEvaluator", Recording)
    monkeypatch.setattr(onnx.shape_inference, "infer_shapes",
                        lambda m, **k: data_prop.append(k.get("data_prop")) or real_infer(m, **k))
    p = tmp_path / "bomb.onnx"
    p.write_bytes(_const_bomb("ConstantOfShape", 50_000_000))
    d = load_onnx(p)
    assert "ConstantOfShape" not in evaluated
    assert any("would make more than 16,777,216 elements" in w for w in d.import_warnings)
    evaluated.clear()
    data_prop.clear()
    p.write_bytes(_const_bomb("Range", 50_000_000))
    d = load_onnx(p)
    assert data_prop and not any(data_prop) and "Range" not in evaluated
    assert any("without ONNX's data propagation" in w for w in d.import_warnings)
    data_prop.clear()
    p.write_bytes(_const_bomb("Range", 1000))  # the control: small folds as before
    load_onnx(p)
    assert all(data_prop) and "Range" in evaluated
    import numpy as np

    assert fold_size_bound("Range", [np.array(0), np.array(10), np.array(3)], {}) == 4
    assert fold_size_bound("Tile", [np.zeros((2, 3)), np.array([4, 5])], {}) == 6 * 20
    assert fold_size_bound("Pad", [np.zeros((2, 3)), np.array([1, 0, 1, 2])], {}) == 4 * 5


def test_damaged_files_the_fuzzer_found_are_one_line(tmp_path, capsys):
    """Tracebacks benchmarks/fuzz_onnx.py found (seed 21): a name that is not UTF-8 (TypeError /
    UnicodeDecodeError), an initializer of UNDEFINED element type (TypeError), --input-shape 0
    (LayerError)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    out = tmp_path / "o.json"
    p = tmp_path / "m.onnx"
    data = fuzz_onnx.chain(3)
    for old, new in ((b"relu1", b"rel\xff1"), (b"t2", b"\xe7t")):  # a node name, a value name
        p.write_bytes(data.replace(old, new))
        assert main(["import", "onnx", str(p), "-o", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "a name is not UTF-8 text" in err
    shape = numpy_helper.from_array(np.array([1, 4], dtype=np.int64), "shape")
    shape.data_type = TensorProto.UNDEFINED
    g = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [shape])
    p.write_bytes(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    rc = main(["import", "onnx", str(p), "-o", str(out)])
    err = capsys.readouterr().err
    assert rc in (0, 2) and all(ln.startswith("memdesigner: ") for ln in err.splitlines())
    p.write_bytes(data)
    assert main(["import", "onnx", str(p), "-o", str(out), "--input-shape", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs positive sizes" in err
