"""Loss nodes. Without one, a design trains on out.mean() of its outputs (as the truth harness)."""

from memdesigner.model.exportspec import TorchExport
from memdesigner.model.layers._common import HALF
from memdesigner.model.oprules import In, OpMem, T
from memdesigner.model.registry import LayerError, LayerType, Prop, TensorSpec, register


def _loss_shape(c):
    x = c.inputs[0]
    if c["kind"] == "cross_entropy" and not x.shape:
        raise LayerError("inputs", "cross-entropy needs class logits per sample")
    return [TensorSpec(())]


def _loss_mem(m):
    """cross_entropy = nll_loss(log_softmax(x)): log-probabilities kept; backward makes two
    input-sized tensors. mse: keeps input and target. The target lives like the input batch:
    a notional one, or the design's second input (a model that computes its loss, imported)."""
    dt = m.float_in
    n = m.in_elems(0)
    given = len(m.in_shapes) > 1  # the target is a tensor of the design: NllLossBackward keeps it
    if m.props["kind"] == "cross_entropy":
        if m.amp is not None and dt in HALF:
            return _amp_cross_entropy(m, n, given)
        target = In(1) if given else \
            T(n // m.in_shapes[0][1] if len(m.in_shapes[0]) > 1 else m.batch, "int64", "target class ids")
        logp = T(n, dt, "log_softmax")
        scalars = [T(1, dt, "total_weight")]
        saved = [logp, target] + scalars if m.records else []
        temps = [] if m.records else [logp] + scalars
        # backward in two autograd nodes: NllLossBackward0 makes the gradient of the
        # log-probabilities, then its saved target and total_weight are released (the graph is
        # not retained); LogSoftmaxBackward0 makes the input's gradient beside it
        return OpMem(outputs=[T(1, dt, "loss")], out_dtypes=[dt], saved=saved, temps=temps,
                     grad_in=["new"] * len(m.in_shapes), bwd_stages=[([T(n, dt, "nll_loss gradient")], [], [1, 2])],
                     notes=[] if given else ["target"])
    target = In(1) if given else T(n, dt, "target")
    saved = [In(0), target] if m.records else []
    # mse_loss(reduction='mean') returns a 0-dim view of an input-sized storage
    return OpMem(outputs=[T(n, dt, "loss (0-dim view of an input-sized buffer)")], out_dtypes=[dt], saved=saved,
                 grad_in=["new"] * len(m.in_shapes), notes=[] if given else ["target"])


def _amp_cross_entropy(m, n: int, given: bool) -> OpMem:
    """Under autocast (CPU and CUDA) cross-entropy runs in fp32 (CPU's fp32 list has
    cross_entropy_loss, CUDA's log_softmax): a fp32 copy of the half logits lives while
    log_softmax makes its fp32 output, then dies. Backward: NllLossBackward0's fp32 gradient,
    LogSoftmaxBackward0's fp32 gradient beside it (then the log-probabilities are released),
    ToCopyBackward0's half gradient of the logits beside that (tests/importers/test_amp_cross_entropy.py: a
    language model returning F.cross_entropy, SGD b4 -31.9 % -> exact; Flan-T5 Adam b2 -1.10 % ->
    -0.01 %, benchmarks/holdout4.py)."""
    f32 = "float32"
    target = In(1) if given else \
        T(n // m.in_shapes[0][1] if len(m.in_shapes[0]) > 1 else m.batch, "int64", "target class ids")
    copy = T(n, f32, "autocast fp32 copy of the logits")
    logp = T(n, f32, "log_softmax")
    scalars = [T(1, f32, "total_weight")]
    if not m.records:
        return OpMem(outputs=[T(1, f32, "loss")], out_dtypes=[f32], temps=[copy, logp] + scalars,
                     notes=[] if given else ["target"])
    half = m.float_in
    stages = [([T(n, f32, "nll_loss gradient")], [], [1, 2]), ([T(n, f32, "log_softmax gradient")], [], [0]),
              ([T(n, half, "gradient cast back from fp32")], [], [])]
    return OpMem(outputs=[T(1, f32, "loss")], out_dtypes=[f32], saved=[logp, target] + scalars, temps=[copy],
                 grad_in=["stage"] + ["new"] * (len(m.in_shapes) - 1), bwd_stages=stages,
                 notes=[] if given else ["target"])


Loss = register(LayerType(
    name="Loss", family="output",
    doc="Training loss with a target batch (cross-entropy on class ids, or mean squared error).",
    props=(Prop("kind", "choice", "cross_entropy", choices=("cross_entropy", "mse")),),
    max_inputs=2, input_names=("input", "target"),
    shape=_loss_shape, flops=lambda c, o: 4 * c.inputs[0].numel, memory=_loss_mem,
    torch_ops=("CrossEntropyLoss", "MSELoss", "cross_entropy", "mse_loss", "cross_entropy_loss"),
    torch_props=tuple((op, (("kind", kind),)) for op, kind in (
        ("CrossEntropyLoss", "cross_entropy"), ("cross_entropy", "cross_entropy"),
        ("cross_entropy_loss", "cross_entropy"),  # aten::cross_entropy_loss (the torch.export path)
        ("MSELoss", "mse"), ("mse_loss", "mse"))),
    keeps_for_backward="cross-entropy: the log-probabilities; mse: input and target",
    # the target is a constant of the exported model (zeros): the step measures the model
    to_torch=lambda e: TorchExport(
        f"F.cross_entropy({e.x}, torch.zeros({e.x}.shape[0], dtype=torch.long, device={e.x}.device))"
        if e.props["kind"] == "cross_entropy" else f"F.mse_loss({e.x}, torch.zeros_like({e.x}))"),
))
