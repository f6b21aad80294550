"""``torch.finfo(x.dtype)`` while torch.fx traces: fx's Proxy stands for ``x.dtype``, and finfo
rejects it ("torch.finfo() requires a floating point input type"), so the whole import fell back
to torch.export (transformers' eager attention masks: ``torch.finfo(dtype).min`` in
masking_utils.eager_mask, used by BLOOM). A traced activation has the module's floating-point
dtype, so finfo answers for that one: the first floating-point parameter's, or PyTorch's
default."""

from __future__ import annotations

import contextlib


@contextlib.contextmanager
def finfo_of_traced_dtypes(torch):
    original = torch.finfo
    Proxy = torch.fx.Proxy

    def module_dtype(proxy):
        root = getattr(proxy.tracer, "root", None)
        for p in (root.parameters() if root is not None else ()):
            if p.is_floating_point():
                return p.dtype
        return torch.get_default_dtype()

    def finfo(*args, **kwargs):
        if args and isinstance(args[0], Proxy):
            args = (module_dtype(args[0]), *args[1:])
        if isinstance(kwargs.get("type"), Proxy):
            kwargs["type"] = module_dtype(kwargs["type"])
        return original(*args, **kwargs)

    torch.finfo = finfo
    try:
        yield
    finally:
        torch.finfo = original
