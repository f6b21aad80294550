"""Fuzz ``memdesigner import hf`` with mutated Hugging Face config.json files.

Every bad config must give exactly one stderr line and exit 2 (a mutant that is still a model
may import: exit 0), within the time limit: a traceback, a second line, a hang, or a refusal by
the importer's last-resort net ("cannot build this config": a value no check named) is a bug.
Deterministic for a seed; runs in this process through ``memdesigner.cli.main``:

    python benchmarks/fuzz_hf.py [-n 20000] [--seed 7] [--limit 10] [--show 10]

Seeds are resources/examples/hf/*.json cut to 2 layers (an import of 32 layers is 0.2 s; the
layer count itself is a mutation target). Families: ``type_swap`` / ``delete`` / ``numbers``
(fuzz_importers' JSON mutations), ``sizes`` (a key the builders read set to 0, -1, 10^15,
2^63, 1.5, "8", null, true, a list, 10^6 layers ...), ``deep`` (nesting 1,000 to 100,000 deep,
as a value or the whole file), ``bytes`` (fuzz_designs' byte mutations: truncation, UTF-16,
bad bytes, NUL, BOM), ``cli`` (odd --seq-len and --task), and special files (FIFO, /dev/zero).
"""

from __future__ import annotations

import copy
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_designs  # noqa: E402
import fuzz_importers  # noqa: E402
from _fuzz_run import Result, fuzz_main, run_argv  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SEEDS = sorted((ROOT / "resources" / "examples" / "hf").glob("*.json"))
KEYS = ["vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "num_key_value_heads", "head_dim", "rms_norm_eps", "rope_theta", "sliding_window", "max_window_layers",
        "query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping", "partial_rotary_factor",
        "num_local_experts", "num_experts_per_tok", "num_experts", "moe_intermediate_size",
        "shared_expert_intermediate_size", "decoder_sparse_step", "mlp_only_layers", "layer_types", "num_labels",
        "id2label", "hidden_act", "hidden_activation", "rope_scaling", "rope_parameters", "n_embd", "n_layer",
        "n_head", "n_inner", "n_positions", "layer_norm_epsilon", "resid_pdrop", "embd_pdrop", "attn_pdrop",
        "activation_function", "layer_norm_eps", "type_vocab_size", "max_position_embeddings",
        "hidden_dropout_prob", "attention_probs_dropout_prob", "classifier_dropout", "model_type",
        "tie_word_embeddings", "_name_or_path", "use_sliding_window"]
SIZES = [0, -1, -(2**31), 1, 2, 3, 7, 10**6, 10**15, 2**63, 2**64, 10**30, 1.5, -0.5, 0.0, 1e308, 1e-320, "8", "",
         None, True, False, [], [1, 2], {}, {"rope_theta": -1}, {"rope_theta": 0}, "silu", "gelu", "relu",
         ["full_attention"], ["sliding_attention"] * 2, ["x", "y"]]


def seeds() -> list:
    out = []
    for p in SEEDS:
        c = json.loads(p.read_text(encoding="utf-8"))
        for k in ("num_hidden_layers", "n_layer"):
            if k in c:
                c[k] = 2
        if "layer_types" in c and isinstance(c["layer_types"], list):
            c["layer_types"] = c["layer_types"][:2]
        out.append((p.name, c))
    return out


def _deep(rng: random.Random) -> str:
    depth = rng.choice((1000, 5000, 100_000))
    return "[" * depth + "1" + "]" * depth if rng.random() < 0.5 else '{"a":' * depth + "1" + "}" * depth


def _own(obj):
    """A copy sharing nothing with fuzz_importers.WEIRD: a second mutation that edits a value the
    first one inserted must not edit (or make cyclic) the shared list."""
    return json.loads(json.dumps(obj))


def cases(n: int, seed: int):
    """``n`` (family, description, bytes, extra CLI args) cases, the same for the same seed."""
    rng = random.Random(seed)
    base = seeds()
    fams = ("type_swap", "delete", "numbers", "sizes", "sizes", "sizes", "deep", "bytes", "cli", "combined")
    for i in range(n):
        fam = fams[i % len(fams)]
        name, cfg = base[i % len(base)]
        c = json.loads(json.dumps(cfg))
        args: list = []
        what = fam
        if fam in ("type_swap", "delete", "numbers"):
            c = _own(fuzz_importers._mutate_tree(rng, c, fam))
            data = json.dumps(c).encode()
        elif fam == "sizes":
            steps = []
            for _ in range(rng.choice((1, 1, 2))):
                k, v = rng.choice(KEYS), copy.deepcopy(rng.choice(SIZES))
                if isinstance(c, dict):
                    c[k] = v
                steps.append(f"{k}={fuzz_designs._dump(v)[:20].decode(errors='replace')}")
            what = "; ".join(steps)
            data = json.dumps(c).encode()
        elif fam == "deep":
            if rng.random() < 0.3:
                data, what = _deep(rng).encode(), "whole file deep"
            else:
                k = rng.choice(KEYS)
                c[k] = "@@DEEP@@"
                data, what = json.dumps(c).replace('"@@DEEP@@"', _deep(rng)).encode(), f"{k} deep"
        elif fam == "bytes":
            what, data = fuzz_designs._mutate_bytes(rng, json.dumps(c, indent=1).encode())
        elif fam == "cli":
            args = rng.choice([["--seq-len", s] for s in ("0", "-5", "10000000000000", "99999999999999999999", "abc",
                                                          "1", "2147483647", "2147483648")]
                              + [["--task", t] for t in ("classification", "base", "seq2seq", "")])
            what = " ".join(args)
            data = json.dumps(c).encode()
        else:
            for _ in range(rng.randint(2, 4)):
                f = rng.choice(("type_swap", "delete", "numbers"))
                c = _own(fuzz_importers._mutate_tree(rng, c, f))
            if isinstance(c, dict):
                c[rng.choice(KEYS)] = copy.deepcopy(rng.choice(SIZES))  # not shared: later mutants edit it
            data = json.dumps(c).encode()
        yield fam, f"{name}: {what}", data, args


def _net(r: Result) -> Result:
    """A refusal by design_from_config's last-resort net counts as a failure: no check named it."""
    if "cannot build this config" in r.err:
        r.kind = "exit 2, unchecked value (last-resort net)"
    return r


def run(n: int, seed: int, time_limit: float, specials: bool = True, budget: float = 0) -> list:
    """The cases, then the special files; ``budget`` (s, 0: none): stop generating cases then."""
    results = []
    stop = time.perf_counter() + budget if budget else None
    with tempfile.TemporaryDirectory(prefix="memdesigner-fuzz-hf-") as tmp:
        src, out = Path(tmp) / "config.json", Path(tmp) / "out.json"
        for fam, what, data, args in cases(n, seed):
            if stop is not None and time.perf_counter() > stop:
                break
            src.write_bytes(data)
            out.unlink(missing_ok=True)
            results.append(_net(run_argv(["import", "hf", str(src), "-o", str(out), *args], fam, what, time_limit)))
        if specials:
            fifo = Path(tmp) / "fifo.json"
            os.mkfifo(fifo)
            zero = Path(tmp) / "zero.json"
            zero.symlink_to("/dev/zero")
            for p, what in ((fifo, "a FIFO"), (zero, "/dev/zero"), (Path(tmp), "a folder")):
                results.append(run_argv(["import", "hf", str(p), "-o", str(out)], "special files", what, time_limit))
    return results


def main(argv=None) -> int:
    return fuzz_main(__doc__, "import hf", run, seed=7, argv=argv)


if __name__ == "__main__":
    raise SystemExit(main())
