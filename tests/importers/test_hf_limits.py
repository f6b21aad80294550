"""Hugging Face configs at the edge (issue 22): every size a builder uses is checked (positive,
bounded, divisible where it must be) and named in one line; the layer count is refused before
any layer is built; absurd nesting and special files are one line. A fixed sample of
benchmarks/fuzz_hf.py runs here too."""

import json
import os
import subprocess
import sys
import time

import pytest
from helpers import ROOT

from memdesigner.cli import main
from memdesigner.importers.hf_config import HfConfigError, design_from_config, load_config

sys.path.insert(0, str(ROOT / "benchmarks"))
import fuzz_hf  # noqa: E402
from _fuzz_run import good, run_argv  # noqa: E402

EX = ROOT / "resources" / "examples" / "hf"


def _cfg(name, **over):
    c = json.loads((EX / name).read_text())
    c.update(over)
    return c


@pytest.mark.parametrize("name,over,msg", [
    # the tracebacks
    ("llama-3-8b.json", {"num_key_value_heads": 0}, "num_key_value_heads: 0 is not a positive integer"),
    ("bert-base-uncased.json", {"num_attention_heads": 0}, "num_attention_heads: 0 is not a positive integer"),
    ("gemma-2-2b.json", {"query_pre_attn_scalar": -1}, "query_pre_attn_scalar: -1 is not a finite number above 0"),
    ("gemma-2-2b.json", {"query_pre_attn_scalar": 0}, "query_pre_attn_scalar: 0 is not a finite number above 0"),
    ("llama-3-8b.json", {"num_hidden_layers": 10**15}, "num_hidden_layers: 1,000,000,000,000,000 is too large"),
    ("gpt2.json", {"n_layer": 2**63}, "n_layer: 9,223,372,036,854,775,808 is too large"),
    # sizes accepted silently before
    ("llama-3-8b.json", {"hidden_size": 4095}, "num_attention_heads: 32 does not divide hidden_size 4095"),
    ("llama-3-8b.json", {"rms_norm_eps": -1e-5}, "rms_norm_eps: -1e-05 is not a finite number at least 0"),
    ("llama-3-8b.json", {"rope_theta": 0}, "rope_theta: 0 is not a finite number above 0"),
    ("mistral-7b.json", {"sliding_window": -4}, "sliding_window: -4 is not a positive integer"),
    ("phi-3-mini-4k.json", {"partial_rotary_factor": 1.5}, "partial_rotary_factor: 1.5 is not a finite number"),
    ("mixtral-8x7b.json", {"num_experts_per_tok": 9}, "num_experts_per_tok: 9 is more than num_local_experts 8"),
    ("mixtral-8x7b.json", {"num_local_experts": 2**31 - 1}, "num_local_experts: 2,147,483,647 is too large"),
    ("llama-3-8b.json", {"hidden_act": ["silu"]}, "hidden_act: a list is not a string"),
    ("gemma-2-2b.json", {"layer_types": ["full_attention"]}, "layer_types: a list is not a list of num_hidden_layers"),
    ("bert-base-uncased.json", {"type_vocab_size": 0}, "type_vocab_size: 0 is not a positive integer"),
    ("bert-base-uncased.json", {"hidden_dropout_prob": 2}, "hidden_dropout_prob: 2 is not a finite number at least"),
    ("gpt2.json", {"n_inner": -1}, "n_inner: -1 is not a positive integer"),
    ("gpt2.json", {"resid_pdrop": float("nan")}, "resid_pdrop: nan is not a finite number"),
    ("gpt2.json", {"activation_function": {"a": 1}}, "activation_function: a JSON object is not a string"),
])
def test_each_bad_value_is_named(name, over, msg):
    t = time.perf_counter()
    with pytest.raises(HfConfigError, match=msg.replace("(", r"\(").replace(".", r"\.")):
        design_from_config(_cfg(name, **over), seq_len=64)
    assert time.perf_counter() - t < 1.0


def test_qwen2_moe_sparse_step_zero_is_named():
    c = {"model_type": "qwen2_moe", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 4, "num_key_value_heads": 4, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
         "shared_expert_intermediate_size": 64, "vocab_size": 100}
    assert design_from_config(c, seq_len=8)  # the control: valid
    with pytest.raises(HfConfigError, match="decoder_sparse_step: 0 is not a positive integer"):
        design_from_config(dict(c, decoder_sparse_step=0), seq_len=8)  # was ZeroDivisionError


def test_layer_limit_comes_before_building(monkeypatch):
    c = _cfg("llama-3-8b.json", num_hidden_layers=40)
    monkeypatch.setenv("MEMDESIGNER_MAX_HF_LAYERS", "32")
    with pytest.raises(HfConfigError, match="num_hidden_layers: 40 is too large .*limit is 32.*MEMDESIGNER_MAX_HF_LAYERS"):
        design_from_config(c, seq_len=16)
    monkeypatch.setenv("MEMDESIGNER_MAX_HF_LAYERS", "40")
    d = design_from_config(c, seq_len=16)
    assert d.blocks and next(iter(d.blocks.values())) is not None


def test_a_million_layers_is_refused_fast_and_small(tmp_path):
    """10^6 layers ran over 60 s at 3.3 GB: now one line, in under a second and 200 MB (a child
    process, so that its peak RSS is its own)."""
    p = tmp_path / "config.json"
    p.write_text(json.dumps(_cfg("llama-3-8b.json", num_hidden_layers=10**6)))
    # VmHWM, not ru_maxrss: Linux keeps the forking parent's high-water mark in ru_maxrss across exec
    # (a pytest process that ran the GUI tests first is over 200 MB itself)
    code = ("import time, sys; from memdesigner.cli import main; t = time.perf_counter(); "
            f"rc = main(['import', 'hf', {str(p)!r}, '-o', {str(tmp_path / 'o.json')!r}]); "
            "hwm = next(ln.split()[1] for ln in open('/proc/self/status') if ln.startswith('VmHWM')); "
            "print(rc, time.perf_counter() - t, hwm)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    rc, dt, rss_kb = r.stdout.split()
    assert rc == "2" and r.stderr.count("\n") == 1 and "num_hidden_layers: 1,000,000 is too large" in r.stderr
    assert float(dt) < 1.0 and int(rss_kb) < 200 * 1024


def test_deep_and_special_files_are_one_line(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    with pytest.raises(HfConfigError, match="nested too deeply"):
        load_config(deep)  # was RecursionError
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    for p in (fifo, zero, tmp_path):
        t = time.perf_counter()
        assert main(["import", "hf", str(p), "-o", str(tmp_path / "o.json")]) == 2
        assert time.perf_counter() - t < 1.0
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "cannot read" in err


def test_fuzz_sample(tmp_path):
    """60 cases of benchmarks/fuzz_hf.py (every family), none refused by the last-resort net."""
    src, out = tmp_path / "config.json", tmp_path / "o.json"
    bad = []
    for fam, what, data, args in fuzz_hf.cases(60, seed=7):
        src.write_bytes(data)
        out.unlink(missing_ok=True)
        r = fuzz_hf._net(run_argv(["import", "hf", str(src), "-o", str(out), *args], fam, what, time_limit=20))
        if not good(r):
            bad.append(f"{what}: {r.kind} {r.err[-200:]!r}")
    assert not bad, bad
