"""The library versions a PyTorch import ran under, recorded in the design: the graph is what
those versions ran (transformers 4.57 materialises a causal mask and repeats grouped-query
keys/values where 5.x does not), so the estimate says which it follows. transformers and peft
count only when the model file imported them."""

from __future__ import annotations

import sys


def versions_ran_under(torch) -> dict:
    out = {"torch": str(torch.__version__).split("+")[0]}
    for name in ("transformers", "peft"):
        v = getattr(sys.modules.get(name), "__version__", None)
        if v:
            out[name] = str(v)
    return out
