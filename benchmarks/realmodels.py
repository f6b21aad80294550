"""Real-model accuracy check: torchvision, Hugging Face transformers and nanoGPT as published
(benchmarks/realmodels_models.py), imported with memdesigner's PyTorch importer and estimated,
against the truth harness's measurement (shared/truth/measure.py, method a).

Grid per model: inference fp32 batch 2, training with SGD and with Adam (fp32, batch 2), and Adam
under bf16 autocast (AMP, batch 2). Needs torchvision and transformers, so it runs in the
benchmark venv, not the test environment:

    /work/bench-venv/bin/python benchmarks/realmodels.py --measure     # measure what is missing into
                                                                       # benchmarks/realmodels_truth.json
    /work/bench-venv/bin/python benchmarks/realmodels.py               # compare with the stored truths
    /work/bench-venv/bin/python benchmarks/realmodels.py --model swin_t --json out.json
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from _tables import OPTIMIZERS, accuracy_summary, measured_models_main, mib  # noqa: E402

TRUTH_JSON = HERE / "realmodels_truth.json"

# (config key, mode, optimizer, amp, batch)
GRID = [
    ("inference-fp32-b2", "inference", None, False, 2),
    ("train-sgd-fp32-b2", "train", "sgd", False, 2),
    ("train-adam-fp32-b2", "train", "adam", False, 2),
    ("train-adam-amp-b2", "train", "adam", True, 2),
]


def load_truth(path: Path = TRUTH_JSON) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def measure_one(factory, name, cfg, truth_dir: Path) -> dict:
    if str(truth_dir) not in sys.path:
        sys.path.insert(0, str(truth_dir))
    from measure import measure  # noqa: E402 - the harness lives outside the package

    key, mode, opt, amp, batch = cfg
    rec = measure(factory, batch=batch, mode=mode, optimizer=opt or "sgd", dtype="fp32", amp=amp, methods="a",
                  name=name)
    a = rec["method_a"]
    return {"model": name, "config": key, "mode": mode, "optimizer": opt, "amp": amp, "batch": batch,
            "params": rec["params"], "peak_overall": a["peak_overall"], "steady": a["steady"],
            "peak_contents_top": dict(list(a.get("peak_contents", {}).items())[:12]),
            "seconds": round(rec["seconds"], 2), "torch": rec["torch"]}


def measure_all(models, truth_dir, out: Path, remeasure=False) -> dict:
    import realmodels_models as rm

    data = load_truth(out)
    for name in models:
        for cfg in GRID:
            k = f"{name}/{cfg[0]}"
            if k in data and not remeasure:
                continue
            t0 = time.perf_counter()
            try:
                data[k] = measure_one(rm.MODELS[name], name, cfg, truth_dir)
            except Exception as err:  # noqa: BLE001 - record the failure and go on
                data[k] = {"model": name, "config": cfg[0], "error": f"{type(err).__name__}: {err}"}
            print(f"measured {k}: {data[k].get('peak_overall', data[k].get('error'))} "
                  f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
            out.write_text(json.dumps(dict(sorted(data.items())), indent=1) + "\n")
    return data


def import_model(name):
    """(design, module parameter count, None) or (None, None, error)."""
    import realmodels_models as rm

    from memdesigner.importers import torch_fx

    try:
        if hasattr(torch_fx, "build_module"):
            module, shape = torch_fx.build_module(rm.MODELS[name])
        else:  # an older memdesigner (the "before" column): the meta device only
            import torch

            with torch.device("meta"):
                module, shape = rm.MODELS[name]()
        from_module = torch_fx.from_module
        n = sum(p.numel() for p in module.parameters())
        return from_module(module, shape, name=name), n, None
    except Exception as err:  # noqa: BLE001 - a benchmark reports and goes on
        return None, None, f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"


def estimate_row(design, n_params, rec) -> dict:
    import memdesigner

    mode = rec["mode"]
    opt = OPTIMIZERS.get(rec.get("optimizer")) if mode == "train" else "none"
    rep = memdesigner.estimate(design, mode=mode, batch=int(rec["batch"]), optimizer=opt, dtype="fp32",
                               amp=bool(rec.get("amp")), backend="cpu")
    meas, est = rec["peak_overall"], rep.peak_bytes
    return {"model": rec["model"], "config": rec["config"], "params_design": rep.params,
            "params_module": n_params, "measured_bytes": meas, "estimated_bytes": est,
            "rel_error": (est - meas) / meas if meas else 0.0, "peak_phase": rep.peak_phase,
            "peak_layer": rep.peak_layer,
            "unruled_ops": len(getattr(rep, "unruled_ops", ()) or ())}


def run(models, truth):
    rows, info = [], {"import_failures": {}, "generic": {}, "missing": [], "measure_failures": {}}
    for name in models:
        design, n, err = import_model(name)
        if design is None:
            info["import_failures"][name] = err
            continue
        gen = [f"{x.id} ({x.props.get('op')})" for x in design.nodes.values() if x.type == "Generic"]
        if gen:
            info["generic"][name] = gen
        for cfg in GRID:
            rec = truth.get(f"{name}/{cfg[0]}")
            if rec is None:
                info["missing"].append(f"{name}/{cfg[0]}")
            elif "error" in rec:
                info["measure_failures"][f"{name}/{cfg[0]}"] = rec["error"]
            else:
                rows.append(estimate_row(design, n, rec))
    return rows, info


def table(rows) -> str:
    lines = ["| model | config | params design / module | estimated MiB | measured MiB | error % |",
             "|---|---|---|---:|---:|---:|"]
    for r in rows:
        pm = "" if r["params_design"] == r["params_module"] else " ≠"
        lines.append(f"| {r['model']} | {r['config']} | {r['params_design']:,} / {r['params_module']:,}{pm} | "
                     f"{mib(r['estimated_bytes'])} | {mib(r['measured_bytes'])} | {100 * r['rel_error']:+.2f} |")
    return "\n".join(lines)


def summary(rows, info) -> str:
    return accuracy_summary(rows, info, "configurations", lambda r: f"{r['model']}/{r['config']}")


def main(argv=None) -> int:
    import realmodels_models as rm

    return measured_models_main(argv, __doc__, TRUTH_JSON, rm.MODELS, load_truth, measure_all, run, table, summary)


if __name__ == "__main__":
    sys.exit(main())
