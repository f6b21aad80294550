"""BERT built from a config (memdesigner/importers/hf_config/bert.py) against transformers'
BertModel / BertForSequenceClassification / BertForMaskedLM measured with the truth harness
(shared/truth/measure.py, method a): fp32 on the CPU, inference and Adam training (dropout 0.1,
attention dropout 0.1 in train mode, as BertConfig's defaults), random weights, token ids.

    PYTHONPATH=. /work/bench-venv/bin/python benchmarks/hf_bert.py --measure   # -> benchmarks/hf_bert_truth.json
    PYTHONPATH=. /work/bench-venv/bin/python benchmarks/hf_bert.py             # compare (no transformers needed)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

TRUTH_JSON = HERE / "hf_bert_truth.json"
TRUTH_DIR = Path("/work/shared/truth")

SMALL = dict(vocab_size=512, hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
             max_position_embeddings=128)
WIDE = dict(vocab_size=1000, hidden_size=96, num_hidden_layers=3, num_attention_heads=3, intermediate_size=384,
            max_position_embeddings=96, type_vocab_size=1)
# name -> (config, task, seq_len)
CASES = {
    "bert_base_small": (SMALL, "base", 32),
    "bert_cls_small": (SMALL, "classification", 32),
    "bert_mlm_small": (SMALL, "causal-lm", 32),
    "bert_base_wide_t64": (WIDE, "base", 64),
    "bert_mlm_wide_t48": (WIDE, "causal-lm", 48),
}
CLASSES = {"base": "BertModel", "classification": "BertForSequenceClassification", "causal-lm": "BertForMaskedLM"}
# (key, mode, optimizer, batch)
GRID = [("inference-b2", "inference", None, 2), ("train-adam-b2", "train", "adam", 2),
        ("inference-b4", "inference", None, 4), ("train-adam-b4", "train", "adam", 4)]


def factory_for(name: str):
    def make():
        import transformers

        cfg, task, t = CASES[name]
        m = getattr(transformers, CLASSES[task])(transformers.BertConfig(**cfg))
        m.truth_input = ("tokens", cfg["vocab_size"])
        return m, (t,)
    make.__name__ = name
    return make


def design_for(name: str):
    from memdesigner.importers.hf_config import bert

    cfg, task, t = CASES[name]
    return bert.build(cfg, seq_len=t, task=task)


def measure_all(out: Path) -> dict:
    sys.path.insert(0, str(TRUTH_DIR))
    from measure import measure

    truth = json.loads(out.read_text()) if out.exists() else {}
    for name in CASES:
        for key, mode, opt, batch in GRID:
            k = f"{name}/{key}"
            rec = measure(factory_for(name), batch=batch, mode=mode, optimizer=opt or "sgd", dtype="fp32",
                          methods="a", name=k)
            a = rec["method_a"]
            truth[k] = {"params": rec["params"], "peak_overall": a["peak_overall"], "steady": a["steady"],
                        "torch": rec["torch"]}
            print(k, rec["params"], a["peak_overall"], flush=True)
    import transformers
    truth["_meta"] = {"transformers": transformers.__version__}
    out.write_text(json.dumps(truth, indent=1, sort_keys=True) + "\n")
    return truth


def compare(truth: dict) -> list:
    import memdesigner
    from memdesigner.engine.settings import Settings

    rows = []
    for name in CASES:
        d = design_for(name)
        for key, mode, opt, batch in GRID:
            rec = truth.get(f"{name}/{key}")
            if rec is None:
                continue
            est = memdesigner.estimate(d, Settings(backend="cpu", batch=batch, mode=mode, optimizer=opt or "none"))
            rows.append({"case": f"{name}/{key}", "measured": rec["peak_overall"], "estimate": est.peak_bytes,
                         "error": (est.peak_bytes - rec["peak_overall"]) / rec["peak_overall"],
                         "params": rec["params"], "design_params": est.params})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measure", action="store_true", help="measure with transformers into the truth JSON")
    args = ap.parse_args(argv)
    truth = measure_all(TRUTH_JSON) if args.measure else json.loads(TRUTH_JSON.read_text())
    rows = compare(truth)
    print(f"{'case':34s} {'measured':>10s} {'estimate':>10s} {'error':>8s}  params")
    for r in rows:
        same = "" if r["params"] == r["design_params"] else f" (design {r['design_params']})"
        print(f"{r['case']:34s} {r['measured']:10d} {r['estimate']:10d} {r['error'] * 100:7.2f}%  {r['params']}{same}")
    errs = [abs(r["error"]) for r in rows]
    print(f"median |error| {statistics.median(errs) * 100:.2f}%, worst {max(errs) * 100:.2f}% over {len(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
