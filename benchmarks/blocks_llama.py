"""How much a 32-block model costs to expand and estimate, against the same network drawn flat.

A Llama-like decoder (hidden 4096, 32 heads, gated MLP 11008, seq 512, vocab 32000) with its 32
layers as one block definition ×32, and the same 32 layers as loose nodes. The per-node caches
(analysis: shape rules keyed on props and input specs; simulation: memory rules keyed on props,
shapes and settings) are shared by the expanded repetitions, so the block design costs about
one layer's rules plus the liveness walk over all ops. Numbers go to blocks_llama.json.

    python benchmarks/blocks_llama.py [--layers 32] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import memdesigner as md
from memdesigner.model import analysis, blocks
from memdesigner.model.design import Design

D, HEADS, FF, SEQ, VOCAB = 4096, 32, 11008, 512, 32000


def _layer(g: Design, p: str, x: str) -> str:
    g.add_node("LayerNorm", {}, id=f"{p}input_layernorm")
    g.add_node("MultiHeadAttention", {"num_heads": HEADS, "need_weights": False, "kernel": "fused"},
               id=f"{p}self_attn")
    g.add_node("Add", {}, id=f"{p}add1")
    g.add_node("LayerNorm", {}, id=f"{p}post_attention_layernorm")
    g.add_node("Linear", {"out_features": FF, "bias": False}, id=f"{p}gate_proj")
    g.add_node("Linear", {"out_features": FF, "bias": False}, id=f"{p}up_proj")
    g.add_node("SiLU", {}, id=f"{p}act")
    g.add_node("Multiply", {}, id=f"{p}mul")
    g.add_node("Linear", {"out_features": D, "bias": False}, id=f"{p}down_proj")
    g.add_node("Add", {}, id=f"{p}add2")
    g.add_edge(x, f"{p}input_layernorm")
    g.add_edge(f"{p}input_layernorm", f"{p}self_attn")
    g.add_edge(x, f"{p}add1", 0, 0)
    g.add_edge(f"{p}self_attn", f"{p}add1", 0, 1)
    g.add_edge(f"{p}add1", f"{p}post_attention_layernorm")
    g.add_edge(f"{p}post_attention_layernorm", f"{p}gate_proj")
    g.add_edge(f"{p}post_attention_layernorm", f"{p}up_proj")
    g.add_edge(f"{p}gate_proj", f"{p}act")
    g.add_edge(f"{p}act", f"{p}mul", 0, 0)
    g.add_edge(f"{p}up_proj", f"{p}mul", 0, 1)
    g.add_edge(f"{p}mul", f"{p}down_proj")
    g.add_edge(f"{p}add1", f"{p}add2", 0, 0)
    g.add_edge(f"{p}down_proj", f"{p}add2", 0, 1)
    return f"{p}add2"


def _ends(d: Design) -> str:
    d.add_node("Input", {"shape": (SEQ,), "dtype": "int64"}, id="input_ids")
    d.add_node("Embedding", {"num_embeddings": VOCAB, "embedding_dim": D}, id="embed_tokens")
    d.add_edge("input_ids", "embed_tokens")
    return "embed_tokens"


def _head(d: Design, x: str) -> None:
    d.add_node("LayerNorm", {}, id="norm")
    d.add_node("Linear", {"out_features": VOCAB, "bias": False}, id="lm_head")
    d.add_edge(x, "norm")
    d.add_edge("norm", "lm_head")


def block_design(n: int) -> Design:
    d = Design("llama-blocks")
    x = _ends(d)
    bd = blocks.new_definition(d, "decoder_layer", stack=True)
    bd.graph.add_node("BlockInput", {"shape": (SEQ, D)}, id="hidden_states")
    out = _layer(bd.graph, "", "hidden_states")
    bd.graph.add_node("BlockOutput", {}, id="out")
    bd.graph.add_edge(out, "out")
    d.add_node("Block", {"definition": "decoder_layer", "repeat": n}, id="layers", name="model.layers")
    d.add_edge(x, "layers")
    _head(d, "layers")
    return d


def flat_design(n: int) -> Design:
    d = Design("llama-flat")
    x = _ends(d)
    for k in range(n):
        x = _layer(d, f"layers.{k}.", x)
        for node in d.nodes.values():  # the module call each layer is (what the block's instance is)
            if node.id.startswith(f"layers.{k}."):
                node.scope = f"model.layers.{k}"
    _head(d, x)
    return d


def _clear_caches():
    from memdesigner.engine import simulate

    analysis._CACHE.clear()
    analysis._PROPS.clear()
    simulate._RULES.clear()
    for memo in (getattr(simulate, "_FACTS", None), getattr(blocks, "_VIEWS", None)):  # (newer engines)
        if memo is not None:
            memo.clear()


def _time(fn, repeat: int, cold: bool) -> float:
    ts = []
    for _ in range(repeat):
        if cold:
            _clear_caches()
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts) * 1000


def _measure(d: Design, repeat: int, infer: dict, train: dict) -> dict:
    from memdesigner.engine import simulate

    _clear_caches()
    r_inf, r_train = md.estimate(d, **infer), md.estimate(d, **train)
    assert r_inf.ok and r_train.ok, (r_inf.issues, r_train.issues)
    rules = {"shape_rules_run": len(analysis._CACHE), "memory_rules_run": len(simulate._RULES)}
    return {**rules,
        "nodes_drawn": len(d.nodes) + sum(len(b.graph.nodes) for b in d.blocks.values()),
        "nodes_expanded": len(blocks.expand(d).nodes),
        "expand_ms": round(_time(lambda: blocks.expand(d), repeat, False), 2),
        "inference_cold_ms": round(_time(lambda: md.estimate(d, **infer), repeat, True), 1),
        "inference_warm_ms": round(_time(lambda: md.estimate(d, **infer), repeat, False), 1),
        "train_cold_ms": round(_time(lambda: md.estimate(d, **train), repeat, True), 1),
        "train_warm_ms": round(_time(lambda: md.estimate(d, **train), repeat, False), 1),
        "params": r_train.params, "train_peak_bytes": r_train.peak_bytes,
        "inference_peak_bytes": r_inf.peak_bytes,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).with_name("blocks_llama.json")))
    a = ap.parse_args(argv)
    train = dict(mode="train", optimizer="adamw", batch=1, dtype="bf16")
    infer = dict(mode="inference", batch=1, dtype="bf16")
    rows = {}
    for label, make in ((f"block x{a.layers}", lambda: block_design(a.layers)),
                        (f"flat {a.layers} layers", lambda: flat_design(a.layers)),
                        ("block x1", lambda: block_design(1))):
        rows[label] = _measure(make(), a.repeat, infer, train)
    b, f = rows[f"block x{a.layers}"], rows[f"flat {a.layers} layers"]
    assert (b["params"], b["train_peak_bytes"], b["inference_peak_bytes"]) == \
        (f["params"], f["train_peak_bytes"], f["inference_peak_bytes"]), "the block design must equal the flat one"
    print(f"{'design':<16} {'drawn':>6} {'ops':>5} {'rules':>6} {'expand':>8} {'inf cold':>9} {'inf warm':>9} "
          f"{'train cold':>11} {'train warm':>11}")
    for k, r in rows.items():
        print(f"{k:<16} {r['nodes_drawn']:>6} {r['nodes_expanded']:>5} "
              f"{r['shape_rules_run']:>3}/{r['memory_rules_run']:<3}{r['expand_ms']:>6} ms "
              f"{r['inference_cold_ms']:>6} ms {r['inference_warm_ms']:>6} ms {r['train_cold_ms']:>8} ms "
              f"{r['train_warm_ms']:>8} ms")
    Path(a.out).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
