"""A loss computed inside an imported PyTorch model (F.cross_entropy, nn.CrossEntropyLoss, F.mse_loss) is
the Loss rule with the target as its second input (importers/_torch_loss.py): log_softmax kept,
NllLossBackward0 then LogSoftmaxBackward0 in backward. Measured with the truth harness (CPU,
torch 2.13); the harness trains on ``out.mean()`` of the returned loss, one 4-byte 0-dim tensor
the estimate of a model that returns its own loss leaves out."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402
from memdesigner.model.blocks import expand  # noqa: E402


class NextTokenLM(nn.Module):
    """Returns the cross-entropy of the next token (targets sliced from the input ids)."""

    def __init__(self, vocab=500, emb=64, smoothing=0.0, checked=False):
        super().__init__()
        self.vocab, self.smoothing, self.checked = vocab, smoothing, checked
        self.emb = nn.Embedding(vocab, emb)
        self.fc = nn.Linear(emb, vocab)
        self.truth_input = ("tokens", vocab)

    def forward(self, tokens):
        if self.checked and tokens.size(1) > 64:  # control flow on a size: symbolic tracing fails and
            raise ValueError("too long")  # the importer traces aten ops with torch.export (nanoGPT does this)
        x, y = tokens[:, :-1], tokens[:, 1:]
        logits = self.fc(self.emb(x))
        return F.cross_entropy(logits.reshape(-1, self.vocab), y.reshape(-1), label_smoothing=self.smoothing)


class SignClassifier(nn.Module):
    """An nn.CrossEntropyLoss module on labels computed from the input."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
        self.crit = nn.CrossEntropyLoss()

    def forward(self, x):
        return self.crit(self.net(x), (x[:, 0] > 0).long())


class Autoencoder(nn.Module):
    """Returns F.mse_loss of its reconstruction against its own input."""

    def __init__(self):
        super().__init__()
        self.enc, self.dec = nn.Linear(256, 32), nn.Linear(32, 256)

    def forward(self, x):
        return F.mse_loss(self.dec(torch.relu(self.enc(x))), x)


def lm():
    return NextTokenLM(), (33,)


def lm_checked():
    return NextTokenLM(checked=True), (33,)


def autoencoder():
    return Autoencoder(), (256,)


def classifier():
    return SignClassifier(), (64,)


# truth harness, batch 8, fp32, CPU: (peak_overall, steady peak_forward)
MEASURED = {
    ("lm", "sgd"): (1_861_660, 1_351_704),
    ("lm", "adam"): (2_377_672, 1_867_716),
    ("classifier", "sgd"): (163_932, 95_272),
    ("classifier", "adam"): (440_504, 248_968),
    ("autoencoder", "sgd"): (150_792, 92_288),
    ("autoencoder", "adam"): (348_820, 225_680),
    ("lm_checked", "sgd"): (1_861_660, 1_351_704),  # aten::cross_entropy_loss
}
FACTORIES = {"lm": lm, "classifier": classifier, "autoencoder": autoencoder, "lm_checked": lm_checked}
KIND = {"lm": "cross_entropy", "classifier": "cross_entropy", "autoencoder": "mse", "lm_checked": "cross_entropy"}
MEAN_OF_LOSS = 4  # the harness's loss = out.mean(): a 0-dim fp32 tensor


def _design(name):
    with torch.device("meta"):
        module, shape = FACTORIES[name]()
    return from_module(module, shape, name=name)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_cross_entropy_imports_as_a_loss_node_with_its_target(name):
    d = expand(_design(name))
    loss = [n for n in d.nodes.values() if n.type == "Loss"]
    assert len(loss) == 1 and loss[0].props["kind"] == KIND[name]
    assert len(d.inputs_of(loss[0].id)) == 2  # logits and the target ids
    assert not [w for w in d.import_warnings if "cross_entropy" in w or "CrossEntropyLoss" in w or "mse" in w]


@pytest.mark.parametrize("key", sorted(MEASURED))
def test_cross_entropy_in_the_model_matches_the_measurement(key):
    name, opt = key
    peak, fwd = MEASURED[key]
    est = memdesigner.estimate(_design(name), mode="train", optimizer=opt, batch=8, backend="cpu")
    # as a Generic node its traced saved tensors were all held in the forward: lm +512,000 B
    assert est.phase_peaks["forward"] == fwd
    # NllLossBackward0 releases the target before LogSoftmaxBackward0 runs: lm 2,048 B lower
    assert est.peak_bytes == peak - MEAN_OF_LOSS


def test_label_smoothing_stays_generic():
    with torch.device("meta"):
        module = NextTokenLM(smoothing=0.1)
    d = expand(from_module(module, (33,)))
    assert not [n for n in d.nodes.values() if n.type == "Loss"]


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(MEASURED))
def test_measured_numbers_still_hold(key):
    from memdesigner.measure.torch_measure import _load_truth_measure

    truth = _load_truth_measure()
    if truth is None:
        pytest.skip("shared/truth not found")
    name, opt = key
    rec = truth.measure(FACTORIES[name], batch=8, mode="train", optimizer=opt, dtype="fp32", methods="a")
    a = rec["method_a"]
    assert (a["peak_overall"], a["steady"]["peak_forward"]) == MEASURED[key]
