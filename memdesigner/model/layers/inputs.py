"""Graph inputs."""

from memdesigner.model.layers._keras_torch import IMPL, channels_last_strides, keras
from memdesigner.model.oprules import OpMem, T
from memdesigner.model.registry import LayerType, Prop, TensorSpec, register


def _shape(c):
    kind = "int64" if c["dtype"] == "int64" else "float"
    return [TensorSpec(tuple(c["shape"]), kind)]


def _mem(m):
    # The batch is created before the step and stays alive all along (the caller holds it).
    kind = m.out_kinds[0]
    dt = "int64" if kind == "int64" else m.dtype
    mem = OpMem(outputs=[T(m.out_elems(0), dt, "input batch")], out_dtypes=[dt])
    if keras(m) and len(m.out_shapes[0]) >= 4:  # a Keras image batch: (B, H, W, C) in memory
        mem.out_strides = [channels_last_strides(m.out_shapes[0])]
    return mem


Input = register(LayerType(
    name="Input", family="inputs",
    doc="A batch of samples. Shape is per sample, channels first (C,H,W) unless the design says "
        "channels-last; int64 for token ids.",
    props=(
        Prop("shape", "shape", (3, 224, 224), doc="per-sample shape, without the batch dimension"),
        Prop("dtype", "choice", "float", choices=("float", "int64"),
             doc="float follows the run's dtype; int64 for token ids / class indices"),
        Prop("vocab", "int", 0, min=0, doc="for int64 token ids: the vocabulary size (informational)"),
        IMPL,
    ),
    min_inputs=0, max_inputs=0, shape=_shape, memory=_mem,
    torch_ops=("placeholder",), aliases=("InputLayer",),
    keeps_for_backward="the batch itself stays alive for the whole step",
))
