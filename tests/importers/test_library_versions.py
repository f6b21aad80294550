"""The library versions a design's graph follows: recorded by the PyTorch import (what it ran
under), kept through the design file and the autosave's frozen copy, said by the estimate and
the report."""

import sys

import pytest

from memdesigner.io.design_file import design_from_dict, design_to_dict
from memdesigner.io.design_freeze import freeze, thaw
from memdesigner.model.design import Design
from memdesigner.model.library_versions import describe


def _small() -> Design:
    d = Design("v")
    a = d.add_node("Input", {"shape": (8,)}, id="x").id
    b = d.add_node("Linear", {"out_features": 4}, id="fc").id
    d.add_edge(a, b)
    d.library_versions = {"transformers": "4.57.6", "torch": "2.14.1"}
    return d


def test_describe_orders_and_reads_bare_majors():
    assert describe({"transformers": "4.57.6", "torch": "2.14.1"}) == "torch 2.14.1, transformers 4.57.6"
    assert describe({"transformers": "5"}) == "transformers 5.x"
    assert describe({}) == ""


def test_kept_by_the_file_the_copy_and_the_frozen_copy():
    d = _small()
    assert design_from_dict(design_to_dict(d)).library_versions == d.library_versions
    assert thaw(freeze(d)).library_versions == d.library_versions
    assert d.detached_copy().library_versions == d.library_versions
    assert "library_versions" not in design_to_dict(Design("plain"))  # nothing written when unknown


def test_the_report_says_what_the_graph_follows():
    from memdesigner.reports.content import collect
    from memdesigner.reports.markdown import render_markdown

    text, _ = render_markdown(collect(_small(), devices=[]))
    assert "| Follows | torch 2.14.1, transformers 4.57.6 |" in text


def test_the_pytorch_import_records_what_it_ran_under():
    torch = pytest.importorskip("torch")
    from memdesigner.importers.torch_fx import from_module

    d = from_module(torch.nn.Sequential(torch.nn.Linear(8, 4)), (8,))
    want = {"torch": torch.__version__.split("+")[0]}
    for name in ("transformers", "peft"):  # only when loaded (a model file that imports them)
        if name in sys.modules:
            want[name] = sys.modules[name].__version__
    assert d.library_versions == want
