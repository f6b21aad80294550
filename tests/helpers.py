"""Small design builders for tests."""

from memdesigner.model.design import Design


def sequential(shape, layers, dtype="float", name="test"):
    """Input -> layers in a chain; layers are (type, props) pairs. Node ids n0, n1, ..."""
    d = Design(name)
    d.add_node("Input", {"shape": tuple(shape), "dtype": dtype}, id="in")
    prev = "in"
    for i, (t, p) in enumerate(layers):
        nid = f"n{i}"
        d.add_node(t, p, id=nid)
        d.add_edge(prev, nid)
        prev = nid
    return d


def mlp(relu_tail: int = 0) -> Design:
    """x (64,) -> fc1 Linear 256 -> act ReLU -> fc2 Linear 8, then ``relu_tail`` ReLUs r0, r1, ..."""
    d = Design("mlp")
    d.add_node("Input", {"shape": (64,)}, id="x")
    d.add_node("Linear", {"out_features": 256}, id="fc1")
    d.add_node("ReLU", {}, id="act")
    d.add_node("Linear", {"out_features": 8}, id="fc2")
    d.add_edge("x", "fc1")
    d.add_edge("fc1", "act")
    d.add_edge("act", "fc2")
    prev = "fc2"
    for i in range(relu_tail):
        d.add_node("ReLU", {}, id=f"r{i}")
        d.add_edge(prev, f"r{i}")
        prev = f"r{i}"
    return d


def linear_chain(n: int) -> Design:
    """x (8,) and then n - 1 Linear(8) layers fc0, fc1, ... in a chain (n nodes)."""
    d = Design("chain")
    d.add_node("Input", {"shape": (8,)}, id="x")
    prev = "x"
    for i in range(n - 1):
        d.add_node("Linear", {"out_features": 8}, id=f"fc{i}")
        d.add_edge(prev, f"fc{i}")
        prev = f"fc{i}"
    return d


def two_branch_residual(wide: int, narrow: int, tie: bool = False, name: str = "two_branch") -> Design:
    """x -> a (wide) feeds two bottleneck branches b_i (narrow) -> c_i (wide) and the residual
    s2 = (c1 + c2) + a: a's gradient is summed from three readers. ``tie``: b2's weight is b1's."""
    d = Design(name)
    d.add_node("Input", {"shape": [16]}, id="x")
    d.add_node("Linear", {"out_features": wide}, id="a")
    d.add_edge("x", "a")
    for i in (1, 2):
        d.add_node("Linear", {"out_features": narrow}, id=f"b{i}", tied={"weight": "b1.weight"} if tie and i == 2 else None)
        d.add_node("Linear", {"out_features": wide}, id=f"c{i}")
        d.add_edge("a", f"b{i}")
        d.add_edge(f"b{i}", f"c{i}")
    d.add_node("Add", {}, id="s1")
    d.add_node("Add", {}, id="s2")
    d.add_edge("c1", "s1")
    d.add_edge("c2", "s1", dst_port=1)
    d.add_edge("s1", "s2")
    d.add_edge("a", "s2", dst_port=1)
    return d


import os  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "resources" / "examples"
TRUTH = Path(os.environ.get("MEMDESIGNER_TRUTH_DIR", ROOT.parent / "shared" / "truth"))


def unblock_fifo_later(path, stop, after: float = 3.0):
    """A thread that, until ``stop`` is set, opens the FIFO at ``path`` for writing every
    ``after`` seconds and closes it: a reader blocked on it (the bug a bounded reader prevents)
    then sees an empty file, so its test fails instead of hanging."""
    import os
    import threading

    def run():
        while not stop.wait(after):
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass  # nobody reading: nothing was blocked

    threading.Thread(target=run, daemon=True).start()


def torch_module_for(type_name: str, class_name: str | None = None):
    """nn.<class_name> (default: the type's name) built from the type's default props: the
    constructor arguments that share a prop's name (LeakyReLU's negative_slope, Softmax's dim)."""
    import inspect

    import torch

    from memdesigner.model import registry

    cls = getattr(torch.nn, class_name or type_name)
    params = inspect.signature(cls).parameters
    return cls(**{k: v for k, v in registry.get(type_name).defaults().items() if k in params})

