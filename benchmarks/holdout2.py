"""Second holdout round: benchmarks/holdout2_models.py measured into benchmarks/holdout2_truth.json.

Reuses benchmarks/holdout.py (measure_one, estimate_row, generic_nodes, markdown_table, summary,
format_summary); only the model module, truth file and grid (fp32 only) differ.

    python benchmarks/holdout2.py --measure      # measure missing records, then compare
    python benchmarks/holdout2.py                # compare with the stored holdout2_truth.json
    python benchmarks/holdout2.py --model mini_bert --worst 5
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

import holdout  # noqa: E402
import holdout2_models as hm  # noqa: E402
from _tables import add_truth_args, selected_models  # noqa: E402

TRUTH_JSON = HERE / "holdout2_truth.json"
GRID = [g for g in holdout.GRID if not g[5]]  # fp32 only


def configs_for(name: str):
    return list(GRID)


def measure_all(models, truth_dir: Path, out: Path, remeasure: bool = False) -> dict:
    data = holdout.load_truth(out)
    for name in models:
        for cfg in configs_for(name):
            k = f"{name}/{cfg[0]}"
            if k in data and not remeasure:
                continue
            t0 = time.perf_counter()
            try:
                data[k] = holdout.measure_one(hm.MODELS[name], name, cfg, truth_dir)
            except Exception as err:  # noqa: BLE001
                data[k] = {"model": name, "config": cfg[0], "error": f"{type(err).__name__}: {err}"}
            print(f"measured {k}: {data[k].get('peak_overall', data[k].get('error'))} "
                  f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
            out.write_text(json.dumps(dict(sorted(data.items())), indent=1) + "\n")
    return data


def import_model(name: str):
    import torch

    from memdesigner.importers.torch_fx import from_module

    with torch.device("meta"):
        module, shape = hm.MODELS[name]()
    try:
        return from_module(module, shape, name=name), None
    except Exception as err:  # noqa: BLE001
        return None, f"{type(err).__name__}: {err}"


def run(models=None, truth: dict | None = None):
    truth = holdout.load_truth(TRUTH_JSON) if truth is None else truth
    models = list(models or hm.MODELS)
    info = {"import_failures": {}, "generic": {}, "import_warnings": {}, "measure_failures": {}, "missing": []}
    rows = []
    for name in models:
        design, err = import_model(name)
        if design is None:
            info["import_failures"][name] = err
            continue
        gen = holdout.generic_nodes(design)
        if gen:
            info["generic"][name] = gen
        if design.import_warnings:
            info["import_warnings"][name] = list(design.import_warnings)
        for cfg in configs_for(name):
            k = f"{name}/{cfg[0]}"
            rec = truth.get(k)
            if rec is None:
                info["missing"].append(k)
            elif "error" in rec:
                info["measure_failures"][k] = rec["error"]
            else:
                rows.append(holdout.estimate_row(design, rec))
    return rows, info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_truth_args(ap, TRUTH_JSON)
    ap.add_argument("--worst", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    models = selected_models(args, hm.MODELS)
    if models is None:
        return 2
    tj = Path(args.truth_json)
    if args.measure:
        truth_dir = Path(args.truth_dir) if args.truth_dir else holdout.default_truth_dir()
        measure_all(models, truth_dir, tj, args.remeasure)
    truth = holdout.load_truth(tj)
    if not truth:
        print(f"error: {tj} is empty or missing (run with --measure)", file=sys.stderr)
        return 2
    rows, info = run(models, truth)
    print(holdout.markdown_table(rows))
    s = holdout.summary(rows)
    print()
    print(holdout.format_summary(s, info))
    for name, w in info["import_warnings"].items():
        print(f"import warnings: {name}: {w}")
    if args.worst:
        print()
        print(holdout.markdown_table(sorted(rows, key=lambda r: -abs(r["rel_error"]))[: args.worst]))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "summary": s, "import": info}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
