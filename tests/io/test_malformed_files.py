"""Malformed design files: every one gives a single-line error naming the field, and exit code 2."""

import json

import pytest

from memdesigner.cli import main

GOOD_NODES = [{"id": "in", "type": "Input", "props": {"shape": [8]}},
              {"id": "fc", "type": "Linear", "props": {"out_features": 4}}]
GOOD_EDGES = [{"from": "in", "to": "fc"}]


def doc(**over):
    d = {"format": "memdesigner-design", "version": 1, "name": "t", "nodes": GOOD_NODES, "edges": GOOD_EDGES}
    d.update(over)
    return d


CASES = {
    "not_json": ("{nodes: oops", "invalid JSON"),
    "truncated": ('{"format": "memdesigner-design", "version": 1, "nodes": [', "invalid JSON"),
    "top_level_list": ([1, 2, 3], "expected a JSON object"),
    "wrong_format": (doc(format="something-else"), "format"),
    "missing_format": ({k: v for k, v in doc().items() if k != "format"}, "format"),
    "future_version": (doc(version=99), "version: 99 is newer"),
    "version_string": (doc(version="one"), "version"),
    "nodes_not_list": (doc(nodes={"in": {}}), "nodes"),
    "missing_edges": ({k: v for k, v in doc().items() if k != "edges"}, "edges"),
    "node_without_id": (doc(nodes=[{"type": "Input"}]), "nodes[0]"),
    "node_id_number": (doc(nodes=[{"id": 3, "type": "Input"}]), "nodes[0].id"),
    "unknown_type": (doc(nodes=[GOOD_NODES[0], {"id": "x", "type": "Conv9d"}], edges=[]), "nodes[1].type: unknown layer type"),
    "duplicate_id": (doc(nodes=[GOOD_NODES[0], dict(GOOD_NODES[0])], edges=[]), "nodes[1].id: duplicate node id"),
    "unknown_prop": (doc(nodes=[GOOD_NODES[0], {"id": "fc", "type": "Linear", "props": {"units": 4}}]),
                     "nodes[1].props.units"),
    "negative_size": (doc(nodes=[{"id": "in", "type": "Input", "props": {"shape": [8, -3]}}], edges=[]),
                      "nodes[0].props.shape: dimension -3 must be positive"),
    "zero_out_features": (doc(nodes=[GOOD_NODES[0], {"id": "fc", "type": "Linear", "props": {"out_features": 0}}]),
                          "nodes[1].props.out_features: 0 is below the minimum"),
    "prop_wrong_type": (doc(nodes=[GOOD_NODES[0], {"id": "fc", "type": "Linear", "props": {"out_features": "many"}}]),
                        "nodes[1].props.out_features"),
    "bad_choice": (doc(nodes=[{"id": "in", "type": "Input", "props": {"shape": [8], "dtype": "complex"}}], edges=[]),
                   "nodes[0].props.dtype"),
    "bad_bits": (doc(nodes=[GOOD_NODES[0], dict(GOOD_NODES[1], bits=3)]), "nodes[1].bits"),
    "dangling_edge": (doc(edges=[{"from": "in", "to": "nowhere"}]), "edges[0].to: no node with id 'nowhere'"),
    "edge_missing_to": (doc(edges=[{"from": "in"}]), "edges[0]"),
    "edge_negative_port": (doc(edges=[{"from": "in", "to": "fc", "to_port": -1}]), "edges[0].to_port"),
    "self_loop": (doc(edges=[{"from": "fc", "to": "fc"}]), "edges[0]: a node cannot feed itself"),
    "cycle": (doc(nodes=GOOD_NODES + [{"id": "fc2", "type": "Linear", "props": {"out_features": 8}}],
                  edges=[{"from": "fc", "to": "fc2"}, {"from": "fc2", "to": "fc"}]), "edges[1]: this connection would make a cycle"),
    "pos_wrong": (doc(nodes=[dict(GOOD_NODES[0], pos=[1])], edges=[]), "nodes[0].pos"),
    "extra_node_key": (doc(nodes=[dict(GOOD_NODES[0], colour="red")], edges=[]), "nodes[0]"),
    "bad_settings": (doc(settings={"mode": "sleep"}), "settings.mode"),
    "kernel_too_big": (doc(nodes=[{"id": "in", "type": "Input", "props": {"shape": [3, 5, 5]}},
                                  {"id": "conv3", "type": "Conv2d", "props": {"kernel": 7}}],
                           edges=[{"from": "in", "to": "conv3"}]), "conv3.kernel: 7 is larger than the padded input 5"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_file_one_line_exit_2(name, tmp_path, capsys):
    content, expected = CASES[name]
    path = tmp_path / f"{name}.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    code = main(["estimate", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("memdesigner: error: ")
    assert expected in lines[0], lines[0]
    assert "Traceback" not in err


def test_at_least_twenty_cases():
    assert len(CASES) >= 20


def test_bad_cli_arguments_exit_2(tmp_path, capsys):
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(doc()))
    assert main(["estimate", str(path), "--batch", "0"]) == 2
    assert main(["estimate", str(path), "--device", "no-such-gpu"]) == 2
    with pytest.raises(SystemExit) as ex:
        main(["estimate", str(path), "--mode", "fly"])
    assert ex.value.code == 2
    assert main(["estimate", str(path)]) == 0
