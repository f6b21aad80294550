"""Hugging Face's losses upcast the logits (``logits = logits.float()`` in transformers/loss/
loss_utils.py): with bf16 weights a fp32 copy of the logits and fp32 log-probabilities, fp32
NllLoss / LogSoftmax gradients in backward. The fp32 trace sees no conversion there, so the
importer maps that cast onto ToDtype float32 (importers/_torch_casts.py) and the model still
returns its bf16 logits. Before: the loss ran in bf16, SGD 435,334 B estimated, 631,948 measured
(-31.1 %). The loss function here sits in a folder laid out as transformers' (no transformers in
the test environment). Measured with the truth harness (shared/truth/measure.py, method a, CPU,
torch 2.13), batch 4."""

import importlib.util

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402

LOSS_UTILS = '''import torch.nn.functional as F


def causal_lm_loss(logits, labels, vocab_size):
    logits = logits.float()
    return F.cross_entropy(logits.view(-1, vocab_size), labels.view(-1))
'''


@pytest.fixture(scope="module")
def loss_utils(tmp_path_factory):
    path = tmp_path_factory.mktemp("site") / "transformers" / "loss" / "loss_utils.py"
    path.parent.mkdir(parents=True)
    path.write_text(LOSS_UTILS)
    spec = importlib.util.spec_from_file_location("hf_like_loss_utils", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _lm(lu):
    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(256, 64)
            self.fc = nn.Linear(64, 64)
            self.lm_head = nn.Linear(64, 256, bias=False)
            self.truth_input = ("tokens", 256)

        def forward(self, ids):
            logits = self.lm_head(torch.relu(self.fc(self.emb(ids))))
            return lu.causal_lm_loss(logits, ids, 256), logits

    with torch.device("meta"):
        return LM()


@pytest.mark.parametrize(("dtype", "opt", "forward", "peak"), [
    ("bf16", "sgd", 435_336, 631_948), ("bf16", "adam", 583_064, 779_676),
    ("fp32", "sgd", 476_424, 869_644), ("fp32", "adam", 771_864, 1_165_084)])
def test_hf_loss_upcast_matches_the_measurement(loss_utils, dtype, opt, forward, peak):
    d = from_module(_lm(loss_utils), (32,))
    assert d.nodes["lm_head"].output and not d.nodes["float"].output  # the bf16 logits are returned
    rep = memdesigner.estimate(d, mode="train", optimizer=opt, batch=4, backend="cpu", dtype=dtype)
    # fp32 forward 4 B over, bf16 peak 4 B short: 0-dim moments of the loss (the harness's loss.mean())
    assert rep.to_dict()["phase_peaks"]["forward"] == forward + (4 if dtype == "fp32" else 0)
    assert rep.peak_bytes == peak - (4 if dtype == "bf16" else 0)
