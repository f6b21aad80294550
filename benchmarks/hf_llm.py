"""Accuracy of `memdesigner import hf` on small decoder LLM configs: the design built from a
config dict (no transformers) against the truth harness's measurement (shared/truth/measure.py,
method a) of the Hugging Face model built from the same config (random weights, use_cache=False,
attn_implementation the default: sdpa, eager for Gemma2).

Grid per model: inference fp32, full fine-tune with SGD and Adam (fp32) and Adam under bf16
autocast (AMP), at batch 1 and 4. Measuring needs transformers (the benchmark venv); comparing
needs only the stored truths (benchmarks/hf_llm_truth.json):

    PYTHONPATH=. /work/bench-venv/bin/python benchmarks/hf_llm.py --measure   # measure what is missing
    .venv/bin/python benchmarks/hf_llm.py                                    # compare with the truths
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from _tables import OPTIMIZERS, default_truth_dir, mib  # noqa: E402

TRUTH_JSON = HERE / "hf_llm_truth.json"
SEQ = 128
_SMALL = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=2048, max_position_embeddings=512)
CONFIGS = {
    "llama_gqa": dict(model_type="llama", **_SMALL),
    "qwen2_tied": dict(model_type="qwen2", tie_word_embeddings=True, **_SMALL),
    "mistral_window": dict(model_type="mistral", sliding_window=64, **_SMALL),
    "gemma": dict(model_type="gemma", head_dim=64, **_SMALL),
    "phi3": dict(model_type="phi3", pad_token_id=0, **_SMALL),
    "phi3_partial_rope": dict(model_type="phi3", pad_token_id=0, partial_rotary_factor=0.75, **_SMALL),  # Phi-4-mini
    "gemma2": dict(model_type="gemma2", head_dim=64, sliding_window=64, **_SMALL),
}
# (config key, mode, optimizer, amp, batch)
GRID = [(f"{mode}-{opt or 'none'}-{'amp' if amp else 'fp32'}-b{b}", mode, opt, amp, b)
        for b in (1, 4)
        for mode, opt, amp in (("inference", None, False), ("train", "sgd", False), ("train", "adam", False),
                               ("train", "adam", True))]


def hf_factory(name: str):
    def make():
        import transformers

        cfg = dict(CONFIGS[name])
        mt = cfg.pop("model_type")
        c = transformers.AutoConfig.for_model(mt, **cfg)
        c.use_cache = False
        m = transformers.AutoModelForCausalLM.from_config(c)
        m.truth_input = ("tokens", cfg["vocab_size"])
        return m, (SEQ,)

    make.__name__ = name
    return make


def measure_missing(truth: dict, truth_dir: Path, only=None) -> dict:
    sys.path.insert(0, str(truth_dir))
    from measure import measure  # noqa: E402 - the harness lives outside the package

    for name in CONFIGS:
        if only and name not in only:
            continue
        for key, mode, opt, amp, batch in GRID:
            k = f"{name}/{key}"
            if k in truth:
                continue
            try:
                rec = measure(hf_factory(name), batch=batch, mode=mode, optimizer=opt or "sgd", dtype="fp32",
                              amp=amp, methods="a", name=name)
                a = rec["method_a"]
                truth[k] = {"model": name, "config": key, "mode": mode, "optimizer": opt, "amp": amp,
                            "batch": batch, "params": rec["params"], "peak_overall": a["peak_overall"],
                            "peak_contents_top": dict(list(a.get("peak_contents", {}).items())[:12]),
                            "torch": rec["torch"]}
            except Exception as e:  # noqa: BLE001 - recorded, shown in the report
                truth[k] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
            print(k, truth[k].get("peak_overall", truth[k].get("error")), flush=True)
            TRUTH_JSON.write_text(json.dumps(truth, indent=1, sort_keys=True) + "\n")
    return truth


def estimate_rows(truth: dict) -> list:
    import memdesigner
    from memdesigner.importers.hf_config import design_from_config

    rows = []
    for name, cfg in CONFIGS.items():
        design = design_from_config(cfg, seq_len=SEQ)
        for key, mode, opt, amp, batch in GRID:
            rec = truth.get(f"{name}/{key}")
            if rec is None or "error" in rec:
                continue
            rep = memdesigner.estimate(design, mode=mode, batch=batch, optimizer=OPTIMIZERS[opt] if mode == "train"
                                       else "none", dtype="fp32", amp=amp, backend="cpu")
            meas = rec["peak_overall"]
            rows.append({"model": name, "config": key, "params_design": rep.params, "params_module": rec["params"],
                         "measured": meas, "estimated": rep.peak_bytes, "rel": (rep.peak_bytes - meas) / meas})
    return rows


def summary(rows) -> str:
    errs = [abs(r["rel"]) for r in rows]
    worst = max(rows, key=lambda r: abs(r["rel"]))
    under = [r for r in rows if r["rel"] < -0.01]
    return (f"{len(rows)} configurations: median |error| {100 * statistics.median(errs):.2f} %, worst "
            f"{100 * abs(worst['rel']):.2f} % ({worst['model']} {worst['config']}), "
            f"under-estimates beyond 1 %: {len(under)}")


def table(rows) -> str:
    lines = ["| model | config | params design / module | estimated MiB | measured MiB | error % |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        pm = "" if r["params_design"] == r["params_module"] else " ≠"
        lines.append(f"| {r['model']} | {r['config']} | {r['params_design']:,} / {r['params_module']:,}{pm} | "
                     f"{mib(r['estimated'])} | {mib(r['measured'])} | {100 * r['rel']:+.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measure", action="store_true", help="measure the configurations missing from the truth file")
    ap.add_argument("--model", action="append", help="only this model (repeatable)")
    ap.add_argument("--truth-dir", default=None, help="shared/truth folder (default: ../shared/truth)")
    args = ap.parse_args(argv)
    truth = json.loads(TRUTH_JSON.read_text()) if TRUTH_JSON.exists() else {}
    if args.measure:
        truth = measure_missing(truth, Path(args.truth_dir) if args.truth_dir else default_truth_dir(), args.model)
    rows = [r for r in estimate_rows(truth) if not args.model or r["model"] in args.model]
    if not rows:
        print("no measured configurations (run with --measure in the benchmark venv)")
        return 1
    print(table(rows))
    print(summary(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
