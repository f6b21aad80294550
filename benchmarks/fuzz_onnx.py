"""Fuzz ``memdesigner import onnx`` with mutated and hostile ONNX files.

Every bad file must give exactly one stderr line and exit 2 (a mutant that is still a model may
import: exit 0), within the time limit: a traceback, a second line or a hang is a bug.
Deterministic for a seed; runs in this process through ``memdesigner.cli.main``:

    python benchmarks/fuzz_onnx.py [-n 20000] [--seed 3] [--limit 10] [--show 10]

Seeds are small graphs built with onnx.helper (a CNN, an MLP with MatMul + Add, a shape
subgraph feeding a Reshape, an LSTM, an attention block). Families: ``proto`` (fields of the
ModelProto changed: dims 0 / -1 / 2^62, attributes swapped, inputs renamed to nothing, ops
renamed, opsets, initializers dropped or resized, nodes duplicated or dropped), ``bytes``
(truncation, bit flips, inserted bytes), ``hostile`` (100,000-node chains, a file bigger than
the limit, a FIFO, /dev/zero, a folder, empty and text files).
"""

from __future__ import annotations

import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fuzz_run import fuzz_main, mutate_binary, run_argv  # noqa: E402

F = 1  # TensorProto.FLOAT


def _seeds():
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    def init(name, *shape):
        return numpy_helper.from_array(np.full(shape, 0.5, dtype=np.float32), name)

    def const(name, values):
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(values, dtype=np.int64)))

    def model(nodes, inits, in_shape, out="y", opset=17):
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_shape))],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])

    cnn = model([
        helper.make_node("Conv", ["x", "cw", "cb"], ["c"], name="/conv/Conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"], name="/bn/BatchNormalization"),
        helper.make_node("Relu", ["n"], ["r"], name="/relu/Relu"),
        helper.make_node("MaxPool", ["r"], ["q"], name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["q"], ["p"], name="/gap/GlobalAveragePool"),
        helper.make_node("Flatten", ["p"], ["f"], name="/Flatten", axis=1),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], name="/fc/Gemm", transB=1),
    ], [init("cw", 4, 3, 3, 3), init("cb", 4), init("s", 4), init("b", 4), init("m", 4), init("v", 4),
        init("fw", 5, 4), init("fb", 5)], ("N", 3, 8, 8))
    mlp = model([
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="/l1/MatMul"),
        helper.make_node("Add", ["h", "b1"], ["a"], name="/l1/Add"),
        helper.make_node("Sigmoid", ["a"], ["s"], name="/act/Sigmoid"),
        helper.make_node("Mul", ["a", "s"], ["m"], name="/act/Mul"),
        helper.make_node("LayerNormalization", ["m", "g", "be"], ["ln"], name="/ln/LayerNormalization", axis=-1),
        helper.make_node("Softmax", ["ln"], ["y"], name="/Softmax", axis=-1),
    ], [init("w1", 16, 32), init("b1", 32), init("g", 32), init("be", 32)], ("N", 16))
    shp = model([
        helper.make_node("Shape", ["x"], ["sh"], name="/Shape"),
        const("i0", 0),
        helper.make_node("Gather", ["sh", "i0"], ["n0"], name="/Gather", axis=0),
        const("ax", [0]),
        helper.make_node("Unsqueeze", ["n0", "ax"], ["n1"], name="/Unsqueeze"),
        const("m1", [-1]),
        helper.make_node("Concat", ["n1", "m1"], ["tgt"], name="/Concat", axis=0),
        helper.make_node("Reshape", ["x", "tgt"], ["y"], name="/Reshape"),
    ], [], ("N", 3, 4, 4))
    lstm = model([
        helper.make_node("LSTM", ["x", "W", "R", "B"], ["ys", "yh", "yc"], name="/rnn/LSTM", hidden_size=8),
        helper.make_node("Squeeze", ["yh"], ["y"], name="/Squeeze"),
    ], [init("W", 1, 32, 4), init("R", 1, 32, 8), init("B", 1, 64)], (5, "N", 4))
    return {"cnn": cnn, "mlp": mlp, "shape": shp, "lstm": lstm}


WEIRD_DIMS = [0, -1, -(2**40), 2**31, 2**62, 10**12, 1]
OPS = ["Relu", "Conv", "NoSuchOp", "", "MatMul", "Reshape", "If", "Loop", "Gemm", "Split", "Concat", "LSTM",
       "Attention", "Resize", "Einsum", "com.microsoft.X"]


