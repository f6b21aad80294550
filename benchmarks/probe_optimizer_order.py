"""Probe: the order PyTorch's default CPU Adam (for-loop ``_single_tensor_adam``) makes its step
temporaries in, against ``named_parameters()`` and against the forward's execution order.

    python benchmarks/probe_optimizer_order.py        # holdout2's seq2seq_gru, batch 8

Prints every ``aten.sqrt`` / ``aten.div.Tensor`` of the second step with its size and the
parameter whose ``exp_avg_sq`` it reads; the sequence follows ``model.parameters()`` (src_emb, tgt_emb,
encoder, decoder, out), not the forward (src_emb, encoder, tgt_emb, decoder, out).
Documented in docs/memory-model.md §5; the rule is memdesigner/engine/param_order.py.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    import holdout2_models as hm
    import torch
    from torch.optim.optimizer import _default_to_fused_or_foreach
    from torch.utils._python_dispatch import TorchDispatchMode

    torch.manual_seed(0)
    m, shape = hm.MODELS["seq2seq_gru"]()
    x = torch.randint(0, 2000, (8, *shape))
    opt = torch.optim.Adam(m.parameters())
    print("foreach by default on the CPU:", _default_to_fused_or_foreach(list(m.parameters()), False)[1])
    for _ in range(2):  # the second step is the steady one (state exists)
        opt.zero_grad(set_to_none=True)
        m(x).mean().backward()
        if _ == 0:
            opt.step()
    of_state = {opt.state[p]["exp_avg_sq"].data_ptr(): n for n, p in m.named_parameters()}
    now = ["?"]

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.aten.sqrt.default:  # sqrt(exp_avg_sq): whose second moment
                now[0] = of_state.get(args[0].data_ptr(), "?")
            if func in (torch.ops.aten.sqrt.default, torch.ops.aten.div.Tensor):
                print(f"  {str(func):24s} {out.numel() * out.element_size():>10,d} B  {now[0]}")
            return out

    print("step temporaries, in the order the step makes them:")
    with Log():
        opt.step()
    print("named_parameters():", [n for n, _ in m.named_parameters()])


if __name__ == "__main__":
    main()
