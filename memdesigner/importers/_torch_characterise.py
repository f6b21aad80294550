"""Ops without a registry rule, characterised by PyTorch itself rather than guessed.

After the import mapped what it knows, the traced graph runs once more on meta (or fake)
tensors, with autograd recording, at two batch sizes. Around every op that became a Generic node,
``torch.autograd.graph.saved_tensors_hooks`` lists the tensors autograd saves for its backward:
an input (by storage), the op's output, a parameter (free: it is alive anyway) or a new tensor
(its bytes, split into a per-sample and a fixed part from the two batch sizes). Whether the
output shares an input's storage (a view) and whether its size depends on the batch at all
(``torch.arange``, a causal mask) are read off the same runs. The result is stored on the node
as props (``traced``), so later estimates need no torch.
"""

from __future__ import annotations


def _sid(t):
    try:
        return t.untyped_storage()._cdata
    except Exception:  # noqa: BLE001 - sparse, nested, ...: no storage identity
        return id(t)


def _run(torch, gm, x, targets: set, fake=None) -> dict:
    """{fx node: (input tensors by fx node, output, saved tensors)} for the nodes in targets."""
    from torch.fx import Interpreter

    rec: dict = {}

    class _Rec(Interpreter):
        def run_node(self, n):
            if n not in targets:
                return super().run_node(n)
            args, kwargs = self.fetch_args_kwargs_from_env(n)
            saved: list = []

            def pack(t):
                saved.append(t)
                return t

            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                out = getattr(self, n.op)(n.target, args, kwargs)
            ins = {a: self.env[a] for a in n.all_input_nodes if a in self.env}
            rec[n] = (ins, out, saved)
            return out

    with torch.enable_grad():
        _Rec(gm).run(x)
    return rec


def characterise(torch, gm, x_of_batch, targets: dict) -> dict:
    """``targets``: {fx node: [fx input node of each design input, in order]}. Returns
    {fx node: props} for the nodes PyTorch could run; {} when the graph cannot run again."""
    if not targets:
        return {}
    real = any(p.device.type != "meta" for p in gm.parameters()) or \
        any(b.device.type != "meta" for b in gm.buffers())
    runs = {}
    for b in (2, 3):
        try:
            if real:
                from torch._subclasses.fake_tensor import FakeTensorMode

                with FakeTensorMode(allow_non_fake_inputs=True):
                    runs[b] = _run(torch, gm, x_of_batch(b, "cpu"), set(targets))
            else:
                runs[b] = _run(torch, gm, x_of_batch(b, "meta"), set(targets))
        except Exception:  # noqa: BLE001 - data-dependent graphs; torch.export bakes the batch in
            if b == 2:
                return {}
            runs[3] = None  # one batch size only: a tensor whose first dim is the batch scales with it
    out = {}
    for n, in_nodes in targets.items():
        r2 = runs[2].get(n)
        r3 = runs[3].get(n) if runs[3] is not None else _scaled(torch, r2)
        if r2 is None or r3 is None:
            continue
        props = _describe(torch, in_nodes, r2, r3)
        if props is not None:
            out[n] = props
    return out


def _scaled(torch, r2):
    """What batch 3 would give, when only batch 2 could run: tensors led by a dim of 2 scale."""
    if r2 is None:
        return None

    def grow(t):
        if isinstance(t, torch.Tensor) and t.dim() and t.shape[0] == 2:
            return torch.empty((3, *t.shape[1:]), dtype=t.dtype, device="meta")
        return t

    ins, out, saved = r2
    return ins, grow(out), [grow(t) for t in saved]


def _describe(torch, in_nodes, r2, r3):
    ins2, out2, saved2 = r2
    _, out3, saved3 = r3
    if not isinstance(out2, torch.Tensor) or not isinstance(out3, torch.Tensor):
        return None
    in_sids = [(_sid(ins2[a]) if isinstance(ins2.get(a), torch.Tensor) else None) for a in in_nodes]
    out_sid = _sid(out2)
    saved_inputs, per, fixed = [], 0, 0
    for k, t in enumerate(saved2):
        if not isinstance(t, torch.Tensor):
            continue
        s = _sid(t)
        if s in in_sids:
            i = in_sids.index(s)
            if i not in saved_inputs:
                saved_inputs.append(i)
        elif s == out_sid:
            saved_inputs.append(-1)  # the output itself
        elif t.is_leaf and t.requires_grad:
            continue  # a parameter: alive anyway
        else:
            b2 = t.numel() * t.element_size()
            t3 = saved3[k] if k < len(saved3) and isinstance(saved3[k], torch.Tensor) else t
            b3 = t3.numel() * t3.element_size()
            per += b3 - b2
            fixed += b2 - 2 * (b3 - b2)
    alias = in_sids.index(out_sid) if out_sid in in_sids else -1
    return {"traced": True, "saved_inputs": ",".join(str(i) for i in saved_inputs),
            "saved_bytes_per_sample": max(per, 0), "saved_bytes_fixed": max(fixed, 0),
            "alias_input": alias, "batch_free": out2.numel() == out3.numel()}
