"""Recurrent layers (batch_first). Output: the full sequence of hidden states, or the last step."""

from memdesigner.model.exportspec import TorchExport
from memdesigner.model.layers._common import amp_casts, fmt
from memdesigner.model.layers._keras_torch import IMPL, keras
from memdesigner.model.oprules import In, OpMem, Out, Param, T
from memdesigner.model.registry import LayerError, LayerType, ParamSpec, Prop, TensorSpec, register


def _rnn_shape(c):
    x = c.inputs[0]
    if len(x.shape) != 2 or x.kind != "float":
        raise LayerError("inputs", f"expects a float (sequence, features) input per sample, got {fmt(x.shape)}")
    d = 2 if c["bidirectional"] else 1
    # second output: h_n, (layers * directions, hidden) per sample
    h_n = TensorSpec((c["num_layers"] * d, c["hidden_size"]))
    if c["return_sequences"]:
        return [TensorSpec((x.shape[0], d * c["hidden_size"])), h_n]
    return [TensorSpec((d * c["hidden_size"],)), h_n]


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
                if c["bias"] and c["rnn_bias"] == "single":  # Keras LSTM, GRU(reset_after=False)
                    ps.append(ParamSpec("bias" + sfx, (gates * h,), "bias"))
                elif c["bias"]:  # PyTorch; Keras GRU(reset_after=True) keeps its (2, 3H) bias the same way
                    ps.append(ParamSpec("bias_ih" + sfx, (gates * h,), "bias"))
                    ps.append(ParamSpec("bias_hh" + sfx, (gates * h,), "bias"))
            inp = d * h
        return ps
    return rule


def _tensors_per_direction(props) -> int:
    """Parameter tensors per layer and direction: two weights and none, one or two biases."""
    if not props["bias"]:
        return 2
    return 3 if props["rnn_bias"] == "single" else 4


def _rnn_flops(gates):
    def rule(c, outs):
        t, inp = c.inputs[0].shape
        h = c["hidden_size"]
        d = 2 if c["bidirectional"] else 1
        total = 0
        for _layer in range(c["num_layers"]):
            total += d * t * 2 * gates * h * (inp + h)
            inp = d * h
        return total
    return rule


