"""Dtype casts (``x.to(dtype)``): a copy only when the dtype changes."""

from memdesigner.model.oprules import In, OpMem, T
from memdesigner.model.registry import LayerType, Prop, register

TARGETS = ("params", "float32", "bfloat16", "float16", "like")


def _cast_mem(m):
    """``x.to(dtype)`` returns x itself when it already has the dtype; otherwise a new tensor
    (ToCopyBackward0 saves nothing; its backward casts the gradient back: a new input-sized one).
    ``params``: the parameters' dtype (fp32 under autocast), as peft casts an adapter's input to
    lora_A's weight dtype. ``like``: the second input's dtype (``x.to(input_dtype)`` after a
    normalisation's fp32 upcast, ``x.type_as(y)``); that input is only looked at."""
    to = m.props["to"]
    if to == "params":
        to = m.dtype
    elif to == "like":
        to = m.in_dtypes[1] if len(m.in_dtypes) > 1 else m.in_dtypes[0]
    src = m.in_dtypes[0]
    rest = [None] * (len(m.in_shapes) - 1)
    if src == to or src not in ("float32", "float16", "bfloat16", "float64"):
        return OpMem(outputs=[In(0)], out_dtypes=[src], grad_in=["alias"] + rest)
    return OpMem(outputs=[T(m.in_elems(0), to, f"copy cast to {to}")], out_dtypes=[to], grad_in=["new"] + rest,
                 elementwise=True)


ToDtype = register(LayerType(
    name="ToDtype", family="tensor",
    doc="x.to(dtype): a copy in the new dtype, or x itself when it already has it.",
    props=(Prop("to", "choice", "params", choices=TARGETS, doc="target dtype; params: the parameters' dtype; like: the second input's"),),
    shape=lambda c: [c.inputs[0]], memory=_cast_mem, flops=lambda c, o: 0, max_inputs=2,
    search_words=("cast", "dtype", "to", "float", "half", "bfloat16"),
    keeps_for_backward="nothing",
    in_palette=False,
    no_import="peft's cast of a LoRA adapter's input, inserted at estimate time (--lora, engine/finetune.py)",
    no_torch_export="peft's cast of a LoRA adapter's input, inserted at estimate time (--lora, engine/finetune.py)",
))
