"""Imported by the import server before it forks a child per model file (torch_isolated): one tiny
trace pulls in what torch.fx and torch.export load lazily on first use (sympy, dynamo, ...; over a
thousand modules), so each child starts with them loaded instead of spending seconds on it.
Meta and fake tensors only: no compute, so no thread pools exist when the server forks."""

from __future__ import annotations

import torch
import torch.export  # noqa: F401  (the fallback for modules fx cannot trace)

from memdesigner.importers.torch_fx import from_module

try:
    with torch.device("meta"):
        _module = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
        _design = from_module(_module, (2,))
    # and one check on fake tensors (importers/_torch_check.py): FakeTensorMode's first ops and the
    # engine's estimate load and cache what every import's check would otherwise pay for;
    # inference only: a backward here would start autograd's worker threads, and a child forked
    # from a process that has them cannot run backward at all ("autograd's threading in
    # combination with fork-based multiprocessing"): every training check would fail
    from memdesigner.importers._torch_check import check_design, default_settings

    check_design(torch, _design, _module, (2,), at=[default_settings("inference")])
except Exception:  # noqa: BLE001, S110 - only a speed-up: the server must start whatever happens here
    pass
