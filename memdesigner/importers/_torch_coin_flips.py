"""LayerDrop's coin flip while the model is traced: ``dropout_probability = torch.rand([])`` then
``if dropout_probability < layerdrop: skip the layer`` (transformers' Wav2Vec2, HuBERT, BART,
Whisper, ... in training). torch.export cannot branch on a random tensor ("Could not guard on
data-dependent expression"), and under torch.fx the real draw would make each import a
different network. A 0-dim ``torch.rand`` without a generator is such a coin flip: it draws the
largest value below 1 while tracing, so every layer runs (the step that needs the most memory)."""

from __future__ import annotations

import contextlib

NEAR_ONE = 1.0 - 2.0 ** -24


class CoinFlip(float):
    """The draw: a Python number (comparisons give plain bools), readable as a 0-dim tensor is
    (``.item()``, ``.to(device)``)."""

    def item(self):
        return float(self)

    def tolist(self):
        return float(self)

    def to(self, *args, **kwargs):
        return self

    cpu = cuda = to


@contextlib.contextmanager
def coin_flips_run_everything(torch):
    original = torch.rand

    def rand(*size, **kwargs):
        shape = size[0] if len(size) == 1 and isinstance(size[0], (list, tuple, torch.Size)) else size
        if tuple(shape) == () and kwargs.get("generator") is None and kwargs.get("out") is None:
            return CoinFlip(NEAR_ONE)
        return original(*size, **kwargs)

    torch.rand = rand
    try:
        yield
    finally:
        torch.rand = original
