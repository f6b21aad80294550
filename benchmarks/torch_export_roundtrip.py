"""PyTorch export round trip: import each zoo / holdout model with the PyTorch importer, write the
design as PyTorch code (``memdesigner export torch``), run that code, import the module it builds
and compare the two designs: parameters, and the inference and Adam-training estimates.

    python benchmarks/torch_export_roundtrip.py                 # zoo + holdout + holdout2
    python benchmarks/torch_export_roundtrip.py --model tcn

The exported code is a functional network: one flat forward, with no Python variables that keep
tensors alive beyond their last use, no module calls whose frames hold their inputs and no in-place
ops the design does not say. Its design is compared with the original "flat" design: graph only
(benchmarks/onnx_roundtrip.py's graph_only) with the module-call scopes removed as well.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from onnx_roundtrip import graph_only, models  # noqa: E402


def flat(design):
    """graph_only without the module calls whose frames keep their inputs (Node.scope)."""
    d = graph_only(design)
    for node in d.nodes.values():
        node.scope = ""
    return d

SETTINGS = [("inference-b8", dict(mode="inference", batch=8)), ("train-adam-b2", dict(mode="train", optimizer="adam",
                                                                                      batch=2))]


def roundtrip(name, factory) -> dict:
    import memdesigner
    from memdesigner.exporters.torch_code import to_python
    from memdesigner.importers.torch_fx import from_module

    module, shape = factory()
    dtype = "int64" if getattr(module, "truth_input", None) else "float"
    d = from_module(module, shape, input_dtype=dtype)
    ns: dict = {}
    exec(compile(to_python(d), f"<{name}>", "exec"), ns)  # noqa: S102 - memdesigner's own output
    m2, shape2 = ns["make"]()
    back = from_module(m2, shape2, input_dtype=dtype)
    out = {"model": name, "params": d.import_params, "params_back": back.import_params,
           "generic": sum(n.type == "Generic" for n in d.nodes.values()),
           "generic_back": sum(n.type == "Generic" for n in back.nodes.values())}
    g = flat(d)
    back = flat(back)
    for key, s in SETTINGS:
        out[key] = (memdesigner.estimate(d, backend="cpu", **s).peak_bytes,
                    memdesigner.estimate(g, backend="cpu", **s).peak_bytes,
                    memdesigner.estimate(back, backend="cpu", **s).peak_bytes)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", help="only these models (repeatable)")
    ap.add_argument("--truth-dir", type=Path, default=None)
    ap.add_argument("--traceback", action="store_true")
    args = ap.parse_args(argv)
    all_models = models(args.truth_dir)
    names = args.model or list(all_models)
    print("| model | params | params back | " + " | ".join(f"{k} design / flat / back" for k, _ in SETTINGS)
          + " | Generic (design/back) |")
    print("|---|---:|---:|" + "---:|" * len(SETTINGS) + "---:|")
    ok = same_params = same_graph = 0
    failed = []
    for name in names:
        try:
            r = roundtrip(name, all_models[name])
        except Exception as err:  # noqa: BLE001 - report and go on
            failed.append(name)
            print(f"| {name} | failed: {type(err).__name__}: {str(err).splitlines()[0][:120]} |", flush=True)
            if args.traceback:
                traceback.print_exc()
            continue
        ok += 1
        same_params += r["params"] == r["params_back"]
        same_graph += all(r[k][1] == r[k][2] for k, _ in SETTINGS)
        cells = " | ".join(f"{a:,} / {g:,} / {b:,}" + ("" if g == b else f" ({100 * (b - g) / g:+.2f} %)")
                           for a, g, b in (r[k] for k, _ in SETTINGS))
        print(f"| {name} | {r['params']:,} | {r['params_back']:,} | {cells} | {r['generic']}/{r['generic_back']} |",
              flush=True)
    print(f"\n{len(names)} models: {ok} export, run and import back; parameters equal on {same_params}; "
          f"estimates equal to the flat design on {same_graph}" + (f"; failed: {', '.join(failed)}" if failed
                                                                          else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
