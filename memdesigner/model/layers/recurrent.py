"""Recurrent layers (batch_first). Output: the full sequence of hidden states."""

from memdesigner.model.layers._common import amp_casts, fmt
from memdesigner.model.oprules import In, OpMem, Param, T
from memdesigner.model.registry import LayerError, LayerType, ParamSpec, Prop, TensorSpec, register


def _rnn_shape(c):
    x = c.inputs[0]
    if len(x.shape) != 2 or x.kind != "float":
        raise LayerError("inputs", f"expects a float (sequence, features) input per sample, got {fmt(x.shape)}")
    d = 2 if c["bidirectional"] else 1
    if c["return_sequences"]:
        return [TensorSpec((x.shape[0], d * c["hidden_size"]))]
    return [TensorSpec((d * c["hidden_size"],))]


def _rnn_params(gates):
    def rule(c):
        h = c["hidden_size"]
        d = 2 if c["bidirectional"] else 1
        ps = []
        inp = c.inputs[0].shape[-1]
        for layer in range(c["num_layers"]):
            for direction in range(d):
                sfx = f"_l{layer}" + ("_reverse" if direction else "")
                ps.append(ParamSpec("weight_ih" + sfx, (gates * h, inp)))
                ps.append(ParamSpec("weight_hh" + sfx, (gates * h, h)))
                if c["bias"]:
                    ps.append(ParamSpec("bias_ih" + sfx, (gates * h,), "bias"))
                    ps.append(ParamSpec("bias_hh" + sfx, (gates * h,), "bias"))
            inp = d * h
        return ps
    return rule


def _rnn_flops(gates):
    def rule(c, outs):
        t, inp = c.inputs[0].shape
        h = c["hidden_size"]
        d = 2 if c["bidirectional"] else 1
        total = 0
        for layer in range(c["num_layers"]):
            total += d * t * 2 * gates * h * (inp + h)
            inp = d * h
        return total
    return rule


def _rnn_mem(gates):
    """Per layer and direction the kernel returns the layer output (B,T,H), final h (and c) and a
    workspace that keeps every time step's gate activations for backward.

    CPU (oneDNN mkldnn_rnn_layer): workspace = T*B*gates*H elements plus the layer output kept for
    backward. CUDA (cuDNN): one reserve buffer for all layers of the same size. The stacked output
    of a layer is the next layer's input; all are kept until backward.
    """

    def rule(m):
        b, t, _ = m.in_shapes[0]
        h = m.props["hidden_size"]
        d = 2 if m.props["bidirectional"] else 1
        L = m.props["num_layers"]
        dt = m.amp or m.float_in
        saved, temps = [], []
        layer_outs = []
        for layer in range(L):
            out_l = T(b * t * d * h, dt, f"layer {layer} output")
            layer_outs.append(out_l)
            ws = T(t * b * d * gates * h * (2 if gates == 4 else 2), dt, f"layer {layer} gate workspace")
            states = [T(b * d * h, dt, f"layer {layer} h_n")]
            if gates == 4:
                states.append(T(b * d * h, dt, f"layer {layer} c_n"))
            if m.records:
                saved += [ws] + states
                if layer < L - 1:
                    saved.append(out_l)
            else:
                temps += states
                if layer < L - 1:
                    temps.append(out_l)
        last = layer_outs[-1]
        if m.props["return_sequences"]:
            outputs = [last]
        else:
            outputs = [T(b * d * h, dt, "last hidden state")]
            (saved if m.records else temps).append(last)
        if m.records:
            saved.insert(0, In(0))
            saved += [Param(k) for k in range(len(m.params))]
        bwd = [T(b * t * d * gates * h, dt, "gate gradients")]
        mem = OpMem(outputs=outputs, out_dtypes=[dt], saved=saved, temps=temps, grad_in=["new"], bwd_temps=bwd)
        return amp_casts(m, mem)

    return rule


_RNN_PROPS = (
    Prop("hidden_size", "int", 256, min=1), Prop("num_layers", "int", 1, min=1, max=16),
    Prop("bias", "bool", True), Prop("bidirectional", "bool", False),
    Prop("return_sequences", "bool", True, doc="off: only the last time step (out[:, -1])"),
)

LSTM = register(LayerType(
    name="LSTM", family="recurrent", doc="Long short-term memory, batch first.",
    props=_RNN_PROPS, shape=_rnn_shape, params=_rnn_params(4), flops=_rnn_flops(4), memory=_rnn_mem(4),
    torch_ops=("LSTM",), keeps_for_backward="every time step's gates and states (a workspace per layer)",
))
GRU = register(LayerType(
    name="GRU", family="recurrent", doc="Gated recurrent unit, batch first.",
    props=_RNN_PROPS, shape=_rnn_shape, params=_rnn_params(3), flops=_rnn_flops(3), memory=_rnn_mem(3),
    torch_ops=("GRU",), keeps_for_backward="every time step's gates and states",
))
