"""Rotary-embedding decoders under transformers 4.57.x and 5.x: imported as a user would
(``memdesigner import torch FILE:make`` on a model file, ``memdesigner import hf`` on the config
with ``--transformers`` set to the major that ran), estimated, against what PyTorch allocated
(../shared/truth/measure.py, method a, CPU).

The decoders are enumerated, not listed: every causal-LM model type of the installed transformers
whose config has grouped-query heads (``num_key_value_heads``) and a rotary base, built from a
shrunk config (random weights) -- those that do not build are listed as such. Each runs inference,
SGD and AdamW training and LoRA (peft, r 8, all linear layers) at batch 2, 64 tokens.

Measuring and importing need the benchmark venvs (transformers 4.57 / 5.x, peft); run once per
venv, resumable (truths and imported designs are cached); the table needs only the cache:

    PYTHONPATH=. /work/venvs/b457/bin/python benchmarks/hf_versions.py --measure
    PYTHONPATH=. /work/venvs/b5/bin/python benchmarks/hf_versions.py --measure
    PYTHONPATH=. .venv/bin/python benchmarks/hf_versions.py          # the table from the cache
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from _tables import default_truth_dir, mib  # noqa: E402

TRUTH_JSON = HERE / "hf_versions_truth.json"
DESIGNS = HERE / "hf_versions_designs"  # the designs `memdesigner import torch` wrote, per version
BATCH, SEQ, VOCAB = 2, 64, 512
# the sizes every config is shrunk to (where it has the field)
SHRINK = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, head_dim=32, vocab_size=VOCAB, max_position_embeddings=256,
              num_local_experts=4, num_experts=4, n_routed_experts=4, num_experts_per_tok=2,
              moe_intermediate_size=64, shared_expert_intermediate_size=128, n_shared_experts=1,
              first_k_dense_replace=1, kv_lora_rank=32, q_lora_rank=48, qk_rope_head_dim=16,
              qk_nope_head_dim=16, v_head_dim=32, n_group=1, topk_group=1, use_cache=False,
              pad_token_id=0, bos_token_id=1, eos_token_id=2)
# (mode, optimizer, lora)
GRID = [("inference", None, False), ("train", "sgd", False), ("train", "adamw", False), ("train", "adamw", True)]
# the model types memdesigner import hf builds (importers/hf_config)
HF_TYPES = ("llama", "mistral", "qwen2", "gemma", "gemma2", "phi3", "mixtral", "qwen2_moe")


def _key(mode, opt, lora) -> str:
    return "lora-adamw" if lora else (mode if mode == "inference" else f"train-{opt}")


FIRST = ("llama", "qwen2", "mistral", "qwen3", "gemma", "gemma2", "phi3", "mixtral", "qwen2_moe", "deepseek_v2",
         "deepseek_v3", "olmo", "granite")  # the families issue 20 names go first when time is short


def candidate_types() -> list:
    """Causal-LM model types whose default config is a rotary GQA decoder (those issue 20 names
    first)."""
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    out = []
    for mt in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        try:
            d = AutoConfig.for_model(mt).to_dict()
        except Exception:  # noqa: BLE001 - a composite config: not a plain decoder
            continue
        rope = any(k in d for k in ("rope_theta", "rope_parameters", "rope_scaling"))
        if "num_key_value_heads" in d and rope:
            out.append(mt)
    return sorted(out, key=lambda mt: (FIRST.index(mt) if mt in FIRST else len(FIRST), mt))


def shrunk_config(mt: str) -> dict:
    from transformers import AutoConfig

    d = AutoConfig.for_model(mt).to_dict()
    kw = {k: v for k, v in SHRINK.items() if k in d}
    if "layer_types" in d:
        kw["layer_types"] = None  # recomputed for the shrunk depth
    return kw


MODEL_FILE = '''"""A user's model file: {mt} from a shrunk config (benchmarks/hf_versions.py)."""
from transformers import AutoConfig, AutoModelForCausalLM

CONFIG = {cfg!r}


def make():
    c = AutoConfig.for_model({mt!r}, **CONFIG)
    c.use_cache = False
    return AutoModelForCausalLM.from_config(c)
