"""The PyTorch importer's last path (importers/_torch_dispatch.py): models whose forward runs in
eager PyTorch but that neither torch.fx nor torch.export can trace import through a
dispatch-level trace of one forward, and estimate close to what PyTorch measured.

Truth: ../shared/truth/measure.py (CPU, torch 2.13.0, method a, seed 0), measured once per
configuration; the estimate must be within TOL of it (the design was recorded at batch 2, so
batch 4 checks that it scales with the batch)."""

import functools

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402


class ItemScale(nn.Module):
    """``.item()`` in forward: a scale read as a Python number (fake tensors refuse: real CPU run)."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 256)
        self.fc2 = nn.Linear(256, 32)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        s = float(h.abs().mean().item())
        return self.fc2(h * (1.0 / (1.0 + s)))


class RowLoop(nn.Module):
    """A Python loop over a tensor's rows (fx cannot iterate a Proxy), with a branch on each row's
    values (torch.export cannot guard on them)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 128)
        self.out = nn.Linear(128, 16)

    def forward(self, x):
        h = self.fc(x)  # (B, T, 128)
        rows = [torch.tanh(r) * (2.0 if r.sum() > 0 else 3.0) for r in h.unbind(1)]
        return self.out(torch.stack(rows, 1))


class Branch(nn.Module):
    """A data-dependent branch: ``if h.sum() > 0``."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(64, 128)
        self.b = nn.Linear(128, 128)
        self.c = nn.Linear(128, 8)

    def forward(self, x):
        h = torch.sigmoid(self.a(x))
        if h.sum() > 0:
            h = self.b(h).relu()
        return self.c(h)


class Unread(Branch):
    """A layer the forward never calls (Longformer's global-attention projections when no token is
    global): its weights are held, with no gradient and no optimizer state."""

    def __init__(self):
        super().__init__()
        self.spare = nn.Linear(128, 128)


class AutocastOff(nn.Module):
    """``torch.autocast(device_type=x.device.type, enabled=False)`` (transformers' rotary embeddings):
    fx cannot pass a Proxy as the device type and autocast on meta fails under torch.export; fake
    CPU tensors run it."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(32, 64)
        self.b = nn.Linear(64, 8)

    def forward(self, x):
        h = torch.relu(self.a(x))
        with torch.autocast(device_type=h.device.type, enabled=False):
            h = h.float() * 2
        return self.b(h)


class TgtMask(nn.Module):
    """nn.Transformer with a causal tgt_mask: fx traces it as one call, whose shape propagation
    on meta fails (``Tensor.item()`` on meta); the decoder's cross-attention splits its
    in_proj_weight in q and kv rows, which must still count as the parameter."""

    def __init__(self):
        super().__init__()
        self.t = nn.Transformer(d_model=32, nhead=4, num_encoder_layers=1, num_decoder_layers=1,
                                dim_feedforward=64, batch_first=True)

    def forward(self, x):
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        return self.t(x, x, tgt_mask=mask)


class LossInside(nn.Module):
    """A causal LM that returns ``(loss, logits)`` as transformers' models with labels do, its
    logits made under an autocast-off block (fake tensors run it): ``F.cross_entropy`` and
    ``F.scaled_dot_product_attention`` are recorded whole, so they map onto the Loss and attention
    rules rather than into their aten pieces as Generic ops."""

    truth_input = ("tokens", 64)

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(64, 32)
        self.qkv = nn.Linear(32, 96)
        self.head = nn.Linear(32, 64)

    def forward(self, ids):
        h = self.emb(ids)
        q, k, v = self.qkv(h).view(ids.shape[0], ids.shape[1], 3, 4, 8).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(h.shape)
        with torch.autocast(device_type=h.device.type, enabled=False):
            logits = self.head(h + a).float()
        return F.cross_entropy(logits.view(-1, 64), ids.view(-1)), logits


class RoiFill(nn.Module):
    """A detector's RoI pooling: ``result = zeros(...)`` filled level by level with
    ``result[idx] = ...``, ``idx`` from ``nonzero()`` (a data-dependent size: fake tensors refuse
    it, and the graph cannot run again to characterise its ops). The run saw each ``index_put_``
    write into ``result``: one buffer, not a new copy per level."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 4096)

    def forward(self, x):
        h = self.fc(x)
        out = torch.zeros(h.shape[0], 4096)
        for level in range(4):
            idx = (h[:, level] > -1e9).nonzero().squeeze(1)
            out[idx] = h[idx] * (level + 1)
        return out


class EvalOnly(nn.Module):
    """A detector's contract: in training mode the forward needs targets (torch.export runs it in
    training mode and fails as eager would); it is imported as it runs, in eval mode."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        if self.training:
            raise ValueError("targets should not be none when in training mode")
        h = torch.relu(self.conv(x)).mean((2, 3))
        return self.head(h).softmax(-1)


SHAPES = {ItemScale: (64,), RowLoop: (6, 64), Branch: (64,), AutocastOff: (32,), TgtMask: (8, 32),
          EvalOnly: (3, 16, 16), LossInside: (16,), Unread: (64,), RoiFill: (32,)}

