"""ONNX round trip: export each model with ``torch.onnx.export``, import the file with
``memdesigner import onnx`` and compare with importing the nn.Module itself (torch_fx.from_module).

    python benchmarks/onnx_roundtrip.py                    # zoo + holdout + holdout2, inference b8
    python benchmarks/onnx_roundtrip.py --model vit_tiny --batch 1

Columns: parameters (torch import / ONNX import), the inference peak of both designs and the
ONNX one's error, then the peak of the torch design with what ONNX cannot carry removed
("graph only": no in-place ops, no Python variables keeping tensors alive) and the ONNX error
against that. The last column says which of the two the difference comes from.

Export settings: the TorchScript exporter (``dynamo=False``), eval mode, a dynamic batch dim and
``do_constant_folding=False`` so that BatchNorm stays a BatchNormalization node (with constant
folding the exporter folds eval-mode BN into the conv: the design then has the conv's bias and no
BN, and its parameter count and activations differ from the module's). Models over 100M
parameters are exported with ``export_params=False`` (weights as graph inputs, a file of a few
KB); the importer takes such inputs as parameters.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

from _tables import default_truth_dir  # noqa: E402

BIG = 100_000_000


def models(truth_dir: Path | None = None) -> dict:
    """name -> factory over the zoo and both holdout sets."""
    sys.path.insert(0, str(truth_dir or default_truth_dir()))
    import holdout2_models
    import holdout_models
    import zoo

    return {**zoo.MODELS, **holdout_models.MODELS, **holdout2_models.MODELS}


def export(module, shape, path: str | None = None) -> bytes | None:
    """torch.onnx.export as the round trip uses it; returns the bytes when no path is given."""
    import torch

    module.eval()
    tokens = getattr(module, "truth_input", None)
    x = (torch.zeros((2,) + tuple(shape), dtype=torch.int64) if tokens
         else torch.zeros((2,) + tuple(shape)))
    n = sum(p.numel() for p in module.parameters())
    f = path or io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (x,), f, dynamo=False, do_constant_folding=False, input_names=["x"],
                          dynamic_axes={"x": {0: "batch"}}, export_params=n <= BIG)
    return None if path else f.getvalue()


def graph_only(design):
    """The design without what an ONNX file cannot say: in-place ops and Python variables."""
    import copy

    from memdesigner.model.blocks import expand
    from memdesigner.model.design import is_held

    d = copy.deepcopy(expand(design))  # folded repeats: their layers too
    for nid, node in d.nodes.items():
        node.keep_until = ""
        if node.props.get("inplace"):
            d.set_prop(nid, "inplace", False)
    for nid in [nid for nid, n in d.nodes.items() if is_held(n)]:  # a tuple element only a name held
        d.remove_node(nid)
    return d


def why(design) -> str:
    from memdesigner.model.blocks import expand

    design = expand(design)
    inplace = any(n.props.get("inplace") for n in design.nodes.values())
    local = any(n.keep_until for n in design.nodes.values())
    return ", ".join(w for w, on in (("in-place ops", inplace), ("Python variables", local)) if on)


def roundtrip(name, factory, batch: int = 8, tmp: Path | None = None) -> dict:
    import memdesigner
    from memdesigner.importers.onnx_import import from_model, load_onnx
    from memdesigner.importers.torch_fx import from_module

    module, shape = factory()
    d_torch = from_module(module, shape)
    if tmp is not None:
        path = tmp / f"{name}.onnx"
        export(module, shape, str(path))
        d_onnx = load_onnx(path)
    else:
        import onnx

        d_onnx = from_model(onnx.load_from_string(export(module, shape)), name=name)
    est = {k: memdesigner.estimate(d, mode="inference", batch=batch).peak_bytes
           for k, d in (("torch", d_torch), ("onnx", d_onnx), ("graph", graph_only(d_torch)))}
    return {"model": name, "params_torch": d_torch.import_params, "params_onnx": d_onnx.import_params,
            "peak_torch": est["torch"], "peak_onnx": est["onnx"], "peak_graph": est["graph"],
            "err": (est["onnx"] - est["torch"]) / est["torch"], "err_graph": (est["onnx"] - est["graph"]) / est["graph"],
            "why": why(d_torch) if est["onnx"] != est["torch"] else "",
            "generic": sum(1 for n in d_onnx.nodes.values() if n.type == "Generic"),
            "generic_torch": sum(1 for n in d_torch.nodes.values() if n.type == "Generic")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", help="only these models (repeatable)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--truth-dir", type=Path, default=None)
    args = ap.parse_args(argv)
    all_models = models(args.truth_dir)
    names = args.model or list(all_models)
    print(f"inference, fp32, batch {args.batch}; peaks in bytes\n")
    print("| model | params torch | params onnx | peak torch import | peak onnx import | error | "
          "peak graph only | error vs graph only | Generic (onnx/torch) | difference from |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            try:
                r = roundtrip(name, all_models[name], args.batch, Path(tmp))
            except Exception as err:  # noqa: BLE001 - an export the exporter refuses: say so, go on
                print(f"| {name} | export or import failed: {type(err).__name__}: {str(err).splitlines()[0]} |")
                continue
            rows.append(r)
            print(f"| {name} | {r['params_torch']:,} | {r['params_onnx']:,} | {r['peak_torch']:,} | "
                  f"{r['peak_onnx']:,} | {100 * r['err']:+.2f} % | {r['peak_graph']:,} | "
                  f"{100 * r['err_graph']:+.2f} % | {r['generic']}/{r['generic_torch']} | {r['why']} |", flush=True)
    same_params = sum(r["params_torch"] == r["params_onnx"] for r in rows)
    exact = sum(r["peak_onnx"] == r["peak_torch"] for r in rows)
    exact_g = sum(r["peak_onnx"] == r["peak_graph"] for r in rows)
    print(f"\n{len(rows)} models: parameters equal on {same_params}, inference peak equal on {exact}, "
          f"equal to the graph-only torch design on {exact_g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