def _rup(n, m):
    return -(-n // m) * m


def _ld(n):
    v = _rup(n, 16)
    return v + 16 if v % 256 == 0 else v


def onednn_lstm_workspace(t: int, b: int, i: int, h: int) -> int:
    """Bytes of oneDNN's LSTM training workspace for one layer and direction (fp32 layout):
    gates, hidden states and two copies of the layer states, each part page-rounded. Matches
    torch 2.13 mkldnn_rnn_layer to within 1 % (exact for lstm_classifier's layers +0.8 %)."""
    parts = [4 * t * b * _ld(4 * h), 4 * t * b * _ld(h)]
    parts += [8 * (t + 1) * b * _ld(max(i, h))] * 3 + [8 * (t + 1) * b * _ld(h)] * 2
    return sum(_rup(p, 4096) for p in parts)


def _moments(stages: list) -> list:
    """bwd_stages in which every stage is one moment: an empty stage after each frees its temps
    before the next stage allocates (the engine frees a stage's temps after the next one's)."""
    out = []
    for st in stages:
        out += [st, ([], [], [])]
    return out


def _keras_rnn_mem(gates: int):
    """Keras 3's LSTM / GRU on the torch backend's CPU path (``_fallback_lstm`` / ``_fallback_gru``):
    one matmul of the whole (time-major copy of the) input with the kernel, a separate bias add
    (x_proj, T x B x gates*H, a local alive to the end of the call, kept by no one), then a
    Python loop over the steps and a torch.stack of the step outputs. A reverse direction
    (Bidirectional) first flips its input (a copy) and runs after the forward one.

    Training (measured with the truth harness, Keras 3.15.1): every step keeps gates*H + 7*H
    values per sample (LSTM: z = x_proj[t] + h @ U, held through the sigmoids' ``_keras_logits``,
    three sigmoids, two tanh, the new c and h; GRU reset_after=True: h_proj, two sigmoids, tanh,
    1 - z, three adds), the last step's h (and c) kept by no later step. Backward walks each
    direction's steps back, the reverse direction first: every step's ``x_proj[t]`` gradient is
    a full-size select_backward, so from the second step back the running sum, the new one and
    their sum (3 x T x B x gates*H) meet beside the recurrent kernel's gradient (and a GRU's
    (2, 3H) bias gradient), the last two steps gone; the kernel's (and an LSTM's bias) gradient
    lands after the walk, from x_proj's matmul."""
    def rule(m):
        b, t, i = m.in_shapes[0]
        h = m.props["hidden_size"]
        d = 2 if m.props["bidirectional"] else 1
        rs = m.props["return_sequences"]
        dt = m.amp or m.float_in
        g = gates * h
        bias = m.props["bias"]
        out = T(b * t * d * h if rs else b * d * h, dt, "output")
        h_n = T(d * b * h, dt, "h_n (final hidden states)")
        states = T(d * (2 if gates == 4 else 1) * b * h, dt, "initial states (zeros)")
        if not m.records:
            # the time-major copy dies with the matmul, before the bias add (the peak)
            temps = [T(t * b * g, dt, "x_proj (input matmul)"), states]
            if bias:
                temps.append(T(t * b * g, dt, "matmul output before the bias add"))
            if d == 2:
                temps.append(T(t * b * h if rs else b * h, dt, "forward direction's output"))
            return OpMem(outputs=[out, h_n], out_dtypes=[dt, dt], temps=temps, grad_in=["new"], late_outputs=(0, 1))
        bh = b * h
        if gates == 3 and m.props["rnn_bias"] == "single":
            return _keras_gru_cell_loop_mem(m, b, t, i, h, d, rs, dt, out, h_n, states)
        last = 2 if gates == 4 else 1  # the last step's h and c (LSTM) or h (GRU)
        kept = (gates + 7) * t - last
        tail = min(2 * (gates + 7), kept)
        saved = [states]
        # the op's moment is the end of the last direction's call: its x_proj, its last h and c (kept
        # by no step; without return_sequences the h's are the output) and its stacked outputs
        # (bidirectional: beside the forward direction's, their concatenation is made after them)
        temps = [T(t * b * g, dt, "x_proj of the running direction (a local to the end of its call)"),
                 T((last if rs else last - 1) * bh, dt, "the last step's h and c, kept by no step")]
        if rs and d == 2:
            temps.append(T(t * b * h * d, dt, "the directions' stacked outputs (concatenated into the output)"))
        elif not rs:
            temps.append(T(t * b * h, dt, "stacked step outputs (only the last is returned)"))
        if d == 2:
            temps.append(T(t * b * i, dt, "input flipped for go_backwards"))
        ix = {}
        for k in range(d):
            saved += [T(t * b * i, dt, f"direction {k}: time-major copy of the input"),
                      T((kept - tail) * bh, dt, f"direction {k}: every step's gate values"),
                      T(tail * bh, dt, f"direction {k}: the last two steps' gate values")]
            ix[k] = (len(saved) - 3, len(saved) - 2, len(saved) - 1)
        tpd = _tensors_per_direction(m.props)
        stages = []
        for k in reversed(range(d)):
            x_tm, main, last2 = ix[k]
            # Bidirectional flips the reverse direction's sequence output back into time order: its
            # incoming gradient is flipped too (a copy), alive through that direction's walk
            held = [T(t * b * h, dt, "the reverse output's gradient, flipped")] if k and rs else []
            p0 = k * tpd  # weight_ih (kernel), weight_hh (recurrent kernel), biases
            walk_params = [p0 + 1] + ([p0 + 2, p0 + 3] if bias and tpd == 4 else [])
            late_params = [p0] + ([p0 + 2] if bias and tpd == 3 else [])
            step_temps = (2 if gates == 4 else gates + 1) * bh  # LSTM: two B*H; GRU: a (B, 3H) cat and one
            stages.append((list(held), [], [last2]))  # the first two steps back free their values
            stages.append((held + [T(3 * t * b * g, dt, f"direction {k}: x_proj gradient: select_backward's "
                                                        "full-size gradients and their sum"),
                                   T(step_temps, dt, f"direction {k}: a step's gate gradients")], walk_params, []))
            stages.append((held + [T(t * b * g, dt, f"direction {k}: x_proj gradient")], [], [main]))
            stages.append(([T(t * b * g, dt, f"direction {k}: x_proj gradient")], late_params,
                           [x_tm] + ([0] if k == 0 else [])))
        return OpMem(outputs=[out, h_n], out_dtypes=[dt, dt], saved=saved, temps=temps, grad_in=["new"],
                     bwd_stages=_moments(stages), late_outputs=(0, 1) if rs and d == 2 else (1,))
    return rule


def _inter_layer_dropout(m) -> bool:
    """nn.LSTM / nn.GRU ``dropout``: in training, on the CPU, aten's layer stack (RNN.cpp
    ``apply_layer_stack``; the oneDNN LSTM ``mkldnn_impl`` the same) runs ``at::dropout`` on every
    layer's output but the last: a noise tensor (input dtype, kept by the product for backward) and
    the dropped output, which is the next layer's input and is kept by that layer. Its backward is
    one ``mul`` (the gradient of the layer's output). cuDNN drops inside its kernel (no tensors)."""
    return bool(m.training and m.props.get("dropout", 0.0) and m.props["num_layers"] > 1 and m.backend != "cuda")


def _keras_gru_cell_loop_mem(m, b, t, i, h, d, rs, dt, out, h_n, states):
    """Keras 3's GRU(reset_after=False) in training: no fused fallback, Keras's generic ``rnn`` loop
    runs GRUCell.call once per step and once more before the loop (measured, Keras 3.15.1): each
    call projects its input slice itself (freed with the call) and keeps about 8 x B x H values
    (two sigmoids, tanh, 1 - z, r * h and the adds), no time-major copy. Backward walks the steps
    back accumulating the shared weights' gradients as it goes: the recurrent kernel's
    slice_backward, the running sum and the new one (three (H, 3H)) beside the kernel's and the
    bias's running sums, the last step and a half gone."""
    bh = b * h
    kept = 8 * t + 3
    tail = min(11, kept)
    saved = [states, In(0)]  # each step's projection keeps its input slice (a view of the input)
    for k in range(d):
        saved += [T((kept - tail) * bh, dt, f"direction {k}: every step's gate values"),
                  T(tail * bh, dt, f"direction {k}: the last steps' gate values")]
    temps = [] if rs else [T(t * b * h, dt, "stacked step outputs (only the last is returned)")]
    if d == 2:
        temps.append(T(t * b * i, dt, "input flipped for go_backwards"))
    tpd = _tensors_per_direction(m.props)
    stages = []
    for k in reversed(range(d)):
        stages.append(([], [], [3 + 2 * k]))
        stages.append(([T(2 * h * 3 * h, dt, f"direction {k}: recurrent kernel gradient contribution and sum"),
                        T(4 * bh, dt, f"direction {k}: a step's gate gradients")],
                       list(range(k * tpd, (k + 1) * tpd)), [2 + 2 * k] + ([0, 1] if k == 0 else [])))
    return OpMem(outputs=[out, h_n], out_dtypes=[dt, dt], saved=saved, temps=temps, grad_in=["new"],
                 bwd_stages=_moments(stages), late_outputs=(1,))


_keras_lstm_mem = _keras_rnn_mem(4)
_keras_gru_mem = _keras_rnn_mem(3)


def _lstm_mem(m):
    """CPU (oneDNN mkldnn_rnn_layer) / CUDA (cuDNN) LSTM.

    Forward: zero h0 and c0 (L*B*H each), a time-major copy of the input, then per layer the
    output (T,B,H), h_n, c_n and, in training, a workspace (~15x the layer output). Training keeps
    all of it. Backward runs layer by layer, last layer first: that layer's input gradient
    (computed even for the first layer), weight gradients and dh/dc, then it releases what that
    layer kept. Inference frees each layer's output once the next layer ran.
    """
    if keras(m):
        return _keras_lstm_mem(m)
    b, t, i0 = m.in_shapes[0]
    h = m.props["hidden_size"]
    d = 2 if m.props["bidirectional"] else 1
    L = m.props["num_layers"]
    dt = m.amp or m.float_in
    rs = m.props["return_sequences"]
    per_layer = d * _tensors_per_direction(m.props)
    x_tm = T(t * b * i0, dt, "time-major copy of the input")
    states = [T(L * d * b * h, dt, "h0 (zeros)"), T(L * d * b * h, dt, "c0 (zeros)")]
    outs = [T(t * b * d * h, dt, f"layer {layer} output") for layer in range(L)]
    last_out = outs[-1] if rs else T(b * d * h, dt, "last time step")
    # torch.stack of every layer's final h (and c) once the layers ran: h_n is the op's second
    # output, made after the layers' transients are gone
    h_n = T(L * d * b * h, dt, "h_n (stacked final hidden states)")
    if not m.records:
        # without grad (measured, oneDNN): a batch-first input is copied time-major only when the
        # transposed view is not contiguous (batch and length both > 1). Every layer's final h and c
        # live to the end. A layer's output is freed once the next layer ran, so only the last
        # layer's input (the previous layer's output) lives beside the last layer. Bidirectional
        # (mkldnn_impl): each direction runs apart and their outputs (T,B,H each) are cat into the
        # layer output, so the last layer's direction outputs live beside the cat, through the
        # h_n and c_n stacks; the stacks come once the previous layer's output is gone, so they
        # raise the peak only where it was smaller (one layer: by both stacks)
        cpu = m.backend != "cuda"
        temps = ([x_tm] if b > 1 and t > 1 else []) + states
        for layer in range(L):
            temps += [T(d * b * h, dt, f"layer {layer} h_n"), T(d * b * h, dt, f"layer {layer} c_n")]
            if (layer == L - 2 if cpu else layer < L - 1) or (layer == L - 1 and not rs):
                temps.append(outs[layer])
        if cpu and d == 2:
            temps.append(T(t * b * d * h, dt, f"layer {L - 1} direction outputs (the cat's inputs)"))
        stacks = 2 * L * d * b * h - (min(L - 1, 1) if cpu else L - 1) * t * b * d * h
        if stacks > 0:
            temps.append(T(stacks, dt, "h_n and c_n stacks beside the last layer's tensors"))
        return amp_casts(m, OpMem(outputs=[last_out, h_n], out_dtypes=[dt, dt], temps=temps, grad_in=["new"],
                                  late_outputs=(1,)))
    saved = [x_tm] + states
    layer_idx = []  # per layer: (its own saved indices: output, workspace, h_n, c_n; input width)
    drop_idx = {}  # layer -> saved indices of the dropout after it: (noise, dropped output)
    drop = _inter_layer_dropout(m)
    inp = i0
    for layer in range(L):
        # every layer's output is kept for its own backward (the last one is the op's output)
        saved.append(Out(0) if (rs and layer == L - 1) else outs[layer])
        own = [len(saved) - 1]
        for tt in (T(d * onednn_lstm_workspace(t, b, inp, h), "uint8", f"layer {layer} workspace"),
                   T(d * b * h, dt, f"layer {layer} h_n"), T(d * b * h, dt, f"layer {layer} c_n")):
            saved.append(tt)
            own.append(len(saved) - 1)
        if layer > 0 and drop and d == 1:  # the dropped output is this layer's input: this layer keeps it
            own.append(drop_idx[layer - 1][1])
        layer_idx.append((own, inp))
        if drop and layer < L - 1:
            # one direction: the layer's output is the oneDNN output its layer keeps, so the dropped
            # copy is extra. Bidirectional (mkldnn_impl): the output is a cat of the two directions'
            # outputs (each kept by its own direction) that the next layer would keep as its
            # input; the dropout's product takes the cat's place (measured: +1 tensor, not +2)
            saved.append(T(t * b * d * h, dt, f"layer {layer} dropout noise"))
            if d == 1:
                saved.append(T(t * b * d * h, dt, f"layer {layer} dropped output"))
            drop_idx[layer] = (len(saved) - (2 if d == 1 else 1), len(saved) - 1)
        inp = d * h
    saved += [Param(k) for k in range(len(m.params))]
    stages = []
    for layer in reversed(range(L)):
        own, width = layer_idx[layer]
        if layer in drop_idx:  # the dropout's backward: grad * noise, then the noise goes
            stages.append(([T(t * b * d * h, dt, f"layer {layer} output gradient (dropout)")], [],
                           [drop_idx[layer][0]]))
        # the layer's backward makes its input gradient (always, even for the first layer),
        # its weight gradients and dh/dc together, while the layer's kept tensors still live
        temps = [T(t * b * width, dt, f"layer {layer} input gradient"), T(2 * d * b * h, dt, f"layer {layer} dh, dc")]
        release = own + ([0, 1, 2] if layer == 0 else [])
        stages.append((temps, list(range(layer * per_layer, (layer + 1) * per_layer)), release))
    bwd = [] if rs else [T(t * b * d * h, dt, "select_backward: full-size gradient of the sequence")]
    return amp_casts(m, OpMem(outputs=[last_out, h_n], out_dtypes=[dt, dt], saved=saved, grad_in=["stage"],
                              bwd_temps=bwd, bwd_stages=stages, late_outputs=(1,),
                              affine=False))  # page-rounded workspace


def _gru_inference_moments(b, t, i0, h, d, L, bias) -> int:
    """Elements alive at the highest moment of a CPU GRU without grad (aten RNN.cpp, measured):
    per layer and direction the input projection ``linear_ih`` of the whole sequence (P = T*B*3H),
    a list of the step outputs (S = T*B*H) and their stack. A batch-first input is a
    non-contiguous time-major view (unless B or T is 1): linear copies it (T*B*I), then ``mm``
    and a separate bias ``add`` (both P); a contiguous one is one ``addmm``. Bidirectional: the
    forward direction's projection, list and stack live while the reverse projection is made
    (then the forward projection is freed); the layer ends with both lists, both stacks, the
    reverse projection and their cat (the layer's output). The previous layer's output is the
    next layer's input while it runs, every earlier layer's final hidden states wait for the
    h_n stack. The zero initial state h0 lives throughout."""
    p, s_ = t * b * 3 * h, t * b * h
    worst = 0
    for layer in range(L):
        width = i0 if layer == 0 else d * h
        prev = t * b * d * h if layer else 0
        if layer == 0 and b > 1 and t > 1:  # the time-major copy, then mm (+ the bias add)
            proj = max(t * b * width + p, 2 * p) if bias else t * b * width + p
        else:
            proj = p
        out_l = t * b * d * h
        if d == 1:
            # the last step (its hidden gates' addmm, new gate and new h beside the list), then the
            # stack of the list, the layer's output (the step is higher only below 4 steps)
            moments = [proj, p + s_ + 4 * b * h, p + s_ + out_l]
        else:
            moments = [proj, p + 2 * s_ + proj, p + 4 * s_ + out_l]
        # every earlier layer's final hidden states wait for the h_n stack at the end (measured)
        worst = max(worst, prev + layer * d * b * h + max(moments))
    return worst + L * d * b * h  # h0: zeros(num_layers * directions, B, H), alive all along


def _gru_step_kept(t: int) -> int:
    """B*H-sized values one direction of a CPU GRU layer keeps for backward (aten RNN.cpp
    GRUCell, measured): per step the hidden gates' addmm (3, the gates computed in place on it),
    two clones, the new gate and the new hidden state (hidden - new_gate, then mul_/add_ in
    place); the last step's hidden state is kept by no later step."""
    return 7 * t - 1


def _gru_train_mem(m, b, t, i0, h, d, L, dt):
    """Training on the CPU, as measured with the truth harness (tests/importers/test_gru_layer_stack.py).

    Forward: one layer at a time (RNN.cpp ``apply_layer_stack``); the last layer's moment is the
    highest (every earlier layer's kept tensors live): its input projection (T*B*3H;
    bidirectional, the reverse one: the forward one is freed before the reverse steps), every
    layer's and direction's last hidden state (kept by no step: they wait for the h_n stack)
    and, bidirectional, both directions' stacked outputs beside their cat (the op's output).

    Backward: autograd runs the nodes made last first, so the layers go last to first and, in a
    bidirectional layer, the reverse direction walks all its steps back (and lands its parameter
    gradients) before the forward one starts. A walk frees each step's tensors as it goes: the
    first step back makes its weight_hh gradient (3H, H) and gate gradients; from the second on
    each step's weight_hh gradient is added to the running sum (three (3H, H) at once) beside the
    step's gate gradients, the last two steps gone. A layer's incoming gradient (the next
    layer's input gradient, or the dropout's product) lives through its whole walk."""
    bh = b * h
    tpd = _tensors_per_direction(m.props)
    drop = _inter_layer_dropout(m)
    kept = _gru_step_kept(t)
    tail = min(14, kept)  # two steps back: their values and the hidden states they read
    hb = 3 * h if m.props["bias"] else 0  # a step's bias gradient (bias_hh's sum over the batch)
    # a batch-first input is a non-contiguous time-major view: each direction's linear_ih copies it
    # (kept for the weight gradient; later layers read the previous layer's contiguous output). At
    # B or T of 1 the view is contiguous and there is no copy: modelled alike so the step stays
    # affine in the batch (engine/batch_curve.py), one input high there
    saved = [T(t * b * i0, dt, f"time-major copy of the input ({'reverse' if k else 'forward'} linear_ih)")
             for k in range(d)]
    saved.append(T(L * d * bh, dt, "h0 (zeros): the first step's hidden state"))
    h0 = d
    temps = [T(t * b * 3 * h, dt, "the running layer's input projection"),
             T(L * d * bh, dt, "every direction's last hidden state (waiting for the h_n stack)")]
    if d == 2:
        temps.append(T(2 * t * bh, dt, "the two directions' stacked outputs beside their cat"))
    steps, out_ix, noise_ix = {}, {}, {}
    for layer in range(L):
        for k in range(d):
            name = f"layer {layer}{' reverse' if k else ''}"
            saved += [T((kept - tail) * bh, dt, f"{name} per-step gate tensors"),
                      T(tail * bh, dt, f"{name}: the last two steps' gate tensors")]
            steps[layer, k] = (len(saved) - 2, len(saved) - 1)
        if layer < L - 1:
            # the next layer's projections keep their input: this output, or with dropout the
            # dropped output (the stacked output then dies) and the dropout's noise
            saved.append(T(t * b * d * h, dt, f"layer {layer} {'dropped ' if drop else ''}output"))
            out_ix[layer] = len(saved) - 1
            if drop:
                saved.append(T(t * b * d * h, dt, f"layer {layer} dropout noise"))
                noise_ix[layer] = len(saved) - 1
    saved.append(In(0))
    stages = []
    carry = []  # the layer's incoming gradient
    for layer in reversed(range(L)):
        width = i0 if layer == 0 else d * h
        if layer in noise_ix:  # the dropout's backward: grad * noise, then the noise goes
            g = T(t * b * d * h, dt, f"layer {layer} output gradient (dropout)")
            stages.append((carry + [g], [], [noise_ix[layer]]))
            carry = [g]
        made = []  # the input gradients this layer's directions made so far
        for n, k in enumerate(reversed(range(d))):
            main, last2 = steps[layer, k]
            name = f"layer {layer}{' reverse' if k else ''}"
            held = carry + made
            stages.append((held + [T(3 * h * h + 2 * bh + hb, dt, f"{name} first step back: weight_hh and "
                                                                   "gate gradients")], [], [last2]))
            if t > 1:
                stages.append((held + [T(3 * 3 * h * h, dt, f"{name} running weight_hh gradient sums"),
                                       T(7 * bh + hb, dt, f"{name} a step's gate gradients")], [], []))
            stages[-1][2].append(main)
            # the walk done, the projection's backward: this direction's parameter gradients
            # (AccumulateGrad keeps them) and, above the first layer, its input gradient
            if layer > 0:
                made.append(T(t * b * width, dt, f"{name} input gradient"))
            release = [k] + ([h0] if n == d - 1 else []) if layer == 0 else []
            stages.append((carry + made, list(range((layer * d + k) * tpd, (layer * d + k + 1) * tpd)), release))
        if layer - 1 in out_ix:  # the previous layer's output was this layer's input
            stages[-1][2].append(out_ix[layer - 1])
        carry = made[-1:]  # summed in place into the first: one tensor
    rs = m.props["return_sequences"]
    out = T(b * t * d * h if rs else b * d * h, dt, "output")
    h_n = T(L * d * bh, dt, "h_n (stacked final hidden states)")
    bwd = [] if rs else [T(t * b * d * h, dt, "select_backward: full-size gradient of the sequence")]
    return OpMem(outputs=[out, h_n], out_dtypes=[dt, dt], saved=saved, temps=temps, grad_in=["new"], bwd_temps=bwd,
                 bwd_stages=_moments(stages), late_outputs=(1,))


def _gru_mem(m):
    """GRU has no oneDNN path on CPU: aten (RNN.cpp) runs one layer at a time, each direction an
    input projection of the whole sequence (T*B*3H, alive while the layer runs) and then a
    GRUCell per step that keeps about 7*B*H values until backward walks back over it; the stacked
    output is new. A layer's output feeds the next layer's projection, which keeps it for its
    weight gradient. Training: ``_gru_train_mem``; without grad: ``_gru_inference_moments``."""
    if keras(m):
        return _keras_gru_mem(m)
    b, t, i0 = m.in_shapes[0]
    h = m.props["hidden_size"]
    d = 2 if m.props["bidirectional"] else 1
    L = m.props["num_layers"]
    dt = m.amp or m.float_in
    if m.records:
        return amp_casts(m, _gru_train_mem(m, b, t, i0, h, d, L, dt))
    rs = m.props["return_sequences"]
    out = T(b * t * d * h if rs else b * d * h, dt, "output")
    h_n = T(L * d * b * h, dt, "h_n (stacked final hidden states)")
    moments = _gru_inference_moments(b, t, i0, h, d, L, m.props["bias"])
    return amp_casts(m, OpMem(outputs=[out, h_n], out_dtypes=[dt, dt],
                              temps=[T(moments, dt, "input projections, step lists, stacked directions")],
                              grad_in=["new"], late_outputs=(0, 1)))


def _rnn_onnx(ctx):
    """One ONNX LSTM / GRU (one layer; the importer stacks chained ones into num_layers) on a
    time-major view of a batch-first tensor, as torch.onnx exports batch_first=True."""
    x = ctx.tensor(0)
    if tuple(x.dmap) != (1, 0, 2) or int(ctx.attr("layout", 0)):
        raise LayerError("inputs", "the input is not a time-major view of a batch-first sequence")
    if ctx.op == "GRU" and not int(ctx.attr("linear_before_reset", 0)):
        raise LayerError("inputs", "GRU with linear_before_reset=0 (PyTorch's GRU applies it)")
    if ctx.x(4).kind not in ("none", "const"):
        raise LayerError("inputs", "sequence lengths")
    d = ctx.attr("direction", b"forward")
    d = d.decode() if isinstance(d, bytes) else str(d)
    if d == "reverse":
        raise LayerError("bidirectional", "a reverse-only recurrent layer")
    ctx.tensor_inputs = [0]
    return {"hidden_size": int(ctx.attr("hidden_size")), "num_layers": 1, "bias": ctx.param(3) is not None,
            "bidirectional": d == "bidirectional", "return_sequences": True}


_RNN_PROPS = (
    Prop("hidden_size", "int", 256, min=1), Prop("num_layers", "int", 1, min=1, max=16),
    Prop("bias", "bool", True), Prop("bidirectional", "bool", False),
    Prop("return_sequences", "bool", True, doc="off: only the last time step (out[:, -1])"),
    Prop("dropout", "float", 0.0, min=0.0, max=1.0,
         doc="nn.LSTM / nn.GRU dropout: applied in training to every layer's output but the last"),
    Prop("rnn_bias", "choice", "double", choices=("double", "single"),
         doc="double: bias_ih and bias_hh (PyTorch; Keras GRU reset_after=True); single: one bias "
             "vector per layer (Keras LSTM, GRU reset_after=False)"),
    IMPL,
)

LSTM = register(LayerType(
    name="LSTM", family="recurrent", doc="Long short-term memory, batch first.",
    search_words=("lstm", "rnn", "long short-term memory", "sequence"),
    props=_RNN_PROPS, shape=_rnn_shape, params=_rnn_params(4), flops=_rnn_flops(4), memory=_lstm_mem,
    n_outputs=2, input_names=(), torch_ops=("LSTM",), onnx_ops=("LSTM",), from_onnx=_rnn_onnx, keeps_for_backward="per layer: its output, h_n, c_n and a workspace (~15x the output)",
))
GRU = register(LayerType(
    name="GRU", family="recurrent", doc="Gated recurrent unit, batch first.",
    search_words=("gru", "rnn", "sequence"),
    props=_RNN_PROPS, shape=_rnn_shape, params=_rnn_params(3), flops=_rnn_flops(3), memory=_gru_mem,
    n_outputs=2, input_names=(), torch_ops=("GRU",), onnx_ops=("GRU",), from_onnx=_rnn_onnx, keeps_for_backward="every time step's gate tensors (7 x batch x hidden per step), the input's time-major copy",
))


def _cell_shape(c):
    x = c.inputs[0]
    if len(x.shape) != 1 or x.kind != "float":
        raise LayerError("inputs", f"expects a float (features,) input per sample, got {fmt(x.shape)}")
    if len(c.inputs) > 1 and c.inputs[1].shape != (c["hidden_size"],):
        raise LayerError("inputs", f"the hidden state must be ({c['hidden_size']},), got {fmt(c.inputs[1].shape)}")
    return [TensorSpec((c["hidden_size"],))]


def _cell_params(c):
    h, i = c["hidden_size"], c.inputs[0].shape[0]
    ps = [ParamSpec("weight_ih", (3 * h, i)), ParamSpec("weight_hh", (3 * h, h))]
    if c["bias"]:
        ps += [ParamSpec("bias_ih", (3 * h,), "bias"), ParamSpec("bias_hh", (3 * h,), "bias")]
    return ps


def _gru_cell_mem(m):
    """One GRU step on the CPU (aten RNN.cpp GRUCell, measured with the truth harness): the two
    gate projections (B*3H each); the hidden one is kept for backward with the gates computed in
    place on it, beside two clones and the new gate (B*H each); the input one dies with the op.
    The new hidden state is new. Without a hidden state the cell makes a zero one, kept by the
    hidden projection's backward. Called in a loop, each call keeps its own. Without grad: both
    projections and the new gate beside the output."""
    b = m.in_shapes[0][0]
    h = m.props["hidden_size"]
    dt = m.amp or m.float_in
    out = T(b * h, dt, "new hidden state")
    n_in = len(m.in_shapes)
    if m.records:
        saved = [T(b * 3 * h, dt, "hidden gate projection (the gates computed in place on it)"),
                 T(3 * b * h, dt, "two clones and the new gate")]
        saved += [In(i) for i in range(n_in)] if n_in > 1 else [In(0), T(b * h, dt, "zero hidden state")]
        return amp_casts(m, OpMem(outputs=[out], out_dtypes=[dt], saved=saved,
                                  temps=[T(b * 3 * h, dt, "input gate projection")], grad_in=["new"] * n_in,
                                  bwd_temps=[T(2 * b * 3 * h, dt, "gate gradients")]), n_inputs=n_in)
    temps = [T(2 * b * 3 * h, dt, "gate projections"), T(b * h, dt, "new gate")]
    if n_in == 1:
        temps.append(T(b * h, dt, "zero hidden state"))
    return amp_casts(m, OpMem(outputs=[out], out_dtypes=[dt], temps=temps, grad_in=["new"] * n_in), n_inputs=n_in)


GRUCell = register(LayerType(
    name="GRUCell", family="recurrent", doc="One GRU step: (x, h) -> h'. Called in a loop, the weights are shared.",
    props=(Prop("hidden_size", "int", 128, min=1), Prop("bias", "bool", True)),
    min_inputs=1, max_inputs=2, input_names=("input", "hidden"), shape=_cell_shape, params=_cell_params,
    flops=lambda c, o: 2 * 3 * c["hidden_size"] * (c.inputs[0].shape[0] + c["hidden_size"]), memory=_gru_cell_mem,
    torch_ops=("GRUCell",), keeps_for_backward="the step's hidden gate projection, two clones and the new gate (~6 x hidden)",
    to_torch=lambda e: TorchExport(f"self.{e.attr}({', '.join(e.inputs)})", init=[
        f"self.{e.attr} = nn.GRUCell({e.in_shapes[0][0]}, {e.lit('hidden_size')}, bias={e.lit('bias')})"]),
))
