"""A statement that spans lines with a comment inside its parentheses (transformers' GPT-2:
``hidden_states = block(\\n hidden_states,\\n ...,  # as a positional argument ...\\n)``) still
rebinds its name (importers/torch_fx.py ``_statement`` joins the lines without the comments):
the value bound before the loop dies when the first pass rebinds it, not at the frame's end.
Measured with the truth harness (CPU, torch 2.13)."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import memdesigner  # noqa: E402
from memdesigner.importers.torch_fx import from_module  # noqa: E402
from memdesigner.model.blocks import expand  # noqa: E402


class CommentedLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Linear(256, 1024)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(1024, 1024), nn.ReLU()) for _ in range(3))
        self.head = nn.Linear(1024, 10)

    def forward(self, x):
        h = self.stem(x)
        for block in self.blocks:
            h = block(
                h,  # a comment inside the call
            )
        return self.head(h)


def commented_loop():
    return CommentedLoop(), (256,)


MEASURED_INFERENCE_B64 = 14_540_840  # truth harness peak_overall; the stem output held to the end: +262,144


def test_stem_output_dies_at_the_first_rebinding():
    with torch.device("meta"):
        module, shape = commented_loop()
    d = from_module(module, shape)
    flat = expand(d)
    assert flat.nodes["stem"].keep_until != "head"
    est = memdesigner.estimate(d, mode="inference", batch=64, backend="cpu")
    assert est.peak_bytes == MEASURED_INFERENCE_B64


@pytest.mark.slow
def test_measured_number_still_holds():
    from memdesigner.measure.torch_measure import _load_truth_measure

    truth = _load_truth_measure()
    if truth is None:
        pytest.skip("shared/truth not found")
    rec = truth.measure(commented_loop, batch=64, mode="inference", dtype="fp32", methods="a")
    assert rec["method_a"]["peak_overall"] == MEASURED_INFERENCE_B64
