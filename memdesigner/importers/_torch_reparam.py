"""Weights re-parametrised in every forward (timm's ScaledStdConv2d standardising its weight with
F.batch_norm, a hand-written weight norm ``g * v / v.norm()``): the mapping folds an op on
parameters alone into the parameter itself, which is right for a view or a cast but not here:
the computed weight is a new tensor of the weight's size that the next op (the convolution)
keeps for backward, with what autograd saves to differentiate the computation. Such a module is
traced again as a leaf, so that it becomes a Generic node whose step PyTorch measures
(_torch_characterise), as a ``torch.nn.utils.parametrize`` module already is."""

from __future__ import annotations

# ops on a parameter that make no tensor of its size (views, casts, sizes) or keep its storage
_NO_NEW_WEIGHT = frozenset((
    "getattr", "size", "dim", "numel", "reshape", "view", "reshape_as", "view_as", "t", "transpose", "permute",
    "expand", "expand_as", "flatten", "unflatten", "unsqueeze", "squeeze", "contiguous", "to", "type", "type_as",
    "float", "half", "bfloat16", "double", "detach", "getitem", "narrow", "select", "chunk", "split", "unbind",
    "repeat",
))


def _op_name(n) -> str:
    return n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")


def weight_recomputing_modules(module, graph) -> set:
    """Qualified names of the submodules whose forward computes, from their own parameters
    alone, a new tensor of two or more dimensions (a weight, not a scale vector like Gemma's
    ``1 + weight``)."""
    params = {name: p for name, p in module.named_parameters(remove_duplicate=False)}
    root_of: dict = {}  # fx node computed from parameters alone -> the parameter it started from
    found: set = set()
    for n in graph.nodes:
        if n.op == "get_attr" and str(n.target) in params:
            root_of[n] = str(n.target)
            continue
        if n.op not in ("call_function", "call_method") or not n.all_input_nodes:
            continue
        if not all(a in root_of for a in n.all_input_nodes):
            continue
        root = root_of[n.all_input_nodes[0]]
        root_of[n] = root
        if _op_name(n) in _NO_NEW_WEIGHT or params[root].dim() < 2:
            continue
        stack = n.meta.get("nn_module_stack") or {}
        owner = list(stack.values())[-1][0] if stack else ""
        if owner and root.rsplit(".", 1)[0] == owner:  # the module's own parameter, not the root's
            found.add(owner)
    return found
