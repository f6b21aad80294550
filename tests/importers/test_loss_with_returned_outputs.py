"""A model that returns its own loss and other tensors with it (Hugging Face's ``(loss, logits)``
with ``labels=``): the returned logits stay alive with the result through backward and the step,
and the truth harness's step trains on the sum of the means of every returned float tensor
(``loss.mean() + logits.mean()``), so backward also seeds a logits-sized MeanBackward gradient,
which autograd's InputBuffer adds to the cross-entropy's (engine/backward_pass.py run_loss,
forward_pass.py held outputs). Measured with the truth harness (CPU, torch 2.14, method a),
batch 4; before the rule: -65,540 B (the logits were freed after log_softmax and had no seed)."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402


class LossAndLogits(nn.Module):
    def __init__(self, ret_logits=True):
        super().__init__()
        self.emb = nn.Embedding(128, 32)
        self.fc = nn.Linear(32, 128)
        self.ret_logits = ret_logits

    def forward(self, ids):
        logits = self.fc(torch.tanh(self.emb(ids)))
        loss = F.cross_entropy(logits.view(-1, 128), ids.view(-1))
        return (loss, logits) if self.ret_logits else loss


def _estimate(ret_logits, opt):
    with torch.device("meta"):
        module = LossAndLogits(ret_logits)
    module.truth_input = ("tokens", 128)
    return memdesigner.estimate(from_module(module, (16,)), mode="train", optimizer=opt, batch=4,
                                backend="cpu").peak_bytes


@pytest.mark.parametrize(("opt", "measured"), [("sgd", 205_836), ("adam", 272_408)])
def test_loss_and_logits_match_the_measurement(opt, measured):
    assert _estimate(True, opt) == measured


@pytest.mark.parametrize(("opt", "measured"), [("sgd", 140_300), ("adam", 206_872)])
def test_loss_alone_is_unchanged(opt, measured):
    # the 4 B short: the harness's loss.mean() of the returned 0-dim loss (docs/memory-model.md §1)
    assert _estimate(False, opt) == measured - 4
