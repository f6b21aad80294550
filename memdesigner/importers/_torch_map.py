"""One traced node onto registry layers: module calls (importers/_torch_map_modules.py) and
function / method calls (importers/_torch_map_ops.py, which the module mapping also uses)."""

from __future__ import annotations

from memdesigner.importers._torch_map_modules import _map_module
from memdesigner.importers._torch_map_ops import map_call
from memdesigner.importers._torch_values import _State


def map_node(st: _State, gm, fxn):
    if fxn.op == "call_module":
        return _map_module(st, fxn, gm.get_submodule(str(fxn.target)))
    return map_call(st, gm, fxn)
