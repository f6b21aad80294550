"""Generate mode (prefill + decode with a KV cache) and the GPT-2 config builder, against
transformers 5.24's model.generate measured on the CPU with the truth harness (benchmarks/generate.py)."""

import json

import pytest

from memdesigner.cli import main
from memdesigner.engine.estimate import estimate
from memdesigner.engine.generate import generate
from memdesigner.engine.settings import Settings
from memdesigner.importers.hf_config import gpt2
from memdesigner.io.design_file import save_design
from memdesigner.model.design import Design

SMALL = {"n_embd": 256, "n_layer": 4, "n_head": 4, "vocab_size": 2048}
# DispatchStorageTracker peaks (live tensor bytes, weights included) of GPT2LMHeadModel(SMALL).generate
MEASURED = [  # (batch, prompt, new, cache, peak)
    (1, 32, 16, "dynamic", 16768024),
    (1, 32, 64, "dynamic", 16768024),
    (1, 128, 16, "dynamic", 19720216),
    (4, 128, 16, "dynamic", 31529008),
    (4, 128, 16, "static", 32020560),
]
LAST_DECODE = [(1, 32, 16, "dynamic", 16232992), (4, 128, 16, "dynamic", 21134416), (4, 128, 16, "static", 20614828)]


def _gen(batch, prompt, new, cache, config=SMALL, **kw):
    d = gpt2.build(config, seq_len=prompt, task="causal-lm")
    return generate(d, Settings(mode="generate", batch=batch, backend="cpu", new_tokens=new, kv_cache=cache, **kw))


def test_gpt2_default_config_has_gpt2_small_parameter_count():
    d = gpt2.build({}, seq_len=8, task="causal-lm")
    rep = estimate(d, mode="inference", backend="cpu")
    assert rep.params == 124_439_808 == gpt2.parameter_count({})  # GPT-2 small, lm_head tied to wte
    assert d.nodes["lm_head"].tied == {"weight": "transformer.wte.weight"}
    assert "transformer.h.11.attn.c_attn" in d.nodes and "transformer.h.11.attn.cache" in d.nodes


def test_gpt2_untied_and_classification_counts():
    assert gpt2.parameter_count({**SMALL, "tie_word_embeddings": False}) == 3_945_984 + 2048 * 256
    d = gpt2.build(SMALL, seq_len=16, task="classification")
    assert estimate(d, mode="inference", backend="cpu").params == 3_945_984 + 2 * 256
    base = gpt2.build(SMALL, seq_len=16, task="base")
    assert "wte" in base.nodes and "h.0.attn.c_attn" in base.nodes


# transformers 5.24 on the meta device: (GPT2LMHeadModel, GPT2ForSequenceClassification)
META_COUNTS = {
    "gpt2-medium": ({"n_embd": 1024, "n_layer": 24, "n_head": 16}, 354_823_168, 354_825_216),
    "gpt2-xl": ({"n_embd": 1600, "n_layer": 48, "n_head": 25}, 1_557_611_200, 1_557_614_400),
    "untied": ({**SMALL, "n_inner": 100, "tie_word_embeddings": False}, 2_574_224, 2_050_448),
}


@pytest.mark.parametrize("name", sorted(META_COUNTS))
def test_gpt2_counts_fixture(name):
    cfg, lm, cls = META_COUNTS[name]
    assert gpt2.parameter_count(cfg) == lm
    assert gpt2.parameter_count(cfg, "classification") == cls
    d = gpt2.build(cfg, seq_len=4, task="classification")
    assert estimate(d, mode="inference", backend="cpu").params == cls


