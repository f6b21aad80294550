"""weight_norm on convolutions and Linears, measured against PyTorch (CPU).

Both APIs compute ``weight`` from (g, v) in forward: parametrizations.weight_norm (Wav2Vec2's
positional convolution under transformers 4.57 and 5.x) at every access, torch.nn.utils.weight_norm
in a forward pre-hook that keeps the result as the module's attribute between calls. Traced as
aten ops (torch.export) the weight was folded into v: g went uncounted and so did the computed
weight the layer keeps (Wav2Vec2 SGD -3.18 %); traced whole by torch.fx, the hook's module
was a plain layer (-17 % in training, -26 % in inference on the model below)."""

import functools

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import memdesigner  # noqa: E402
from memdesigner.engine.settings import Settings  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402
from memdesigner.measure.torch_measure import _builtin_measure, factory_from_design  # noqa: E402

PARAM = nn.utils.parametrizations.weight_norm
HOOK = nn.utils.weight_norm
SHAPE = (32, 40)
CONV_W = 32 * 8 * 15 * 4  # the convolution's weight (32, 8, 15) fp32: 15,360 bytes
HEAD_W = 48 * 32 * 4  # the head's (48, 32): 6,144 bytes
G = (15 + 48) * 4  # g: one norm per kernel tap (dim=2) and one per output row (dim=0)


class PosConv(nn.Module):
    """Wav2Vec2's positional convolution (grouped Conv1d normed along the kernel, dim=2) and a
    weight-normed head. With ``branch`` a Python test on a size stops torch.fx: torch.export
    traces it (as it does Wav2Vec2)."""

    def __init__(self, wn=None, branch=True):
        super().__init__()
        wn = wn or (lambda m, dim=0: m)
        self.branch = branch
        self.conv = wn(nn.Conv1d(32, 32, 15, padding=7, groups=4), dim=2)
        self.head = wn(nn.Linear(32, 48))

    def forward(self, x):
        if not self.branch or x.shape[-1] > 1:
            x = x * 2
        return self.head(F.gelu(self.conv(x)).transpose(1, 2))


MODES = {"sgd": {"mode": "train", "optimizer": "sgd"}, "adam": {"mode": "train", "optimizer": "adam"},
         "inference": {"mode": "inference", "optimizer": "none"}}


@functools.cache
def _plain(branch, mode):
    return _both(lambda: PosConv(None, branch), mode)


def _both(make, mode):
    s = Settings(backend="cpu", batch=2, **MODES[mode])
    res = _builtin_measure(lambda: (make(), SHAPE), s, "cpu", s.optimizer if s.optimizer != "none" else "sgd", 2, 0)
    d = from_module(make(), SHAPE)
    return d, memdesigner.estimate(d, s), res


@pytest.mark.parametrize("api", ["parametrizations", "hook"])
@pytest.mark.parametrize("branch", [True, False], ids=["export", "fx"])
@pytest.mark.parametrize("mode", list(MODES))
def test_weight_norm_measured(api, branch, mode):
    wn = PARAM if api == "parametrizations" else HOOK
    if api == "parametrizations" and not branch:
        pytest.skip("torch.fx keeps a parametrized module whole as a measured Generic node (test_weight_reparam)")
    d, rep, res = _both(lambda: PosConv(wn, branch), mode)
    _, plain, plain_res = _plain(branch, mode)
    assert rep.params == plain.params + G // 4 == sum(p.numel() for p in PosConv(wn).parameters())
    kinds = {n.type: (n.props.get("weight_norm"), n.props.get("weight_norm_hook")) for n in d.nodes.values()
             if n.type in ("Conv1d", "Linear")}
    assert kinds == {"Conv1d": (2, api == "hook"), "Linear": (0, api == "hook")}
    # what weight_norm adds, measured (torch 2.13, CPU, batch 2): in training both computed weights
    # are kept for backward, with g and its gradient (Adam: its two moments and two step counts);
    # the hook's weights stay between steps (the optimizer step sees them). Without grad the
    # head's weight is made while it runs (the hook's both live all along)
    added = res["peak_bytes"] - plain_res["peak_bytes"]
    if mode == "inference":
        assert added == (CONV_W + HEAD_W if api == "hook" else HEAD_W) + G
    else:
        assert added == CONV_W + HEAD_W + (2 * G if mode == "sgd" else 4 * G + 8)
        kept = res["phase_peaks"]["optimizer_step"] - plain_res["phase_peaks"]["optimizer_step"]
        # (+ 60 bytes of Adam's step temporaries for the two g's)
        assert kept - (2 * G if mode == "sgd" else 4 * G + 8 + 60) == (CONV_W + HEAD_W if api == "hook" else 0)
        assert rep.phase_peaks["optimizer_step"] - plain.phase_peaks["optimizer_step"] == pytest.approx(kept, abs=256)
    # the estimate adds the same, within the head's norms (192 bytes) that it keeps a little longer
    assert 0 <= (rep.peak_bytes - plain.peak_bytes) - added <= 192


@pytest.mark.parametrize("api", ["parametrizations", "hook"])
def test_weight_norm_exports_back(api):
    d = from_module(PosConv(PARAM if api == "parametrizations" else HOOK), SHAPE)
    model, _ = factory_from_design(d)()
    again = from_module(model, SHAPE)
    got = sorted((n.type, n.props.get("weight_norm"), n.props.get("weight_norm_hook")) for n in again.nodes.values()
                 if n.type in ("Conv1d", "Linear"))
    hook = api == "hook"
    if not hook:  # fx keeps the exported parametrized modules whole (Generic nodes PyTorch measures)
        assert sorted(n.props["op"] for n in again.nodes.values() if n.type == "Generic") == ["ParametrizedConv1d", "ParametrizedLinear"]
    else:
        assert got == [("Conv1d", 2, True), ("Linear", 0, True)]
    assert memdesigner.estimate(again, Settings(batch=2)).params == sum(p.numel() for p in model.parameters())
