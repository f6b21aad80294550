"""Cross-entropy under autocast runs in fp32 on the CPU too (CPU autocast's fp32 list has
cross_entropy_loss; on CUDA log_softmax is on it): a fp32 copy of the bf16 logits lives while
log_softmax makes its fp32 output; backward makes fp32 NllLoss and LogSoftmax gradients, then the
bf16 gradient of the logits (model/layers/loss.py _amp_cross_entropy). Before, the loss ran in
bf16: SGD 420,100 B estimated, 616,716 measured (-31.9 %; forward 355,204 vs 551,816), Adam -20.5 %;
Flan-T5 (CrossEntropyLoss) Adam b2 -1.10 % -> -0.01 %.
Measured with the truth harness (shared/truth/measure.py, method a, CPU, torch 2.13), batch 4."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402


class CrossEntropyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(256, 64)
        self.fc = nn.Linear(64, 64)
        self.head = nn.Linear(64, 256)
        self.truth_input = ("tokens", 256)

    def forward(self, ids):
        logits = self.head(torch.relu(self.fc(self.emb(ids))))
        return nn.functional.cross_entropy(logits.view(-1, 256), ids.view(-1))


@pytest.mark.parametrize(("opt", "amp", "forward", "peak"), [
    ("sgd", True, 551_816, 616_716), ("adam", True, 849_308, 914_208),
    ("sgd", False, 477_448, 608_524), ("adam", False, 774_940, 906_016)])
def test_cross_entropy_under_autocast_matches_the_measurement(opt, amp, forward, peak):
    with torch.device("meta"):
        m = CrossEntropyLM()
    rep = memdesigner.estimate(from_module(m, (32,)), mode="train", optimizer=opt, batch=4, backend="cpu", amp=amp)
    assert rep.to_dict()["phase_peaks"]["forward"] == forward
    # short: 4 B, the harness's loss.mean() of the returned loss (docs/memory-model.md §1), and under
    # autocast 2 B more: the engine's ones_like(loss) seed has the autocast dtype, the fp32 loss's has 4 B
    assert rep.peak_bytes == peak - (6 if amp else 4)