def test_gpt2_counts_match_transformers_on_meta():
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    for cfg in ({}, SMALL, {**SMALL, "n_inner": 100, "tie_word_embeddings": False}):
        with torch.device("meta"):
            m = transformers.GPT2LMHeadModel(transformers.GPT2Config(**cfg))
        n = sum(p.numel() for p in m.parameters())
        assert gpt2.parameter_count(cfg) == n
        d = gpt2.build(cfg, seq_len=8, task="causal-lm")
        assert estimate(d, mode="inference", backend="cpu").params == n
        names = {k for k, _ in m.named_modules()}
        assert {n_ for n_ in d.nodes if "c_attn" in n_ or n_ == "lm_head"} <= names


def test_bad_config_is_one_line():
    with pytest.raises(ValueError, match="n_head"):
        gpt2.build({"n_embd": 100, "n_head": 3}, seq_len=8, task="causal-lm")
    with pytest.raises(ValueError, match="n_positions"):
        gpt2.build(SMALL, seq_len=5000, task="causal-lm")


@pytest.mark.parametrize("batch,prompt,new,cache,peak", MEASURED)
def test_generate_peak_matches_transformers(batch, prompt, new, cache, peak):
    est = _gen(batch, prompt, new, cache).peak_bytes
    assert abs(est - peak) / peak < 0.001


def test_decode_dominated_vocabulary_heavy_and_bf16_generations():
    v8k = {"n_embd": 128, "n_layer": 2, "n_head": 2, "vocab_size": 8192}
    for rep, peak in ((_gen(4, 8, 64, "dynamic"), 18_464_080), (_gen(4, 8, 64, "dynamic", config=v8k), 7_286_128),
                      (_gen(4, 32, 16, "static", dtype="bf16"), 10_107_984)):
        assert abs(rep.peak_bytes - peak) / peak < 0.0005
    assert _gen(4, 8, 64, "dynamic").peak_phase == "decode"


@pytest.mark.parametrize("batch,prompt,new,cache,peak", LAST_DECODE)
def test_last_decode_step_matches_transformers(batch, prompt, new, cache, peak):
    """The decode steps' peaks (the carried cache, ids, mask and logits; dynamic: old and new
    cache of a layer together at its torch.cat)."""
    est = _gen(batch, prompt, new, cache).phase_peaks["decode"]
    assert abs(est - peak) / peak < 0.001


def test_cache_sizes_by_hand():
    # 4 layers x (keys + values) x batch 4 x 256 features x fp32
    per_token = 4 * 2 * 4 * 256 * 4
    dyn = _gen(4, 128, 16, "dynamic")
    assert dyn.generate["kv_cache_bytes"] == per_token * (128 + 15)  # the last token is never fed back
    st = _gen(4, 128, 16, "static")
    assert st.generate["kv_cache_bytes"] == per_token * (128 + 16 - 1)  # max_length - 1 preallocated
    half = _gen(4, 128, 16, "dynamic", kv_dtype="fp16")
    assert half.generate["kv_cache_bytes"] == per_token * 143 // 2
    assert [e.phase for e in dyn.timeline][0] == "prefill" and dyn.timeline[-1].phase == "decode"


def test_dynamic_cat_holds_old_and_new_cache():
    """At the last layer's torch.cat of a decode step the old keys and values, and the new keys,
    are alive together: the decode peak exceeds the end-of-step cache by one layer's old cache."""
    rep = _gen(4, 512, 4, "dynamic")
    ev = max((e for e in rep.timeline if e.phase == "decode"), key=lambda e: e.bytes)
    assert ev.node == "transformer.h.3.attn.cache"


