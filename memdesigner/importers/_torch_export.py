"""torch.export fallback for modules torch.fx cannot trace symbolically (Python control flow on
tensor shapes, ...). The exported program is unlifted back into a GraphModule whose parameters are
get_attr nodes and whose ops are aten calls; torch_fx maps those it knows (aten.linear,
activations, views, ...) and turns the rest into Generic nodes with a warning."""

from __future__ import annotations

from memdesigner.importers._torch_coin_flips import coin_flips_run_everything


def export_graph_module(torch, module, fx_err, example):
    dev = next((t.device for t in list(module.parameters()) + list(module.buffers())), torch.device("cpu"))
    if example.device != dev:  # a real module: a small real batch (2 samples) to export with
        example = (torch.zeros(example.shape, dtype=example.dtype, device=dev) if not example.is_floating_point()
                   else torch.randn(example.shape, dtype=example.dtype, device=dev))
    # device-less factories in forward (torch.zeros(ids.shape)) on the module's device; LayerDrop runs every layer
    with torch.device(dev), coin_flips_run_everything(torch):
        try:  # a symbolic batch lets the graph run again at another batch size (characterising ops)
            batch = torch.export.Dim("batch", min=2)
            ep = torch.export.export(module, (example,), dynamic_shapes=({0: batch},), strict=False)
        except Exception:  # noqa: BLE001 - the model specialises on its batch size
            ep = torch.export.export(module, (example,), strict=False)
    gm = ep.module()
    for n in gm.graph.nodes:
        n.meta.pop("tensor_meta", None)
    return gm
