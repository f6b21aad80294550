"""Imported by the import server before it forks a child per model file (torch_isolated): one tiny
trace pulls in what torch.fx and torch.export load lazily on first use (sympy, dynamo, ...; over a
thousand modules), so each child starts with them loaded instead of spending seconds on it.
Meta tensors only: no compute, so no thread pools exist when the server forks."""

from __future__ import annotations

import torch
import torch.export  # noqa: F401  (the fallback for modules fx cannot trace)

from memdesigner.importers.torch_fx import from_module

try:
    with torch.device("meta"):
        from_module(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()), (2,))
except Exception:  # noqa: BLE001, S110 - only a speed-up: the server must start whatever happens here
    pass