def _llama_like(seq=16, e=64, heads=4, kv_heads=2, vocab=512, layers=2):
    """A hand-built decoder with grouped-query projections, a KVCache per layer and a head."""
    d = Design("llama-like")
    hd = e // heads
    d.add_node("Input", {"shape": (seq,), "dtype": "int64", "vocab": vocab}, id="input_ids")
    d.add_node("Embedding", {"num_embeddings": vocab, "embedding_dim": e}, id="model.embed_tokens")
    d.add_edge("input_ids", "model.embed_tokens")
    x = "model.embed_tokens"
    for i in range(layers):
        p = f"model.layers.{i}.self_attn."
        outs = {}
        for t, n_ in (("q", heads), ("k", kv_heads), ("v", kv_heads)):
            d.add_node("Linear", {"out_features": n_ * hd, "bias": False}, id=p + t + "_proj")
            d.add_edge(x, p + t + "_proj")
            d.add_node("Reshape", {"shape": (-1, n_, hd)}, id=p + t + "_view")
            d.add_edge(p + t + "_proj", p + t + "_view")
            d.add_node("Transpose", {"dim0": 1, "dim1": 2}, id=p + t + "_t")
            d.add_edge(p + t + "_view", p + t + "_t")
            outs[t] = p + t + "_t"
        d.add_node("KVCache", {}, id=p + "cache")
        d.add_edge(outs["k"], p + "cache", 0, 0)
        d.add_edge(outs["v"], p + "cache", 0, 1)
        for j in range(2):  # repeat_kv: expand + reshape copies to the query heads
            d.add_node("Concat", {"dim": 1}, id=p + f"repeat_{j}")
            d.add_edge(p + "cache", p + f"repeat_{j}", j, 0)
            d.add_edge(p + "cache", p + f"repeat_{j}", j, 1)
        d.add_node("ScaledDotProductAttention", {"causal": True}, id=p + "sdpa")
        d.add_edge(outs["q"], p + "sdpa", 0, 0)
        d.add_edge(p + "repeat_0", p + "sdpa", 0, 1)
        d.add_edge(p + "repeat_1", p + "sdpa", 0, 2)
        d.add_node("Transpose", {"dim0": 1, "dim1": 2}, id=p + "t_out")
        d.add_edge(p + "sdpa", p + "t_out")
        d.add_node("Reshape", {"shape": (-1, e)}, id=p + "merge")
        d.add_edge(p + "t_out", p + "merge")
        d.add_node("Linear", {"out_features": e, "bias": False}, id=p + "o_proj")
        d.add_edge(p + "merge", p + "o_proj")
        x = p + "o_proj"
    d.add_node("Linear", {"out_features": vocab, "bias": False}, id="lm_head")
    d.add_edge(x, "lm_head")
    return d


def test_driver_is_generic_over_kvcache_designs():
    d = _llama_like()
    rep = generate(d, Settings(mode="generate", batch=2, backend="cpu", new_tokens=8))
    # 2 layers x (K + V) x batch 2 x 2 kv heads x 16 head dim x fp32, prompt 16 + 7 decoded
    assert rep.generate["kv_cache_bytes"] == 2 * 2 * 2 * 2 * 16 * 4 * 23
    assert rep.generate["steps_simulated"] == list(range(8))
    # the prefill's head sees the last position only (logits_to_keep=1)
    plain = estimate(d, mode="inference", batch=2, backend="cpu")
    assert plain.layers[-1].output_shape == [2, 16, 512]
    st = generate(d, Settings(mode="generate", batch=2, backend="cpu", new_tokens=8, kv_cache="static"))
    assert st.generate["kv_cache_bytes"] == rep.generate["kv_cache_bytes"]
    assert st.peak_bytes != rep.peak_bytes


def test_long_generation_samples_decode_steps_and_keeps_the_last():
    rep = _gen(1, 32, 200, "dynamic")
    ks = rep.generate["steps_simulated"]
    assert ks[0] == 0 and ks[1] == 1 and ks[-1] == 199 and len(ks) == 17
    full = generate(gpt2.build(SMALL, seq_len=32, task="causal-lm"),
                    Settings(mode="generate", batch=1, backend="cpu", new_tokens=200))
    assert full.phase_peaks == rep.phase_peaks


