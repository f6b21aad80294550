"""The layer-type table of docs/memory-model.md, generated from the registrations (each row is
what one registration declares: family, what autograd keeps, the PyTorch / ONNX / Keras names that
import onto it, and whether it exports to PyTorch). tools/make_layer_docs.py writes it."""

from __future__ import annotations

from memdesigner.model import registry

BEGIN, END = "<!-- layer-types:begin -->", "<!-- layer-types:end -->"


def _cell(items) -> str:
    text = ", ".join(f"`{i}`" for i in items)
    return text.replace("|", "\\|") or "—"


def layer_table() -> str:
    rows = ["| type | family | kept for backward | PyTorch | ONNX | Keras / other names | export |",
            "|---|---|---|---|---|---|---|"]
    for lt in sorted(registry.all_types(), key=lambda t: t.name):
        export = "no: " + lt.no_torch_export if lt.no_torch_export else "yes"
        mapped = [_cell(lt.torch_ops), _cell(lt.onnx_ops), _cell(dict.fromkeys(lt.keras_activations + lt.aliases))]
        if lt.no_import and not (lt.torch_ops or lt.onnx_ops or lt.aliases):
            mapped = ["—", "—", lt.no_import]
        rows.append(f"| {lt.name} | {lt.family} | {lt.keeps_for_backward.replace('|', '/')} | "
                    + " | ".join(mapped) + f" | {export} |")
    return "\n".join(rows) + "\n"


__all__ = ["BEGIN", "END", "layer_table"]
