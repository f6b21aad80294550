"""Which layer of the design a measured step is in, moment by moment, so the measured curve can
be drawn op by op on the estimate's axis (snapshot/align.py: align_measured_ops).

Forward: a pre-hook on each exported layer's module names it while it runs (ops between two
modules, such as an inline ``torch.flatten``, are nobody's). Backward: the forward hook puts a
pre-hook on the autograd node that made the module's output; autograd calls it just before it
starts that module's backward, and the module's backward lasts until the next such call. Hooks
only read: no tensor is kept, copied or added to the graph, so the bytes measured are the same."""

from __future__ import annotations

from functools import partial


class LayerTags:
    def __init__(self, layers: dict):
        self.layers = {a: tuple(ids) for a, ids in layers.items()}  # module attribute -> node ids
        self.current = None  # ("forward" | "backward", node ids) or None

    def install(self, model) -> None:
        for name, mod in model.named_children():
            ids = self.layers.get(name)
            if ids:
                mod.register_forward_pre_hook(partial(self._enter, ids))
                mod.register_forward_hook(partial(self._leave, ids))

    def tag(self):
        """The current tag as plain lists (it crosses a process boundary with the result)."""
        cur = self.current
        return None if cur is None else [cur[0], list(cur[1])]

    def _enter(self, ids, _mod, _args):
        self.current = ("forward", ids)

    def _leave(self, ids, _mod, _args, out):
        self.current = None
        from torch.utils._pytree import tree_leaves

        for t in tree_leaves(out):
            fn = getattr(t, "grad_fn", None)
            if fn is not None:
                fn.register_prehook(partial(self._backward, ids))
                break

    def _backward(self, ids, _grads):
        self.current = ("backward", ids)


def tagged_tracker_class(base, tags: LayerTags):
    """A subclass of the truth harness's DispatchStorageTracker that keeps, beside each timeline
    entry, the layer tag of the moment it was recorded (``.tags``)."""

    class Tagged(base):
        last = None

        def __init__(self, *a, **k):
            self.tags = []
            super().__init__(*a, **k)
            Tagged.last = self

        def _bump(self, delta, what, key=0):
            with self.lock:
                super()._bump(delta, what, key)
                if self.timeline is not None and delta:
                    self.tags.append(tags.tag())

    return Tagged
