"""Which part of a training step an allocation belongs to, and which layer made it, read from
its stack frames.

PyTorch records no phase, but the frames tell: ``loss.backward()`` runs through
``torch/_tensor.py:backward`` and ``torch/autograd``; the autograd engine's own thread has no
Python frames at all (so such events continue the phase before them); optimizers live in
``torch/optim`` (its ``zero_grad`` frees the previous step's gradients: counted as the end of that
step's optimizer phase, so a forward starts at the level the estimate's steady state starts at).
Snapshots written by ``memdesigner export snapshot`` name the phase and layer in frames of their
own (``memdesigner:phase/...``, ``memdesigner:layer/...``).
"""

from __future__ import annotations

PHASES = ("forward", "backward", "optimizer_step")
FORWARD, BACKWARD, OPTIMIZER, UNKNOWN = 0, 1, 2, -1

PHASE_PREFIX = "memdesigner:phase/"
LAYER_PREFIX = "memdesigner:layer/"
CATEGORY_PREFIX = "memdesigner:category/"

_LIBRARY_MARKS = ("/torch/", "site-packages/", "dist-packages/", "/lib/python", "<frozen", "<string>")


def _s(f, key: str) -> str:
    """A frame's text field; '' where the frame or the field is not what torch writes (a crafted
    snapshot's None frame or list-valued name must not stop the replay)."""
    v = f.get(key, "") if type(f) is dict else ""
    return v if type(v) is str else ""


def _line(f) -> int:
    v = f.get("line", 0) if type(f) is dict else 0
    return v if type(v) is int else 0


def _is_python(f: dict) -> bool:
    fn = _s(f, "filename")
    return fn.endswith(".py") or fn.startswith("memdesigner:") or fn.startswith("<")


def classify(frames) -> int:
    """FORWARD, BACKWARD, OPTIMIZER, or UNKNOWN (no Python frame: continue the previous phase).

    Frames run innermost first; the markers of backward and the optimizer sit between the
    allocation and the user's own code, so the scan stops at the first user frame (forward):
    cheap on deep C++ stacks."""
    if not frames:
        return UNKNOWN
    python = False
    for f in frames:
        fn = _s(f, "filename")
        name = _s(f, "name")
        if fn.startswith(PHASE_PREFIX):
            ph = fn[len(PHASE_PREFIX):]
            return PHASES.index(ph) if ph in PHASES else UNKNOWN
        if fn.endswith(".py") or fn.startswith("<"):
            python = True
            if "torch/optim/" in fn:
                return OPTIMIZER  # step, and zero_grad freeing that step's gradients
            if (fn.endswith("torch/_tensor.py") and name == "backward") or "torch/autograd/graph.py" in fn or (
                    fn.endswith("torch/autograd/__init__.py") and name in ("backward", "grad")):
                return BACKWARD
            if not any(m in fn for m in _LIBRARY_MARKS):
                return FORWARD  # the user's code, reached without passing autograd or an optimizer
        elif "autograd::Engine" in name or "torch::autograd::generated" in name:
            return BACKWARD
    return FORWARD if python else UNKNOWN


def attribute(frames) -> str:
    """A short name for what made the allocation: the design layer, else the model's own source
    line (the innermost frame outside torch and the standard library) with the nn module file it
    called, else the innermost frame; '' without frames."""
    if not frames:
        return ""
    user = module = None
    for f in frames:
        fn = _s(f, "filename")
        if fn.startswith(LAYER_PREFIX):
            return _s(f, "name") or fn[len(LAYER_PREFIX):]
        if module is None and (("torch/nn/modules/" in fn and _s(f, "name") == "forward") or "torch/optim/" in fn):
            module = ("nn." if "/nn/" in fn else "optim.") + fn.rsplit("/", 1)[-1].removesuffix(".py")
        if user is None and _is_python(f) and not fn.startswith("memdesigner:") and not any(
                m in fn for m in _LIBRARY_MARKS):
            user = f"{fn.rsplit('/', 1)[-1]}:{_line(f)} {_s(f, 'name')}"
    if user and module:
        return f"{user} ({module})"
    if user or module:
        return user or module
    f = frames[0]
    fn = _s(f, "filename")
    if fn.startswith(CATEGORY_PREFIX):
        return f"{_s(f, 'name')} [{fn[len(CATEGORY_PREFIX):]}]"

    return f"{fn.rsplit('/', 1)[-1]}:{_line(f)} {_s(f, 'name')}"


def category(frames) -> str | None:
    """The engine category named by an exported snapshot's frames (None in real snapshots)."""
    for f in frames or ():
        fn = _s(f, "filename")
        if fn.startswith(CATEGORY_PREFIX):
            return fn[len(CATEGORY_PREFIX):]
    return None
