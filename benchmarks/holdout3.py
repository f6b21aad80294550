"""Third holdout round: benchmarks/holdout3_models.py (one configuration per case) against the truth
harness (shared/truth/measure.py, method a), stored in benchmarks/holdout3_truth.json.

Measuring needs torchvision and transformers (the benchmark venv); comparing needs them too (the
modules are imported), so both run there:

    PYTHONPATH=. /work/bench-venv/bin/python benchmarks/holdout3.py --measure   # measure what is missing
    PYTHONPATH=. /work/bench-venv/bin/python benchmarks/holdout3.py             # compare
    PYTHONPATH=. /work/bench-venv/bin/python benchmarks/holdout3.py --model t5_labels-adam-b2 --json o.json
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

TRUTH_JSON = HERE / "holdout3_truth.json"


def load_truth(path: Path = TRUTH_JSON) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def measure_one(name: str, case, truth_dir: Path) -> dict:
    if str(truth_dir) not in sys.path:
        sys.path.insert(0, str(truth_dir))
    from measure import measure  # noqa: E402 - the harness lives outside the package

    rec = measure(case.factory, batch=case.batch, mode=case.mode, optimizer=case.optimizer or "sgd",
                  dtype=case.dtype, amp=case.amp, methods="a", name=name)
    a = rec["method_a"]
    ckpt = {"checkpoint_layers": True} if case.checkpoint_layers else {}
    return {**ckpt, "case": name, "mode": case.mode, "optimizer": case.optimizer, "dtype": case.dtype, "amp": case.amp,
            "batch": case.batch, "params": rec["params"], "param_bytes": rec["param_bytes"],
            "input_shape": rec["input_shape"], "peak_overall": a["peak_overall"], "steady": a["steady"],
            "peak_contents_top": dict(list(a.get("peak_contents", {}).items())[:12]),
            "seconds": round(rec["seconds"], 2), "torch": rec["torch"]}


def measure_all(names, truth_dir: Path, out: Path, remeasure: bool = False, hm=None) -> dict:
    """Measure the named cases of ``hm`` (a models module; default holdout3_models) into ``out``."""
    if hm is None:
        import holdout3_models as hm

    data = load_truth(out)
    for name in names:
        if name in data and not remeasure:
            continue
        t0 = time.perf_counter()
        try:
            data[name] = measure_one(name, hm.CASES[name], truth_dir)
        except Exception as err:  # noqa: BLE001 - record the failure and go on
            data[name] = {"case": name, "error": f"{type(err).__name__}: {str(err).splitlines()[0][:300]}"}
        print(f"measured {name}: {data[name].get('peak_overall', data[name].get('error'))} "
              f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
        out.write_text(json.dumps(dict(sorted(data.items())), indent=1) + "\n")
    return data


def import_case(case):
    """(design, module parameter count, None) or (None, None, error)."""
    from memdesigner.importers import torch_fx

    try:
        module, shape = torch_fx.build_module(case.factory)
        n = sum(p.numel() for p in {id(p): p for p in module.parameters()}.values())
        return torch_fx.from_module(module, shape, name=case.factory.__name__), n, None
    except Exception as err:  # noqa: BLE001 - a benchmark reports and goes on
        return None, None, f"{type(err).__name__}: {str(err).splitlines()[0][:200]}"


def estimate_row(name, design, n_params, rec) -> dict:
    import memdesigner

    mode = rec["mode"]
    opt = OPTIMIZERS.get(rec.get("optimizer")) if mode == "train" else "none"
    rep = memdesigner.estimate(design, mode=mode, batch=int(rec["batch"]), optimizer=opt, dtype=rec["dtype"],
                               amp=bool(rec.get("amp")), checkpoint_layers=bool(rec.get("checkpoint_layers")),
                               backend="cpu")
    meas, est = rec["peak_overall"], rep.peak_bytes
    return {"case": name, "params_design": rep.params, "params_module": n_params, "measured_bytes": meas,
            "estimated_bytes": est, "rel_error": (est - meas) / meas if meas else 0.0,
            "peak_phase": rep.peak_phase, "peak_layer": rep.peak_layer}


def run(names, truth, hm=None):
    if hm is None:
        import holdout3_models as hm

    rows, info = [], {"import_failures": {}, "generic": {}, "missing": [], "measure_failures": {}}
    for name in names:
        rec = truth.get(name)
        if rec is None:
            info["missing"].append(name)
            continue
        if "error" in rec:
            info["measure_failures"][name] = rec["error"]
            continue
        design, n, err = import_case(hm.CASES[name])
        if design is None:
            info["import_failures"][name] = err
            continue
        gen = [f"{x.id} ({x.props.get('op')})" for x in design.nodes.values() if x.type == "Generic"]
        if gen:
            info["generic"][name] = gen
        rows.append(estimate_row(name, design, n, rec))
    return rows, info


def table(rows) -> str:
    lines = ["| case | params design / module | estimated MiB | measured MiB | error % | peak phase |",
             "|---|---|---:|---:|---:|---|"]
    for r in rows:
        pm = "" if r["params_design"] == r["params_module"] else " ≠"
        lines.append(f"| {r['case']} | {r['params_design']:,} / {r['params_module']:,}{pm} | "
                     f"{mib(r['estimated_bytes'])} | {mib(r['measured_bytes'])} | {100 * r['rel_error']:+.2f} | "
                     f"{r['peak_phase']} |")
    return "\n".join(lines)


def summary(rows, info) -> str:
    return accuracy_summary(rows, info, "cases", lambda r: r['case'])


def main(argv=None) -> int:
    import holdout3_models as hm

    return measured_models_main(argv, __doc__, TRUTH_JSON, hm.CASES, load_truth, measure_all, run, table, summary)


if __name__ == "__main__":
    sys.exit(main())
