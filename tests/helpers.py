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


import os  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "resources" / "examples"
TRUTH = Path(os.environ.get("MEMDESIGNER_TRUTH_DIR", ROOT.parent / "shared" / "truth"))