# (mode, optimizer, batch) -> measured peak bytes
TRUTH = {
    ItemScale: {("inference", "none", 2): 104_320, ("train", "sgd", 2): 201_736, ("train", "adam", 4): 530_452},
    RowLoop: {("inference", "none", 2): 63_808, ("train", "sgd", 2): 93_064, ("train", "adam", 4): 239_380},
    Branch: {("inference", "none", 2): 107_040, ("train", "sgd", 2): 208_520, ("train", "adam", 4): 546_588},
    Unread: {("inference", "none", 2): 173_088, ("train", "sgd", 2): 274_568, ("train", "adam", 4): 612_636},
    AutocastOff: {("inference", "none", 2): 11_808, ("train", "sgd", 2): 21_896, ("train", "adam", 4): 59_156},
    TgtMask: {("inference", "none", 2): 102_656, ("train", "sgd", 2): 216_328, ("train", "adam", 4): 509_968},
    # inference: ``q, k, v = self.qkv(h).view(...).permute(...)`` binds views that keep the qkv
    # output alive until forward returns (66,440 / 103,560 measured, torch 2.13 CPU; -18.5 / -23.7 %
    # while the importer let it go after the attention)
    LossInside: {("train", "sgd", 2): 95_628, ("train", "adam", 4): 220_576, ("inference", "none", 2): 66_440,
                 ("inference", "none", 4): 103_560},
    RoiFill: {("inference", "none", 2): 672_016},
    EvalOnly: {("inference", "none", 2): 39_952, ("inference", "none", 4): 78_864},
}
TOL = {ItemScale: 0.005, RowLoop: 0.03, Branch: 0.005, AutocastOff: 0.005, TgtMask: 0.03, EvalOnly: 0.005, LossInside: 0.005, Unread: 0.005, RoiFill: 0.01}
TRACED_SINCE = (AutocastOff, LossInside)
PATH = {ItemScale: "real CPU", RowLoop: "real CPU", Branch: "real CPU", AutocastOff: "fake tensors",
        TgtMask: "real CPU", RoiFill: "real CPU", Unread: "real CPU", LossInside: "fake tensors", EvalOnly: "fake tensors, in eval mode (in training mode the forward does not run"}


@pytest.mark.parametrize("cls", TRACED_SINCE, ids=lambda c: c.__name__)
def test_models_torch_export_traces_now_need_no_dispatch_trace(cls):
    """torch.export traces these since autocast on meta is a no-op during the trace and lifted
    constants move to the CPU (importers/_torch_meta_autocast.py, _torch_characterise.py); the
    estimate tests below hold on that path too."""
    d = _design(cls)
    assert not any("dispatch-level trace" in w for w in d.import_warnings)
    assert d.import_params == sum(p.numel() for p in cls().parameters())


@functools.cache
def _design(cls):
    torch.manual_seed(0)
    with torch.device("meta"):
        module = cls()
    return from_module(module, SHAPES[cls], rebuild=cls)


@pytest.mark.parametrize("cls", [c for c in TRUTH if c not in TRACED_SINCE], ids=lambda c: c.__name__)
def test_it_imports_through_the_dispatch_trace_and_says_so(cls):
    d = _design(cls)
    first = d.import_warnings[0]
    assert first.startswith("imported through a dispatch-level trace of one forward on " + PATH[cls])
    assert d.import_params == sum(p.numel() for p in cls().parameters())
    assert not any(w.startswith("parameter count") for w in d.import_warnings)
    # the detach autograd makes of every output it saves, and ops whose value only Python read
    # (``.item()``'s mean, the branch's comparison), are not the model's: they are not imported
    if cls in (ItemScale, Branch):
        assert not any(".detach()" in w or w.split(":")[0].startswith(("gt", "sum", "mean", "abs"))
                       for w in d.import_warnings)


@pytest.mark.parametrize(("cls", "conf"), [(c, k) for c, v in TRUTH.items() for k in v],
                         ids=lambda x: x.__name__ if isinstance(x, type) else "-".join(map(str, x)))
def test_the_estimate_is_within_tolerance_of_the_measurement(cls, conf):
    mode, opt, batch = conf
    est = memdesigner.estimate(_design(cls), mode=mode, optimizer=opt, batch=batch, backend="cpu").peak_bytes
    truth = TRUTH[cls][conf]
    assert abs(est - truth) <= TOL[cls] * truth, (est, truth, f"{100 * (est - truth) / truth:+.2f} %")


class Expanded(nn.Module):
    """A size baked into the recorded graph (``expand(x.shape[0], ...)`` at batch 2): running the
    graph again at batch 3, as the Generic characterisation does, fails inside a fake kernel."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)

    def forward(self, x):
        h = self.a(x)
        if h.sum() > 0:
            h = h * 2
        bias = torch.ones(x.shape[1], 16).expand(x.shape[0], x.shape[1], 16)
        return torch.tanh(h + bias)


def test_the_expected_failures_of_the_batch_3_run_print_nothing(capfd, caplog):
    with torch.device("meta"):
        module = Expanded()
    d = from_module(module, (4, 16), rebuild=Expanded)
    assert d.import_warnings[0].startswith("imported through a dispatch-level trace")
    assert "failed while attempting to run meta" not in capfd.readouterr().err + caplog.text
