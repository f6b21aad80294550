"""A graph torch.export traced from a module built on meta holds its lifted tensor constants on
meta (transformers 4.57's BERT: the extended attention mask's ``1.0 - mask``); the fake CPU run
that characterises Generic nodes met them beside CPU tensors and failed, so every Generic node of
the model fell back to its untraced rule (BertForMaskedLM with labels, inference: +19.8 %,
measured). They are moved to the CPU with the factory calls."""

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from memdesigner.importers._torch_characterise import _fake_cpu_run  # noqa: E402
from memdesigner.importers._torch_trace import _meta_input, _trace  # noqa: E402


class WithConstant(nn.Module):
    """fx stops at the assert (torch.export traces it); the forward makes a tensor constant."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(32, 64)

    def forward(self, x):
        assert x.shape[1] <= 64
        return torch.cumsum(self.a(x) * torch.tensor([1.0, 0.0]).repeat(32), dim=1)


def test_fake_cpu_run_takes_lifted_constants_of_a_meta_graph():
    with torch.device("meta"):
        m = WithConstant()
    gm = _trace(torch, m, _meta_input(torch, (16, 32), "float32", 1))
    consts = [n for n in gm.graph.nodes if n.op == "get_attr" and "weight" not in str(n.target)
              and "bias" not in str(n.target)]
    assert consts  # the lifted constant is there, on meta
    targets = {n for n in gm.graph.nodes if n.op == "call_function" and "cumsum" in str(n.target)}
    rec = _fake_cpu_run(torch, gm, lambda b, dev: torch.empty((b, 16, 32), device=dev), 2, targets)
    (ins, out, saved, temp, bwd), = rec.values()
    assert tuple(out.shape) == (2, 16, 64) and out.device.type == "cpu"
