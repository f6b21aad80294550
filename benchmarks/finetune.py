"""Fine-tuning accuracy: full fine-tune, LoRA (peft) and frozen parts of small Hugging Face
models (benchmarks/finetune_models.py), measured with the truth harness (shared/truth/measure.py,
method a) against memdesigner's estimate of the plain model imported with the PyTorch importer
and the same setup given as settings (lora_r / lora_targets / freeze).

    /work/bench-venv/bin/python benchmarks/finetune.py --measure   # measure what is missing
    /work/bench-venv/bin/python benchmarks/finetune.py             # compare with the stored truths
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from _tables import default_truth_dir, mib  # noqa: E402

TRUTH_JSON = HERE / "finetune_truth.json"
BATCH = 2
# (config key, optimizer, amp)
GRID = [("adam-fp32", "adam", False), ("adamw-amp", "adamw", True)]


def load_truth(path: Path = TRUTH_JSON) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def measure_all(archs, setups, truth_dir: Path, out: Path, remeasure=False) -> dict:
    import finetune_models as fm

    sys.path.insert(0, str(truth_dir))
    from measure import measure  # noqa: E402 - the harness lives outside the package

    data = load_truth(out)
    for arch in archs:
        for setup in setups:
            for key, opt, amp in GRID:
                k = f"{arch}/{setup}/{key}"
                if k in data and not remeasure:
                    continue
                t0 = time.perf_counter()
                try:
                    make = fm.factory(arch, setup)
                    rec = measure(make, batch=BATCH, mode="train", optimizer=opt, dtype="fp32", amp=amp,
                                  methods="a", name=k)
                    m, _ = make()
                    a = rec["method_a"]
                    data[k] = {"arch": arch, "setup": setup, "config": key, "optimizer": opt, "amp": amp,
                               "batch": BATCH, "seq": fm.SEQ, "params": rec["params"],
                               "trainable_params": sum(q.numel() for q in m.parameters() if q.requires_grad),
                               "peak_overall": a["peak_overall"], "steady": a["steady"],
                               "peak_contents_top": dict(list(a.get("peak_contents", {}).items())[:12]),
                               "seconds": round(rec["seconds"], 2), "torch": rec["torch"]}
                except Exception as err:  # noqa: BLE001 - record the failure and go on
                    data[k] = {"arch": arch, "setup": setup, "config": key, "error": f"{type(err).__name__}: {err}"}
                print(f"measured {k}: {data[k].get('peak_overall', data[k].get('error'))} "
                      f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
                out.write_text(json.dumps(dict(sorted(data.items())), indent=1) + "\n")
    return data


def settings_for(arch: str, setup: str, opt: str, amp: bool):
    import finetune_models as fm

    from memdesigner.engine.settings import Settings

    kind = fm.SETUPS[setup]
    kw = {"checkpoint_layers": True} if kind[-1] == "gc" else {}
    if kind[0] == "freeze":
        kw["freeze"] = fm.freeze_prefixes(arch)
    elif kind[0] == "lora":
        _, r, targets, drop = kind[:4]
        kw.update(lora_r=r, lora_alpha=16, lora_dropout=drop, lora_targets=fm.targets_for(arch, targets) or ())
    return Settings(mode="train", batch=BATCH, optimizer=opt, dtype="fp32", amp=amp, backend="cpu", **kw)


def import_arch(arch: str, source: str = "torch"):
    """The design: ``hf`` from the config (memdesigner import hf, as users build LLM designs),
    ``torch`` with the PyTorch importer from the module."""
    import finetune_models as fm

    from memdesigner.importers import torch_fx

    if source == "hf":
        from memdesigner.importers.hf_config import design_from_config

        _cls, _cfg, cfg = fm.ARCHS[arch]
        mt = {"LlamaConfig": "llama", "Qwen2Config": "qwen2", "GPT2Config": "gpt2"}[_cfg]
        return design_from_config(dict(cfg, model_type=mt), seq_len=fm.SEQ)

    def make():
        m = fm.base_model(arch)
        m.truth_input = ("tokens", fm.VOCAB)
        return m, (fm.SEQ,)

    module, shape = torch_fx.build_module(make)
    return torch_fx.from_module(module, shape, name=arch)


def run(truth: dict, archs, source: str = "torch") -> list:
    import memdesigner

    rows = []
    for arch in archs:
        design = import_arch(arch, source)
        for k, rec in sorted(truth.items()):
            if rec.get("arch") != arch or "error" in rec:
                continue
            s = settings_for(arch, rec["setup"], rec["optimizer"], rec["amp"])
            rep = memdesigner.estimate(design, s)
            meas, est = rec["peak_overall"], rep.peak_bytes
            tp = rep.trainable_params if rep.trainable_params is not None else rep.params
            rows.append({"key": k, "arch": arch, "setup": rec["setup"], "config": rec["config"],
                         "trainable_est": tp, "trainable_meas": rec["trainable_params"],
                         "measured_bytes": meas, "estimated_bytes": est, "rel_error": (est - meas) / meas})
    return rows


def table(rows) -> str:
    lines = ["| model | setup | config | trainable params est / peft | estimated MiB | measured MiB | error % |",
             "|---|---|---|---:|---:|---:|---:|"]
    for r in rows:
        ne = "" if r["trainable_est"] == r["trainable_meas"] else " ≠"
        lines.append(f"| {r['arch']} | {r['setup']} | {r['config']} | {r['trainable_est']:,} / "
                     f"{r['trainable_meas']:,}{ne} | {mib(r['estimated_bytes'])} | {mib(r['measured_bytes'])} | "
                     f"{100 * r['rel_error']:+.2f} |")
    return "\n".join(lines)


def summary(rows) -> str:
    if not rows:
        return "no measured configurations (run with --measure)"
    errs = [abs(r["rel_error"]) for r in rows]
    worst = max(rows, key=lambda r: abs(r["rel_error"]))
    return (f"configurations: {len(rows)}  median |err| {100 * statistics.median(errs):.2f} %  "
            f"worst |err| {100 * max(errs):.2f} % ({worst['key']})  within 1 %: {sum(e <= 0.01 for e in errs)}  "
            f"within 3 %: {sum(e <= 0.03 for e in errs)}  trainable counts wrong: "
            f"{sum(r['trainable_est'] != r['trainable_meas'] for r in rows)}")


def main(argv=None) -> int:
    import finetune_models as fm

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--measure", action="store_true")
    ap.add_argument("--remeasure", action="store_true")
    ap.add_argument("--truth-dir", default=None)
    ap.add_argument("--truth-json", default=str(TRUTH_JSON))
    ap.add_argument("--arch", action="append", choices=sorted(fm.ARCHS))
    ap.add_argument("--setup", action="append", choices=sorted(fm.SETUPS))
    ap.add_argument("--json", default=None)
    ap.add_argument("--source", choices=("torch", "hf"), default="torch",
                    help="build the designs with the PyTorch importer (torch) or from the config (hf)")
    args = ap.parse_args(argv)
    archs = args.arch or list(fm.ARCHS)
    setups = args.setup or list(fm.SETUPS)
    tj = Path(args.truth_json)
    if args.measure or args.remeasure:
        truth_dir = Path(args.truth_dir) if args.truth_dir else default_truth_dir()
        measure_all(archs, setups, truth_dir, tj, args.remeasure)
    truth = {k: v for k, v in load_truth(tj).items() if v.get("setup") in setups}
    rows = run(truth, archs, args.source)
    print(table(rows))
    print()
    print(summary(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
