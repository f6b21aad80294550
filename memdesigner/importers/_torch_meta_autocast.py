"""``torch.autocast(device_type="meta")`` while a model built on meta is traced: transformers
4.57's rotary embeddings (Llama, Qwen2, Mistral, Gemma, Phi3, Mixtral, DeepSeek-V2/V3, ... about
a hundred model files) run ``with torch.autocast(device_type=x.device.type, enabled=False)`` to
keep cos/sin in float32, and torch 2.14 rejects the meta device there ("unsupported
scalarType"), so both torch.fx and torch.export failed on every one of them.

Autocast on meta is a no-op: the import traces in the run's own dtype with no autocast active
(AMP is an estimate setting the engine applies by its rules), so disabling autocast changes
nothing, and no kernel runs on meta that autocast could recast. The patched class keeps every
other device as PyTorch has it."""

from __future__ import annotations

import contextlib


def _meta_aware(torch, original):
    class autocast(original):  # noqa: N801 - stands in for torch.autocast, same name
        def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
            self._on_meta = device_type == "meta"
            if self._on_meta:
                self.device = "meta"
                self.fast_dtype = dtype if dtype is not None else torch.get_default_dtype()
                self._enabled = False
                self._cache_enabled = cache_enabled
                return
            super().__init__(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

        def __enter__(self):
            return None if self._on_meta else super().__enter__()

        def __exit__(self, *exc):
            return False if self._on_meta else super().__exit__(*exc)

    autocast.__module__ = original.__module__
    autocast.__qualname__ = original.__qualname__
    return autocast


@contextlib.contextmanager
def autocast_on_meta_is_off(torch):
    """While tracing, ``torch.autocast`` / ``torch.amp.autocast`` accept device_type "meta" as a
    context that does nothing."""
    import torch.amp

    original, original_amp = torch.autocast, torch.amp.autocast
    patched = _meta_aware(torch, original)
    torch.autocast = patched
    torch.amp.autocast = patched if original_amp is original else _meta_aware(torch, original_amp)
    try:
        yield
    finally:
        torch.autocast, torch.amp.autocast = original, original_amp
