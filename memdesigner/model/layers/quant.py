"""bitsandbytes linear layers with frozen quantised weights (QLoRA's base model).

``Linear4bit`` (bnb 0.50, NF4, ``compress_statistics=True``: double quantisation, blocksize 64)
stores the weight packed two per byte, ceil(n / 64) uint8 absmax codes, their fp32 absmax per
256 blocks, the 256-entry fp32 nested code, the 16-entry fp32 NF4 code and an fp32 offset.
``Linear8bitLt`` stores an int8 weight (``CB``) and an fp32 scale per output row (``SCB``).

Forward (``MatMul4Bit``): the weight is dequantised to the compute dtype for the matmul (a
transient weight-sized copy) and nothing is saved for backward but the packed weight; backward
(input gradient only: the weight is frozen) dequantises it again. Linear8bitLt quantises the
input row-wise to int8 (plus its row scales) and gets an int32 product before scaling it back.
"""

from memdesigner.model.layers._common import f_dtype
from memdesigner.model.oprules import OpMem, T
from memdesigner.model.registry import LayerError, LayerType, ParamSpec, Prop, TensorSpec, register

BLOCK4 = 64
NESTED_BLOCK = 256


def quant_state_bytes(bits: int, out_f: int, in_f: int) -> int:
    """Bytes of a layer's quantisation constants beyond the packed weight."""
    n = out_f * in_f
    if bits == 4:
        blocks = -(-n // BLOCK4)
        return blocks + (-(-blocks // NESTED_BLOCK)) * 4 + 256 * 4 + 16 * 4 + 4
    return out_f * 4


def _shape(c):
    x = c.inputs[0]
    if not x.shape:
        raise LayerError("inputs", "needs at least a 1-D input per sample")
    return [TensorSpec(x.shape[:-1] + (c["out_features"],))]


def _params(c):
    in_f, out_f = c.inputs[0].shape[-1], c["out_features"]
    ps = [ParamSpec("weight", (out_f, in_f), frozen=True)]
    if c["bias"]:
        ps.append(ParamSpec("bias", (out_f,), "bias", frozen=True))
    ps.append(ParamSpec("quant_state", (quant_state_bytes(c["bits"], out_f, in_f),), "buffer", "uint8"))
    return ps


def _mem(m):
    dt = f_dtype(m)
    w = m.params[0]
    out = T(m.out_elems(0), dt, "output")
    temps = [T(w.numel, dt, "dequantised weight (compute copy)")]
    bwd = [T(w.numel, dt, "dequantised weight for the input gradient")]
    if m.props["bits"] == 8:
        rows = m.in_elems(0) // m.in_shapes[0][-1]
        temps = [T(m.in_elems(0), "int8", "int8 copy of the input"), T(rows, "float32", "input row scales"),
                 T(m.out_elems(0), "int32", "int32 product")]
    return OpMem(outputs=[out], out_dtypes=[dt], temps=temps, bwd_temps=bwd if m.any_rg else [], grad_in=["new"],
                 param_grads=False)


def _flops(c, outs):
    return 2 * outs[0].numel * c.inputs[0].shape[-1]


QuantLinear = register(LayerType(
    name="QuantLinear", family="dense",
    doc="bitsandbytes Linear4bit (NF4, double quantisation) / Linear8bitLt: a frozen quantised weight.",
    props=(Prop("out_features", "int", 128, min=1), Prop("bias", "bool", True),
           Prop("bits", "choice", 4, choices=(4, 8), doc="4: NF4 (QLoRA), 8: LLM.int8")),
    shape=_shape, params=_params, flops=_flops, memory=_mem,
    search_words=("qlora", "bitsandbytes", "nf4", "int8", "quantized", "4bit", "8bit"),
    keeps_for_backward="nothing (the packed weight only)",
    in_palette=False,
    no_import="a QLoRA base weight, inserted at estimate time (--base-bits, engine/finetune.py); export the unquantised design and quantise with bitsandbytes",
    no_torch_export="a QLoRA base weight, inserted at estimate time (--base-bits, engine/finetune.py); export the unquantised design and quantise with bitsandbytes",
))