def _mutate_proto(rng: random.Random, m) -> str:
    """One change to the ModelProto ``m`` in place; its description."""
    from onnx import helper

    g = m.graph
    k = rng.randrange(12)
    if k == 0 and g.input:
        dims = g.input[0].type.tensor_type.shape.dim
        if dims:
            d = rng.choice(dims)
            v = rng.choice(WEIRD_DIMS)
            if v >= 0:
                d.dim_value = v
            else:
                d.dim_param = rng.choice(["", "N", "?", "-1"])
            return f"input dim {v}"
    if k == 1 and g.initializer:
        t = rng.choice(g.initializer)
        if t.dims:
            t.dims[rng.randrange(len(t.dims))] = rng.choice(WEIRD_DIMS[1:] + [0, 3])
        return "initializer dims"
    if k == 2 and g.node:
        n = rng.choice(g.node)
        n.op_type = rng.choice(OPS)
        return f"op -> {n.op_type}"
    if k == 3 and g.node:
        n = rng.choice(g.node)
        if n.input:
            n.input[rng.randrange(len(n.input))] = rng.choice(["", "nowhere", "x", "y", g.node[0].output[0]])
        return "input renamed"
    if k == 4 and g.node:
        n = rng.choice(g.node)
        if n.attribute:
            a = rng.choice(n.attribute)
            n.attribute.remove(a)
            n.attribute.append(helper.make_attribute(a.name, rng.choice(
                [0, -1, 2**62, [0, 0], [-5, 3], [2**40] * 4, 1.5, "x", [1] * 40])))
        else:
            n.attribute.append(helper.make_attribute(rng.choice(["axis", "kernel_shape", "perm"]), rng.choice(
                [0, 99, -99, [1, 1]])))
        return "attribute"
    if k == 5:
        del m.opset_import[:]
        m.opset_import.append(helper.make_opsetid("", rng.choice([1, 6, 11, 13, 17, 21, 99, 10**6])))
        return "opset"
    if k == 6 and g.initializer:
        g.initializer.remove(rng.choice(g.initializer))
        return "initializer dropped"
    if k == 7 and g.node:
        i = rng.randrange(len(g.node))
        n = g.node[i]
        if rng.random() < 0.5:
            g.node.remove(n)
            return "node dropped"
        c = type(n)()
        c.CopyFrom(n)
        g.node.insert(rng.randrange(len(g.node) + 1), c)
        return "node duplicated"
    if k == 8 and g.node:  # a cycle: the first node reads the last node's output
        g.node[0].input.append(g.node[-1].output[0])
        return "cycle"
    if k == 9:
        del g.input[:]
        return "no inputs"
    if k == 10 and g.node:
        n = rng.choice(g.node)
        n.domain = rng.choice(["com.microsoft", "ai.onnx.ml", "x"])
        return "domain"
    t = g.input[0].type.tensor_type if g.input else None
    if t is not None:
        t.elem_type = rng.choice([0, 2, 7, 9, 10, 16, 99])
        return "input dtype"
    return "none"


def _mutate_bytes(rng: random.Random, data: bytes) -> tuple[str, bytes]:
    return mutate_binary(rng, data, lambda r: ("insert", bytes(r.randrange(256) for _ in range(r.randint(1, 8)))))


def chain(n: int, named: bool = True) -> bytes:
    """``n`` Relu nodes in a row (named relu0.. or all unnamed)."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"relu{i}" if named else "") for i in range(n)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("t0", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info(f"t{n}", TensorProto.FLOAT, [1, 4])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def cases(n: int, seed: int):
    """``n`` (family, description, bytes, extra args) cases, the same for the same seed."""
    rng = random.Random(seed)
    seeds = _seeds()
    names = sorted(seeds)
    for i in range(n):
        r = i % 10
        name = names[i % len(names)]
        m = type(seeds[name])()
        m.CopyFrom(seeds[name])
        args = []
        if rng.random() < 0.1:
            args = ["--input-shape", rng.choice(["3,8,8", "0", "-1,2", "16", "99999999999,9", "a", "4,4,4,4,4,4"])]
        if r < 6:
            steps = [_mutate_proto(rng, m) for _ in range(rng.choice((1, 1, 2, 3)))]
            yield "proto", f"{name}: {'; '.join(steps)}", m.SerializeToString(), args
        elif r < 9:
            what, data = _mutate_bytes(rng, m.SerializeToString())
            yield "bytes", f"{name}: {what}", data, args
        else:
            k = rng.randrange(4)
            if k == 0:
                yield "hostile", "empty file", b"", args
            elif k == 1:
                yield "hostile", "text file", b"this is not a model\n" * rng.randint(1, 50), args
            elif k == 2:
                yield "hostile", "protobuf varint bomb", b"\x3a" + b"\xff" * 9 + b"\x01", args
            else:
                yield "hostile", "1,000 unnamed Relu", chain(1000, named=False), []


def run(n: int, seed: int, time_limit: float, specials: bool = True, budget: float = 0) -> list:
    """The cases, then the special files; ``budget`` (s, 0: none): stop generating cases then."""
    results = []
    stop = time.perf_counter() + budget if budget else None
    with tempfile.TemporaryDirectory(prefix="memdesigner-fuzz-onnx-") as tmp:
        src, out = Path(tmp) / "m.onnx", Path(tmp) / "out.json"
        for fam, what, data, args in cases(n, seed):
            if stop is not None and time.perf_counter() > stop:
                break
            src.write_bytes(data)
            out.unlink(missing_ok=True)
            results.append(run_argv(["import", "onnx", str(src), "-o", str(out), *args], fam, what, time_limit))
        if specials:
            fifo = Path(tmp) / "fifo.onnx"
            os.mkfifo(fifo)
            zero = Path(tmp) / "zero.onnx"
            zero.symlink_to("/dev/zero")
            for p, what in ((fifo, "a FIFO"), (zero, "/dev/zero"), (Path(tmp), "a folder")):
                results.append(run_argv(["import", "onnx", str(p), "-o", str(out)], "special files", what, time_limit))
            big = Path(tmp) / "chain.onnx"
            big.write_bytes(chain(100_000, named=False))
            os.environ["MEMDESIGNER_MAX_ONNX_NODES"] = "10000"
            try:
                results.append(run_argv(["import", "onnx", str(big), "-o", str(out)], "special files",
                                        "100,000 unnamed Relu over a 10,000-node limit", time_limit))
            finally:
                del os.environ["MEMDESIGNER_MAX_ONNX_NODES"]
    return results


def main(argv=None) -> int:
    return fuzz_main(__doc__, "import onnx", run, seed=3, argv=argv)


if __name__ == "__main__":
    raise SystemExit(main())
