"""Blocks: an instance of a named definition (``Design.blocks``) and the definition's ports.

A ``Block`` node is resolved by expanding the design (memdesigner/model/blocks.py): analysis and
the engine always see the flat network, so a Block's own rules only run where no definition is
known, and say so. ``BlockInput`` / ``BlockOutput`` are the definition's ports, in node order;
expansion rewires them away, so they never reach the engine inside an instance (opened on its
own, a definition's input acts as a graph input and its output as a pass-through).
"""

from memdesigner.model.layers.inputs import _mem as _input_mem
from memdesigner.model.layers.inputs import _shape as _input_shape
from memdesigner.model.oprules import In, OpMem
from memdesigner.model.registry import LayerError, LayerType, Prop, register


def _unresolved(c):
    raise LayerError("definition", f"no block definition named {c['definition']!r} in this design")


Block = register(LayerType(
    name="Block", family="generic",
    doc="An instance of a block definition (a named subgraph), applied `repeat` times in a chain. "
        "Editing the definition changes every instance.",
    props=(
        Prop("definition", "str", "block", doc="the name of the block definition this instance uses"),
        Prop("repeat", "int", 1, min=1, max=100000,
             doc="apply the definition N times, each repetition's outputs feeding the next one's inputs"),
        Prop("start", "int", 0, min=0, doc="the index of the first repetition in expanded names (a stack "
                                          "folded from its k-th child: a ResNet stage's blocks after the first)"),
    ),
    min_inputs=0, max_inputs=None, shape=_unresolved,
    search_words=("group", "subgraph", "stack", "layers"),
    keeps_for_backward="what its expanded layers keep (the engine runs the expansion)",
    in_palette=False,
    no_import="made by Group into block, or by the importers folding repeated children (model/block_fold.py)",
))


def _pass(c):
    return [c.x]


def _pass_mem(m):
    return OpMem(outputs=[In(0)], out_dtypes=[m.in_dtypes[0]], grad_in=["alias"])


BlockInput = register(LayerType(
    name="BlockInput", family="inputs",
    doc="An input port of a block definition; an instance's input i feeds the definition's i-th "
        "BlockInput. The shape is what the definition shows when opened on its own.",
    props=(
        Prop("shape", "shape", (16,), doc="per-sample shape seen when the definition is opened on its own"),
        Prop("dtype", "choice", "float", choices=("float", "int64")),
    ),
    min_inputs=0, max_inputs=0, shape=_input_shape, memory=_input_mem,
    keeps_for_backward="nothing (a port: the instance's input itself)",
    in_palette=False,
    no_import="made by Group into block, or by the importers folding repeated children (model/block_fold.py)",
))

BlockOutput = register(LayerType(
    name="BlockOutput", family="output",
    doc="An output port of a block definition; the definition's j-th BlockOutput is the instance's output j.",
    min_inputs=1, max_inputs=1, shape=_pass, memory=_pass_mem,
    keeps_for_backward="nothing (a port: a view of the value it passes out)",
    in_palette=False,
    no_import="made by Group into block, or by the importers folding repeated children (model/block_fold.py)",
))