'''


def model_file(mt: str, folder: Path) -> Path:
    p = folder / f"model_{mt}.py"
    p.write_text(MODEL_FILE.format(mt=mt, cfg=shrunk_config(mt)))
    return p


def factory(mt: str, lora: bool):
    def make():
        import transformers

        c = transformers.AutoConfig.for_model(mt, **shrunk_config(mt))
        c.use_cache = False
        m = transformers.AutoModelForCausalLM.from_config(c)
        if lora:
            from peft import LoraConfig, get_peft_model

            m = get_peft_model(m, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules="all-linear"))
        m.truth_input = ("tokens", VOCAB)
        return m, (SEQ,)

    make.__name__ = f"{mt}{'_lora' if lora else ''}"
    return make


def versions() -> str:
    import transformers

    return transformers.__version__


def measure_and_import(truth: dict, only, truth_dir: Path, limit: int, budget_s: float, reimport=False) -> dict:
    import torch

    sys.path.insert(0, str(truth_dir))
    from measure import measure  # noqa: E402 - the harness lives outside the package

    tv = versions()
    folder = DESIGNS / tv
    folder.mkdir(parents=True, exist_ok=True)
    types = [mt for mt in candidate_types() if not only or mt in only][:limit]
    t_end = time.monotonic() + budget_s
    for mt in types:
        if time.monotonic() > t_end:
            print(f"time budget spent before {mt}", flush=True)
            break
        base = f"{tv}/{mt}"
        meta = truth.setdefault(base, {"model_type": mt, "transformers": tv, "torch": torch.__version__})
        if reimport and "build_error" not in meta:
            meta.pop("import_torch", None)
        if "import_torch" not in meta:
            design = folder / f"{mt}.json"
            try:
                src = model_file(mt, folder)
                meta["config"] = shrunk_config(mt)
            except Exception as err:  # noqa: BLE001 - the config does not shrink: says so
                meta["build_error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"
                meta["import_torch"] = "not built"
                _save(truth)
                continue
            t0 = time.perf_counter()
            r = subprocess.run([sys.executable, "-m", "memdesigner.cli", "import", "torch", f"{src}:make",
                                "--input-shape", str(SEQ), "--input-dtype", "int64", "-o", str(design)],
                               capture_output=True, text=True, cwd=REPO, timeout=900)
            meta["import_torch"] = "ok" if r.returncode == 0 else (r.stderr.strip().splitlines() or ["?"])[-1][:300]
            meta["import_seconds"] = round(time.perf_counter() - t0, 1)
            _save(truth)
            print(base, "import torch:", meta["import_torch"], flush=True)
        if "build_error" in meta:
            continue
        for mode, opt, lora in GRID:
            k = f"{base}/{_key(mode, opt, lora)}"
            if k in truth:
                continue
            try:
                rec = measure(factory(mt, lora), batch=BATCH, mode=mode, optimizer=opt or "sgd", dtype="fp32",
                              methods="a", name=k)
                truth[k] = {"peak_overall": rec["method_a"]["peak_overall"], "params": rec["params"]}
            except Exception as err:  # noqa: BLE001 - recorded, shown in the table
                truth[k] = {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"}
            print(k, truth[k].get("peak_overall", truth[k].get("error")), flush=True)
            _save(truth)
    return truth


def _save(truth: dict) -> None:
    tmp = TRUTH_JSON.with_suffix(".tmp")
    tmp.write_text(json.dumps(dict(sorted(truth.items())), indent=1) + "\n")
    tmp.replace(TRUTH_JSON)


def settings(mode, opt, lora):
    from memdesigner.engine.settings import Settings

    kw = dict(lora_r=8, lora_alpha=16, lora_dropout=0.0) if lora else {}
    return Settings(mode=mode, batch=BATCH, optimizer=opt or "none", dtype="fp32", backend="cpu", **kw)


def rows(truth: dict) -> list:
    import memdesigner
    from memdesigner.importers.hf_config import design_from_config
    from memdesigner.io.design_file import load_design

    out = []
    for base, meta in sorted(truth.items()):
        if base.count("/") != 1:
            continue
        tv, mt = meta["transformers"], meta["model_type"]
        designs = {}
        if meta.get("import_torch") == "ok" and (DESIGNS / tv / f"{mt}.json").exists():
            designs["torch"] = load_design(str(DESIGNS / tv / f"{mt}.json"))
        elif meta.get("import_torch") == "ok":  # (the imported designs are not committed: --measure --reimport)
            meta = dict(meta, import_torch="not imported in this checkout (run --measure --reimport)")
        if mt in HF_TYPES:
            cfg = dict(_config_of(truth, tv, mt), model_type=mt)
            designs["hf"] = design_from_config(cfg, seq_len=SEQ, transformers_major=int(tv.split(".")[0]))
        for mode, opt, lora in GRID:
            rec = truth.get(f"{base}/{_key(mode, opt, lora)}")
            if rec is None or "error" in rec:
                continue
            for src in ("torch", "hf"):
                row = {"version": tv, "model": mt, "config": _key(mode, opt, lora), "source": src,
                       "measured": rec["peak_overall"]}
                if src == "torch" and meta.get("import_torch") != "ok":
                    row["failed"] = meta.get("import_torch", "not imported")
                    out.append(row)
                    continue
                if src not in designs:
                    continue
                rep = memdesigner.estimate(designs[src], settings(mode, opt, lora))
                if rep.issues:
                    row["failed"] = f"estimate: {rep.issues[0]}"
                else:
                    row["estimated"] = rep.peak_bytes
                    row["rel"] = (rep.peak_bytes - rec["peak_overall"]) / rec["peak_overall"]
                out.append(row)
    return out


def _config_of(truth: dict, tv: str, mt: str) -> dict:
    """The shrunk config the model of that version was built from (stored with its truths)."""
    return dict(truth[f"{tv}/{mt}"]["config"])


def summary_table(rs: list) -> str:
    lines = ["| transformers | import | configurations | imported | median abs % | worst % | under > 1 % |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for tv in sorted({r["version"] for r in rs}):
        for src in ("torch", "hf"):
            sel = [r for r in rs if r["version"] == tv and r["source"] == src]
            if not sel:
                continue
            ok = [r for r in sel if "rel" in r]
            errs = [abs(r["rel"]) for r in ok]
            worst = max(ok, key=lambda r: abs(r["rel"])) if ok else None
            under = [r for r in ok if r["rel"] < -0.01]
            lines.append(f"| {tv} | {src} | {len(sel)} | {100 * len(ok) / len(sel):.0f} % | "
                         f"{100 * statistics.median(errs):.2f} | " if ok else f"| {tv} | {src} | {len(sel)} | 0 % | - | ")
            if ok:
                lines[-1] += (f"{100 * worst['rel']:+.2f} ({worst['model']} {worst['config']}) | {len(under)} |")
            else:
                lines[-1] += "- | - |"
    return "\n".join(lines)


def detail_table(rs: list) -> str:
    lines = ["| transformers | model | config | import | estimated MiB | measured MiB | error % |",
             "|---|---|---|---|---:|---:|---:|"]
    for r in rs:
        if "rel" in r:
            lines.append(f"| {r['version']} | {r['model']} | {r['config']} | {r['source']} | {mib(r['estimated'])} | "
                         f"{mib(r['measured'])} | {100 * r['rel']:+.2f} |")
        else:
            lines.append(f"| {r['version']} | {r['model']} | {r['config']} | {r['source']} | failed: "
                         f"{r['failed'][:120]} | {mib(r['measured'])} | - |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measure", action="store_true", help="measure and import what is missing (benchmark venv)")
    ap.add_argument("--model", action="append", help="only this model type (repeatable)")
    ap.add_argument("--limit", type=int, default=1000, help="at most this many model types")
    ap.add_argument("--budget-s", type=float, default=540.0, help="stop starting models after this many seconds")
    ap.add_argument("--truth-dir", default=None, help="shared/truth folder (default: ../shared/truth)")
    ap.add_argument("--details", action="store_true", help="one row per configuration")
    ap.add_argument("--reimport", action="store_true", help="import every model again (after an importer change)")
    args = ap.parse_args(argv)
    truth = json.loads(TRUTH_JSON.read_text()) if TRUTH_JSON.exists() else {}
    if args.measure:
        truth = measure_and_import(truth, args.model, Path(args.truth_dir) if args.truth_dir else default_truth_dir(),
                                   args.limit, args.budget_s, args.reimport)
    rs = [r for r in rows(truth) if not args.model or r["model"] in args.model]
    if not rs:
        print("nothing measured yet (run with --measure in a benchmark venv)")
        return 1
    if args.details:
        print(detail_table(rs))
    print(summary_table(rs))
    failed = sorted({(r["version"], r["model"], r["failed"]) for r in rs if "failed" in r})
    for tv, mt, why in failed:
        print(f"not imported: {tv} {mt}: {why}")
    for meta in truth.values():
        if isinstance(meta, dict) and "build_error" in meta:
            print(f"does not build from a shrunk config: {meta['transformers']} {meta['model_type']}: "
                  f"{meta['build_error']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
