"""Holdout accuracy check: memdesigner's estimate on architectures it was never calibrated on.

The models are in ``benchmarks/holdout_models.py`` (none of them is in shared/truth/zoo.py).  Each
model runs over a small grid: inference at batch 1 and 8, training with SGD and with Adam at
batch 8 (fp32), and bf16 inference at batch 8 for the convolutional models.

    python benchmarks/holdout.py --measure             # measure with shared/truth/measure.py (method a)
                                                       # into benchmarks/holdout_truth.json, then compare
    python benchmarks/holdout.py                       # compare with the stored holdout_truth.json
    python benchmarks/holdout.py --json out.json --model gpt_mha --worst 5

Measuring needs torch and the truth harness (../shared/truth, or --truth-dir / MEMDESIGNER_TRUTH_DIR);
``--measure`` keeps records already in the file unless ``--remeasure`` is given.  Comparing needs
torch only for the import (the modules are built on the meta device).
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

from _tables import (  # noqa: E402
    OPTIMIZERS,
    add_truth_args,
    default_truth_dir,
    findings_lines,
    measured_phases,
    mib,
    phase_cells,
    selected_models,
)

TRUTH_JSON = HERE / "holdout_truth.json"
MiB = 1024.0 * 1024.0

# (config key, mode, optimizer, dtype, batch, cnn_only)
GRID = [
    ("inference-fp32-b1", "inference", None, "fp32", 1, False),
    ("inference-fp32-b8", "inference", None, "fp32", 8, False),
    ("train-sgd-fp32-b8", "train", "sgd", "fp32", 8, False),
    ("train-adam-fp32-b8", "train", "adam", "fp32", 8, False),
    ("inference-bf16-b8", "inference", None, "bf16", 8, True),
]


def configs_for(name: str):
    import holdout_models as hm

    return [g for g in GRID if not g[5] or name in hm.CNN_MODELS]


def load_truth(path: Path = TRUTH_JSON) -> dict:
    if not path.exists():
        return {}
    return json.loads(path.read_text())


# --------------------------------------------------------------------------
# measuring
# --------------------------------------------------------------------------
def measure_one(factory, name: str, cfg, truth_dir: Path) -> dict:
    if str(truth_dir) not in sys.path:
        sys.path.insert(0, str(truth_dir))
    from measure import measure  # noqa: E402 - the harness lives outside the package

    key, mode, opt, dtype, batch, _ = cfg
    rec = measure(factory, batch=batch, mode=mode, optimizer=opt or "sgd", dtype=dtype, methods="a", name=name)
    a = rec["method_a"]
    top = dict(list(a.get("peak_contents", {}).items())[:12])
    return {
        "model": name, "config": key, "mode": mode, "optimizer": opt, "dtype": dtype, "batch": batch,
        "params": rec["params"], "param_bytes": rec["param_bytes"], "buffer_bytes": rec["buffer_bytes"],
        "input_bytes": rec["input_bytes"], "input_shape": rec["input_shape"],
        "peak_overall": a["peak_overall"], "first": a["first"], "steady": a["steady"],
        "end_forward_breakdown": a.get("end_forward_breakdown"), "peak_contents_top": top,
        "seconds": round(rec["seconds"], 2), "torch": rec["torch"], "threads": rec["threads"],
    }


def measure_all(models, truth_dir: Path, out: Path, remeasure: bool = False) -> dict:
    import holdout_models as hm

    data = load_truth(out)
    for name in models:
        for cfg in configs_for(name):
            k = f"{name}/{cfg[0]}"
            if k in data and not remeasure:
                continue
            t0 = time.perf_counter()
            try:
                data[k] = measure_one(hm.MODELS[name], name, cfg, truth_dir)
            except Exception as err:  # noqa: BLE001 - record the failure and go on
                data[k] = {"model": name, "config": cfg[0], "error": f"{type(err).__name__}: {err}"}
            print(f"measured {k}: {data[k].get('peak_overall', data[k].get('error'))} "
                  f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
            out.write_text(json.dumps(dict(sorted(data.items())), indent=1) + "\n")
    return data


# --------------------------------------------------------------------------
# estimating
# --------------------------------------------------------------------------
def import_model(name: str, factory=None):
    """(design, None) or (None, error message)."""
    import holdout_models as hm
    import torch

    from memdesigner.importers.torch_fx import from_module

    factory = factory or hm.MODELS.get(name) or hm.IMPORT_PROBES[name]
    with torch.device("meta"):
        module, shape = factory()
    try:
        return from_module(module, shape, name=name), None
    except Exception as err:  # noqa: BLE001 - a benchmark reports and goes on
        return None, f"{type(err).__name__}: {err}"


def generic_nodes(design) -> list[str]:
    return [f"{n.id} ({n.props.get('op')})" for n in design.nodes.values() if n.type == "Generic"]


def estimate_row(design, rec: dict) -> dict:
    import memdesigner

    mode = rec["mode"]
    opt = OPTIMIZERS.get(rec.get("optimizer"), rec.get("optimizer")) if mode == "train" else "none"
    rep = memdesigner.estimate(design, mode=mode, batch=int(rec["batch"]), optimizer=opt,
                               dtype=rec["dtype"], backend="cpu")
    meas, est = rec["peak_overall"], rep.peak_bytes
    pm = measured_phases(rec.get("steady", {}), mode)
    return {
        "model": rec["model"], "config": rec["config"], "mode": mode, "optimizer": rec.get("optimizer") or "-",
        "dtype": rec["dtype"], "batch": rec["batch"], "measured_bytes": meas, "estimated_bytes": est,
        "rel_error": (est - meas) / meas if meas else 0.0,
        "phase_measured": pm, "phase_estimated": {k: rep.phase_peaks.get(k) for k in pm},
        "params_measured": rec.get("params"), "params_estimated": rep.params,
        "peak_phase": rep.peak_phase, "peak_layer": rep.peak_layer,
    }


def run(models=None, truth: dict | None = None) -> tuple[list[dict], dict]:
    """Rows for every measured record, and {"import_failures", "generic", "import_warnings",
    "measure_failures", "missing"} for the report."""
    import holdout_models as hm

    truth = load_truth() if truth is None else truth
    models = list(models or hm.MODELS)
    info = {"import_failures": {}, "generic": {}, "import_warnings": {}, "measure_failures": {}, "missing": []}
    rows = []
    for name in models + [p for p in hm.IMPORT_PROBES if p not in models and models == list(hm.MODELS)]:
        design, err = import_model(name)
        if design is None:
            info["import_failures"][name] = err
            continue
        gen = generic_nodes(design)
        if gen:
            info["generic"][name] = gen
        if design.import_warnings:
            info["import_warnings"][name] = list(design.import_warnings)
        if name not in hm.MODELS:
            continue
        for cfg in configs_for(name):
            k = f"{name}/{cfg[0]}"
            rec = truth.get(k)
            if rec is None:
                info["missing"].append(k)
            elif "error" in rec:
                info["measure_failures"][k] = rec["error"]
            else:
                rows.append(estimate_row(design, rec))
    return rows, info


# --------------------------------------------------------------------------
# reporting
# --------------------------------------------------------------------------
def markdown_table(rows: list[dict]) -> str:
    lines = ["| model | config | measured MiB | estimated MiB | rel err % | fwd est/meas | bwd est/meas | step est/meas |",
             "|---|---|---:|---:|---:|---|---|---|"]
    for r in rows:
        ph = phase_cells(r)
        lines.append(f"| {r['model']} | {r['config']} | {mib(r['measured_bytes'])} | {mib(r['estimated_bytes'])} | "
                     f"{100 * r['rel_error']:+.2f} | " + " | ".join(ph) + " |")
    return "\n".join(lines)


def summary(rows: list[dict]) -> dict:
    errs = [abs(r["rel_error"]) for r in rows]
    if not errs:
        return {"n": 0}
    worst = max(rows, key=lambda r: abs(r["rel_error"]))
    return {
        "n": len(errs),
        "median_abs_rel_error": statistics.median(errs),
        "worst_abs_rel_error": max(errs),
        "worst": f"{worst['model']}/{worst['config']}",
        "within_1pct": sum(1 for e in errs if e <= 0.01),
        "within_3pct": sum(1 for e in errs if e <= 0.03),
        "exact": sum(1 for r in rows if r["estimated_bytes"] == r["measured_bytes"]),
    }


def format_summary(s: dict, info: dict) -> str:
    if not s.get("n"):
        return "no measured configurations (run with --measure)"
    lines = [f"configurations: {s['n']}  median |err| {100 * s['median_abs_rel_error']:.2f} %  "
             f"worst |err| {100 * s['worst_abs_rel_error']:.2f} % ({s['worst']})  "
             f"within 1 %: {s['within_1pct']}  within 3 %: {s['within_3pct']}  exact: {s['exact']}"]
    lines += findings_lines(info)
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_truth_args(ap, TRUTH_JSON)
    ap.add_argument("--worst", type=int, default=0, help="also list the N worst rows")
    ap.add_argument("--json", default=None, help="write rows, summary and import findings as JSON to this file")
    args = ap.parse_args(argv)

    import holdout_models as hm

    models = selected_models(args, hm.MODELS)
    if models is None:
        return 2
    tj = Path(args.truth_json)
    if args.measure:
        truth_dir = Path(args.truth_dir) if args.truth_dir else default_truth_dir()
        if not (truth_dir / "measure.py").exists():
            print(f"error: {truth_dir}/measure.py not found (use --truth-dir)", file=sys.stderr)
            return 2
        measure_all(models, truth_dir, tj, args.remeasure)
    truth = load_truth(tj)
    if not truth:
        print(f"error: {tj} is empty or missing (run with --measure)", file=sys.stderr)
        return 2
    rows, info = run(models if args.model else None, truth)
    print(markdown_table(rows))
    s = summary(rows)
    print()
    print(format_summary(s, info))
    if args.worst:
        print()
        print(f"worst {args.worst}:")
        print(markdown_table(sorted(rows, key=lambda r: -abs(r["rel_error"]))[: args.worst]))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": s, "import": info}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
