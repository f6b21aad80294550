"""The layer budget after block expansion (model/blocks.py over_budget): repeat counts are
multiplied down the nesting before anything is expanded, so a few hundred bytes of nested
repeats, a 2^60-layer file or blocks nested 1,000 deep are one line naming the instance, the
limit and its variable, instead of gigabytes, a MemoryError or a RecursionError."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memdesigner.cli import main
from memdesigner.io.design_file import design_from_dict
from memdesigner.model import blocks

ROOT = Path(__file__).resolve().parents[2]


def nested(levels, top_plain: int = 1, relus: int = 1) -> dict:
    """A design file: Input, ``top_plain - 1`` ReLUs, then instance b of d0 (repeat levels[0]);
    d_k holds an instance of d_k+1 (repeat levels[k+1]); the innermost holds ``relus`` ReLUs."""
    def chain(ids):
        return [{"from": a, "to": b} for a, b in zip(ids, ids[1:])]

    defs = []
    for k in range(len(levels)):
        inner = [{"id": "i", "type": "BlockInput", "props": {"shape": [4]}}]
        if k + 1 < len(levels):
            inner.append({"id": "b", "type": "Block", "props": {"definition": f"d{k + 1}", "repeat": levels[k + 1]}})
        else:
            inner += [{"id": f"r{j}", "type": "ReLU"} for j in range(relus)]
        inner.append({"id": "o", "type": "BlockOutput"})
        defs.append({"name": f"d{k}", "nodes": inner, "edges": chain([n["id"] for n in inner])})
    top = [{"id": "x", "type": "Input", "props": {"shape": [4]}}]
    top += [{"id": f"t{j}", "type": "ReLU"} for j in range(top_plain - 1)]
    top.append({"id": "b", "type": "Block", "props": {"definition": "d0", "repeat": levels[0]}})
    return {"format": "memdesigner-design", "version": 2, "name": "nested", "nodes": top,
            "edges": chain([n["id"] for n in top]), "blocks": defs}


def _estimate(tmp_path, capsys, doc) -> tuple[int, str]:
    path = tmp_path / "d.json"
    path.write_text(json.dumps(doc))
    rc = main(["estimate", str(path)])
    return rc, capsys.readouterr().err


def test_the_count_is_the_expansion_exactly(tmp_path, capsys, monkeypatch):
    """3 top-level layers + b: 5 x (d1 x 3 of 4 ReLUs) = 60: the budget counts 63, as expanded."""
    doc = nested([5, 3], top_plain=3, relus=4)
    assert len(blocks.expand(design_from_dict(doc)).nodes) == 63
    monkeypatch.setenv("MEMDESIGNER_MAX_LAYERS", "63")
    rc, err = _estimate(tmp_path, capsys, doc)
    assert rc == 0, err
    monkeypatch.setenv("MEMDESIGNER_MAX_LAYERS", "62")
    rc, err = _estimate(tmp_path, capsys, doc)
    assert rc == 2 and err == (f"memdesigner: error: {tmp_path / 'd.json'}: b.repeat: expands to 60 layers, 63 with "
                               "the rest, over the 62-layer limit (set MEMDESIGNER_MAX_LAYERS to raise it)\n")


def test_an_instance_over_the_budget_alone(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MEMDESIGNER_MAX_LAYERS", "5000")
    rc, err = _estimate(tmp_path, capsys, nested([100, 100]))  # 10,000 layers: expanded in a second unbounded
    assert rc == 2 and err.endswith(": b.repeat: expands to 10,000 layers, over the 5,000-layer limit "
                                    "(set MEMDESIGNER_MAX_LAYERS to raise it)\n"), err


def test_the_refused_instance_is_not_expanded(monkeypatch):
    monkeypatch.setenv("MEMDESIGNER_MAX_LAYERS", "5000")
    flat = blocks.expand(design_from_dict(nested([100, 100])))
    assert list(flat.nodes) == ["x"] and flat.instances["b"].nodes == []
    assert flat.instances["b"].error.field == "repeat"


@pytest.mark.parametrize("depth, ok", [(32, True), (33, False), (1000, False)])
def test_blocks_nested_deep_are_one_line(tmp_path, capsys, depth, ok):
    rc, err = _estimate(tmp_path, capsys, nested([1] * depth))
    if ok:
        assert rc == 0, err
    else:
        assert rc == 2 and err.endswith(f": b.definition: blocks nest {depth} deep, over the limit of 32 "
                                        "(set MEMDESIGNER_MAX_BLOCK_DEPTH to raise it)\n"), err


def test_a_definition_that_contains_itself_is_still_named(tmp_path, capsys):
    doc = nested([2, 2])
    doc["blocks"][1]["nodes"][1] = {"id": "r0", "type": "Block", "props": {"definition": "d0"}}
    rc, err = _estimate(tmp_path, capsys, doc)
    assert rc == 2 and "contains itself (d0 > d1 > d0)" in err, err


@pytest.mark.parametrize("levels, expected", [
    ([100_000, 100_000], "expands to 10,000,000,000 layers"),  # the 797-byte file: 4.6 GB in 3 minutes
    ([1024] * 6, "expands to 1.15e+18 layers"),  # 2^60: a MemoryError traceback
], ids=["two-x100000", "2^60"])
def test_bombs_cost_little(tmp_path, levels, expected):
    """In a child capped at 2 GB of address space (unbounded, the expansion fails there fast
    instead of eating the machine): one line, exit 2, under a second of CPU (after a first estimate
    paid for the imports) and 200 MB."""
    path = tmp_path / "bomb.json"
    path.write_text(json.dumps(nested(levels)))
    warm = str(ROOT / "resources" / "examples" / "lenet5.json")  # imports and schema compiling: not the refusal
    code = ("import contextlib, io, resource, sys, time; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30));"
            "from memdesigner.cli import main; err = io.StringIO(); ctx = contextlib.redirect_stderr(err);"
            f"ctx.__enter__(); out = contextlib.redirect_stdout(io.StringIO()); out.__enter__(); main(['estimate', {warm!r}]);"
            f"t = time.process_time(); rc = main(['estimate', {str(path)!r}]); dt = time.process_time() - t;"
            "ctx.__exit__(None, None, None); out.__exit__(None, None, None);"
            "print(rc, dt, [int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmHWM')][0]); print(err.getvalue(), end='')")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-800:]
    head, err = run.stdout.split("\n", 1)
    rc, dt, rss_kb = head.split()
    assert rc == "2" and err.count("\n") == 1 and expected in err, err
    assert float(dt) < 1.0 and int(rss_kb) < 200_000, (dt, rss_kb)
