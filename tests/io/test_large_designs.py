"""Big design files load in linear time and report their first error without a full pass."""

import json

import jsonschema
import pytest

from memdesigner.io import design_file
from memdesigner.io.design_file import DesignFileError, design_from_dict, load_design
from memdesigner.model.design import Design


def chain_doc(n: int, reverse_edges: bool = False) -> dict:
    ids = ["in"] + [f"r{i}" for i in range(1, n)]
    nodes = [{"id": "in", "type": "Input", "props": {"shape": [8]}}] + [{"id": i, "type": "ReLU"} for i in ids[1:]]
    edges = [{"from": a, "to": b} for a, b in zip(ids, ids[1:])]
    if reverse_edges:
        edges.reverse()
    return {"format": "memdesigner-design", "version": 1, "name": "chain", "nodes": nodes, "edges": edges}


@pytest.fixture
def counted(monkeypatch):
    """Counts reachability searches (one per edge made loading quadratic) and index rebuilds."""
    calls = {"reaches": 0, "index": 0}
    real_reaches, real_index = Design._reaches, getattr(Design, "_edge_index", None)

    def reaches(self, a, b):
        calls["reaches"] += 1
        return real_reaches(self, a, b)

    def edge_index(self):
        if self._index is None:
            calls["index"] += 1
        return real_index(self)

    monkeypatch.setattr(Design, "_reaches", reaches)
    if real_index is not None:
        monkeypatch.setattr(Design, "_edge_index", edge_index)
    return calls


@pytest.mark.parametrize("reverse_edges", [False, True])
def test_20000_node_chain_loads_without_a_search_per_edge(counted, reverse_edges, tmp_path):
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(chain_doc(20_000, reverse_edges)))
    d = load_design(path)
    assert len(d.nodes) == 20_000 and len(d.edges) == 19_999
    assert counted == {"reaches": 0, "index": 1}  # no per-edge graph search, one index build
    assert d.topo_order()[:3] == ["in", "r1", "r2"]


def test_cycle_is_found_once_after_load_and_names_the_closing_edge(counted):
    doc = chain_doc(2_000)
    doc["nodes"][5]["type"] = "Add"  # r5 takes a second input
    doc["edges"].append({"from": "r1999", "to": "r5", "to_port": 1})
    doc["edges"].append({"from": "r3", "to": "r1000", "to_port": 1})  # bad too, but the cycle comes first
    with pytest.raises(DesignFileError, match=r"edges\[1999\]: this connection would make a cycle"):
        design_from_dict(doc)
    assert counted["reaches"] == 0


def test_interactive_cycle_check_still_works_after_load():
    doc = chain_doc(50)
    for nd in doc["nodes"][1:]:
        nd["type"] = "Add"  # every node has a free input 1
    d = design_from_dict(doc)
    assert d.check_edge("r49", "r2", dst_port=1) == "this connection would make a cycle"
    assert d.check_edge("r45", "r20", dst_port=1) == "this connection would make a cycle"
    d.add_edge("r10", "r40", dst_port=1)
    assert d.check_edge("r3", "r40", dst_port=1) == "input 1 of r40 is already connected"
    d.remove_edge(next(e for e in d.edges if e.dst == "r40" and e.dst_port == 0))  # r39 -/-> r40
    assert d.check_edge("r45", "r20", dst_port=1) is None  # r20 no longer reaches r45
    assert d.check_edge("r45", "r5", dst_port=1) == "this connection would make a cycle"  # via r10 -> r40


def test_first_bad_edge_is_named_and_only_it_is_worded(monkeypatch):
    doc = chain_doc(200)
    for i in range(9, 199):
        doc["edges"][i]["to_port"] = -1
    seen = []
    real = jsonschema.Draft202012Validator.iter_errors

    def iter_errors(self, instance, *a, **k):
        seen.append(instance)
        return real(self, instance, *a, **k)

    monkeypatch.setattr(jsonschema.Draft202012Validator, "iter_errors", iter_errors)
    with pytest.raises(DesignFileError) as err:
        design_from_dict(doc)
    assert "edges[9].to_port: -1 is less than the minimum of 0" in str(err.value)
    assert seen == [doc["edges"][9]]  # the full-schema pass over 199 edges is not run


def test_top_level_error_in_a_big_file_is_worded_without_its_items():
    doc = chain_doc(500)
    doc["settings"] = {"mode": "sleep"}
    assert design_file.schema_error(doc) == (["settings", "mode"], "'sleep' is not one of ['inference', 'train', 'generate']")
