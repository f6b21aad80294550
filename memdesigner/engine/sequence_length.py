"""The sequence length as a run setting: a token model estimated at another length without editing
the design. The tokens are the int64 Inputs with a 1-D per-sample shape (input_ids, and an
attention_mask or labels of the same length); every other shape follows from them through shape
inference, so a design at length n is the design with those Inputs' shape set to (n,)."""

from __future__ import annotations

from memdesigner.model.design import Design


def token_inputs(design: Design) -> list[str]:
    """The Inputs that carry the sequence: int64, 1-D per sample, of the first such Input's length."""
    found, length = [], None
    for nid, node in design.nodes.items():
        if node.type != "Input":  # (every estimate asks: one comparison per other node)
            continue
        shape = node.props.get("shape")
        if node.props.get("dtype") == "int64" and isinstance(shape, (list, tuple)) and len(shape) == 1:
            if length is None:
                length = shape[0]
            if shape[0] == length:
                found.append(nid)
    return found


def design_length(design: Design) -> int | None:
    """The sequence length the design was made at; None when it has no token input."""
    nids = token_inputs(design)
    return int(design.nodes[nids[0]].props["shape"][0]) if nids else None


def at_length(design: Design, n: int) -> Design:
    """A copy of ``design`` whose token inputs are ``n`` long (its block library shared, not copied);
    ``design`` itself when it is already that long. ValueError when it has no token input."""
    nids = token_inputs(design)
    if not nids:
        raise ValueError("seq_len: the design has no token input (an int64 Input with a 1-D per-sample shape), "
                         "so it has no sequence length to set")
    if int(design.nodes[nids[0]].props["shape"][0]) == n:
        return design
    d = design.detached_copy()
    d.blocks = design.blocks
    for nid in nids:
        d.nodes[nid].props = dict(d.nodes[nid].props, shape=[n])
    return d


def sized_for(design: Design, analysis, seq_len: int):
    """(design, analysis) at the seq_len setting (0: as given): the resized copy comes with no
    analysis. Every entry point that estimates (estimate, the batch sweep, make-it-fit) starts here."""
    if not seq_len:
        return design, analysis
    sized = at_length(design, seq_len)
    return (design, analysis) if sized is design else (sized, None)