def test_plain_forward_with_use_cache_holds_the_cache():
    from memdesigner.engine.generate import with_cache

    d = gpt2.build(SMALL, seq_len=128, task="causal-lm")
    off = estimate(d, mode="inference", batch=1, backend="cpu").peak_bytes
    on = estimate(with_cache(d), mode="inference", batch=1, backend="cpu").peak_bytes
    assert on - off >= 4 * 2 * 128 * 256 * 4  # every layer's keys and values, kept by the output


def test_settings_and_cli(tmp_path, capsys):
    with pytest.raises(ValueError, match="kv_cache"):
        Settings(mode="generate", kv_cache="paged")
    with pytest.raises(ValueError, match="new_tokens"):
        Settings(mode="generate", new_tokens=0)
    path = tmp_path / "g.json"
    save_design(gpt2.build(SMALL, seq_len=32, task="causal-lm"), path)
    assert main(["estimate", str(path), "--mode", "generate", "--new-tokens", "16", "--backend", "cpu",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["peak_bytes"] == _gen(1, 32, 16, "dynamic").peak_bytes
    assert out["generate"]["kv_cache_bytes"] == 4 * 2 * 256 * 4 * (32 + 15)
    assert main(["estimate", str(path), "--mode", "generate", "--max-context", "--backend", "cpu"]) == 2
    assert "--max-context needs --device" in capsys.readouterr().err
    assert main(["estimate", str(path), "--mode", "generate", "--new-tokens", "4", "--device", "rtx4090",
                 "--max-context"]) == 0
    assert "longest context   1,025 tokens" in capsys.readouterr().out  # 1024 positions: the last token is not fed


def test_generate_without_cache_nodes_is_an_issue(tmp_path, capsys):
    from tests.helpers import sequential

    d = sequential((8,), [("Embedding", {"num_embeddings": 10, "embedding_dim": 4})], dtype="int64")
    rep = estimate(d, mode="generate", backend="cpu")
    assert rep.issues and "KVCache" in str(rep.issues[-1])


@pytest.mark.parametrize("drop,peak", [(0.1, 70_040_280), (0.0, 68_379_864)])
def test_gpt2_training_step_matches_transformers(drop, peak):
    """GPT2LMHeadModel(SMALL) train step (AdamW, batch 2, 64 tokens, CPU) measured with the truth
    harness. With attn_pdrop > 0 sdpa has no fused CPU kernel and runs the math path (kept
    copies of q/k/v, probabilities, dropout noise): the fused rule would be 1.5 % low."""
    cfg = {**SMALL, "attn_pdrop": drop, "resid_pdrop": drop, "embd_pdrop": drop}
    d = gpt2.build(cfg, seq_len=64, task="causal-lm")
    est = estimate(d, mode="train", batch=2, optimizer="adamw", backend="cpu").peak_bytes
    assert -0.0001 < (est - peak) / peak < 0.002


def test_max_batch_and_context_are_exact_on_a_device():
    from memdesigner.engine.devices import Device
    from memdesigner.engine.generate import generate_peak, largest_generate_batch, longest_context

    d = gpt2.build(SMALL, seq_len=64, task="causal-lm")
    s = Settings(mode="generate", new_tokens=16, backend="cuda")
    dev = Device("tiny", "Tiny GPU", "cuda", 40 * 2**20, runtime_overhead_bytes=2**20)
    b = largest_generate_batch(d, s, dev)
    assert b >= 1
    assert generate_peak(d, s.with_(batch=b), dev) <= dev.memory_bytes < generate_peak(d, s.with_(batch=b + 1), dev)
    rep = estimate(d, s.with_(batch=2), device=dev, max_batch=True)
    assert rep.max_batch == b and rep.generate["prompt"] == 64
    ctx = longest_context(d, s.with_(batch=4), dev)
    prompt = ctx - 16

    def peak(p):
        return generate_peak(gpt2.build(SMALL, seq_len=p, task="causal-lm"), s.with_(batch=4), dev)

    assert peak(prompt) <= dev.memory_bytes < peak(prompt + 1)
